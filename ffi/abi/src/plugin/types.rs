//! Plain values that cross the plugin boundary: device kind, memory, caps,
//! the `supports_op` verdict and the error every fallible call returns.

use std::any::Any;
use std::fmt;

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

/// What kind of hardware a device is, as ggml's `ggml_backend_dev_type`.
///
/// This enum is the plugin author's and the host's view; it does not cross
/// the boundary as an enum. Across the ABI a device kind is an open `u32`
/// code ([`DeviceType::code`], [`device_type_code`]), so a kind added later
/// (a new code at the end) neither changes the ABI layout nor is undefined
/// behaviour in an older host: the host refuses that one device with the
/// code it does not know and keeps the rest of the plugin.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, StableAbi)]
pub enum DeviceType {
    /// The host CPU (host memory, always present).
    Cpu,
    /// A discrete GPU with its own memory.
    Gpu,
    /// An integrated GPU sharing host memory.
    IGpu,
    /// Another accelerator (NPU, DSP, ...).
    Accel,
}

/// The ABI codes of [`DeviceType`] (append-only: a new kind gets the next code).
pub mod device_type_code {
    /// [`DeviceType::Cpu`](super::DeviceType::Cpu).
    pub const CPU: u32 = 0;
    /// [`DeviceType::Gpu`](super::DeviceType::Gpu).
    pub const GPU: u32 = 1;
    /// [`DeviceType::IGpu`](super::DeviceType::IGpu).
    pub const IGPU: u32 = 2;
    /// [`DeviceType::Accel`](super::DeviceType::Accel).
    pub const ACCEL: u32 = 3;
}

impl DeviceType {
    /// Every kind this build knows, in code order.
    pub const ALL: [DeviceType; 4] = [
        DeviceType::Cpu,
        DeviceType::Gpu,
        DeviceType::IGpu,
        DeviceType::Accel,
    ];

    /// The ABI code of this kind ([`device_type_code`]).
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// The kind of an ABI code, `None` for a code this build does not know.
    pub fn from_code(code: u32) -> Option<DeviceType> {
        DeviceType::ALL.into_iter().find(|t| t.code() == code)
    }

    /// Lower-case name: `cpu`, `gpu`, `igpu`, `accel`.
    pub fn name(self) -> &'static str {
        match self {
            DeviceType::Cpu => "cpu",
            DeviceType::Gpu => "gpu",
            DeviceType::IGpu => "igpu",
            DeviceType::Accel => "accel",
        }
    }
}

impl fmt::Display for DeviceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Device memory in bytes (0 / 0 when unknown).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, StableAbi)]
pub struct Memory {
    /// Bytes free now.
    pub free_bytes: u64,
    /// Bytes in total.
    pub total_bytes: u64,
}

/// Optional abilities of a device, as ggml's `ggml_backend_dev_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, StableAbi)]
pub struct DeviceCaps {
    /// The backend implements `set/get/cpy_tensor_async` and `synchronize`.
    pub async_ops: bool,
    /// The device offers a pinned host buffer type (`host_buffer_type`).
    pub host_buffer: bool,
    /// The device implements events (`new_event`, `event_record/wait`).
    pub events: bool,
}

/// Whether a device can run a node, and if not, why.
#[repr(C)]
#[derive(Clone, Debug, PartialEq, Eq, StableAbi)]
pub enum Verdict {
    /// The device runs this node.
    Supported,
    /// The device does not run this node; the reason names the op, types or
    /// limits (`"K type q5_1 not implemented"`).
    Unsupported(RString),
}

impl Verdict {
    /// `Unsupported` with the given reason.
    pub fn unsupported(reason: impl Into<String>) -> Verdict {
        Verdict::Unsupported(RString::from(reason.into()))
    }

    /// True for `Supported`.
    pub fn is_supported(&self) -> bool {
        matches!(self, Verdict::Supported)
    }

    /// The reason of an `Unsupported` verdict.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Verdict::Supported => None,
            Verdict::Unsupported(r) => Some(r.as_str()),
        }
    }
}

/// The ABI codes of [`Verdict`] (append-only).
pub mod verdict_code {
    /// [`Verdict::Supported`](super::Verdict::Supported).
    pub const SUPPORTED: u32 = 0;
    /// [`Verdict::Unsupported`](super::Verdict::Unsupported).
    pub const UNSUPPORTED: u32 = 1;
}

/// A [`Verdict`] as it crosses the boundary: an open code plus the reason,
/// so that a verdict kind added later is not a layout change.
#[repr(C)]
#[derive(Clone, Debug, PartialEq, Eq, StableAbi)]
pub struct VerdictCode {
    /// One of [`verdict_code`]; a host treats a code it does not know as
    /// unsupported, naming the code.
    pub code: u32,
    /// The reason (empty when supported).
    pub reason: RString,
}

