//! Extensions of ABI 1: entry points added after plugins were built
//! against it, each behind a plain C symbol of its own.
//!
//! abi_stable checks a plugin's root module against the host's own
//! declarations and refuses a plugin whose trait objects have fewer methods
//! than the host declares, so a method appended to an existing object
//! would lock out every plugin built before it. Instead each addition is a
//! new symbol returning a [`StableAbi`] module together with that module's
//! layout as the plugin saw it; the host checks the layout (refusing only
//! the extension, never the plugin) and treats a missing symbol as "not
//! offered". Plugins built with [`export_plugin!`](crate::export_plugin)
//! export every extension this crate knows, answering from the defaults of
//! [the contract](super::contract) where they implement nothing.
//!
//! Extensions so far:
//! - [`EXTRA_BUFFER_TYPES_SYMBOL`]: a device's extra buffer types for
//!   weights ([`Device::extra_buffer_types`]) with their
//!   [`BufferType::supports_op`].
//! - [`OPTIONS_SYMBOL`](super::ext_options::OPTIONS_SYMBOL): the backend's
//!   option schema ([`ext_options`](super::ext_options)).

#![allow(non_local_definitions)] // sabi_trait expands impls inside a const

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use abi_stable::StableAbi;
use abi_stable::sabi_trait;
use abi_stable::sabi_trait::prelude::TD_Opaque;
use abi_stable::std_types::{RArc, RResult, RSlice, RVec};
use abi_stable::type_layout::TypeLayout;

use crate::plugin::contract::{BufferType, Device};
use crate::plugin::ffi::{BufferTypeRef, DeviceRef, buffer_type_object, own_device};
use crate::plugin::types::PluginError;
use crate::tensor::TensorDesc;

/// Name of the symbol `extern "C" fn() -> ExtEntry<ExtraBufferTypesV1>`.
pub const EXTRA_BUFFER_TYPES_SYMBOL: &str = "backplane_plugin_extra_buffer_types_v1";

/// What an extension symbol returns: the module and its layout as the
/// plugin was built with it.
#[repr(C)]
pub struct ExtEntry<T: 'static> {
    /// `<T as StableAbi>::LAYOUT` in the plugin.
    pub layout: &'static TypeLayout,
    /// The module.
    pub module: &'static T,
}

/// ABI form of [`BufferType::supports_op`] for an extra buffer type.
#[allow(missing_docs)]
#[sabi_trait]
pub trait FfiWeightOps: Send + Sync + Clone {
    #[sabi(last_prefix_field)]
    fn supports_op(&self, graph: RSlice<'_, TensorDesc>, node: usize) -> bool;
}

/// A shared [`FfiWeightOps`] object.
pub type WeightOpsRef = FfiWeightOps_TO<'static, RArc<()>>;

/// One extra buffer type of a device.
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct ExtraBufferType {
    /// The buffer type.
    pub buffer_type: BufferTypeRef,
    /// Which ops run with their weights in it.
    pub ops: WeightOpsRef,
}

/// The extra-buffer-types extension, version 1.
#[repr(C)]
#[derive(StableAbi)]
pub struct ExtraBufferTypesV1 {
    /// The extra buffer types of `device` (an object this plugin made),
    /// most preferred first.
    pub get: extern "C" fn(device: &DeviceRef) -> RResult<RVec<ExtraBufferType>, PluginError>,
}

#[derive(Clone)]
struct WeightOps(Arc<dyn BufferType>);

impl FfiWeightOps for WeightOps {
    fn supports_op(&self, graph: RSlice<'_, TensorDesc>, node: usize) -> bool {
        catch_unwind(AssertUnwindSafe(|| {
            self.0.supports_op(graph.as_slice(), node)
        }))
        .unwrap_or(false)
    }
}

/// The ABI form of `device`'s extra buffer types, panics caught.
pub fn extra_buffer_types_of(device: &dyn Device) -> RResult<RVec<ExtraBufferType>, PluginError> {
    match catch_unwind(AssertUnwindSafe(|| device.extra_buffer_types())) {
        Ok(list) => RResult::ROk(
            list.into_iter()
                .map(|b| ExtraBufferType {
                    buffer_type: buffer_type_object(b.clone()),
                    ops: FfiWeightOps_TO::from_ptr(RArc::new(WeightOps(b)), TD_Opaque),
                })
                .collect(),
        ),
        Err(p) => RResult::RErr(PluginError::panicked("extra_buffer_types", &*p)),
    }
}

/// The extra buffer types of `device` when this copy of the crate made
/// it (what a plugin's extension symbol answers, and the host for its
/// linked-in backends); an error for another library's device.
pub extern "C" fn extra_buffer_types_of_object(
    device: &DeviceRef,
) -> RResult<RVec<ExtraBufferType>, PluginError> {
    match own_device(device) {
        Some(d) => extra_buffer_types_of(&*d),
        None => RResult::RErr(PluginError::bad_input(
            "extra_buffer_types: not a device of this plugin",
        )),
    }
}

static EXTRA_BUFFER_TYPES_V1: ExtraBufferTypesV1 = ExtraBufferTypesV1 {
    get: extra_buffer_types_of_object,
};

/// The entry `export_plugin!`'s extra-buffer-types symbol returns.
#[doc(hidden)]
pub fn exported_extra_buffer_types_entry() -> ExtEntry<ExtraBufferTypesV1> {
    ExtEntry {
        layout: <ExtraBufferTypesV1 as StableAbi>::LAYOUT,
        module: &EXTRA_BUFFER_TYPES_V1,
    }
}

/// Checks an extension entry a plugin returned against this host's layout
/// of `T`; the error names the extension.
pub fn check_entry<T: StableAbi>(name: &str, entry: &ExtEntry<T>) -> Result<&'static T, String> {
    abi_stable::abi_stability::abi_checking::check_layout_compatibility(T::LAYOUT, entry.layout)
        .map(|()| entry.module)
        .map_err(|e| {
            format!(
                "extension {name}: layout differs from this host's ({} error(s))",
                e.errors.len()
            )
        })
}
