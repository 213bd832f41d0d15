//! Kernel fusion decided in `graph_compute` by looking ahead over the
//! nodes: RMS_NORM with the ADD that makes its input and the MUL by a
//! weight that reads its output (`ADD → RMS_NORM → MUL`, `ADD → RMS_NORM`,
//! `RMS_NORM → MUL`), one kernel per row instead of two or three, as
//! llama.cpp's Vulkan backend fuses them. Kernel:
//! `shaders/wgsl/rms_norm_fused.wgsl`.
//!
//! Also two consecutive SET_ROWS with the same indices (a layer's K and V
//! cache stores) run as one dispatch when neither writes what the other
//! touches (`set_rows::pairs`), and a ROPE with the SET_ROWS that stores
//! its result (a layer's K cache store) runs as one kernel
//! (`rope::stores_rows`), so the store does not wait for the ROPE.
//!
//! A graph from the scheduler is one split: the backend cannot see whether
//! a later split, a copy to another device or the host reads a node of it.
//! So the fused kernel writes every result the separate kernels write (the
//! ADD's sum, the normalised row), except the normalised row when the MUL
//! writes its product over exactly that memory (the allocator computes the
//! MUL in place when the MUL is the row's last reader): then no one can
//! observe the difference, because after the separate kernels that memory
//! holds the product as well. The fused nodes must be consecutive compute
//! nodes (no reader runs between them), and every memory region a fused
//! kernel writes must be either exactly another region it touches (in
//! place: an invocation only reads back what it wrote) or disjoint from
//! all of them; the MUL's weight, which rows share, must be disjoint from
//! every written region. Anything else is encoded node by node.
//!
//! A one-column MUL_MAT may also finish its rows itself: the ROPE over
//! its product and the SET_ROWS storing it into a cache run in its kernel
//! (`ops::epilogue`). Those nodes need not follow it (a layer
//! runs its three projections first); the nodes in between must leave
//! alone what the fused kernel touches, and the stream skips the later
//! nodes when it reaches them.
//!
//! When the next node is a MUL_MAT that reads the product through the
//! integer mat-vec, the fused kernel also writes the product's quantized
//! copy (the q8_1 runs `mul_mat_quantize` would make, the same bits) into
//! scratch memory and keeps it with the origin that MUL_MAT looks it up by
//! (`crate::kept`), so the MUL_MATs of a layer's first projections skip
//! their quantizing kernel.

use backplane_abi::{DType, Op, TensorDesc};
use backplane_shaders::PipelineKey;

use crate::encode::{Binding, Encoder, Params};
use crate::facts::Facts;
use crate::kept::CopyOrigin;
use crate::ops::epilogue::{self, Epilogue};
use crate::ops::layout::set_rows;
use crate::ops::matmul::{self, GluPair, Q8Copy, glu_pair, quantizes_src1};
use crate::ops::norm::RowPlan;
use crate::ops::{is_op, nb_elems, ne_u32, next_compute, overlaps, same_bytes, same_memory};
use crate::ops::{rope, row_count};
use crate::pipelines::Checks;

/// A fused RMS_NORM: the nodes it replaces (graph indices).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmsNormFusion {
    /// The ADD whose result is the RMS_NORM's source, if fused.
    pub add: Option<usize>,
    /// The RMS_NORM.
    pub norm: usize,
    /// The MUL of the normalised row by a weight, if fused.
    pub mul: Option<usize>,
}

impl RmsNormFusion {
    /// The fused nodes in graph order.
    pub fn nodes(&self) -> impl Iterator<Item = usize> {
        self.add
            .into_iter()
            .chain(std::iter::once(self.norm))
            .chain(self.mul)
    }
}

/// A tensor's role in the fused kernel, in binding order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// The row source: the ADD's src0, else the RMS_NORM's source.
    X,
    /// The ADD's src1 (broadcast).
    B,
    /// The ADD's result.
    S,
    /// The MUL's weight (broadcast).
    W,
    /// The RMS_NORM's result.
    N,
    /// The MUL's result.
    D,
}

