//! Loading libcufile at run time.
//!
//! Search order: an explicit path (the `KVIK_CUFILE_LIBRARY` environment
//! variable, or [`CuFileLibrary::load_from`]), else `libcufile.so.0`, else
//! `libcufile.so`. An explicit path is authoritative: when it fails we do not
//! quietly load some other libcufile. A loaded library is kept for the life of
//! the process (statics are never dropped), so function pointers handed out
//! stay valid.

use std::ffi::{CStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::bindings::CuFileApi;

/// Environment variable naming the libcufile to load.
pub const ENV_LIBRARY: &str = "KVIK_CUFILE_LIBRARY";

/// Names tried, in order, when no explicit path is given.
const DEFAULT_CANDIDATES: [&str; 2] = ["libcufile.so.0", "libcufile.so"];

/// Symbols without which the library is useless to us: loading fails when one
/// is missing. `cuFileDriverClose` is checked separately (either it or
/// `cuFileDriverClose_v2` must exist).
pub const REQUIRED_SYMBOLS: &[&str] = &[
    "cuFileDriverOpen",
    "cuFileDriverGetProperties",
    "cuFileHandleRegister",
    "cuFileHandleDeregister",
    "cuFileBufRegister",
    "cuFileBufDeregister",
    "cuFileRead",
    "cuFileWrite",
];

/// Where a candidate library name came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CandidateOrigin {
    /// The `KVIK_CUFILE_LIBRARY` environment variable.
    Environment,
    /// A path passed to [`CuFileLibrary::load_from`].
    Argument,
    /// One of the default sonames.
    Default,
}

impl fmt::Display for CandidateOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CandidateOrigin::Environment => ENV_LIBRARY,
            CandidateOrigin::Argument => "explicit path",
            CandidateOrigin::Default => "default search",
        })
    }
}

/// One failed attempt to open a candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadAttempt {
    pub candidate: String,
    pub origin: CandidateOrigin,
    /// What the dynamic loader said (`dlerror`).
    pub message: String,
}

/// Why libcufile could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// No candidate could be opened.
    #[error("libcufile could not be loaded: {}", format_attempts(.attempts))]
    NotFound { attempts: Vec<LoadAttempt> },
    /// A library opened but lacks a function we cannot do without.
    #[error(
        "{library} is not a usable libcufile: required symbol `{symbol}` is missing ({message})"
    )]
    MissingSymbol {
        library: String,
        symbol: &'static str,
        message: String,
    },
}

fn format_attempts(attempts: &[LoadAttempt]) -> String {
    attempts
        .iter()
        .map(|a| format!("tried {} ({}): {}", a.candidate, a.origin, a.message))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A function the loaded library does not export.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{library} does not export `{symbol}`{}", feature.map(|f| format!(" (needed for {})", f.description())).unwrap_or_default())]
pub struct MissingSymbol {
    pub library: String,
    pub symbol: &'static str,
    /// The optional feature this symbol belongs to, if any.
    pub feature: Option<Feature>,
}

/// `cuFileGetVersion`'s value: `1000 * major + 10 * minor` (1.15 → 1150).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LibraryVersion(pub i32);

impl LibraryVersion {
    pub fn major(self) -> i32 {
        self.0 / 1000
    }
    pub fn minor(self) -> i32 {
        (self.0 % 1000) / 10
    }
    pub fn at_least(self, major: i32, minor: i32) -> bool {
        (self.major(), self.minor()) >= (major, minor)
    }
}

impl fmt::Display for LibraryVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major(), self.minor())
    }
}

/// Groups of optional functions. A missing group disables a feature with a
/// reason; it never fails the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Feature {
    /// `cuFileGetVersion`.
    Version,
    /// Statistics (`cuFileSetStatsLevel`, `cuFileGetStatsL1/L2/L3`, …), libcufile ≥ 1.15.
    Stats,
    /// Typed parameter get/set (`cuFileGetParameterSizeT`, …).
    Parameters,
    /// Batch I/O (`cuFileBatchIO*`).
    BatchIo,
    /// Stream-ordered I/O (`cuFileReadAsync`, `cuFileStreamRegister`, …).
    StreamIo,
    /// Vector I/O (`cuFileReadv`, `cuFileWritev`), libcufile ≥ 1.19.
    VectorIo,
    /// Per-filesystem P2P flags (`cuFileDriverGetP2PFlags`), libcufile ≥ 1.19.
    P2pFlags,
    /// `cuFileGetBARSizeInKB`.
    BarSize,
}

impl Feature {
    pub const ALL: [Feature; 8] = [
        Feature::Version,
        Feature::Stats,
        Feature::Parameters,
        Feature::BatchIo,
        Feature::StreamIo,
        Feature::VectorIo,
        Feature::P2pFlags,
        Feature::BarSize,
    ];

