//! Host memory for every tensor of a graph: one aligned allocation per
//! storage root, views resolved to pointers into their root.

use backplane_abi::{DType, TensorDesc};
use half::{bf16, f16};

use crate::error::ComputeError;
use crate::graph::{Graph, TensorId};

/// Alignment of every host tensor, enough for any SIMD load.
pub const HOST_ALIGN: usize = 64;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; HOST_ALIGN]);

/// Host storage for a graph's tensors: each non-view tensor gets its own
/// zeroed, 64-byte aligned region; a view points into its root's region.
pub struct HostTensors {
    lines: Vec<Line>,
    /// Byte offset of each tensor's first element in `lines`.
    offsets: Vec<usize>,
    /// Bytes each tensor spans.
    sizes: Vec<usize>,
}

impl HostTensors {
    /// Allocates storage for every tensor of `graph`.
    pub fn new(graph: &Graph) -> HostTensors {
        let mut root_offset = vec![usize::MAX; graph.len()];
        let mut total = 0usize;
        for t in graph.ids() {
            let d = graph.desc(t);
            if d.view_source().is_none() {
                root_offset[t.0] = total;
                total += (d.nbytes() as usize).div_ceil(HOST_ALIGN) * HOST_ALIGN;
            }
        }
        let offsets = graph
            .ids()
            .map(|t| root_offset[graph.storage_root(t).0] + graph.offset_in_root(t) as usize)
            .collect();
        let sizes = graph
            .tensors()
            .iter()
            .map(|d| d.nbytes() as usize)
            .collect();
        HostTensors {
            lines: vec![Line([0; HOST_ALIGN]); total / HOST_ALIGN],
            offsets,
            sizes,
        }
    }

    fn bytes_all(&self) -> &[u8] {
        bytemuck_lines(&self.lines)
    }

    fn bytes_all_mut(&mut self) -> &mut [u8] {
        bytemuck_lines_mut(&mut self.lines)
    }

    /// Pointers to each tensor's first element, for executors.
    pub fn pointers(&mut self) -> Vec<*mut u8> {
        let base = self.lines.as_mut_ptr().cast::<u8>();
        // SAFETY: every offset lies within the allocation (views were checked
        // against their root's size when built).
        self.offsets
            .iter()
            .map(|&o| unsafe { base.add(o) })
            .collect()
    }

    /// The bytes a tensor spans (from its first to one past its last element).
    pub fn bytes(&self, t: TensorId) -> &[u8] {
        let o = self.offsets[t.0];
        &self.bytes_all()[o..o + self.sizes[t.0]]
    }

    /// Writes raw bytes into a contiguous tensor.
    pub fn set_bytes(
        &mut self,
        graph: &Graph,
        t: TensorId,
        data: &[u8],
    ) -> Result<(), ComputeError> {
        let d = graph.try_desc(t).map_err(|e| data_err(t, e.to_string()))?;
        if !d.is_contiguous() {
            return Err(data_err(t, "set_bytes needs a contiguous tensor".into()));
        }
        if data.len() != self.sizes[t.0] {
            return Err(data_err(
                t,
                format!("expected {} bytes, got {}", self.sizes[t.0], data.len()),
            ));
        }
        let o = self.offsets[t.0];
        self.bytes_all_mut()[o..o + data.len()].copy_from_slice(data);
        Ok(())
    }

    /// Writes f32 values into a contiguous tensor, converting (and
    /// quantizing) to its type.
    pub fn set_f32(
        &mut self,
        graph: &Graph,
        t: TensorId,
        values: &[f32],
    ) -> Result<(), ComputeError> {
        let d = *graph.try_desc(t).map_err(|e| data_err(t, e.to_string()))?;
        if values.len() as i64 != d.nelements() {
            return Err(data_err(
                t,
                format!("expected {} values, got {}", d.nelements(), values.len()),
            ));
        }
        let dt = graph.dtype(t);
        let mut bytes = vec![0u8; d.nbytes() as usize];
        let row = d.ne[0] as usize;
        let row_bytes = dt.row_size(row).unwrap_or(0);
        for (src, dst) in values.chunks(row).zip(bytes.chunks_mut(row_bytes.max(1))) {
            encode_row(dt, src, dst).map_err(|e| data_err(t, e))?;
        }
        self.set_bytes(graph, t, &bytes)
    }

    /// Writes i32 values into a contiguous i32 tensor.
    pub fn set_i32(
        &mut self,
        graph: &Graph,
        t: TensorId,
        values: &[i32],
    ) -> Result<(), ComputeError> {
        self.set_ints(
            graph,
            t,
            &values.iter().map(|&v| v as i64).collect::<Vec<_>>(),
        )
    }

