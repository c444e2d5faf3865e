//! `Source`: something to read from, a local file or a remote object, for
//! programs (the `kvik` CLI) that take either where they take "a file".

use std::fmt;

use kvik_policy::{BufMut, FileHandle, PathReport};

use crate::endpoint::is_remote_url;
use crate::error::Result;
use crate::file::{RemoteFile, RemoteOptions};
use crate::report::RemoteReport;

/// A local file (through kvik-policy's `FileHandle`) or a remote object.
#[derive(Debug, Clone)]
pub enum Source {
    Local(FileHandle),
    Remote(RemoteFile),
}

/// A finished read from a [`Source`].
#[derive(Debug, Clone)]
pub struct SourceTransfer {
    /// Bytes read: all asked for.
    pub bytes: usize,
    pub report: SourceReport,
}

/// The path a read took: kvik-policy's report for a local file, ours for a
/// remote object. As JSON, the inner report as it is (a remote report has
/// `"backend": "remote"`; a local one `"kvik": {"backend": …}`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum SourceReport {
    Local(Box<PathReport>),
    Remote(Box<RemoteReport>),
}

impl fmt::Display for SourceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceReport::Local(report) => report.fmt(f),
            SourceReport::Remote(report) => report.fmt(f),
        }
    }
}

impl SourceReport {
    /// Fold a later read of the same source into this one (windowed reads);
    /// a report of the other kind is ignored (a source is one or the other).
    pub fn absorb(&mut self, later: SourceReport) {
        match (self, later) {
            (SourceReport::Local(a), SourceReport::Local(b)) => a.absorb(*b),
            (SourceReport::Remote(a), SourceReport::Remote(b)) => a.absorb(*b),
            _ => {}
        }
    }
}

impl Source {
    /// Open `target` for reading: a URL (`s3://`, `http://`, `https://`)
    /// is a remote object, anything else a local path (opened `"r"`).
    pub fn open(target: &str) -> Result<Source> {
        Source::open_with(target, &RemoteOptions::new())
    }

    /// [`Source::open`], with the options used when `target` is remote.
    pub fn open_with(target: &str, remote: &RemoteOptions) -> Result<Source> {
        if is_remote_url(target) {
            Ok(Source::Remote(remote.open(target)?))
        } else {
            Ok(Source::Local(FileHandle::open(target, "r")?))
        }
    }

    /// Whether `target` names a remote object (what [`Source::open`] does
    /// with it).
    pub fn is_remote(target: &str) -> bool {
        is_remote_url(target)
    }

    /// The size in bytes.
    pub fn nbytes(&self) -> Result<u64> {
        match self {
            Source::Local(file) => Ok(file.nbytes()?),
            Source::Remote(file) => Ok(file.nbytes()),
        }
    }

    /// The path or URL, for people.
    pub fn name(&self) -> String {
        match self {
            Source::Local(file) => file.path().display().to_string(),
            Source::Remote(file) => file.url().to_string(),
        }
    }

    /// Fill `buf` from `offset`: all of it, or an error (a local file that
    /// ends first is `UnexpectedEof`; a remote range past the end is
    /// `PastEnd`).
    pub fn read_with_report<'a>(
        &self,
        buf: impl Into<BufMut<'a>>,
        offset: u64,
    ) -> Result<SourceTransfer> {
        match self {
            Source::Local(file) => {
                let done = file.read_with_report(buf, offset)?.exact()?;
                Ok(SourceTransfer {
                    bytes: done.bytes,
                    report: SourceReport::Local(Box::new(done.report)),
                })
            }
            Source::Remote(file) => {
                let done = file.read_with_report(buf, offset)?;
                Ok(SourceTransfer {
                    bytes: done.bytes,
                    report: SourceReport::Remote(Box::new(done.report)),
                })
            }
        }
    }
}
