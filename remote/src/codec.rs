//! Packed tensor descriptors: the fixed little-endian record a
//! [`TensorDesc`] travels as, and the hash under which graphs are cached.

use backplane_abi::TensorDesc;
use backplane_abi::tensor::{MAX_DIMS, MAX_OP_PARAMS, MAX_SRC};
use sha2::{Digest, Sha256};

/// Bytes of one packed descriptor.
pub const DESC_BYTES: usize =
    4 + 4 + 8 * MAX_DIMS + 8 * MAX_DIMS + 4 * MAX_OP_PARAMS + 4 * MAX_SRC + 4 + 4 + 8 + 8 + 8;

/// Appends the packed form of `d` to `out`.
pub fn put_desc(out: &mut Vec<u8>, d: &TensorDesc) {
    out.extend_from_slice(&d.dtype.to_le_bytes());
    out.extend_from_slice(&d.op.to_le_bytes());
    d.ne.iter()
        .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    d.nb.iter()
        .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    d.op_params
        .iter()
        .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    d.src
        .iter()
        .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    out.extend_from_slice(&d.view_src.to_le_bytes());
    out.extend_from_slice(&d.flags.to_le_bytes());
    out.extend_from_slice(&d.view_offset.to_le_bytes());
    out.extend_from_slice(&d.buffer.to_le_bytes());
    out.extend_from_slice(&d.offset.to_le_bytes());
}

/// The packed form of a graph (descriptors in order).
pub fn encode_graph(graph: &[TensorDesc]) -> Vec<u8> {
    let mut out = Vec::with_capacity(graph.len() * DESC_BYTES);
    graph.iter().for_each(|d| put_desc(&mut out, d));
    out
}

/// The packed form of one descriptor.
pub fn encode_desc(d: &TensorDesc) -> Vec<u8> {
    let mut out = Vec::with_capacity(DESC_BYTES);
    put_desc(&mut out, d);
    out
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        // Callers check the total length first, so this cannot run short.
        let mut a = [0u8; N];
        a.copy_from_slice(&self.bytes[self.at..self.at + N]);
        self.at += N;
        a
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn i32(&mut self) -> i32 {
        i32::from_le_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
    fn i64(&mut self) -> i64 {
        i64::from_le_bytes(self.take())
    }
}

/// Decodes one record; `bytes` must hold exactly [`DESC_BYTES`].
fn read_desc(bytes: &[u8]) -> TensorDesc {
    let mut r = Reader { bytes, at: 0 };
    let dtype = r.u32();
    let op = r.u32();
    let ne = [r.i64(), r.i64(), r.i64(), r.i64()];
    let nb = [r.u64(), r.u64(), r.u64(), r.u64()];
    let mut op_params = [0i32; MAX_OP_PARAMS];
    op_params.iter_mut().for_each(|p| *p = r.i32());
    let mut src = [0i32; MAX_SRC];
    src.iter_mut().for_each(|s| *s = r.i32());
    TensorDesc {
        dtype,
        op,
        ne,
        nb,
        op_params,
        src,
        view_src: r.i32(),
        flags: r.u32(),
        view_offset: r.u64(),
        buffer: r.u64(),
        offset: r.u64(),
    }
}

/// Decodes a packed graph; the length must be a multiple of
/// [`DESC_BYTES`] (the error names the length). Values are not checked
/// here: see [`crate::limits::check_graph`].
pub fn decode_graph(bytes: &[u8]) -> Result<Vec<TensorDesc>, String> {
    if !bytes.len().is_multiple_of(DESC_BYTES) {
        return Err(format!(
            "graph of {} bytes is not a whole number of {DESC_BYTES}-byte tensor records",
            bytes.len()
        ));
    }
    Ok(bytes.chunks_exact(DESC_BYTES).map(read_desc).collect())
}

/// Decodes exactly one packed descriptor.
pub fn decode_desc(bytes: &[u8]) -> Result<TensorDesc, String> {
    if bytes.len() != DESC_BYTES {
        return Err(format!(
            "tensor record of {} bytes, expected {DESC_BYTES}",
            bytes.len()
        ));
    }
    Ok(read_desc(bytes))
}

/// SHA-256 of a packed graph: the name it is cached under.
pub fn graph_hash(packed: &[u8]) -> [u8; 32] {
    Sha256::digest(packed).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use backplane_abi::DType;

    #[test]
    fn descriptor_round_trips_every_field() {
        let mut d = TensorDesc::new(DType::F16, [3, 5, 7, 1]);
        d.op = 17;
        d.op_params[15] = -9;
        d.src = [1, 2, -1, 4, -1, -1, -1, -1, -1, 9];
        d.view_src = 2;
        d.flags = 6;
        d.view_offset = 1 << 40;
        d.buffer = u64::MAX;
        d.offset = 12345;
        let back = decode_graph(&encode_graph(&[d, d])).unwrap();
        assert_eq!(back, vec![d, d]);
    }

    #[test]
    fn ragged_graph_names_its_length() {
        let err = decode_graph(&[0u8; DESC_BYTES + 3]).unwrap_err();
        assert!(err.contains(&format!("{}", DESC_BYTES + 3)), "{err}");
    }
}
