//! What the server accepts: message, chunk, allocation and graph bounds,
//! and the checks every descriptor from a client passes before any plugin
//! sees it.

use backplane_abi::tensor::{MAX_DIMS, NO_TENSOR};
use backplane_abi::{DType, Op, TensorDesc};

/// Server bounds (all configurable on `backplane serve`).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest gRPC message in bytes (either direction).
    pub max_message_bytes: usize,
    /// Largest data chunk of an upload or download.
    pub max_chunk_bytes: usize,
    /// Bytes one session may hold allocated at once.
    pub max_session_bytes: u64,
    /// Most tensors in one graph.
    pub max_graph_nodes: usize,
    /// Graphs kept per session (least recently used dropped first).
    pub graph_cache: usize,
    /// Sessions kept at once (least recently used closed first).
    pub max_sessions: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: 8 << 20,
            max_chunk_bytes: 4 << 20,
            max_session_bytes: 16 << 30,
            max_graph_nodes: 16384,
            graph_cache: 64,
            max_sessions: 64,
        }
    }
}

/// Largest element count per dimension and in total that the server
/// accepts (2^40); keeps every size computation far from overflow.
pub const MAX_ELEMENTS: i64 = 1 << 40;
/// Largest byte stride accepted (2^48).
pub const MAX_STRIDE: u64 = 1 << 48;

/// Bytes spanned by `d` (as `ggml_nbytes`), with overflow checked; the
/// error names the field.
pub fn checked_nbytes(d: &TensorDesc) -> Result<u64, String> {
    let dtype = DType::from_code(d.dtype).map_err(|_| format!("unknown dtype code {}", d.dtype))?;
    let mut total: i64 = 1;
    for (i, &n) in d.ne.iter().enumerate() {
        if !(0..=MAX_ELEMENTS).contains(&n) {
            return Err(format!("ne[{i}] = {n} out of range 0..={MAX_ELEMENTS}"));
        }
        total = total.saturating_mul(n);
    }
    if total > MAX_ELEMENTS {
        return Err(format!("{total} elements, more than {MAX_ELEMENTS}"));
    }
    for (i, &s) in d.nb.iter().enumerate() {
        if s > MAX_STRIDE {
            return Err(format!("nb[{i}] = {s} larger than {MAX_STRIDE}"));
        }
    }
    if total == 0 {
        return Ok(0);
    }
    let bs = dtype.block_size() as u64;
    if !(d.ne[0] as u64).is_multiple_of(bs) {
        return Err(format!(
            "ne[0] = {} is not a multiple of the {dtype:?} block size {bs}",
            d.ne[0]
        ));
    }
    let mut n: u64 = if bs == 1 {
        (dtype.type_size() as u64).saturating_add((d.ne[0] as u64 - 1).saturating_mul(d.nb[0]))
    } else {
        (d.ne[0] as u64 / bs).saturating_mul(d.nb[0])
    };
    for i in 1..MAX_DIMS {
        n = n.saturating_add((d.ne[i] as u64 - 1).saturating_mul(d.nb[i]));
    }
    Ok(n)
}

/// Checks one descriptor's values (dtype, op, shape, strides, links to
/// earlier tensors); `index` is its place in the graph.
pub fn check_desc(d: &TensorDesc, index: usize) -> Result<u64, String> {
    let at = |e: String| format!("tensor {index}: {e}");
    Op::from_code(d.op).map_err(|_| at(format!("unknown op code {}", d.op)))?;
    let nbytes = checked_nbytes(d).map_err(at)?;
    for (k, &s) in d.src.iter().enumerate() {
        if s != NO_TENSOR && !(s >= 0 && (s as usize) < index) {
            return Err(at(format!(
                "src[{k}] = {s} is not an earlier tensor (graph order)"
            )));
        }
    }
    let v = d.view_src;
    if v != NO_TENSOR && !(v >= 0 && (v as usize) < index) {
        return Err(at(format!("view_src = {v} is not an earlier tensor")));
    }
    Ok(nbytes)
}

/// Checks a whole graph and rewrites its buffer handles through `resolve`
/// (handle -> (real buffer id, buffer size)); a tensor in a buffer must lie
/// inside it. Errors name the tensor index and the field.
pub fn check_graph(
    graph: &mut [TensorDesc],
    limits: &Limits,
    mut resolve: impl FnMut(u64) -> Option<(u64, u64)>,
) -> Result<(), String> {
    if graph.is_empty() {
        return Err("empty graph".into());
    }
    if graph.len() > limits.max_graph_nodes {
        return Err(format!(
            "graph of {} tensors, more than the server's limit {}",
            graph.len(),
            limits.max_graph_nodes
        ));
    }
    for (i, d) in graph.iter_mut().enumerate() {
        let nbytes = check_desc(d, i)?;
        bind(d, nbytes, &mut resolve).map_err(|e| format!("tensor {i}: {e}"))?;
    }
    Ok(())
}

/// Checks that `d` (of `nbytes`) lies inside its buffer and rewrites the
/// handle to the real id; handle 0 (no memory) stays 0.
pub fn bind(
    d: &mut TensorDesc,
    nbytes: u64,
    resolve: &mut impl FnMut(u64) -> Option<(u64, u64)>,
) -> Result<(), String> {
    if d.buffer == 0 {
        return Ok(());
    }
    let (real, size) =
        resolve(d.buffer).ok_or_else(|| format!("unknown buffer handle {}", d.buffer))?;
    let end = d.offset.checked_add(nbytes);
    if end.is_none_or(|e| e > size) {
        return Err(format!(
            "bytes {}..+{nbytes} outside buffer {} of {size} bytes",
            d.offset, d.buffer
        ));
    }
    d.buffer = real;
    Ok(())
}

/// Checks a byte range `offset..offset+len` within a tensor of `nbytes`.
pub fn check_range(offset: u64, len: u64, nbytes: u64, what: &str) -> Result<(), String> {
    match offset.checked_add(len) {
        Some(end) if end <= nbytes => Ok(()),
        _ => Err(format!(
            "{what}: bytes {offset}..+{len} outside the tensor's {nbytes} bytes"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve_none(_: u64) -> Option<(u64, u64)> {
        None
    }

    #[test]
    fn forward_source_reference_is_refused_naming_the_tensor() {
        let mut a = TensorDesc::new(DType::F32, [4, 1, 1, 1]);
        a.src[0] = 1;
        let b = TensorDesc::new(DType::F32, [4, 1, 1, 1]);
        let err = check_graph(&mut [a, b], &Limits::default(), resolve_none).unwrap_err();
        assert!(err.starts_with("tensor 0: src[0] = 1"), "{err}");
    }

    #[test]
    fn huge_shape_is_refused_not_overflowed() {
        let mut d = TensorDesc::new(DType::F32, [4, 2, 1, 1]);
        d.ne[0] = i64::MAX;
        let err = checked_nbytes(&d).unwrap_err();
        assert!(err.contains("ne[0]"), "{err}");
    }

    #[test]
    fn tensor_past_its_buffer_end_is_refused() {
        let mut d = TensorDesc::new(DType::F32, [8, 1, 1, 1]);
        d.buffer = 7;
        d.offset = 8;
        let err = check_graph(&mut [d], &Limits::default(), |_| Some((3, 32))).unwrap_err();
        assert!(err.contains("outside buffer 7 of 32 bytes"), "{err}");
        d.offset = 0;
        let mut g = [d];
        check_graph(&mut g, &Limits::default(), |_| Some((3, 32))).unwrap();
        assert_eq!(g[0].buffer, 3);
    }
}
