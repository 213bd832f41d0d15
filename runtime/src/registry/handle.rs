//! Host-side handles over the ABI objects: the same types whether a backend
//! came from a plugin file or is linked in (the CPU fallback).
//!
//! This is the plugin edge: every value a plugin hands the host is checked
//! here, once, by the rules of [`check`] (enum codes known,
//! numbers in range and consistent, text cleaned and capped), and the rest
//! of the host trusts what these handles return. Values that do not change
//! (names, kinds, caps, buffer types, alignments, a buffer's id and size)
//! are read and checked once and kept. Each method's meaning is the
//! contract in `backplane_abi::plugin::contract`.

use std::sync::Arc;

use abi_stable::std_types::{RSlice, RSliceMut, RStr};
use backplane_abi::TensorDesc;
use backplane_abi::plugin::{
    BackendBox, BufferBox, BufferTypeRef, DeviceCaps, DeviceRef, DeviceType, EventBox, Memory,
    PluginError, Verdict, caps_bits, device_type_code,
};

use backplane_abi::plugin::ext::WeightOpsRef;

use super::check::{self, MAX_DESCRIPTION_CHARS, MAX_MESSAGE_CHARS, MAX_NAME_CHARS, clean_text};

/// A plugin call's result with its error message cleaned.
fn clean<T>(r: abi_stable::std_types::RResult<T, PluginError>) -> Result<T, PluginError> {
    r.into_result().map_err(check::clean_error)
}

/// A getter's result at load time: the panic or error message as a reason.
fn at_load<T>(r: abi_stable::std_types::RResult<T, PluginError>) -> Result<T, String> {
    clean(r).map_err(|e| e.message.to_string())
}

/// What a device says about itself, checked once at load.
struct DeviceInfo {
    name: String,
    description: String,
    device_type: DeviceType,
    caps: DeviceCaps,
    buffer_type: BufferType,
    host_buffer_type: Option<BufferType>,
    extra_buffer_types: Vec<BufferType>,
}

/// One device of a loaded backend.
#[derive(Clone)]
pub struct Device {
    backend: Arc<str>,
    raw: DeviceRef,
    info: Arc<DeviceInfo>,
}

impl Device {
    /// A device of backend `backend` from an ABI object made in this process
    /// (a test double, a device of a backend linked in), checked by the
    /// rules a plugin's device is; it offers no extra buffer types. The
    /// error names the field, the value and the rule it breaks.
    pub fn from_object(backend: &str, raw: DeviceRef) -> Result<Device, String> {
        let none = abi_stable::std_types::RResult::ROk(abi_stable::std_types::RVec::new());
        Device::check(Arc::from(backend), raw, none)
    }

    /// Checks the device a plugin handed over; the reason names the field,
    /// the value and the rule it breaks.
    pub(crate) fn check(
        backend: Arc<str>,
        raw: DeviceRef,
        extra: super::ExtraAnswer,
    ) -> Result<Device, String> {
        let name = clean_text(&at_load(raw.name())?, MAX_NAME_CHARS);
        let in_device = |e: String| format!("device '{name}': {e}");
        let description = clean_text(
            &at_load(raw.description()).map_err(in_device)?,
            MAX_DESCRIPTION_CHARS,
        );
        let code = at_load(raw.device_type()).map_err(in_device)?;
        let device_type = DeviceType::from_code(code).ok_or_else(|| {
            in_device(format!(
                "device type code {code} is unknown to this host (it knows {} cpu, {} gpu, {} igpu, {} accel)",
                device_type_code::CPU,
                device_type_code::GPU,
                device_type_code::IGPU,
                device_type_code::ACCEL
            ))
        })?;
        let mem = at_load(raw.memory()).map_err(in_device)?;
        check::memory(mem.free_bytes, mem.total_bytes).map_err(in_device)?;
        let caps = caps_bits::decode(at_load(raw.caps()).map_err(in_device)?);
        let buffer_type =
            BufferType::check(at_load(raw.buffer_type()).map_err(in_device)?).map_err(in_device)?;
        let host_buffer_type = match at_load(raw.host_buffer_type()).map_err(in_device)? {
            abi_stable::std_types::ROption::RSome(b) => {
                Some(BufferType::check(b).map_err(in_device)?)
            }
            abi_stable::std_types::ROption::RNone => None,
        };
        let extra_buffer_types = extra_buffer_types(extra, &name, &buffer_type);
        let info = DeviceInfo {
            name,
            description,
            device_type,
            caps,
            buffer_type,
            host_buffer_type,
            extra_buffer_types,
        };
        Ok(Device {
            backend,
            raw,
            info: Arc::new(info),
        })
    }

