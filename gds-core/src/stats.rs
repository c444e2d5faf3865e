//! In-process cuFile statistics: the `gds_stats` view without a second process.
//!
//! A [`StatsSnapshot`] is read with the structure layout of the loaded
//! library's version (libcufile 1.15–1.18 and 1.19+ differ; see
//! `cufile_sys::stats`). Two snapshots give a [`StatsDelta`]: per GPU, how many
//! reads cuFile scheduled (`n`), how many took the direct path (`nvfs`), its
//! compatibility path (`posix`) or P2P, how many were unaligned, errors and
//! bytes. That is what proves which path a request took.

use cufile_sys::CuFileLibrary;
use cufile_sys::cufile_fn;
use cufile_sys::stats::{StatsLayout, v1_15, v1_19};

use crate::driver::Driver;
use crate::error::{Error, Result};

/// Read or write counters of one GPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct IoCounters {
    /// Work units cuFile scheduled (`n_total_reads` / `n_total_writes`).
    pub n: u64,
    /// Served by nvidia-fs: the direct path.
    pub nvfs: u64,
    /// Served by cuFile's compatibility path (staged through host memory).
    pub posix: u64,
    /// Served by PCI P2PDMA.
    pub p2p: u64,
    pub unaligned: u64,
    /// Served through dynamic routing.
    pub dynamic_routing: u64,
    pub errors: u64,
    pub bytes: u64,
}

impl IoCounters {
    /// The sum of two sets of counters.
    pub fn plus(&self, other: &IoCounters) -> IoCounters {
        IoCounters {
            n: self.n + other.n,
            nvfs: self.nvfs + other.nvfs,
            posix: self.posix + other.posix,
            p2p: self.p2p + other.p2p,
            unaligned: self.unaligned + other.unaligned,
            dynamic_routing: self.dynamic_routing + other.dynamic_routing,
            errors: self.errors + other.errors,
            bytes: self.bytes + other.bytes,
        }
    }

    fn delta(&self, before: &IoCounters) -> IoCounters {
        IoCounters {
            n: self.n.saturating_sub(before.n),
            nvfs: self.nvfs.saturating_sub(before.nvfs),
            posix: self.posix.saturating_sub(before.posix),
            p2p: self.p2p.saturating_sub(before.p2p),
            unaligned: self.unaligned.saturating_sub(before.unaligned),
            dynamic_routing: self.dynamic_routing.saturating_sub(before.dynamic_routing),
            errors: self.errors.saturating_sub(before.errors),
            bytes: self.bytes.saturating_sub(before.bytes),
        }
    }
}

/// Counters of one GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct GpuCounters {
    /// The GPU's UUID, as hex.
    pub uuid: String,
    pub reads: IoCounters,
    pub writes: IoCounters,
    /// Bytes of device memory registered with cuFile.
    pub registered_bytes: u64,
}

/// Process-wide operation counters (level 1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OpCounters {
    pub read_ok: u64,
    pub read_err: u64,
    pub write_ok: u64,
    pub write_err: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub handle_registers: u64,
    pub buffer_registers: u64,
}

/// One reading of cuFile's counters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StatsSnapshot {
    pub level: u32,
    pub layout: &'static str,
    pub ops: OpCounters,
    /// Per-GPU counters (level 3 only; empty below).
    pub gpus: Vec<GpuCounters>,
}

/// What happened between two snapshots.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct StatsDelta {
    pub ops: OpCounters,
    /// GPUs whose counters moved.
    pub gpus: Vec<GpuCounters>,
}

impl StatsDelta {
    /// Reads summed over GPUs.
    pub fn reads(&self) -> IoCounters {
        sum(self.gpus.iter().map(|g| g.reads))
    }

    /// Writes summed over GPUs.
    pub fn writes(&self) -> IoCounters {
        sum(self.gpus.iter().map(|g| g.writes))
    }

    /// Add a later delta (of a later request) to this one, GPU by GPU.
    pub fn merge(&mut self, later: &StatsDelta) {
        let (a, b) = (&mut self.ops, &later.ops);
        a.read_ok += b.read_ok;
        a.read_err += b.read_err;
        a.write_ok += b.write_ok;
        a.write_err += b.write_err;
        a.read_bytes += b.read_bytes;
        a.write_bytes += b.write_bytes;
        a.handle_registers += b.handle_registers;
        a.buffer_registers += b.buffer_registers;
        for gpu in &later.gpus {
            match self.gpus.iter_mut().find(|g| g.uuid == gpu.uuid) {
                Some(mine) => {
                    mine.reads = mine.reads.plus(&gpu.reads);
                    mine.writes = mine.writes.plus(&gpu.writes);
                    mine.registered_bytes = gpu.registered_bytes;
                }
                None => self.gpus.push(gpu.clone()),
            }
        }
    }
}

fn sum(counters: impl Iterator<Item = IoCounters>) -> IoCounters {
    counters.fold(IoCounters::default(), |a, c| a.plus(&c))
}

