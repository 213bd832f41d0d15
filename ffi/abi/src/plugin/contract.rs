//! The backend contract: the traits a plugin implements, one method per
//! entry of ggml's `ggml-backend-impl.h`.
//!
//! This is the one place the contract is written. Each method says what it
//! must do, whether it is **required** or **optional**, and, for optional
//! ones, the default the host relies on when a plugin does not override it.
//!
//! Plugins implement these plain Rust traits; [`export_plugin!`] wraps them
//! in `abi_stable` trait objects whose every entry point catches unwinding:
//! a panic in a fallible method becomes a [`PluginError`] of kind
//! `PANICKED`; in `supports_op` it becomes an `Unsupported` verdict naming
//! the panic; in an infallible getter it yields the fallback named in its
//! doc. All objects are shared across host threads, hence `Send + Sync`.
//!
//! Memory model: a [`Buffer`] hands out an `id`; the host writes it into
//! [`TensorDesc::buffer`] together with the byte `offset` of the tensor in
//! that buffer, and views additionally carry `view_src`/`view_offset`. A
//! backend resolves `(buffer, offset)` to memory when it computes.
//!
//! [`export_plugin!`]: crate::export_plugin

use std::any::Any;
use std::sync::Arc;

use crate::plugin::types::{DeviceCaps, DeviceType, Memory, PluginError, Verdict};
use crate::tensor::TensorDesc;

/// A backend's entry point (ggml's `ggml_backend_reg`): its name and devices.
pub trait Reg: Send + Sync + 'static {
    /// Required. The backend name, lower-case ASCII letters and digits, equal to `<backend>` in the file name `libbackplane_<backend>[-<variant>].so`.
    fn name(&self) -> String;

    /// Required; a panic refuses the plugin with the panic message. The devices found, enumerated once at load; may be empty (then say why in `no_device_reason`).
    fn devices(&self) -> Vec<Arc<dyn Device>>;

    /// Optional, default `None`. Why `devices` is empty (missing runtime, no hardware), one line; the host shows it.
    fn no_device_reason(&self) -> Option<String> {
        None
    }
}

/// One device of a backend (ggml's `ggml_backend_device`).
pub trait Device: Send + Sync + 'static {
    /// Required; panic fallback `"?"`. Short unique name within the backend (`"cpu"`, `"gpu0"`).
    fn name(&self) -> String;

    /// Optional, default: `name()`; panic fallback `""`. One-line description (model, driver).
    fn description(&self) -> String {
        self.name()
    }

    /// Required; panic fallback: the device is refused with the panic message. What kind of hardware this is.
    fn device_type(&self) -> DeviceType;

    /// Optional, default `device_type().code()`; what crosses the ABI. Override only to report a kind newer than this crate's [`DeviceType`] (its code from a later `device_type_code` list); a host that does not know the code refuses this device, naming it.
    fn device_type_code(&self) -> u32 {
        self.device_type().code()
    }

    /// Optional, default 0 / 0 (unknown); panic fallback 0 / 0. Free and total memory in bytes.
    fn memory(&self) -> Memory {
        Memory::default()
    }

    /// Optional, default all false; panic fallback all false. Which optional features the device offers.
    fn caps(&self) -> DeviceCaps {
        DeviceCaps::default()
    }

    /// Required; must be cheap (< 100 ns typical) and pure. Whether `graph[node]` (reading its sources in `graph`) can run here, with the reason when not.
    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> Verdict;

    /// Optional, default: `name == self.buffer_type().name()`; panic fallback false. Whether this device can compute on tensors in buffers of the buffer type called `name` (`is_host` tells if its memory is host memory).
    fn supports_buft(&self, name: &str, is_host: bool) -> bool {
        let _ = is_host;
        name == self.buffer_type().name()
    }

    /// Optional, default false; panic fallback false. Whether the scheduler should copy the weights of `graph[node]` here to run it even though they live elsewhere (large batches).
    fn offload_op(&self, graph: &[TensorDesc], node: usize) -> bool {
        let _ = (graph, node);
        false
    }

    /// Required; a panic refuses the device with the panic message. The device's default buffer type (device memory).
    fn buffer_type(&self) -> Arc<dyn BufferType>;

    /// Optional, default `None`; present iff `caps().host_buffer`. A pinned host buffer type for faster transfers.
    fn host_buffer_type(&self) -> Option<Arc<dyn BufferType>> {
        None
    }

    /// Required. Creates a stream on this device; `params` is a backend-specific option string ("" = defaults).
    fn init_backend(&self, params: &str) -> Result<Box<dyn Backend>, PluginError>;

    /// Optional, default none; panic fallback none. Extra buffer types for weights, most preferred first, whose bytes may be in a layout of the plugin's own (ggml's "extra" buffer types such as a repacked CPU layout). `Buffer::set_tensor` / `get_tensor` of such buffers take and give ggml's layout and convert; the host places a weight in one only when every op reading it passes that type's [`BufferType::supports_op`], and copies to other devices go through `get_tensor`. Crosses the ABI through the extension symbol of `ext` (older plugins have none).
    fn extra_buffer_types(&self) -> Vec<Arc<dyn BufferType>> {
        Vec::new()
    }
    /// Optional, default `Err(unsupported)`; the host calls it only when `caps().events`. Creates an event.
    fn new_event(&self) -> Result<Box<dyn Event>, PluginError> {
        Err(PluginError::unsupported(format!(
            "device {} has no events",
            self.name()
        )))
    }
}

