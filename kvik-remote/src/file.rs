//! `RemoteFile`: an object opened by URL, read by range into memory.

use std::sync::Arc;
use std::time::Instant;

use kvik_policy::{BufMut, IoBufferMut, MemoryKind, Settings};

use crate::endpoint::{self, Endpoint, S3Options, Target};
use crate::error::{Error, Result};
use crate::read::{Memory, PendingRead, Plan, RemoteTransfer};
use crate::report::EndpointKind;
use crate::settings::RemoteSettings;

/// How to open a remote file: the object's size when known, the retry
/// policy, how many ranged GETs may be in flight, AWS settings. Every
/// `open_*` of [`RemoteFile`] is `RemoteOptions::new().open_*`.
///
/// ```no_run
/// # fn main() -> Result<(), kvik_remote::Error> {
/// use kvik_remote::{RemoteOptions, RemoteSettings};
/// let mut settings = RemoteSettings::global()?;
/// settings.set_http_max_attempts(5)?;
/// let file = RemoteOptions::new()
///     .settings(settings)
///     .max_in_flight(32)
///     .open("s3://bucket/data.bin")?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct RemoteOptions {
    nbytes: Option<u64>,
    settings: Option<RemoteSettings>,
    max_in_flight: Option<usize>,
    task_size: Option<u64>,
    s3: S3Options,
}

impl RemoteOptions {
    pub fn new() -> RemoteOptions {
        RemoteOptions::default()
    }

    /// The object's size, when known: no request is made to learn it.
    pub fn nbytes(&mut self, nbytes: u64) -> &mut Self {
        self.nbytes = Some(nbytes);
        self
    }

    /// The retry policy; else [`RemoteSettings::global`] (the environment).
    pub fn settings(&mut self, settings: RemoteSettings) -> &mut Self {
        self.settings = Some(settings);
        self
    }

    /// The most ranged GETs of one read in flight at once; else
    /// kvik-policy's `num_threads` (`KVIKIO_NTHREADS`), as KvikIO runs one
    /// GET per pool thread.
    pub fn max_in_flight(&mut self, requests: usize) -> &mut Self {
        self.max_in_flight = Some(requests);
        self
    }

    /// The size reads are cut into, one ranged GET each; else kvik-policy's
    /// `task_size` (`KVIKIO_TASK_SIZE`).
    pub fn task_size(&mut self, bytes: u64) -> &mut Self {
        self.task_size = Some(bytes);
        self
    }

    /// AWS settings for S3 objects (KvikIO's `open_s3` keyword arguments).
    pub fn s3(&mut self, options: S3Options) -> &mut Self {
        self.s3 = options;
        self
    }

    /// Open `url`, picking how to reach it from its form, as KvikIO's
    /// `RemoteFile.open`: `s3://` is S3; a URL with `X-Amz-Algorithm` and
    /// `X-Amz-Signature` is a presigned URL; an AWS S3 host is S3 (unsigned
    /// without credentials); any other `http(s)://` URL is plain HTTP.
    pub fn open(&self, url: &str) -> Result<RemoteFile> {
        self.open_target(endpoint::classify(url, self.have_credentials())?)
    }

    /// Open an object over plain HTTP(S) GETs with `Range`.
    pub fn open_http(&self, url: &str) -> Result<RemoteFile> {
        match endpoint::classify(url, true)? {
            target @ (Target::Http(_) | Target::Presigned(_)) => self.open_target(target),
            Target::S3 { .. } => {
                // An AWS host read as plain HTTP: the URL as it is.
                let parsed = url::Url::parse(url).map_err(|e| Error::InvalidUrl {
                    url: endpoint::redact(url),
                    problem: e.to_string(),
                })?;
                self.open_target(Target::Http(parsed))
            }
        }
    }

    /// Open `key` in `bucket` on S3 (the endpoint from [`S3Options`] or
    /// `AWS_ENDPOINT_URL`, else AWS).
    pub fn open_s3(&self, bucket: &str, key: &str) -> Result<RemoteFile> {
        self.open_target(Target::S3 {
            bucket: bucket.to_string(),
            key: key.to_string(),
            endpoint: None,
            region: None,
            public: false,
        })
    }

    /// Open an S3 object by URL: `s3://bucket/key`, an AWS S3 URL, or a
    /// path-style `http(s)://host:port/bucket/key` of any S3 server (that
    /// host is then the endpoint). Requests are signed.
    pub fn open_s3_url(&self, url: &str) -> Result<RemoteFile> {
        self.open_target(endpoint::classify_s3_url(url, false)?)
    }

