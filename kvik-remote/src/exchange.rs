//! What each HTTP exchange answered, seen from inside object_store.
//!
//! object_store turns an error status into an error whose status code a
//! caller cannot read back (its retry error type is private), and we turn
//! its own retries off so that every attempt is ours to count and report.
//! So every client we build wraps object_store's reqwest client in
//! [`Recording`]: a request that carries an [`ExchangeLog`] in its
//! extensions (object_store passes `GetOptions::extensions` on to the HTTP
//! request) gets the response's status written into it, before object_store
//! sees the response.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use object_store::ClientOptions;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService, ReqwestConnector,
};

/// The status of the response to one request (one attempt).
#[derive(Debug, Clone, Default)]
pub(crate) struct ExchangeLog(Arc<Mutex<Option<u16>>>);

impl ExchangeLog {
    pub(crate) fn status(&self) -> Option<u16> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record(&self, status: u16) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(status);
    }

    /// Extensions for `GetOptions` that make the request report here.
    pub(crate) fn extensions(&self) -> object_store::Extensions {
        let mut extensions = object_store::Extensions::new();
        extensions.insert(self.clone());
        extensions
    }
}

/// object_store's reqwest client, recording statuses.
#[derive(Debug)]
struct Recording {
    inner: HttpClient,
}

impl HttpService for Recording {
    // `HttpService` is an `async_trait`; this is the signature it expands to.
    fn call<'life0, 'async_trait>(
        &'life0 self,
        request: HttpRequest,
    ) -> Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let log = request.extensions().get::<ExchangeLog>().cloned();
        Box::pin(async move {
            let response = self.inner.execute(request).await?;
            if let Some(log) = log {
                log.record(response.status().as_u16());
            }
            Ok(response)
        })
    }
}

/// Builds [`Recording`] clients: give it to object_store's builders.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RecordingConnector;

impl HttpConnector for RecordingConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(Recording { inner }))
    }
}
