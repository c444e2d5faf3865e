//! How much of a file range is in the page cache, cheaply, and whether a
//! read of it should go through the page cache or with O_DIRECT.
//!
//! * [`residency`]: `cachestat(2)` (Linux 6.5+: one system call, no mapping,
//!   and it also counts dirty pages), else `mincore(2)` over a temporary
//!   mapping of the range (any Linux; a vector of one byte per page).
//! * [`decide`]: residency + request size + [`ColdReadPolicy`] →
//!   [`ReadPathDecision`] (page cache or O_DIRECT), with its evidence, for the
//!   path report (`Display` for people, a serde tag for machines).
//!
//! What asking costs (`bench/results/cpu-2core-cold-direct.txt`):
//! `cachestat` walks the cache one folio at a time: about 1 µs for a range
//! with nothing cached, 12 µs for a cached 4 MiB in large folios, 35 µs for
//! 4 MiB in 4 KiB folios (a file cached by small random reads), up to 20–28
//! ms for a cached 1 GiB in 4 KiB folios. `mincore` costs 2–3 times that.
//! So ask only where the answer can pay: after a cheap sign of a miss (the
//! POSIX backend's `RWF_NOWAIT` read of a task's start coming back
//! `EAGAIN`), over that task's range — a hot read never pays.
//!
//! Why it matters: a read through the page cache of a file that is not there
//! copies every byte twice (disk → cache → caller) and depends on readahead
//! to keep the disk busy; O_DIRECT moves the bytes straight into the
//! caller's memory, but re-reads from the disk what the cache already holds
//! and must first write back dirty pages of the range. So: O_DIRECT only for
//! large requests over ranges that are (almost) entirely out of the cache
//! and hold no dirty pages; the page cache otherwise.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use crate::size::Size;
use crate::task::page_size;

/// How residency was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResidencyMethod {
    Cachestat,
    Mincore,
}

impl fmt::Display for ResidencyMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ResidencyMethod::Cachestat => "cachestat",
            ResidencyMethod::Mincore => "mincore",
        })
    }
}

/// The page-cache state of a file range (clipped to the file's end).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Residency {
    pub offset: u64,
    pub len: u64,
    /// Pages the range touches.
    pub pages: u64,
    /// Of which in the page cache.
    pub cached_pages: u64,
    /// Of which dirty (not yet written back): known with `cachestat` only.
    pub dirty_pages: Option<u64>,
    pub method: ResidencyMethod,
}

impl Residency {
    /// The share of the range's pages in the cache, 0–1 (1 for an empty range).
    pub fn cached_share(&self) -> f64 {
        if self.pages == 0 {
            1.0
        } else {
            self.cached_pages as f64 / self.pages as f64
        }
    }
}

impl fmt::Display for Residency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} pages cached ({:.1}%",
            self.cached_pages,
            self.pages,
            self.cached_share() * 100.0
        )?;
        if let Some(dirty) = self.dirty_pages {
            write!(f, ", {dirty} dirty")?;
        }
        write!(f, "; {})", self.method)
    }
}

/// `cachestat`'s system call number (the generic table: x86_64 and aarch64).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
#[derive(Default)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// The pages `offset..offset + len` touches: (first page index, count).
fn page_span(offset: u64, len: u64, page: u64) -> (u64, u64) {
    if len == 0 {
        return (offset / page, 0);
    }
    let first = offset / page;
    let end = (offset + len).div_ceil(page);
    (first, end - first)
}

/// How much of `offset..offset + len` of `file` is in the page cache
/// (`cachestat`, else `mincore`). The range is clipped to the file's size.
pub fn residency(file: &File, offset: u64, len: u64) -> io::Result<Residency> {
    residency_by(file, offset, len, ResidencyMethod::Cachestat)
}

/// [`residency`], starting with `method` (`Cachestat` falls back to
/// `Mincore` where the kernel lacks it; `Mincore` is used as asked).
pub fn residency_by(
    file: &File,
    offset: u64,
    len: u64,
    method: ResidencyMethod,
) -> io::Result<Residency> {
    let size = file.metadata()?.len();
    let len = len.min(size.saturating_sub(offset));
    let page = page_size();
    let (_, pages) = page_span(offset, len, page);
    let mut r = Residency {
        offset,
        len,
        pages,
        cached_pages: 0,
        dirty_pages: None,
        method: ResidencyMethod::Cachestat,
    };
    if pages == 0 {
        return Ok(r);
    }
    let stat = match method {
        ResidencyMethod::Cachestat => cachestat(file, offset, len),
        ResidencyMethod::Mincore => Err(io::Error::from_raw_os_error(libc::ENOSYS)),
    };
    match stat {
        Ok(stat) => {
            r.cached_pages = stat.nr_cache.min(pages);
            r.dirty_pages = Some(stat.nr_dirty);
            Ok(r)
        }
        Err(e) if cachestat_missing(&e) => {
            r.method = ResidencyMethod::Mincore;
            r.cached_pages = mincore(file, offset, len)?;
            Ok(r)
        }
        Err(e) => Err(e),
    }
}