    /// As [`RemoteOptions::open_s3_url`], unsigned: a public object.
    pub fn open_s3_public(&self, url: &str) -> Result<RemoteFile> {
        self.open_target(endpoint::classify_s3_url(url, true)?)
    }

    /// Open an S3 presigned URL: plain GETs, the signature in the URL.
    pub fn open_s3_presigned_url(&self, url: &str) -> Result<RemoteFile> {
        match endpoint::classify(url, true)? {
            target @ Target::Presigned(_) => self.open_target(target),
            _ => Err(Error::InvalidUrl {
                url: endpoint::redact(url),
                problem: "not a presigned URL: its query has no X-Amz-Algorithm and \
                          X-Amz-Signature"
                    .into(),
            }),
        }
    }

    fn have_credentials(&self) -> bool {
        self.s3.access_key_id.is_some() || std::env::var_os("AWS_ACCESS_KEY_ID").is_some()
    }

    fn open_target(&self, target: Target) -> Result<RemoteFile> {
        for (setting, zero) in [
            ("max_in_flight", self.max_in_flight == Some(0)),
            ("task_size", self.task_size == Some(0)),
        ] {
            if zero {
                return Err(kvik_policy::Error::InvalidSetting {
                    setting,
                    value: "0".into(),
                    rule: "must be at least 1",
                }
                .into());
            }
        }
        let settings = match &self.settings {
            Some(settings) => settings.clone(),
            None => RemoteSettings::global()?,
        };
        let s3 = self.s3.clone();
        let known_size = self.nbytes;
        let timeout = settings.http_timeout();
        let (endpoint, nbytes) = {
            let settings = settings.clone();
            crate::runtime::run(async move {
                let aws = endpoint::aws_environment();
                let endpoint = endpoint::build(target, &s3, &aws, timeout)?;
                let nbytes = match known_size {
                    Some(n) => n,
                    None => crate::fetch::object_size(&endpoint, &settings).await?,
                };
                Ok::<_, Error>((endpoint, nbytes))
            })??
        };
        Ok(RemoteFile {
            inner: Arc::new(FileInner {
                endpoint,
                nbytes,
                settings,
                max_in_flight: self.max_in_flight,
                task_size: self.task_size,
            }),
        })
    }
}

/// An object opened by URL (KvikIO's `RemoteFile` / `RemoteHandle`). Reads
/// go in parallel ranged GETs straight into the caller's memory; each read
/// can come with a [`crate::RemoteReport`]. Cheap to clone; safe to share
/// between threads.
///
/// ```no_run
/// # fn main() -> Result<(), kvik_remote::Error> {
/// use kvik_remote::RemoteFile;
/// let file = RemoteFile::open("s3://bucket/weights.bin")?;
/// let mut buf = vec![0u8; file.nbytes() as usize];
/// let done = file.read_with_report(&mut buf, 0)?;
/// println!("{}", done.report); // every ranged GET, its status and retries
/// let (buf, _) = file.pread(buf, 0).wait()?; // in the background; the buffer comes back
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RemoteFile {
    inner: Arc<FileInner>,
}

#[derive(Debug)]
pub(crate) struct FileInner {
    pub endpoint: Endpoint,
    pub nbytes: u64,
    pub settings: RemoteSettings,
    pub max_in_flight: Option<usize>,
    pub task_size: Option<u64>,
}

impl RemoteFile {
    /// [`RemoteOptions::open`] with the defaults.
    pub fn open(url: &str) -> Result<RemoteFile> {
        RemoteOptions::new().open(url)
    }
    /// [`RemoteOptions::open_http`] with the defaults.
    pub fn open_http(url: &str) -> Result<RemoteFile> {
        RemoteOptions::new().open_http(url)
    }
    /// [`RemoteOptions::open_s3`] with the defaults.
    pub fn open_s3(bucket: &str, key: &str) -> Result<RemoteFile> {
        RemoteOptions::new().open_s3(bucket, key)
    }
    /// [`RemoteOptions::open_s3_url`] with the defaults.
    pub fn open_s3_url(url: &str) -> Result<RemoteFile> {
        RemoteOptions::new().open_s3_url(url)
    }
    /// [`RemoteOptions::open_s3_public`] with the defaults.
    pub fn open_s3_public(url: &str) -> Result<RemoteFile> {
        RemoteOptions::new().open_s3_public(url)
    }
    /// [`RemoteOptions::open_s3_presigned_url`] with the defaults.
    pub fn open_s3_presigned_url(url: &str) -> Result<RemoteFile> {
        RemoteOptions::new().open_s3_presigned_url(url)
    }

