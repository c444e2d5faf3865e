//! Load a `.safetensors` checkpoint tensor by tensor into GPU memory — one
//! cudarc `CudaSlice` per tensor, typed where the dtype is plain data
//! (`F32` → `CudaSlice<f32>`, `F16` / `BF16` → `CudaSlice<u16>` holding the
//! 16-bit patterns, anything else as bytes) — with one path report for the
//! whole load, and time it against what Rust ML frameworks do today: map
//! the file (`mmap`) and copy each tensor from the mapping to the GPU
//! (`cuMemcpyHtoD` from pageable memory), in the same run, on the same file.
//!
//! ```text
//! cargo run --release -p kvik-policy --example safetensors_load -- PATH \
//!     [--make] [--size 4GiB] [--reps 3] [--cold] [--json FILE]
//! ```
//!
//! * `--make` writes a synthetic checkpoint to PATH first (also when PATH
//!   does not exist): a decoder-only transformer's tensor names and shapes
//!   (bf16 weights, f32 norms, f16 biases, f32 rotary frequencies: a few
//!   hundred tensors from a few KiB to ~190 MiB), `--size` bytes in all
//!   (default 4 GiB), random contents.
//! * Each method runs once untimed (bringing up the pool, the pinned
//!   buffers and the file's pages), which also checks every byte that
//!   arrived against the file; then `--reps` timed loads each, alternating.
//!   `--cold` adds loads with the file's pages dropped from the page cache
//!   before each (`posix_fadvise(DONTNEED)`, no root needed).
//! * Without a GPU it says so and compares the host-memory path instead:
//!   `Vec<T>` per tensor through kvik-policy, against copying out of the
//!   mapping (what a framework's CPU backend does).
//!
//! kvik-policy runs with the settings of the environment (`KVIKIO_*`); the
//! report says which path the bytes took.

use std::fs::File;
use std::io::Read as _;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use bytemuck::Pod;
use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};
use kvik_policy::{FileHandle, PathReport, Settings, gpu, parse_size};
use kvik_test_support::random_bytes;
use safetensors::tensor::Metadata;
use safetensors::{Dtype, View};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const KVIK: &str = "kvik-policy";
const BASELINE: &str = "mmap + cuMemcpyHtoD";
const HOST_BASELINE: &str = "mmap + copy";

fn main() -> Result<()> {
    let args = Args::parse()?;
    if args.make || !args.path.exists() {
        let started = Instant::now();
        let (tensors, bytes) = make_checkpoint(&args.path, args.size)?;
        println!(
            "wrote {}: {tensors} tensors, {:.2} GB, in {:.1} s",
            args.path.display(),
            bytes as f64 / 1e9,
            started.elapsed().as_secs_f64()
        );
    }
    let checkpoint = Checkpoint::read(&args.path)?;
    let sizes: Vec<u64> = checkpoint.tensors.iter().map(|t| t.len).collect();
    println!(
        "{}: {} tensors, {:.2} GB of tensor data (smallest {} B, largest {:.1} MiB)",
        args.path.display(),
        checkpoint.tensors.len(),
        checkpoint.bytes() as f64 / 1e9,
        sizes.iter().min().unwrap_or(&0),
        *sizes.iter().max().unwrap_or(&0) as f64 / (1 << 20) as f64
    );
    let settings = Settings::global()?;
    println!(
        "kvik-policy settings: compat {}, {} threads, task size {}, bounce buffer {}",
        settings.compat_mode(),
        settings.num_threads(),
        kvik_policy::Size(settings.task_size()),
        kvik_policy::Size(settings.bounce_buffer_size())
    );

    let target = match gpu::context(0) {
        Ok(ctx) => {
            println!("memory: GPU 0 (one CudaSlice per tensor)");
            Target::Device(ctx.default_stream())
        }
        Err(why) => {
            println!("memory: host — no GPU here ({why}); comparing the host-memory path instead");
            Target::Host
        }
    };
    let baseline = target.baseline_name();

    // Untimed: warm everything up, and check every byte against the file.
    let (loaded, report) = target.load_kvik(&checkpoint)?;
    target.check(&checkpoint, &loaded)?;
    drop(loaded);
    let loaded = target.load_mmap(&checkpoint)?;
    target.check(&checkpoint, &loaded)?;
    drop(loaded);
    println!("every byte of every tensor checked against the file, both methods");
    println!("path report of one whole load through kvik-policy:\n{report}");

    let mut rows = Vec::new();
    let caches: &[bool] = if args.cold { &[false, true] } else { &[false] };
    for &cold in caches {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..args.reps {
            for method in [KVIK, baseline] {
                if cold {
                    checkpoint.drop_from_page_cache()?;
                }
                let started = Instant::now();
                let loaded = match method {
                    KVIK => target.load_kvik(&checkpoint)?.0,
                    _ => target.load_mmap(&checkpoint)?,
                };
                target.finish()?;
                let seconds = started.elapsed().as_secs_f64();
                drop(loaded);
                let rate = checkpoint.bytes() as f64 / seconds / 1e9;
                if method == KVIK {
                    &mut ours
                } else {
                    &mut theirs
                }
                .push(rate);
            }
        }
        let cache = if cold { "cold" } else { "page-cached" };
        rows.push(Row::new(KVIK, cache, &target, &checkpoint, ours));
        rows.push(Row::new(baseline, cache, &target, &checkpoint, theirs));
    }

    println!(
        "\nsummary (GB/s = 10^9 bytes of tensor data per second, median [min–max] of {} loads)",
        args.reps
    );
    for row in &rows {
        println!(
            "  {:<11} {:<22} {:>7.2} [{:.2}–{:.2}]",
            row.cache, row.method, row.median, row.min, row.max
        );
    }
    for pair in rows.chunks(2) {
        println!(
            "  {}: {KVIK} / {baseline} = {:.2}×",
            pair[0].cache,
            pair[0].median / pair[1].median
        );
    }
    if let Some(path) = &args.json {
        let lines: Vec<String> = rows.iter().map(|r| r.json(&args.path)).collect();
        std::fs::write(path, lines.join("\n") + "\n")?;
    }
    Ok(())
}

