//! The `abi_stable` trait objects that actually cross the boundary, and the
//! adapters that wrap a [`contract`](crate::plugin::contract) implementation
//! into them, catching unwinding at every entry point.
//!
//! These traits mirror the contract one to one; their meaning is documented
//! there only. Hosts call them through the `*Box` / `*Ref` aliases.

#![allow(missing_docs)] // generated items; see the contract for meaning
#![allow(non_local_definitions)] // sabi_trait expands impls inside a const

use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use abi_stable::sabi_trait;
use abi_stable::sabi_trait::prelude::{TD_CanDowncast, TD_Opaque};
use abi_stable::std_types::{RArc, RBox, ROption, RResult, RSlice, RSliceMut, RStr, RString, RVec};

use crate::plugin::contract::{Backend, Buffer, BufferType, Device, Event, Reg};
use crate::plugin::types::{Memory, PluginError, VerdictCode, caps_bits, panic_message};
use crate::tensor::TensorDesc;

/// An owned event object.
pub type EventBox = FfiEvent_TO<'static, RBox<()>>;
/// An owned buffer object.
pub type BufferBox = FfiBuffer_TO<'static, RBox<()>>;
/// A shared buffer type object.
pub type BufferTypeRef = FfiBufferType_TO<'static, RArc<()>>;
/// An owned stream object.
pub type BackendBox = FfiBackend_TO<'static, RBox<()>>;
/// A shared device object.
pub type DeviceRef = FfiDevice_TO<'static, RArc<()>>;
/// An owned backend registration object.
pub type RegBox = FfiReg_TO<'static, RBox<()>>;

/// ABI form of [`Event`].
#[sabi_trait]
pub trait FfiEvent: Send + Sync {
    #[sabi(last_prefix_field)]
    fn synchronize(&self) -> RResult<(), PluginError>;
}

/// ABI form of [`Buffer`].
#[sabi_trait]
pub trait FfiBuffer: Send + Sync {
    fn id(&self) -> RResult<u64, PluginError>;
    fn base(&self) -> RResult<usize, PluginError>;
    fn size(&self) -> RResult<u64, PluginError>;
    fn set_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        data: RSlice<'_, u8>,
    ) -> RResult<(), PluginError>;
    fn get_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: RSliceMut<'_, u8>,
    ) -> RResult<(), PluginError>;
    fn memset_tensor(
        &self,
        tensor: &TensorDesc,
        value: u8,
        offset: u64,
        size: u64,
    ) -> RResult<(), PluginError>;
    fn cpy_tensor(&self, src: &TensorDesc, dst: &TensorDesc) -> RResult<bool, PluginError>;
    #[sabi(last_prefix_field)]
    fn clear(&self, value: u8) -> RResult<(), PluginError>;
}

/// ABI form of [`BufferType`].
#[sabi_trait]
pub trait FfiBufferType: Send + Sync + Clone {
    fn name(&self) -> RResult<RString, PluginError>;
    fn alloc_buffer(&self, size_bytes: u64) -> RResult<BufferBox, PluginError>;
    fn alignment(&self) -> RResult<u64, PluginError>;
    fn max_size(&self) -> RResult<u64, PluginError>;
    fn alloc_size(&self, tensor: &TensorDesc) -> RResult<u64, PluginError>;
    #[sabi(last_prefix_field)]
    fn is_host(&self) -> RResult<bool, PluginError>;
}

