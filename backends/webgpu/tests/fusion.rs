//! The fused ADD → RMS_NORM → MUL kernel (and the quantized copy it leaves
//! for the next MUL_MATs) against the same graph encoded node by node
//! (`fuse=off`), on the first WebGPU adapter (lavapipe on machines without
//! a GPU; the test says so and passes without one).

mod common;

use common::{f32_bytes, f32s, leaf, node, q4_0_pattern};

use backplane_abi::plugin::{Buffer, Device};
use backplane_abi::{DType, GluOp, Op, TensorDesc};

/// Row length: ten 32-value runs.
const NE0: i64 = 320;
/// Rows of the GLU test and of the first fused chain.
const ROWS: i64 = 5;
const EPS: f32 = 1e-5;
/// Rows of the q4_0 weight the product is multiplied by.
const M: i64 = 16;
const SLOT: u64 = 8192;

/// Rows of the fused chain's tests: `ne0` wide (a multiple of 32), `rows`
/// of them.
#[derive(Clone, Copy, Debug)]
struct Rows {
    ne0: i64,
    rows: i64,
}

impl Rows {
    /// Bytes between the graph's tensors: the largest of rows and products.
    fn slot(self) -> u64 {
        ((self.ne0 * self.rows.max(M) * 4) as u64).next_multiple_of(256)
    }

    /// Bytes the graph takes: ten slots, then the weight (f32 at most).
    fn bytes(self) -> u64 {
        10 * self.slot() + (self.ne0 * M * 4) as u64
    }
}

/// x [ne0, rows], b (one row, broadcast), w (one row), a weight [ne0, M]
/// of type `wt`; s = x + b; n = rms_norm(s); d = n * w; two MUL_MATs of the
/// weight by d (as Q and K projections share their input); r = d + s (the
/// residual reads the sum again). `mul_over_norm`: d is in place over n,
/// as the allocator places it.
fn graph(buffer: u64, wt: DType, mul_over_norm: bool, shape: Rows) -> Vec<TensorDesc> {
    let Rows { ne0, rows } = shape;
    let slot = shape.slot();
    let ne = [ne0, rows, 1, 1];
    let mut n = node(Op::RmsNorm, ne, 5 * slot, buffer, &[4]);
    n.op_params[0] = EPS.to_bits() as i32;
    let d_at = if mul_over_norm { 5 * slot } else { 6 * slot };
    let mut wq = TensorDesc::new(wt, [ne0, M, 1, 1]);
    wq.buffer = buffer;
    // After every other slot: an f32 weight may be larger than a slot,
    // and overlapping the sum, the norm or the products would race.
    wq.offset = 10 * slot;
    vec![
        leaf(ne, 0, buffer),
        leaf([ne0, 1, 1, 1], slot, buffer),
        leaf([ne0, 1, 1, 1], 2 * slot, buffer),
        wq,
        node(Op::Add, ne, 4 * slot, buffer, &[0, 1]),
        n,
        node(Op::Mul, ne, d_at, buffer, &[5, 2]),
        node(Op::MulMat, [M, rows, 1, 1], 7 * slot, buffer, &[3, 6]),
        node(Op::MulMat, [M, rows, 1, 1], 8 * slot, buffer, &[3, 6]),
        node(Op::Add, ne, 9 * slot, buffer, &[6, 4]),
    ]
}

/// x (`rows` rows of mixed signs), b and w (one row each).
fn inputs(ne0: i64, rows: i64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = (0..ne0 * rows)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
        .collect();
    let b: Vec<f32> = (0..ne0).map(|i| (i % 13) as f32 / 5.0 - 1.0).collect();
    let w: Vec<f32> = (0..ne0).map(|i| 0.5 + (i % 7) as f32 / 3.0).collect();
    (x, b, w)
}

/// Runs `g` on a stream made with `params`; returns each node's result
/// (nodes 4.., in order).
fn run(dev: &dyn Device, buf: &dyn Buffer, g: &[TensorDesc], params: &str) -> Vec<Vec<f32>> {
    let (x, b, w) = inputs(g[0].ne[0], g[0].ne[1]);
    buf.clear(0).expect("clear");
    for (t, v) in [(0, &x), (1, &b), (2, &w)] {
        buf.set_tensor(&g[t], 0, &f32_bytes(v)).expect("set");
    }
    let weight = if g[3].dtype == DType::Q4_0.code() {
        q4_0_pattern(g[3].nbytes(), 0.02, 0)
    } else {
        f32_bytes(
            &w.iter()
                .map(|v| v - 1.0)
                .cycle()
                .take(g[3].nelements() as usize)
                .collect::<Vec<_>>(),
        )
    };
    buf.set_tensor(&g[3], 0, &weight).expect("set weight");
    dev.init_backend(params)
        .expect("stream")
        .graph_compute(g)
        .expect("graph_compute");
    (4..g.len())
        .map(|t| {
            let mut out = vec![0u8; g[t].nbytes() as usize];
            buf.get_tensor(&g[t], 0, &mut out).expect("get");
            f32s(&out)
        })
        .collect()
}

