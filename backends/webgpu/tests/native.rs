//! The native Vulkan mat-vec (`native=on`) and the emulated native GEMM
//! (`native=emulated`) against the WGSL path (`native=off`) and host
//! references, on the first WebGPU adapter
//! (lavapipe on machines without a GPU). Skips, saying why, when the
//! plugin was built without the `native-vulkan` feature, there is no
//! adapter, or the adapter lacks what the kernel needs.

mod common;

use backplane_abi::plugin::{Buffer, Device};
use backplane_abi::{DType, Op, TensorDesc};
use backplane_webgpu::native::{kernels, pipelines};

/// Bytes between the tensors in the test buffer.
const SLOT: u64 = 1 << 20;

/// The device when the native mat-vec can run on it, else `None` with
/// the reason printed.
fn native_device() -> Option<(
    backplane_webgpu::device::WebGpuReg,
    std::sync::Arc<dyn Device>,
)> {
    if !kernels::built() {
        eprintln!("skipped: {}", kernels::NOT_BUILT);
        return None;
    }
    let (reg, dev) = common::first_device()?;
    let description = dev.description();
    if !description.contains("native=on: mat-vec q4_0/q8_0") {
        eprintln!("skipped: {description}");
        return None;
    }
    Some((reg, dev))
}

/// Weights of type `t` (f16, q4_0 or q8_0), `n` of them: a fixed pattern
/// with both signs (scales and quants for the block types).
fn weights(t: DType, n: usize) -> Vec<u8> {
    if t == DType::F16 {
        return (0..n)
            .flat_map(|i| {
                let v = ((i * 53 % 97) as f32 - 48.0) / 64.0;
                half::f16::from_f32(v).to_bits().to_le_bytes()
            })
            .collect();
    }
    let blocks = n / 32;
    let mut out = Vec::new();
    for blk in 0..blocks {
        let scale = 0.01 + (blk % 7) as f32 * 0.003;
        out.extend(half::f16::from_f32(scale).to_bits().to_le_bytes());
        match t {
            DType::Q4_0 => out.extend((0..16).map(|i| ((blk * 7 + i * 13) % 256) as u8)),
            _ => out.extend((0..32).map(|i| ((blk * 11 + i * 29) % 256) as u8)),
        }
    }
    out
}

/// The weights as f32, ggml's dequantization.
fn dequantize(t: DType, bytes: &[u8]) -> Vec<f32> {
    if t == DType::F16 {
        return bytes
            .chunks_exact(2)
            .map(|h| half::f16::from_bits(u16::from_le_bytes([h[0], h[1]])).to_f32())
            .collect();
    }
    let block = if t == DType::Q4_0 { 18 } else { 34 };
    let mut out = Vec::new();
    for b in bytes.chunks_exact(block) {
        let d = half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
        if t == DType::Q4_0 {
            let q = &b[2..18];
            out.extend(q.iter().map(|&x| d * (f32::from(x & 15) - 8.0)));
            out.extend(q.iter().map(|&x| d * (f32::from(x >> 4) - 8.0)));
        } else {
            out.extend(b[2..34].iter().map(|&x| d * f32::from(x as i8)));
        }
    }
    out
}

fn node(t: DType, ne: [i64; 4], offset: u64, buffer: u64) -> TensorDesc {
    let mut d = TensorDesc::new(t, ne);
    d.buffer = buffer;
    d.offset = offset;
    d
}

/// One MUL_MAT case: weights [k, m, a2, a3] of type `t`, activations
/// [k, n, b2, b3] (transposed in memory when `transposed`).
struct Case {
    t: DType,
    k: i64,
    m: i64,
    n: i64,
    a_batch: [i64; 2],
    b_batch: [i64; 2],
    transposed: bool,
}

impl Case {
    /// Weights [k, m] of type `t` times activations [k, n], no batches.
    fn plain(t: DType, k: i64, m: i64, n: i64) -> Case {
        Case {
            t,
            k,
            m,
            n,
            a_batch: [1, 1],
            b_batch: [1, 1],
            transposed: false,
        }
    }

    /// The case in words, for failure messages.
    fn label(&self) -> String {
        format!(
            "{} k={} m={} n={} batches {:?}/{:?} transposed={}",
            self.t.name(),
            self.k,
            self.m,
            self.n,
            self.a_batch,
            self.b_batch,
            self.transposed
        )
    }

