//! MUL_MAT with weights in the repacked layout (the `cpu_repack` buffer
//! type) against the same product from ggml's layout, on every path: one
//! column (mat-vec), a few columns (tiles), many columns (packed GEMM),
//! broadcast batches; and refusals of every other use of repacked bytes.

use backplane::{DType, Graph, HostTensors, TensorId};
use backplane_cpu::repack::{REPACK_TYPES, Repack};
use backplane_cpu::{CpuBackend, CpuConfig, CpuError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn cpu() -> CpuBackend {
    CpuBackend::new(CpuConfig { n_threads: Some(2) })
}

/// Runs `g` with `a` filled from `weights` (ggml layout), `b` random;
/// with `repack`, `a`'s bytes are repacked first and flagged as such.
fn run(g: &Graph, a: TensorId, b: TensorId, weights: &[f32], repack: bool) -> HostTensors {
    let mut rng = StdRng::seed_from_u64(5);
    let mut host = HostTensors::new(g);
    host.set_f32(g, a, weights).unwrap();
    let n = g.desc(b).nelements() as usize;
    let x: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    host.set_f32(g, b, &x).unwrap();
    let mut flags = vec![false; g.tensors().len()];
    if repack {
        let r = Repack::for_tensor(g.desc(a)).unwrap();
        let ggml = host.bytes(a).to_vec();
        let mut packed = vec![0u8; ggml.len()];
        r.write(&mut packed, 0, &ggml);
        host.set_bytes(g, a, &packed).unwrap();
        flags[a.0] = true;
    }
    let ptrs = host.pointers();
    // SAFETY: HostTensors covers every tensor of the graph; `a` holds the
    // repacked layout when flagged.
    unsafe { cpu().compute_with_layouts(g.tensors(), &ptrs, &flags) }.unwrap();
    host
}

fn nmse(got: &[f32], want: &[f32]) -> f64 {
    let err: f64 = got
        .iter()
        .zip(want)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
        .sum();
    let norm: f64 = want.iter().map(|&y| (y as f64).powi(2)).sum();
    err / norm.max(1e-30)
}

fn check(ta: DType, k: i64, m: i64, n: i64, a_batch: [i64; 2], b_batch: [i64; 2]) {
    if backplane_cpu::simd::kernels().repacked(ta).is_none() {
        eprintln!("no repacked {ta} kernel on this CPU; skipped");
        return;
    }
    let mut g = Graph::new();
    let a = g.weight("a", ta, &[k, m, a_batch[0], a_batch[1]]).unwrap();
    let b = g
        .input("b", DType::F32, &[k, n, b_batch[0], b_batch[1]])
        .unwrap();
    let c = g.mul_mat(a, b).unwrap();
    let mut rng = StdRng::seed_from_u64(k as u64 * 31 + n as u64);
    let w: Vec<f32> = (0..g.desc(a).nelements())
        .map(|_| rng.random_range(-1.0f32..1.0))
        .collect();
    let plain = run(&g, a, b, &w, false).get_f32(&g, c);
    let packed = run(&g, a, b, &w, true).get_f32(&g, c);
    let e = nmse(&packed, &plain);
    // Same integer dot products and scales; only the float summation
    // order may differ between the tile shapes.
    assert!(
        e <= 1e-12,
        "{ta} k={k} m={m} n={n}: repacked vs ggml layout nmse {e:e}"
    );
    // q4_0 and q8_0 share their ggml-layout kernels' summation order
    // there; the K-quant ggml-layout kernels sum in another order.
    if (n == 1 || n >= 16) && ta.block_size() == 32 {
        assert_eq!(
            packed, plain,
            "{ta} n={n}: the mat-vec and GEMM paths sum in the same order"
        );
    }
}

#[test]
fn repacked_mul_mat_equals_ggml_layout_on_every_path() {
    for ta in REPACK_TYPES {
        let k = |n: i64| {
            if ta.block_size() == 256 {
                256 * ((n + 31) / 32)
            } else {
                n
            }
        };
        for n in [1, 2, 3, 4, 5, 9, 16, 40] {
            check(ta, k(96), 24, n, [1, 1], [1, 1]);
        }
        check(ta, k(2048), 64, 1, [1, 1], [1, 1]);
        check(ta, k(1088), 136, 33, [1, 1], [1, 1]);
    }
}

#[test]
fn repacked_weights_broadcast_over_batches() {
    for ta in REPACK_TYPES {
        let k = if ta.block_size() == 256 { 256 } else { 64 };
        check(ta, k, 16, 1, [2, 1], [4, 3]);
        check(ta, k, 16, 20, [1, 3], [2, 3]);
    }
}

#[test]
fn get_rows_reads_repacked_rows_back() {
    for ta in REPACK_TYPES {
        let k = if ta.block_size() == 256 { 512 } else { 64 };
        let mut g = Graph::new();
        let a = g.weight("a", ta, &[k, 16, 1, 1]).unwrap();
        let idx = g.input("i", DType::I32, &[3, 1, 1, 1]).unwrap();
        let rows = g.get_rows(a, idx).unwrap();
        let mut rng = StdRng::seed_from_u64(3);
        let w: Vec<f32> = (0..16 * k)
            .map(|_| rng.random_range(-1.0f32..1.0))
            .collect();
        let mut out = Vec::new();
        for repack in [false, true] {
            let mut host = HostTensors::new(&g);
            host.set_f32(&g, a, &w).unwrap();
            let ids: Vec<u8> = [13i32, 0, 7].iter().flat_map(|i| i.to_le_bytes()).collect();
            host.set_bytes(&g, idx, &ids).unwrap();
            let mut flags = vec![false; g.tensors().len()];
            if repack {
                let r = Repack::for_tensor(g.desc(a)).unwrap();
                let ggml = host.bytes(a).to_vec();
                let mut packed = vec![0u8; ggml.len()];
                r.write(&mut packed, 0, &ggml);
                host.set_bytes(&g, a, &packed).unwrap();
                flags[a.0] = true;
            }
            let ptrs = host.pointers();
            // SAFETY: HostTensors covers every tensor; `a` is repacked when flagged.
            unsafe { cpu().compute_with_layouts(g.tensors(), &ptrs, &flags) }.unwrap();
            out.push(host.get_f32(&g, rows));
        }
        assert_eq!(out[0], out[1], "{ta}");
    }
}

#[test]
fn other_uses_of_repacked_bytes_are_refused_naming_the_source() {
    let mut g = Graph::new();
    let a = g.weight("a", DType::Q4_0, &[64, 8, 1, 1]).unwrap();
    let b = g.input("b", DType::F32, &[64, 8, 1, 1]).unwrap();
    let rows = g.cpy(a, b).unwrap();
    let mut host = HostTensors::new(&g);
    let mut flags = vec![false; g.tensors().len()];
    flags[a.0] = true;
    let ptrs = host.pointers();
    // SAFETY: HostTensors covers every tensor; the refusal comes before
    // any byte is read.
    let err = unsafe { cpu().compute_with_layouts(g.tensors(), &ptrs, &flags) }.unwrap_err();
    assert!(err.to_string().contains("source 0"), "{err}");
    assert!(
        matches!(err, CpuError::Unsupported { node, .. } if node == rows.0),
        "{err}"
    );
    assert!(err.to_string().contains("repacked"), "{err}");
}