/// `ENOSYS` (kernel before 6.5, or a seccomp filter that hides it) or
/// `EPERM` (some sandboxes answer that for unknown calls).
fn cachestat_missing(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM))
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn cachestat(file: &File, offset: u64, len: u64) -> io::Result<Cachestat> {
    let range = CachestatRange { off: offset, len };
    let mut stat = Cachestat::default();
    // SAFETY: cachestat reads one range and writes one stat structure, both
    // ours and laid out as the kernel's (five/two u64s); the descriptor is
    // borrowed for the call.
    let ret = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd() as libc::c_uint,
            &range as *const CachestatRange,
            &mut stat as *mut Cachestat,
            0 as libc::c_uint,
        )
    };
    if ret == 0 {
        Ok(stat)
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn cachestat(_file: &File, _offset: u64, _len: u64) -> io::Result<Cachestat> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

/// Pages of `offset..offset + len` (not empty, inside the file) in the page
/// cache, through `mincore` over a temporary read-only mapping.
fn mincore(file: &File, offset: u64, len: u64) -> io::Result<u64> {
    let page = page_size();
    let start = offset / page * page;
    let map_len = usize::try_from(offset + len - start)
        .map_err(|_| io::Error::from_raw_os_error(libc::EOVERFLOW))?;
    // SAFETY: a shared read-only mapping of a file we hold open; it is only
    // passed to mincore and unmapped below, never read.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            start as libc::off_t,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut resident = vec![0u8; map_len.div_ceil(page as usize)];
    // SAFETY: addr..addr + map_len is our mapping; one byte per page.
    let ok = unsafe { libc::mincore(addr, map_len, resident.as_mut_ptr()) } == 0;
    let error = io::Error::last_os_error();
    // SAFETY: unmapping exactly what we mapped.
    unsafe { libc::munmap(addr, map_len) };
    if !ok {
        return Err(error);
    }
    Ok(resident.iter().filter(|&&b| b & 1 == 1).count() as u64)
}

/// When a read goes with O_DIRECT: every condition must hold.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ColdReadPolicy {
    /// Smaller requests go through the page cache (O_DIRECT pays a disk
    /// round trip per request and gains nothing from readahead).
    pub min_direct_bytes: u64,
    /// At most this share of the range may be cached (O_DIRECT would read it
    /// from the disk again).
    pub max_cached_share: f64,
}

impl ColdReadPolicy {
    /// From cold 1 GiB reads (`bench/results/cpu-2core-cold-direct.txt`,
    /// and the GPU machine's figures in the root README): parallel O_DIRECT
    /// beat the page cache on a cold file at every task size measured
    /// (256 KiB–16 MiB) on both machines. With part of the file cached, the
    /// page cache wins once the cached share passes the break-even
    /// `c / hot + (1 − c) / cold_buffered = 1 / direct`: about 0.35 on the
    /// GPU machine (hot 45, cold buffered 1.9, O_DIRECT 2.85 GB/s), above
    /// 0.75 here. 0.25 keeps a margin on the side that cannot be slow (a
    /// mostly cached file read from disk again loses 15×). Below 1 MiB the
    /// page cache stays: small reads are latency-bound either way, and
    /// cached pages serve the next read of the same bytes.
    pub const DEFAULT: ColdReadPolicy = ColdReadPolicy {
        min_direct_bytes: 1 << 20,
        max_cached_share: 0.25,
    };
}

impl Default for ColdReadPolicy {
    fn default() -> Self {
        ColdReadPolicy::DEFAULT
    }
}

/// Through the page cache, or around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadPath {
    PageCache,
    Direct,
}

impl fmt::Display for ReadPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReadPath::PageCache => "page cache",
            ReadPath::Direct => "O_DIRECT",
        })
    }
}

