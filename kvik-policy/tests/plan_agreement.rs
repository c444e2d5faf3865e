//! What `FileHandle::plan` says a request will do is what the request does:
//! on a grid of requests (read and write; host and device memory; compat
//! ON, AUTO and OFF; sizes around `gds_threshold` and the task size, with
//! the threshold below and above the task size; aligned and unaligned
//! offsets), the executed request's path report carries the planned route
//! (backend and reason), execution (calling thread or pool, and threads),
//! task size and task runs; where cuFile ran, the report's predicted work
//! units are the plan's under cuFile's own settings.
//!
//! Host memory with compat ON and AUTO runs everywhere. Device memory needs
//! a GPU, compat OFF needs a GPU and libcufile: without them those cases
//! say "skipped" (and fail under `KVIK_REQUIRE_GPU=1`).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use gds_core::schedule::Registration;
use kvik_policy::path_report::NotCalledReason;
use kvik_policy::plan::{self, CuFileSplit, Execution, Request};
use kvik_policy::routing::RouteReason;
use kvik_policy::{
    Backend, CompatMode, CuFileLayer, FileHandle, MemoryKind, OpenMode, OpenOptions, Operation,
    Transfer,
};
use kvik_test_support::{TestFile, gpu_and_cufile_or_skip, gpu_or_skip, random_bytes};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const THREADS: usize = 4;
const DEVICE: MemoryKind = MemoryKind::Device { ordinal: 0 };

/// (task size, gds_threshold): the threshold below the task size, and above
/// it (where a device request below the threshold is one task whatever its
/// size: the case an earlier `kvik plan` got wrong).
const SPLITS: [(u64, u64); 2] = [(MIB, 256 * KIB), (256 * KIB, 2 * MIB)];

