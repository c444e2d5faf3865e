//! From a URL to an object_store store and the object's path in it.
//!
//! * `s3://bucket/key` — S3, signed with the AWS credentials.
//! * `http(s)://…?X-Amz-Algorithm=…&X-Amz-Signature=…` — an S3 presigned
//!   URL: plain GETs (the signature is in the URL; S3 refuses a HEAD signed
//!   for GET, so the size comes from a one-byte GET).
//! * `https://bucket.s3.region.amazonaws.com/key` and the other AWS S3
//!   host forms — S3: signed when `AWS_ACCESS_KEY_ID` is set (or given),
//!   unsigned otherwise (public objects).
//! * any other `http(s)://` URL — plain HTTP GETs with `Range`.
//!
//! KvikIO's `RemoteFile.open` picks in the same order (S3, S3 public, S3
//! presigned, HTTP; WebHDFS is not supported here).
//!
//! AWS settings come from the `AWS_*` environment, read as object_store's
//! `AmazonS3Builder::from_env` reads it (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_DEFAULT_REGION`,
//! `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, …); [`S3Options`] (KvikIO's keyword
//! arguments) override them. An endpoint given as `http://…` is allowed
//! plain HTTP: naming it is the choice.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::http::HttpBuilder;
use object_store::path::Path;
use object_store::{ClientOptions, ObjectStore, RetryConfig};
use url::Url;

use crate::error::{Error, Result};
use crate::exchange::RecordingConnector;
use crate::report::EndpointKind;

/// AWS settings for S3 objects: KvikIO's keyword arguments of `open_s3`.
/// Each one left `None` comes from the environment (`AWS_*`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Options {
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    /// The S3 server (`http://127.0.0.1:9000`); else `AWS_ENDPOINT_URL`,
    /// else AWS.
    pub endpoint_url: Option<String>,
    pub session_token: Option<String>,
}

/// A store and the object in it.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub kind: EndpointKind,
    pub store: Arc<dyn ObjectStore>,
    pub path: Path,
    /// The URL for reports and errors: no query string, no user info.
    pub url: String,
}

/// What a URL names, before any store is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Http(Url),
    Presigned(Url),
    S3 {
        bucket: String,
        key: String,
        /// `http(s)://host:port` of a path-style URL that is not AWS.
        endpoint: Option<String>,
        /// Read from the AWS host name (`s3.eu-west-1.amazonaws.com`).
        region: Option<String>,
        /// Unsigned requests.
        public: bool,
    },
}

/// Is `text` a URL this crate reads (rather than a local path)?
pub fn is_remote_url(text: &str) -> bool {
    let lower = text.trim_start().to_ascii_lowercase();
    ["s3://", "http://", "https://"]
        .iter()
        .any(|scheme| lower.starts_with(scheme))
}

fn parse(url: &str) -> Result<Url> {
    let parsed = Url::parse(url).map_err(|e| Error::InvalidUrl {
        url: redact(url),
        problem: e.to_string(),
    })?;
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(Error::InvalidUrl {
            url: redact(url),
            problem: "no host".into(),
        });
    }
    Ok(parsed)
}

fn invalid(url: &Url, problem: impl Into<String>) -> Error {
    Error::InvalidUrl {
        url: display_url(url),
        problem: problem.into(),
    }
}

/// Pick the endpoint as KvikIO's `RemoteFile.open` does. `have_credentials`
/// says whether an AWS access key is configured (S3 URLs on AWS hosts are
/// read unsigned without one).
pub(crate) fn classify(url: &str, have_credentials: bool) -> Result<Target> {
    let parsed = parse(url)?;
    match parsed.scheme() {
        "s3" => s3_target(&parsed),
        "http" | "https" if is_presigned(&parsed) => Ok(Target::Presigned(parsed)),
        "http" | "https" => match aws_s3_target(&parsed)? {
            Some(Target::S3 {
                bucket,
                key,
                endpoint,
                region,
                ..
            }) => Ok(Target::S3 {
                bucket,
                key,
                endpoint,
                region,
                public: !have_credentials,
            }),
            _ => Ok(Target::Http(parsed)),
        },
        other => Err(invalid(
            &parsed,
            format!("unsupported scheme {other:?}: use s3://, http:// or https://"),
        )),
    }
}