/// The same chain on the host, as ggml defines it.
fn reference(x: &[f32], b: &[f32], w: &[f32]) -> Vec<f32> {
    let n0 = b.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(n0) {
        let s: Vec<f32> = row.iter().zip(b).map(|(a, b)| a + b).collect();
        let ms = s.iter().map(|v| f64::from(v * v)).sum::<f64>() / n0 as f64;
        let scale = 1.0 / (ms + f64::from(EPS)).sqrt();
        out.extend(
            s.iter()
                .zip(w)
                .zip(&s)
                .map(|((v, w), r)| (f64::from(*v) * scale * f64::from(*w) + f64::from(*r)) as f32),
        );
    }
    out
}

#[test]
fn fused_add_rms_norm_mul_matches_the_separate_kernels_bit_for_bit() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    // A few rows; one decode row of llama 1B (2048); rows longer than the
    // registers hold (read again after the reduction).
    let shapes = [
        Rows {
            ne0: NE0,
            rows: ROWS,
        },
        Rows { ne0: 2048, rows: 1 },
        Rows {
            ne0: 8192 + 320,
            rows: 2,
        },
    ];
    for shape in shapes {
        let buf = dev
            .buffer_type()
            .alloc_buffer(shape.bytes())
            .expect("alloc");
        // q4_0: the fused kernel also quantizes the product for the integer
        // mat-vecs; f32: the MUL_MATs read the float product.
        for wt in [DType::Q4_0, DType::F32] {
            for mul_over_norm in [true, false] {
                let g = graph(buf.id(), wt, mul_over_norm, shape);
                let fused = run(dev.as_ref(), buf.as_ref(), &g, "");
                let separate = run(dev.as_ref(), buf.as_ref(), &g, "fuse=off");
                // Every result either path leaves in memory: the sum, the
                // normalised row (when the product does not replace it), the
                // product, both MUL_MATs and the residual.
                for (k, (f, s)) in fused.iter().zip(&separate).enumerate() {
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert!(
                        bits(f) == bits(s),
                        "node {} ({wt:?} weight, mul over norm: {mul_over_norm}, {shape:?})",
                        k + 4
                    );
                }
                let (x, b, w) = inputs(shape.ne0, shape.rows);
                let want = reference(&x, &b, &w);
                for (i, (g, r)) in fused[5].iter().zip(&want).enumerate() {
                    assert!(
                        (g - r).abs() <= 1e-5 * r.abs().max(1.0),
                        "element {i} ({shape:?}): {g} vs {r}"
                    );
                }
            }
        }
    }
}

/// gate, up [NE0, ROWS]; a weight [NE0, M] of type `wt`; act =
/// swiglu(gate, up); two MUL_MATs of the weight by act.
fn glu_graph(buffer: u64, wt: DType) -> Vec<TensorDesc> {
    let ne = [NE0, ROWS, 1, 1];
    let mut act = node(Op::Glu, ne, 3 * SLOT, buffer, &[0, 1]);
    act.op_params[0] = GluOp::Swiglu.code() as i32;
    let mut wq = TensorDesc::new(wt, [NE0, M, 1, 1]);
    wq.buffer = buffer;
    // After every other slot: an f32 weight (20 KB) is larger than a slot,
    // and overlapping act or the products would race.
    wq.offset = 6 * SLOT;
    vec![
        leaf(ne, 0, buffer),
        leaf(ne, SLOT, buffer),
        wq,
        act,
        node(Op::MulMat, [M, ROWS, 1, 1], 4 * SLOT, buffer, &[2, 3]),
        node(Op::MulMat, [M, ROWS, 1, 1], 5 * SLOT, buffer, &[2, 3]),
    ]
}

