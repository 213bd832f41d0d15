//! backplane core: element types and quant formats, tensors and views, the
//! op set and graph builder, and the reference kernels every backend is
//! checked against.

pub mod error;
pub mod examples;
pub mod graph;
pub mod host;
pub mod ops;
pub mod reference;
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