/// `open_s3_url`: `s3://bucket/key`, an AWS S3 URL, or a path-style
/// `http(s)://host:port/bucket/key` of any S3 server.
pub(crate) fn classify_s3_url(url: &str, public: bool) -> Result<Target> {
    let parsed = parse(url)?;
    let target = match parsed.scheme() {
        "s3" => s3_target(&parsed)?,
        "http" | "https" => match aws_s3_target(&parsed)? {
            Some(target) => target,
            None => {
                let (bucket, key) = bucket_and_key(&parsed, parsed.path())?;
                let origin = parsed.origin().ascii_serialization();
                Target::S3 {
                    bucket,
                    key,
                    endpoint: Some(origin),
                    region: None,
                    public,
                }
            }
        },
        other => {
            return Err(invalid(
                &parsed,
                format!("not an S3 URL (scheme {other:?}): use s3://bucket/key or http(s)://"),
            ));
        }
    };
    Ok(match target {
        Target::S3 {
            bucket,
            key,
            endpoint,
            region,
            ..
        } => Target::S3 {
            bucket,
            key,
            endpoint,
            region,
            public,
        },
        other => other,
    })
}

fn s3_target(url: &Url) -> Result<Target> {
    Ok(Target::S3 {
        bucket: url.host_str().unwrap_or_default().to_string(),
        key: key_of(url)?,
        endpoint: None,
        region: None,
        public: false,
    })
}

/// S3 signs the URL's query: `X-Amz-Algorithm` and `X-Amz-Signature` (as
/// KvikIO recognises presigned URLs).
fn is_presigned(url: &Url) -> bool {
    let names: Vec<String> = url.query_pairs().map(|(k, _)| k.into_owned()).collect();
    ["X-Amz-Algorithm", "X-Amz-Signature"]
        .iter()
        .all(|n| names.iter().any(|k| k == n))
}

/// The AWS S3 host forms KvikIO recognises: virtual-hosted
/// (`bucket.s3.region.amazonaws.com/key`, `bucket.s3.amazonaws.com/key`,
/// `bucket.s3-region.amazonaws.com/key`) and path-style
/// (`s3.region.amazonaws.com/bucket/key`, `s3.amazonaws.com/bucket/key`,
/// `s3-region.amazonaws.com/bucket/key`). `None` for any other host.
fn aws_s3_target(url: &Url) -> Result<Option<Target>> {
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    let Some(service) = host.strip_suffix(".amazonaws.com") else {
        return Ok(None);
    };
    // `s3`, `s3.region` or `s3-region`: the region, if any.
    let region_of = |s: &str| -> Option<Option<String>> {
        if s == "s3" {
            Some(None)
        } else if let Some(r) = s.strip_prefix("s3.").or_else(|| s.strip_prefix("s3-")) {
            (!r.is_empty() && !r.contains('.')).then(|| Some(r.to_string()))
        } else {
            None
        }
    };
    if let Some(region) = region_of(service) {
        let (bucket, key) = bucket_and_key(url, url.path())?;
        return Ok(Some(Target::S3 {
            bucket,
            key,
            endpoint: None,
            region,
            public: false,
        }));
    }
    // Virtual-hosted: the bucket, then `.s3`, `.s3.region` or `.s3-region`.
    for (at, _) in service.match_indices(".s3") {
        if let Some(region) = region_of(&service[at + 1..]) {
            return Ok(Some(Target::S3 {
                bucket: service[..at].to_string(),
                key: key_of(url)?,
                endpoint: None,
                region,
                public: false,
            }));
        }
    }
    Ok(None)
}

/// The whole path as the key (the bucket is in the host).
fn key_of(url: &Url) -> Result<String> {
    let key = decode(url, url.path().trim_start_matches('/'))?;
    if key.is_empty() {
        return Err(invalid(url, "no object key after the bucket"));
    }
    Ok(key)
}

/// A path-style `/bucket/key…`.
fn bucket_and_key(url: &Url, path: &str) -> Result<(String, String)> {
    let path = path.trim_start_matches('/');
    match path.split_once('/') {
        Some((bucket, key)) if !bucket.is_empty() && !key.is_empty() => {
            Ok((decode(url, bucket)?, decode(url, key)?))
        }
        _ => Err(invalid(url, "expected /bucket/key in the path")),
    }
}

fn decode(url: &Url, text: &str) -> Result<String> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| invalid(url, "the path is not valid UTF-8 once decoded"))
}