    /// Name of the backend this device belongs to.
    pub fn backend(&self) -> &str {
        &self.backend
    }

    /// Device name within its backend (cleaned, at most 64 characters).
    pub fn name(&self) -> String {
        self.info.name.clone()
    }

    /// One-line description (cleaned, at most 256 characters).
    pub fn description(&self) -> String {
        self.info.description.clone()
    }

    /// Kind of hardware.
    pub fn device_type(&self) -> DeviceType {
        self.info.device_type
    }

    /// Free and total memory, checked now (free at most total).
    pub fn try_memory(&self) -> Result<Memory, String> {
        let mem = clean(self.raw.memory()).map_err(|e| e.message.to_string())?;
        check::memory(mem.free_bytes, mem.total_bytes)?;
        Ok(mem)
    }

    /// Free and total memory; when the plugin's answer breaks the rules
    /// ([`try_memory`](Self::try_memory) says how) 0 / 0 (unknown), with a
    /// warning.
    pub fn memory(&self) -> Memory {
        self.try_memory().unwrap_or_else(|e| {
            tracing::warn!(device = %self.info.name, "{e}");
            Memory::default()
        })
    }

    /// Optional features (read once at load).
    pub fn caps(&self) -> DeviceCaps {
        self.info.caps
    }

    /// Whether `graph[node]` can run here, with the reason when not.
    pub fn supports_op(&self, graph: &[TensorDesc], node: usize) -> Verdict {
        match self
            .raw
            .supports_op(RSlice::from_slice(graph), node)
            .decode()
        {
            Ok(Verdict::Supported) => Verdict::Supported,
            Ok(Verdict::Unsupported(reason)) => {
                Verdict::unsupported(clean_text(&reason, MAX_MESSAGE_CHARS))
            }
            Err(code) => Verdict::unsupported(format!(
                "device {} answered supports_op with verdict code {code}, unknown to this host",
                self.info.name
            )),
        }
    }

    /// Whether this device computes on tensors in buffers of `buft`.
    pub fn supports_buft(&self, buft: &BufferType) -> bool {
        self.raw
            .supports_buft(RStr::from_str(&buft.info.name), buft.info.is_host)
    }

    /// Whether to pull the weights of `graph[node]` here to run it.
    pub fn offload_op(&self, graph: &[TensorDesc], node: usize) -> bool {
        self.raw.offload_op(RSlice::from_slice(graph), node)
    }

    /// The default buffer type (checked at load).
    pub fn buffer_type(&self) -> BufferType {
        self.info.buffer_type.clone()
    }

    /// The pinned host buffer type, if any (checked at load).
    pub fn host_buffer_type(&self) -> Option<BufferType> {
        self.info.host_buffer_type.clone()
    }

    /// Extra buffer types for weights, most preferred first (checked at
    /// load: each is a layout of the plugin's own, never host-addressable).
    pub fn extra_buffer_types(&self) -> &[BufferType] {
        &self.info.extra_buffer_types
    }

    /// A new stream on this device.
    pub fn init_backend(&self, params: &str) -> Result<Stream, PluginError> {
        clean(self.raw.init_backend(RStr::from_str(params))).map(|raw| Stream { raw })
    }

    /// A new event (only when `caps().events`).
    pub fn new_event(&self) -> Result<Event, PluginError> {
        clean(self.raw.new_event()).map(|raw| Event { raw })
    }

    /// The ABI object itself (unchecked: calls through it bypass the rules).
    pub fn raw(&self) -> &DeviceRef {
        &self.raw
    }
}

