//! MUL_MAT_ID through the mat-vec kernel.

use backplane_abi::TensorDesc;

use super::{Activations, Dst, Weights, layout_params, matvec_key, u32_of};
use crate::encode::{Encoder, Params};
use crate::ops::matmul::plan;
use crate::ops::{nb_elems, src_index};
use crate::pipelines::Checks;

/// Encodes MUL_MAT_ID: the mat-vec kernel over (row groups, slot, token).
pub(in crate::ops::matmul) fn encode_id(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d: &TensorDesc = &g[node];
    let (ia, ib, ii) = (
        src_index(g, node, 0)?,
        src_index(g, node, 1)?,
        src_index(g, node, 2)?,
    );
    if d.nelements() == 0 {
        return Ok(());
    }
    let (a, b, ids) = (&g[ia], &g[ib], &g[ii]);
    let (k, m, ne11) = (a.ne[0] as u64, a.ne[1] as u64, b.ne[1] as u64);
    let (n_used, n_tok) = (ids.ne[0] as u64, ids.ne[1] as u64);
    let w = Weights::for_matvec(e, ia)?;
    let x = Activations::for_matvec(e, ib, w.ty)?;
    let out = Dst::new(e, node)?;
    let bi = e.binding(ii)?;
    let nb_ids = nb_elems(ids, 4)?;
    let flag = e.error_flag();
    let key = matvec_key(e, &w, &x, k, 1, true);
    let row_groups = m.div_ceil(u64::from(plan::matvec_rows(&e.facts().tuning)));
    let total = row_groups * n_used * n_tok;
    let p = Params::new()
        .u32(u32_of(k, "K")?)
        .u32(u32_of(m, "M")?)
        .u32(u32_of(ne11, "ne11")?)
        .u32(1)
        .u32(1)
        .u32(1)
        .u32(u32_of(w.units(k, &x), "units")?)
        .u32(u32_of(total, "workgroups")?)
        .u32(u32_of(row_groups, "row groups")?)
        .u32(1);
    let p = layout_params(p, &w, &x, &out, false)
        .u32(bi.elem_offset(4)?)
        .u32(nb_ids[0])
        .u32(nb_ids[1])
        .u32(u32_of(n_used, "n_used")?)
        .u32(u32_of(a.ne[2] as u64, "experts")?)
        .u32(e.node as u32 + 1);
    let bindings = [
        w.binding.clone(),
        x.binding.clone(),
        out.binding.clone(),
        bi,
        flag,
    ];
    e.dispatch_linear(&key, Checks::On, &bindings, &p, total)
}
