//! A one-column mat-vec that finishes its rows itself (`EPILOGUE` in
//! `shaders/wgsl/mul_mat_vec.wgsl`): the ROPE over the product, the
//! SET_ROWS storing it into a cache row, or both, run in the mat-vec's
//! kernel. A decode layer's Q projection then rotates its own rows, K's
//! rotates and stores them, V's stores them, and the step of ROPE and
//! cache-store kernels that waited for the three products is gone.
//!
//! The later nodes need not follow the MUL_MAT: a layer's graph runs the
//! three projections first. They are the first later nodes that touch the
//! product (the ROPE, in place over it in normal mode; then the SET_ROWS
//! reading it as one row), and every compute node in between must leave
//! alone what the fused kernel reads and writes, since the fused kernel
//! runs where the MUL_MAT did. Each value is computed as the separate
//! kernels compute it (`common/rope_angle.wgsl`, the same conversion into
//! the cache), so results keep their bits; a bad cache index is reported
//! for the SET_ROWS node, as set_rows reports it.
//!
//! Only where the separate MUL_MAT would take the WGSL mat-vec of one column
//! with two rows per workgroup (a workgroup's two rows are one rotated
//! pair); anything else is encoded node by node.

use backplane_abi::{DType, Op, TensorDesc};
use backplane_shaders::PipelineKey;

use crate::encode::{Binding, Encoder, Params};
use crate::facts::Facts;
use crate::ops::layout::set_rows;
use crate::ops::matmul::plan::{self, Path, Shape};
use crate::ops::matmul::{self, MATVEC_BINDINGS, MatVecExtra};
use crate::ops::{dtype, is_compute, is_op, nb_elems, ne_u32, overlaps, rope, type_name};

/// Compute nodes past the MUL_MAT searched for the ROPE and the store.
const LOOKAHEAD: usize = 16;

/// A MUL_MAT and the later nodes its kernel finishes (graph indices).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Epilogue {
    pub matmul: usize,
    /// The ROPE over the product, in place.
    pub rope: Option<usize>,
    /// The SET_ROWS storing the (rotated) product as one cache row.
    pub store: Option<usize>,
}

impl Epilogue {
    /// The fused nodes in graph order.
    pub fn nodes(&self) -> Vec<usize> {
        std::iter::once(self.matmul)
            .chain(self.rope)
            .chain(self.store)
            .collect()
    }

    /// The nodes run ahead of their place in the graph.
    pub fn later(&self) -> impl Iterator<Item = usize> {
        self.rope.into_iter().chain(self.store)
    }
}

/// The sources of node `n` (indices into `graph`).
fn sources(graph: &[TensorDesc], n: usize) -> impl Iterator<Item = &TensorDesc> {
    let d = &graph[n];
    (0..d.src.len()).filter_map(move |k| d.src(k).and_then(|s| graph.get(s)))
}

/// The first compute node after `from` (within [`LOOKAHEAD`]) that reads
/// or writes memory of `region`.
fn next_toucher(graph: &[TensorDesc], from: usize, region: &TensorDesc) -> Option<usize> {
    (from + 1..graph.len())
        .filter(|&j| is_compute(&graph[j]))
        .take(LOOKAHEAD)
        .find(|&j| overlaps(&graph[j], region) || sources(graph, j).any(|s| overlaps(s, region)))
}

/// Whether SET_ROWS `store` stores the f32 product `product` ([m] of one
/// column) as one row of an f16 or f32 cache, with one i32 or i64 index,
/// the cache apart from everything else the kernel reads.
fn stores_product(graph: &[TensorDesc], store: usize, product: &TensorDesc) -> bool {
    let st = &graph[store];
    let get = |k: usize| st.src(k).filter(|&i| i < graph.len()).map(|i| &graph[i]);
    let (Some(rows), Some(idx)) = (get(0), get(1)) else {
        return false;
    };
    st.op() == Ok(Op::SetRows)
        && dtype(rows) == Ok(DType::F32)
        && rows.is_contiguous()
        && rows.buffer == product.buffer
        && rows.offset == product.offset
        && rows.ne == [product.ne[0], 1, 1, 1]
        && matches!(dtype(idx), Ok(DType::I32 | DType::I64))
        && idx.ne == [1, 1, 1, 1]
        && set_rows::element_rows(st)
        && st.ne[0] == product.ne[0]
        && st.ne[2] == 1
        && st.ne[3] == 1
        && !overlaps(idx, st)
}