/// The device's extra buffer types that pass the checks; the others are
/// left out with a warning naming the rule (a bad extra type costs its
/// speed-up, not the device).
fn extra_buffer_types(
    answer: super::ExtraAnswer,
    device: &str,
    default: &BufferType,
) -> Vec<BufferType> {
    let list = match at_load(answer) {
        Ok(list) => list,
        Err(e) => {
            tracing::warn!(device, "extra buffer types left out: {e}");
            return Vec::new();
        }
    };
    let mut out: Vec<BufferType> = Vec::new();
    for extra in list.into_iter().take(check::MAX_EXTRA_BUFFER_TYPES) {
        let checked = BufferType::check(extra.buffer_type).and_then(|mut b| {
            b.ops = Some(extra.ops);
            if b.info.is_host {
                Err(format!(
                    "extra buffer type '{}' says it is host memory; a layout of the plugin's own must not be read as ggml's",
                    b.info.name
                ))
            } else if b.info.name == default.info.name || out.iter().any(|o| o.info.name == b.info.name) {
                Err(format!("extra buffer type '{}' repeats a name", b.info.name))
            } else {
                Ok(b)
            }
        });
        match checked {
            Ok(b) => out.push(b),
            Err(e) => tracing::warn!(device, "extra buffer type left out: {e}"),
        }
    }
    out
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({}/{})", self.backend, self.info.name)
    }
}

/// A kind of memory a device allocates.
#[derive(Clone)]
pub struct BufferType {
    raw: BufferTypeRef,
    info: Arc<BufferTypeInfo>,
    /// For an extra buffer type: which ops run with weights in it.
    ops: Option<WeightOpsRef>,
}

/// What a buffer type says about itself, checked once.
struct BufferTypeInfo {
    name: String,
    alignment: u64,
    max_size: u64,
    is_host: bool,
}

impl BufferType {
    /// Checks a buffer type a plugin handed over.
    fn check(raw: BufferTypeRef) -> Result<BufferType, String> {
        let name = clean_text(&at_load(raw.name())?, MAX_NAME_CHARS);
        let in_buft = |e: String| format!("buffer type '{name}': {e}");
        let alignment =
            check::alignment(at_load(raw.alignment()).map_err(in_buft)?).map_err(in_buft)?;
        let max_size = at_load(raw.max_size()).map_err(in_buft)?;
        let is_host = at_load(raw.is_host()).map_err(in_buft)?;
        let info = BufferTypeInfo {
            name,
            alignment,
            max_size,
            is_host,
        };
        Ok(BufferType {
            raw,
            info: Arc::new(info),
            ops: None,
        })
    }

    /// Name, unique across backends (cleaned, at most 64 characters).
    pub fn name(&self) -> String {
        self.info.name.clone()
    }

    /// Allocates a buffer; the plugin's buffer is checked (nonzero id, at
    /// least `size_bytes`, a base address when host memory) and freed again
    /// with a `BAD_INPUT` error naming the rule when it fails.
    pub fn alloc_buffer(&self, size_bytes: u64) -> Result<Buffer, PluginError> {
        let raw = clean(self.raw.alloc_buffer(size_bytes))?;
        let refuse =
            |e: String| PluginError::bad_input(format!("buffer type '{}': {e}", self.info.name));
        let id = clean(raw.id())?;
        let size = clean(raw.size())?;
        let base = clean(raw.base())?;
        check::new_buffer(id, size, size_bytes, base, self.info.is_host).map_err(refuse)?;
        Ok(Buffer {
            raw,
            id,
            base,
            size,
        })
    }

    /// For an extra buffer type ([`Device::extra_buffer_types`]): whether
    /// `graph[node]` can run with its weight operand in a buffer of this
    /// type.
    pub fn supports_op(&self, graph: &[TensorDesc], node: usize) -> bool {
        self.ops
            .as_ref()
            .is_some_and(|o| o.supports_op(RSlice::from_slice(graph), node))
    }

    /// Alignment of tensor offsets in bytes (a power of two up to 64 KiB).
    pub fn alignment(&self) -> u64 {
        self.info.alignment
    }

    /// Largest buffer in bytes.
    pub fn max_size(&self) -> u64 {
        self.info.max_size
    }

    /// Bytes to reserve for `tensor`, checked: from its size to twice it
    /// plus 64 KiB.
    pub fn try_alloc_size(&self, tensor: &TensorDesc) -> Result<u64, PluginError> {
        let value = clean(self.raw.alloc_size(tensor))?;
        check::alloc_size(value, tensor.nbytes())
            .map_err(|e| PluginError::bad_input(format!("buffer type '{}': {e}", self.info.name)))
    }

