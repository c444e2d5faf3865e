//! Device-memory requests of a `FileHandle`.
//!
//! The range is checked against what CUDA knows about it before any I/O (it
//! must be device memory of the named GPU, and the allocation must hold the
//! whole request). Then, per the request's route:
//! * cuFile: each task calls `cuFileRead`/`cuFileWrite` with the base cuFile
//!   knows the buffer by (its registration, else its allocation) and the
//!   offset into it; cuFile's statistics around the request and the
//!   scheduling model's prediction go into the report;
//! * POSIX: each task streams through its worker's pinned double buffers
//!   (`gpu::read_to_device` / `write_from_device`); below `gds_threshold` the
//!   whole request is one task on the calling thread.
//!
//! Copies still in flight are waited for before the call returns, also when
//! a task failed: no call returns while its memory may still be written.

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use super::{Inner, Transfer};
use crate::buffer::DeviceRange;
use crate::error::{Error, Result};
use crate::gpu::{self, StagedCopies};
use crate::path_report::{CuFileLayer, DirectIoUse, KvikLayer, Operation, PathReport, TaskReport};
use crate::posix::TaskOutcome;
use crate::routing::{Backend, MemoryKind, RequestRoute};
use crate::task::{self, Task};
use crate::{Settings, cufile};

impl Inner {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn device_transfer(
        &self,
        settings: &Settings,
        route: RequestRoute,
        operation: Operation,
        range: DeviceRange,
        offset: u64,
        cancel: &AtomicBool,
        inline: bool,
    ) -> Result<Transfer> {
        gds_core::cuda::probe()?;
        let len = range.len as u64;
        let allocation_base = self.check_device_range(operation, range, offset)?;
        let small = len < settings.gds_threshold();
        let tasks: Vec<Task> = if small {
            task::split(offset, len, len.max(1)).collect()
        } else {
            task::split(offset, len, settings.task_size()).collect()
        };
        let (outcomes, cufile_layer) = match (&self.cufile, route.backend) {
            (Some(handle), Backend::Cufile) => {
                let (base, buffer_offset, registration) =
                    cufile::base_and_offset(range.ptr, allocation_base);
                let ctx = gpu::context(range.ordinal)?;
                let evidence = cufile::Evidence::start(handle);
                let run = |t: Task, (): ()| -> Result<TaskOutcome> {
                    ctx.bind_to_thread().map_err(|e| Error::Cuda {
                        call: "cuCtxSetCurrent",
                        code: gds_core::cuda::CudaResult(e.0 as u32),
                        path: Some(self.path.clone()),
                        offset: Some(t.file_offset),
                    })?;
                    let at = buffer_offset + t.buffer_offset;
                    // SAFETY: the range was checked above to lie inside a live
                    // device allocation of GPU `ordinal` (the caller of
                    // DeviceSlice(Mut)::from_raw guarantees it stays allocated).
                    let moved = unsafe {
                        match operation {
                            Operation::Read => {
                                gds_core::io::read(handle, base, t.size as usize, t.file_offset, at)
                            }
                            Operation::Write => gds_core::io::write(
                                handle,
                                base,
                                t.size as usize,
                                t.file_offset,
                                at,
                            ),
                        }
                    };
                    let bytes = moved.map_err(|source| Error::CuFile {
                        path: self.path.clone(),
                        source: Box::new(source),
                    })?;
                    Ok(TaskOutcome {
                        bytes: bytes as u64,
                        ..Default::default()
                    })
                };
                let work = tasks.iter().map(|t| (*t, ())).collect();
                let outcomes =
                    self.run_tasks(settings.num_threads(), work, cancel, inline, &run)?;
                (outcomes, evidence.finish(operation, &tasks, registration))
            }
            _ => {
                let chunk = settings
                    .bounce_buffer_size()
                    .min(settings.task_size())
                    .max(1) as usize;
                let copies = Mutex::new(StagedCopies::default());
                let run = |t: Task, (): ()| -> Result<TaskOutcome> {
                    let at = range.ptr + t.buffer_offset;
                    let size = t.size as usize;
                    let bytes = match operation {
                        Operation::Read => {
                            let (n, in_flight) = gpu::read_to_device(
                                &self.file,
                                &self.path,
                                t.file_offset,
                                size,
                                at,
                                range.ordinal,
                                chunk,
                            )?;
                            copies
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .merge(in_flight);
                            n
                        }
                        Operation::Write => gpu::write_from_device(
                            &self.file,
                            &self.path,
                            t.file_offset,
                            size,
                            at,
                            range.ordinal,
                            chunk,
                        )?,
                    };
                    Ok(TaskOutcome {
                        bytes: bytes as u64,
                        ..Default::default()
                    })
                };
                let work = tasks.iter().map(|t| (*t, ())).collect();
                // Below gds_threshold: one task, on the calling thread (as KvikIO).
                let outcomes =
                    self.run_tasks(settings.num_threads(), work, cancel, inline || small, &run);
                let landed = copies
                    .into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    .wait();
                let outcomes = outcomes?;
                landed?;
                let reason = if self.routing.device_backend == Backend::Cufile {
                    route.reason.clone()
                } else {
                    format!(
                        "the file is routed to POSIX (effective compat mode {})",
                        self.routing.effective
                    )
                };
                (outcomes, CuFileLayer::not_called(reason))
            }
        };

        let bytes = super::contiguous_bytes(&tasks, &outcomes);
        let report = PathReport {
            operation,
            path: self.path.clone(),
            file_offset: offset,
            requested_bytes: len,
            bytes,
            memory: MemoryKind::Device {
                ordinal: range.ordinal,
            },
            kvik: KvikLayer {
                requested_compat_mode: self.routing.requested,
                effective_compat_mode: self.routing.effective,
                backend: route.backend,
                reason: route.reason,
                file_reasons: self.routing.reasons.clone(),
                threads: if small { 1 } else { settings.num_threads() },
                task_size: settings.task_size(),
                direct_io: DirectIoUse {
                    requested: false,
                    status: "not used for device memory (cuFile opens its own O_DIRECT descriptor)"
                        .into(),
                    bytes: 0,
                },
                tasks: tasks
                    .iter()
                    .zip(&outcomes)
                    .map(|(t, o)| TaskReport {
                        file_offset: t.file_offset,
                        size: t.size,
                        backend: if matches!(cufile_layer, CuFileLayer::Called { .. }) {
                            Backend::Cufile
                        } else {
                            Backend::Posix
                        },
                        bytes: o.bytes,
                        direct_io_bytes: 0,
                    })
                    .collect(),
            },
            cufile: cufile_layer,
        };
        Ok(Transfer {
            bytes: bytes as usize,
            report,
        })
    }

