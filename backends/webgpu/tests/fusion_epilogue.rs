//! A decode layer's Q, K and V mat-vecs finishing their rows themselves
//! (the ROPE over Q and K, the K and V cache stores: the `EPILOGUE` of
//! `mul_mat_vec`) against the same graph encoded node by node
//! (`fuse=off`), on the first WebGPU adapter (lavapipe on machines without
//! a GPU; the test says so and passes without one).

mod common;

use common::{f32_bytes, f32s, leaf, node};

use backplane_abi::plugin::{Buffer, Device};
use backplane_abi::{DType, Op, TensorDesc, rope_mode};

/// Bytes between the graph's tensors (the largest weight fits).
const SLOT: u64 = 1 << 20;
/// Head size, query heads, key/value heads, cache rows.
const HD: i64 = 64;
const NH: i64 = 4;
const NKV: i64 = 2;
const CELLS: i64 = 8;

/// Graph indices of what the test reads back.
const Q: usize = 9;
const K: usize = 10;
const V: usize = 11;
const CACHE_K: usize = 6;
const CACHE_V: usize = 7;

/// x [k]; wq, wk, wv of type `wt`; positions (i32); one cache index (of
/// type `it`); the K and V caches (f16); frequency factors; q, k, v =
/// MUL_MAT(w, x); q and k as heads, k and v as rows; ROPE q and k in
/// place (normal mode, with the factors when `ff`); SET_ROWS of k and v
/// into the caches, in the order a layer's graph has them.
fn layer(buffer: u64, wt: DType, k: i64, it: DType, ff: bool) -> Vec<TensorDesc> {
    let at = |t: DType, ne: [i64; 4], slot: u64| {
        let mut d = TensorDesc::new(t, ne);
        d.buffer = buffer;
        d.offset = slot * SLOT;
        d
    };
    let rope = |ne: [i64; 4], slot: u64, src: usize| {
        let mut r = node(Op::Rope, ne, slot * SLOT, buffer, &[src, 4]);
        if ff {
            r.src[2] = 8;
        }
        r.op_params[1] = HD as i32;
        r.op_params[2] = rope_mode::NORMAL;
        r.op_params[4] = 4096;
        r.op_params[5] = 500000f32.to_bits() as i32;
        r.op_params[6] = 1f32.to_bits() as i32;
        r.op_params[8] = 1f32.to_bits() as i32;
        r.op_params[9] = 32f32.to_bits() as i32;
        r.op_params[10] = 1f32.to_bits() as i32;
        r
    };
    // SET_ROWS of `rows` into the cache at graph index `cache`.
    let store = |cache: usize, rows: usize| {
        let mut s = node(Op::SetRows, [HD * NKV, CELLS, 1, 1], 0, buffer, &[rows, 5]);
        s.offset = cache as u64 * SLOT;
        s.dtype = DType::F16.code();
        s.nb = TensorDesc::new(DType::F16, s.ne).nb;
        s
    };
    vec![
        leaf([k, 1, 1, 1], 0, buffer),
        at(wt, [k, HD * NH, 1, 1], 1),
        at(wt, [k, HD * NKV, 1, 1], 2),
        at(wt, [k, HD * NKV, 1, 1], 3),
        at(DType::I32, [1, 1, 1, 1], 4),
        at(it, [1, 1, 1, 1], 5),
        at(DType::F16, [HD * NKV, CELLS, 1, 1], 6),
        at(DType::F16, [HD * NKV, CELLS, 1, 1], 7),
        at(DType::F32, [HD / 2, 1, 1, 1], 8),
        node(Op::MulMat, [HD * NH, 1, 1, 1], 9 * SLOT, buffer, &[1, 0]),
        node(Op::MulMat, [HD * NKV, 1, 1, 1], 10 * SLOT, buffer, &[2, 0]),
        node(Op::MulMat, [HD * NKV, 1, 1, 1], 11 * SLOT, buffer, &[3, 0]),
        leaf([HD, NH, 1, 1], 9 * SLOT, buffer),
        leaf([HD, NKV, 1, 1], 10 * SLOT, buffer),
        rope([HD, NH, 1, 1], 9, 12),
        rope([HD, NKV, 1, 1], 10, 13),
        leaf([HD * NKV, 1, 1, 1], 10 * SLOT, buffer),
        leaf([HD * NKV, 1, 1, 1], 11 * SLOT, buffer),
        store(CACHE_K, 16),
        store(CACHE_V, 17),
    ]
}

/// Values of mixed signs, a pattern per `seed`.
fn values(n: usize, seed: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 37 + seed * 11) % 101) as f32 - 50.0) * scale)
        .collect()
}

