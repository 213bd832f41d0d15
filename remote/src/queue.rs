//! The client's queue of buffer operations (small uploads, memsets,
//! clears, frees): instead of one round trip each, they travel in front of
//! the next call that needs them done (alloc, download, compute) or in one
//! `Apply`. Every value is checked here first as far as the client can
//! (ranges inside the tensor and the buffer), so that most bad input is
//! still refused by the call that made it.

use backplane_abi::TensorDesc;

use crate::limits;
use crate::pb;

/// Uploads up to this many bytes are queued; larger ones are streamed at
/// once (after the queue).
pub const QUEUE_UPLOAD_MAX: usize = 256 << 10;
/// Data bytes the queue holds at most before it is sent.
pub const QUEUE_MAX_BYTES: usize = 1 << 20;
/// Operations the queue holds at most before it is sent (the server takes
/// up to [`crate::ops::MAX_QUEUED_OPS`]).
pub const QUEUE_MAX_OPS: usize = 1024;

/// Operations not sent yet, in order.
#[derive(Default)]
pub struct Pending {
    ops: Vec<pb::BufferOp>,
    bytes: usize,
}

impl Pending {
    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Whether an operation carrying `bytes` of data still fits.
    pub fn has_room(&self, bytes: usize) -> bool {
        self.ops.len() < QUEUE_MAX_OPS && self.bytes + bytes <= QUEUE_MAX_BYTES
    }

    /// Appends an operation carrying `bytes` of data.
    pub fn push(&mut self, op: pb::buffer_op::Op, bytes: usize) {
        self.ops.push(pb::BufferOp { op: Some(op) });
        self.bytes += bytes;
    }

    /// Everything queued, leaving the queue empty.
    pub fn take(&mut self) -> Vec<pb::BufferOp> {
        self.bytes = 0;
        std::mem::take(&mut self.ops)
    }
}

/// Checks that `offset..offset+len` lies inside `tensor` and `tensor`
/// inside a buffer of `buffer_size` bytes, as the server will; the error
/// names the call, the range and the sizes.
pub fn check_range(
    what: &str,
    tensor: &TensorDesc,
    buffer_size: u64,
    offset: u64,
    len: u64,
) -> Result<(), String> {
    let nbytes = limits::checked_nbytes(tensor).map_err(|e| format!("{what}: tensor: {e}"))?;
    if tensor
        .offset
        .checked_add(nbytes)
        .is_none_or(|end| end > buffer_size)
    {
        return Err(format!(
            "{what}: tensor bytes {}..+{nbytes} outside its buffer of {buffer_size} bytes",
            tensor.offset
        ));
    }
    limits::check_range(offset, len, nbytes, what)
}
