//! The `execution` section: the settings that decide how cuFile splits one
//! request into scheduled work units (gds-core's `schedule` model reads them).

use crate::effective::Source;
use crate::library::Libcufile;
use crate::model::ExecutionSection;

/// cuFile's `execution` settings, every value resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExecutionConfig {
    /// `execution.max_io_queue_depth` (1..=256).
    pub max_io_queue_depth: u64,
    /// `execution.max_io_threads` (0..=32; 1.20: 0..=128): cuFile's worker threads.
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

    /// What libcufile 1.20 uses when no cufile.json is found (read the same
    /// way): it splits by default, up to 4 units of 1 MiB.
    pub const LIBRARY_DEFAULTS_1_20: ExecutionConfig = ExecutionConfig {
        max_io_queue_depth: 128,
        max_io_threads: 8,
        parallel_io: true,
        min_io_threshold_size_kb: 1024,
        max_request_parallelism: 4,
    };

    /// The values of the stock `/etc/cufile.json` NVIDIA ships.
    pub const STOCK_FILE: ExecutionConfig = ExecutionConfig {
        max_io_queue_depth: 128,
        max_io_threads: 4,
        parallel_io: true,
        min_io_threshold_size_kb: 8192,
        max_request_parallelism: 4,
    };

    /// The library defaults of `library`.
    pub const fn library_defaults(library: Libcufile) -> ExecutionConfig {
        match library {
            Libcufile::V1_15 => ExecutionConfig::LIBRARY_DEFAULTS_1_15,
            Libcufile::V1_20 => ExecutionConfig::LIBRARY_DEFAULTS_1_20,
        }
    }
}

impl ExecutionSection {
    /// The section's values, `defaults` where the section leaves one out.
    pub fn resolve(&self, defaults: &ExecutionConfig) -> ExecutionConfig {
        ExecutionConfig {
            max_io_queue_depth: self
                .max_io_queue_depth
                .unwrap_or(defaults.max_io_queue_depth),
            max_io_threads: self.max_io_threads.unwrap_or(defaults.max_io_threads),
            parallel_io: self.parallel_io.unwrap_or(defaults.parallel_io),
            min_io_threshold_size_kb: self
                .min_io_threshold_size_kb
                .unwrap_or(defaults.min_io_threshold_size_kb),
            max_request_parallelism: self
                .max_request_parallelism
                .unwrap_or(defaults.max_request_parallelism),
        }
    }
}

/// Where each effective `execution` value comes from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ExecutionSources {
    pub max_io_queue_depth: Source,
    pub max_io_threads: Source,
    pub parallel_io: Source,
    pub min_io_threshold_size_kb: Source,
    pub max_request_parallelism: Source,
}

/// The `execution` settings cuFile will use, and where each comes from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EffectiveExecution {
    pub config: ExecutionConfig,
    pub sources: ExecutionSources,
}
