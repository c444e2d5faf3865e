//! Every key libcufile reads from cufile.json, with its type and the rules it
//! must follow.
//!
//! The key list is what the libraries themselves contain: the dotted paths
//! (`execution.max_io_threads`, …) in the string tables of libcufile 1.15.1.6
//! and 1.20.0.107. Ranges are what `cuFileGetParameterMinMaxValue` reports;
//! alignment rules and their severities follow the library's own
//! messages (`invalid directIO size specified, should be multiple of 64K` →
//! error) or, where the library has no such message, NVIDIA's documentation
//! ("should be 4K aligned" → warning).

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use crate::diagnostic::Severity;
use crate::library::Libcufile;

/// What a key holds and the rules its value follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    Bool,
    /// A whole number.
    UInt(UIntRule),
    /// `logging.max_file_size_mb`: -1 (no limit) or ≥ 1.
    SizeLimitMb,
    /// One of these strings.
    Enum(&'static [&'static str]),
    /// Free text.
    String,
    /// A path on this machine (a directory when `dir`).
    Path {
        dir: bool,
    },
    /// An array of strings.
    StringList,
    /// An array of paths (block devices, mount points).
    PathList,
    /// An array of IPv4 addresses of RDMA interfaces.
    AddressList,
    /// An array of whole numbers.
    UIntList(ListRule),
    /// An array of strings, each one of these.
    EnumList(&'static [&'static str]),
    /// Mount point → `{ "rdma_dev_addr_list": [...] }`.
    MountTable,
    /// A string holding a hexadecimal number below 2^bits (`"0xffeeddcc"`).
    Hex {
        bits: u32,
    },
    /// libcufile reads the key; its type is not modelled here.
    Any,
}

/// Range and alignment of a whole number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UIntRule {
    pub min: u64,
    /// The maximum libcufile 1.15 accepts.
    pub max: u64,
    /// The maximum libcufile 1.20 accepts, where it differs.
    pub max_v1_20: Option<u64>,
    /// The value must be a multiple of this (1: any).
    pub multiple_of: u64,
    /// How cuFile treats a value that is not a multiple.
    pub misaligned: Severity,
}

impl UIntRule {
    const fn range(min: u64, max: u64) -> UIntRule {
        UIntRule {
            min,
            max,
            max_v1_20: None,
            multiple_of: 1,
            misaligned: Severity::Error,
        }
    }

    const fn multiple_of(self, unit: u64, misaligned: Severity) -> UIntRule {
        UIntRule {
            multiple_of: unit,
            misaligned,
            ..self
        }
    }

    /// The maximum for `library`.
    pub fn max_for(&self, library: Libcufile) -> u64 {
        match library {
            Libcufile::V1_20 => self.max_v1_20.unwrap_or(self.max),
            Libcufile::V1_15 => self.max,
        }
    }
}

/// Rules for each element of a number array, and for the array as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListRule {
    /// Every element must be a multiple of this (KiB units: 4 = one page).
    pub multiple_of: u64,
    /// Elements must be strictly increasing.
    pub ascending: bool,
    /// How cuFile treats a broken rule: the GPU slab configuration falls back
    /// to the legacy bounce buffers (a warning); a bad POSIX pool is an error.
    pub severity: Severity,
}

/// One key libcufile reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The dotted JSON path.
    pub path: &'static str,
    pub kind: Kind,
    /// The modelled libcufile versions that read the key.
    pub read_by: &'static [Libcufile],
    /// The `cuFileSetParameter*` parameter that overrides it, if any.
    pub api: Option<&'static str>,
    /// What it does, in a line.
    pub doc: &'static str,
}

impl Setting {
    pub fn read_by(&self, library: Libcufile) -> bool {
        self.read_by.contains(&library)
    }

    /// The last key of the path.
    pub fn key(&self) -> &'static str {
        self.path.rsplit('.').next().unwrap_or(self.path)
    }
}