    pub fn symbols(self) -> &'static [&'static str] {
        match self {
            Feature::Version => &["cuFileGetVersion"],
            Feature::Stats => &[
                "cuFileSetStatsLevel",
                "cuFileGetStatsLevel",
                "cuFileStatsStart",
                "cuFileStatsStop",
                "cuFileStatsReset",
                "cuFileGetStatsL1",
                "cuFileGetStatsL2",
                "cuFileGetStatsL3",
            ],
            Feature::Parameters => &[
                "cuFileGetParameterSizeT",
                "cuFileGetParameterBool",
                "cuFileGetParameterString",
                "cuFileGetParameterMinMaxValue",
                "cuFileSetParameterSizeT",
                "cuFileSetParameterBool",
                "cuFileSetParameterString",
            ],
            Feature::BatchIo => &[
                "cuFileBatchIOSetUp",
                "cuFileBatchIOSubmit",
                "cuFileBatchIOGetStatus",
                "cuFileBatchIOCancel",
                "cuFileBatchIODestroy",
            ],
            Feature::StreamIo => &[
                "cuFileReadAsync",
                "cuFileWriteAsync",
                "cuFileStreamRegister",
                "cuFileStreamDeregister",
            ],
            Feature::VectorIo => &["cuFileReadv", "cuFileWritev"],
            Feature::P2pFlags => &["cuFileDriverGetP2PFlags", "cuFileDriverSetP2PFlags"],
            Feature::BarSize => &["cuFileGetBARSizeInKB"],
        }
    }

    /// A short human name, used in messages ("needed for in-process statistics").
    pub fn description(self) -> &'static str {
        match self {
            Feature::Version => "the library version",
            Feature::Stats => "in-process statistics",
            Feature::Parameters => "parameter get/set",
            Feature::BatchIo => "batch I/O",
            Feature::StreamIo => "stream-ordered I/O",
            Feature::VectorIo => "vector I/O",
            Feature::P2pFlags => "P2P flags",
            Feature::BarSize => "BAR size queries",
        }
    }

    /// The feature a function belongs to, if it is optional.
    pub fn of_symbol(symbol: &str) -> Option<Feature> {
        Feature::ALL
            .into_iter()
            .find(|f| f.symbols().contains(&symbol))
    }
}

/// Whether one optional feature is usable in the loaded library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureStatus {
    pub feature: Feature,
    /// The feature's symbols the library lacks (empty: available).
    pub missing: Vec<&'static str>,
}

impl FeatureStatus {
    pub fn available(&self) -> bool {
        self.missing.is_empty()
    }
}

/// A loaded libcufile. Obtain one with [`CuFileLibrary::load`] or
/// [`CuFileLibrary::load_from`]; it lives until the process exits.
pub struct CuFileLibrary {
    api: CuFileApi,
    /// A second handle to the same library, for symbol presence queries by name.
    probe: libloading::Library,
    requested: String,
    origin: CandidateOrigin,
    path: Option<PathBuf>,
    version: Result<LibraryVersion, String>,
}

impl fmt::Debug for CuFileLibrary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CuFileLibrary")
            .field("requested", &self.requested)
            .field("origin", &self.origin)
            .field("path", &self.path)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