struct Args {
    path: PathBuf,
    make: bool,
    size: u64,
    reps: usize,
    cold: bool,
    json: Option<PathBuf>,
}

impl Args {
    fn parse() -> Result<Args> {
        const USAGE: &str =
            "usage: safetensors_load PATH [--make] [--size 4GiB] [--reps 3] [--cold] [--json FILE]";
        let mut args = std::env::args().skip(1);
        let mut parsed = Args {
            path: PathBuf::new(),
            make: false,
            size: 4 << 30,
            reps: 3,
            cold: false,
            json: None,
        };
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or(format!("{arg} needs a value; {USAGE}"));
            match arg.as_str() {
                "--make" => parsed.make = true,
                "--cold" => parsed.cold = true,
                "--size" => parsed.size = parse_size(&value()?)?,
                "--reps" => parsed.reps = value()?.parse()?,
                "--json" => parsed.json = Some(value()?.into()),
                flag if flag.starts_with("--") => {
                    return Err(format!("unknown flag {flag}; {USAGE}").into());
                }
                path => parsed.path = path.into(),
            }
        }
        if parsed.path.as_os_str().is_empty() || parsed.reps == 0 {
            return Err(USAGE.into());
        }
        Ok(parsed)
    }
}

/// A tensor's place in the file.
#[derive(Debug, Clone)]
struct TensorEntry {
    name: String,
    dtype: Dtype,
    /// Offset of the tensor's first byte in the file.
    offset: u64,
    len: u64,
}

/// A checkpoint's tensors, from its header (parsed by the `safetensors`
/// crate; the data is not read here).
struct Checkpoint {
    path: PathBuf,
    tensors: Vec<TensorEntry>,
}

impl Checkpoint {
    fn read(path: &Path) -> Result<Checkpoint> {
        let mut file = File::open(path)?;
        let mut len = [0u8; 8];
        file.read_exact(&mut len)?;
        let header_len = u64::from_le_bytes(len);
        if header_len > 100 << 20 {
            return Err(format!(
                "{}: a {header_len}-byte header is not safetensors",
                path.display()
            )
            .into());
        }
        let mut header = vec![0u8; header_len as usize];
        file.read_exact(&mut header)?;
        let metadata: Metadata = serde_json::from_slice(&header)?;
        let data_start = 8 + header_len;
        let file_len = file.metadata()?.len();
        if data_start + metadata.data_len() as u64 != file_len {
            return Err(format!(
                "{}: the header describes {} data bytes, the file holds {}",
                path.display(),
                metadata.data_len(),
                file_len - data_start
            )
            .into());
        }
        let tensors = metadata
            .offset_keys()
            .into_iter()
            .map(|name| {
                let info = metadata.info(&name).expect("offset_keys names tensors");
                let (start, end) = info.data_offsets;
                TensorEntry {
                    name,
                    dtype: info.dtype,
                    offset: data_start + start as u64,
                    len: (end - start) as u64,
                }
            })
            .collect();
        Ok(Checkpoint {
            path: path.to_path_buf(),
            tensors,
        })
    }

