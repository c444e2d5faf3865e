//! Read a whole file into a cudarc `CudaSlice<u8>` on GPU 0 and print the path report.
//!
//!     cargo run --release -p kvik-policy --example read_to_gpu -- FILE

use kvik_policy::{FileHandle, gpu};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: read_to_gpu FILE")?;
    let file = FileHandle::open(&path, "r")?;
    let stream = gpu::context(0)?.default_stream();
    let mut buffer = stream.alloc_zeros::<u8>(file.nbytes()? as usize)?;
    let done = file.read_with_report(&mut buffer, 0)?;
    println!(
        "{} bytes of {path} in GPU 0 memory\n{}",
        done.bytes, done.report
    );
    Ok(())
}