/// Runs `g` on a stream made with `params`, storing into cache row
/// `row`: the outcome, the bytes of q, k, v and both caches, and the
/// kernels recorded.
fn run(
    dev: &dyn Device,
    buf: &dyn Buffer,
    g: &[TensorDesc],
    params: &str,
    row: i64,
) -> (Result<(), String>, Vec<Vec<u8>>, u64) {
    buf.clear(0x3c).expect("clear");
    let x = values(g[0].nelements() as usize, 3, 0.02);
    buf.set_tensor(&g[0], 0, &f32_bytes(&x)).expect("set x");
    for (t, seed) in [(1, 1), (2, 2), (3, 5)] {
        let dtype = DType::from_code(g[t].dtype).expect("type");
        let v = values(g[t].nelements() as usize, seed, 0.002);
        let mut w = vec![0u8; g[t].nbytes() as usize];
        backplane_quant::quantize_row(dtype, &v, &mut w).expect("quantize");
        buf.set_tensor(&g[t], 0, &w).expect("set weight");
    }
    buf.set_tensor(&g[4], 0, &1234i32.to_le_bytes())
        .expect("set pos");
    let idx = if g[5].dtype == DType::I64.code() {
        row.to_le_bytes().to_vec()
    } else {
        (row as i32).to_le_bytes().to_vec()
    };
    buf.set_tensor(&g[5], 0, &idx).expect("set idx");
    let factors: Vec<f32> = (0..HD / 2).map(|i| 1.0 + i as f32 / 8.0).collect();
    buf.set_tensor(&g[8], 0, &f32_bytes(&factors))
        .expect("set factors");
    let done = dev
        .init_backend(params)
        .expect("stream")
        .graph_compute(g)
        .map_err(|e| e.to_string());
    let kernels = backplane_webgpu::profile::last_graph_kernels();
    let results = [Q, K, V, CACHE_K, CACHE_V]
        .iter()
        .map(|&t| {
            let mut out = vec![0u8; g[t].nbytes() as usize];
            buf.get_tensor(&g[t], 0, &mut out).expect("get");
            out
        })
        .collect();
    (done, results, kernels)
}

#[test]
fn projections_finishing_their_rows_match_the_separate_kernels_bit_for_bit() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(12 * SLOT).expect("alloc");
    let cases = [
        (DType::Q4_0, 2048, DType::I64, false),
        (DType::Q8_0, 2048, DType::I32, true),
        (DType::Q4_K, 2048, DType::I64, true),
        (DType::Q6_K, 256, DType::I64, false),
        (DType::F16, 2048, DType::I64, false),
        (DType::F32, 256, DType::I32, false),
    ];
    for (wt, k, it, ff) in cases {
        let what = format!("{wt:?} k={k} {it:?} factors {ff}");
        let g = layer(buf.id(), wt, k, it, ff);
        let (ok, fused, fused_kernels) = run(dev.as_ref(), buf.as_ref(), &g, "", 5);
        let (ok_sep, separate, separate_kernels) =
            run(dev.as_ref(), buf.as_ref(), &g, "fuse=off", 5);
        assert!(ok.is_ok() && ok_sep.is_ok(), "{ok:?} {ok_sep:?} ({what})");
        for (name, (f, s)) in ["q", "k", "v", "K cache", "V cache"]
            .iter()
            .zip(fused.iter().zip(&separate))
        {
            assert!(f == s, "{name} differs ({what})");
        }
        // The two ROPEs and the two stores ran in the mat-vecs.
        assert_eq!(separate_kernels - fused_kernels, 4, "kernels ({what})");
        // Cache row 5 holds v as f16; row 0 is untouched.
        let row = (HD * NKV * 2) as usize;
        let stored: Vec<f32> = fused[4][5 * row..6 * row]
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect();
        let want: Vec<f32> = f32s(&fused[2])
            .iter()
            .map(|&v| half::f16::from_f32(v).to_f32())
            .collect();
        assert_eq!(stored, want, "V cache row ({what})");
        assert!(want.iter().any(|&v| v != 0.0), "v is 0 ({what})");
        assert_eq!(&fused[3][0..2], &[0x3c, 0x3c], "K cache row 0 ({what})");
    }
}

#[test]
fn a_bad_cache_index_fails_the_graph_naming_the_store_both_ways() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(12 * SLOT).expect("alloc");
    for it in [DType::I32, DType::I64] {
        let g = layer(buf.id(), DType::Q4_0, 256, it, false);
        for params in ["", "fuse=off"] {
            let (bad, ..) = run(dev.as_ref(), buf.as_ref(), &g, params, CELLS);
            let e = bad.expect_err("index 8 of 8 rows");
            assert!(e.contains("index 8 is out of range"), "{params}: {e}");
        }
    }
}

#[test]
fn a_rope_not_in_place_leaves_the_projection_to_the_separate_kernels() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(13 * SLOT).expect("alloc");
    let mut g = layer(buf.id(), DType::Q4_0, 256, DType::I64, false);
    // q's ROPE writes elsewhere: q keeps its product, so Q's mat-vec runs
    // alone (K and V still finish their rows).
    g[14].offset = 12 * SLOT;
    let (ok, fused, fused_kernels) = run(dev.as_ref(), buf.as_ref(), &g, "", 1);
    let (ok_sep, separate, separate_kernels) = run(dev.as_ref(), buf.as_ref(), &g, "fuse=off", 1);
    assert!(ok.is_ok() && ok_sep.is_ok(), "{ok:?} {ok_sep:?}");
    assert_eq!(fused, separate);
    assert_eq!(separate_kernels - fused_kernels, 3, "kernels");
}