/// A kind of memory a device allocates (ggml's `ggml_backend_buffer_type`).
pub trait BufferType: Send + Sync + 'static {
    /// Required; panic fallback `"?"`. Name, unique across backends (`"cpu"`, `"webgpu0"`).
    fn name(&self) -> String;

    /// Required. Allocates a buffer of `size_bytes` (may be 0); `OUT_OF_MEMORY` when it cannot.
    fn alloc_buffer(&self, size_bytes: u64) -> Result<Box<dyn Buffer>, PluginError>;

    /// Required; panic fallback 256. Alignment in bytes (a power of two) the host must give each tensor's offset.
    fn alignment(&self) -> u64;

    /// Optional, default `u64::MAX`; panic fallback 0. Largest single buffer in bytes.
    fn max_size(&self) -> u64 {
        u64::MAX
    }

    /// Optional, default `tensor.nbytes()`; panic fallback `tensor.nbytes()`. Bytes to reserve for `tensor` (padding for quantized rows, ...).
    fn alloc_size(&self, tensor: &TensorDesc) -> u64 {
        tensor.nbytes()
    }

    /// Optional, default false; panic fallback false. True when buffers live in host memory and `Buffer::base` is a valid host address (never for a layout of the plugin's own: the host would read its bytes as ggml's).
    fn is_host(&self) -> bool {
        false
    }
    /// Optional, default false; panic fallback false. Only asked of [`Device::extra_buffer_types`]: whether `graph[node]` can run on the device with its weight operand (`src[0]`) in a buffer of this type. Must be cheap and pure.
    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> bool {
        let _ = (graph, node);
        false
    }
}