    fn bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.len).sum()
    }

    /// Drop the file's pages from the page cache (they are clean: the file
    /// was synced when made, and nothing writes it).
    fn drop_from_page_cache(&self) -> Result<()> {
        let file = File::open(&self.path)?;
        rustix::fs::fadvise(&file, 0, None::<NonZeroU64>, rustix::fs::Advice::DontNeed)?;
        Ok(())
    }

    /// The file mapped read-only, as `safetensors` users map it.
    fn map(&self) -> Result<Mapping> {
        let file = File::open(&self.path)?;
        let len = file.metadata()?.len() as usize;
        // SAFETY: a new private read-only mapping of a file nobody writes
        // while it is mapped; unmapped in Drop.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len.max(1),
                rustix::mm::ProtFlags::READ,
                rustix::mm::MapFlags::PRIVATE,
                &file,
                0,
            )
        }?;
        Ok(Mapping { ptr, len })
    }
}

/// A read-only file mapping.
struct Mapping {
    ptr: *mut std::ffi::c_void,
    len: usize,
}

impl Mapping {
    fn bytes(&self, t: &TensorEntry) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes for as long as self lives.
        let all = unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) };
        &all[t.offset as usize..(t.offset + t.len) as usize]
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `Checkpoint::map`.
        let _ = unsafe { rustix::mm::munmap(self.ptr, self.len.max(1)) };
    }
}

/// Where the tensors go.
enum Target {
    Device(Arc<CudaStream>),
    Host,
}

/// A loaded tensor: typed where its dtype is plain data.
#[allow(dead_code)] // held for its memory; the variants name the dtypes
enum Tensor<F32, U16, U8> {
    F32(F32),
    /// IEEE half or bfloat16 bit patterns (no `half` crate needed to move them).
    Bits16(U16),
    Bytes(U8),
}

type DeviceTensor = Tensor<CudaSlice<f32>, CudaSlice<u16>, CudaSlice<u8>>;
type HostTensor = Tensor<Vec<f32>, Vec<u16>, Vec<u8>>;

enum Loaded {
    Device(Vec<DeviceTensor>),
    Host(Vec<HostTensor>),
}

/// Call `$load::<T>(args)` with the tensor's element type and wrap the result.
macro_rules! typed {
    ($dtype:expr, $load:ident($($arg:expr),*)) => {
        match $dtype {
            Dtype::F32 => Tensor::F32($load::<f32>($($arg),*)?),
            Dtype::F16 | Dtype::BF16 => Tensor::Bits16($load::<u16>($($arg),*)?),
            _ => Tensor::Bytes($load::<u8>($($arg),*)?),
        }
    };
}