    /// Writes integer values into a contiguous integer tensor of any width.
    pub fn set_ints(
        &mut self,
        graph: &Graph,
        t: TensorId,
        values: &[i64],
    ) -> Result<(), ComputeError> {
        let dt = graph.dtype(t);
        let mut bytes = Vec::with_capacity(values.len() * dt.type_size());
        for &v in values {
            match dt {
                DType::I8 => bytes.extend_from_slice(&(v as i8).to_le_bytes()),
                DType::I16 => bytes.extend_from_slice(&(v as i16).to_le_bytes()),
                DType::I32 => bytes.extend_from_slice(&(v as i32).to_le_bytes()),
                DType::I64 => bytes.extend_from_slice(&v.to_le_bytes()),
                _ => return Err(data_err(t, format!("set_ints on a {dt} tensor"))),
            }
        }
        self.set_bytes(graph, t, &bytes)
    }

    /// Reads any tensor as f32 in logical (row-major over ne) order,
    /// following its strides and dequantizing.
    pub fn get_f32(&self, graph: &Graph, t: TensorId) -> Vec<f32> {
        let d = graph.desc(t);
        let o = self.offsets[t.0];
        read_f32(d, &self.bytes_all()[o..])
    }
}

/// Reads a tensor described by `d` whose first element is `data[0]` as f32
/// values in logical order.
pub fn read_f32(d: &TensorDesc, data: &[u8]) -> Vec<f32> {
    let dt = d.dtype().expect("known dtype");
    let mut out = Vec::with_capacity(d.nelements() as usize);
    let ne0 = d.ne[0] as usize;
    let mut row = vec![0f32; ne0];
    for i3 in 0..d.ne[3] as u64 {
        for i2 in 0..d.ne[2] as u64 {
            for i1 in 0..d.ne[1] as u64 {
                let base = (i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3]) as usize;
                if dt.is_quantized() {
                    let n = dt.row_size(ne0).expect("whole blocks");
                    backplane_quant::dequantize_row(dt, &data[base..base + n], &mut row)
                        .expect("row sizes match");
                } else {
                    for (i0, v) in row.iter_mut().enumerate() {
                        *v = scalar_f32(dt, &data[base + i0 * d.nb[0] as usize..]);
                    }
                }
                out.extend_from_slice(&row);
            }
        }
    }
    out
}

/// Reads one element of a plain type as f32.
pub fn scalar_f32(dt: DType, b: &[u8]) -> f32 {
    match dt {
        DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        DType::F16 => f16::from_le_bytes([b[0], b[1]]).to_f32(),
        DType::BF16 => bf16::from_le_bytes([b[0], b[1]]).to_f32(),
        DType::I8 => b[0] as i8 as f32,
        DType::I16 => i16::from_le_bytes([b[0], b[1]]) as f32,
        DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32,
        DType::I64 => i64::from_le_bytes(b[..8].try_into().expect("8 bytes")) as f32,
        q => panic!("scalar_f32 on block type {q}"),
    }
}

/// Encodes one row of f32 values as `dt` (quantizing block types).
pub fn encode_row(dt: DType, src: &[f32], dst: &mut [u8]) -> Result<(), String> {
    if dt.is_quantized() || dt.is_float() {
        return backplane_quant::quantize_row(dt, src, dst).map_err(|e| e.to_string());
    }
    for (v, out) in src.iter().zip(dst.chunks_mut(dt.type_size())) {
        match dt {
            DType::I8 => out.copy_from_slice(&(*v as i8).to_le_bytes()),
            DType::I16 => out.copy_from_slice(&(*v as i16).to_le_bytes()),
            DType::I32 => out.copy_from_slice(&(*v as i32).to_le_bytes()),
            DType::I64 => out.copy_from_slice(&(*v as i64).to_le_bytes()),
            _ => unreachable!("float and block types handled above"),
        }
    }
    Ok(())
}

fn data_err(t: TensorId, reason: String) -> ComputeError {
    ComputeError::Data {
        tensor: t.0,
        reason,
    }
}

fn bytemuck_lines(lines: &[Line]) -> &[u8] {
    // SAFETY: Line is plain bytes with no padding; the slice covers exactly
    // the lines' memory.
    unsafe { std::slice::from_raw_parts(lines.as_ptr().cast::<u8>(), lines.len() * HOST_ALIGN) }
}

fn bytemuck_lines_mut(lines: &mut [Line]) -> &mut [u8] {
    // SAFETY: as above, with unique access.
    unsafe {
        std::slice::from_raw_parts_mut(lines.as_mut_ptr().cast::<u8>(), lines.len() * HOST_ALIGN)
    }
}
