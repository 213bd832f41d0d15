//! Host-side handles over the ABI objects: the same types whether a backend
//! came from a plugin file or is linked in (the CPU fallback).
//!
//! Each method forwards to the plugin; its meaning is the contract in
//! `backplane_abi::plugin::contract`.

use std::sync::Arc;

use abi_stable::std_types::{RSlice, RSliceMut, RStr};
use backplane_abi::TensorDesc;
use backplane_abi::plugin::{
    BackendBox, BufferBox, BufferTypeRef, DeviceCaps, DeviceRef, DeviceType, EventBox, Memory,
    PluginError, Verdict,
};

/// One device of a loaded backend.
#[derive(Clone)]
pub struct Device {
    backend: Arc<str>,
    raw: DeviceRef,
}

impl Device {
    pub(crate) fn new(backend: Arc<str>, raw: DeviceRef) -> Device {
        Device { backend, raw }
    }

    /// Name of the backend this device belongs to.
    pub fn backend(&self) -> &str {
        &self.backend
    }

    /// Device name within its backend.
    pub fn name(&self) -> String {
        self.raw.name().into()
    }

    /// One-line description.
    pub fn description(&self) -> String {
        self.raw.description().into()
    }

    /// Kind of hardware.
    pub fn device_type(&self) -> DeviceType {
        self.raw.device_type()
    }

    /// Free and total memory.
    pub fn memory(&self) -> Memory {
        self.raw.memory()
    }

    /// Optional features.
    pub fn caps(&self) -> DeviceCaps {
        self.raw.caps()
    }

    /// Whether `graph[node]` can run here, with the reason when not.
    pub fn supports_op(&self, graph: &[TensorDesc], node: usize) -> Verdict {
        self.raw.supports_op(RSlice::from_slice(graph), node)
    }

    /// Whether this device computes on tensors in buffers of `buft`.
    pub fn supports_buft(&self, buft: &BufferType) -> bool {
        let name = buft.name();
        self.raw
            .supports_buft(RStr::from_str(&name), buft.is_host())
    }

    /// Whether to pull the weights of `graph[node]` here to run it.
    pub fn offload_op(&self, graph: &[TensorDesc], node: usize) -> bool {
        self.raw.offload_op(RSlice::from_slice(graph), node)
    }

    /// The default buffer type.
    pub fn buffer_type(&self) -> BufferType {
        BufferType {
            raw: self.raw.buffer_type(),
        }
    }

    /// The pinned host buffer type, if any.
    pub fn host_buffer_type(&self) -> Option<BufferType> {
        self.raw
            .host_buffer_type()
            .into_option()
            .map(|raw| BufferType { raw })
    }

    /// A new stream on this device.
    pub fn init_backend(&self, params: &str) -> Result<Stream, PluginError> {
        self.raw
            .init_backend(RStr::from_str(params))
            .into_result()
            .map(|raw| Stream { raw })
    }

    /// A new event (only when `caps().events`).
    pub fn new_event(&self) -> Result<Event, PluginError> {
        self.raw.new_event().into_result().map(|raw| Event { raw })
    }

    /// The ABI object itself.
    pub fn raw(&self) -> &DeviceRef {
        &self.raw
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({}/{})", self.backend, self.name())
    }
}

/// A kind of memory a device allocates.
#[derive(Clone)]
pub struct BufferType {
    raw: BufferTypeRef,
}

impl BufferType {
    /// Name, unique across backends.
    pub fn name(&self) -> String {
        self.raw.name().into()
    }

    /// Allocates a buffer.
    pub fn alloc_buffer(&self, size_bytes: u64) -> Result<Buffer, PluginError> {
        self.raw
            .alloc_buffer(size_bytes)
            .into_result()
            .map(|raw| Buffer { raw })
    }

    /// Alignment of tensor offsets in bytes.
    pub fn alignment(&self) -> u64 {
        self.raw.alignment()
    }

    /// Largest buffer in bytes.
    pub fn max_size(&self) -> u64 {
        self.raw.max_size()
    }

