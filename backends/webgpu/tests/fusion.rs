//! The fused ADD → RMS_NORM → MUL kernel against the same graph encoded
//! node by node (`fuse=off`), on the first WebGPU adapter (lavapipe on
//! machines without a GPU; the test says so and passes without one).

use backplane_abi::plugin::{Buffer, Device, Reg};
use backplane_abi::{DType, Op, TensorDesc};
use backplane_webgpu::device::WebGpuReg;

const NE0: i64 = 300;
const ROWS: i64 = 5;
const EPS: f32 = 1e-5;

fn leaf(ne: [i64; 4], offset: u64, buffer: u64) -> TensorDesc {
    let mut d = TensorDesc::new(DType::F32, ne);
    d.buffer = buffer;
    d.offset = offset;
    d
}

fn node(op: Op, ne: [i64; 4], offset: u64, buffer: u64, srcs: &[usize]) -> TensorDesc {
    let mut d = leaf(ne, offset, buffer);
    d.op = op.code();
    for (k, &s) in srcs.iter().enumerate() {
        d.src[k] = s as i32;
    }
    d
}

/// x, b (one row, broadcast), w; s = x + b; n = rms_norm(s); d = n * w;
/// r = d + s (the residual reads the sum again). `mul_over_norm`: d is
/// in place over n, as the allocator places it.
fn graph(buffer: u64, mul_over_norm: bool) -> Vec<TensorDesc> {
    let ne = [NE0, ROWS, 1, 1];
    let slot = 8192;
    let mut n = node(Op::RmsNorm, ne, 4 * slot, buffer, &[3]);
    n.op_params[0] = EPS.to_bits() as i32;
    let d_at = if mul_over_norm { 4 * slot } else { 5 * slot };
    vec![
        leaf(ne, 0, buffer),
        leaf([NE0, 1, 1, 1], slot, buffer),
        leaf([NE0, 1, 1, 1], 2 * slot, buffer),
        node(Op::Add, ne, 3 * slot, buffer, &[0, 1]),
        n,
        node(Op::Mul, ne, d_at, buffer, &[4, 2]),
        node(Op::Add, ne, 6 * slot, buffer, &[5, 3]),
    ]
}

/// x (rows of mixed signs), b and w (one row each).
fn inputs() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = (0..NE0 * ROWS)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
        .collect();
    let b: Vec<f32> = (0..NE0).map(|i| (i % 13) as f32 / 5.0 - 1.0).collect();
    let w: Vec<f32> = (0..NE0).map(|i| 0.5 + (i % 7) as f32 / 3.0).collect();
    (x, b, w)
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

/// Runs `g` on a stream made with `params`; returns each node's result
/// (nodes 3.., in order).
fn run(dev: &dyn Device, buf: &dyn Buffer, g: &[TensorDesc], params: &str) -> Vec<Vec<f32>> {
    let (x, b, w) = inputs();
    buf.clear(0).expect("clear");
    for (t, v) in [(0, &x), (1, &b), (2, &w)] {
        buf.set_tensor(&g[t], 0, &bytes(v)).expect("set");
    }
    dev.init_backend(params)
        .expect("stream")
        .graph_compute(g)
        .expect("graph_compute");
    (3..g.len())
        .map(|t| {
            let mut out = vec![0u8; g[t].nbytes() as usize];
            buf.get_tensor(&g[t], 0, &mut out).expect("get");
            floats(&out)
        })
        .collect()
}

/// The same chain on the host, as ggml defines it.
fn reference(x: &[f32], b: &[f32], w: &[f32]) -> Vec<f32> {
    let n0 = NE0 as usize;
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
    let reg = WebGpuReg::new();
    let Some(dev) = reg.devices().into_iter().next() else {
        eprintln!(
            "no WebGPU device here: {}",
            reg.no_device_reason().unwrap_or_default()
        );
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(8 * 8192).expect("alloc");
    for mul_over_norm in [true, false] {
        let g = graph(buf.id(), mul_over_norm);
        let fused = run(dev.as_ref(), buf.as_ref(), &g, "");
        let separate = run(dev.as_ref(), buf.as_ref(), &g, "fuse=off");
        // Every result either path leaves in memory: the sum, the
        // normalised row (when the product does not replace it), the
        // product and the residual that reads the sum again.
        for (k, (f, s)) in fused.iter().zip(&separate).enumerate() {
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(f),
                bits(s),
                "node {} (mul over norm: {mul_over_norm})",
                k + 3
            );
        }
        let (x, b, w) = inputs();
        let want = reference(&x, &b, &w);
        let got = &fused[3];
        for (i, (g, r)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - r).abs() <= 1e-5 * r.abs().max(1.0),
                "element {i}: {g} vs {r}"
            );
        }
    }
}