impl Role {
    /// The binding-number define and the array name in the kernel.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Role::X => ("BIND_X", "buf_x"),
            Role::B => ("BIND_B", "buf_b"),
            Role::S => ("BIND_S", "buf_s"),
            Role::W => ("BIND_W", "buf_w"),
            Role::N => ("BIND_N", "buf_n"),
            Role::D => ("BIND_D", "buf_d"),
        }
    }

    /// Whether the kernel writes this role (`N` only when it is kept).
    fn written(self) -> bool {
        matches!(self, Role::S | Role::N | Role::D)
    }
}

fn is_f32(t: &TensorDesc) -> bool {
    matches!(t.dtype(), Ok(DType::F32))
}

/// Whether `b` broadcasts over `a` (each of its dims divides `a`'s).
fn broadcasts(b: &TensorDesc, a: &TensorDesc) -> bool {
    b.ne.iter()
        .zip(&a.ne)
        .all(|(&nb, &na)| nb > 0 && na % nb == 0)
}

/// Whether the kernel can index `t` (f32, element strides, u32 sizes).
fn indexable(t: &TensorDesc) -> bool {
    is_f32(t) && nb_elems(t, 4).is_ok() && ne_u32(t).is_ok()
}

/// Nodes encoded as one kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fusion {
    /// ADD → RMS_NORM → MUL, or part of it.
    RmsNorm(RmsNormFusion),
    /// Two consecutive SET_ROWS with the same indices (a layer's K and V
    /// cache stores) in one dispatch (`set_rows::pairs`).
    SetRowsPair(usize, usize),
    /// A ROPE and the SET_ROWS storing its result (`rope::stores_rows`).
    RopeStore(usize, usize),
    /// A layer's gate and up mat-vecs with their GLU (`matmul::glu_pair`).
    MatVecGlu(GluPair),
    /// A mat-vec finishing its rows with later nodes: the ROPE over it,
    /// the cache store of it (`ops::epilogue`).
    MatVecEpilogue(Epilogue),
}

impl Fusion {
    /// The fused nodes in graph order.
    pub fn nodes(&self) -> Vec<usize> {
        match self {
            Fusion::RmsNorm(f) => f.nodes().collect(),
            Fusion::SetRowsPair(a, b) | Fusion::RopeStore(a, b) => vec![*a, *b],
            Fusion::MatVecGlu(p) => p.nodes().to_vec(),
            Fusion::MatVecEpilogue(f) => f.nodes(),
        }
    }

    /// The nodes the stream begins (`Encoder::begin_node`) before encoding
    /// the fusion: all of them, except the GLU of a gate/up pair, which
    /// may write over the activations whose kept copy the products read,
    /// and the later nodes a mat-vec finishes; their encoders drop the
    /// copies they make stale after the kernel.
    pub fn begun_first(&self) -> Vec<usize> {
        match self {
            Fusion::MatVecGlu(p) => vec![p.first, p.second],
            Fusion::MatVecEpilogue(f) => vec![f.matmul],
            _ => self.nodes(),
        }
    }
}

/// Storage bindings of a SET_ROWS pair: two sources, the indices, two
/// destinations and the error flag.
const SET_ROWS_PAIR_BINDINGS: u32 = 6;

/// The fusion starting at node `i`, if one applies on a device with
/// `facts`.
pub fn find(graph: &[TensorDesc], i: usize, facts: &Facts) -> Option<Fusion> {
    let max_storage = facts.max_storage_buffers;
    if is_op(graph, i, Op::MulMat) {
        return glu_pair::find(graph, i, facts)
            .map(Fusion::MatVecGlu)
            .or_else(|| epilogue::find(graph, i, facts).map(Fusion::MatVecEpilogue));
    }
    if is_op(graph, i, Op::SetRows) {
        let j = next_compute(graph, i)?;
        let pair = is_op(graph, j, Op::SetRows)
            && max_storage >= SET_ROWS_PAIR_BINDINGS
            && set_rows::pairs(graph, i, j);
        return pair.then_some(Fusion::SetRowsPair(i, j));
    }
    if is_op(graph, i, Op::Rope) {
        let j = next_compute(graph, i)?;
        return rope::stores_rows(graph, i, j, max_storage).then_some(Fusion::RopeStore(i, j));
    }
    find_rms_norm(graph, i, max_storage).map(Fusion::RmsNorm)
}