    /// Bytes to reserve for `tensor`.
    pub fn alloc_size(&self, tensor: &TensorDesc) -> u64 {
        self.raw.alloc_size(tensor)
    }

    /// Whether buffers live in host memory.
    pub fn is_host(&self) -> bool {
        self.raw.is_host()
    }
}

/// One allocation; freed when dropped.
pub struct Buffer {
    raw: BufferBox,
}

impl Buffer {
    /// Id to write into `TensorDesc::buffer`.
    pub fn id(&self) -> u64 {
        self.raw.id()
    }

    /// Host address of the first byte (0 when not host memory).
    pub fn base(&self) -> usize {
        self.raw.base()
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.raw.size()
    }

    /// Writes `data` at `offset` bytes into `tensor`.
    pub fn set_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        data: &[u8],
    ) -> Result<(), PluginError> {
        self.raw
            .set_tensor(tensor, offset, RSlice::from_slice(data))
            .into_result()
    }

    /// Reads `out.len()` bytes at `offset` bytes into `tensor`.
    pub fn get_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PluginError> {
        self.raw
            .get_tensor(tensor, offset, RSliceMut::from_mut_slice(out))
            .into_result()
    }

    /// Sets `size` bytes at `offset` into `tensor` to `value`.
    pub fn memset_tensor(
        &self,
        tensor: &TensorDesc,
        value: u8,
        offset: u64,
        size: u64,
    ) -> Result<(), PluginError> {
        self.raw
            .memset_tensor(tensor, value, offset, size)
            .into_result()
    }

    /// Copies `src` into `dst` (in this buffer); `Ok(false)` when the plugin cannot.
    pub fn cpy_tensor(&self, src: &TensorDesc, dst: &TensorDesc) -> Result<bool, PluginError> {
        self.raw.cpy_tensor(src, dst).into_result()
    }

    /// Sets every byte to `value`.
    pub fn clear(&self, value: u8) -> Result<(), PluginError> {
        self.raw.clear(value).into_result()
    }
}

/// A stream on a device.
pub struct Stream {
    raw: BackendBox,
}

impl Stream {
    /// Name for logs.
    pub fn name(&self) -> String {
        self.raw.name().into()
    }

    /// Runs a graph.
    pub fn graph_compute(&self, graph: &[TensorDesc]) -> Result<(), PluginError> {
        self.raw
            .graph_compute(RSlice::from_slice(graph))
            .into_result()
    }

    /// Queues a tensor write (`caps().async_ops` only); keep `data` alive until `synchronize`.
    pub fn set_tensor_async(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        data: &[u8],
    ) -> Result<(), PluginError> {
        self.raw
            .set_tensor_async(tensor, offset, RSlice::from_slice(data))
            .into_result()
    }

    /// Queues a tensor read (`caps().async_ops` only); read `out` after `synchronize`.
    pub fn get_tensor_async(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PluginError> {
        self.raw
            .get_tensor_async(tensor, offset, RSliceMut::from_mut_slice(out))
            .into_result()
    }

    /// Queues a copy between buffers of this plugin; `Ok(false)` when it cannot.
    pub fn cpy_tensor_async(
        &self,
        src: &TensorDesc,
        dst: &TensorDesc,
    ) -> Result<bool, PluginError> {
        self.raw.cpy_tensor_async(src, dst).into_result()
    }

    /// Waits for queued work.
    pub fn synchronize(&self) -> Result<(), PluginError> {
        self.raw.synchronize().into_result()
    }

    /// Records `event` on this stream.
    pub fn event_record(&self, event: &Event) -> Result<(), PluginError> {
        self.raw.event_record(&event.raw).into_result()
    }

    /// Makes this stream wait for `event`.
    pub fn event_wait(&self, event: &Event) -> Result<(), PluginError> {
        self.raw.event_wait(&event.raw).into_result()
    }
}

/// An event.
pub struct Event {
    raw: EventBox,
}

impl Event {
    /// Blocks until the recorded work is done.
    pub fn synchronize(&self) -> Result<(), PluginError> {
        self.raw.synchronize().into_result()
    }
}
