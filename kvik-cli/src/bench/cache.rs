//! Emptying the page cache for cold-cache runs, and saying how it was done.
//!
//! Always: `fdatasync` then `posix_fadvise(POSIX_FADV_DONTNEED)` on the file
//! (drops the file's clean pages; needs no privilege). Where permitted
//! (root), also `sync` and `echo 1 > /proc/sys/vm/drop_caches` (the whole
//! page cache, so metadata and neighbouring files are cold too). Every cold
//! repetition checks with `mincore` how much of the file is still cached.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::path::Path;

const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";

/// How cold-cache runs empty the cache.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum DropMethod {
    /// The file's pages, and the system cache where permitted.
    Auto,
    /// Only the file's pages (fdatasync + posix_fadvise DONTNEED).
    File,
    /// The file's pages and the system cache (/proc/sys/vm/drop_caches); an
    /// error where not permitted.
    System,
}

/// What cold-cache runs actually do here.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ColdCache {
    pub system_cache: bool,
    /// In words, for reports.
    pub method: String,
}

impl ColdCache {
    /// Resolve `method` on this machine: `Auto` uses the system cache when
    /// `/proc/sys/vm/drop_caches` can be opened for writing.
    pub fn resolve(method: DropMethod) -> Result<ColdCache, String> {
        let permitted = OpenOptions::new().write(true).open(DROP_CACHES).is_ok();
        let system_cache = match method {
            DropMethod::File => false,
            DropMethod::Auto => permitted,
            DropMethod::System if permitted => true,
            DropMethod::System => {
                return Err(format!(
                    "--drop system: {DROP_CACHES} cannot be written here (needs root)"
                ));
            }
        };
        let mut text = "fdatasync + posix_fadvise(DONTNEED) on the file".to_string();
        if system_cache {
            text.push_str(" + sync + echo 1 > /proc/sys/vm/drop_caches");
        } else if method == DropMethod::Auto {
            text.push_str(" (/proc/sys/vm/drop_caches not writable: the system cache stays)");
        }
        Ok(ColdCache {
            system_cache,
            method: text,
        })
    }

    /// Empty the cache of `path` as resolved.
    pub fn drop(&self, path: &Path) -> Result<(), String> {
        drop_file_pages(path)?;
        if self.system_cache {
            drop_system_cache()?;
        }
        Ok(())
    }
}

/// `fdatasync` + `posix_fadvise(DONTNEED)` over the whole file.
pub fn drop_file_pages(path: &Path) -> Result<(), String> {
    let file = std::fs::File::open(path)
        .map_err(|e| format!("cannot open {} to drop its pages: {e}", path.display()))?;
    file.sync_data()
        .map_err(|e| format!("fdatasync {}: {e}", path.display()))?;
    // SAFETY: advice on a descriptor we own; no memory is passed.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(format!(
            "posix_fadvise(DONTNEED) {}: {}",
            path.display(),
            std::io::Error::from_raw_os_error(rc)
        ));
    }
    Ok(())
}

fn drop_system_cache() -> Result<(), String> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    OpenOptions::new()
        .write(true)
        .open(DROP_CACHES)
        .and_then(|mut f| f.write_all(b"1\n"))
        .map_err(|e| format!("echo 1 > {DROP_CACHES}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_a_files_pages_empties_its_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 4 << 20]).unwrap();
        let before = crate::page_cache::residency(&path, 0, 4 << 20).unwrap();
        assert_eq!(before, 1.0);
        drop_file_pages(&path).unwrap();
        let after = crate::page_cache::residency(&path, 0, 4 << 20).unwrap();
        // Some filesystems (tmpfs) cannot drop pages: they have no backing
        // store. Then the residency stays, and that is what we must report.
        let fs = gds_core::platform::filesystem(dir.path()).unwrap();
        if fs.name == "tmpfs" {
            assert_eq!(after, 1.0);
        } else {
            assert!(
                after < 0.05,
                "{after} of the file still cached on {}",
                fs.name
            );
        }
    }

    #[test]
    fn file_only_never_touches_the_system_cache() {
        let cold = ColdCache::resolve(DropMethod::File).unwrap();
        assert!(!cold.system_cache);
        assert!(cold.method.starts_with("fdatasync + posix_fadvise"));
        assert!(!cold.method.contains("echo 1"));
    }

    #[test]
    fn a_missing_file_is_named() {
        let e = drop_file_pages(Path::new("/nonexistent/kvik-bench")).unwrap_err();
        assert!(e.contains("/nonexistent/kvik-bench"), "{e}");
    }
}
