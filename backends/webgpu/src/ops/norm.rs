//! NORM, RMS_NORM and L2_NORM of f32 rows of any length and strides, in
//! place when the destination is the source. One workgroup per row, the
//! row held in registers when it fits, reduced with subgroup shuffles where
//! the device has them ([`RowPlan`], shared with the fused RMS_NORM of
//! `super::fusion`). Kernel: `shaders/wgsl/norm.wgsl`.

use backplane_abi::{Op, TensorDesc};
use backplane_shaders::PipelineKey;

use crate::encode::{Binding, Encoder, Params};
use crate::facts::Facts;
use crate::ops::{nb_elems, ne_u32, pow2_workgroup, row_count, same_memory, src, src_index};
use crate::pipelines::Checks;

/// Accepts f32 rows with strides in whole elements.
pub fn supports(_facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    // The op contract has checked the types and shapes; what follows is
    // what the kernel indexes.
    let d = &graph[node];
    let a = src(graph, node, 0)?;
    for (what, t) in [("src0", a), ("dst", d)] {
        nb_elems(t, 4).map_err(|e| format!("{what}: {e}"))?;
        ne_u32(t).map_err(|e| format!("{what}: {e}"))?;
    }
    Ok(())
}

/// Encodes one workgroup per row.
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let ia = src_index(g, node, 0)?;
    let a = &g[ia];
    let variant = match d.op().map_err(|x| x.to_string())? {
        Op::Norm => "norm",
        Op::RmsNorm => "rms_norm",
        _ => "l2_norm",
    };
    let plan = RowPlan::new(e.facts(), a.ne[0], row_count(a));
    let inplace = same_memory(d, a);
    let mut key = plan.specialise(PipelineKey::new("norm", variant));
    key.inplace = inplace;
    let ba = e.binding(ia)?;
    let bd = e.binding(node)?;
    let params = Params::new()
        .u32x4(ne_u32(a)?)
        .u32(ba.elem_offset(4)?)
        .u32x4(nb_elems(a, 4)?)
        .u32(bd.elem_offset(4)?)
        .u32x4(nb_elems(d, 4)?)
        .f32(d.param_f32(0));
    let bindings: Vec<Binding> = if inplace { vec![ba] } else { vec![ba, bd] };
    e.dispatch_linear(&key, Checks::On, &bindings, &params, row_count(a))
}

/// Most chunks of four elements an invocation keeps in registers; a longer
/// row is read again after its reduction.
const MAX_HELD_CHUNKS: u32 = 8;

/// Chunks of four elements each invocation should own: the workgroup is
/// sized for this many, within [`MIN_NORM_WG`] and the largest size. One
/// gives a 2048-wide decode row (llama 1B) 512 invocations: on an H100
/// the fused decode norm took 11.6 us per call with 1 chunk, 15.2 with 2,
/// 20.9 with 4 and 32.3 with 8 (`BACKPLANE_WEBGPU_PROFILE=kernels`, each
/// kernel in a pass of its own), and the q4_0 1b decode ran 717, 676, 596
/// and 485 tokens/s (docs/models.md). Many rows keep [`MANY_ROWS_WG`]
/// invocations. The `norm_chunks` option overrides it (measuring).
const TARGET_CHUNKS: u64 = 1;

/// Smallest norm workgroup.
const MIN_NORM_WG: u32 = 32;

/// Largest norm workgroup when rows fill the device.
const MANY_ROWS_WG: u32 = 256;

/// Largest norm workgroup when there are fewer rows than compute units
/// (decode: one row per token), with subgroup reductions.
const FEW_ROWS_WG: u32 = 1024;

/// How the norm kernels share out and reduce a row (`common/row_norm.wgsl`
/// says the order). The separate norm and the fused RMS_NORM must use the
/// same plan for a row, for the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RowPlan {
    /// Workgroup size: a power of two.
    pub wg: u32,
    /// Chunks per invocation held in registers (`ROW_CHUNKS`), or `None`
    /// when the row is longer and read again after the reduction.
    pub held_chunks: Option<u32>,
    /// Width of the subgroup butterfly (`ROW_SUM_LANES`), or `None` for
    /// the workgroup-memory tree.
    pub sum_lanes: Option<u32>,
}