static GLOBAL: OnceLock<Result<CuFileLibrary, LoadError>> = OnceLock::new();
static EXPLICIT: Mutex<Vec<(PathBuf, &'static CuFileLibrary)>> = Mutex::new(Vec::new());

impl CuFileLibrary {
    /// The process-wide library: `KVIK_CUFILE_LIBRARY` when set (and only
    /// that), else `libcufile.so.0`, else `libcufile.so`. The first call
    /// decides; later calls return the same result.
    pub fn load() -> Result<&'static CuFileLibrary, LoadError> {
        GLOBAL
            .get_or_init(|| {
                let candidates = match std::env::var_os(ENV_LIBRARY).filter(|v| !v.is_empty()) {
                    Some(path) => vec![(path, CandidateOrigin::Environment)],
                    None => DEFAULT_CANDIDATES
                        .iter()
                        .map(|name| (OsString::from(name), CandidateOrigin::Default))
                        .collect(),
                };
                open_first(&candidates)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Load the library at `path` (and nothing else). Each path is loaded once
    /// per process; failures are not cached, so a fixed path can be retried.
    pub fn load_from(path: impl AsRef<Path>) -> Result<&'static CuFileLibrary, LoadError> {
        let path = path.as_ref();
        // A poisoned lock only means another thread panicked while holding
        // it; the list itself is always consistent.
        let mut loaded = EXPLICIT.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, lib)) = loaded.iter().find(|(p, _)| p == path) {
            return Ok(lib);
        }
        let lib: &'static CuFileLibrary = Box::leak(Box::new(open_first(&[(
            path.as_os_str().to_owned(),
            CandidateOrigin::Argument,
        )])?));
        loaded.push((path.to_path_buf(), lib));
        Ok(lib)
    }

    /// The generated function table. Prefer [`crate::cufile_fn!`], which turns
    /// a missing function into a [`MissingSymbol`] error.
    pub fn api(&self) -> &CuFileApi {
        &self.api
    }

    /// One function from the table, or which symbol is missing.
    pub fn function<F: Copy>(
        &self,
        symbol: &'static str,
        field: &Result<F, libloading::Error>,
    ) -> Result<F, MissingSymbol> {
        match field {
            Ok(f) => Ok(*f),
            Err(_) => Err(MissingSymbol {
                library: self.display_name(),
                symbol,
                feature: Feature::of_symbol(symbol),
            }),
        }
    }

    /// Whether the library exports `symbol` (any name, not only the header's).
    pub fn has_symbol(&self, symbol: &str) -> bool {
        // SAFETY: the symbol is only looked up, never called or dereferenced.
        unsafe { self.probe.get::<*const ()>(symbol) }.is_ok()
    }

    /// The name we asked the dynamic loader for.
    pub fn requested(&self) -> &str {
        &self.requested
    }

    pub fn origin(&self) -> CandidateOrigin {
        self.origin
    }

    /// The file the dynamic loader actually opened (resolved with `dladdr`).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The resolved path when known, else the requested name.
    pub fn display_name(&self) -> String {
        self.path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| self.requested.clone())
    }

    /// `cuFileGetVersion`, read once at load (it does not open the driver).
    pub fn version(&self) -> Result<LibraryVersion, String> {
        self.version.clone()
    }

    pub fn feature(&self, feature: Feature) -> FeatureStatus {
        FeatureStatus {
            feature,
            missing: feature
                .symbols()
                .iter()
                .copied()
                .filter(|s| !self.has_symbol(s))
                .collect(),
        }
    }

    pub fn features(&self) -> Vec<FeatureStatus> {
        Feature::ALL.into_iter().map(|f| self.feature(f)).collect()
    }

    /// The driver-close function C callers get: the header maps
    /// `cuFileDriverClose` to `cuFileDriverClose_v2` where it exists.
    pub fn driver_close_symbol(&self) -> &'static str {
        if self.api.cuFileDriverClose_v2.is_ok() {
            "cuFileDriverClose_v2"
        } else {
            "cuFileDriverClose"
        }
    }
}

fn open_first(candidates: &[(OsString, CandidateOrigin)]) -> Result<CuFileLibrary, LoadError> {
    let mut attempts = Vec::new();
    for (candidate, origin) in candidates {
        match open(candidate, *origin) {
            Ok(lib) => return Ok(lib),
            Err(OpenError::Dl(message)) => attempts.push(LoadAttempt {
                candidate: candidate.to_string_lossy().into_owned(),
                origin: *origin,
                message,
            }),
            // A library that opened but is not libcufile is a definite answer.
            Err(OpenError::Load(e)) => return Err(e),
        }
    }
    Err(LoadError::NotFound { attempts })
}

enum OpenError {
    Dl(String),
    Load(LoadError),
}

fn open(candidate: &OsString, origin: CandidateOrigin) -> Result<CuFileLibrary, OpenError> {
    // dlopen of a FIFO waits for a writer forever, and of a device reads
    // it: a path (not a soname, which the loader searches) must name a
    // regular file.
    if candidate.as_encoded_bytes().contains(&b'/')
        && let Ok(meta) = std::fs::metadata(candidate)
        && !meta.is_file()
    {
        return Err(OpenError::Dl(format!(
            "{} is not a regular file (a FIFO, a device, a socket or a directory): not loaded",
            candidate.to_string_lossy()
        )));
    }
    // SAFETY: loading runs the library's initializers; libcufile's do not
    // open the driver (checked on 1.15 and 1.20 without a CUDA driver).
    let library =
        unsafe { libloading::Library::new(candidate) }.map_err(|e| OpenError::Dl(dl_message(e)))?;
    // SAFETY: as above; the library is already loaded, this only bumps its count.
    let probe =
        unsafe { libloading::Library::new(candidate) }.map_err(|e| OpenError::Dl(dl_message(e)))?;
    // SAFETY: from_library only resolves symbols; with require_all off it
    // records missing ones instead of failing.
    let api =
        unsafe { CuFileApi::from_library(library) }.map_err(|e| OpenError::Dl(dl_message(e)))?;
    let requested = candidate.to_string_lossy().into_owned();

    let mut lib = CuFileLibrary {
        api,
        probe,
        requested,
        origin,
        path: None,
        version: Err(String::new()),
    };
    lib.path = resolved_path(&lib);
    for symbol in REQUIRED_SYMBOLS {
        if !lib.has_symbol(symbol) {
            return Err(OpenError::Load(LoadError::MissingSymbol {
                library: lib.display_name(),
                symbol,
                message: "the dynamic loader cannot resolve it".into(),
            }));
        }
    }
    if !lib.has_symbol("cuFileDriverClose") && !lib.has_symbol("cuFileDriverClose_v2") {
        return Err(OpenError::Load(LoadError::MissingSymbol {
            library: lib.display_name(),
            symbol: "cuFileDriverClose",
            message: "neither cuFileDriverClose nor cuFileDriverClose_v2 is exported".into(),
        }));
    }
    lib.version = read_version(&lib);
    Ok(lib)
}