/// Sizes on both sides of every boundary of both splits.
fn sizes() -> Vec<u64> {
    let mut sizes = vec![1, 4095, 4097];
    for (task, threshold) in SPLITS {
        for edge in [task, threshold, 2 * task] {
            sizes.extend([edge - 1, edge, edge + 1]);
        }
    }
    sizes.push(3 * MIB + 4097);
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

const OFFSETS: [u64; 2] = [0, 4097];

/// Where device requests land and come from.
struct Gpu {
    stream: Arc<CudaStream>,
    /// cuFile's execution settings, for the work units of cuFile requests
    /// (known where compat OFF runs).
    cufile: Option<cufile_config::ExecutionConfig>,
}

/// A request's memory, filled (or to be written from) as the test says.
enum Memory {
    Host(Vec<u8>),
    Device(CudaSlice<u8>),
}

/// Run every request of the grid on `file` (opened with `compat`, `task`,
/// `threshold`) in `memory`, and check its report against its plan.
fn check_grid(compat: CompatMode, memory: MemoryKind, gpu: Option<&Gpu>) -> usize {
    let max = *sizes().last().unwrap() + OFFSETS[1];
    let data = random_bytes(max as usize, 7);
    let source = TestFile::new("kvik-plan-agreement", &data);
    let sink = TestFile::new("kvik-plan-agreement-out", &[]);
    let mut checked = 0;
    for (task, threshold) in SPLITS {
        let open = |path: &TestFile, mode| {
            OpenOptions::new(mode)
                .compat_mode(compat)
                .task_size(task)
                .gds_threshold(threshold)
                .num_threads(THREADS)
                .open(path)
                .unwrap_or_else(|e| panic!("open with compat {compat}: {e}"))
        };
        let reader = open(&source, OpenMode::Read);
        let writer = open(&sink, OpenMode::ReadWrite);
        for size in sizes() {
            for offset in OFFSETS {
                let read = Request::read(offset, size, memory);
                let mut buf = alloc(memory, gpu, size);
                let done = transfer(&reader, &mut buf, read);
                assert_eq!(done.bytes as u64, size, "{read:?}");
                assert!(
                    contents(&buf, gpu) == data[offset as usize..][..size as usize],
                    "{read:?}: wrong bytes"
                );
                agree(&reader, read, &done, gpu, (task, threshold));

                let write = Request::write(offset, size, memory);
                let done = transfer(&writer, &mut buf, write);
                assert_eq!(done.bytes as u64, size, "{write:?}");
                agree(&writer, write, &done, gpu, (task, threshold));
                checked += 2;
            }
        }
    }
    checked
}

fn alloc(memory: MemoryKind, gpu: Option<&Gpu>, size: u64) -> Memory {
    match memory {
        MemoryKind::Host => Memory::Host(vec![0; size as usize]),
        MemoryKind::Device { .. } => {
            let gpu = gpu.expect("device memory only where a GPU was found");
            Memory::Device(gpu.stream.alloc_zeros::<u8>(size as usize).unwrap())
        }
    }
}

fn transfer(file: &FileHandle, buf: &mut Memory, request: Request) -> Transfer {
    let offset = request.file_offset;
    let done = match (request.operation, buf) {
        (Operation::Read, Memory::Host(v)) => file.read_with_report(v, offset),
        (Operation::Read, Memory::Device(d)) => file.read_with_report(d, offset),
        (Operation::Write, Memory::Host(v)) => file.write_with_report(&*v, offset),
        (Operation::Write, Memory::Device(d)) => file.write_with_report(&*d, offset),
    };
    done.unwrap_or_else(|e| panic!("{request:?}: {e}"))
}

fn contents(buf: &Memory, gpu: Option<&Gpu>) -> Vec<u8> {
    match buf {
        Memory::Host(v) => v.clone(),
        Memory::Device(d) => gpu.unwrap().stream.clone_dtoh(d).unwrap(),
    }
}

/// The plan of `request` (asked before it ran) against what its report says.
fn agree(
    file: &FileHandle,
    request: Request,
    done: &Transfer,
    gpu: Option<&Gpu>,
    split: (u64, u64),
) {
    let planned = file.plan(request).unwrap();
    let k = &done.report.kvik;
    let what = format!("{request:?} with (task size, gds_threshold) {split:?}");
    assert_eq!(k.route, planned.route, "route of {what}");
    assert!(k.other_routes.is_empty(), "{what}");
    assert_eq!(k.execution, planned.execution, "execution of {what}");
    assert_eq!(k.task_size, planned.task_size, "task size of {what}");
    assert_eq!(k.tasks, planned.tasks().runs(), "task runs of {what}");
    assert_eq!(done.report.task_count(), planned.task_count(), "{what}");

    // The plan itself follows KvikIO's rules (so agreement is not two
    // copies of one mistake).
    let (task, threshold) = split;
    let below = matches!(request.memory, MemoryKind::Device { .. }) && request.size < threshold;
    let page = kvik_policy::task::page_size();
    let expected_tasks = if below || request.size <= task.max(page) {
        1
    } else {
        request.size.div_ceil(task)
    };
    assert_eq!(planned.task_count(), expected_tasks, "{what}");
    let expected_execution = if expected_tasks == 1 {
        Execution::CallingThread
    } else {
        Execution::Pool { threads: THREADS }
    };
    assert_eq!(planned.execution, expected_execution, "{what}");
    if below {
        assert!(
            matches!(planned.route.reason, RouteReason::BelowGdsThreshold { .. }),
            "{what}"
        );
    }

    match (&done.report.cufile, planned.route.backend) {
        (CuFileLayer::NotCalled { reason }, Backend::Posix) => {
            let expected = match request.memory {
                MemoryKind::Host => NotCalledReason::HostMemory,
                MemoryKind::Device { .. } => NotCalledReason::PosixRoute,
            };
            assert_eq!(*reason, expected, "{what}");
        }
        (
            CuFileLayer::Called {
                predicted_units,
                registered_buffer,
                ..
            },
            Backend::Cufile,
        ) => {
            assert!(!registered_buffer, "{what}");
            let execution = gpu
                .and_then(|g| g.cufile)
                .expect("cuFile ran, so its settings are known");
            let settings = file.settings().unwrap();
            let with_units = plan::plan(
                request,
                &settings,
                file.routing(),
                Some(CuFileSplit {
                    execution,
                    registration: Registration::Unregistered,
                }),
            );
            assert_eq!(*predicted_units, with_units.total_work_units(), "{what}");
            assert!(
                predicted_units.is_some_and(|n| n >= planned.task_count()),
                "{what}"
            );
        }
        (layer, backend) => panic!("{what}: planned {backend}, cuFile layer {layer:?}"),
    }
}

#[test]
fn host_requests_run_as_planned_with_compat_on_and_auto() {
    for compat in [CompatMode::On, CompatMode::Auto] {
        let checked = check_grid(compat, MemoryKind::Host, None);
        assert!(checked > 100, "{checked} requests");
    }
}

fn gpu(test: &str, with_cufile: bool) -> Option<Gpu> {
    let cufile = if with_cufile {
        gpu_and_cufile_or_skip(test)?;
        let driver = gds_core::Driver::open().unwrap_or_else(|e| panic!("cuFileDriverOpen: {e}"));
        Some(
            driver
                .parameters()
                .execution()
                .expect("cuFile's execution settings"),
        )
    } else {
        gpu_or_skip(test)?;
        None
    };
    let stream = kvik_policy::gpu::context(0).unwrap().default_stream();
    Some(Gpu { stream, cufile })
}

#[test]
fn device_requests_run_as_planned_with_compat_on_and_auto() {
    let Some(gpu) = gpu(
        "device_requests_run_as_planned_with_compat_on_and_auto",
        false,
    ) else {
        return;
    };
    for compat in [CompatMode::On, CompatMode::Auto] {
        check_grid(compat, DEVICE, Some(&gpu));
    }
}

#[test]
fn requests_run_as_planned_with_compat_off() {
    // cuFile takes device requests of at least gds_threshold (in its own
    // compatibility mode where there is no direct path); host requests
    // and smaller ones stay POSIX.
    let Some(gpu) = gpu("requests_run_as_planned_with_compat_off", true) else {
        return;
    };
    check_grid(CompatMode::Off, MemoryKind::Host, Some(&gpu));
    check_grid(CompatMode::Off, DEVICE, Some(&gpu));
}