    /// Refuse, before any I/O, a range that is not device memory of its GPU
    /// or does not fit in its allocation. Returns the allocation's base.
    fn check_device_range(
        &self,
        operation: Operation,
        range: DeviceRange,
        offset: u64,
    ) -> Result<u64> {
        let refuse = |problem: String| Error::DeviceBuffer {
            operation,
            path: self.path.clone(),
            offset,
            ordinal: range.ordinal,
            ptr: range.ptr,
            len: range.len,
            problem,
        };
        if range.len == 0 {
            return Ok(range.ptr);
        }
        let info = gpu::pointer_info(range.ptr);
        match info.memory {
            MemoryKind::Host => {
                return Err(refuse(
                    "CUDA does not know this address as device memory".into(),
                ));
            }
            MemoryKind::Device { ordinal } if ordinal != range.ordinal && !info.managed => {
                return Err(refuse(format!("the memory belongs to GPU {ordinal}")));
            }
            MemoryKind::Device { .. } => {}
        }
        let available = info.allocation_size.saturating_sub(info.offset);
        if info.allocation_size > 0 && available < range.len as u64 {
            return Err(refuse(format!(
                "the allocation holds {available} bytes from this address, fewer than the {} requested",
                range.len
            )));
        }
        Ok(info.allocation_base)
    }
}

#[cfg(test)]
mod tests {
    use gds_core::schedule::Registration;

    use super::*;

    #[test]
    fn registration_is_unregistered_for_unknown_pointers() {
        let (base, off, reg) = cufile::base_and_offset(0x1000_4000, 0x1000_0000);
        assert_eq!(
            (base, off, reg),
            (0x1000_0000, 0x4000, Registration::Unregistered)
        );
    }
}
