//! The `execution` section: the settings that decide how cuFile splits one
//! request into scheduled work units (gds-core's `schedule` model reads them).

/// cuFile's `execution` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExecutionConfig {
    /// `execution.max_io_queue_depth` (1..=256).
    pub max_io_queue_depth: u64,
    /// `execution.max_io_threads` (0..=32): cuFile's worker threads.
    pub max_io_threads: u64,
    /// `execution.parallel_io`: whether one request may be split at all.
    pub parallel_io: bool,
    /// `execution.min_io_threshold_size_kb` (≥ 4): the size of one work unit.
    pub min_io_threshold_size_kb: u64,
    /// `execution.max_request_parallelism` (0..=8): most work units per request.
    pub max_request_parallelism: u64,
}

impl ExecutionConfig {
    /// What libcufile 1.15 uses when no cufile.json is found: staged values
    /// read with `cuFileGetParameter*` before the driver opens. No splitting.
    pub const LIBRARY_DEFAULTS_1_15: ExecutionConfig = ExecutionConfig {
        max_io_queue_depth: 128,
        max_io_threads: 0,
        parallel_io: false,
        min_io_threshold_size_kb: 1024,
        max_request_parallelism: 0,
    };

    /// The values of the stock `/etc/cufile.json` NVIDIA ships.
    pub const STOCK_FILE: ExecutionConfig = ExecutionConfig {
        max_io_queue_depth: 128,
        max_io_threads: 4,
        parallel_io: true,
        min_io_threshold_size_kb: 8192,
        max_request_parallelism: 4,
    };
}