/// Encodes `f` as one kernel; returns the nodes it encoded (all of
/// `f.nodes()`, except where a mat-vec's epilogue fell back to the
/// MUL_MAT alone: the stream encodes the others in their places).
pub fn encode(e: &mut Encoder, f: &Fusion) -> Result<Vec<usize>, String> {
    match f {
        Fusion::RmsNorm(f) => encode_rms_norm(e, f),
        Fusion::SetRowsPair(a, b) => set_rows::encode_pair(e, *a, *b),
        Fusion::RopeStore(a, b) => rope::encode_with_store(e, *a, *b),
        Fusion::MatVecGlu(p) => {
            let quantized = quantized_copy_for_next(e, p.glu)?;
            matmul::encode_glu_pair(e, p, quantized)
        }
        Fusion::MatVecEpilogue(f) => {
            if epilogue::encode(e, f)? {
                return Ok(f.nodes());
            }
            crate::ops::encode(e, f.matmul)?;
            return Ok(vec![f.matmul]);
        }
    }?;
    Ok(f.nodes())
}

/// The RMS_NORM fusion starting at node `i`, if one applies (see the
/// module doc) within `max_storage` storage bindings.
pub fn find_rms_norm(graph: &[TensorDesc], i: usize, max_storage: u32) -> Option<RmsNormFusion> {
    let (add, norm) = if is_op(graph, i, Op::Add) {
        let j = next_compute(graph, i)?;
        (is_op(graph, j, Op::RmsNorm) && graph[j].src(0) == Some(i)).then_some((Some(i), j))?
    } else if is_op(graph, i, Op::RmsNorm) {
        (None, i)
    } else {
        return None;
    };
    let mul = next_compute(graph, norm).filter(|&k| {
        is_op(graph, k, Op::Mul)
            && graph[k].src(0) == Some(norm)
            && graph[k].src(1).is_some_and(|w| w != norm)
    });
    // With the MUL if it can be, else without.
    [mul, None]
        .into_iter()
        .map(|mul| RmsNormFusion { add, norm, mul })
        .filter(|f| f.add.is_some() || f.mul.is_some())
        .find(|f| {
            roles(graph, f).is_some_and(|r| {
                fusable(graph, f, &r) && distinct_regions(graph, &r) <= max_storage as usize
            })
        })
}

/// The tensors of each role, the row source first; `None` when a node
/// lacks a source. The normalised row is left out when the MUL's result
/// replaces it.
fn roles(graph: &[TensorDesc], f: &RmsNormFusion) -> Option<Vec<(Role, usize)>> {
    let src = |node: usize, k: usize| graph[node].src(k).filter(|&s| s < graph.len());
    let mut out = Vec::with_capacity(6);
    match f.add {
        Some(a) => {
            out.push((Role::X, src(a, 0)?));
            out.push((Role::B, src(a, 1)?));
            out.push((Role::S, a));
        }
        None => out.push((Role::X, src(f.norm, 0)?)),
    }
    if let Some(m) = f.mul {
        out.push((Role::W, src(m, 1)?));
        if !same_memory(&graph[f.norm], &graph[m]) {
            out.push((Role::N, f.norm));
        }
        out.push((Role::D, m));
    } else {
        out.push((Role::N, f.norm));
    }
    Some(out)
}