impl Target {
    fn baseline_name(&self) -> &'static str {
        match self {
            Target::Device(_) => BASELINE,
            Target::Host => HOST_BASELINE,
        }
    }

    /// Every tensor through a `FileHandle`, one request per tensor, with the
    /// requests' path reports folded into one.
    fn load_kvik(&self, checkpoint: &Checkpoint) -> Result<(Loaded, PathReport)> {
        let file = FileHandle::open(&checkpoint.path, "r")?;
        let mut report: Option<PathReport> = None;
        let mut fold = |done: kvik_policy::Transfer| match &mut report {
            Some(r) => r.absorb(done.report),
            None => report = Some(done.report),
        };
        let loaded = match self {
            Target::Device(stream) => {
                let mut out = Vec::with_capacity(checkpoint.tensors.len());
                for t in &checkpoint.tensors {
                    out.push(typed!(t.dtype, device_read(stream, &file, t, &mut fold)));
                }
                Loaded::Device(out)
            }
            Target::Host => {
                let mut out = Vec::with_capacity(checkpoint.tensors.len());
                for t in &checkpoint.tensors {
                    out.push(typed!(t.dtype, host_read(&file, t, &mut fold)));
                }
                Loaded::Host(out)
            }
        };
        Ok((loaded, report.ok_or("the checkpoint holds no tensor")?))
    }

    /// Every tensor copied out of the mapped file.
    fn load_mmap(&self, checkpoint: &Checkpoint) -> Result<Loaded> {
        let map = checkpoint.map()?;
        Ok(match self {
            Target::Device(stream) => {
                let mut out = Vec::with_capacity(checkpoint.tensors.len());
                for t in &checkpoint.tensors {
                    out.push(typed!(t.dtype, device_copy(stream, map.bytes(t))));
                }
                Loaded::Device(out)
            }
            Target::Host => {
                let mut out = Vec::with_capacity(checkpoint.tensors.len());
                for t in &checkpoint.tensors {
                    out.push(typed!(t.dtype, host_copy(map.bytes(t))));
                }
                Loaded::Host(out)
            }
        })
    }

    /// Wait until the loaded bytes are in place (copies on the stream).
    fn finish(&self) -> Result<()> {
        if let Target::Device(stream) = self {
            stream.synchronize()?;
        }
        Ok(())
    }

    /// Compare every loaded tensor with the file's bytes.
    fn check(&self, checkpoint: &Checkpoint, loaded: &Loaded) -> Result<()> {
        self.finish()?;
        let map = checkpoint.map()?;
        for (i, t) in checkpoint.tensors.iter().enumerate() {
            let got: Vec<u8> = match (self, loaded) {
                (Target::Device(stream), Loaded::Device(tensors)) => match &tensors[i] {
                    Tensor::F32(s) => bytemuck::cast_slice(&stream.clone_dtoh(s)?).to_vec(),
                    Tensor::Bits16(s) => bytemuck::cast_slice(&stream.clone_dtoh(s)?).to_vec(),
                    Tensor::Bytes(s) => stream.clone_dtoh(s)?,
                },
                (_, Loaded::Host(tensors)) => match &tensors[i] {
                    Tensor::F32(v) => bytemuck::cast_slice(v).to_vec(),
                    Tensor::Bits16(v) => bytemuck::cast_slice(v).to_vec(),
                    Tensor::Bytes(v) => v.clone(),
                },
                _ => unreachable!("loaded where the target says"),
            };
            if got != map.bytes(t) {
                return Err(format!("tensor {} differs from the file", t.name).into());
            }
        }
        Ok(())
    }
}

fn elements<T>(t: &TensorEntry) -> usize {
    t.len as usize / size_of::<T>()
}

fn device_read<T: Pod + DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    file: &FileHandle,
    t: &TensorEntry,
    fold: &mut impl FnMut(kvik_policy::Transfer),
) -> Result<CudaSlice<T>> {
    let mut tensor = stream.alloc_zeros::<T>(elements::<T>(t))?;
    fold(file.read_with_report(&mut tensor, t.offset)?.exact()?);
    Ok(tensor)
}

fn host_read<T: Pod>(
    file: &FileHandle,
    t: &TensorEntry,
    fold: &mut impl FnMut(kvik_policy::Transfer),
) -> Result<Vec<T>> {
    let mut tensor = vec![T::zeroed(); elements::<T>(t)];
    fold(file.read_with_report(&mut tensor, t.offset)?.exact()?);
    Ok(tensor)
}

/// What a framework's CUDA backend does with a mapped tensor: allocate, then
/// `cuMemcpyHtoD` from the mapping (pageable memory: the driver stages it).
fn device_copy<T: Pod + DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    bytes: &[u8],
) -> Result<CudaSlice<T>> {
    let mut tensor = stream.alloc_zeros::<T>(bytes.len() / size_of::<T>())?;
    match bytemuck::try_cast_slice::<u8, T>(bytes) {
        Ok(src) => stream.memcpy_htod(src, &mut tensor)?,
        // An unaligned tensor: copied to aligned memory first, as frameworks do.
        Err(_) => stream.memcpy_htod(&bytemuck::pod_collect_to_vec::<u8, T>(bytes), &mut tensor)?,
    }
    Ok(tensor)
}

/// What a framework's CPU backend does: copy the tensor out of the mapping.
fn host_copy<T: Pod>(bytes: &[u8]) -> Result<Vec<T>> {
    Ok(bytemuck::pod_collect_to_vec(bytes))
}