    fn graph(&self, buffer: u64) -> Vec<TensorDesc> {
        let a = node(
            self.t,
            [self.k, self.m, self.a_batch[0], self.a_batch[1]],
            0,
            buffer,
        );
        let mut b = node(
            DType::F32,
            [self.k, self.n, self.b_batch[0], self.b_batch[1]],
            SLOT + 16,
            buffer,
        );
        if self.transposed {
            // Stored [n, k]: element (k, n) at n + k * n_cols.
            b.nb[0] = 4 * self.n as u64;
            b.nb[1] = 4;
        }
        let mut d = node(
            DType::F32,
            [self.m, self.n, self.b_batch[0], self.b_batch[1]],
            2 * SLOT,
            buffer,
        );
        d.op = Op::MulMat.code();
        d.src[0] = 0;
        d.src[1] = 1;
        vec![a, b, d]
    }

    /// Activations in memory order, the reference result (f64 sums of
    /// the f32 activations) and the result with the activations quantized
    /// as ggml's q8_1 (runs of 32 along K: d = max|x| / 127, q = x / d
    /// rounded to even), which the integer mat-vecs compute.
    fn data(&self, a: &[f32]) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let (k, m, n) = (self.k as usize, self.m as usize, self.n as usize);
        let batches = (self.b_batch[0] * self.b_batch[1]) as usize;
        let x: Vec<f32> = (0..k * n * batches)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        let at = |kk: usize, nn: usize, batch: usize| {
            let base = batch * k * n;
            if self.transposed {
                x[base + nn + kk * n]
            } else {
                x[base + kk + nn * k]
            }
        };
        let (r2, r3) = (
            (self.b_batch[0] / self.a_batch[0]) as usize,
            (self.b_batch[1] / self.a_batch[1]) as usize,
        );
        let mut out = Vec::with_capacity(m * n * batches);
        let mut out_q8 = Vec::with_capacity(m * n * batches);
        for i3 in 0..self.b_batch[1] as usize {
            for i2 in 0..self.b_batch[0] as usize {
                let batch = i2 + i3 * self.b_batch[0] as usize;
                let wbatch = i2 / r2 + (i3 / r3) * self.a_batch[0] as usize;
                for nn in 0..n {
                    let col: Vec<f32> = (0..k).map(|kk| at(kk, nn, batch)).collect();
                    let col_q8 = q8_1(&col);
                    for mm in 0..m {
                        let row = &a[(wbatch * m + mm) * k..][..k];
                        let dot = |xs: &[f32]| -> f64 {
                            row.iter()
                                .zip(xs)
                                .map(|(w, x)| f64::from(*w) * f64::from(*x))
                                .sum()
                        };
                        out.push(dot(&col) as f32);
                        out_q8.push(dot(&col_q8) as f32);
                    }
                }
            }
        }
        (x, out, out_q8)
    }
}