/// Why [`decide`] chose what it chose.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum ReadPathReason {
    /// The request is below [`ColdReadPolicy::min_direct_bytes`].
    SmallRequest { bytes: u64, min_direct_bytes: u64 },
    /// More of the range is cached than [`ColdReadPolicy::max_cached_share`].
    Cached { share: f64, max_cached_share: f64 },
    /// The range holds dirty pages (O_DIRECT would write them back first).
    DirtyPages { pages: u64 },
    /// The residency could not be measured: the page cache, as always.
    ResidencyUnknown { error: String },
    /// Large, and (almost) nothing of it cached: O_DIRECT.
    Cold { share: f64, max_cached_share: f64 },
}

impl fmt::Display for ReadPathReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadPathReason::SmallRequest {
                bytes,
                min_direct_bytes,
            } => write!(
                f,
                "{} is below the O_DIRECT minimum of {}",
                Size(*bytes),
                Size(*min_direct_bytes)
            ),
            ReadPathReason::Cached {
                share,
                max_cached_share,
            } => write!(
                f,
                "{:.1}% of the range is cached (O_DIRECT at most {:.1}%)",
                share * 100.0,
                max_cached_share * 100.0
            ),
            ReadPathReason::DirtyPages { pages } => write!(
                f,
                "{pages} dirty pages in the range (O_DIRECT would write them back first)"
            ),
            ReadPathReason::ResidencyUnknown { error } => {
                write!(f, "page-cache residency unknown ({error})")
            }
            ReadPathReason::Cold {
                share,
                max_cached_share,
            } => write!(
                f,
                "{:.1}% of the range is cached (at most {:.1}% for O_DIRECT): a cold read",
                share * 100.0,
                max_cached_share * 100.0
            ),
        }
    }
}

/// The choice for one request, with its evidence.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ReadPathDecision {
    pub path: ReadPath,
    pub reason: ReadPathReason,
    pub residency: Option<Residency>,
}

impl fmt::Display for ReadPathDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)?;
        if let Some(r) = &self.residency {
            write!(f, " [{r}]")?;
        }
        Ok(())
    }
}

/// Page cache or O_DIRECT for a read of `bytes` over a range whose
/// residency was measured (or not). Pure: the caller measures
/// ([`residency`]) only when the request is large enough to matter.
pub fn decide(
    bytes: u64,
    residency: Option<io::Result<Residency>>,
    policy: &ColdReadPolicy,
) -> ReadPathDecision {
    let page_cache = |reason, residency| ReadPathDecision {
        path: ReadPath::PageCache,
        reason,
        residency,
    };
    if bytes < policy.min_direct_bytes {
        return page_cache(
            ReadPathReason::SmallRequest {
                bytes,
                min_direct_bytes: policy.min_direct_bytes,
            },
            residency.and_then(Result::ok),
        );
    }
    let r = match residency {
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            return page_cache(
                ReadPathReason::ResidencyUnknown {
                    error: e.to_string(),
                },
                None,
            );
        }
        None => {
            return page_cache(
                ReadPathReason::ResidencyUnknown {
                    error: "not measured".into(),
                },
                None,
            );
        }
    };
    let share = r.cached_share();
    if let Some(pages) = r.dirty_pages.filter(|&d| d > 0) {
        return page_cache(ReadPathReason::DirtyPages { pages }, Some(r));
    }
    if share > policy.max_cached_share {
        return page_cache(
            ReadPathReason::Cached {
                share,
                max_cached_share: policy.max_cached_share,
            },
            Some(r),
        );
    }
    ReadPathDecision {
        path: ReadPath::Direct,
        reason: ReadPathReason::Cold {
            share,
            max_cached_share: policy.max_cached_share,
        },
        residency: Some(r),
    }
}

