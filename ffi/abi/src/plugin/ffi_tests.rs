//! Every entry point of every ABI object, with a contract implementation
//! that panics in it: the panic comes back as a `PANICKED` error (or the
//! documented fallback) carrying the panic message, and drops are caught.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use abi_stable::std_types::{RSlice, RSliceMut, RStr};

use super::*;
use crate::plugin::types::{DeviceType, Verdict, VerdictCode, verdict_code};

struct Boom;

fn boom(what: &str) -> ! {
    panic!("boom in {what}")
}

impl Reg for Boom {
    fn name(&self) -> String {
        boom("Reg::name")
    }
    fn devices(&self) -> Vec<Arc<dyn Device>> {
        boom("Reg::devices")
    }
    fn no_device_reason(&self) -> Option<String> {
        boom("Reg::no_device_reason")
    }
}

impl Device for Boom {
    fn name(&self) -> String {
        boom("Device::name")
    }
    fn description(&self) -> String {
        boom("Device::description")
    }
    fn device_type(&self) -> DeviceType {
        boom("Device::device_type")
    }
    fn memory(&self) -> Memory {
        boom("Device::memory")
    }
    fn caps(&self) -> crate::plugin::DeviceCaps {
        boom("Device::caps")
    }
    fn supports_op(&self, _: &[TensorDesc], _: usize) -> Verdict {
        boom("supports_op")
    }
    fn supports_buft(&self, _: &str, _: bool) -> bool {
        boom("supports_buft")
    }
    fn offload_op(&self, _: &[TensorDesc], _: usize) -> bool {
        boom("offload_op")
    }
    fn buffer_type(&self) -> Arc<dyn BufferType> {
        boom("Device::buffer_type")
    }
    fn host_buffer_type(&self) -> Option<Arc<dyn BufferType>> {
        boom("Device::host_buffer_type")
    }
    fn init_backend(&self, _: &str) -> Result<Box<dyn Backend>, PluginError> {
        boom("init_backend")
    }
    fn new_event(&self) -> Result<Box<dyn Event>, PluginError> {
        boom("new_event")
    }
}

impl BufferType for Boom {
    fn name(&self) -> String {
        boom("BufferType::name")
    }
    fn alloc_buffer(&self, _: u64) -> Result<Box<dyn Buffer>, PluginError> {
        boom("alloc_buffer")
    }
    fn alignment(&self) -> u64 {
        boom("BufferType::alignment")
    }
    fn max_size(&self) -> u64 {
        boom("BufferType::max_size")
    }
    fn alloc_size(&self, _: &TensorDesc) -> u64 {
        boom("BufferType::alloc_size")
    }
    fn is_host(&self) -> bool {
        boom("BufferType::is_host")
    }
}

impl Buffer for Boom {
    fn id(&self) -> u64 {
        boom("Buffer::id")
    }
    fn base(&self) -> usize {
        boom("Buffer::base")
    }
    fn size(&self) -> u64 {
        boom("Buffer::size")
    }
    fn set_tensor(&self, _: &TensorDesc, _: u64, _: &[u8]) -> Result<(), PluginError> {
        boom("set_tensor")
    }
    fn get_tensor(&self, _: &TensorDesc, _: u64, _: &mut [u8]) -> Result<(), PluginError> {
        boom("get_tensor")
    }
    fn memset_tensor(&self, _: &TensorDesc, _: u8, _: u64, _: u64) -> Result<(), PluginError> {
        boom("memset_tensor")
    }
    fn cpy_tensor(&self, _: &TensorDesc, _: &TensorDesc) -> Result<bool, PluginError> {
        boom("cpy_tensor")
    }
    fn clear(&self, _: u8) -> Result<(), PluginError> {
        boom("clear")
    }
}