/// `x` (a multiple of 32 long) quantized as ggml's q8_1 and back: each
/// run of 32 becomes d * q with d = max|x| / 127 and q = x * (1 / d)
/// rounded to even, in f32 as the WGSL quantizing kernel computes it.
fn q8_1(x: &[f32]) -> Vec<f32> {
    x.chunks(32)
        .flat_map(|run| {
            let d = run.iter().fold(0.0f32, |a, v| a.max(v.abs())) / 127.0;
            let id = if d > 0.0 { 1.0 / d } else { 0.0 };
            run.iter()
                .map(move |v| d * (v * id).round_ties_even())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// dst of `case` run with stream parameters `params`, the f64 reference
/// and the q8_1 reference (see [`Case::data`]); the weights in `wbuf`
/// (at offset 0) when given, else in `buf` with the rest.
fn run(
    dev: &dyn Device,
    buf: &dyn Buffer,
    wbuf: Option<&dyn Buffer>,
    case: &Case,
    params: &str,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut g = case.graph(buf.id());
    if let Some(wb) = wbuf {
        g[0].buffer = wb.id();
    }
    let w = weights(case.t, g[0].nelements() as usize);
    let (x, want, want_q8) = case.data(&dequantize(case.t, &w));
    buf.clear(0x7f).expect("clear");
    wbuf.unwrap_or(buf)
        .set_tensor(&g[0], 0, &w)
        .expect("set weights");
    let xb: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    // The activations' bytes in memory order, from the view's first byte.
    let mut flat = g[1];
    flat.ne = [x.len() as i64, 1, 1, 1];
    flat.nb = [
        4,
        4 * x.len() as u64,
        4 * x.len() as u64,
        4 * x.len() as u64,
    ];
    buf.set_tensor(&flat, 0, &xb).expect("set activations");
    dev.init_backend(params)
        .expect("stream")
        .graph_compute(&g)
        .expect("graph_compute");
    let mut out = vec![0u8; g[2].nbytes() as usize];
    buf.get_tensor(&g[2], 0, &mut out).expect("get");
    (common::f32s(&out), want, want_q8)
}

/// Normalized mean squared error of `got` against `want`.
fn nmse(got: &[f32], want: &[f32]) -> f64 {
    let err: f64 = got
        .iter()
        .zip(want)
        .map(|(g, w)| (f64::from(*g) - f64::from(*w)).powi(2))
        .sum();
    let norm: f64 = want.iter().map(|w| f64::from(*w).powi(2)).sum();
    err / norm.max(1e-30)
}

/// Asserts that the native mat-vec `kernel` ran and that its result is
/// the q8_1 reference up to the order of the f32 sums, and within
/// MUL_MAT's bound of the f32 one.
fn check_native_mat_vec(label: &str, kernel: &str, native: &[f32], want: &[f32], want_q8: &[f32]) {
    assert!(
        pipelines::built_in_process(kernel),
        "{label}: native=on did not run {kernel}"
    );
    let native_err = nmse(native, want_q8);
    assert!(
        native_err < 1e-10,
        "{label}: native NMSE {native_err} against q8_1"
    );
    let f32_err = nmse(native, want);
    assert!(f32_err < 5e-4, "{label}: native NMSE {f32_err} against f32");
}

#[test]
fn native_mat_vec_matches_the_wgsl_path_and_the_reference() {
    let Some((_reg, dev)) = native_device() else {
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(3 * SLOT).expect("alloc");
    let mut cases = Vec::new();
    for t in [DType::Q4_0, DType::Q8_0] {
        for n in [1, 2, 3, 8] {
            cases.push(Case::plain(t, 256, 67, n));
        }
        // Broadcast over dims 2 and 3, and activations transposed in memory.
        cases.push(Case {
            t,
            k: 96,
            m: 33,
            n: 5,
            a_batch: [2, 1],
            b_batch: [4, 3],
            transposed: true,
        });
    }
    for case in &cases {
        let label = case.label();
        let (native, want, want_q8) = run(dev.as_ref(), buf.as_ref(), None, case, "native=on");
        let (wgsl, _, _) = run(dev.as_ref(), buf.as_ref(), None, case, "native=off");
        // Both kernels quantize the activations to 8 bits first (ggml's
        // q8_1) and multiply integers: up to the order of the f32 sums,
        // the q8_1 reference, and within MUL_MAT's bound of the f32 one.
        let kernel = format!("mul_mat_vec_{}_n{}_r2w128u32", case.t.name(), case.n);
        check_native_mat_vec(&label, &kernel, &native, &want, &want_q8);
        let wgsl_err = nmse(&wgsl, &want_q8);
        assert!(
            wgsl_err < 1e-10,
            "{label}: WGSL NMSE {wgsl_err} against q8_1"
        );
    }
}

/// q4_0 weights stored split (the device's extra buffer type, offered
/// with `split_weights` on, as `cargo xtask test` sets it): the native
/// mat-vec reads them in place (`W_SPLIT`) and gives the bits of the
/// WGSL split mat-vec, up to the order of the f32 sums; the emulated
/// native GEMM reads them in place too.
#[test]
fn native_kernels_read_split_q4_0_weights() {
    let Some((_reg, dev)) = native_device() else {
        return;
    };
    let Some(split) = dev.extra_buffer_types().into_iter().next() else {
        eprintln!(
            "skipped: split_weights off (BACKPLANE_WEBGPU_SPLIT_WEIGHTS=on offers the layout)"
        );
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(3 * SLOT).expect("alloc");
    let wbuf = split.alloc_buffer(SLOT).expect("alloc split");
    for (n, k, m) in [(1, 256, 67), (3, 96, 33), (8, 1024, 5)] {
        let case = Case::plain(DType::Q4_0, k, m, n);
        let label = format!("split {}", case.label());
        let w = Some(wbuf.as_ref());
        let (native, want, want_q8) = run(dev.as_ref(), buf.as_ref(), w, &case, "native=on");
        let kernel = format!("mul_mat_vec_q4_0_split_n{n}_r2w128u32");
        check_native_mat_vec(&label, &kernel, &native, &want, &want_q8);
        let (wgsl, _, _) = run(dev.as_ref(), buf.as_ref(), w, &case, "native=off");
        let apart = nmse(&native, &wgsl);
        assert!(apart < 1e-10, "{label}: native and WGSL split NMSE {apart}");
    }
    // The emulated GEMM reads them in place too (`W_SPLIT`; the default
    // configuration, whose steps of 32 make every q4_0 K whole: its
    // aligned form).
    let case = Case::plain(DType::Q4_0, 96, 67, 70);
    let label = format!("split {}", case.label());
    let w = Some(wbuf.as_ref());
    let (native, want, _) = run(dev.as_ref(), buf.as_ref(), w, &case, "native=emulated");
    let kernel = "mul_mat_coopmat_q4_0_split_128x128k32_aligned_emulated";
    assert!(
        pipelines::built_in_process(kernel),
        "{label}: native=emulated did not run {kernel}"
    );
    let err = nmse(&native, &want);
    assert!(err < 1e-5, "{label}: native NMSE {err}");
}

#[test]
fn emulated_native_gemm_matches_the_reference_and_the_wgsl_path() {
    let Some((_reg, dev)) = native_device() else {
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(3 * SLOT).expect("alloc");
    let mut cases = Vec::new();
    for t in [DType::F16, DType::Q4_0, DType::Q8_0] {
        // Partial tiles in M and N, K over several 32-steps.
        cases.push(Case::plain(t, 96, 67, 70));
        cases.push(Case {
            t,
            k: 64,
            m: 130,
            n: 64,
            a_batch: [2, 1],
            b_batch: [4, 3],
            transposed: true,
        });
    }
    // f16 rows of 70 halves: K ends inside a step, and rows are not
    // 16-byte aligned (the weights are read half by half).
    cases.push(Case::plain(DType::F16, 70, 129, 65));
    for case in &cases {
        let label = case.label();
        // K split over workgroups too (its partial sums added by the WGSL
        // kernel), where K allows two steps of 64.
        let (split, want, _) = run(
            dev.as_ref(),
            buf.as_ref(),
            None,
            case,
            "native=emulated;matmul_splitk=2",
        );
        let split_err = nmse(&split, &want);
        assert!(split_err < 1e-5, "{label}: native split K NMSE {split_err}");
        let (native, want, _) = run(dev.as_ref(), buf.as_ref(), None, case, "native=emulated");
        // Whole 32-steps with dense activation rows take the variant with
        // unchecked loads; the others (K of 70, transposed activations)
        // the checked one.
        let aligned = case.k % 32 == 0 && !case.transposed;
        let kernel = format!(
            "mul_mat_coopmat_{}_128x128k32{}_emulated",
            case.t.name(),
            if aligned { "_aligned" } else { "" }
        );
        assert!(
            pipelines::built_in_process(&kernel),
            "{label}: native=emulated did not run {kernel}"
        );
        let (wgsl, _, _) = run(dev.as_ref(), buf.as_ref(), None, case, "native=off");
        // Both round the activations (and the native kernel the
        // dequantized weights) to f16 on the way in: relative errors of
        // 2^-11 per value, far inside MUL_MAT's bound of 5e-4; a weight or
        // activation staged in the wrong place would give NMSE near 1.
        let native_err = nmse(&native, &want);
        assert!(native_err < 1e-5, "{label}: native NMSE {native_err}");
        assert!(
            nmse(&wgsl, &want) < 5e-4,
            "{label}: WGSL NMSE {}",
            nmse(&wgsl, &want)
        );
    }
}