/// The schema indexed by path, section and last key, built once: validation
/// asks about every key of a file, and a file may have a hundred thousand.
struct Index {
    by_path: HashMap<&'static str, &'static Setting>,
    /// Every object that holds settings (`"fs"`, `"fs.lustre"`).
    sections: HashSet<&'static str>,
    /// The first setting (in [`SETTINGS`] order) with each last key.
    by_key: HashMap<&'static str, &'static Setting>,
}

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut index = Index {
            by_path: HashMap::new(),
            sections: HashSet::new(),
            by_key: HashMap::new(),
        };
        for setting in SETTINGS {
            index.by_path.insert(setting.path, setting);
            index.by_key.entry(setting.key()).or_insert(setting);
            let mut end = setting.path.len();
            while let Some(dot) = setting.path[..end].rfind('.') {
                index.sections.insert(&setting.path[..dot]);
                end = dot;
            }
        }
        index
    })
}

/// The setting at `path`, if libcufile reads such a key.
pub fn setting(path: &str) -> Option<&'static Setting> {
    index().by_path.get(path).copied()
}

/// The first setting whose last key is `key` (`max_io_threads` →
/// `execution.max_io_threads`).
pub fn setting_with_key(key: &str) -> Option<&'static Setting> {
    index().by_key.get(key).copied()
}

/// The settings below the object at `path` (`"fs.lustre"`).
pub fn settings_under(path: &str) -> impl Iterator<Item = &'static Setting> + '_ {
    SETTINGS.iter().filter(move |s| {
        s.path
            .strip_prefix(path)
            .is_some_and(|rest| rest.starts_with('.'))
    })
}

/// Whether `path` is an object that holds settings (`"fs"`, `"fs.lustre"`).
pub fn is_section(path: &str) -> bool {
    index().sections.contains(path)
}

/// The libcufile versions that read anything below the section at `path`.
pub fn section_read_by(path: &str, library: Libcufile) -> bool {
    settings_under(path).any(|s| s.read_by(library))
}