/// Types, shapes and memory regions the fused kernel handles.
fn fusable(graph: &[TensorDesc], f: &RmsNormFusion, roles: &[(Role, usize)]) -> bool {
    if !roles.iter().all(|&(_, t)| indexable(&graph[t])) {
        return false;
    }
    let n = &graph[f.norm];
    if let Some(a) = f.add {
        let (x, b) = (&graph[roles[0].1], &graph[roles[1].1]);
        if graph[a].ne != x.ne || n.ne != x.ne || !broadcasts(b, x) {
            return false;
        }
    }
    if let Some(m) = f.mul {
        let w = roles.iter().find(|(r, _)| *r == Role::W).map(|&(_, t)| t);
        if graph[m].ne != n.ne || !w.is_some_and(|w| broadcasts(&graph[w], n)) {
            return false;
        }
    }
    // Every written region is exactly another region or apart from all;
    // the shared weight is apart from every written region.
    roles.iter().all(|&(r, t)| {
        !r.written()
            || roles.iter().all(|&(q, u)| {
                if u == t && q == r {
                    return true;
                }
                let (a, b) = (&graph[t], &graph[u]);
                if q == Role::W {
                    !overlaps(a, b)
                } else {
                    same_memory(a, b) || !overlaps(a, b)
                }
            })
    })
}

/// Storage bindings the kernel takes: one per distinct region.
fn distinct_regions(graph: &[TensorDesc], roles: &[(Role, usize)]) -> usize {
    (0..roles.len())
        .filter(|&k| {
            let t = &graph[roles[k].1];
            !roles[..k].iter().any(|&(_, u)| same_memory(&graph[u], t))
        })
        .count()
}

/// Element offset (within its binding), strides and sizes of a role.
struct Indexing {
    off: u32,
    strides: [u32; 4],
    ne: [u32; 4],
}

/// Encodes the fused nodes as one kernel, one workgroup per row, shared
/// out as the separate RMS_NORM shares it ([`RowPlan`]).
fn encode_rms_norm(e: &mut Encoder, f: &RmsNormFusion) -> Result<(), String> {
    let g = e.graph;
    let roles = roles(g, f).ok_or("a fused node lost a source")?;
    let n = &g[f.norm];
    // The separate RMS_NORM's plan for the same rows: the same bits.
    let plan = RowPlan::new(e.facts(), n.ne[0], row_count(n));
    let mut key = plan.specialise(PipelineKey::new("rms_norm_fused", "rms_norm"));
    if f.add.is_some() {
        key = key.define("FUSE_ADD", "");
    }
    if f.mul.is_some() {
        key = key.define("FUSE_MUL", "");
    }
    if roles.iter().any(|(r, _)| *r == Role::N) {
        key = key.define("KEEP_NORM", "");
    }
    // One binding per distinct region; a role on exactly the memory of an
    // earlier one uses that one's array.
    let mut bindings: Vec<Binding> = Vec::with_capacity(roles.len());
    let index = |role: Role| -> Result<Indexing, String> {
        let Some(&(_, t)) = roles.iter().find(|(r, _)| *r == role) else {
            return Ok(Indexing {
                off: 0,
                strides: [0; 4],
                ne: [1; 4],
            });
        };
        let b = e.binding(t)?;
        Ok(Indexing {
            off: b.elem_offset(4)?,
            strides: nb_elems(&g[t], 4)?,
            ne: ne_u32(&g[t])?,
        })
    };
    let ix = [
        index(Role::X)?,
        index(Role::B)?,
        index(Role::S)?,
        index(Role::W)?,
        index(Role::N)?,
        index(Role::D)?,
    ];
    for (k, &(role, t)) in roles.iter().enumerate() {
        let (bind, array) = role.names();
        match roles[..k].iter().find(|&&(_, u)| same_memory(&g[u], &g[t])) {
            Some(&(earlier, _)) => key = key.define(array, earlier.names().1),
            None => {
                key = key.define(bind, bindings.len().to_string());
                bindings.push(e.binding(t)?);
            }
        }
    }
    // The quantized activations the next MUL_MAT would make of the product
    // first, left for it as the kept copy (see `crate::kept`).
    let quantized = match f.mul {
        Some(m) if bindings.len() < e.facts().max_storage_buffers as usize => {
            quantized_copy_for_next(e, m)?
        }
        _ => None,
    };
    let kept = match quantized {
        Some((bytes, origin)) => {
            e.forget_kept_copy();
            let scratch = e.scratch(bytes)?;
            key = key
                .define("QUANTIZE", "")
                .define("BIND_Q", bindings.len().to_string());
            // A run's eight positions are eight lanes of one subgroup when
            // subgroups hold at least eight (see common/row_norm.wgsl).
            if plan.sum_lanes.is_some_and(|l| l >= 8) {
                key = key.define("Q8_LANES", "");
            }
            bindings.push(scratch.clone());
            Some((origin, scratch))
        }
        None => None,
    };
    key = key.define("BIND_P", bindings.len().to_string());
    let [ix_x, ix_b, ix_s, ix_w, ix_n, ix_d] = ix;
    let params = Params::new()
        .u32x4(ne_u32(n)?)
        .u32(ix_x.off)
        .u32x4(ix_x.strides)
        .u32(ix_b.off)
        .u32x4(ix_b.ne)
        .u32x4(ix_b.strides)
        .u32(ix_s.off)
        .u32x4(ix_s.strides)
        .u32(ix_w.off)
        .u32x4(ix_w.ne)
        .u32x4(ix_w.strides)
        .u32(ix_n.off)
        .u32x4(ix_n.strides)
        .u32(ix_d.off)
        .u32x4(ix_d.strides)
        .f32(n.param_f32(0));
    e.dispatch_linear(&key, Checks::On, &bindings, &params, row_count(n))?;
    if let Some((origin, scratch)) = kept {
        e.keep_copy(origin, scratch);
    }
    Ok(())
}

