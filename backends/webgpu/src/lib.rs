//! The WebGPU backend as a backplane plugin, on wgpu (Vulkan, Metal, DX12).
//!
//! Every usable adapter is a device, discrete GPUs first. Kernels are WGSL
//! from `backplane-shaders`, specialised per [`PipelineKey`] and cached per
//! device. Without an adapter the plugin loads, reports zero devices and
//! says why.
//!
//! [`PipelineKey`]: backplane_shaders::PipelineKey

pub mod bind_cache;
pub mod buffer;
pub mod compute_units;
pub mod context;
pub mod device;
pub mod encode;
pub mod facts;
pub mod kept;
pub mod memory;
mod ops;
pub mod options;
pub mod pipelines;
pub mod profile;
pub mod split;
pub mod stream;
#[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
pub mod vulkan;

backplane_abi::export_plugin! {
    reg: device::WebGpuReg::new(),
    score: 1,
    options: options::WEBGPU_OPTIONS,
}
