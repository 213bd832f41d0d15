//! Plain values that cross the plugin boundary: device kind, memory, caps,
//! the `supports_op` verdict and the error every fallible call returns.

use std::any::Any;
use std::fmt;

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

/// What kind of hardware a device is, as ggml's `ggml_backend_dev_type`.
///
/// Append-only: a new kind is a new variant at the end.
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

impl DeviceType {
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