impl RowPlan {
    /// The plan for `rows` rows of `ne0` elements on this device.
    pub fn new(facts: &Facts, ne0: i64, rows: u64) -> RowPlan {
        let (lo, hi) = facts.subgroup_size;
        let subgroups = facts.subgroups && lo.is_power_of_two() && hi.is_power_of_two();
        let chunks = u64::try_from(ne0.max(1)).unwrap_or(u64::MAX).div_ceil(4);
        let wg = norm_workgroup_size(facts, chunks, rows, subgroups);
        let per_invocation = chunks.div_ceil(u64::from(wg));
        let held_chunks = u32::try_from(per_invocation)
            .ok()
            .filter(|&c| c <= MAX_HELD_CHUNKS);
        // Every subgroup full (the workgroup a multiple of the largest
        // size), so positions sg_id * size + lane cover the workgroup.
        let sum_lanes = (subgroups && wg.is_multiple_of(hi) && lo <= wg).then_some(lo);
        RowPlan {
            wg,
            held_chunks,
            sum_lanes,
        }
    }

    /// `key` with this plan's workgroup size and defines.
    pub fn specialise(&self, key: PipelineKey) -> PipelineKey {
        let mut key = key.wg(self.wg);
        if let Some(c) = self.held_chunks {
            key = key.define("ROW_CHUNKS", format!("{c}u"));
        }
        if let Some(l) = self.sum_lanes {
            key = key.define("ROW_SUM_LANES", format!("{l}u"));
        }
        key
    }
}

/// Workgroup size for `rows` rows of `chunks` chunks of four elements: a
/// power of two giving each invocation about [`TARGET_CHUNKS`] chunks, at most
/// [`MANY_ROWS_WG`], or [`FEW_ROWS_WG`] when the rows are fewer than the
/// device's compute units (a lone row then spreads over more invocations
/// of its one multiprocessor) and subgroups reduce; within the device's
/// invocation limit.
fn norm_workgroup_size(facts: &Facts, chunks: u64, rows: u64, subgroups: bool) -> u32 {
    let few_rows = facts.compute_units.is_some_and(|cu| rows < u64::from(cu));
    let cap = if few_rows && subgroups {
        FEW_ROWS_WG
    } else {
        MANY_ROWS_WG
    };
    let target = facts.tuning.norm_chunks.map_or(TARGET_CHUNKS, u64::from);
    pow2_workgroup(facts, chunks.div_ceil(target), MIN_NORM_WG, cap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::shader_check;

    /// An H100-like device: subgroups of 32, 132 compute units.
    fn gpu() -> Facts {
        Facts {
            compute_units: Some(132),
            ..crate::facts::test_gpu()
        }
    }

    #[test]
    fn a_decode_row_is_held_in_registers_and_reduced_by_subgroups() {
        let f = gpu();
        let one = RowPlan::new(&f, 2048, 1);
        assert_eq!(one.wg, 512);
        assert_eq!(one.held_chunks, Some(1));
        assert_eq!(one.sum_lanes, Some(32));
        // Long single rows grow the workgroup, many rows keep 256.
        assert_eq!(RowPlan::new(&f, 8192, 1).wg, 1024);
        let many = RowPlan::new(&f, 8192, 512);
        assert_eq!((many.wg, many.held_chunks), (256, Some(8)));
        // Too long to hold: read again.
        assert_eq!(RowPlan::new(&f, 65536, 512).held_chunks, None);
        // Short rows still get a whole subgroup multiple.
        let short = RowPlan::new(&f, 10, 3);
        assert_eq!((short.wg, short.held_chunks), (32, Some(1)));
    }

    #[test]
    fn without_subgroups_or_with_varying_sizes_the_tree_reduces() {
        let mut f = gpu();
        f.subgroups = false;
        let plan = RowPlan::new(&f, 2048, 1);
        assert_eq!((plan.wg, plan.sum_lanes), (256, None));
        // Sizes 8..64: the butterfly is 8 wide, subgroups of 64 fill 256.
        f.subgroups = true;
        f.subgroup_size = (8, 64);
        assert_eq!(RowPlan::new(&f, 2048, 1).sum_lanes, Some(8));
        // A device limited to 64 invocations.
        f.max_invocations = 64;
        assert_eq!(RowPlan::new(&f, 2048, 1).wg, 64);
        assert_eq!(RowPlan::new(&f, 2048, 1).held_chunks, Some(8));
    }

    #[test]
    fn every_norm_variant_validates_held_or_not_and_with_either_reduction() {
        for variant in ["norm", "rms_norm", "l2_norm"] {
            for (held, lanes) in [
                (Some(2), Some(32)),
                (None, None),
                (Some(1), None),
                (None, Some(8)),
            ] {
                for inplace in [false, true] {
                    let plan = RowPlan {
                        wg: 64,
                        held_chunks: held,
                        sum_lanes: lanes,
                    };
                    let mut key = plan.specialise(PipelineKey::new("norm", variant));
                    key.inplace = inplace;
                    shader_check::check(&key);
                }
            }
        }
    }
}
