//! Errors of graph building and execution.

use backplane_abi::{DType, Op, TensorDesc};

/// Shape and type of a tensor, for error messages: `[4096, 32, 1, 1] f32`.
pub fn describe(t: &TensorDesc) -> String {
    let dtype = t
        .dtype()
        .map(|d| d.name().to_string())
        .unwrap_or_else(|e| e.to_string());
    format!(
        "[{}, {}, {}, {}] {}",
        t.ne[0], t.ne[1], t.ne[2], t.ne[3], dtype
    )
}

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

/// Error unless `t` has one of the allowed types.
pub(crate) fn expect_type(
    op: Op,
    what: &str,
    t: &TensorDesc,
    allowed: &[DType],
) -> Result<DType, GraphError> {
    let d = t.dtype().map_err(|e| invalid(op, format!("{what}: {e}")))?;
    if allowed.contains(&d) {
        Ok(d)
    } else {
        let names: Vec<&str> = allowed.iter().map(|t| t.name()).collect();
        Err(invalid(
            op,
            format!(
                "{what} {} has type {d}; expected one of {}",
                describe(t),
                names.join("/")
            ),
        ))
    }
}