/// One allocation (ggml's `ggml_backend_buffer`); freed when dropped.
pub trait Buffer: Send + Sync + 'static {
    /// Required; panic fallback 0. Nonzero id, unique within the plugin while the buffer lives; the host writes it into `TensorDesc::buffer`.
    fn id(&self) -> u64;

    /// Optional, default 0 (not host addressable); panic fallback 0. Host address of the first byte, nonzero iff the buffer type `is_host`.
    fn base(&self) -> usize {
        0
    }

    /// Required; panic fallback 0. Size in bytes.
    fn size(&self) -> u64;

    /// Required. Writes `data` at byte `offset` within `tensor` (which lives in this buffer); `BAD_INPUT` when out of range.
    fn set_tensor(&self, tensor: &TensorDesc, offset: u64, data: &[u8]) -> Result<(), PluginError>;

    /// Required. Reads `out.len()` bytes at byte `offset` within `tensor` (which lives in this buffer); `BAD_INPUT` when out of range.
    fn get_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PluginError>;

    /// Optional, default: `set_tensor` of a filled host slice. Sets `size` bytes at `offset` within `tensor` to `value`.
    fn memset_tensor(
        &self,
        tensor: &TensorDesc,
        value: u8,
        offset: u64,
        size: u64,
    ) -> Result<(), PluginError> {
        let n = usize::try_from(size)
            .map_err(|_| PluginError::bad_input(format!("memset of {size} bytes")))?;
        self.set_tensor(tensor, offset, &vec![value; n])
    }

    /// Optional, default `Ok(false)`: the host then copies through host memory (`get_tensor` + `set_tensor`). Copies `src` (in a buffer of this plugin) into `dst` (in this buffer); `Ok(true)` when done.
    fn cpy_tensor(&self, src: &TensorDesc, dst: &TensorDesc) -> Result<bool, PluginError> {
        let _ = (src, dst);
        Ok(false)
    }

    /// Required. Sets every byte of the buffer to `value`.
    fn clear(&self, value: u8) -> Result<(), PluginError>;
}

/// A stream on a device (ggml's `ggml_backend`): runs graphs in order.
pub trait Backend: Send + Sync + 'static {
    /// Required; panic fallback `"?"`. Name for logs, e.g. the device name.
    fn name(&self) -> String;

    /// Required. Runs every node of `graph` (topological order; nodes with op `NONE` and views compute nothing) whose memory is in buffers this device `supports_buft`; returns when done or, with `caps().async_ops`, when queued.
    fn graph_compute(&self, graph: &[TensorDesc]) -> Result<(), PluginError>;

    /// Optional, default `Err(unsupported)`; the host calls it only when `caps().async_ops` and keeps `data` alive until `synchronize`. Queues a `Buffer::set_tensor`.
    fn set_tensor_async(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        data: &[u8],
    ) -> Result<(), PluginError> {
        let _ = (tensor, offset, data);
        Err(PluginError::unsupported(format!(
            "backend {} has no async set_tensor",
            self.name()
        )))
    }

    /// Optional, default `Err(unsupported)`; the host calls it only when `caps().async_ops` and reads `out` only after `synchronize`. Queues a `Buffer::get_tensor`.
    fn get_tensor_async(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PluginError> {
        let _ = (tensor, offset, out);
        Err(PluginError::unsupported(format!(
            "backend {} has no async get_tensor",
            self.name()
        )))
    }

    /// Optional, default `Ok(false)`: the host then copies synchronously. Queues a copy of `src` into `dst`, both in buffers of this plugin; `Ok(true)` when queued.
    fn cpy_tensor_async(&self, src: &TensorDesc, dst: &TensorDesc) -> Result<bool, PluginError> {
        let _ = (src, dst);
        Ok(false)
    }

    /// Optional, default `Ok(())` (every call is synchronous). Waits until all queued work is done.
    fn synchronize(&self) -> Result<(), PluginError> {
        Ok(())
    }

    /// Optional, default `Err(unsupported)`; called only when `caps().events`. Records `event` (made by this plugin's `new_event`) at the current point of the stream.
    fn event_record(&self, event: &dyn Event) -> Result<(), PluginError> {
        let _ = event;
        Err(PluginError::unsupported(format!(
            "backend {} has no events",
            self.name()
        )))
    }

    /// Optional, default `Err(unsupported)`; called only when `caps().events`. Makes later work on this stream wait for `event`.
    fn event_wait(&self, event: &dyn Event) -> Result<(), PluginError> {
        let _ = event;
        Err(PluginError::unsupported(format!(
            "backend {} has no events",
            self.name()
        )))
    }
}

/// A point in a stream that other streams and the host can wait for.
pub trait Event: Send + Sync + 'static {
    /// Required. Blocks the host until the recorded work is done (`Ok` at once if never recorded).
    fn synchronize(&self) -> Result<(), PluginError>;

    /// Required (write `self`). The event as `Any`, so the plugin's backend can downcast to its own event type.
    fn as_any(&self) -> &dyn Any;
}