/// [`residency`] where it matters: measured only for requests of at least
/// `policy.min_direct_bytes`, then [`decide`].
pub fn decide_for(
    file: &File,
    offset: u64,
    bytes: u64,
    policy: &ColdReadPolicy,
) -> ReadPathDecision {
    let residency = (bytes >= policy.min_direct_bytes).then(|| residency(file, offset, bytes));
    decide(bytes, residency, policy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn measured(pages: u64, cached: u64, dirty: Option<u64>) -> Option<io::Result<Residency>> {
        Some(Ok(Residency {
            offset: 0,
            len: pages * 4096,
            pages,
            cached_pages: cached,
            dirty_pages: dirty,
            method: ResidencyMethod::Cachestat,
        }))
    }

    #[test]
    fn the_decision_follows_size_residency_and_dirt() {
        let p = ColdReadPolicy::DEFAULT;
        let gib = 1 << 30;
        let cold = decide(gib, measured(262_144, 0, Some(0)), &p);
        assert_eq!(cold.path, ReadPath::Direct);
        assert!(matches!(cold.reason, ReadPathReason::Cold { .. }));
        let hot = decide(gib, measured(262_144, 262_144, Some(0)), &p);
        assert_eq!(hot.path, ReadPath::PageCache);
        assert!(matches!(hot.reason, ReadPathReason::Cached { share, .. } if share == 1.0));
        // Half cached: the cache (O_DIRECT would re-read half from disk).
        assert_eq!(
            decide(gib, measured(262_144, 131_072, Some(0)), &p).path,
            ReadPath::PageCache
        );
        // A fifth cached is still cold; 30% is not.
        assert_eq!(
            decide(gib, measured(262_144, 52_428, None), &p).path,
            ReadPath::Direct
        );
        assert_eq!(
            decide(gib, measured(262_144, 78_643, None), &p).path,
            ReadPath::PageCache
        );
        let dirty = decide(gib, measured(262_144, 10, Some(3)), &p);
        assert_eq!(
            (dirty.path, dirty.reason.clone()),
            (ReadPath::PageCache, ReadPathReason::DirtyPages { pages: 3 })
        );
        let small = decide(64 << 10, measured(16, 0, Some(0)), &p);
        assert_eq!(small.path, ReadPath::PageCache);
        assert!(matches!(small.reason, ReadPathReason::SmallRequest { .. }));
        let unknown = decide(
            gib,
            Some(Err(io::Error::from_raw_os_error(libc::EBADF))),
            &p,
        );
        assert_eq!(unknown.path, ReadPath::PageCache);
        assert!(
            unknown
                .to_string()
                .starts_with("page cache: page-cache residency unknown")
        );
        let json = serde_json::to_value(&cold).unwrap();
        assert_eq!(json["path"], "direct");
        assert_eq!(json["reason"]["reason"], "cold");
        assert_eq!(json["residency"]["method"], "cachestat");
        assert_eq!(
            cold.to_string(),
            "O_DIRECT: 0.0% of the range is cached (at most 25.0% for O_DIRECT): a cold read \
             [0 of 262144 pages cached (0.0%, 0 dirty; cachestat)]"
        );
    }

    #[test]
    fn pages_of_a_range() {
        assert_eq!(page_span(0, 4096, 4096), (0, 1));
        assert_eq!(page_span(4095, 2, 4096), (0, 2));
        assert_eq!(page_span(8192, 1, 4096), (2, 1));
        assert_eq!(page_span(10, 0, 4096), (0, 0));
    }

    /// Both methods see a page we just wrote (cached, dirty) and agree; a
    /// range dropped with `POSIX_FADV_DONTNEED` after a sync is not cached.
    #[test]
    fn residency_sees_the_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("resident");
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&vec![7u8; 64 << 10]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let hot = residency(&file, 0, 64 << 10).unwrap();
        assert_eq!(hot.pages, (64 << 10) / page_size());
        assert_eq!(hot.cached_pages, hot.pages, "{hot}");
        let via_mincore = residency_by(&file, 0, 64 << 10, ResidencyMethod::Mincore).unwrap();
        assert_eq!(via_mincore.method, ResidencyMethod::Mincore);
        assert_eq!(via_mincore.cached_pages, hot.cached_pages);
        if hot.method == ResidencyMethod::Cachestat {
            assert!(
                hot.dirty_pages.unwrap() > 0,
                "just written, not synced: {hot}"
            );
        }
        // Clipped to the file: a range past the end has no pages.
        assert_eq!(residency(&file, 1 << 20, 4096).unwrap().pages, 0);
        assert_eq!(residency(&file, 60 << 10, 1 << 20).unwrap().len, 4 << 10);

        file.sync_all().unwrap();
        // SAFETY: advice on our own descriptor.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let cold = residency(&file, 0, 64 << 10).unwrap();
        // tmpfs keeps its pages whatever we advise: only check where the
        // filesystem can drop them.
        if cold.cached_pages < cold.pages {
            assert_eq!(cold.cached_pages, 0, "{cold}");
            assert_eq!(mincore(&file, 0, 64 << 10).unwrap(), 0);
            let decision = decide_for(
                &file,
                0,
                64 << 10,
                &ColdReadPolicy {
                    min_direct_bytes: 4096,
                    max_cached_share: 0.25,
                },
            );
            assert_eq!(decision.path, ReadPath::Direct, "{decision}");
        } else {
            let _ = writeln!(
                std::io::stderr(),
                "skipped: residency_sees_the_page_cache: the filesystem of {} kept the pages \
                 after POSIX_FADV_DONTNEED (tmpfs?); the cold half was not checked",
                path.display()
            );
        }
    }
}
