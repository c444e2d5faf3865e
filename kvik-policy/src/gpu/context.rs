//! One retained primary context per GPU, shared by every request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::CudaContext;

use crate::error::Error;

static CONTEXTS: Mutex<Option<HashMap<u32, Arc<CudaContext>>>> = Mutex::new(None);

/// The primary context of GPU `ordinal`, after checking that a CUDA driver
/// with that GPU exists (never letting cudarc panic on a missing driver).
pub fn context(ordinal: u32) -> Result<Arc<CudaContext>, Error> {
    let driver = gds_core::cuda::probe()?;
    if ordinal as usize >= driver.devices.len() {
        return Err(super::cuda_error("cuDeviceGet", 101));
    }
    let mut contexts = CONTEXTS.lock().unwrap_or_else(|p| p.into_inner());
    let contexts = contexts.get_or_insert_with(HashMap::new);
    if let Some(ctx) = contexts.get(&ordinal) {
        return Ok(ctx.clone());
    }
    let ctx = CudaContext::new(ordinal as usize)
        .map_err(|e| super::driver_error("cuDevicePrimaryCtxRetain", e))?;
    contexts.insert(ordinal, ctx.clone());
    Ok(ctx)
}