#[test]
fn glu_with_the_quantized_copy_matches_the_separate_kernels_bit_for_bit() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(10 * SLOT).expect("alloc");
    for wt in [DType::Q4_0, DType::F32] {
        let g = glu_graph(buf.id(), wt);
        let (x, _, w) = inputs(NE0, ROWS);
        let up: Vec<f32> = x.iter().rev().map(|v| v * 0.5).collect();
        let run_glu = |params: &str| {
            buf.clear(0).expect("clear");
            buf.set_tensor(&g[0], 0, &f32_bytes(&x)).expect("set");
            buf.set_tensor(&g[1], 0, &f32_bytes(&up)).expect("set");
            let weight = if wt == DType::Q4_0 {
                q4_0_pattern(g[2].nbytes(), 0.02, 0)
            } else {
                f32_bytes(
                    &w.iter()
                        .cycle()
                        .take(g[2].nelements() as usize)
                        .copied()
                        .collect::<Vec<_>>(),
                )
            };
            buf.set_tensor(&g[2], 0, &weight).expect("set weight");
            dev.init_backend(params)
                .expect("stream")
                .graph_compute(&g)
                .expect("graph_compute");
            (3..g.len())
                .map(|t| {
                    let mut out = vec![0u8; g[t].nbytes() as usize];
                    buf.get_tensor(&g[t], 0, &mut out).expect("get");
                    out
                })
                .collect::<Vec<_>>()
        };
        let fused = run_glu("");
        let separate = run_glu("fuse=off");
        for (k, (f, s)) in fused.iter().zip(&separate).enumerate() {
            assert!(f == s, "node {} ({wt:?} weight) differs", k + 3);
        }
        // swiglu itself: silu(gate) * up.
        let act = f32s(&fused[0]);
        for (i, (a, (gv, uv))) in act.iter().zip(x.iter().zip(&up)).enumerate() {
            let want = gv / (1.0 + (-gv).exp()) * uv;
            assert!(
                (a - want).abs() <= 1e-5 * want.abs().max(1.0),
                "act {i}: {a} vs {want}"
            );
        }
    }
}

#[test]
fn k_and_v_cache_stores_in_one_dispatch_match_the_separate_kernels() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(6 * SLOT).expect("alloc");
    let id = buf.id();
    // K rows [64, 2], V rows [48, 2] (f32), indices [2] (i64), caches of 8
    // rows (f16); SET_ROWS K then V, as a layer stores them.
    let mut idx = TensorDesc::new(DType::I64, [2, 1, 1, 1]);
    idx.buffer = id;
    idx.offset = 2 * SLOT;
    let store = |width: i64, at: u64, rows: usize| {
        let mut d = TensorDesc::new(DType::F16, [width, 8, 1, 1]);
        d.op = Op::SetRows.code();
        d.buffer = id;
        d.offset = at;
        d.src[0] = rows as i32;
        d.src[1] = 2;
        d
    };
    let g = vec![
        leaf([64, 2, 1, 1], 0, id),
        leaf([48, 2, 1, 1], SLOT, id),
        idx,
        store(64, 3 * SLOT, 0),
        store(48, 4 * SLOT, 1),
    ];
    let run_stores = |params: &str, rows: [i64; 2]| {
        buf.clear(0x3c).expect("clear");
        let k: Vec<f32> = (0..128).map(|i| i as f32 * 0.25 - 9.0).collect();
        let v: Vec<f32> = (0..96).map(|i| 7.0 - i as f32 * 0.5).collect();
        buf.set_tensor(&g[0], 0, &f32_bytes(&k)).expect("set");
        buf.set_tensor(&g[1], 0, &f32_bytes(&v)).expect("set");
        let rows: Vec<u8> = rows.iter().flat_map(|r| r.to_le_bytes()).collect();
        buf.set_tensor(&g[2], 0, &rows).expect("set");
        let done = dev.init_backend(params).expect("stream").graph_compute(&g);
        let caches = [3, 4].map(|t| {
            let mut out = vec![0u8; g[t].nbytes() as usize];
            buf.get_tensor(&g[t], 0, &mut out).expect("get");
            out
        });
        (done, caches)
    };
    let (fused_ok, fused) = run_stores("", [5, 2]);
    let (separate_ok, separate) = run_stores("fuse=off", [5, 2]);
    assert!(fused_ok.is_ok() && separate_ok.is_ok());
    assert!(fused == separate, "caches differ");
    // Row 5 of the K cache holds K row 0 as f16; untouched rows keep 0x3c3c.
    let row5: Vec<f32> = fused[0][5 * 128..6 * 128]
        .chunks_exact(2)
        .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
        .collect();
    assert_eq!(row5[4], -8.0, "K row 0 element 4 = 4 * 0.25 - 9");
    assert_eq!(&fused[1][0..2], &[0x3c, 0x3c]);
    // An index out of range still fails the graph, naming the first store.
    let (bad, _) = run_stores("", [5, 8]);
    let e = bad.expect_err("index 8 of 8 rows").to_string();
    assert!(e.contains("index 8 is out of range"), "{e}");
    // One stream reads the flag of every graph, planned or replayed, good
    // or bad, and a failure does not stick to the next graph.
    let stream = dev.init_backend("").expect("stream");
    let runs = [
        ([5, 2], None),
        ([5, 8], Some(8)),
        ([5, 2], None),
        ([5, 2], None),
    ];
    for (rows, bad) in runs.into_iter().chain([([9, 2], Some(9)), ([1, 2], None)]) {
        let idx: Vec<u8> = rows.iter().flat_map(|r: &i64| r.to_le_bytes()).collect();
        buf.set_tensor(&g[2], 0, &idx).expect("set");
        let done = stream.graph_compute(&g);
        match bad {
            None => assert!(done.is_ok(), "rows {rows:?}: {done:?}"),
            Some(i) => {
                let e = done.expect_err("an index past 8 rows").to_string();
                assert!(e.contains(&format!("index {i} is out of range")), "{e}");
            }
        }
    }
}

