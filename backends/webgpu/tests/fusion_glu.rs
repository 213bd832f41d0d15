//! A layer's gate and up mat-vecs with their GLU in one kernel
//! (`mul_mat_vec_glu`) against the same graph encoded node by node
//! (`fuse=off`), on the first WebGPU adapter (lavapipe on machines without
//! a GPU; the test says so and passes without one).

mod common;

use common::{f32_bytes, f32s, leaf, node};

use backplane_abi::plugin::{Buffer, Device};
use backplane_abi::{DType, GluOp, Op, TensorDesc};

/// Bytes between the graph's tensors (the largest weight fits).
const SLOT: u64 = 1 << 20;

/// x [k]; gate and up weights [k, m] of type `wt`, then the down weight
/// [m, 64]; gate = MUL_MAT(wg, x), up = MUL_MAT(wu, x), act = GLU(gate,
/// up) (`swap`: the up product is the GLU's first source), down =
/// MUL_MAT(wd, act).
fn graph(buffer: u64, wt: DType, shape: (i64, i64), swap: bool, op: GluOp) -> Vec<TensorDesc> {
    graph_at(buffer, wt, shape, swap, op, 6 * SLOT)
}

/// [`graph`] with act at byte `act_at` (0: over x, which dies with the
/// up product, as the allocator may place it).
fn graph_at(
    buffer: u64,
    wt: DType,
    (k, m): (i64, i64),
    swap: bool,
    op: GluOp,
    act_at: u64,
) -> Vec<TensorDesc> {
    let weight = |ne: [i64; 4], at: u64| {
        // A down weight of m rows too short for wt's blocks is f32.
        let t = if ne[0] % wt.block_size() as i64 == 0 {
            wt
        } else {
            DType::F32
        };
        let mut w = TensorDesc::new(t, ne);
        w.buffer = buffer;
        w.offset = at;
        w
    };
    let (first, second) = if swap { (5, 4) } else { (4, 5) };
    let mut act = node(Op::Glu, [m, 1, 1, 1], act_at, buffer, &[first, second]);
    act.op_params[0] = op.code() as i32;
    act.op_params[2] = 0.25f32.to_bits() as i32;
    act.op_params[3] = 3.0f32.to_bits() as i32;
    vec![
        leaf([k, 1, 1, 1], 0, buffer),
        weight([k, m, 1, 1], SLOT),
        weight([k, m, 1, 1], 2 * SLOT),
        weight([m, 64, 1, 1], 3 * SLOT),
        node(Op::MulMat, [m, 1, 1, 1], 4 * SLOT, buffer, &[1, 0]),
        node(Op::MulMat, [m, 1, 1, 1], 5 * SLOT, buffer, &[2, 0]),
        act,
        node(Op::MulMat, [64, 1, 1, 1], 7 * SLOT, buffer, &[3, 6]),
    ]
}

/// Values of mixed signs, a pattern per `seed`.
fn values(n: usize, seed: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 37 + seed * 11) % 101) as f32 - 50.0) * scale)
        .collect()
}

/// `values` as a tensor of type `t`, quantized by the project's quantizers.
fn weight_bytes(t: &TensorDesc, seed: usize) -> Vec<u8> {
    let dtype = DType::from_code(t.dtype).expect("type");
    let v = values(t.nelements() as usize, seed, 0.002);
    let mut out = vec![0u8; t.nbytes() as usize];
    backplane_quant::quantize_row(dtype, &v, &mut out).expect("quantize");
    out
}

/// The buffer of `bufs` holding tensor `t`.
fn holder<'a>(bufs: &[&'a dyn Buffer], t: &TensorDesc) -> &'a dyn Buffer {
    *bufs.iter().find(|b| b.id() == t.buffer).expect("buffer")
}

