//! The integer mat-vec's quantized activations as other kernels may leave
//! them for a MUL_MAT: what the copy is ([`Q8Copy`]) and whether a MUL_MAT
//! reads one ([`wgsl_quantizes_src1`]; `crate::ops::matmul::quantizes_src1`
//! asks the native kernels first).

use backplane_shaders::PipelineKey;

use super::{CONVERT_WG, Dst, copy_origin, u32_of};
use crate::encode::{Encoder, Params};
use crate::kept::CopyOrigin;
use crate::ops::matmul::plan::{self, Path, Shape};
use crate::ops::{dtype, nb_elems, ne_u32, src_index, type_name};

/// Bytes of one quantized activation run: 32 bytes of quants, then the
/// scale and scaled sum and 8 bytes of padding (three vec4<u32>).
const Q8_RUN_BYTES: u64 = 48;

/// The quantized copy of a mat-vec's activations (ggml's q8_1 runs, see
/// `mul_mat_quantize.wgsl`): the kernel, its leading parameters and sizes.
pub(crate) struct Q8Copy {
    /// The quantizing kernel.
    pub key: PipelineKey,
    /// Its parameters before src1's offset and strides.
    pub(super) head: Params,
    /// Bytes of the copy.
    pub bytes: u64,
    /// Runs of 32 values per row.
    pub runs_per_row: u32,
    /// Runs in all rows.
    pub(super) runs_total: u64,
}

impl Q8Copy {
    /// The copy of src1 (graph index `index`, K a multiple of 32).
    pub(crate) fn of(e: &Encoder, index: usize) -> Result<Q8Copy, String> {
        let b = e.tensor(index);
        let ne = ne_u32(b)?;
        if ne[0] % 32 != 0 {
            return Err(format!("src1 ne0 = {} is not a multiple of 32", ne[0]));
        }
        let runs = ne[0] / 32;
        let total = u64::from(runs) * b.ne[1..].iter().map(|&x| x as u64).product::<u64>();
        let key = PipelineKey::new("mul_mat_quantize", "")
            .ty("SRC1", type_name(dtype(b)?))
            .wg(CONVERT_WG);
        let head = Params::new()
            .u32(runs)
            .u32(ne[1])
            .u32(ne[2])
            .u32(u32_of(total, "quantized src1 runs")?);
        Ok(Q8Copy {
            key,
            head,
            bytes: total * Q8_RUN_BYTES,
            runs_per_row: runs,
            runs_total: total,
        })
    }

    /// The origin a MUL_MAT reading src1 `index` through the integer
    /// mat-vec looks its kept copy up by (see [`crate::kept`]), so another
    /// kernel that writes the same copy can leave it for the MUL_MAT.
    pub(crate) fn origin(&self, e: &Encoder, index: usize) -> Result<CopyOrigin, String> {
        let b = e.tensor(index);
        let params = self
            .head
            .clone()
            .u32(
                e.binding(index)?
                    .elem_offset(dtype(b)?.type_size() as u64)?,
            )
            .u32x4(nb_elems(b, dtype(b)?.type_size() as u64)?);
        Ok(copy_origin(e, index, &self.key, &params))
    }
}

/// Whether the WGSL kernels of MUL_MAT `node` read its src1 through a
/// quantized copy (the integer mat-vec), decided as [`super::encode`]
/// decides it.
pub(crate) fn wgsl_quantizes_src1(e: &Encoder, node: usize) -> bool {
    let g = e.graph;
    let (Ok(ia), Ok(ib)) = (src_index(g, node, 0), src_index(g, node, 1)) else {
        return false;
    };
    let (Ok(s), Ok(t), Ok(out)) = (Shape::of(&g[ia], &g[ib]), dtype(&g[ia]), Dst::new(e, node))
    else {
        return false;
    };
    let facts = e.facts();
    let path = plan::choose_path(facts, t, &s, out.strides[0] == 1, facts.tuning.matmul_path);
    matches!(path, Path::MatVec { .. }) && plan::matvec_int8(&facts.tuning, t)
}