/// The MUL_MAT right after `node` (views skipped) that reads `node`'s
/// result as its src1, and that src1's graph index: `node` itself, or a
/// tensor over exactly its bytes in the same order (the reshape of an
/// attention output to rows of all heads, which reaches a backend as a
/// leaf at the output's bytes).
fn next_mul_mat_reading(graph: &[TensorDesc], node: usize) -> Option<(usize, usize)> {
    let mm = next_compute(graph, node)?;
    if !is_op(graph, mm, Op::MulMat) {
        return None;
    }
    let src1 = graph[mm].src(1)?;
    let (a, b) = (graph.get(src1)?, &graph[node]);
    // Nothing runs between the two, so bytes that `node` wrote hold its
    // values whatever tensor describes them.
    let same_bytes = src1 == node
        || (a.dtype == b.dtype && a.is_contiguous() && b.is_contiguous() && same_bytes(a, b));
    same_bytes.then_some((mm, src1))
}

/// When fusion is on and the next compute node after `node` (an f32
/// result) is a MUL_MAT that reads it (directly or through a view of the
/// same bytes, see [`next_mul_mat_reading`]) through the integer
/// mat-vec's quantized copy: the copy's bytes and the origin that MUL_MAT
/// looks it up by, for a kernel that writes the copy along with `node`.
/// Run `r` of the copy holds elements `32 r .. 32 r + 31` of `node` in
/// its logical order (for a view, both are contiguous, so the view's
/// order is the same).
pub(crate) fn quantized_copy_for_next(
    e: &Encoder,
    node: usize,
) -> Result<Option<(u64, CopyOrigin)>, String> {
    let g = e.graph;
    let Some((mm, src1)) = next_mul_mat_reading(g, node) else {
        return Ok(None);
    };
    let fits = g[node].ne[0] % 32 == 0
        && g[src1].ne[0] % 32 == 0
        && is_f32(&g[node])
        && g[node].nb[0] == 4;
    if !e.facts().tuning.fuse || !fits || !quantizes_src1(e, mm) {
        return Ok(None);
    }
    let q = Q8Copy::of(e, src1)?;
    Ok(Some((q.bytes, q.origin(e, src1)?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::shader_check;

    /// A contiguous f32 tensor at `offset` of buffer 1.
    fn t(ne: [i64; 4], offset: u64) -> TensorDesc {
        let mut d = TensorDesc::new(DType::F32, ne);
        d.buffer = 1;
        d.offset = offset;
        d
    }

    fn node(op: Op, ne: [i64; 4], offset: u64, srcs: &[usize]) -> TensorDesc {
        let mut d = t(ne, offset);
        d.op = op.code();
        for (k, &s) in srcs.iter().enumerate() {
            d.src[k] = s as i32;
        }
        d
    }

    /// x, b, w; ADD; RMS_NORM; MUL (in place over the norm when asked).
    fn llama_norm(mul_in_place: bool) -> Vec<TensorDesc> {
        let ne = [64, 3, 1, 1];
        let mul_at = if mul_in_place { 4096 } else { 8192 };
        vec![
            t(ne, 0),
            t(ne, 1024),
            t([64, 1, 1, 1], 2048),
            node(Op::Add, ne, 3072, &[0, 1]),
            node(Op::RmsNorm, ne, 4096, &[3]),
            node(Op::Mul, ne, mul_at, &[4, 2]),
        ]
    }

    #[test]
    fn add_norm_mul_fuse_and_the_norm_is_dropped_only_when_the_mul_replaces_it() {
        for in_place in [true, false] {
            let g = llama_norm(in_place);
            let f = find_rms_norm(&g, 3, 8).expect("fuses");
            assert_eq!(f.nodes().collect::<Vec<_>>(), vec![3, 4, 5]);
            assert_eq!(f.nodes().last(), Some(5));
            let kept = roles(&g, &f).unwrap().iter().any(|(r, _)| *r == Role::N);
            assert_eq!(kept, !in_place);
        }
        // From the norm itself, the MUL alone.
        let f = find_rms_norm(&llama_norm(true), 4, 8).expect("fuses");
        assert_eq!((f.add, f.mul), (None, Some(5)));
    }

    #[test]
    fn fusion_needs_consecutive_nodes_and_apart_or_identical_memory() {
        // A reader between the norm and the MUL: ADD + RMS_NORM only.
        let mut g = llama_norm(true);
        g.insert(5, node(Op::Sqr, [64, 3, 1, 1], 12288, &[4]));
        assert_eq!(find_rms_norm(&g, 3, 8).map(|f| f.mul), Some(None));
        // The weight inside the memory the kernel writes.
        let mut g = llama_norm(true);
        g[2].offset = 4096;
        assert_eq!(
            find_rms_norm(&g, 3, 8),
            Some(RmsNormFusion {
                add: Some(3),
                norm: 4,
                mul: None
            })
        );
        // A sum partly over its source: nothing fuses.
        let mut g = llama_norm(true);
        g[3].offset = 512;
        assert_eq!(find_rms_norm(&g, 3, 8), None);
        // f16 is not fused.
        let mut g = llama_norm(true);
        g[2].dtype = DType::F16.code();
        assert_eq!(find_rms_norm(&g, 3, 8).map(|f| f.mul), Some(None));
        // Five regions do not fit four storage bindings; the MUL is left out.
        assert_eq!(
            find_rms_norm(&llama_norm(true), 3, 4).map(|f| f.mul),
            Some(None)
        );
        // A lone RMS_NORM or ADD is not a fusion.
        let g = vec![
            t([8, 1, 1, 1], 0),
            node(Op::RmsNorm, [8, 1, 1, 1], 64, &[0]),
        ];
        assert_eq!(find_rms_norm(&g, 1, 8), None);
    }

    #[test]
    fn set_rows_pair_only_with_shared_indices_and_apart_memory() {
        let set_rows = |at: u64, rows: usize, idx: usize| {
            let mut d = node(Op::SetRows, [64, 8, 1, 1], at, &[rows, idx]);
            d.dtype = DType::F16.code();
            d
        };
        let mut idx = t([2, 1, 1, 1], 2048);
        idx.dtype = DType::I64.code();
        let g = vec![
            t([64, 2, 1, 1], 0),
            t([64, 2, 1, 1], 1024),
            idx,
            set_rows(4096, 0, 2),
            set_rows(8192, 1, 2),
        ];
        let storage = |max_storage_buffers| Facts {
            max_storage_buffers,
            ..crate::facts::test_gpu()
        };
        assert_eq!(find(&g, 3, &storage(8)), Some(Fusion::SetRowsPair(3, 4)));
        assert_eq!(find(&g, 3, &storage(5)), None, "six bindings");
        // Different indices; the V store over the K rows.
        let mut other = g.clone();
        other.push(other[2]);
        other[4].src[1] = 5;
        assert_eq!(find(&other, 3, &storage(8)), None);
        let mut over = g.clone();
        over[4].offset = 0;
        assert_eq!(find(&over, 3, &storage(8)), None);
    }

    #[test]
    fn glu_with_the_quantized_copy_validates_split_or_not() {
        for split in [false, true] {
            let mut key = PipelineKey::new("glu", "swiglu")
                .ty("SRC0", "f32")
                .define("QUANTIZE", "");
            key = if split {
                key.define("SPLIT", "")
            } else {
                key.ty("SRC1", "f32")
            };
            shader_check::check(&key.ty("DST", "f32").wg(256));
        }
    }

    #[test]
    fn every_fused_kernel_variant_validates() {
        let variants: [&[(&'static str, &str)]; 5] = [
            // With the quantized copy for the next MUL_MATs (its runs
            // reduced by subgroup shuffles where the plan's are).
            &[
                ("FUSE_ADD", ""),
                ("FUSE_MUL", ""),
                ("QUANTIZE", ""),
                ("BIND_X", "0"),
                ("BIND_B", "1"),
                ("buf_s", "buf_x"),
                ("BIND_W", "2"),
                ("BIND_D", "3"),
                ("BIND_Q", "4"),
                ("BIND_P", "5"),
            ],
            // ADD + RMS_NORM + MUL in place over the norm, sum in place.
            &[
                ("FUSE_ADD", ""),
                ("FUSE_MUL", ""),
                ("BIND_X", "0"),
                ("BIND_B", "1"),
                ("buf_s", "buf_x"),
                ("BIND_W", "2"),
                ("BIND_D", "3"),
                ("BIND_P", "4"),
            ],
            &[
                ("FUSE_ADD", ""),
                ("KEEP_NORM", ""),
                ("BIND_X", "0"),
                ("BIND_B", "1"),
                ("BIND_S", "2"),
                ("BIND_N", "3"),
                ("BIND_P", "4"),
            ],
            &[
                ("FUSE_MUL", ""),
                ("KEEP_NORM", ""),
                ("BIND_X", "0"),
                ("BIND_W", "1"),
                ("BIND_N", "2"),
                ("BIND_D", "3"),
                ("BIND_P", "4"),
            ],
            &[
                ("FUSE_MUL", ""),
                ("BIND_X", "0"),
                ("BIND_W", "1"),
                ("buf_d", "buf_x"),
                ("BIND_P", "2"),
            ],
        ];
        // Held in registers or read again; subgroup butterfly or tree.
        let plans = [
            (Some(2), Some(32)),
            (None, None),
            (Some(1), None),
            (None, Some(8)),
        ];
        for defines in variants {
            for (held_chunks, sum_lanes) in plans {
                let plan = RowPlan {
                    wg: 64,
                    held_chunks,
                    sum_lanes,
                };
                let mut key = plan.specialise(PipelineKey::new("rms_norm_fused", "rms_norm"));
                for &(name, value) in defines {
                    key = key.define(name, value);
                }
                if defines.contains(&("QUANTIZE", "")) && sum_lanes.is_some() {
                    key = key.define("Q8_LANES", "");
                }
                shader_check::check(&key);
            }
        }
    }
}
