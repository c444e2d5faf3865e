//! Device-memory requests of a `FileHandle`.
//!
//! Work queued on the memory's stream finishes first (cudarc memory names
//! its stream). The range is checked against what CUDA knows about it
//! before any I/O: it must be device memory of the named GPU, and the
//! allocation must hold the whole request. Then, per the plan's route:
//! * cuFile: each task calls `cuFileRead`/`cuFileWrite` with the base cuFile
//!   knows the buffer by (its registration, else its allocation) and the
//!   offset into it; cuFile's statistics around the request and the plan's
//!   work-unit prediction go into the report;
//! * POSIX: each task streams through its worker's pinned double buffers;
//!   below `gds_threshold` the whole request is one task on the calling
//!   thread.
//!
//! Copies still in flight are waited for before the call returns, also when
//! a task failed: no call returns while its memory may still be written.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use cudarc::driver::CudaStream;

use super::{Inner, Transfer};
use crate::buffer::DeviceRange;
use crate::error::{Error, Result};
use crate::gpu::{self, StagedCopies};
use crate::path_report::{CuFileLayer, DirectIoStatus, DirectIoUse, NotCalledReason, Operation};
use crate::plan::{self, Request};
use crate::routing::{Backend, FileDecision, MemoryKind};
use crate::task_runner::TaskOutcome;
use crate::{Settings, cufile};