/// A URL as reports and errors show it: without the user info, the query
/// (`?…` marks that there was one: a presigned URL's signature is a
/// credential) and the fragment.
pub(crate) fn display_url(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    let had_query = shown.query().is_some();
    shown.set_query(None);
    shown.set_fragment(None);
    let mut text = shown.to_string();
    if had_query {
        text.push_str("?…");
    }
    text
}

/// A URL as reports and errors show it, for text that may not parse:
/// without user info, query string (a presigned URL's signature is a
/// credential) or fragment; `?…` marks that there was a query.
pub fn redact(url: &str) -> String {
    match Url::parse(url) {
        Ok(parsed) => display_url(&parsed),
        Err(_) => url.split(['?', '#']).next().unwrap_or_default().to_string(),
    }
}

/// object_store's retries off: every attempt is ours (see `fetch`).
fn no_retries() -> RetryConfig {
    RetryConfig {
        max_retries: 0,
        retry_timeout: Duration::ZERO,
        ..RetryConfig::default()
    }
}

/// The whole-attempt time limit is ours (`fetch`), so the client has none;
/// connecting may take at most the same.
fn client_options(timeout: Duration, allow_http: bool) -> ClientOptions {
    ClientOptions::new()
        .with_timeout_disabled()
        .with_connect_timeout(timeout)
        .with_allow_http(allow_http)
}

/// object_store refused to build a store for `url`.
fn configure(url: &str) -> impl FnOnce(object_store::Error) -> Error + '_ {
    move |source| Error::Configure {
        url: url.to_string(),
        source: Box::new(source),
    }
}

/// Build the store for `target`. `aws_vars` is the environment's `AWS_*`
/// variables (name, value).
pub(crate) fn build(
    target: Target,
    s3: &S3Options,
    aws_vars: &[(String, String)],
    timeout: Duration,
) -> Result<Endpoint> {
    match target {
        Target::Http(url) | Target::Presigned(url) => {
            let kind = if is_presigned(&url) {
                EndpointKind::S3Presigned
            } else {
                EndpointKind::Http
            };
            let shown = display_url(&url);
            let store = HttpBuilder::new()
                .with_url(url.as_str())
                .with_client_options(client_options(timeout, url.scheme() == "http"))
                .with_retry(no_retries())
                .with_http_connector(RecordingConnector)
                .build()
                .map_err(configure(&shown))?;
            Ok(Endpoint {
                kind,
                store: Arc::new(store),
                // The store's URL is the object's: no path below it.
                path: Path::default(),
                url: shown,
            })
        }
        Target::S3 {
            bucket,
            key,
            endpoint,
            region,
            public,
        } => {
            let shown = format!("s3://{bucket}/{key}");
            let mut builder = AmazonS3Builder::new()
                .with_client_options(client_options(timeout, false))
                .with_retry(no_retries())
                .with_http_connector(RecordingConnector);
            for (name, value) in aws_vars {
                if let Ok(key) = name.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                    builder = builder.with_config(key, value);
                }
            }
            let overrides = [
                (
                    AmazonS3ConfigKey::Region,
                    region.as_ref().or(s3.region.as_ref()),
                ),
                (AmazonS3ConfigKey::AccessKeyId, s3.access_key_id.as_ref()),
                (
                    AmazonS3ConfigKey::SecretAccessKey,
                    s3.secret_access_key.as_ref(),
                ),
                (
                    AmazonS3ConfigKey::Endpoint,
                    s3.endpoint_url.as_ref().or(endpoint.as_ref()),
                ),
                (AmazonS3ConfigKey::Token, s3.session_token.as_ref()),
            ];
            for (key, value) in overrides {
                if let Some(value) = value {
                    builder = builder.with_config(key, value);
                }
            }
            let endpoint_in_effect = builder.get_config_value(&AmazonS3ConfigKey::Endpoint);
            if endpoint_in_effect.is_some_and(|e| e.to_ascii_lowercase().starts_with("http://")) {
                builder = builder.with_allow_http(true);
            }
            let store = builder
                .with_bucket_name(&bucket)
                .with_skip_signature(public)
                .build()
                .map_err(configure(&shown))?;
            Ok(Endpoint {
                kind: if public {
                    EndpointKind::S3Public
                } else {
                    EndpointKind::S3
                },
                store: Arc::new(store),
                path: Path::from(key.as_str()),
                url: shown,
            })
        }
    }
}