/// The epilogue fusion of MUL_MAT `i`, if one applies (see the module doc).
pub fn find(graph: &[TensorDesc], i: usize, facts: &Facts) -> Option<Epilogue> {
    let d = &graph[i];
    if !is_op(graph, i, Op::MulMat) {
        return None;
    }
    let (w, x) = (graph.get(d.src(0)?)?, graph.get(d.src(1)?)?);
    let t = w.dtype().ok()?;
    let s = Shape::of(w, x).ok()?;
    let one_column = s.n == 1
        && s.batches() == 1
        && s.m.is_multiple_of(2)
        && plan::matvec_rows(&facts.tuning) == 2
        && dtype(d) == Ok(DType::F32)
        && d.is_contiguous()
        && d.ne == [s.m as i64, 1, 1, 1];
    if !one_column
        || !matches!(
            plan::choose_path(facts, t, &s, true, facts.tuning.matmul_path),
            Path::MatVec { .. }
        )
    {
        return None;
    }
    let first = next_toucher(graph, i, d)?;
    let (rope, store) = if rope::rotates_product(graph, first, d) {
        let store = next_toucher(graph, first, d).filter(|&n| stores_product(graph, n, d));
        (Some(first), store)
    } else if stores_product(graph, first, d) {
        (None, Some(first))
    } else {
        return None;
    };
    let f = Epilogue {
        matmul: i,
        rope,
        store,
    };
    let ff = rope
        .and_then(|r| graph[r].src(2))
        .filter(|&k| k < graph.len());
    let rope_inputs = rope
        .map(|r| graph[r].src(1))
        .into_iter()
        .flatten()
        .chain(ff);
    let store_idx = store.and_then(|n| graph[n].src(1));
    // What the kernel reads, and what it writes.
    let reads: Vec<&TensorDesc> = [d.src(0), d.src(1)]
        .into_iter()
        .flatten()
        .chain(rope_inputs)
        .chain(store_idx)
        .filter_map(|k| graph.get(k))
        .collect();
    let mut writes = vec![d];
    writes.extend(store.map(|n| &graph[n]));
    // The cache apart from everything else the kernel touches.
    let cache_apart = store.is_none_or(|n| {
        let cache = &graph[n];
        !overlaps(cache, d) && reads.iter().all(|r| !overlaps(cache, r))
    });
    // Nodes in between leave all of it alone.
    let last = f.later().max()?;
    let between_apart = (i + 1..last)
        .filter(|&n| is_compute(&graph[n]) && Some(n) != rope)
        .all(|n| {
            reads.iter().chain(&writes).all(|r| !overlaps(&graph[n], r))
                && sources(graph, n).all(|s| writes.iter().all(|w| !overlaps(s, w)))
        });
    let bindings = MATVEC_BINDINGS
        + rope.map_or(0, |_| 1 + usize::from(ff.is_some()))
        + store.map_or(0, |_| 3);
    (cache_apart && between_apart && bindings <= facts.max_storage_buffers as usize).then_some(f)
}

/// What the mat-vec adds for `f`: defines, bindings (after its own
/// three) and parameter words (after its own).
fn extra(e: &mut Encoder, f: &Epilogue) -> Result<MatVecExtra, String> {
    let g = e.graph;
    let mut key = PipelineKey::new("", "").define("EPILOGUE", "");
    let mut bindings = Vec::new();
    let next = |key: PipelineKey, name: &'static str, b: Binding, bs: &mut Vec<Binding>| {
        let key = key.define(name, (MATVEC_BINDINGS + bs.len()).to_string());
        bs.push(b);
        key
    };
    let (mut r_ne0, mut off_pos, mut off_ff, mut sff, mut n_ff) = (0, 0, 0, 0, 0);
    let (mut n_pairs, mut angles) = (0, [0.0f32; 6]);
    if let Some(r) = f.rope {
        let d = &g[r];
        let ip = d.src(1).ok_or("ROPE without positions")?;
        let bp = e.binding(ip)?;
        off_pos = bp.elem_offset(4)?;
        key = next(
            key.define("EPILOGUE_ROPE", ""),
            "BINDING_POS",
            bp,
            &mut bindings,
        );
        if let Some(i_ff) = d.src(2).filter(|&k| k < g.len()) {
            let bf = e.binding(i_ff)?;
            off_ff = bf.elem_offset(4)?;
            sff = nb_elems(&g[i_ff], 4)?[0];
            n_ff = ne_u32(&g[i_ff])?[0];
            key = next(key.define("HAS_FF", ""), "BINDING_FF", bf, &mut bindings);
        }
        r_ne0 = ne_u32(d)?[0];
        (n_pairs, angles) = rope::angle_params(d, d.ne[0]);
    }
    let mut store_words = [0u32; 5];
    if let Some(st) = f.store {
        let rope::RowStore {
            cache: bc,
            idx: bi,
            words,
            types,
        } = rope::RowStore::of(e, st)?;
        store_words = words;
        key = key
            .define("EPILOGUE_STORE", "")
            .ty("CACHE", type_name(types[0]))
            .ty("SRC1", type_name(types[1]));
        key = next(key, "BINDING_CACHE", bc, &mut bindings);
        key = next(key, "BINDING_IDX", bi, &mut bindings);
        let flag = e.error_flag();
        key = next(key, "BINDING_FLAG", flag, &mut bindings);
    }
    key = key.define(
        "BINDING_PARAMS",
        (MATVEC_BINDINGS + bindings.len()).to_string(),
    );
    let mut words = Params::new()
        .u32(r_ne0)
        .u32(off_pos)
        .u32(off_ff)
        .u32(sff)
        .u32(n_ff)
        .u32(n_pairs);
    for a in angles {
        words = words.f32(a);
    }
    for w in store_words {
        words = words.u32(w);
    }
    Ok(MatVecExtra {
        key,
        bindings,
        words,
        node1: f.store.map_or(0, |s| s as u32 + 1),
    })
}