fn dl_message(e: libloading::Error) -> String {
    // libloading says "dlopen failed" and keeps dlerror's text as the source.
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        message = s.to_string();
        source = s.source();
    }
    message
}

fn read_version(lib: &CuFileLibrary) -> Result<LibraryVersion, String> {
    let get_version = crate::cufile_fn!(lib, cuFileGetVersion).map_err(|e| e.to_string())?;
    let mut version = 0;
    // SAFETY: cuFileGetVersion writes one int; it does not open the driver.
    let status = unsafe { get_version(&mut version) };
    if status.is_success() {
        Ok(LibraryVersion(version))
    } else {
        Err(format!("cuFileGetVersion failed: {status}"))
    }
}

fn resolved_path(lib: &CuFileLibrary) -> Option<PathBuf> {
    let f = lib.api.cuFileDriverOpen.as_ref().ok()?;
    loaded_file_of(*f as *const ())
}

/// The file of the loaded shared object that contains `addr` (via `dladdr`),
/// canonicalized. Used to say which libcufile or libcuda a process really
/// opened when it asked for a bare soname.
pub fn loaded_file_of(addr: *const ()) -> Option<PathBuf> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only reads the address and fills `info`.
    let found = unsafe { libc::dladdr(addr.cast(), info.as_mut_ptr()) };
    if found == 0 {
        return None;
    }
    // SAFETY: dladdr returned non-zero, so `info` is initialised.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the loader, valid
    // while the object stays loaded (forever, for the libraries we load).
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    let path = PathBuf::from(name.to_string_lossy().into_owned());
    Some(std::fs::canonicalize(&path).unwrap_or(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_split_like_cufile_get_version() {
        let v = LibraryVersion(1150);
        assert_eq!((v.major(), v.minor()), (1, 15));
        assert_eq!(v.to_string(), "1.15");
        assert!(v.at_least(1, 15));
        assert!(!v.at_least(1, 16));
        assert_eq!(LibraryVersion(1200).to_string(), "1.20");
    }

    #[test]
    fn every_optional_symbol_belongs_to_one_feature() {
        for f in Feature::ALL {
            for s in f.symbols() {
                assert_eq!(Feature::of_symbol(s), Some(f), "{s}");
                assert!(
                    !REQUIRED_SYMBOLS.contains(s),
                    "{s} is both required and optional"
                );
            }
        }
    }

    #[test]
    fn a_missing_path_is_a_typed_error_naming_the_path() {
        let err = CuFileLibrary::load_from("/nonexistent/kvik/libcufile.so.0").unwrap_err();
        let LoadError::NotFound { attempts } = &err else {
            panic!("unexpected {err:?}")
        };
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].candidate, "/nonexistent/kvik/libcufile.so.0");
        assert_eq!(attempts[0].origin, CandidateOrigin::Argument);
        assert!(
            attempts[0].message.contains("No such file"),
            "{}",
            attempts[0].message
        );
        assert!(err.to_string().contains("/nonexistent/kvik/libcufile.so.0"));
    }

    #[test]
    fn a_path_that_is_not_a_regular_file_is_refused_without_opening_it() {
        let dir = std::env::temp_dir().join(format!("cufile-sys-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("libcufile.so.0");
        let _ = std::fs::remove_file(&fifo);
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        for path in [fifo.as_path(), Path::new("/dev/zero"), dir.as_path()] {
            // dlopen of the FIFO would never return: the test would hang.
            let err = CuFileLibrary::load_from(path).unwrap_err();
            assert!(err.to_string().contains("is not a regular file"), "{err}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_library_without_cufile_symbols_is_refused() {
        // libm exists on every glibc system and exports no cuFile function.
        let err = CuFileLibrary::load_from("libm.so.6").unwrap_err();
        match &err {
            LoadError::MissingSymbol {
                symbol, library, ..
            } => {
                assert_eq!(*symbol, "cuFileDriverOpen");
                assert!(library.contains("libm"), "{library}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
