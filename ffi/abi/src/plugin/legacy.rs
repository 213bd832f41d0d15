//! The first ABI 1 layout, kept so that plugins built against it still load.
//!
//! Before the hostile-plugin work, getters crossed the boundary as bare values
//! (`u64`, `RString`, a [`DeviceType`] enum, a [`Verdict`] enum) where today's
//! traits return `RResult<_, PluginError>` and open codes. That change was made
//! inside ABI 1, so such plugins pass the `ABI_VERSION` preflight and then
//! fail abi_stable's layout check against [`PluginModRef`](super::PluginModRef).
//! The host then checks the library against this module's [`PluginModRef`] and,
//! if it matches, wraps each old object in an adapter implementing today's
//! [contract](super::contract); [`reg_object`](super::reg_object) turns the
//! result into a current [`RegBox`](super::RegBox), so the rest of the host
//! (value checks, guards) treats it like any other plugin.
//!
//! Nothing here may change: it is the frozen layout of those plugins. The
//! `older` test fixture is built from these same declarations.

#![allow(missing_docs)] // generated items; the contract documents meaning
#![allow(non_local_definitions)] // sabi_trait expands impls inside a const

use std::any::Any;
use std::sync::Arc;

use abi_stable::library::RootModule;
use abi_stable::sabi_trait;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{RArc, RBox, ROption, RResult, RSlice, RSliceMut, RStr, RString, RVec};
use abi_stable::{StableAbi, declare_root_module_statics, package_version_strings};

use crate::plugin::contract::{Backend, Buffer, BufferType, Device, Event, Reg};
use crate::plugin::types::{DeviceCaps, DeviceType, Memory, PluginError, Verdict};
use crate::tensor::TensorDesc;

pub type EventBox = FfiEvent_TO<'static, RBox<()>>;
pub type BufferBox = FfiBuffer_TO<'static, RBox<()>>;
pub type BufferTypeRef = FfiBufferType_TO<'static, RArc<()>>;
pub type BackendBox = FfiBackend_TO<'static, RBox<()>>;
pub type DeviceRef = FfiDevice_TO<'static, RArc<()>>;
pub type RegBox = FfiReg_TO<'static, RBox<()>>;

#[sabi_trait]
pub trait FfiEvent: Send + Sync {
    #[sabi(last_prefix_field)]
    fn synchronize(&self) -> RResult<(), PluginError>;
}