    /// Bytes to reserve for `tensor`; when the plugin's answer breaks the
    /// rules ([`try_alloc_size`](Self::try_alloc_size) says how) the
    /// tensor's own size, with a warning.
    pub fn alloc_size(&self, tensor: &TensorDesc) -> u64 {
        self.try_alloc_size(tensor).unwrap_or_else(|e| {
            tracing::warn!("{e}");
            tensor.nbytes()
        })
    }

    /// Whether buffers live in host memory.
    pub fn is_host(&self) -> bool {
        self.info.is_host
    }
}

/// One allocation; freed when dropped.
pub struct Buffer {
    raw: BufferBox,
    id: u64,
    base: usize,
    size: u64,
}

impl Buffer {
    /// Id to write into `TensorDesc::buffer` (nonzero, read once).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Host address of the first byte (0 when not host memory; read once).
    pub fn base(&self) -> usize {
        self.base
    }

    /// Size in bytes (at least what was asked; read once).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Writes `data` at `offset` bytes into `tensor`.
    pub fn set_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        data: &[u8],
    ) -> Result<(), PluginError> {
        clean(
            self.raw
                .set_tensor(tensor, offset, RSlice::from_slice(data)),
        )
    }

    /// Reads `out.len()` bytes at `offset` bytes into `tensor`.
    pub fn get_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PluginError> {
        clean(
            self.raw
                .get_tensor(tensor, offset, RSliceMut::from_mut_slice(out)),
        )
    }

    /// Sets `size` bytes at `offset` into `tensor` to `value`.
    pub fn memset_tensor(
        &self,
        tensor: &TensorDesc,
        value: u8,
        offset: u64,
        size: u64,
    ) -> Result<(), PluginError> {
        clean(self.raw.memset_tensor(tensor, value, offset, size))
    }

    /// Copies `src` into `dst` (in this buffer); `Ok(false)` when the plugin cannot.
    pub fn cpy_tensor(&self, src: &TensorDesc, dst: &TensorDesc) -> Result<bool, PluginError> {
        clean(self.raw.cpy_tensor(src, dst))
    }

    /// Sets every byte to `value`.
    pub fn clear(&self, value: u8) -> Result<(), PluginError> {
        clean(self.raw.clear(value))
    }
}

/// A stream on a device.
pub struct Stream {
    raw: BackendBox,
}

impl Stream {
    /// Name for logs.
    pub fn name(&self) -> String {
        match clean(self.raw.name()) {
            Ok(n) => clean_text(&n, MAX_NAME_CHARS),
            Err(e) => format!("? ({e})"),
        }
    }

    /// Runs a graph.
    pub fn graph_compute(&self, graph: &[TensorDesc]) -> Result<(), PluginError> {
        clean(self.raw.graph_compute(RSlice::from_slice(graph)))
    }

    /// Queues a tensor write (`caps().async_ops` only); keep `data` alive until `synchronize`.
    pub fn set_tensor_async(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        data: &[u8],
    ) -> Result<(), PluginError> {
        clean(
            self.raw
                .set_tensor_async(tensor, offset, RSlice::from_slice(data)),
        )
    }

    /// Queues a tensor read (`caps().async_ops` only); read `out` after `synchronize`.
    pub fn get_tensor_async(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PluginError> {
        clean(
            self.raw
                .get_tensor_async(tensor, offset, RSliceMut::from_mut_slice(out)),
        )
    }

    /// Queues a copy between buffers of this plugin; `Ok(false)` when it cannot.
    pub fn cpy_tensor_async(
        &self,
        src: &TensorDesc,
        dst: &TensorDesc,
    ) -> Result<bool, PluginError> {
        clean(self.raw.cpy_tensor_async(src, dst))
    }

    /// Waits for queued work.
    pub fn synchronize(&self) -> Result<(), PluginError> {
        clean(self.raw.synchronize())
    }

    /// Records `event` on this stream.
    pub fn event_record(&self, event: &Event) -> Result<(), PluginError> {
        clean(self.raw.event_record(&event.raw))
    }

    /// Makes this stream wait for `event`.
    pub fn event_wait(&self, event: &Event) -> Result<(), PluginError> {
        clean(self.raw.event_wait(&event.raw))
    }
}

/// An event.
pub struct Event {
    raw: EventBox,
}

impl Event {
    /// Blocks until the recorded work is done.
    pub fn synchronize(&self) -> Result<(), PluginError> {
        clean(self.raw.synchronize())
    }
}