/// The known keys directly inside the object at `path` (`""` is the top).
pub fn keys_in(path: &str) -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = SETTINGS
        .iter()
        .filter_map(|s| {
            let rest = if path.is_empty() {
                Some(s.path)
            } else {
                s.path.strip_prefix(path)?.strip_prefix('.')
            }?;
            rest.split('.').next()
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Names people write that cuFile does not read, and the key they mean
/// (`gdscheck -p` prints some settings under other names).
pub const ALIASES: &[(&str, &str)] = &[
    ("properties.use_compat_mode", "properties.allow_compat_mode"),
    ("properties.max_batch_io_size", "properties.io_batchsize"),
    (
        "properties.batch_io_timeout_ms",
        "properties.max_batch_io_timeout_msecs",
    ),
    (
        "properties.rdma_peer_affinity_policy",
        "properties.rdma_load_balancing_policy",
    ),
    (
        "properties.gpu_bounce_buffer_slab_size_kb",
        "properties.gpu_bounce_buffer_slab_config.slab_size_kb",
    ),
    (
        "properties.gpu_bounce_buffer_slab_count",
        "properties.gpu_bounce_buffer_slab_config.slab_count",
    ),
    ("profile.io_batchsize", "properties.io_batchsize"),
];

pub const LOG_LEVELS: &[&str] = &["NOTICE", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"];
pub const IO_PRIORITIES: &[&str] = &["default", "low", "med", "high"];
pub const LOAD_BALANCING_POLICIES: &[&str] = &["RoundRobin", "RoundRobinMaxMin"];
pub const ROUTING_POLICIES: &[&str] = &["GPU_MEM_NVLINKS", "GPU_MEM", "SYS_MEM", "P2P"];

/// Largest `poll_mode_max_size_kb` libcufile reports (`(2^64 - 1) / 1024`,
/// as `cuFileGetParameterMinMaxValue` prints it).
pub const POLL_MODE_MAX_SIZE_KB_MAX: u64 = 18_014_398_509_481_980;

const BOTH: &[Libcufile] = Libcufile::BOTH;
const NEW: &[Libcufile] = Libcufile::NEW;
const OLD: &[Libcufile] = Libcufile::OLD;

const fn s(
    path: &'static str,
    kind: Kind,
    read_by: &'static [Libcufile],
    doc: &'static str,
) -> Setting {
    Setting {
        path,
        kind,
        read_by,
        api: None,
        doc,
    }
}

const fn api(
    path: &'static str,
    kind: Kind,
    read_by: &'static [Libcufile],
    api: &'static str,
    doc: &'static str,
) -> Setting {
    Setting {
        path,
        kind,
        read_by,
        api: Some(api),
        doc,
    }
}

const fn uint(min: u64, max: u64) -> Kind {
    Kind::UInt(UIntRule::range(min, max))
}

const fn kib(min: u64, max: u64, unit: u64, misaligned: Severity) -> Kind {
    Kind::UInt(UIntRule::range(min, max).multiple_of(unit, misaligned))
}

const PAGE_KB: u64 = 4;
const E: Severity = Severity::Error;
const W: Severity = Severity::Warning;

const POSIX_SLAB_SIZES: Kind = Kind::UIntList(ListRule {
    multiple_of: PAGE_KB,
    ascending: false,
    severity: E,
});
const POSIX_SLAB_COUNTS: Kind = Kind::UIntList(ListRule {
    multiple_of: 1,
    ascending: false,
    severity: E,
});
const GPU_SLAB_SIZES: Kind = Kind::UIntList(ListRule {
    multiple_of: PAGE_KB,
    ascending: true,
    severity: W,
});
const GPU_SLAB_COUNTS: Kind = Kind::UIntList(ListRule {
    multiple_of: 1,
    ascending: false,
    severity: W,
});
const POSIX_GDS_MIN_KB: Kind = kib(0, u64::MAX, PAGE_KB, W);

/// Every key libcufile 1.15 or 1.20 reads, section by section.
pub static SETTINGS: &[Setting] = &[
    // logging
    s(
        "logging.dir",
        Kind::Path { dir: true },
        BOTH,
        "directory for cufile.log (default: the working directory)",
    ),
    api(
        "logging.level",
        Kind::Enum(LOG_LEVELS),
        BOTH,
        "CUFILE_PARAM_LOGGING_LEVEL",
        "log verbosity",
    ),
    s(
        "logging.max_file_size_mb",
        Kind::SizeLimitMb,
        NEW,
        "largest log file in MiB, -1 for no limit",
    ),
    // profile
    api(
        "profile.nvtx",
        Kind::Bool,
        OLD,
        "CUFILE_PARAM_PROFILE_NVTX",
        "NVTX ranges for profiling",
    ),
    api(
        "profile.cufile_stats",
        uint(0, 3),
        BOTH,
        "CUFILE_PARAM_PROFILE_STATS",
        "statistics level 0..3",
    ),
    // execution
    api(
        "execution.max_io_queue_depth",
        uint(1, 256),
        BOTH,
        "CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH",
        "most pending work items in cuFile's thread pool",
    ),
    api(
        "execution.max_io_threads",
        Kind::UInt(UIntRule {
            max_v1_20: Some(128),
            ..UIntRule::range(0, 32)
        }),
        BOTH,
        "CUFILE_PARAM_EXECUTION_MAX_IO_THREADS",
        "worker threads per GPU for parallel I/O",
    ),
    api(
        "execution.parallel_io",
        Kind::Bool,
        BOTH,
        "CUFILE_PARAM_EXECUTION_PARALLEL_IO",
        "whether one request may be split into work units",
    ),
    api(
        "execution.min_io_threshold_size_kb",
        uint(4, u32::MAX as u64),
        BOTH,
        "CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB",
        "size of one work unit in KiB",
    ),
    api(
        "execution.max_request_parallelism",
        uint(0, 8),
        BOTH,
        "CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM",
        "most work units per request",
    ),
    // properties: GPU bounce buffers
    api(
        "properties.max_direct_io_size_kb",
        kib(64, 16384, 64, E),
        BOTH,
        "CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB",
        "largest chunk cuFile sends to storage per request, KiB (multiple of 64)",
    ),
    api(
        "properties.max_device_cache_size_kb",
        kib(0, 268_435_456, PAGE_KB, E),
        BOTH,
        "CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB",
        "GPU memory for bounce buffers per GPU, KiB (4 KiB aligned)",
    ),
    api(
        "properties.per_buffer_cache_size_kb",
        kib(64, 16384, 64, E),
        BOTH,
        "CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB",
        "size of one GPU bounce buffer, KiB (multiple of 64)",
    ),
    api(
        "properties.max_device_pinned_mem_size_kb",
        kib(64, 268_435_456, PAGE_KB, E),
        BOTH,
        "CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB",
        "GPU memory a process may pin, KiB (4 KiB aligned)",
    ),
    s(
        "properties.gpu_bounce_buffer_slab_config.slab_size_kb",
        GPU_SLAB_SIZES,
        NEW,
        "GPU bounce buffer sizes, KiB, 4 KiB aligned, increasing",
    ),
    s(
        "properties.gpu_bounce_buffer_slab_config.slab_count",
        GPU_SLAB_COUNTS,
        NEW,
        "number of GPU bounce buffers of each size",
    ),
    // properties: POSIX (compatibility mode) pool
    s(
        "properties.posix_pool_slab_size_kb",
        POSIX_SLAB_SIZES,
        BOTH,
        "host bounce buffer sizes, KiB, page aligned",
    ),
    s(
        "properties.posix_pool_slab_count",
        POSIX_SLAB_COUNTS,
        BOTH,
        "number of host bounce buffers of each size",
    ),
    // properties: modes
    api(
        "properties.use_poll_mode",
        Kind::Bool,
        BOTH,
        "CUFILE_PARAM_PROPERTIES_USE_POLL_MODE",
        "poll for completion of small I/O",
    ),
    api(
        "properties.poll_mode_max_size_kb",
        kib(4, POLL_MODE_MAX_SIZE_KB_MAX, PAGE_KB, E),
        BOTH,
        "CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB",
        "largest I/O that polls, KiB (4 KiB aligned)",
    ),
    api(
        "properties.allow_compat_mode",
        Kind::Bool,
        BOTH,
        "CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE",
        "fall back to cuFile's POSIX path when the direct path is unavailable",
    ),
    api(
        "properties.force_compat_mode",
        Kind::Bool,
        BOTH,
        "CUFILE_PARAM_FORCE_COMPAT_MODE",
        "always use cuFile's POSIX path",
    ),
    api(
        "properties.use_pci_p2pdma",
        Kind::Bool,
        BOTH,
        "CUFILE_PARAM_USE_PCIP2PDMA",
        "prefer kernel PCI P2PDMA over nvidia-fs",
    ),
    s(
        "properties.gds_rdma_write_support",
        Kind::Bool,
        BOTH,
        "GDS writes for RDMA-based storage",
    ),
    api(
        "properties.io_batchsize",
        uint(1, 256),
        BOTH,
        "CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE",
        "most I/O operations per batch",
    ),
    api(
        "properties.max_batch_io_timeout_msecs",
        uint(1, 1000),
        BOTH,
        "CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS",
        "batch I/O timeout in ms",
    ),
    s(
        "properties.io_priority",
        Kind::Enum(IO_PRIORITIES),
        BOTH,
        "I/O priority relative to compute streams",
    ),
    api(
        "properties.force_odirect_mode",
        Kind::Bool,
        BOTH,
        "CUFILE_PARAM_FORCE_ODIRECT_MODE",
        "open files with O_DIRECT in compatibility mode",
    ),
    api(
        "properties.prefer_iouring",
        Kind::Bool,
        BOTH,
        "CUFILE_PARAM_PREFER_IO_URING",
        "use io_uring in compatibility mode",
    ),
    api(
        "properties.allow_system_memory",
        Kind::Bool,
        BOTH,
        "CUFILE_PARAM_PROPERTIES_ALLOW_SYSTEM_MEMORY",
        "accept host memory buffers",
    ),
    // properties: RDMA (distributed filesystems)
    s(
        "properties.rdma_dev_addr_list",
        Kind::AddressList,
        BOTH,
        "IPv4 addresses of the RDMA interfaces to use",
    ),
    s(
        "properties.rdma_load_balancing_policy",
        Kind::Enum(LOAD_BALANCING_POLICIES),
        BOTH,
        "how memory registrations spread over NICs",
    ),
    s(
        "properties.rdma_dc_key",
        Kind::Hex { bits: 32 },
        BOTH,
        "32-bit DC key, hexadecimal",
    ),
    s(
        "properties.rdma_access_mask",
        Kind::Hex { bits: 32 },
        BOTH,
        "bit mask of enabled RDMA operations, hexadecimal",
    ),
    s(
        "properties.rdma_dynamic_routing",
        Kind::Bool,
        BOTH,
        "route across PCIe root ports for network filesystems",
    ),
    s(
        "properties.rdma_dynamic_routing_order",
        Kind::EnumList(ROUTING_POLICIES),
        BOTH,
        "routing policies in order of preference",
    ),
    s(
        "properties.rdma_peer_type",
        Kind::Any,
        BOTH,
        "RDMA peer type",
    ),
    s(
        "properties.rdma_service_level",
        Kind::Any,
        BOTH,
        "RDMA service level",
    ),
    s(
        "properties.rdma_topN_ranks",
        Kind::Any,
        BOTH,
        "RDMA peer ranking depth",
    ),
    s(
        "properties.allow_rdma_token_reset",
        Kind::Any,
        NEW,
        "RDMA token reset",
    ),
    s(
        "properties.rdma_async_event_monitoring",
        Kind::Any,
        NEW,
        "RDMA asynchronous event monitoring",
    ),
    s(
        "properties.rdma_failback_delay_ms",
        Kind::Any,
        NEW,
        "RDMA failback delay",
    ),
    s(
        "properties.rdma_failback_enabled",
        Kind::Any,
        NEW,
        "RDMA failback",
    ),
    s(
        "properties.rdma_health_check_interval_ms",
        Kind::Any,
        NEW,
        "RDMA health check interval",
    ),
    s(
        "properties.rdma_io_retry_count",
        Kind::Any,
        NEW,
        "RDMA I/O retries",
    ),
    s(
        "properties.rdma_io_retry_delay_ms",
        Kind::Any,
        NEW,
        "RDMA I/O retry delay",
    ),
    s(
        "properties.rdma_max_backup_devices",
        Kind::Any,
        NEW,
        "RDMA backup devices",
    ),
    s(
        "properties.rdma_multipath_enabled",
        Kind::Any,
        NEW,
        "RDMA multipath",
    ),
    s(
        "properties.rdma_transport_type",
        Kind::Any,
        NEW,
        "RDMA transport type",
    ),
    s(
        "properties.rdma_unhealthy_threshold",
        Kind::Any,
        NEW,
        "RDMA unhealthy threshold",
    ),
    s(
        "properties.compat_odirect_unaligned_read_split",
        Kind::Any,
        NEW,
        "split unaligned O_DIRECT reads in compatibility mode",
    ),
    s(
        "properties.compat_odirect_unaligned_read_split_min_size_kb",
        Kind::Any,
        NEW,
        "smallest unaligned read that is split, KiB",
    ),
    s(
        "properties.gds_fallback_io",
        Kind::Any,
        NEW,
        "fallback I/O behaviour",
    ),
    s(
        "properties.vanilla_posix_io_mode",
        Kind::Any,
        NEW,
        "plain POSIX I/O mode",
    ),
    // fs
    s(
        "fs.generic.posix_unaligned_writes",
        Kind::Bool,
        BOTH,
        "unaligned writes take cuFile's POSIX path",
    ),
    s(
        "fs.lustre.posix_gds_min_kb",
        POSIX_GDS_MIN_KB,
        BOTH,
        "I/O up to this size takes the POSIX path, KiB",
    ),
    s(
        "fs.lustre.rdma_dev_addr_list",
        Kind::AddressList,
        BOTH,
        "RDMA interfaces for a single Lustre mount",
    ),
    s(
        "fs.lustre.mount_table",
        Kind::MountTable,
        BOTH,
        "RDMA interfaces per Lustre mount",
    ),
    s(
        "fs.lustre.use_pci_p2pdma",
        Kind::Bool,
        NEW,
        "P2PDMA for Lustre",
    ),
    s(
        "fs.beegfs.posix_gds_min_kb",
        POSIX_GDS_MIN_KB,
        BOTH,
        "I/O up to this size takes the POSIX path, KiB",
    ),
    s(
        "fs.beegfs.rdma_dev_addr_list",
        Kind::AddressList,
        BOTH,
        "RDMA interfaces for a single BeeGFS mount",
    ),
    s(
        "fs.beegfs.mount_table",
        Kind::MountTable,
        BOTH,
        "RDMA interfaces per BeeGFS mount",
    ),
    s(
        "fs.beegfs.use_pci_p2pdma",
        Kind::Bool,
        NEW,
        "P2PDMA for BeeGFS",
    ),
    s(
        "fs.scatefs.posix_gds_min_kb",
        POSIX_GDS_MIN_KB,
        BOTH,
        "I/O up to this size takes the POSIX path, KiB",
    ),
    s(
        "fs.scatefs.rdma_dev_addr_list",
        Kind::AddressList,
        BOTH,
        "RDMA interfaces for a single ScaTeFS mount",
    ),
    s(
        "fs.scatefs.mount_table",
        Kind::MountTable,
        BOTH,
        "RDMA interfaces per ScaTeFS mount",
    ),
    s(
        "fs.scatefs.use_pci_p2pdma",
        Kind::Bool,
        NEW,
        "P2PDMA for ScaTeFS",
    ),
    s(
        "fs.nfs.rdma_dev_addr_list",
        Kind::AddressList,
        BOTH,
        "RDMA interfaces for a single NFS mount",
    ),
    s(
        "fs.nfs.mount_table",
        Kind::MountTable,
        BOTH,
        "RDMA interfaces per NFS mount",
    ),
    s("fs.nfs.use_pci_p2pdma", Kind::Bool, NEW, "P2PDMA for NFS"),
    s(
        "fs.gpfs.gds_write_support",
        Kind::Bool,
        BOTH,
        "GDS writes on IBM Storage Scale",
    ),
    s(
        "fs.gpfs.gds_async_support",
        Kind::Bool,
        BOTH,
        "asynchronous GDS on IBM Storage Scale",
    ),
    s(
        "fs.gpfs.rdma_dev_addr_list",
        Kind::AddressList,
        BOTH,
        "RDMA interfaces for a single GPFS mount",
    ),
    s(
        "fs.gpfs.mount_table",
        Kind::MountTable,
        BOTH,
        "RDMA interfaces per GPFS mount",
    ),
    s("fs.gpfs.use_pci_p2pdma", Kind::Bool, NEW, "P2PDMA for GPFS"),
    s(
        "fs.weka.rdma_write_support",
        Kind::Bool,
        BOTH,
        "RDMA writes on WekaFS",
    ),
    s(
        "fs.weka.rdma_dev_addr_list",
        Kind::AddressList,
        BOTH,
        "RDMA interfaces for a single WekaFS mount",
    ),
    s(
        "fs.weka.mount_table",
        Kind::MountTable,
        BOTH,
        "RDMA interfaces per WekaFS mount",
    ),
    s(
        "fs.panfs.rdma_dev_addr_list",
        Kind::AddressList,
        NEW,
        "RDMA interfaces for a single PanFS mount",
    ),
    s(
        "fs.panfs.mount_table",
        Kind::MountTable,
        NEW,
        "RDMA interfaces per PanFS mount",
    ),
    s(
        "fs.panfs.use_pci_p2pdma",
        Kind::Bool,
        NEW,
        "P2PDMA for PanFS",
    ),
    s(
        "fs.virtiofs.use_pci_p2pdma",
        Kind::Bool,
        NEW,
        "P2PDMA for virtiofs",
    ),
    // block
    s(
        "block.nvme.use_pci_p2pdma",
        Kind::Bool,
        NEW,
        "P2PDMA for NVMe",
    ),
    s(
        "block.nvmeof.use_pci_p2pdma",
        Kind::Bool,
        NEW,
        "P2PDMA for NVMe over Fabrics",
    ),
    s(
        "block.raid.use_pci_p2pdma",
        Kind::Bool,
        NEW,
        "P2PDMA for NVMe RAID",
    ),
    s(
        "block.raid1.use_pci_p2pdma",
        Kind::Bool,
        NEW,
        "P2PDMA for NVMe RAID 1",
    ),
    s(
        "block.raid10.use_pci_p2pdma",
        Kind::Bool,
        NEW,
        "P2PDMA for NVMe RAID 10",
    ),
    // denylist
    s(
        "denylist.drivers",
        Kind::StringList,
        BOTH,
        "storage drivers cuFile must not use",
    ),
    s(
        "denylist.devices",
        Kind::PathList,
        BOTH,
        "block devices cuFile must not use",
    ),
    s(
        "denylist.mounts",
        Kind::PathList,
        BOTH,
        "mount points cuFile must not use",
    ),
    s(
        "denylist.filesystems",
        Kind::StringList,
        BOTH,
        "filesystem types cuFile must not use",
    ),
    s(
        "denylist.fsids",
        Kind::Any,
        BOTH,
        "filesystem ids cuFile must not use",
    ),
    // miscellaneous
    api(
        "miscellaneous.api_check_aggressive",
        Kind::Bool,
        BOTH,
        "CUFILE_PARAM_FS_MISC_API_CHECK_AGGRESSIVE",
        "strict API argument checks (debugging)",
    ),
    api(
        "miscellaneous.skip_topology_detection",
        Kind::Bool,
        BOTH,
        "CUFILE_PARAM_SKIP_TOPOLOGY_DETECTION",
        "skip PCI topology detection in compatibility mode (faster start)",
    ),
    api(
        "miscellaneous.stream_memops_bypass",
        Kind::Bool,
        BOTH,
        "CUFILE_PARAM_STREAM_MEMOPS_BYPASS",
        "bypass CUDA stream memory operations",
    ),
    s(
        "miscellaneous.rcu_library_used",
        Kind::Any,
        BOTH,
        "RCU library selection",
    ),
    s(
        "miscellaneous.enable_static_routing",
        Kind::Bool,
        NEW,
        "route by a static topology file",
    ),
    s(
        "miscellaneous.static_routing_filepath",
        Kind::Path { dir: false },
        NEW,
        "the static routing file",
    ),
    s(
        "miscellaneous.enable_static_config",
        Kind::Any,
        NEW,
        "static configuration",
    ),
    s(
        "miscellaneous.static_config_filepath",
        Kind::Any,
        NEW,
        "the static configuration file",
    ),
    s(
        "miscellaneous.rdma_token_reset_timeout_secs",
        Kind::Any,
        NEW,
        "RDMA token reset timeout",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_answers_as_a_scan_of_the_table_does() {
        for known in SETTINGS {
            assert_eq!(setting(known.path), Some(known));
            let first = SETTINGS.iter().find(|s| s.key() == known.key());
            assert_eq!(setting_with_key(known.key()), first);
            for (at, _) in known.path.match_indices('.') {
                let prefix = &known.path[..at];
                assert!(is_section(prefix), "{prefix}");
                assert_eq!(settings_under(prefix).next().is_some(), is_section(prefix));
            }
            assert!(!is_section(known.path));
        }
        assert!(!is_section(""));
        assert!(!is_section("nonexistent"));
        assert_eq!(setting("execution"), None);
    }

    #[test]
    fn paths_are_unique_and_sections_are_not_settings() {
        for (i, a) in SETTINGS.iter().enumerate() {
            assert!(
                SETTINGS[i + 1..].iter().all(|b| b.path != a.path),
                "{} twice",
                a.path
            );
            assert!(!is_section(a.path), "{} is both", a.path);
            assert!(!a.read_by.is_empty(), "{}", a.path);
        }
    }

    #[test]
    fn aliases_point_at_real_settings_and_are_not_settings() {
        for (alias, meant) in ALIASES {
            assert!(setting(alias).is_none(), "{alias}");
            assert!(setting(meant).is_some(), "{meant}");
        }
    }

    #[test]
    fn the_top_level_sections_are_the_eight_of_the_stock_file() {
        assert_eq!(
            keys_in(""),
            [
                "block",
                "denylist",
                "execution",
                "fs",
                "logging",
                "miscellaneous",
                "profile",
                "properties"
            ]
        );
        assert_eq!(
            keys_in("fs.weka"),
            ["mount_table", "rdma_dev_addr_list", "rdma_write_support"]
        );
    }
}
