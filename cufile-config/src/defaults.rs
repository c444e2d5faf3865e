//! What cuFile uses when nothing sets a value, and what NVIDIA's stock
//! `/etc/cufile.json` sets.
//!
//! Library defaults are the staged values `cuFileGetParameter*` returns
//! before the driver opens, with no cufile.json. libcufile 1.15 answers for
//! every key below; on a machine without a CUDA driver libcufile 1.20
//! answers only the `execution` values (the rest read back 0, so they are
//! unknown here and shown as such). Where a library default is not known the
//! key is absent from [`library_defaults`].
//!
//! | key | 1.15 | 1.20 |
//! |---|---|---|
//! | execution.max_io_queue_depth | 128 | 128 |
//! | execution.max_io_threads | 0 | 8 |
//! | execution.parallel_io | false | true |
//! | execution.min_io_threshold_size_kb | 1024 | 1024 |
//! | execution.max_request_parallelism | 0 | 4 |
//!
//! So with 1.15 and no cufile.json cuFile never splits a request; with 1.20
//! it does (up to 4 units of 1 MiB).

use crate::library::Libcufile;
use crate::model::CufileConfig;

/// The values cuFile uses for keys no file, environment variable or API call
/// sets, where they are known (see the module documentation).
pub fn library_defaults(library: Libcufile) -> CufileConfig {
    let json = match library {
        Libcufile::V1_15 => serde_json::json!({
            "profile": { "nvtx": false, "cufile_stats": 0 },
            "execution": {
                "max_io_queue_depth": 128,
                "max_io_threads": 0,
                "parallel_io": false,
                "min_io_threshold_size_kb": 1024,
                "max_request_parallelism": 0
            },
            "properties": {
                "per_buffer_cache_size_kb": 1024,
                "io_batchsize": 128,
                "poll_mode_max_size_kb": 4,
                "max_batch_io_timeout_msecs": 5,
                "allow_compat_mode": false,
                "use_poll_mode": false,
                "force_compat_mode": false,
                "use_pci_p2pdma": false
            },
            "miscellaneous": {
                "skip_topology_detection": false,
                "api_check_aggressive": false
            }
        }),
        Libcufile::V1_20 => serde_json::json!({
            "execution": {
                "max_io_queue_depth": 128,
                "max_io_threads": 8,
                "parallel_io": true,
                "min_io_threshold_size_kb": 1024,
                "max_request_parallelism": 4
            }
        }),
    };
    serde_json::from_value(json).unwrap_or_default()
}

/// The values of the stock `/etc/cufile.json` NVIDIA ships with CUDA 13 (the
/// keys it sets, not the ones it leaves commented out).
/// `fixtures/stock.json` is a file in the stock style that parses to exactly
/// this.
pub fn stock_file() -> CufileConfig {
    let json = serde_json::json!({
        "logging": { "level": "ERROR" },
        "profile": { "nvtx": false, "cufile_stats": 0 },
        "execution": {
            "max_io_queue_depth": 128,
            "max_io_threads": 4,
            "parallel_io": true,
            "min_io_threshold_size_kb": 8192,
            "max_request_parallelism": 4
        },
        "properties": {
            "max_direct_io_size_kb": 16384,
            "max_device_cache_size_kb": 131072,
            "per_buffer_cache_size_kb": 1024,
            "max_device_pinned_mem_size_kb": 33554432,
            "posix_pool_slab_size_kb": [4, 1024, 16384],
            "posix_pool_slab_count": [128, 64, 64],
            "use_poll_mode": false,
            "poll_mode_max_size_kb": 4,
            "use_pci_p2pdma": false,
            "allow_compat_mode": true,
            "gds_rdma_write_support": true,
            "io_batchsize": 128,
            "io_priority": "default",
            "rdma_dev_addr_list": [],
            "rdma_load_balancing_policy": "RoundRobin",
            "rdma_dynamic_routing": false,
            "rdma_dynamic_routing_order": ["GPU_MEM_NVLINKS", "GPU_MEM", "SYS_MEM", "P2P"]
        },
        "fs": {
            "generic": { "posix_unaligned_writes": false },
            "beegfs": { "posix_gds_min_kb": 0 },
            "lustre": { "posix_gds_min_kb": 0 },
            "nfs": {},
            "gpfs": { "gds_write_support": false, "gds_async_support": true },
            "weka": { "rdma_write_support": false }
        },
        "denylist": { "drivers": [], "devices": [], "mounts": [], "filesystems": [] },
        "miscellaneous": { "api_check_aggressive": false }
    });
    serde_json::from_value(json).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExecutionConfig;

    #[test]
    fn defaults_and_stock_values_agree_with_the_execution_constants() {
        let d = library_defaults(Libcufile::V1_15);
        assert_eq!(
            d.execution_section()
                .resolve(&ExecutionConfig::LIBRARY_DEFAULTS_1_20),
            ExecutionConfig::LIBRARY_DEFAULTS_1_15
        );
        let d = library_defaults(Libcufile::V1_20);
        assert_eq!(
            d.execution_section()
                .resolve(&ExecutionConfig::LIBRARY_DEFAULTS_1_15),
            ExecutionConfig::LIBRARY_DEFAULTS_1_20
        );
        assert_eq!(
            stock_file()
                .execution_section()
                .resolve(&ExecutionConfig::LIBRARY_DEFAULTS_1_15),
            ExecutionConfig::STOCK_FILE
        );
        assert!(stock_file().other.is_empty());
        assert!(stock_file().fs.unwrap().nfs.is_some());
    }
}
