//! cuFile's statistics structures, in both layouts found in released libraries.
//!
//! libcufile 1.19 appended vector-I/O counters to `CUfileStatsLevel1_t`, which
//! `CUfileStatsLevel2_t` and `CUfileStatsLevel3_t` embed, so every later field
//! (the histograms, `num_gpus`, the per-GPU table) moved. Reading a 1.15
//! library's level-3 stats through the 1.20 layout silently returns wrong
//! per-GPU counters, and handing a 1.15-sized buffer to a 1.20 library lets it
//! write past the end. Always pick the layout with [`StatsLayout::for_version`].
//!
//! Which versions use which layout was read from the headers of every
//! `nvidia-cufile` wheel from 1.15 to 1.20: 1.15, 1.16, 1.17 and 1.18 share one
//! layout; 1.19 and 1.20 share the other.

use crate::LibraryVersion;

/// Layout of libcufile 1.15 to 1.18 (generated from the 1.15.1.6 header).
pub mod v1_15 {
    pub use crate::stats_v1_15::{
        CUfileOpCounter_t, CUfilePerGpuStats_t, CUfileStatsLevel1_t, CUfileStatsLevel2_t,
        CUfileStatsLevel3_t,
    };
}

/// Layout of libcufile 1.19 and 1.20 (generated from the 1.20.0.107 header).
pub mod v1_19 {
    pub use crate::bindings::{
        CUfileOpCounter_t, CUfilePerGpuStats_t, CUfileStatsLevel1_t, CUfileStatsLevel2_t,
        CUfileStatsLevel3_t,
    };
}

/// Which statistics layout a library uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatsLayout {
    /// libcufile 1.15–1.18: [`v1_15`].
    V1_15,
    /// libcufile 1.19–1.20: [`v1_19`].
    V1_19,
}

/// Why no layout is known for a library version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnknownLayout {
    #[error("libcufile {0} has no statistics API (it arrived in 1.15)")]
    TooOld(LibraryVersion),
    #[error(
        "libcufile {0} is newer than the newest statistics layout we know (1.20); \
         its structures may have grown, so they are not read"
    )]
    TooNew(LibraryVersion),
}

impl StatsLayout {
    pub fn for_version(version: LibraryVersion) -> Result<StatsLayout, UnknownLayout> {
        match (version.major(), version.minor()) {
            (1, 15..=18) => Ok(StatsLayout::V1_15),
            (1, 19..=20) => Ok(StatsLayout::V1_19),
            (major, _) if major < 1 => Err(UnknownLayout::TooOld(version)),
            (1, minor) if minor < 15 => Err(UnknownLayout::TooOld(version)),
            _ => Err(UnknownLayout::TooNew(version)),
        }
    }

    /// Size in bytes of `CUfileStatsLevel1_t`.
    pub fn level1_size(self) -> usize {
        match self {
            StatsLayout::V1_15 => size_of::<v1_15::CUfileStatsLevel1_t>(),
            StatsLayout::V1_19 => size_of::<v1_19::CUfileStatsLevel1_t>(),
        }
    }

    /// Size in bytes of `CUfileStatsLevel2_t`.
    pub fn level2_size(self) -> usize {
        match self {
            StatsLayout::V1_15 => size_of::<v1_15::CUfileStatsLevel2_t>(),
            StatsLayout::V1_19 => size_of::<v1_19::CUfileStatsLevel2_t>(),
        }
    }

    /// Size in bytes of `CUfileStatsLevel3_t`.
    pub fn level3_size(self) -> usize {
        match self {
            StatsLayout::V1_15 => size_of::<v1_15::CUfileStatsLevel3_t>(),
            StatsLayout::V1_19 => size_of::<v1_19::CUfileStatsLevel3_t>(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::mem::offset_of;

    use super::*;

    // The generated files carry bindgen's compile-time layout assertions,
    // computed by clang from each header. These tests state the difference
    // between the two layouts, which is what gds-core relies on.

    #[test]
    fn level1_grew_by_the_vector_io_counters() {
        let counters = 2 * size_of::<v1_19::CUfileOpCounter_t>() + 10 * size_of::<u64>();
        assert_eq!(size_of::<v1_15::CUfileStatsLevel1_t>(), 512);
        assert_eq!(size_of::<v1_19::CUfileStatsLevel1_t>(), 512 + counters);
        assert_eq!(offset_of!(v1_19::CUfileStatsLevel1_t, readv_ops), 512);
    }

    #[test]
    fn per_gpu_table_moved_but_kept_its_shape() {
        assert_eq!(offset_of!(v1_15::CUfileStatsLevel3_t, per_gpu_stats), 1032);
        assert_eq!(offset_of!(v1_19::CUfileStatsLevel3_t, per_gpu_stats), 1144);
        assert_eq!(
            size_of::<v1_15::CUfilePerGpuStats_t>(),
            size_of::<v1_19::CUfilePerGpuStats_t>()
        );
        assert_eq!(
            offset_of!(v1_15::CUfilePerGpuStats_t, n_posix_reads),
            offset_of!(v1_19::CUfilePerGpuStats_t, n_posix_reads)
        );
        assert_eq!(StatsLayout::V1_15.level3_size(), 5000);
        assert_eq!(StatsLayout::V1_19.level3_size(), 5112);
        assert_eq!(StatsLayout::V1_15.level2_size(), 1024);
        assert_eq!(StatsLayout::V1_19.level2_size(), 1136);
    }

    #[test]
    fn layout_follows_the_library_version() {
        assert_eq!(
            StatsLayout::for_version(LibraryVersion(1150)),
            Ok(StatsLayout::V1_15)
        );
        assert_eq!(
            StatsLayout::for_version(LibraryVersion(1180)),
            Ok(StatsLayout::V1_15)
        );
        assert_eq!(
            StatsLayout::for_version(LibraryVersion(1190)),
            Ok(StatsLayout::V1_19)
        );
        assert_eq!(
            StatsLayout::for_version(LibraryVersion(1200)),
            Ok(StatsLayout::V1_19)
        );
        assert!(matches!(
            StatsLayout::for_version(LibraryVersion(1140)),
            Err(UnknownLayout::TooOld(_))
        ));
        assert!(matches!(
            StatsLayout::for_version(LibraryVersion(1210)),
            Err(UnknownLayout::TooNew(_))
        ));
        assert!(matches!(
            StatsLayout::for_version(LibraryVersion(2000)),
            Err(UnknownLayout::TooNew(_))
        ));
    }
}