/// Encodes `f` as one kernel; `Ok(false)`, and nothing encoded, when a
/// native kernel takes the product or the mat-vec would not (the stream
/// then encodes the nodes one by one, each in its place).
pub fn encode(e: &mut Encoder, f: &Epilogue) -> Result<bool, String> {
    let extra = extra(e, f)?;
    if !matmul::encode_with_extra(e, f.matmul, &extra)? {
        return Ok(false);
    }
    // The later nodes wrote their memory now: copies of it are stale.
    f.later().for_each(|n| e.forget_copies_of(n));
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::test_gpu;
    use crate::ops::shader_check;
    use backplane_abi::rope_mode;

    const SLOT: u64 = 1 << 24;

    fn at(mut d: TensorDesc, offset: u64) -> TensorDesc {
        d.offset = offset;
        d
    }

    fn node(op: Op, t: DType, ne: [i64; 4], offset: u64, srcs: &[usize]) -> TensorDesc {
        let mut d = at(TensorDesc::new(t, ne), offset);
        d.op = op.code();
        for (k, &s) in srcs.iter().enumerate() {
            d.src[k] = s as i32;
        }
        d
    }

    /// A decode layer's projections: x [k]; wq, wk, wv; pos, idx; the
    /// K and V caches; q, k, v products; their reshapes; ROPE q and k in
    /// place; the K and V stores; an attention reading all of them.
    fn layer(t: DType) -> Vec<TensorDesc> {
        let (k, hd, nh, nkv) = (2048, 64, 32, 8);
        let mut rq = node(Op::Rope, DType::F32, [hd, nh, 1, 1], 9 * SLOT, &[12, 4]);
        rq.op_params[1] = hd as i32;
        rq.op_params[2] = rope_mode::NORMAL;
        rq.op_params[5] = 10000f32.to_bits() as i32;
        rq.op_params[6] = 1f32.to_bits() as i32;
        let mut rk = rq;
        rk.ne = [hd, nkv, 1, 1];
        rk.nb = TensorDesc::new(DType::F32, rk.ne).nb;
        rk.offset = 10 * SLOT;
        rk.src[0] = 13;
        vec![
            at(TensorDesc::new(DType::F32, [k, 1, 1, 1]), 0),
            at(TensorDesc::new(t, [k, hd * nh, 1, 1]), SLOT),
            at(TensorDesc::new(t, [k, hd * nkv, 1, 1]), 2 * SLOT),
            at(TensorDesc::new(t, [k, hd * nkv, 1, 1]), 3 * SLOT),
            at(TensorDesc::new(DType::I32, [1, 1, 1, 1]), 4 * SLOT),
            at(TensorDesc::new(DType::I64, [1, 1, 1, 1]), 5 * SLOT),
            at(TensorDesc::new(DType::F16, [hd * nkv, 256, 1, 1]), 6 * SLOT),
            at(TensorDesc::new(DType::F16, [hd * nkv, 256, 1, 1]), 7 * SLOT),
            // 8: q, 9: k (at 10 SLOT), 10: v
            node(
                Op::MulMat,
                DType::F32,
                [hd * nh, 1, 1, 1],
                9 * SLOT,
                &[1, 0],
            ),
            node(
                Op::MulMat,
                DType::F32,
                [hd * nkv, 1, 1, 1],
                10 * SLOT,
                &[2, 0],
            ),
            node(
                Op::MulMat,
                DType::F32,
                [hd * nkv, 1, 1, 1],
                11 * SLOT,
                &[3, 0],
            ),
            // 11: unused slot keeps the indices below readable
            at(TensorDesc::new(DType::F32, [1, 1, 1, 1]), 12 * SLOT),
            // 12, 13: q and k as heads; 14, 15: k and v as rows
            at(TensorDesc::new(DType::F32, [hd, nh, 1, 1]), 9 * SLOT),
            at(TensorDesc::new(DType::F32, [hd, nkv, 1, 1]), 10 * SLOT),
            at(TensorDesc::new(DType::F32, [hd * nkv, 1, 1, 1]), 10 * SLOT),
            at(TensorDesc::new(DType::F32, [hd * nkv, 1, 1, 1]), 11 * SLOT),
            // 16: rope q, 17: rope k, 18: store k, 19: store v
            rq,
            rk,
            node(
                Op::SetRows,
                DType::F16,
                [hd * nkv, 256, 1, 1],
                6 * SLOT,
                &[14, 5],
            ),
            node(
                Op::SetRows,
                DType::F16,
                [hd * nkv, 256, 1, 1],
                7 * SLOT,
                &[15, 5],
            ),
            // 20: what reads the results
            node(
                Op::FlashAttnExt,
                DType::F32,
                [hd, nh, 1, 1],
                13 * SLOT,
                &[16, 18, 19],
            ),
        ]
    }

    #[test]
    fn each_projection_finishes_its_rows() {
        let facts = test_gpu();
        for t in [DType::Q4_0, DType::Q8_0, DType::F16] {
            let g = layer(t);
            let q = find(&g, 8, &facts).expect("q");
            assert_eq!((q.rope, q.store), (Some(16), None), "{t:?}");
            let k = find(&g, 9, &facts).expect("k");
            assert_eq!((k.rope, k.store), (Some(17), Some(18)), "{t:?}");
            let v = find(&g, 10, &facts).expect("v");
            assert_eq!((v.rope, v.store), (None, Some(19)), "{t:?}");
        }
    }

    #[test]
    fn anything_else_runs_node_by_node() {
        let facts = test_gpu();
        // A ROPE not in place; NeoX; two tokens.
        let mut g = layer(DType::Q4_0);
        g[16].offset = 12 * SLOT;
        assert_eq!(find(&g, 8, &facts), None);
        let mut g = layer(DType::Q4_0);
        g[16].op_params[2] = rope_mode::NEOX;
        assert_eq!(find(&g, 8, &facts), None);
        // A node in between writes what the kernel reads (the positions),
        // or reads what it writes (q before its ROPE).
        let mut g = layer(DType::Q4_0);
        g[10].offset = 4 * SLOT;
        g[10].ne = [1, 1, 1, 1];
        g[10].nb = TensorDesc::new(DType::F32, g[10].ne).nb;
        assert_eq!(find(&g, 8, &facts), None);
        let mut g = layer(DType::Q4_0);
        g[10].src[1] = 12;
        assert_eq!(find(&g, 8, &facts), None);
        // The first reader of v is not its store.
        let mut g = layer(DType::Q4_0);
        g[17].src[1] = 15;
        assert_eq!(find(&g, 10, &facts), None);
        // More than one row per workgroup.
        let rows = Facts {
            tuning: crate::options::Tuning {
                matmul_rows: Some(4),
                ..test_gpu().tuning
            },
            ..test_gpu()
        };
        assert_eq!(find(&layer(DType::Q4_0), 8, &rows), None);
        // Too few storage bindings for the store.
        let few = Facts {
            max_storage_buffers: 5,
            ..test_gpu()
        };
        assert_eq!(find(&layer(DType::Q4_0), 9, &few), None);
    }

    #[test]
    fn every_epilogue_variant_validates() {
        let base = || {
            PipelineKey::new("mul_mat_vec", "")
                .ty("SRC0", "q4_0")
                .wg(64)
                .define("W_QUANT", "")
                .define("QUANT_Q4_0", "")
                .define("X_Q8", "")
                .define("NROWS", "2")
                .define("NCOLS", "1")
                .define("EPILOGUE", "")
        };
        for (rope, ff, store, idx, subgroup) in [
            (true, false, false, "i32", true),
            (true, true, true, "i64", true),
            (false, false, true, "i32", false),
            (true, false, true, "i64", false),
        ] {
            let mut key = base();
            let mut n = 3;
            let mut bind = |key: PipelineKey, name: &'static str| {
                n += 1;
                key.define(name, (n - 1).to_string())
            };
            if rope {
                key = bind(key.define("EPILOGUE_ROPE", ""), "BINDING_POS");
                if ff {
                    key = bind(key.define("HAS_FF", ""), "BINDING_FF");
                }
            }
            if store {
                key = key
                    .define("EPILOGUE_STORE", "")
                    .ty("CACHE", "f16")
                    .ty("SRC1", idx);
                key = bind(key, "BINDING_CACHE");
                key = bind(key, "BINDING_IDX");
                key = bind(key, "BINDING_FLAG");
            }
            key = bind(key, "BINDING_PARAMS");
            if subgroup {
                key.path = "subgroup";
                key = key.define("MAX_SUBGROUPS", "2");
            }
            shader_check::check(&key);
        }
    }
}
