//! What a kernel is given about one node: [`NodeCtx`], built by the
//! backend's graph walk for each node it runs.

use std::sync::Mutex;

use backplane_abi::{DType, MAX_SRC, Op, TensorDesc};

use crate::error::CpuError;

/// A pointer that may be shared with the pool's workers. Kernels uphold
/// that concurrent workers write disjoint bytes.
#[derive(Clone, Copy, Debug)]
pub struct SharedPtr(pub *mut u8);
// SAFETY: only used for tensor data whose disjoint regions the kernels hand
// to different workers.
unsafe impl Send for SharedPtr {}
// SAFETY: as above.
unsafe impl Sync for SharedPtr {}

/// Everything a kernel needs about one node: its descriptor, its sources'
/// descriptors and the data pointers of all of them.
pub struct NodeCtx<'a> {
    /// Index of the node in the graph.
    pub index: usize,
    /// The node's op.
    pub op: Op,
    /// The node's descriptor.
    pub dst: &'a TensorDesc,
    /// The node's data.
    pub dst_ptr: SharedPtr,
    /// Source descriptors (None where absent).
    pub src: [Option<&'a TensorDesc>; MAX_SRC],
    /// Source data pointers (null where absent).
    pub src_ptr: [SharedPtr; MAX_SRC],
    /// Thread pool to split work over.
    pub pool: &'a crate::pool::WorkerPool,
    /// Worker count.
    pub n_threads: usize,
    /// Reusable scratch memory (quantized activations, ...).
    pub scratch: &'a Mutex<Vec<u8>>,
    /// Which sources are in the repacked layout of [`crate::repack`].
    pub src_repacked: [bool; MAX_SRC],
}

impl<'a> NodeCtx<'a> {
    /// Source `i`'s descriptor, or an error naming the missing source.
    pub fn src(&self, i: usize) -> Result<&'a TensorDesc, CpuError> {
        self.src[i].ok_or_else(|| self.malformed(format!("missing source {i}")))
    }

    /// Source `i`'s element type.
    pub fn src_type(&self, i: usize) -> Result<DType, CpuError> {
        self.src(i)?
            .dtype()
            .map_err(|e| self.malformed(e.to_string()))
    }

    /// The node's element type.
    pub fn dst_type(&self) -> Result<DType, CpuError> {
        self.dst.dtype().map_err(|e| self.malformed(e.to_string()))
    }

    /// An `Unsupported` error for this node.
    pub fn unsupported(&self, reason: impl Into<String>) -> CpuError {
        CpuError::Unsupported {
            node: self.index,
            op: self.op,
            reason: reason.into(),
        }
    }

    /// A `BadInput` error for this node.
    pub fn bad_input(&self, reason: impl Into<String>) -> CpuError {
        CpuError::BadInput {
            node: self.index,
            op: self.op,
            reason: reason.into(),
        }
    }

    /// A `Malformed` error for this node.
    pub fn malformed(&self, reason: impl Into<String>) -> CpuError {
        CpuError::Malformed {
            node: self.index,
            reason: reason.into(),
        }
    }
}