/// One figure of the summary.
struct Row {
    method: &'static str,
    cache: &'static str,
    memory: &'static str,
    tensors: usize,
    bytes: u64,
    median: f64,
    min: f64,
    max: f64,
}

impl Row {
    fn new(
        method: &'static str,
        cache: &'static str,
        target: &Target,
        c: &Checkpoint,
        mut rates: Vec<f64>,
    ) -> Row {
        rates.sort_by(f64::total_cmp);
        Row {
            method,
            cache,
            memory: match target {
                Target::Device(_) => "device:0",
                Target::Host => "host",
            },
            tensors: c.tensors.len(),
            bytes: c.bytes(),
            median: rates[rates.len() / 2],
            min: rates[0],
            max: rates[rates.len() - 1],
        }
    }

    fn json(&self, path: &Path) -> String {
        serde_json::json!({
            "example": "safetensors_load",
            "file": path,
            "method": self.method,
            "memory": self.memory,
            "cache": self.cache,
            "tensors": self.tensors,
            "bytes": self.bytes,
            "gbps_median": self.median,
            "gbps_min": self.min,
            "gbps_max": self.max,
        })
        .to_string()
    }
}

/// A tensor of the synthetic checkpoint; its bytes are made when written.
struct Synthetic {
    dtype: Dtype,
    shape: Vec<usize>,
    seed: u64,
}

impl View for &Synthetic {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Owned(random_bytes(self.data_len(), self.seed))
    }
    fn data_len(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.bitsize() / 8
    }
}

/// Write a decoder-only transformer's tensors (names and shapes as Hugging
/// Face checkpoints have them), about `size` bytes in all; fsync it.
/// Returns the tensor count and the data bytes.
fn make_checkpoint(path: &Path, size: u64) -> Result<(usize, u64)> {
    // (hidden, intermediate, vocabulary): a 1B-class model for small files,
    // a 3B-class one (~190 MiB embeddings) otherwise.
    let (h, i, vocab) = if size < 2 << 30 {
        (1024, 2816, 32000)
    } else {
        (3072, 8192, 32000)
    };
    let mut tensors: Vec<(String, Synthetic)> = Vec::new();
    let mut add = |name: String, dtype: Dtype, shape: Vec<usize>| {
        let seed = tensors.len() as u64;
        tensors.push((name, Synthetic { dtype, shape, seed }));
    };
    let bf16 = 2;
    let fixed = 2 * vocab * h * bf16 + h * 4;
    let per_layer = (4 * h * h + 3 * h * i) * bf16 + 2 * h * 4 + 3 * h * 2 + (h / 2) * 4;
    let layers = (size as usize)
        .saturating_sub(fixed)
        .div_ceil(per_layer)
        .max(1);
    add(
        "model.embed_tokens.weight".into(),
        Dtype::BF16,
        vec![vocab, h],
    );
    for l in 0..layers {
        let p = format!("model.layers.{l}");
        for proj in ["q", "k", "v", "o"] {
            add(
                format!("{p}.self_attn.{proj}_proj.weight"),
                Dtype::BF16,
                vec![h, h],
            );
        }
        for proj in ["q", "k", "v"] {
            add(
                format!("{p}.self_attn.{proj}_proj.bias"),
                Dtype::F16,
                vec![h],
            );
        }
        add(
            format!("{p}.self_attn.rotary_emb.inv_freq"),
            Dtype::F32,
            vec![h / 2],
        );
        add(format!("{p}.mlp.gate_proj.weight"), Dtype::BF16, vec![i, h]);
        add(format!("{p}.mlp.up_proj.weight"), Dtype::BF16, vec![i, h]);
        add(format!("{p}.mlp.down_proj.weight"), Dtype::BF16, vec![h, i]);
        add(format!("{p}.input_layernorm.weight"), Dtype::F32, vec![h]);
        add(
            format!("{p}.post_attention_layernorm.weight"),
            Dtype::F32,
            vec![h],
        );
    }
    add("model.norm.weight".into(), Dtype::F32, vec![h]);
    add("lm_head.weight".into(), Dtype::BF16, vec![vocab, h]);
    let count = tensors.len();
    let bytes = tensors.iter().map(|(_, t)| (&t).data_len() as u64).sum();
    safetensors::serialize_to_file(tensors.iter().map(|(n, t)| (n.as_str(), t)), None, path)?;
    File::open(path)?.sync_all()?;
    Ok((count, bytes))
}
