//! ADD, SUB, MUL, DIV (f32/f16, src1 broadcast, in place when the
//! destination is src0). Kernel: `shaders/wgsl/binary.wgsl`.

use backplane_abi::{DType, Op, TensorDesc};
use backplane_shaders::PipelineKey;

use crate::encode::{Encoder, Params};
use crate::facts::Facts;
use crate::ops::{dtype, nb_elems, ne_u32, src, src_index, type_name, want_type};
use crate::pipelines::Checks;

const FLOATS: &[DType] = &[DType::F32, DType::F16];

/// Workgroup size of the element-wise kernel.
const WG: u32 = 256;

pub fn supports(_facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    // The op contract has checked the shapes and the broadcast; what
    // follows is what the kernel implements (f32, f16) and indexes.
    let d = &graph[node];
    let a = src(graph, node, 0)?;
    let b = src(graph, node, 1)?;
    want_type("src0", a, FLOATS)?;
    want_type("src1", b, FLOATS)?;
    for (what, t) in [("src0", a), ("src1", b), ("dst", d)] {
        let elem = dtype(t)?.type_size() as u64;
        nb_elems(t, elem).map_err(|e| format!("{what}: {e}"))?;
        ne_u32(t).map_err(|e| format!("{what}: {e}"))?;
    }
    Ok(())
}

pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let (ia, ib) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let (a, b) = (&g[ia], &g[ib]);
    let (ta, tb, td) = (dtype(a)?, dtype(b)?, dtype(d)?);
    let variant = match d.op().map_err(|x| x.to_string())? {
        Op::Add => "add",
        Op::Sub => "sub",
        Op::Mul => "mul",
        _ => "div",
    };
    let ba = e.binding(ia)?;
    let bb = e.binding(ib)?;
    let bd = e.binding(node)?;
    let inplace = d.buffer == a.buffer && d.offset == a.offset && d.nb == a.nb;
    let mut key = PipelineKey::new("binary", variant)
        .ty("SRC0", type_name(ta))
        .ty("SRC1", type_name(tb))
        .ty("DST", type_name(td))
        .wg(WG);
    key.inplace = inplace;
    let (sa, sb, sd) = (
        ta.type_size() as u64,
        tb.type_size() as u64,
        td.type_size() as u64,
    );
    let params = Params::new()
        .u32x4(ne_u32(d)?)
        .u32(ba.elem_offset(sa)?)
        .u32x4(nb_elems(a, sa)?)
        .u32(bb.elem_offset(sb)?)
        .u32x4(ne_u32(b)?)
        .u32x4(nb_elems(b, sb)?)
        .u32(bd.elem_offset(sd)?)
        .u32x4(nb_elems(d, sd)?);
    let n = d.nelements() as u64;
    let bindings = if inplace {
        vec![ba, bb]
    } else {
        vec![ba, bb, bd]
    };
    e.dispatch_linear(
        &key,
        Checks::On,
        &bindings,
        &params,
        n.div_ceil(u64::from(WG)),
    )
}