impl From<Verdict> for VerdictCode {
    fn from(v: Verdict) -> VerdictCode {
        match v {
            Verdict::Supported => VerdictCode {
                code: verdict_code::SUPPORTED,
                reason: RString::new(),
            },
            Verdict::Unsupported(reason) => VerdictCode {
                code: verdict_code::UNSUPPORTED,
                reason,
            },
        }
    }
}

impl VerdictCode {
    /// The verdict, or `Err(code)` for a code this build does not know.
    pub fn decode(self) -> Result<Verdict, u32> {
        match self.code {
            verdict_code::SUPPORTED => Ok(Verdict::Supported),
            verdict_code::UNSUPPORTED => Ok(Verdict::Unsupported(self.reason)),
            other => Err(other),
        }
    }
}

/// [`DeviceCaps`] as they cross the boundary: bit flags in a `u32` (bit 0
/// async ops, bit 1 host buffer, bit 2 events; unknown bits are ignored).
pub mod caps_bits {
    use super::DeviceCaps;

    /// `async_ops`.
    pub const ASYNC_OPS: u32 = 1;
    /// `host_buffer`.
    pub const HOST_BUFFER: u32 = 2;
    /// `events`.
    pub const EVENTS: u32 = 4;

    /// The flags of `caps`.
    pub fn encode(caps: DeviceCaps) -> u32 {
        let bit = |on: bool, flag: u32| if on { flag } else { 0 };
        bit(caps.async_ops, ASYNC_OPS)
            | bit(caps.host_buffer, HOST_BUFFER)
            | bit(caps.events, EVENTS)
    }

    /// The caps of `flags` (unknown bits ignored).
    pub fn decode(flags: u32) -> DeviceCaps {
        DeviceCaps {
            async_ops: flags & ASYNC_OPS != 0,
            host_buffer: flags & HOST_BUFFER != 0,
            events: flags & EVENTS != 0,
        }
    }
}

impl From<Result<(), String>> for Verdict {
    fn from(r: Result<(), String>) -> Verdict {
        match r {
            Ok(()) => Verdict::Supported,
            Err(reason) => Verdict::unsupported(reason),
        }
    }
}

/// Kinds of [`PluginError`] (a `u32` so that new kinds stay ABI compatible).
pub mod error_kind {
    /// Anything else.
    pub const OTHER: u32 = 0;
    /// The call or the node is not supported by this plugin.
    pub const UNSUPPORTED: u32 = 1;
    /// Arguments or data were invalid (out of range, unallocated tensor, ...).
    pub const BAD_INPUT: u32 = 2;
    /// Memory could not be allocated.
    pub const OUT_OF_MEMORY: u32 = 3;
    /// The plugin panicked; the panic was caught at the boundary.
    pub const PANICKED: u32 = 4;
}

/// The error of every fallible plugin call.
#[repr(C)]
#[derive(Clone, Debug, PartialEq, Eq, StableAbi)]
pub struct PluginError {
    /// One of [`error_kind`]; unknown values read as `OTHER`.
    pub kind: u32,
    /// What went wrong, with context (op, shapes, sizes).
    pub message: RString,
}

impl PluginError {
    /// An error of the given kind.
    pub fn new(kind: u32, message: impl Into<String>) -> PluginError {
        PluginError {
            kind,
            message: RString::from(message.into()),
        }
    }

    /// [`error_kind::OTHER`].
    pub fn other(message: impl Into<String>) -> PluginError {
        PluginError::new(error_kind::OTHER, message)
    }

    /// [`error_kind::UNSUPPORTED`].
    pub fn unsupported(message: impl Into<String>) -> PluginError {
        PluginError::new(error_kind::UNSUPPORTED, message)
    }

    /// [`error_kind::BAD_INPUT`].
    pub fn bad_input(message: impl Into<String>) -> PluginError {
        PluginError::new(error_kind::BAD_INPUT, message)
    }

    /// [`error_kind::OUT_OF_MEMORY`].
    pub fn out_of_memory(message: impl Into<String>) -> PluginError {
        PluginError::new(error_kind::OUT_OF_MEMORY, message)
    }

    /// [`error_kind::PANICKED`], from a caught panic payload.
    pub fn panicked(call: &str, payload: &(dyn Any + Send)) -> PluginError {
        PluginError::new(
            error_kind::PANICKED,
            format!("plugin panicked in {call}: {}", panic_message(payload)),
        )
    }

    /// True when the plugin panicked.
    pub fn is_panic(&self) -> bool {
        self.kind == error_kind::PANICKED
    }
}

impl fmt::Display for PluginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PluginError {}

/// The text of a panic payload (`&str` or `String`), else a placeholder.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}