impl StatsSnapshot {
    /// Read the counters of the open driver.
    pub fn read(driver: &Driver) -> Result<StatsSnapshot> {
        let level = driver.stats_level();
        if level == 0 {
            return Err(Error::StatsUnavailable {
                reason: "statistics are off (level 0); open the driver with a stats level, or set \
                         CUFILE_STATS_LEVEL"
                    .into(),
            });
        }
        let lib = driver.library();
        let _open = driver.enter("cuFileGetStats")?;
        match layout_of(lib)? {
            StatsLayout::V1_15 => read_layout::<v1_15::CUfileStatsLevel3_t>(lib, level, "1.15"),
            StatsLayout::V1_19 => read_layout::<v1_19::CUfileStatsLevel3_t>(lib, level, "1.19"),
        }
    }

    /// `self - before`, per GPU (matched by UUID).
    pub fn delta_since(&self, before: &StatsSnapshot) -> StatsDelta {
        let ops = OpCounters {
            read_ok: self.ops.read_ok.saturating_sub(before.ops.read_ok),
            read_err: self.ops.read_err.saturating_sub(before.ops.read_err),
            write_ok: self.ops.write_ok.saturating_sub(before.ops.write_ok),
            write_err: self.ops.write_err.saturating_sub(before.ops.write_err),
            read_bytes: self.ops.read_bytes.saturating_sub(before.ops.read_bytes),
            write_bytes: self.ops.write_bytes.saturating_sub(before.ops.write_bytes),
            handle_registers: self
                .ops
                .handle_registers
                .saturating_sub(before.ops.handle_registers),
            buffer_registers: self
                .ops
                .buffer_registers
                .saturating_sub(before.ops.buffer_registers),
        };
        let gpus = self
            .gpus
            .iter()
            .map(|after| {
                let zero = GpuCounters::default();
                let before = before
                    .gpus
                    .iter()
                    .find(|g| g.uuid == after.uuid)
                    .unwrap_or(&zero);
                GpuCounters {
                    uuid: after.uuid.clone(),
                    reads: after.reads.delta(&before.reads),
                    writes: after.writes.delta(&before.writes),
                    registered_bytes: after
                        .registered_bytes
                        .saturating_sub(before.registered_bytes),
                }
            })
            .filter(|g| g.reads != IoCounters::default() || g.writes != IoCounters::default())
            .collect();
        StatsDelta { ops, gpus }
    }
}

/// The statistics layout of the loaded library's version.
pub(crate) fn layout_of(lib: &CuFileLibrary) -> Result<StatsLayout> {
    let version = lib
        .version()
        .map_err(|reason| Error::StatsUnavailable { reason })?;
    StatsLayout::for_version(version).map_err(|e| Error::StatsUnavailable {
        reason: e.to_string(),
    })
}

/// Reset all counters to zero.
pub fn reset(driver: &Driver) -> Result<()> {
    let reset = cufile_fn!(driver.library(), cuFileStatsReset)?;
    let _open = driver.enter("cuFileStatsReset")?;
    // SAFETY: no arguments; the driver is open (held by `_open`).
    let status = unsafe { reset() };
    if status.is_success() {
        Ok(())
    } else {
        Err(Error::CuFile {
            operation: "cuFileStatsReset",
            status,
            path: None,
            log: None,
        })
    }
}

