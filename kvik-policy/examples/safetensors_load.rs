//! Load a `.safetensors` checkpoint tensor by tensor into GPU memory — one
//! cudarc `CudaSlice` per tensor, typed where the dtype is plain data
//! (`F32` → `CudaSlice<f32>`, `F16` / `BF16` → `CudaSlice<u16>` holding the
//! 16-bit patterns, anything else as bytes) — with one path report for the
//! whole load, and time it against what Rust ML frameworks do today: map
//! the file (`mmap`) and copy each tensor from the mapping to the GPU
//! (`cuMemcpyHtoD` from pageable memory), in the same run, on the same file.
//!
//! kvik-policy loads two ways: one blocking `read` per tensor in file order
//! (what a loader written in a hurry does), and every tensor's request in
//! flight at once through `kvik_policy::scope` (small tensors no longer wait
//! for each other, large ones share the pool).
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
//!   arrived against the file; then `--reps` timed loads each, in turn.
//!   A load's time covers opening (or mapping) the file, allocating every
//!   tensor and moving its bytes, until the last copy has landed.
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
use kvik_policy::{BufMut, FileHandle, PathReport, Settings, gpu, parse_size};
use kvik_test_support::random_bytes;
use safetensors::tensor::Metadata;
use safetensors::{Dtype, View};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The three ways of loading, as the summary names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    /// kvik-policy, one blocking request per tensor, in file order.
    Kvik,
    /// kvik-policy, every tensor's request in flight at once (`kvik_policy::scope`).
    KvikScope,
    /// The mapping, copied tensor by tensor.
    Mmap,
}