/// One decode query of 4 heads (head size 64) over 256 f16 keys of 2 K/V
/// heads; the result reshaped to one row of 256 and multiplied by a q4_0
/// weight [256, M], as a layer's output projection reads its attention.
fn attention_graph(buffer: u64) -> Vec<TensorDesc> {
    const S: u64 = 64 << 10;
    let kv = |at: u64| {
        let mut d = TensorDesc::new(DType::F16, [64, 256, 2, 1]);
        d.buffer = buffer;
        d.offset = at;
        d
    };
    let mut wq = TensorDesc::new(DType::Q4_0, [256, M, 1, 1]);
    wq.buffer = buffer;
    wq.offset = 3 * S;
    let mut fa = node(Op::FlashAttnExt, [64, 4, 1, 1], 4 * S, buffer, &[0, 1, 2]);
    fa.op_params[0] = 0.125f32.to_bits() as i32;
    vec![
        leaf([64, 1, 4, 1], 0, buffer),
        kv(S),
        kv(2 * S),
        wq,
        fa,
        // The reshape reaches a backend as a leaf over the result's bytes.
        leaf([256, 1, 1, 1], 4 * S, buffer),
        node(Op::MulMat, [M, 1, 1, 1], 5 * S, buffer, &[3, 5]),
    ]
}

#[test]
fn attention_with_the_quantized_copy_matches_the_separate_kernels_bit_for_bit() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(6 << 16).expect("alloc");
    let g = attention_graph(buf.id());
    let half_bytes = |n: usize, seed: usize| -> Vec<u8> {
        (0..n)
            .flat_map(|i| {
                let v = ((i * 29 + seed) % 61) as f32 / 20.0 - 1.5;
                half::f16::from_f32(v).to_le_bytes()
            })
            .collect()
    };
    // Returns the attention and the product, and the kernels recorded.
    let run = |params: &str| {
        buf.clear(0).expect("clear");
        let q: Vec<f32> = (0..256)
            .map(|i| ((i * 17 % 23) as f32 - 11.0) / 4.0)
            .collect();
        buf.set_tensor(&g[0], 0, &f32_bytes(&q)).expect("set q");
        buf.set_tensor(&g[1], 0, &half_bytes(64 * 256 * 2, 3))
            .expect("set k");
        buf.set_tensor(&g[2], 0, &half_bytes(64 * 256 * 2, 11))
            .expect("set v");
        let weight = q4_0_pattern(g[3].nbytes(), 0.02, 5);
        buf.set_tensor(&g[3], 0, &weight).expect("set weight");
        dev.init_backend(params)
            .expect("stream")
            .graph_compute(&g)
            .expect("graph_compute");
        let kernels = backplane_webgpu::profile::last_graph_kernels();
        let [att, product] = [4, 6].map(|t| {
            let mut out = vec![0u8; g[t].nbytes() as usize];
            buf.get_tensor(&g[t], 0, &mut out).expect("get");
            out
        });
        (att, product, kernels)
    };
    // The vector kernel alone, then with the keys split in two and the
    // combining pass writing the result.
    let mut kernels = Vec::new();
    for split in ["", "flash_attn_splits=2;"] {
        let (att, product, fused) = run(split);
        let (att_sep, product_sep, separate) = run(&format!("{split}fuse=off"));
        assert!(att == att_sep, "attention differs ({split})");
        assert!(product == product_sep, "product differs ({split})");
        assert!(f32s(&product).iter().any(|&v| v != 0.0), "product is 0");
        // The quantizing kernel is gone when fused.
        assert_eq!(fused + 1, separate, "kernels ({split})");
        kernels.push(fused);
    }
    assert_eq!(
        kernels[1],
        kernels[0] + 1,
        "the split adds its combining pass"
    );
}

