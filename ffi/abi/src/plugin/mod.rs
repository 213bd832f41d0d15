//! The plugin interface: what a backend implements ([`contract`]), what
//! crosses the boundary ([`ffi`], [`module`]) and how a `cdylib` exports it
//! ([`export_plugin!`](crate::export_plugin)).
//!
//! A plugin is a dynamic library `libbackplane_<backend>[-<variant>].so`
//! (`.dylib`, `.dll`) exporting
//! - `backplane_plugin_abi_version() -> u32` ([`ABI_VERSION`]) and
//!   `backplane_plugin_score() -> u32`, plain C symbols the host reads
//!   before anything else;
//! - an `abi_stable` root module [`PluginMod`] whose layout the host checks
//!   before use, and whose `new_reg` yields the [`Reg`] → [`Device`] →
//!   [`BufferType`] → [`Buffer`] / [`Backend`] / [`Event`] objects.
//!
//! Graphs cross as slices of [`TensorDesc`](crate::TensorDesc) in
//! topological order. This crate knows nothing of scheduling.

pub mod contract;
pub mod export;
pub mod ext;
pub mod ext_options;
pub mod ffi;
/// The first ABI 1 layout and its adapters (plugins built before open codes).
pub mod legacy;
pub mod module;
pub mod types;

pub use contract::{Backend, Buffer, BufferType, Device, Event, Reg};
pub use ffi::{
    BackendBox, BufferBox, BufferTypeRef, DeviceRef, EventBox, FfiBackend, FfiBuffer,
    FfiBufferType, FfiDevice, FfiEvent, FfiReg, RegBox, buffer_type_object, device_object,
    reg_object,
};
pub use module::{ABI_VERSION, ABI_VERSION_SYMBOL, PluginMod, PluginModRef, SCORE_SYMBOL};
pub use types::{
    DeviceCaps, DeviceType, Memory, PluginError, Verdict, VerdictCode, caps_bits, device_type_code,
    error_kind, panic_message, verdict_code,
};
