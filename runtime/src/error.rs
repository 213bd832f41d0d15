//! Errors of graph building and execution.

use backplane_abi::Op;

/// Shape and type of a tensor, for error messages: `[4096, 32, 1, 1] f32`.
pub use backplane_abi::contract::describe;

/// A graph could not be built as asked.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GraphError {
    /// An op constructor refused its operands.
    #[error("{op}: {message}")]
    InvalidOp {
        /// The op being built.
        op: Op,
        /// What was wrong, naming the operands' shapes and types.
        message: String,
    },
    /// A tensor id that does not belong to this graph.
    #[error("tensor id {id} is not in this graph (it has {len} tensors)")]
    UnknownTensor {
        /// The id given.
        id: usize,
        /// Tensors in the graph.
        len: usize,
    },
    /// A leaf with an impossible shape.
    #[error("tensor '{name}': {message}")]
    InvalidLeaf {
        /// The leaf's name.
        name: String,
        /// What was wrong.
        message: String,
    },
}

/// Running a graph failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ComputeError {
    /// A node's op, type or layout is not implemented by this executor.
    #[error("node {node} ({op}): {reason}")]
    Unsupported {
        /// Node index.
        node: usize,
        /// Its op.
        op: Op,
        /// Why it cannot run.
        reason: String,
    },
    /// Input data was invalid at run time (e.g. an index out of range).
    #[error("node {node} ({op}): {reason}")]
    BadInput {
        /// Node index.
        node: usize,
        /// Its op.
        op: Op,
        /// What was wrong with the data.
        reason: String,
    },
    /// Host data access out of bounds or wrongly sized.
    #[error("tensor {tensor}: {reason}")]
    Data {
        /// Tensor index.
        tensor: usize,
        /// What was wrong.
        reason: String,
    },
    /// A backend reported an error.
    #[error("backend {backend}: {reason}")]
    Backend {
        /// Backend name.
        backend: String,
        /// Its message.
        reason: String,
    },
}

pub(crate) fn invalid(op: Op, message: impl Into<String>) -> GraphError {
    GraphError::InvalidOp {
        op,
        message: message.into(),
    }
}
