//! Buffer operations a client queues instead of sending one by one (small
//! uploads, memsets, clears, frees): the server side, which checks and runs
//! them in order in front of the call that carries them, with the same
//! checks as the single calls.

use std::sync::{Arc, Mutex};

use backplane_abi::TensorDesc;
use tonic::{Code, Status};

use crate::codec::decode_desc;
use crate::limits::{self, Limits};
use crate::pb;
use crate::pb::buffer_op::Op;
use crate::session::Session;

/// Most operations one request may carry.
pub const MAX_QUEUED_OPS: usize = 4096;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn bad(e: impl Into<String>) -> Status {
    Status::invalid_argument(e.into())
}

/// A plugin error as a status of the matching code, `what` in front.
pub fn plugin(what: &str, e: backplane_abi::plugin::PluginError) -> Status {
    let msg = format!("{what}: {e}");
    match e.kind {
        backplane_abi::plugin::error_kind::BAD_INPUT => Status::invalid_argument(msg),
        backplane_abi::plugin::error_kind::OUT_OF_MEMORY => Status::resource_exhausted(msg),
        backplane_abi::plugin::error_kind::UNSUPPORTED => Status::unimplemented(msg),
        _ => Status::internal(msg),
    }
}

/// A tensor record from a client, bound to the buffer `handle` of `session`:
/// checked values, the buffer it names, inside that buffer; also returns
/// the tensor's byte count.
pub fn bind_tensor(
    session: &Session,
    handle: u64,
    packed: &[u8],
) -> Result<(TensorDesc, Arc<backplane::registry::Buffer>, u64), Status> {
    let mut d = decode_desc(packed).map_err(bad)?;
    // Alone, a tensor has no graph: its links mean nothing and are cleared.
    d.src = [backplane_abi::tensor::NO_TENSOR; backplane_abi::tensor::MAX_SRC];
    d.view_src = backplane_abi::tensor::NO_TENSOR;
    let nbytes = limits::check_desc(&d, 0).map_err(bad)?;
    if d.buffer != handle {
        return Err(bad(format!(
            "tensor names buffer {} but the request buffer {handle}",
            d.buffer
        )));
    }
    let owned = session.buffer(handle).map_err(bad)?;
    let (id, size) = (owned.buffer.id(), owned.buffer.size());
    limits::bind(&mut d, nbytes, &mut |_| Some((id, size))).map_err(bad)?;
    Ok((d, owned.buffer.clone(), nbytes))
}

/// Writes one upload part (checked) into its buffer. Blocking.
pub fn upload_part(
    session: &Mutex<Session>,
    limits: &Limits,
    part: &pb::UploadChunk,
) -> Result<(), Status> {
    if part.data.len() > limits.max_chunk_bytes {
        return Err(bad(format!(
            "upload chunk of {} bytes, more than {}",
            part.data.len(),
            limits.max_chunk_bytes
        )));
    }
    let (desc, buffer, nbytes) = bind_tensor(&lock(session), part.handle, &part.tensor)?;
    limits::check_range(part.offset, part.data.len() as u64, nbytes, "upload").map_err(bad)?;
    buffer
        .set_tensor(&desc, part.offset, &part.data)
        .map_err(|e| plugin("set_tensor", e))
}

/// Runs a memset (checked). Blocking.
pub fn memset(session: &Mutex<Session>, r: &pb::MemsetRequest) -> Result<(), Status> {
    let (desc, buffer, nbytes) = bind_tensor(&lock(session), r.handle, &r.tensor)?;
    limits::check_range(r.offset, r.size, nbytes, "memset").map_err(bad)?;
    let value = u8::try_from(r.value)
        .map_err(|_| bad(format!("memset value {} is not a byte", r.value)))?;
    buffer
        .memset_tensor(&desc, value, r.offset, r.size)
        .map_err(|e| plugin("memset_tensor", e))
}

/// Sets a whole buffer to one byte value (checked). Blocking.
pub fn clear(session: &Mutex<Session>, r: &pb::ClearRequest) -> Result<(), Status> {
    let buffer = lock(session).buffer(r.handle).map_err(bad)?.buffer.clone();
    let value =
        u8::try_from(r.value).map_err(|_| bad(format!("clear value {} is not a byte", r.value)))?;
    buffer.clear(value).map_err(|e| plugin("clear", e))
}

/// Drops a buffer of the session.
pub fn free(session: &Mutex<Session>, handle: u64) -> Result<(), Status> {
    if lock(session).remove(handle) {
        Ok(())
    } else {
        Err(bad(format!("free of unknown buffer handle {handle}")))
    }
}

fn describe(op: &Option<Op>) -> String {
    match op {
        Some(Op::Upload(u)) => format!(
            "upload of {} bytes to buffer {} at tensor offset {}",
            u.data.len(),
            u.handle,
            u.offset
        ),
        Some(Op::Memset(m)) => format!("memset of {} bytes in buffer {}", m.size, m.handle),
        Some(Op::Clear(c)) => format!("clear of buffer {}", c.handle),
        Some(Op::Free(f)) => format!("free of buffer {}", f.handle),
        None => "empty operation".into(),
    }
}

/// Runs queued operations in order; the first failure stops the rest and
/// names the operation (its place in the queue and what it was), keeping
/// the status code of the single call. Blocking.
pub fn apply(
    session: &Mutex<Session>,
    limits: &Limits,
    ops: &[pb::BufferOp],
) -> Result<(), Status> {
    if ops.len() > MAX_QUEUED_OPS {
        return Err(bad(format!(
            "{} queued operations in one request, more than {MAX_QUEUED_OPS}",
            ops.len()
        )));
    }
    for (k, op) in ops.iter().enumerate() {
        let r = match &op.op {
            Some(Op::Upload(u)) => upload_part(session, limits, u),
            Some(Op::Memset(m)) => memset(session, m),
            Some(Op::Clear(c)) => clear(session, c),
            Some(Op::Free(f)) => free(session, f.handle),
            None => Err(bad("no operation given")),
        };
        if let Err(s) = r {
            let code = if s.code() == Code::Ok {
                Code::Internal
            } else {
                s.code()
            };
            return Err(Status::new(
                code,
                format!(
                    "queued operation {k} of {} ({}): {}",
                    ops.len(),
                    describe(&op.op),
                    s.message()
                ),
            ));
        }
    }
    Ok(())
}