impl Backend for Boom {
    fn name(&self) -> String {
        boom("Backend::name")
    }
    fn graph_compute(&self, _: &[TensorDesc]) -> Result<(), PluginError> {
        boom("graph_compute")
    }
    fn set_tensor_async(&self, _: &TensorDesc, _: u64, _: &[u8]) -> Result<(), PluginError> {
        boom("set_tensor_async")
    }
    fn get_tensor_async(&self, _: &TensorDesc, _: u64, _: &mut [u8]) -> Result<(), PluginError> {
        boom("get_tensor_async")
    }
    fn cpy_tensor_async(&self, _: &TensorDesc, _: &TensorDesc) -> Result<bool, PluginError> {
        boom("cpy_tensor_async")
    }
    fn synchronize(&self) -> Result<(), PluginError> {
        boom("Backend::synchronize")
    }
    fn event_record(&self, _: &dyn Event) -> Result<(), PluginError> {
        boom("event_record")
    }
    fn event_wait(&self, _: &dyn Event) -> Result<(), PluginError> {
        boom("event_wait")
    }
}

impl Event for Boom {
    fn synchronize(&self) -> Result<(), PluginError> {
        boom("Event::synchronize")
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Asserts `r` is a `PANICKED` error naming `call` and carrying the message.
#[track_caller]
fn assert_panicked<T>(r: RResult<T, PluginError>, call: &str) {
    match r {
        RResult::ROk(_) => panic!("{call}: expected a caught panic"),
        RResult::RErr(e) => {
            assert!(e.is_panic(), "{call}: {e:?}");
            assert!(
                e.message.contains(&format!("boom in {call}")),
                "{call}: {e}"
            );
        }
    }
}

#[test]
fn reg_entry_points_return_the_panic_message() {
    let reg = reg_object(Boom);
    assert_panicked(reg.name(), "Reg::name");
    assert_panicked(reg.devices(), "Reg::devices");
    assert_panicked(reg.no_device_reason(), "Reg::no_device_reason");
}

#[test]
fn device_entry_points_return_the_panic_message_or_their_fallback() {
    let dev = device_object(Arc::new(Boom));
    assert_panicked(dev.name(), "Device::name");
    assert_panicked(dev.description(), "Device::description");
    assert_panicked(dev.device_type(), "Device::device_type");
    assert_panicked(dev.memory(), "Device::memory");
    assert_panicked(dev.caps(), "Device::caps");
    assert_panicked(dev.buffer_type(), "Device::buffer_type");
    assert_panicked(dev.host_buffer_type(), "Device::host_buffer_type");
    assert_panicked(dev.init_backend(RStr::from_str("")), "init_backend");
    assert_panicked(dev.new_event(), "new_event");
    let v = dev.supports_op(RSlice::from_slice(&[]), 0);
    assert_eq!(v.code, verdict_code::UNSUPPORTED);
    assert!(v.reason.contains("boom in supports_op"), "{v:?}");
    assert!(!dev.supports_buft(RStr::from_str("x"), true));
    assert!(!dev.offload_op(RSlice::from_slice(&[]), 0));
}

/// A device whose objects all come from `Boom`, to reach them.
struct Maker;

impl Device for Maker {
    fn name(&self) -> String {
        "maker".into()
    }
    fn device_type(&self) -> DeviceType {
        DeviceType::Accel
    }
    fn supports_op(&self, _: &[TensorDesc], _: usize) -> Verdict {
        Verdict::Supported
    }
    fn buffer_type(&self) -> Arc<dyn BufferType> {
        Arc::new(MakerBuft)
    }
    fn init_backend(&self, _: &str) -> Result<Box<dyn Backend>, PluginError> {
        Ok(Box::new(Boom))
    }
    fn new_event(&self) -> Result<Box<dyn Event>, PluginError> {
        Ok(Box::new(Boom))
    }
}

struct MakerBuft;

impl BufferType for MakerBuft {
    fn name(&self) -> String {
        "maker".into()
    }
    fn alloc_buffer(&self, _: u64) -> Result<Box<dyn Buffer>, PluginError> {
        Ok(Box::new(Boom))
    }
    fn alignment(&self) -> u64 {
        1
    }
}

#[test]
fn buffer_type_entry_points_return_the_panic_message() {
    let buft = buffer_type_object(Arc::new(Boom));
    let t = TensorDesc::new(crate::DType::F32, [1, 1, 1, 1]);
    assert_panicked(buft.name(), "BufferType::name");
    assert_panicked(buft.alloc_buffer(8), "alloc_buffer");
    assert_panicked(buft.alignment(), "BufferType::alignment");
    assert_panicked(buft.max_size(), "BufferType::max_size");
    assert_panicked(buft.alloc_size(&t), "BufferType::alloc_size");
    assert_panicked(buft.is_host(), "BufferType::is_host");
}

#[test]
fn buffer_backend_and_event_entry_points_return_the_panic_message() {
    let dev = device_object(Arc::new(Maker));
    let buft = dev.buffer_type().unwrap();
    let buf = buft.alloc_buffer(8).unwrap();
    let t = TensorDesc::new(crate::DType::F32, [1, 1, 1, 1]);
    let mut out = [0u8; 4];
    assert_panicked(buf.id(), "Buffer::id");
    assert_panicked(buf.base(), "Buffer::base");
    assert_panicked(buf.size(), "Buffer::size");
    assert_panicked(
        buf.set_tensor(&t, 0, RSlice::from_slice(&[1])),
        "set_tensor",
    );
    assert_panicked(
        buf.get_tensor(&t, 0, RSliceMut::from_mut_slice(&mut out)),
        "get_tensor",
    );
    assert_panicked(buf.memset_tensor(&t, 0, 0, 1), "memset_tensor");
    assert_panicked(buf.cpy_tensor(&t, &t), "cpy_tensor");
    assert_panicked(buf.clear(0), "clear");
    let stream = dev.init_backend(RStr::from_str("")).unwrap();
    let event = dev.new_event().unwrap();
    assert_panicked(stream.name(), "Backend::name");
    assert_panicked(
        stream.graph_compute(RSlice::from_slice(&[])),
        "graph_compute",
    );
    assert_panicked(
        stream.set_tensor_async(&t, 0, RSlice::from_slice(&[1])),
        "set_tensor_async",
    );
    assert_panicked(
        stream.get_tensor_async(&t, 0, RSliceMut::from_mut_slice(&mut out)),
        "get_tensor_async",
    );
    assert_panicked(stream.cpy_tensor_async(&t, &t), "cpy_tensor_async");
    assert_panicked(stream.synchronize(), "Backend::synchronize");
    assert_panicked(stream.event_record(&event), "event_record");
    assert_panicked(stream.event_wait(&event), "event_wait");
    assert_panicked(event.synchronize(), "Event::synchronize");
}

static DROPS: AtomicUsize = AtomicUsize::new(0);

/// Panics when dropped, after counting the drop.
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::SeqCst);
        panic!("boom in drop");
    }
}