/// ABI form of [`Backend`].
#[sabi_trait]
pub trait FfiBackend: Send + Sync {
    fn name(&self) -> RResult<RString, PluginError>;
    fn graph_compute(&self, graph: RSlice<'_, TensorDesc>) -> RResult<(), PluginError>;
    fn set_tensor_async(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        data: RSlice<'_, u8>,
    ) -> RResult<(), PluginError>;
    fn get_tensor_async(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: RSliceMut<'_, u8>,
    ) -> RResult<(), PluginError>;
    fn cpy_tensor_async(&self, src: &TensorDesc, dst: &TensorDesc) -> RResult<bool, PluginError>;
    fn synchronize(&self) -> RResult<(), PluginError>;
    fn event_record(&self, event: &EventBox) -> RResult<(), PluginError>;
    #[sabi(last_prefix_field)]
    fn event_wait(&self, event: &EventBox) -> RResult<(), PluginError>;
}

/// ABI form of [`Device`].
#[sabi_trait]
pub trait FfiDevice: Send + Sync + Clone {
    fn name(&self) -> RResult<RString, PluginError>;
    fn description(&self) -> RResult<RString, PluginError>;
    /// An open code ([`device_type_code`](crate::plugin::types::device_type_code)).
    fn device_type(&self) -> RResult<u32, PluginError>;
    fn memory(&self) -> RResult<Memory, PluginError>;
    /// Bit flags ([`caps_bits`](crate::plugin::types::caps_bits)).
    fn caps(&self) -> RResult<u32, PluginError>;
    fn supports_op(&self, graph: RSlice<'_, TensorDesc>, node: usize) -> VerdictCode;
    fn supports_buft(&self, name: RStr<'_>, is_host: bool) -> bool;
    fn offload_op(&self, graph: RSlice<'_, TensorDesc>, node: usize) -> bool;
    fn buffer_type(&self) -> RResult<BufferTypeRef, PluginError>;
    fn host_buffer_type(&self) -> RResult<ROption<BufferTypeRef>, PluginError>;
    fn init_backend(&self, params: RStr<'_>) -> RResult<BackendBox, PluginError>;
    #[sabi(last_prefix_field)]
    fn new_event(&self) -> RResult<EventBox, PluginError>;
}

/// ABI form of [`Reg`].
#[sabi_trait]
pub trait FfiReg: Send + Sync {
    fn name(&self) -> RResult<RString, PluginError>;
    fn devices(&self) -> RResult<RVec<DeviceRef>, PluginError>;
    #[sabi(last_prefix_field)]
    fn no_device_reason(&self) -> RResult<ROption<RString>, PluginError>;
}

// ---------------------------------------------------------------------------
// Adapters: contract implementation -> ABI object, panics caught.

/// Runs a fallible call, turning a panic into a `PANICKED` error.
fn guard<T>(call: &str, f: impl FnOnce() -> Result<T, PluginError>) -> RResult<T, PluginError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.into(),
        Err(p) => RResult::RErr(PluginError::panicked(call, &*p)),
    }
}

/// Runs an infallible getter, turning a panic into a `PANICKED` error.
fn get<T>(call: &str, f: impl FnOnce() -> T) -> RResult<T, PluginError> {
    guard(call, || Ok(f()))
}

/// Runs an infallible call, returning `fallback` if it panics.
fn guard_or<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// Drops a plugin object under `catch_unwind`. A panicking `Drop` cannot
/// return an error, so it is reported on stderr (one line, with the panic
/// message) and whatever the unwinding left is leaked, never unwound across
/// the boundary (which would abort the host).
fn drop_guarded<T>(what: &str, value: T) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(move || drop(value))) {
        let message = panic_message(&*p);
        // The payload itself may panic in its own Drop: leak it.
        std::mem::forget(p);
        eprintln!("backplane plugin: panic in {what} drop caught at the boundary: {message}");
    }
}

/// A plugin object whose drop runs under [`drop_guarded`].
struct Guarded<T> {
    what: &'static str,
    inner: ManuallyDrop<T>,
}

impl<T> Guarded<T> {
    fn new(what: &'static str, inner: T) -> Guarded<T> {
        Guarded {
            what,
            inner: ManuallyDrop::new(inner),
        }
    }
}

impl<T> std::ops::Deref for Guarded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T> Drop for Guarded<T> {
    fn drop(&mut self) {
        // SAFETY: `inner` is taken exactly once, here, and never used again.
        let inner = unsafe { ManuallyDrop::take(&mut self.inner) };
        drop_guarded(self.what, inner);
    }
}

/// Wraps a contract [`Reg`] into its ABI object (what `export_plugin!` and a
/// host linking a backend statically both use).
pub fn reg_object(reg: impl Reg) -> RegBox {
    FfiReg_TO::from_value(RegAdapter(Guarded::new("Reg", Box::new(reg))), TD_Opaque)
}

/// Wraps a contract [`Device`] into its ABI object.
pub fn device_object(device: Arc<dyn Device>) -> DeviceRef {
    // Downcastable, so that this library's extension entry points can find
    // the device behind an object the host passes back (see `ext`).
    FfiDevice_TO::from_ptr(
        RArc::new(DeviceAdapter(Arc::new(Guarded::new("Device", device)))),
        TD_CanDowncast,
    )
}

/// The device behind `device` when this copy of the crate made it (a
/// plugin's own objects, inside that plugin; the host's in the host).
pub fn own_device(device: &DeviceRef) -> Option<Arc<dyn Device>> {
    device
        .obj
        .downcast_as::<DeviceAdapter>()
        .ok()
        .map(|d| Arc::clone(&**d.0))
}

/// Wraps a contract [`BufferType`] into its ABI object.
pub fn buffer_type_object(buft: Arc<dyn BufferType>) -> BufferTypeRef {
    FfiBufferType_TO::from_ptr(
        RArc::new(BufferTypeAdapter(Arc::new(Guarded::new(
            "BufferType",
            buft,
        )))),
        TD_Opaque,
    )
}

struct RegAdapter(Guarded<Box<dyn Reg>>);
#[derive(Clone)]
struct DeviceAdapter(Arc<Guarded<Arc<dyn Device>>>);
#[derive(Clone)]
struct BufferTypeAdapter(Arc<Guarded<Arc<dyn BufferType>>>);
struct BufferAdapter(Guarded<Box<dyn Buffer>>);
struct BackendAdapter(Guarded<Box<dyn Backend>>);
struct EventAdapter(Guarded<Box<dyn Event>>);

impl FfiReg for RegAdapter {
    fn name(&self) -> RResult<RString, PluginError> {
        get("Reg::name", || RString::from(self.0.name()))
    }
    fn devices(&self) -> RResult<RVec<DeviceRef>, PluginError> {
        get("Reg::devices", || {
            self.0.devices().into_iter().map(device_object).collect()
        })
    }
    fn no_device_reason(&self) -> RResult<ROption<RString>, PluginError> {
        get("Reg::no_device_reason", || {
            self.0.no_device_reason().map(RString::from).into()
        })
    }
}

impl FfiDevice for DeviceAdapter {
    fn name(&self) -> RResult<RString, PluginError> {
        get("Device::name", || RString::from(self.0.name()))
    }
    fn description(&self) -> RResult<RString, PluginError> {
        get("Device::description", || {
            RString::from(self.0.description())
        })
    }
    fn device_type(&self) -> RResult<u32, PluginError> {
        get("Device::device_type", || self.0.device_type_code())
    }
    fn memory(&self) -> RResult<Memory, PluginError> {
        get("Device::memory", || self.0.memory())
    }
    fn caps(&self) -> RResult<u32, PluginError> {
        get("Device::caps", || caps_bits::encode(self.0.caps()))
    }
    fn supports_op(&self, graph: RSlice<'_, TensorDesc>, node: usize) -> VerdictCode {
        match catch_unwind(AssertUnwindSafe(|| {
            self.0.supports_op(graph.as_slice(), node)
        })) {
            Ok(v) => v.into(),
            Err(p) => crate::plugin::types::Verdict::Unsupported(
                PluginError::panicked("supports_op", &*p).message,
            )
            .into(),
        }
    }
    fn supports_buft(&self, name: RStr<'_>, is_host: bool) -> bool {
        guard_or(false, || self.0.supports_buft(name.as_str(), is_host))
    }
    fn offload_op(&self, graph: RSlice<'_, TensorDesc>, node: usize) -> bool {
        guard_or(false, || self.0.offload_op(graph.as_slice(), node))
    }
    fn buffer_type(&self) -> RResult<BufferTypeRef, PluginError> {
        get("Device::buffer_type", || {
            buffer_type_object(self.0.buffer_type())
        })
    }
    fn host_buffer_type(&self) -> RResult<ROption<BufferTypeRef>, PluginError> {
        get("Device::host_buffer_type", || {
            self.0.host_buffer_type().map(buffer_type_object).into()
        })
    }
    fn init_backend(&self, params: RStr<'_>) -> RResult<BackendBox, PluginError> {
        guard("init_backend", || {
            let b = self.0.init_backend(params.as_str())?;
            Ok(FfiBackend_TO::from_value(
                BackendAdapter(Guarded::new("Backend", b)),
                TD_Opaque,
            ))
        })
    }
    fn new_event(&self) -> RResult<EventBox, PluginError> {
        guard("new_event", || {
            let e = self.0.new_event()?;
            Ok(FfiEvent_TO::from_value(
                EventAdapter(Guarded::new("Event", e)),
                TD_CanDowncast,
            ))
        })
    }
}

impl FfiBufferType for BufferTypeAdapter {
    fn name(&self) -> RResult<RString, PluginError> {
        get("BufferType::name", || RString::from(self.0.name()))
    }
    fn alloc_buffer(&self, size_bytes: u64) -> RResult<BufferBox, PluginError> {
        guard("alloc_buffer", || {
            let b = self.0.alloc_buffer(size_bytes)?;
            Ok(FfiBuffer_TO::from_value(
                BufferAdapter(Guarded::new("Buffer", b)),
                TD_Opaque,
            ))
        })
    }
    fn alignment(&self) -> RResult<u64, PluginError> {
        get("BufferType::alignment", || self.0.alignment())
    }
    fn max_size(&self) -> RResult<u64, PluginError> {
        get("BufferType::max_size", || self.0.max_size())
    }
    fn alloc_size(&self, tensor: &TensorDesc) -> RResult<u64, PluginError> {
        get("BufferType::alloc_size", || self.0.alloc_size(tensor))
    }
    fn is_host(&self) -> RResult<bool, PluginError> {
        get("BufferType::is_host", || self.0.is_host())
    }
}

impl FfiBuffer for BufferAdapter {
    fn id(&self) -> RResult<u64, PluginError> {
        get("Buffer::id", || self.0.id())
    }
    fn base(&self) -> RResult<usize, PluginError> {
        get("Buffer::base", || self.0.base())
    }
    fn size(&self) -> RResult<u64, PluginError> {
        get("Buffer::size", || self.0.size())
    }
    fn set_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        data: RSlice<'_, u8>,
    ) -> RResult<(), PluginError> {
        guard("set_tensor", || {
            self.0.set_tensor(tensor, offset, data.as_slice())
        })
    }
    fn get_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        mut out: RSliceMut<'_, u8>,
    ) -> RResult<(), PluginError> {
        guard("get_tensor", || {
            self.0.get_tensor(tensor, offset, out.as_mut_slice())
        })
    }
    fn memset_tensor(
        &self,
        tensor: &TensorDesc,
        value: u8,
        offset: u64,
        size: u64,
    ) -> RResult<(), PluginError> {
        guard("memset_tensor", || {
            self.0.memset_tensor(tensor, value, offset, size)
        })
    }
    fn cpy_tensor(&self, src: &TensorDesc, dst: &TensorDesc) -> RResult<bool, PluginError> {
        guard("cpy_tensor", || self.0.cpy_tensor(src, dst))
    }
    fn clear(&self, value: u8) -> RResult<(), PluginError> {
        guard("clear", || self.0.clear(value))
    }
}

