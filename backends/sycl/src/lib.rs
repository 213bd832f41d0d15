//! The SYCL backend as a backplane plugin.
//!
//! One device per SYCL device the runtime finds (GPU, CPU, accelerator).
//! The runtime is reached through `backplane-sycl-sys`'s shim, loaded at run
//! time: without it the plugin loads, reports zero devices and says why.
//! Kernels are SYCL source in `kernels/`, built at run time by the
//! kernel_compiler extension and cached (in process per device, on disk by
//! the runtime's persistent cache). [`arch`] and [`policy`] hold the
//! per-architecture tuning, pure Rust.

pub mod arch;
pub mod context;
pub mod kernels;
mod ops;
pub mod options;
pub mod plugin;
pub mod policy;
pub mod reorder;
pub mod runtime;

backplane_abi::export_plugin! {
    reg: plugin::SyclReg::new(),
    score: 1,
    options: options::SYCL_OPTIONS,
}