#[test]
fn a_panic_in_drop_is_caught_for_every_object() {
    let before = DROPS.load(Ordering::SeqCst);
    drop_guarded("Buffer", PanicOnDrop);
    drop(Guarded::new("Reg", PanicOnDrop));
    drop(Guarded::new("Device", Arc::new(PanicOnDrop)));
    drop(Guarded::new("Event", Box::new(PanicOnDrop)));
    assert_eq!(DROPS.load(Ordering::SeqCst), before + 4);
}

#[test]
fn open_codes_decode_known_values_and_report_unknown_ones() {
    use crate::plugin::types::{DeviceCaps, caps_bits};
    for t in DeviceType::ALL {
        assert_eq!(DeviceType::from_code(t.code()), Some(t));
    }
    assert_eq!(DeviceType::from_code(4), None);
    assert_eq!(DeviceType::from_code(200), None);
    let unknown = VerdictCode {
        code: 7,
        reason: "from the future".into(),
    };
    assert_eq!(unknown.decode(), Err(7));
    let v = Verdict::unsupported("no");
    assert_eq!(VerdictCode::from(v.clone()).decode(), Ok(v));
    assert_eq!(
        VerdictCode::from(Verdict::Supported).decode(),
        Ok(Verdict::Supported)
    );
    let caps = DeviceCaps {
        async_ops: true,
        host_buffer: false,
        events: true,
    };
    assert_eq!(caps_bits::decode(caps_bits::encode(caps)), caps);
    // Bits a later ABI may add are ignored, not misread.
    assert_eq!(caps_bits::decode(0xFFFF_FFF8), DeviceCaps::default());
}