    /// The object's size, learnt at open (no request).
    pub fn nbytes(&self) -> u64 {
        self.inner.nbytes
    }

    /// The object's URL, without a query string (a presigned URL's
    /// signature is a credential).
    pub fn url(&self) -> &str {
        &self.inner.endpoint.url
    }

    /// How the object is reached.
    pub fn endpoint_kind(&self) -> EndpointKind {
        self.inner.endpoint.kind
    }

    /// The retry policy of this file's requests.
    pub fn settings(&self) -> &RemoteSettings {
        &self.inner.settings
    }

    /// Read `buf.len()` bytes at `offset`; returns that count. The range
    /// must lie inside the object ([`Error::PastEnd`] otherwise): a read
    /// either fills the buffer or fails, never reports part of it.
    pub fn read<'a>(&self, buf: impl Into<BufMut<'a>>, offset: u64) -> Result<usize> {
        self.read_with_report(buf, offset).map(|t| t.bytes)
    }

    /// [`RemoteFile::read`], with the path the read took.
    pub fn read_with_report<'a>(
        &self,
        buf: impl Into<BufMut<'a>>,
        offset: u64,
    ) -> Result<RemoteTransfer> {
        let target = self.target(buf.into())?;
        let plan = self.plan(offset, target.len() as u64, target.memory())?;
        if plan.len == 0 {
            return Ok(self.empty(plan));
        }
        crate::read::read_blocking(self.inner.clone(), plan, target)
    }

    /// Read into `buf` in the background (its whole length, at `offset`);
    /// the buffer comes back with the result.
    pub fn pread<B: IoBufferMut>(&self, mut buf: B, offset: u64) -> PendingRead<B> {
        let (len, memory) = match self.target(buf.as_buf_mut()) {
            Ok(target) => (target.len() as u64, target.memory()),
            Err(error) => return PendingRead::failed(error),
        };
        let plan = match self.plan(offset, len, memory) {
            Ok(plan) => plan,
            Err(error) => return PendingRead::failed(error),
        };
        if plan.len == 0 {
            return PendingRead::ready(Ok((self.empty(plan), buf)));
        }
        let file = self.clone();
        PendingRead::start(self.inner.clone(), plan, buf, move |b| {
            file.target(b.as_buf_mut())
                .expect("the same buffer was accepted above")
        })
    }

    /// The memory a read fills: host memory as it is; device memory after
    /// the work queued on its stream, staged through pinned buffers.
    fn target<'a>(&self, buf: BufMut<'a>) -> Result<Memory<'a>> {
        match buf {
            BufMut::Host(host) => Ok(Memory::Host(host)),
            BufMut::Device(d) => {
                // A GPU must answer (this probes for one), and the memory's
                // queued work must be done.
                kvik_policy::gpu::context(d.range().ordinal)?;
                d.wait_for_stream()?;
                let settings = Settings::global()?;
                let staging = settings.bounce_buffer_size().min(settings.task_size()) as usize;
                Ok(Memory::Device {
                    range: d.range(),
                    staging,
                    _memory: std::marker::PhantomData,
                })
            }
            _ => Err(Error::DeviceMemoryUnsupported {
                url: self.url().to_string(),
            }),
        }
    }

    fn plan(&self, offset: u64, len: u64, memory: MemoryKind) -> Result<Plan> {
        let nbytes = self.inner.nbytes;
        if offset.checked_add(len).is_none_or(|end| end > nbytes) {
            return Err(Error::PastEnd {
                url: self.url().to_string(),
                offset,
                len,
                nbytes,
            });
        }
        let settings = Settings::global()?;
        Ok(Plan {
            offset,
            len,
            task_size: self.inner.task_size.unwrap_or(settings.task_size()),
            max_in_flight: self.inner.max_in_flight.unwrap_or(settings.num_threads()),
            memory,
        })
    }

    fn empty(&self, plan: Plan) -> RemoteTransfer {
        RemoteTransfer {
            bytes: 0,
            report: crate::read::report(&self.inner, plan, Vec::new(), Instant::now()),
        }
    }
}