/// The plugin's own event behind an ABI event object, or an error when the
/// event was made by another plugin.
fn own_event(event: &EventBox) -> Result<&dyn Event, PluginError> {
    match event.obj.downcast_as::<EventAdapter>() {
        Ok(e) => Ok(&**e.0),
        Err(_) => Err(PluginError::bad_input(
            "event was created by another plugin",
        )),
    }
}

impl FfiBackend for BackendAdapter {
    fn name(&self) -> RResult<RString, PluginError> {
        get("Backend::name", || RString::from(self.0.name()))
    }
    fn graph_compute(&self, graph: RSlice<'_, TensorDesc>) -> RResult<(), PluginError> {
        guard("graph_compute", || self.0.graph_compute(graph.as_slice()))
    }
    fn set_tensor_async(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        data: RSlice<'_, u8>,
    ) -> RResult<(), PluginError> {
        guard("set_tensor_async", || {
            self.0.set_tensor_async(tensor, offset, data.as_slice())
        })
    }
    fn get_tensor_async(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        mut out: RSliceMut<'_, u8>,
    ) -> RResult<(), PluginError> {
        guard("get_tensor_async", || {
            self.0.get_tensor_async(tensor, offset, out.as_mut_slice())
        })
    }
    fn cpy_tensor_async(&self, src: &TensorDesc, dst: &TensorDesc) -> RResult<bool, PluginError> {
        guard("cpy_tensor_async", || self.0.cpy_tensor_async(src, dst))
    }
    fn synchronize(&self) -> RResult<(), PluginError> {
        guard("synchronize", || self.0.synchronize())
    }
    fn event_record(&self, event: &EventBox) -> RResult<(), PluginError> {
        guard("event_record", || self.0.event_record(own_event(event)?))
    }
    fn event_wait(&self, event: &EventBox) -> RResult<(), PluginError> {
        guard("event_wait", || self.0.event_wait(own_event(event)?))
    }
}

impl FfiEvent for EventAdapter {
    fn synchronize(&self) -> RResult<(), PluginError> {
        guard("Event::synchronize", || self.0.synchronize())
    }
}

#[cfg(test)]
#[path = "ffi_tests.rs"]
mod tests;