/// The two layouts share field names; this reads either.
trait Level3: Default {
    fn convert(&self, level: u32, layout: &'static str) -> StatsSnapshot;
}

macro_rules! impl_level3 {
    ($module:ident) => {
        impl Level3 for $module::CUfileStatsLevel3_t {
            fn convert(&self, level: u32, layout: &'static str) -> StatsSnapshot {
                let basic = &self.detailed.basic;
                let ops = OpCounters {
                    read_ok: basic.read_ops.ok,
                    read_err: basic.read_ops.err,
                    write_ok: basic.write_ops.ok,
                    write_err: basic.write_ops.err,
                    read_bytes: basic.read_bytes,
                    write_bytes: basic.write_bytes,
                    handle_registers: basic.hdl_register_ops.ok,
                    buffer_registers: basic.buf_register_ops.ok,
                };
                let count = if level >= 3 {
                    (self.num_gpus as usize).min(self.per_gpu_stats.len())
                } else {
                    0
                };
                let gpus = self.per_gpu_stats[..count]
                    .iter()
                    .map(|g| GpuCounters {
                        uuid: g.uuid.iter().map(|b| format!("{:02x}", *b as u8)).collect(),
                        reads: IoCounters {
                            n: g.n_total_reads,
                            nvfs: g.n_nvfs_reads,
                            posix: g.n_posix_reads,
                            p2p: g.n_p2p_reads,
                            unaligned: g.n_unaligned_reads,
                            dynamic_routing: g.n_dr_reads,
                            errors: g.n_reads_err,
                            bytes: g.read_bytes,
                        },
                        writes: IoCounters {
                            n: g.n_total_writes,
                            nvfs: g.n_nvfs_writes,
                            posix: g.n_posix_writes,
                            p2p: g.n_p2p_writes,
                            unaligned: g.n_unaligned_writes,
                            dynamic_routing: g.n_dr_writes,
                            errors: g.n_writes_err,
                            bytes: g.writes_bytes,
                        },
                        registered_bytes: g.reg_bytes,
                    })
                    .collect();
                StatsSnapshot {
                    level,
                    layout,
                    ops,
                    gpus,
                }
            }
        }
    };
}
impl_level3!(v1_15);
impl_level3!(v1_19);

fn read_layout<L: Level3>(
    lib: &CuFileLibrary,
    level: u32,
    layout: &'static str,
) -> Result<StatsSnapshot> {
    let mut stats = Box::<L>::default();
    let ptr = (&mut *stats as *mut L).cast();
    let (operation, status) = if level >= 3 {
        let get = cufile_fn!(lib, cuFileGetStatsL3)?;
        // SAFETY: `stats` has exactly the loaded version's level-3 layout
        // (chosen from its version), so the library writes inside it.
        ("cuFileGetStatsL3", unsafe { get(ptr) })
    } else if level == 2 {
        let get = cufile_fn!(lib, cuFileGetStatsL2)?;
        // SAFETY: level 2 is a prefix of level 3 in both layouts.
        ("cuFileGetStatsL2", unsafe { get(ptr.cast()) })
    } else {
        let get = cufile_fn!(lib, cuFileGetStatsL1)?;
        // SAFETY: level 1 is a prefix of level 3 in both layouts.
        ("cuFileGetStatsL1", unsafe { get(ptr.cast()) })
    };
    if !status.is_success() {
        return Err(Error::CuFile {
            operation,
            status,
            path: None,
            log: None,
        });
    }
    Ok(stats.convert(level, layout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_1_15_level3_structure_converts_per_gpu_counters() {
        let mut raw = v1_15::CUfileStatsLevel3_t {
            num_gpus: 1,
            ..Default::default()
        };
        raw.per_gpu_stats[0].uuid[0] = 0xab_u8 as std::ffi::c_char;
        raw.per_gpu_stats[0].n_total_reads = 4;
        raw.per_gpu_stats[0].n_posix_reads = 4;
        raw.per_gpu_stats[0].read_bytes = 1 << 30;
        raw.detailed.basic.read_ops.ok = 1;
        let snap = raw.convert(3, "1.15");
        assert_eq!(snap.gpus.len(), 1);
        assert!(snap.gpus[0].uuid.starts_with("ab00"));
        assert_eq!(snap.gpus[0].reads.n, 4);
        assert_eq!(snap.ops.read_ok, 1);
        // Below level 3 there are no per-GPU counters to trust.
        assert!(raw.convert(1, "1.15").gpus.is_empty());
    }

    #[test]
    fn merged_deltas_add_per_gpu() {
        let gpu = |uuid: &str, n| GpuCounters {
            uuid: uuid.into(),
            reads: IoCounters {
                n,
                posix: n,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut a = StatsDelta {
            ops: OpCounters {
                read_ok: 1,
                ..Default::default()
            },
            gpus: vec![gpu("a", 2)],
        };
        let b = StatsDelta {
            ops: OpCounters {
                read_ok: 2,
                ..Default::default()
            },
            gpus: vec![gpu("a", 3), gpu("b", 1)],
        };
        a.merge(&b);
        assert_eq!(a.ops.read_ok, 3);
        assert_eq!(a.gpus.len(), 2);
        assert_eq!(a.reads().n, 6);
        assert_eq!(a.gpus[0].reads.posix, 5);
    }

    #[test]
    fn deltas_subtract_per_gpu_and_drop_idle_gpus() {
        let gpu = |uuid: &str, n, posix| GpuCounters {
            uuid: uuid.into(),
            reads: IoCounters {
                n,
                posix,
                bytes: n * 8,
                ..Default::default()
            },
            ..Default::default()
        };
        let before = StatsSnapshot {
            level: 3,
            layout: "1.15",
            ops: OpCounters {
                read_ok: 10,
                ..Default::default()
            },
            gpus: vec![gpu("a", 10, 10), gpu("b", 5, 0)],
        };
        let after = StatsSnapshot {
            level: 3,
            layout: "1.15",
            ops: OpCounters {
                read_ok: 12,
                ..Default::default()
            },
            gpus: vec![gpu("a", 14, 14), gpu("b", 5, 0), gpu("c", 1, 0)],
        };
        let delta = after.delta_since(&before);
        assert_eq!(delta.ops.read_ok, 2);
        let uuids: Vec<&str> = delta.gpus.iter().map(|g| g.uuid.as_str()).collect();
        assert_eq!(uuids, vec!["a", "c"]);
        assert_eq!(delta.gpus[0].reads.n, 4);
        assert_eq!(delta.gpus[0].reads.posix, 4);
        assert_eq!(delta.reads().n, 5);
    }
}