impl Method {
    const ALL: [Method; 3] = [Method::Kvik, Method::KvikScope, Method::Mmap];
}

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

    // Untimed: warm everything up, and check every byte against the file.
    let mut report = None;
    for method in Method::ALL {
        let (loaded, method_report) = target.load(method, &checkpoint)?;
        target.check(&checkpoint, &loaded)?;
        report = report.or(method_report);
    }
    println!("every byte of every tensor checked against the file, by every method");
    let report = report.ok_or("the checkpoint holds no tensor")?;
    println!("path report of one whole load through kvik-policy:\n{report}");

    let mut rows = Vec::new();
    let caches: &[bool] = if args.cold { &[false, true] } else { &[false] };
    for &cold in caches {
        let mut rates = [Vec::new(), Vec::new(), Vec::new()];
        let mut most_cached: Option<f64> = None;
        for _ in 0..args.reps {
            for (i, method) in Method::ALL.into_iter().enumerate() {
                if cold {
                    let cached = checkpoint.drop_from_page_cache()?;
                    most_cached = most_cached.into_iter().chain(cached).reduce(f64::max);
                }
                let started = Instant::now();
                let loaded = target.load(method, &checkpoint)?;
                target.finish()?;
                let seconds = started.elapsed().as_secs_f64();
                drop(loaded);
                rates[i].push(checkpoint.bytes() as f64 / seconds / 1e9);
            }
        }
        let cache = if cold { "cold" } else { "page-cached" };
        if let Some(share) = most_cached {
            println!(
                "cold loads: at most {:.1}% of the file was in the page cache as a load started",
                share * 100.0
            );
        }
        for (method, rates) in Method::ALL.into_iter().zip(rates) {
            rows.push(Row::new(
                target.name(method),
                cache,
                &target,
                &checkpoint,
                rates,
            ));
        }
    }

    println!(
        "\nsummary (GB/s = 10^9 bytes of tensor data per second, median [min–max] of {} loads)",
        args.reps
    );
    for row in &rows {
        println!(
            "  {:<11} {:<34} {:>7.2} [{:.2}–{:.2}]",
            row.cache, row.method, row.median, row.min, row.max
        );
    }
    for three in rows.chunks(3) {
        let baseline = &three[2];
        for ours in &three[..2] {
            println!(
                "  {}: {} / {} = {:.2}×",
                ours.cache,
                ours.method,
                baseline.method,
                ours.median / baseline.median
            );
        }
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
    /// was synced when made, and nothing writes it); returns the share of
    /// the file still cached afterwards (`mincore`), when it can be told.
    fn drop_from_page_cache(&self) -> Result<Option<f64>> {
        let file = File::open(&self.path)?;
        rustix::fs::fadvise(&file, 0, None::<NonZeroU64>, rustix::fs::Advice::DontNeed)?;
        Ok(self.map()?.residency())
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

impl Mapping {
    /// The share of the file's pages in the page cache.
    fn residency(&self) -> Option<f64> {
        let page = kvik_policy::task::page_size() as usize;
        let pages = self.len.div_ceil(page);
        let mut resident = vec![0u8; pages];
        // SAFETY: `ptr` is a page-aligned mapping of `len` bytes; `resident`
        // holds one byte per page of it.
        let ok = unsafe { libc::mincore(self.ptr, self.len, resident.as_mut_ptr()) } == 0;
        ok.then(|| resident.iter().filter(|&&r| r & 1 == 1).count() as f64 / pages.max(1) as f64)
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

impl<F32, U16, U8> Tensor<F32, U16, U8> {
    /// The tensor's memory, for kvik-policy to read into.
    fn buf<'a>(&'a mut self) -> BufMut<'a>
    where
        &'a mut F32: Into<BufMut<'a>>,
        &'a mut U16: Into<BufMut<'a>>,
        &'a mut U8: Into<BufMut<'a>>,
    {
        match self {
            Tensor::F32(x) => x.into(),
            Tensor::Bits16(x) => x.into(),
            Tensor::Bytes(x) => x.into(),
        }
    }
}

impl Loaded {
    /// Every tensor's memory, in file order.
    fn buffers(&mut self) -> Vec<BufMut<'_>> {
        match self {
            Loaded::Device(tensors) => tensors.iter_mut().map(Tensor::buf).collect(),
            Loaded::Host(tensors) => tensors.iter_mut().map(Tensor::buf).collect(),
        }
    }
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
    /// How the summary names `method` for this target.
    fn name(&self, method: Method) -> &'static str {
        match (method, self) {
            (Method::Kvik, _) => "kvik-policy, tensor by tensor",
            (Method::KvikScope, _) => "kvik-policy, all in flight (scope)",
            (Method::Mmap, Target::Device(_)) => "mmap + cuMemcpyHtoD",
            (Method::Mmap, Target::Host) => "mmap + copy",
        }
    }

    /// Load every tensor by `method`; kvik-policy's loads come with their
    /// requests' path reports folded into one.
    fn load(
        &self,
        method: Method,
        checkpoint: &Checkpoint,
    ) -> Result<(Loaded, Option<PathReport>)> {
        if method == Method::Mmap {
            return Ok((self.load_mmap(checkpoint)?, None));
        }
        let file = FileHandle::open(&checkpoint.path, "r")?;
        let mut loaded = self.alloc(checkpoint)?;
        let mut report: Option<PathReport> = None;
        let mut fold = |done: kvik_policy::Transfer| match &mut report {
            Some(r) => r.absorb(done.report),
            None => report = Some(done.report),
        };
        let requests = loaded.buffers().into_iter().zip(&checkpoint.tensors);
        if method == Method::Kvik {
            for (buf, t) in requests {
                fold(file.read_with_report(buf, t.offset)?.exact()?);
            }
        } else {
            kvik_policy::scope(|s| {
                let pending: Vec<_> = requests
                    .map(|(buf, t)| s.pread(&file, buf, t.offset))
                    .collect();
                for request in pending {
                    fold(request.wait()?.exact()?);
                }
                Ok::<_, kvik_policy::Error>(())
            })?;
        }
        Ok((loaded, report))
    }

    /// Memory for every tensor, typed by its dtype.
    fn alloc(&self, checkpoint: &Checkpoint) -> Result<Loaded> {
        Ok(match self {
            Target::Device(stream) => Loaded::Device(
                checkpoint
                    .tensors
                    .iter()
                    .map(|t| Ok(typed!(t.dtype, device_alloc(stream, t))))
                    .collect::<Result<_>>()?,
            ),
            Target::Host => Loaded::Host(
                checkpoint
                    .tensors
                    .iter()
                    .map(|t| Ok(typed!(t.dtype, host_alloc(t))))
                    .collect::<Result<_>>()?,
            ),
        })
    }

    /// Every tensor copied out of the mapped file.
    fn load_mmap(&self, checkpoint: &Checkpoint) -> Result<Loaded> {
        let map = checkpoint.map()?;
        Ok(match self {
            Target::Device(stream) => Loaded::Device(
                checkpoint
                    .tensors
                    .iter()
                    .map(|t| Ok(typed!(t.dtype, device_copy(stream, map.bytes(t)))))
                    .collect::<Result<_>>()?,
            ),
            Target::Host => Loaded::Host(
                checkpoint
                    .tensors
                    .iter()
                    .map(|t| Ok(typed!(t.dtype, host_copy(map.bytes(t)))))
                    .collect::<Result<_>>()?,
            ),
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

fn device_alloc<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    t: &TensorEntry,
) -> Result<CudaSlice<T>> {
    Ok(stream.alloc_zeros::<T>(elements::<T>(t))?)
}

fn host_alloc<T: Pod>(t: &TensorEntry) -> Result<Vec<T>> {
    Ok(vec![T::zeroed(); elements::<T>(t)])
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