/// Runs `g` (its tensors in `bufs`) on a stream made with `params`: every
/// node's bytes (gate, up, act, down) and the kernels recorded.
fn run(
    dev: &dyn Device,
    bufs: &[&dyn Buffer],
    g: &[TensorDesc],
    params: &str,
) -> (Vec<Vec<u8>>, u64) {
    for b in bufs {
        b.clear(0).expect("clear");
    }
    let x = values(g[0].nelements() as usize, 3, 0.02);
    holder(bufs, &g[0])
        .set_tensor(&g[0], 0, &f32_bytes(&x))
        .expect("set x");
    for (t, seed) in [(1, 1), (2, 2), (3, 5)] {
        holder(bufs, &g[t])
            .set_tensor(&g[t], 0, &weight_bytes(&g[t], seed))
            .expect("set weight");
    }
    dev.init_backend(params)
        .expect("stream")
        .graph_compute(g)
        .expect("graph_compute");
    let kernels = backplane_webgpu::profile::last_graph_kernels();
    let results = (4..g.len())
        .map(|t| {
            let mut out = vec![0u8; g[t].nbytes() as usize];
            holder(bufs, &g[t])
                .get_tensor(&g[t], 0, &mut out)
                .expect("get");
            out
        })
        .collect();
    (results, kernels)
}

/// Runs `g` fused and with `fuse=off`, checks that every node has the same
/// bits both ways, and returns the fused results and the kernels fusion
/// saved.
fn both_ways(
    dev: &dyn Device,
    bufs: &[&dyn Buffer],
    g: &[TensorDesc],
    what: &str,
) -> (Vec<Vec<u8>>, u64) {
    let (fused, kernels) = run(dev, bufs, g, "");
    let (separate, separate_kernels) = run(dev, bufs, g, "fuse=off");
    for (k, (f, s)) in fused.iter().zip(&separate).enumerate() {
        assert!(f == s, "node {} differs ({what})", k + 4);
    }
    (fused, separate_kernels - kernels)
}

#[test]
fn gate_up_and_glu_in_one_kernel_match_the_separate_kernels_bit_for_bit() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(8 * SLOT).expect("alloc");
    // The decode shapes of the 1b model's weight types (k = 2048), a short
    // row, and a q4_K row long enough for several passes per invocation.
    let cases = [
        (DType::Q4_0, (2048, 256)),
        (DType::Q8_0, (2048, 96)),
        (DType::Q4_K, (2048, 256)),
        (DType::Q6_K, (2048, 256)),
        (DType::F16, (2048, 64)),
        (DType::Q4_0, (64, 32)),
        (DType::Q4_K, (8192, 32)),
    ];
    for (wt, shape) in cases {
        for swap in [false, true] {
            let g = graph(buf.id(), wt, shape, swap, GluOp::Swiglu);
            let what = format!("{wt:?} {shape:?}, swapped {swap}");
            let (fused, saved) = both_ways(dev.as_ref(), &[buf.as_ref()], &g, &what);
            assert!(
                f32s(&fused[3]).iter().any(|&v| v != 0.0),
                "down is 0 ({what})"
            );
            // One kernel for gate, up and the GLU, which also quantizes act
            // for an integer down product (a kernel of its own with
            // fuse=off).
            let integer_down = [DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K]
                .iter()
                .any(|t| t.code() == g[3].dtype);
            assert_eq!(saved, 2 + u64::from(integer_down), "kernels ({what})");
            // act as ggml defines it, from the products.
            let (gate, up) = if swap {
                (&fused[1], &fused[0])
            } else {
                (&fused[0], &fused[1])
            };
            for (i, ((a, x), u)) in f32s(&fused[2])
                .iter()
                .zip(f32s(gate))
                .zip(f32s(up))
                .enumerate()
            {
                let want = x / (1.0 + (-x).exp()) * u;
                assert!(
                    (a - want).abs() <= 1e-5 * want.abs().max(1e-3),
                    "act {i}: {a} vs {want} ({what})"
                );
            }
        }
    }
}

#[test]
fn every_glu_function_fuses_and_matches() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(8 * SLOT).expect("alloc");
    for op in [
        GluOp::Reglu,
        GluOp::Geglu,
        GluOp::Swiglu,
        GluOp::SwigluOai,
        GluOp::GegluErf,
        GluOp::GegluQuick,
    ] {
        let g = graph(buf.id(), DType::Q4_0, (256, 64), false, op);
        let (_, saved) = both_ways(dev.as_ref(), &[buf.as_ref()], &g, &format!("{op:?}"));
        assert_eq!(saved, 3, "{op:?} kernels");
    }
}

