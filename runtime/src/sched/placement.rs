//! The seam between the planner and the devices: what the planner asks a
//! backend. Implemented for the registry's [`Device`] and, in tests, for
//! fakes.

use abi_stable::std_types::RStr;
use backplane_abi::TensorDesc;
use backplane_abi::plugin::{DeviceType, Verdict};

use crate::registry::Device;

/// What the planner needs to know about one backend.
pub trait Placement {
    /// Name shown in explanations (`"webgpu/gpu0"`).
    fn name(&self) -> String;
    /// Kind of hardware (a CPU never counts as an offload target).
    fn device_type(&self) -> DeviceType;
    /// Whether `graph[node]` can run here, with the reason when not.
    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> Verdict;
    /// Whether the backend wants an op whose weights live elsewhere (large batches).
    fn offload_op(&self, graph: &[TensorDesc], node: usize) -> bool;
    /// Name of the default buffer type (where its compute buffer lives).
    fn buffer_type_name(&self) -> String;
    /// Whether the default buffer type is host memory.
    fn buffer_is_host(&self) -> bool;
    /// Whether this backend computes on tensors in buffers of the type called `name`.
    fn supports_buft(&self, name: &str, is_host: bool) -> bool;
    /// Alignment of tensor offsets in its buffers, in bytes.
    fn alignment(&self) -> u64;
    /// Largest buffer it allocates, in bytes.
    fn max_buffer_size(&self) -> u64 {
        u64::MAX
    }
    /// Bytes to reserve for `tensor` in its buffers.
    fn alloc_size(&self, tensor: &TensorDesc) -> u64 {
        tensor.nbytes()
    }
}

/// A registry [`Device`] as a [`Placement`], with the buffer type's facts
/// read once.
#[derive(Clone, Debug)]
pub struct DevicePlacement {
    device: Device,
    buft_name: String,
    buft_host: bool,
    alignment: u64,
    max_size: u64,
}

impl DevicePlacement {
    /// Wraps a device.
    pub fn new(device: Device) -> DevicePlacement {
        let buft = device.buffer_type();
        DevicePlacement {
            buft_name: buft.name(),
            buft_host: buft.is_host(),
            alignment: buft.alignment().max(1),
            max_size: buft.max_size(),
            device,
        }
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }
}

impl Placement for DevicePlacement {
    fn name(&self) -> String {
        format!("{}/{}", self.device.backend(), self.device.name())
    }
    fn device_type(&self) -> DeviceType {
        self.device.device_type()
    }
    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> Verdict {
        self.device.supports_op(graph, node)
    }
    fn offload_op(&self, graph: &[TensorDesc], node: usize) -> bool {
        self.device.offload_op(graph, node)
    }
    fn buffer_type_name(&self) -> String {
        self.buft_name.clone()
    }
    fn buffer_is_host(&self) -> bool {
        self.buft_host
    }
    fn supports_buft(&self, name: &str, is_host: bool) -> bool {
        if name == self.buft_name {
            return true;
        }
        self.device
            .raw()
            .supports_buft(RStr::from_str(name), is_host)
    }
    fn alignment(&self) -> u64 {
        self.alignment
    }
    fn max_buffer_size(&self) -> u64 {
        self.max_size
    }
    fn alloc_size(&self, tensor: &TensorDesc) -> u64 {
        self.device.buffer_type().alloc_size(tensor)
    }
}

/// Facts about the backends read once when the planner is made: names,
/// types and which backend can read which backend's buffers.
#[derive(Clone, Debug)]
pub(crate) struct BackendFacts {
    /// Names in priority order.
    pub names: Vec<String>,
    /// Whether each backend is a CPU.
    pub is_cpu: Vec<bool>,
    /// Buffer type name of each backend.
    pub buft: Vec<String>,
    /// Whether each backend's buffers are host memory.
    pub host: Vec<bool>,
    /// `access[b * n + m]`: backend b computes on memory of backend m.
    pub access: Vec<bool>,
}

impl BackendFacts {
    pub fn read(backends: &[Box<dyn Placement + Send + Sync>]) -> BackendFacts {
        let n = backends.len();
        let buft: Vec<String> = backends.iter().map(|b| b.buffer_type_name()).collect();
        let host: Vec<bool> = backends.iter().map(|b| b.buffer_is_host()).collect();
        let mut access = vec![false; n * n];
        for (b, be) in backends.iter().enumerate() {
            for m in 0..n {
                access[b * n + m] =
                    b == m || buft[b] == buft[m] || be.supports_buft(&buft[m], host[m]);
            }
        }
        BackendFacts {
            names: backends.iter().map(|b| b.name()).collect(),
            is_cpu: backends
                .iter()
                .map(|b| b.device_type() == DeviceType::Cpu)
                .collect(),
            buft,
            host,
            access,
        }
    }

    /// Number of backends.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Backend `b` computes on memory of backend `m`.
    pub fn can_access(&self, b: usize, m: usize) -> bool {
        self.access[b * self.len() + m]
    }
}