#[sabi_trait]
pub trait FfiBuffer: Send + Sync {
    fn id(&self) -> u64;
    fn base(&self) -> usize;
    fn size(&self) -> u64;
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

#[sabi_trait]
pub trait FfiBufferType: Send + Sync + Clone {
    fn name(&self) -> RString;
    fn alloc_buffer(&self, size_bytes: u64) -> RResult<BufferBox, PluginError>;
    fn alignment(&self) -> u64;
    fn max_size(&self) -> u64;
    fn alloc_size(&self, tensor: &TensorDesc) -> u64;
    #[sabi(last_prefix_field)]
    fn is_host(&self) -> bool;
}

#[sabi_trait]
pub trait FfiBackend: Send + Sync {
    fn name(&self) -> RString;
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

#[sabi_trait]
pub trait FfiDevice: Send + Sync + Clone {
    fn name(&self) -> RString;
    fn description(&self) -> RString;
    fn device_type(&self) -> DeviceType;
    fn memory(&self) -> Memory;
    fn caps(&self) -> DeviceCaps;
    fn supports_op(&self, graph: RSlice<'_, TensorDesc>, node: usize) -> Verdict;
    fn supports_buft(&self, name: RStr<'_>, is_host: bool) -> bool;
    fn offload_op(&self, graph: RSlice<'_, TensorDesc>, node: usize) -> bool;
    fn buffer_type(&self) -> BufferTypeRef;
    fn host_buffer_type(&self) -> ROption<BufferTypeRef>;
    fn init_backend(&self, params: RStr<'_>) -> RResult<BackendBox, PluginError>;
    #[sabi(last_prefix_field)]
    fn new_event(&self) -> RResult<EventBox, PluginError>;
}

#[sabi_trait]
pub trait FfiReg: Send + Sync {
    fn name(&self) -> RString;
    fn devices(&self) -> RVec<DeviceRef>;
    #[sabi(last_prefix_field)]
    fn no_device_reason(&self) -> ROption<RString>;
}

/// The root module of the first ABI 1 layout. abi_stable compares type
/// names and the defining package, so every type here keeps its old name and
/// lives in `backplane-abi` as it did.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModRef)))]
#[sabi(missing_field(panic))]
pub struct PluginMod {
    pub abi_version: extern "C" fn() -> u32,
    pub score: extern "C" fn() -> u32,
    #[sabi(last_prefix_field)]
    pub new_reg: extern "C" fn() -> RResult<RegBox, PluginError>,
}

impl RootModule for PluginModRef {
    declare_root_module_statics! {PluginModRef}
    const BASE_NAME: &'static str = "backplane_plugin";
    const NAME: &'static str = "backplane_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

/// Creates the registration of a first-layout plugin and wraps it as a
/// current one.
pub fn new_reg(module: PluginModRef) -> Result<super::RegBox, PluginError> {
    let reg = (module.new_reg())().into_result()?;
    Ok(super::reg_object(LegacyReg(reg)))
}

struct LegacyReg(RegBox);
struct LegacyDevice(DeviceRef);
struct LegacyBufferType(BufferTypeRef);
struct LegacyBuffer(BufferBox);
struct LegacyBackend(BackendBox);
struct LegacyEvent(EventBox);

fn buffer_type(b: BufferTypeRef) -> Arc<dyn BufferType> {
    Arc::new(LegacyBufferType(b))
}

impl Reg for LegacyReg {
    fn name(&self) -> String {
        self.0.name().into()
    }
    fn devices(&self) -> Vec<Arc<dyn Device>> {
        self.0
            .devices()
            .into_iter()
            .map(|d| Arc::new(LegacyDevice(d)) as Arc<dyn Device>)
            .collect()
    }
    fn no_device_reason(&self) -> Option<String> {
        self.0.no_device_reason().into_option().map(Into::into)
    }
}

impl Device for LegacyDevice {
    fn name(&self) -> String {
        self.0.name().into()
    }
    fn description(&self) -> String {
        self.0.description().into()
    }
    fn device_type(&self) -> DeviceType {
        self.0.device_type()
    }
    fn memory(&self) -> Memory {
        self.0.memory()
    }
    fn caps(&self) -> DeviceCaps {
        self.0.caps()
    }
    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> Verdict {
        self.0.supports_op(graph.into(), node)
    }
    fn supports_buft(&self, name: &str, is_host: bool) -> bool {
        self.0.supports_buft(name.into(), is_host)
    }
    fn offload_op(&self, graph: &[TensorDesc], node: usize) -> bool {
        self.0.offload_op(graph.into(), node)
    }
    fn buffer_type(&self) -> Arc<dyn BufferType> {
        buffer_type(self.0.buffer_type())
    }
    fn host_buffer_type(&self) -> Option<Arc<dyn BufferType>> {
        self.0.host_buffer_type().into_option().map(buffer_type)
    }
    fn init_backend(&self, params: &str) -> Result<Box<dyn Backend>, PluginError> {
        let b = self.0.init_backend(params.into()).into_result()?;
        Ok(Box::new(LegacyBackend(b)))
    }
    fn new_event(&self) -> Result<Box<dyn Event>, PluginError> {
        let e = self.0.new_event().into_result()?;
        Ok(Box::new(LegacyEvent(e)))
    }
}

impl BufferType for LegacyBufferType {
    fn name(&self) -> String {
        self.0.name().into()
    }
    fn alloc_buffer(&self, size_bytes: u64) -> Result<Box<dyn Buffer>, PluginError> {
        let b = self.0.alloc_buffer(size_bytes).into_result()?;
        Ok(Box::new(LegacyBuffer(b)))
    }
    fn alignment(&self) -> u64 {
        self.0.alignment()
    }
    fn max_size(&self) -> u64 {
        self.0.max_size()
    }
    fn alloc_size(&self, tensor: &TensorDesc) -> u64 {
        self.0.alloc_size(tensor)
    }
    fn is_host(&self) -> bool {
        self.0.is_host()
    }
}

impl Buffer for LegacyBuffer {
    fn id(&self) -> u64 {
        self.0.id()
    }
    fn base(&self) -> usize {
        self.0.base()
    }
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn set_tensor(&self, tensor: &TensorDesc, offset: u64, data: &[u8]) -> Result<(), PluginError> {
        self.0.set_tensor(tensor, offset, data.into()).into_result()
    }
    fn get_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PluginError> {
        self.0.get_tensor(tensor, offset, out.into()).into_result()
    }
    fn memset_tensor(
        &self,
        tensor: &TensorDesc,
        value: u8,
        offset: u64,
        size: u64,
    ) -> Result<(), PluginError> {
        self.0
            .memset_tensor(tensor, value, offset, size)
            .into_result()
    }
    fn cpy_tensor(&self, src: &TensorDesc, dst: &TensorDesc) -> Result<bool, PluginError> {
        self.0.cpy_tensor(src, dst).into_result()
    }
    fn clear(&self, value: u8) -> Result<(), PluginError> {
        self.0.clear(value).into_result()
    }
}

/// The plugin's own event behind `event`, or an error naming the call.
fn own_event<'a>(call: &str, event: &'a dyn Event) -> Result<&'a EventBox, PluginError> {
    event
        .as_any()
        .downcast_ref::<LegacyEvent>()
        .map(|e| &e.0)
        .ok_or_else(|| PluginError::bad_input(format!("{call}: the event is not this plugin's")))
}

impl Backend for LegacyBackend {
    fn name(&self) -> String {
        self.0.name().into()
    }
    fn graph_compute(&self, graph: &[TensorDesc]) -> Result<(), PluginError> {
        self.0.graph_compute(graph.into()).into_result()
    }
    fn set_tensor_async(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        data: &[u8],
    ) -> Result<(), PluginError> {
        self.0
            .set_tensor_async(tensor, offset, data.into())
            .into_result()
    }
    fn get_tensor_async(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PluginError> {
        self.0
            .get_tensor_async(tensor, offset, out.into())
            .into_result()
    }
    fn cpy_tensor_async(&self, src: &TensorDesc, dst: &TensorDesc) -> Result<bool, PluginError> {
        self.0.cpy_tensor_async(src, dst).into_result()
    }
    fn synchronize(&self) -> Result<(), PluginError> {
        self.0.synchronize().into_result()
    }
    fn event_record(&self, event: &dyn Event) -> Result<(), PluginError> {
        self.0
            .event_record(own_event("event_record", event)?)
            .into_result()
    }
    fn event_wait(&self, event: &dyn Event) -> Result<(), PluginError> {
        self.0
            .event_wait(own_event("event_wait", event)?)
            .into_result()
    }
}

impl Event for LegacyEvent {
    fn synchronize(&self) -> Result<(), PluginError> {
        self.0.synchronize().into_result()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use abi_stable::sabi_trait::prelude::TD_Opaque;

    use super::*;

    struct OldReg;

    impl FfiReg for OldReg {
        fn name(&self) -> RString {
            RString::from("old")
        }
        fn devices(&self) -> RVec<DeviceRef> {
            RVec::new()
        }
        fn no_device_reason(&self) -> ROption<RString> {
            ROption::RSome(RString::from("nothing here"))
        }
    }

    #[test]
    fn an_old_registration_reads_through_todays_objects() {
        let reg = super::super::reg_object(LegacyReg(FfiReg_TO::from_value(OldReg, TD_Opaque)));
        assert_eq!(reg.name().into_result().unwrap().as_str(), "old");
        assert!(reg.devices().into_result().unwrap().is_empty());
        assert_eq!(
            reg.no_device_reason()
                .into_result()
                .unwrap()
                .into_option()
                .map(String::from),
            Some("nothing here".to_string())
        );
    }

    #[test]
    fn a_foreign_event_is_refused_by_a_legacy_backend() {
        struct Foreign;
        impl Event for Foreign {
            fn synchronize(&self) -> Result<(), PluginError> {
                Ok(())
            }
            fn as_any(&self) -> &dyn Any {
                self
            }
        }
        match own_event("event_record", &Foreign) {
            Ok(_) => panic!("a foreign event was taken for the plugin's own"),
            Err(e) => assert!(
                e.message
                    .contains("event_record: the event is not this plugin's"),
                "{e:?}"
            ),
        }
    }
}