/// x [64, 2 heads, 3 tokens]; ROPE (normal or NeoX) -> r; a leaf over r's
/// bytes as rows [128, 3]; i64 indices; an f16 cache [128, 8]; SET_ROWS of
/// the rows into the cache, as a layer stores its keys.
fn rope_store_graph(buffer: u64, mode: i32) -> Vec<TensorDesc> {
    let mut pos = TensorDesc::new(DType::I32, [3, 1, 1, 1]);
    pos.buffer = buffer;
    pos.offset = SLOT;
    let mut idx = TensorDesc::new(DType::I64, [3, 1, 1, 1]);
    idx.buffer = buffer;
    idx.offset = 2 * SLOT;
    let mut cache = TensorDesc::new(DType::F16, [128, 8, 1, 1]);
    cache.buffer = buffer;
    cache.offset = 3 * SLOT;
    let mut rope = node(Op::Rope, [64, 2, 3, 1], 4 * SLOT, buffer, &[0, 1]);
    rope.op_params[1] = 64;
    rope.op_params[2] = mode;
    rope.op_params[5] = 10000f32.to_bits() as i32;
    rope.op_params[6] = 1f32.to_bits() as i32;
    rope.op_params[8] = 1f32.to_bits() as i32;
    let mut store = cache;
    store.op = Op::SetRows.code();
    store.src[0] = 5;
    store.src[1] = 2;
    vec![
        leaf([64, 2, 3, 1], 0, buffer),
        pos,
        idx,
        cache,
        rope,
        leaf([128, 3, 1, 1], 4 * SLOT, buffer),
        store,
    ]
}

#[test]
fn a_rope_storing_its_rows_matches_the_separate_kernels_bit_for_bit() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(6 * SLOT).expect("alloc");
    for mode in [0, backplane_abi::rope_mode::NEOX] {
        let g = rope_store_graph(buf.id(), mode);
        let run = |params: &str, rows: [i64; 3]| {
            buf.clear(0x3c).expect("clear");
            let x: Vec<f32> = (0..384)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 9.0)
                .collect();
            buf.set_tensor(&g[0], 0, &f32_bytes(&x)).expect("set x");
            let pos: Vec<u8> = [7i32, 8, 9].iter().flat_map(|p| p.to_le_bytes()).collect();
            buf.set_tensor(&g[1], 0, &pos).expect("set pos");
            let idx: Vec<u8> = rows.iter().flat_map(|r| r.to_le_bytes()).collect();
            buf.set_tensor(&g[2], 0, &idx).expect("set idx");
            let done = dev.init_backend(params).expect("stream").graph_compute(&g);
            let kernels = backplane_webgpu::profile::last_graph_kernels();
            let [rotated, cache] = [4, 3].map(|t| {
                let mut out = vec![0u8; g[t].nbytes() as usize];
                buf.get_tensor(&g[t], 0, &mut out).expect("get");
                out
            });
            (done, rotated, cache, kernels)
        };
        let (ok, rotated, cache, fused) = run("", [6, 1, 3]);
        let (ok_sep, rotated_sep, cache_sep, separate) = run("fuse=off", [6, 1, 3]);
        assert!(ok.is_ok() && ok_sep.is_ok(), "{ok:?} {ok_sep:?}");
        assert!(rotated == rotated_sep, "rotated rows differ (mode {mode})");
        assert!(cache == cache_sep, "caches differ (mode {mode})");
        assert_eq!(fused + 1, separate, "kernels (mode {mode})");
        // Cache row 6 holds token 0's rotated row as f16; row 0 is untouched.
        let row6: Vec<f32> = cache[6 * 256..7 * 256]
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect();
        let want: Vec<f32> = f32s(&rotated[..512])
            .iter()
            .map(|&v| half::f16::from_f32(v).to_f32())
            .collect();
        assert_eq!(row6, want);
        assert_eq!(&cache[0..2], &[0x3c, 0x3c]);
        // A bad index fails the graph naming the store, both ways.
        for params in ["", "fuse=off"] {
            let (bad, ..) = run(params, [6, 8, 3]);
            let e = bad.expect_err("index 8 of 8 rows").to_string();
            assert!(e.contains("index 8 is out of range"), "{params}: {e}");
        }
    }
}