#[test]
fn products_of_other_shapes_are_left_to_the_separate_kernels() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(8 * SLOT).expect("alloc");
    // Rows not a multiple of 32; f32 weights (not an integer or half
    // layout); two columns.
    let mut two_columns = graph(buf.id(), DType::Q4_0, (256, 64), false, GluOp::Swiglu);
    two_columns[0].ne[1] = 2;
    two_columns[0].nb = TensorDesc::new(DType::F32, [256, 2, 1, 1]).nb;
    for t in [4, 5, 6] {
        two_columns[t].ne[1] = 2;
        two_columns[t].nb = TensorDesc::new(DType::F32, [64, 2, 1, 1]).nb;
    }
    two_columns[7].ne[1] = 2;
    two_columns[7].nb = TensorDesc::new(DType::F32, [64, 2, 1, 1]).nb;
    let cases = [
        (
            "48 rows",
            graph(buf.id(), DType::Q4_0, (256, 48), false, GluOp::Swiglu),
        ),
        (
            "f32 weights",
            graph(buf.id(), DType::F32, (256, 64), false, GluOp::Swiglu),
        ),
        ("two columns", two_columns),
    ];
    for (what, g) in cases {
        let (_, saved) = both_ways(dev.as_ref(), &[buf.as_ref()], &g, what);
        // At most the GLU's quantized copy is fused.
        assert!(
            saved <= 1,
            "{what}: fused although the kernel does not take it"
        );
    }
}

#[test]
fn act_over_the_activations_fuses_only_when_the_kernel_reads_their_copy() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(8 * SLOT).expect("alloc");
    // q4_0 reads x's quantized copy, made before the fused kernel runs:
    // fused. f16 reads x itself, which act overwrites: node by node.
    for (wt, saved) in [(DType::Q4_0, 3), (DType::F16, 0)] {
        let g = graph_at(buf.id(), wt, (2048, 256), false, GluOp::Swiglu, 0);
        let (_, got) = both_ways(dev.as_ref(), &[buf.as_ref()], &g, &format!("{wt:?}"));
        assert_eq!(got, saved, "{wt:?} kernels");
    }
}

/// q4_0 and q4_K gate and up weights stored split (the device's extra
/// buffer type, offered with `split_weights` on, as `cargo xtask test`
/// sets it): fused and read in place, with the bits of the same graph node
/// by node and of the weights in ggml's layout.
#[test]
fn split_weights_fuse_with_the_bits_of_ggmls_layout() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let Some(split) = dev.extra_buffer_types().into_iter().next() else {
        eprintln!(
            "skipped: split_weights off (BACKPLANE_WEBGPU_SPLIT_WEIGHTS=on offers the layout)"
        );
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(8 * SLOT).expect("alloc");
    let wbuf = split.alloc_buffer(2 * SLOT).expect("alloc split");
    let bufs = [buf.as_ref(), wbuf.as_ref()];
    let cases = [
        (DType::Q4_0, (2048, 256)),
        (DType::Q4_K, (2048, 256)),
        (DType::Q4_0, (64, 32)),
    ];
    for (wt, shape) in cases {
        let plain = graph(buf.id(), wt, shape, false, GluOp::Swiglu);
        let mut g = plain.clone();
        for (t, at) in [(1, 0), (2, SLOT)] {
            g[t].buffer = wbuf.id();
            g[t].offset = at;
        }
        let what = format!("split {wt:?} {shape:?}");
        let (fused, saved) = both_ways(dev.as_ref(), &bufs, &g, &what);
        assert_eq!(saved, 3, "kernels ({what})");
        let (ggml, _) = run(dev.as_ref(), &[buf.as_ref()], &plain, "");
        assert!(fused == ggml, "{what}: not the bits of ggml's layout");
    }
}
