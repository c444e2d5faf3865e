//! The typed model of a cufile.json: one struct per section, every key
//! optional (absent in the file = `None`), serde for both directions.
//!
//! Each struct keeps the keys it has no typed field for in `other`: keys
//! libcufile reads whose type this crate does not model (see
//! [`Kind::Any`](crate::schema::Kind::Any)) and unknown keys, which
//! validation reports as warnings. Nothing in the file is dropped.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Keys without a typed field, by name.
pub type OtherKeys = BTreeMap<String, serde_json::Value>;

/// A whole cufile.json.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CufileConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<LoggingSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<ExecutionSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<PropertiesSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<BlockSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denylist: Option<DenylistSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miscellaneous: Option<MiscellaneousSection>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// `logging`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LoggingSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<LogLevel>,
    /// -1 for no limit (libcufile 1.20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_size_mb: Option<i64>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// `logging.level`, most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum LogLevel {
    Notice,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

/// `profile`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProfileSection {
    /// libcufile 1.15 only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvtx: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cufile_stats: Option<u64>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// `execution` as written in a file; [`ExecutionConfig`](crate::ExecutionConfig)
/// is the resolved form with every value present.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ExecutionSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_io_queue_depth: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_io_threads: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_io: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_io_threshold_size_kb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_parallelism: Option<u64>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// `properties`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PropertiesSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_direct_io_size_kb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_device_cache_size_kb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_buffer_cache_size_kb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_device_pinned_mem_size_kb: Option<u64>,
    /// libcufile 1.20 (1.17 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_bounce_buffer_slab_config: Option<SlabConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub posix_pool_slab_size_kb: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub posix_pool_slab_count: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_poll_mode: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_mode_max_size_kb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_compat_mode: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_compat_mode: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_pci_p2pdma: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gds_rdma_write_support: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_batchsize: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_batch_io_timeout_msecs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_priority: Option<IoPriority>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_odirect_mode: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer_iouring: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_system_memory: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_dev_addr_list: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_load_balancing_policy: Option<RdmaLoadBalancingPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_dc_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_access_mask: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_dynamic_routing: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_dynamic_routing_order: Option<Vec<RoutingPolicy>>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// `properties.gpu_bounce_buffer_slab_config` (libcufile 1.17 and later).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SlabConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slab_size_kb: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slab_count: Option<Vec<u64>>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// `properties.io_priority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IoPriority {
    Default,
    Low,
    Med,
    High,
}

/// `properties.rdma_load_balancing_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RdmaLoadBalancingPolicy {
    RoundRobin,
    RoundRobinMaxMin,
}

/// An entry of `properties.rdma_dynamic_routing_order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RoutingPolicy {
    GpuMemNvlinks,
    GpuMem,
    SysMem,
    P2p,
}

/// `fs`: one object per filesystem family.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FsSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generic: Option<GenericFs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lustre: Option<ThresholdFs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beegfs: Option<ThresholdFs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scatefs: Option<ThresholdFs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nfs: Option<RdmaFs>,
    /// libcufile 1.20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub panfs: Option<RdmaFs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpfs: Option<GpfsFs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weka: Option<WekaFs>,
    /// libcufile 1.20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtiofs: Option<P2pdmaOnly>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// `fs.generic`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GenericFs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub posix_unaligned_writes: Option<bool>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// `fs.lustre`, `fs.beegfs`, `fs.scatefs`: a POSIX threshold and RDMA routing.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ThresholdFs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub posix_gds_min_kb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_dev_addr_list: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_table: Option<MountTable>,
    /// libcufile 1.20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_pci_p2pdma: Option<bool>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// `fs.nfs`, `fs.panfs`: RDMA routing.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RdmaFs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_dev_addr_list: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_table: Option<MountTable>,
    /// libcufile 1.20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_pci_p2pdma: Option<bool>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// `fs.gpfs` (IBM Storage Scale).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GpfsFs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gds_write_support: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gds_async_support: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_dev_addr_list: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_table: Option<MountTable>,
    /// libcufile 1.20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_pci_p2pdma: Option<bool>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// `fs.weka`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WekaFs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_write_support: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_dev_addr_list: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_table: Option<MountTable>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// Objects whose only key is `use_pci_p2pdma`: `fs.virtiofs` and the
/// `block.*` device classes (libcufile 1.20).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct P2pdmaOnly {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_pci_p2pdma: Option<bool>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// `mount_table`: mount point → its RDMA interfaces.
pub type MountTable = BTreeMap<String, MountEntry>;

/// One mount in a `mount_table`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MountEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_dev_addr_list: Option<Vec<String>>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// `block` (libcufile 1.20): P2PDMA per block device class.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BlockSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvme: Option<P2pdmaOnly>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvmeof: Option<P2pdmaOnly>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raid: Option<P2pdmaOnly>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raid1: Option<P2pdmaOnly>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raid10: Option<P2pdmaOnly>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// `denylist`: what cuFile must not touch.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DenylistSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drivers: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mounts: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystems: Option<Vec<String>>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

/// `miscellaneous`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MiscellaneousSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_check_aggressive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_topology_detection: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_memops_bypass: Option<bool>,
    /// libcufile 1.20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_static_routing: Option<bool>,
    /// libcufile 1.20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_routing_filepath: Option<String>,
    #[serde(flatten)]
    pub other: OtherKeys,
}

impl CufileConfig {
    /// The model as plain JSON (what a cufile.json with these values holds).
    pub fn to_json(&self) -> serde_json::Value {
        // Every field is a plain string, number, bool, list or map: the
        // conversion cannot fail.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// The `execution` section (empty when the file has none).
    pub fn execution_section(&self) -> ExecutionSection {
        self.execution.clone().unwrap_or_default()
    }
}
