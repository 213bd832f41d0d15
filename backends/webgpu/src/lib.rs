//! The WebGPU backend as a backplane plugin, on wgpu (Vulkan, Metal, DX12).
//!
//! Every usable adapter is a device, discrete GPUs first. Kernels are WGSL
//! from `backplane-shaders`, specialised per [`PipelineKey`] and cached per
//! device. Without an adapter the plugin loads, reports zero devices and
//! says why.
//!
//! [`PipelineKey`]: backplane_shaders::PipelineKey

use std::sync::{Mutex, MutexGuard};

pub mod bind_cache;
pub mod buffer;
pub mod compute_units;
pub mod context;
pub mod device;
pub mod encode;
pub mod facts;
pub mod kept;
pub mod memory;
pub mod native;
mod ops;
pub mod options;
pub mod pipelines;
pub mod prefetch;
pub mod profile;
pub mod replay;
pub mod split;
pub mod stream;
pub mod upload;
#[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
pub mod vulkan;

/// Locks `m`, recovering from a poisoned lock (a panicking op must not
/// take later calls down with it).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes of one kernel's parameters (a uniform binding; the alignment of
/// uniform offsets on every API we target).
pub const PARAM_SLOT_BYTES: u64 = 256;

/// Most kernels per submission. A graph's first submission holds the
/// `first_submit` option's count (default 4); each later one twice as many
/// as the one before, up to this, so the GPU starts on the first kernel
/// while the host still encodes the rest.
pub const KERNELS_PER_SUBMIT: usize = 32;

backplane_abi::export_plugin! {
    reg: device::WebGpuReg::new(),
    score: 1,
    options: options::WEBGPU_OPTIONS,
}
