//! Errors of the CPU backend.

use backplane_abi::Op;

/// A node could not run on the CPU backend.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CpuError {
    /// The op, type combination or layout has no CPU kernel.
    #[error("node {node} ({op}): not supported on cpu: {reason}")]
    Unsupported {
        /// Node index.
        node: usize,
        /// Its op.
        op: Op,
        /// Why.
        reason: String,
    },
    /// The data was invalid at run time (e.g. a row index out of range).
    #[error("node {node} ({op}): {reason}")]
    BadInput {
        /// Node index.
        node: usize,
        /// Its op.
        op: Op,
        /// What was wrong.
        reason: String,
    },
    /// A descriptor carried a code this build does not know.
    #[error("node {node}: {reason}")]
    Malformed {
        /// Node index.
        node: usize,
        /// What was wrong.
        reason: String,
    },
}
