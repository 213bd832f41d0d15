//! backplane runtime: tensors and views, the op set and graph builder, host
//! tensor storage, the plugin registry and the scheduler. It links no
//! backend: a host program hands the registry its built-in fallback
//! ([`registry::BuiltinBackend`]), as the `backplane` facade does with the
//! CPU backend.

pub mod error;
pub mod graph;
pub mod host;
pub mod ops;
pub mod registry;
pub mod sched;

pub use backplane_abi::{DType, GluOp, Op, SortOrder, TensorDesc, UnaryOp, rope_mode};
pub use error::{ComputeError, GraphError};
pub use graph::{Graph, TensorId};
pub use host::HostTensors;
pub use ops::{Conv2dParams, RopeParams, conv_output_size};

/// Quantize and dequantize rows of every element type.
pub mod quant {
    pub use backplane_quant::*;
}