/// The `AWS_*` variables of the process environment.
pub(crate) fn aws_environment() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| k.starts_with("AWS_"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3(bucket: &str, key: &str, region: Option<&str>, public: bool) -> Target {
        Target::S3 {
            bucket: bucket.into(),
            key: key.into(),
            endpoint: None,
            region: region.map(Into::into),
            public,
        }
    }

    #[test]
    fn urls_pick_kvikios_endpoint_types() {
        assert_eq!(
            classify("s3://bucket/dir/key.bin", true).unwrap(),
            s3("bucket", "dir/key.bin", None, false)
        );
        assert!(matches!(
            classify("https://example.com/data/file.bin", true).unwrap(),
            Target::Http(_)
        ));
        assert!(matches!(
            classify(
                "https://b.s3.us-east-1.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=ab",
                true
            )
            .unwrap(),
            Target::Presigned(_)
        ));
        // Only one of the two signature parameters: not presigned.
        assert!(matches!(
            classify("http://127.0.0.1:9/x?X-Amz-Algorithm=A", true).unwrap(),
            Target::Http(_)
        ));
        for (url, bucket, key, region) in [
            (
                "https://bkt.s3.eu-west-1.amazonaws.com/a/b",
                "bkt",
                "a/b",
                Some("eu-west-1"),
            ),
            ("https://bkt.s3.amazonaws.com/a", "bkt", "a", None),
            (
                "https://bkt.s3-us-west-2.amazonaws.com/a",
                "bkt",
                "a",
                Some("us-west-2"),
            ),
            (
                "https://s3.ap-south-1.amazonaws.com/bkt/a/b%20c",
                "bkt",
                "a/b c",
                Some("ap-south-1"),
            ),
            ("http://s3.amazonaws.com/bkt/a", "bkt", "a", None),
            (
                "https://s3-us-west-2.amazonaws.com/bkt/a",
                "bkt",
                "a",
                Some("us-west-2"),
            ),
        ] {
            assert_eq!(
                classify(url, true).unwrap(),
                s3(bucket, key, region, false),
                "{url}"
            );
            assert_eq!(
                classify(url, false).unwrap(),
                s3(bucket, key, region, true),
                "{url} without credentials is read unsigned"
            );
        }
        // Other amazonaws.com services are plain HTTP.
        assert!(matches!(
            classify("https://ec2.us-east-1.amazonaws.com/x", true).unwrap(),
            Target::Http(_)
        ));
    }

    #[test]
    fn bad_urls_are_clear_errors() {
        for (url, says) in [
            ("ftp://host/file", "unsupported scheme \"ftp\""),
            ("s3://bucket", "no object key"),
            ("s3://bucket/", "no object key"),
            ("not a url", "relative URL without a base"),
            ("http://", "empty host"),
        ] {
            let err = classify(url, true).unwrap_err().to_string();
            assert!(err.contains(says), "{url}: {err}");
        }
        let err = classify_s3_url("http://127.0.0.1:9000/only-bucket", false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected /bucket/key"), "{err}");
    }

    #[test]
    fn s3_urls_on_any_server_are_path_style() {
        assert_eq!(
            classify_s3_url("http://127.0.0.1:9000/bkt/dir/obj", false).unwrap(),
            Target::S3 {
                bucket: "bkt".into(),
                key: "dir/obj".into(),
                endpoint: Some("http://127.0.0.1:9000".into()),
                region: None,
                public: false,
            }
        );
        assert_eq!(
            classify_s3_url("s3://bkt/obj", true).unwrap(),
            s3("bkt", "obj", None, true)
        );
    }

    #[test]
    fn shown_urls_carry_no_credentials() {
        assert_eq!(
            redact("https://user:pw@h.example/k?X-Amz-Signature=secret#frag"),
            "https://h.example/k?…"
        );
        assert_eq!(redact("http://h:81/a/b"), "http://h:81/a/b");
        assert_eq!(redact("junk?secret"), "junk");
    }

    #[test]
    fn remote_urls_are_told_from_paths() {
        for yes in ["s3://b/k", "HTTP://h/x", "https://h/x", " s3://b/k"] {
            assert!(is_remote_url(yes), "{yes}");
        }
        for no in ["/data/x.bin", "x.bin", "file:///x", "s3:/b/k", "C:\\x"] {
            assert!(!is_remote_url(no), "{no}");
        }
    }
}