impl Inner {
    pub(super) fn device_transfer(
        &self,
        settings: &Settings,
        request: Request,
        range: DeviceRange,
        after: Option<&Arc<CudaStream>>,
        cancel: &AtomicBool,
    ) -> Result<Transfer> {
        gds_core::cuda::probe()?;
        if let Some(stream) = after {
            stream
                .synchronize()
                .map_err(|e| self.cuda_error("cuStreamSynchronize", e, request.file_offset))?;
        }
        let allocation_base = self.check_device_range(request, range)?;
        let direct_io = DirectIoUse {
            status: DirectIoStatus::NotForDeviceMemory,
            bytes: 0,
        };
        let mut plan = plan::plan(request, settings, &self.routing, None);
        match (&self.cufile, plan.route.backend) {
            (Some(handle), Backend::Cufile) => {
                let (base, buffer_offset, registration) =
                    cufile::base_and_offset(range.ptr, allocation_base);
                plan.cufile = cufile::split(handle, registration);
                let ctx = gpu::context(range.ordinal)?;
                let evidence = cufile::Evidence::start(handle);
                let run = |t: crate::task::Task| -> Result<TaskOutcome> {
                    ctx.bind_to_thread()
                        .map_err(|e| self.cuda_error("cuCtxSetCurrent", e, t.file_offset))?;
                    let at = buffer_offset + t.buffer_offset;
                    let size = t.size as usize;
                    // SAFETY: the range was checked above to lie inside a live
                    // device allocation of GPU `ordinal`; whoever made the
                    // range vouched that it stays allocated and unshared.
                    let moved = unsafe {
                        match request.operation {
                            Operation::Read => {
                                gds_core::io::read(handle, base, size, t.file_offset, at)
                            }
                            Operation::Write => {
                                gds_core::io::write(handle, base, size, t.file_offset, at)
                            }
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
                let totals = self.run(&plan, cancel, &run)?;
                let layer = evidence.finish(&plan, registration);
                Ok(self.report(&plan, &totals, direct_io, layer))
            }
            _ => {
                let chunk = gpu::staging_chunk(settings);
                let copies = Mutex::new(StagedCopies::default());
                // Cold ranges of a read are read with O_DIRECT into the
                // (page-aligned) pinned buffers.
                let cold_direct = match request.operation {
                    Operation::Read if settings.cold_reads_direct() => {
                        self.direct_descriptor().ok()
                    }
                    _ => None,
                };
                let run = |t: crate::task::Task| -> Result<TaskOutcome> {
                    let memory = DeviceRange {
                        ordinal: range.ordinal,
                        ptr: range.ptr + t.buffer_offset,
                        len: t.size as usize,
                    };
                    let (direct, cold) = match request.operation {
                        Operation::Read => crate::posix::cold_read(
                            &self.file,
                            cold_direct,
                            t.file_offset,
                            memory.len,
                        ),
                        Operation::Write => (None, None),
                    };
                    // SAFETY: `memory` lies inside the request's range, which
                    // was checked above; tasks of one split do not overlap.
                    let bytes = unsafe {
                        match request.operation {
                            Operation::Read => {
                                let (n, in_flight) = gpu::read_to_device(
                                    &self.file,
                                    direct,
                                    &self.path,
                                    t.file_offset,
                                    memory,
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
                                memory,
                                chunk,
                            )?,
                        }
                    };
                    Ok(TaskOutcome {
                        bytes: bytes as u64,
                        direct_bytes: if direct.is_some() { bytes as u64 } else { 0 },
                        cold,
                        ..Default::default()
                    })
                };
                let totals = self.run(&plan, cancel, &run);
                // Whatever happened, no copy may land after we return.
                let landed = copies
                    .into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    .wait();
                let totals = totals?;
                landed?;
                let layer = CuFileLayer::NotCalled {
                    reason: NotCalledReason::PosixRoute,
                };
                let direct_io = match &totals.cold {
                    Some(first) => DirectIoUse {
                        status: DirectIoStatus::ColdReads {
                            direct_tasks: totals.cold_direct_tasks,
                            first: first.clone(),
                        },
                        bytes: totals.direct_bytes,
                    },
                    None => direct_io,
                };
                Ok(self.report(&plan, &totals, direct_io, layer))
            }
        }
    }

    /// Enqueue the request as one `cuFileReadAsync` / `cuFileWriteAsync`
    /// on `stream`, when the plan sends it to cuFile and libcufile has the
    /// stream API (`None` otherwise: the caller takes the gated path).
    pub(super) fn cufile_on_stream(
        &self,
        settings: &Settings,
        request: Request,
        range: DeviceRange,
        stream: &Arc<CudaStream>,
    ) -> Result<Option<CuFileOnStream>> {
        let plan = plan::plan(request, settings, &self.routing, None);
        let (Some(handle), Backend::Cufile) = (&self.cufile, plan.route.backend) else {
            return Ok(None);
        };
        // Only with a direct path: in its compatibility mode, libcufile
        // 1.15's cuFileReadAsync blocks the caller until the stream's queued
        // work is done (the gated path returns at once).
        if !matches!(
            self.routing.decision,
            FileDecision::AutoDirectPath | FileDecision::CompatOff { direct_path: true }
        ) {
            return Ok(None);
        }
        gds_core::cuda::probe()?;
        let allocation_base = self.check_device_range(request, range)?;
        let (base, buffer_offset, registration) =
            cufile::base_and_offset(range.ptr, allocation_base);
        let ctx = gpu::context(range.ordinal)?;
        ctx.bind_to_thread()
            .map_err(|e| self.cuda_error("cuCtxSetCurrent", e, request.file_offset))?;
        let mut plan = plan.as_one_stream_operation();
        plan.cufile = cufile::split(handle, registration);
        let evidence = cufile::Evidence::start(handle);
        let size = request.size as usize;
        let raw_stream = stream.cu_stream().cast();
        // SAFETY: the range was checked to lie in a live allocation of its
        // GPU; whoever made it vouched that it stays allocated and unshared
        // until the request is waited for, and `CuFileOnStream` (owned by a
        // StreamIo that waits on drop) keeps the arguments until the stream
        // has run the operation.
        let op = unsafe {
            match request.operation {
                Operation::Read => gds_core::stream::read_async(
                    handle,
                    base,
                    size,
                    request.file_offset,
                    buffer_offset,
                    raw_stream,
                ),
                Operation::Write => gds_core::stream::write_async(
                    handle,
                    base,
                    size,
                    request.file_offset,
                    buffer_offset,
                    raw_stream,
                ),
            }
        };
        let op = match op {
            Ok(op) => op,
            // No stream API in this libcufile: the gated path serves it.
            Err(gds_core::Error::MissingSymbol(_)) => return Ok(None),
            Err(source) => {
                return Err(Error::CuFile {
                    path: self.path.clone(),
                    source: Box::new(source),
                });
            }
        };
        let mut done = gpu::event::Event::new(&ctx)?;
        if let Err(e) = done.record(stream) {
            // Without the event, wait for the whole stream before letting go.
            let _ = stream.synchronize();
            return Err(e);
        }
        Ok(Some(CuFileOnStream {
            op,
            done,
            plan,
            evidence,
            registration,
        }))
    }

    /// Wait for an operation enqueued by `cufile_on_stream`; its report.
    pub(super) fn finish_on_stream(&self, mut on: CuFileOnStream) -> Result<Transfer> {
        on.done.wait()?;
        // SAFETY: the event recorded after the operation has completed.
        let bytes = unsafe { on.op.result() }.map_err(|source| Error::CuFile {
            path: self.path.clone(),
            source: Box::new(source),
        })?;
        let layer = on.evidence.finish(&on.plan, on.registration);
        let totals = crate::task_runner::Totals {
            bytes: bytes as u64,
            ..Default::default()
        };
        let direct_io = DirectIoUse {
            status: DirectIoStatus::NotForDeviceMemory,
            bytes: 0,
        };
        Ok(self.report(&on.plan, &totals, direct_io, layer))
    }

    /// A failed CUDA call made for a request of this file.
    fn cuda_error(&self, call: &'static str, e: cudarc::driver::DriverError, offset: u64) -> Error {
        Error::Cuda {
            call,
            code: gds_core::cuda::CudaResult(e.0 as u32),
            path: Some(self.path.clone()),
            offset: Some(offset),
        }
    }

    /// Refuse, before any I/O, a range that is not device memory of its GPU
    /// or does not fit in its allocation. Returns the allocation's base.
    fn check_device_range(&self, request: Request, range: DeviceRange) -> Result<u64> {
        let refuse = |problem: String| Error::DeviceBuffer {
            operation: request.operation,
            path: self.path.clone(),
            offset: request.file_offset,
            ordinal: range.ordinal,
            ptr: range.ptr,
            len: range.len,
            problem,
        };
        if range.len == 0 {
            return Ok(range.ptr);
        }
        let info = gpu::pointer_info(range.ptr)?;
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

/// A cuFile operation enqueued on a stream, and what its report needs.
pub(crate) struct CuFileOnStream {
    op: gds_core::stream::StreamOp,
    /// Recorded on the stream right after the operation.
    done: gpu::event::Event,
    plan: crate::plan::Plan,
    evidence: cufile::Evidence,
    registration: gds_core::schedule::Registration,
}

impl CuFileOnStream {
    pub(crate) fn is_done(&self) -> bool {
        self.done.is_done()
    }

    /// Block until the stream has run the operation; `false` when that
    /// cannot be known (the event failed: the context is broken).
    pub(crate) fn wait_quietly(&mut self) -> bool {
        self.done.wait().is_ok()
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
