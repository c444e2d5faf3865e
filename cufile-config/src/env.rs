//! The `CUFILE_*` environment variables libcufile reads, and what each
//! overrides. The list is the one in the libraries' string tables (1.15.1.6
//! and 1.20.0.107); each variable overrides the cufile.json key named here.

use std::collections::BTreeMap;

use crate::library::Libcufile;

/// One environment variable libcufile reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvVar {
    pub name: &'static str,
    /// The cufile.json key it overrides; `None` for variables whose effect
    /// this crate does not model (they are reported when set).
    pub setting: Option<&'static str>,
    pub read_by: &'static [Libcufile],
    pub doc: &'static str,
}

/// `CUFILE_LOGFILE_PATH`: the log file itself (there is no JSON key).
pub const LOGFILE_PATH: &str = "CUFILE_LOGFILE_PATH";

const BOTH: &[Libcufile] = Libcufile::BOTH;
const NEW: &[Libcufile] = Libcufile::NEW;
const OLD: &[Libcufile] = Libcufile::OLD;

const fn var(
    name: &'static str,
    setting: Option<&'static str>,
    read_by: &'static [Libcufile],
    doc: &'static str,
) -> EnvVar {
    EnvVar {
        name,
        setting,
        read_by,
        doc,
    }
}

/// Every variable libcufile 1.15 or 1.20 reads (besides `CUFILE_ENV_PATH_JSON`,
/// which picks the file).
pub static ENV_VARS: &[EnvVar] = &[
    var(
        "CUFILE_LOGGING_LEVEL",
        Some("logging.level"),
        BOTH,
        "log verbosity",
    ),
    var(
        LOGFILE_PATH,
        None,
        BOTH,
        "the log file (instead of cufile.log in logging.dir or the working directory)",
    ),
    var(
        "CUFILE_LOGFILE_MAX_SIZE_MB",
        Some("logging.max_file_size_mb"),
        NEW,
        "largest log file",
    ),
    var("CUFILE_NVTX", Some("profile.nvtx"), OLD, "NVTX ranges"),
    var(
        "CUFILE_STATS_LEVEL",
        Some("profile.cufile_stats"),
        NEW,
        "statistics level",
    ),
    var(
        "CUFILE_FORCE_COMPAT_MODE",
        Some("properties.force_compat_mode"),
        BOTH,
        "always use the POSIX path",
    ),
    var(
        "CUFILE_ALLOW_COMPAT_MODE",
        Some("properties.allow_compat_mode"),
        OLD,
        "allow the POSIX path",
    ),
    var(
        "CUFILE_USE_PCIP2PDMA",
        Some("properties.use_pci_p2pdma"),
        BOTH,
        "prefer PCI P2PDMA",
    ),
    var(
        "CUFILE_IO_PRIORITY",
        Some("properties.io_priority"),
        BOTH,
        "I/O priority",
    ),
    var(
        "CUFILE_RDMA_DC_KEY",
        Some("properties.rdma_dc_key"),
        BOTH,
        "RDMA DC key",
    ),
    var(
        "CUFILE_SKIP_TOPOLOGY_DETECTION",
        Some("miscellaneous.skip_topology_detection"),
        BOTH,
        "skip topology detection",
    ),
    var(
        "CUFILE_STREAM_MEMOPS_BYPASS",
        Some("miscellaneous.stream_memops_bypass"),
        BOTH,
        "bypass stream memory operations",
    ),
    var(
        "CUFILE_MAX_DEVICE_CACHE_SIZE",
        None,
        BOTH,
        "GPU bounce buffer memory (unit not modelled)",
    ),
    var(
        "CUFILE_PER_BUFFER_CACHE_SIZE",
        None,
        BOTH,
        "GPU bounce buffer size (unit not modelled)",
    ),
    var("CUFILE_DMABUF_ENABLE", None, BOTH, "dma-buf registration"),
    var(
        "CUFILE_EXPERIMENTAL_FS",
        None,
        BOTH,
        "experimental filesystems",
    ),
    var("CUFILE_ETH_SL", None, BOTH, "Ethernet service level"),
    var("CUFILE_IB_SL", None, BOTH, "InfiniBand service level"),
    var("CUFILE_VISIBLE_DEVICES", None, NEW, "GPUs cuFile uses"),
    var(
        "CUFILE_SKIP_BUFFER_VALIDITY_CHECK",
        None,
        NEW,
        "buffer validity checks",
    ),
    var(
        "CUFILE_RDMA_ALLOW_RDMA_TOKEN_RESET",
        None,
        NEW,
        "RDMA token reset",
    ),
    var(
        "CUFILE_RDMA_TOKEN_RESET_TIMEOUT_SECS",
        None,
        NEW,
        "RDMA token reset timeout",
    ),
];

/// The variable that overrides `setting` in `library`, if any.
pub fn var_for(setting: &str, library: Libcufile) -> Option<&'static EnvVar> {
    ENV_VARS
        .iter()
        .find(|v| v.setting == Some(setting) && v.read_by.contains(&library))
}

/// A snapshot of the `CUFILE_*` variables (an empty value counts as unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    vars: BTreeMap<String, String>,
}

impl Environment {
    /// The variables of this process.
    pub fn from_process() -> Environment {
        Environment::from_pairs(ENV_VARS.iter().filter_map(|v| {
            std::env::var_os(v.name).map(|value| (v.name, value.to_string_lossy().into_owned()))
        }))
    }

    /// Given variables (tests, or another process's environment).
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Environment {
        Environment {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .filter(|(_, v)| !v.is_empty())
                .collect(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// Every set variable libcufile reads, with its value.
    pub fn known(&self) -> impl Iterator<Item = (&'static EnvVar, &str)> + '_ {
        ENV_VARS
            .iter()
            .filter_map(|v| self.get(v.name).map(|value| (v, value)))
    }
}
