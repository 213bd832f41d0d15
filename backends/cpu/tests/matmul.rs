//! MUL_MAT and MUL_MAT_ID on the CPU backend against a naive f64 product of
//! the dequantized weights and the stored activations.
//!
//! Error bounds, as normalized mean squared error `sum (y - r)^2 / sum r^2`:
//! * f32 weights: [`NMSE_F32`], only f32 summation order differs;
//! * f16 / bf16 weights: the activations are rounded to f16 / bf16 first (as
//!   ggml does; with many columns they stay f32), a relative error of up to
//!   2^-11 / 2^-8 per value: [`NMSE_F16`], [`NMSE_BF16`];
//! * block-quantized weights: the activations are quantized to q8_0 / q8_1 /
//!   q8_K (8 bits per value with a per-block scale, a relative error of about
//!   1/254 per value): [`NMSE_QUANT`].

use std::sync::OnceLock;

use backplane::{DType, Graph, HostTensors, TensorId};
use backplane_cpu::simd::{self, MAT_TYPES};
use backplane_cpu::{CpuBackend, CpuConfig, CpuError};
use backplane_quant::{dequantize_row, quantize_row, vec_dot_type};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const NMSE_F32: f64 = 1e-10;
const NMSE_F16: f64 = 1e-6;
const NMSE_BF16: f64 = 5e-5;
const NMSE_QUANT: f64 = 5e-4;

fn cpu() -> &'static CpuBackend {
    static CPU: OnceLock<CpuBackend> = OnceLock::new();
    CPU.get_or_init(|| CpuBackend::new(CpuConfig { n_threads: Some(2) }))
}

fn bound(t: DType) -> f64 {
    match t {
        DType::F32 => NMSE_F32,
        DType::F16 => NMSE_F16,
        DType::BF16 => NMSE_BF16,
        _ => NMSE_QUANT,
    }
}

/// A row length that is not a multiple of 256 where the type allows it.
fn k_for(t: DType) -> i64 {
    match t.block_size() {
        1 => 93,
        32 => 96,
        _ => 512,
    }
}

fn uniform(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

fn nmse(y: &[f32], r: &[f64]) -> f64 {
    assert_eq!(y.len(), r.len());
    let err: f64 = y.iter().zip(r).map(|(&y, &r)| (y as f64 - r).powi(2)).sum();
    let norm: f64 = r.iter().map(|r| r * r).sum();
    err / norm.max(1e-30)
}

/// Fills every leaf with random values and runs the graph.
fn run(g: &Graph, seed: u64, leaves: &[TensorId]) -> Result<HostTensors, CpuError> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut host = HostTensors::new(g);
    for &t in leaves {
        let n = g.desc(t).nelements() as usize;
        host.set_f32(g, t, &uniform(&mut rng, n)).expect("set_f32");
    }
    let ptrs = host.pointers();
    // SAFETY: HostTensors covers every tensor of the graph.
    unsafe { cpu().compute(g.tensors(), &ptrs)? };
    Ok(host)
}

/// Naive `a^T b` with ggml broadcasting, in f64, from logical values.
fn reference(a: &[f32], an: [i64; 4], b: &[f32], bn: [i64; 4]) -> Vec<f64> {
    let [k, m, a2, a3] = an.map(|v| v as usize);
    let [_, n, b2, b3] = bn.map(|v| v as usize);
    let mut out = vec![0.0f64; m * n * b2 * b3];
    for i3 in 0..b3 {
        for i2 in 0..b2 {
            let (j2, j3) = (i2 / (b2 / a2), i3 / (b3 / a3));
            for i1 in 0..n {
                let brow = &b[((i3 * b2 + i2) * n + i1) * k..][..k];
                for i0 in 0..m {
                    let arow = &a[((j3 * a2 + j2) * m + i0) * k..][..k];
                    let s: f64 = arow
                        .iter()
                        .zip(brow)
                        .map(|(&x, &y)| x as f64 * y as f64)
                        .sum();
                    out[((i3 * b2 + i2) * n + i1) * m + i0] = s;
                }
            }
        }
    }
    out
}

/// Checks MUL_MAT of `ta` [k, m, a2, a3] x `tb` [k, n, b2, b3].
fn check(
    ta: DType,
    tb: DType,
    m: i64,
    n: i64,
    (a2, a3): (i64, i64),
    (b2, b3): (i64, i64),
    seed: u64,
) {
    let k = k_for(ta);
    let mut g = Graph::new();
    let a = g.weight("a", ta, &[k, m, a2, a3]).unwrap();
    let b = g.input("b", tb, &[k, n, b2, b3]).unwrap();
    let c = g.mul_mat(a, b).unwrap();
    let host = run(&g, seed, &[a, b]).unwrap();
    let r = reference(&host.get_f32(&g, a), g.ne(a), &host.get_f32(&g, b), g.ne(b));
    let e = nmse(&host.get_f32(&g, c), &r);
    assert!(
        e <= bound(ta),
        "{ta} x {tb} m={m} n={n} k={k}: nmse {e:e} > {:e}",
        bound(ta)
    );
}

#[test]
fn every_type_matches_reference_for_several_column_counts() {
    for (i, &ta) in MAT_TYPES.iter().enumerate() {
        for n in [1, 2, 7, 33] {
            check(
                ta,
                DType::F32,
                19,
                n,
                (1, 1),
                (1, 1),
                i as u64 * 10 + n as u64,
            );
        }
    }
}

#[test]
fn broadcasts_over_dims_2_and_3() {
    for ta in [DType::F32, DType::F16, DType::Q4_0, DType::Q4_K] {
        check(ta, DType::F32, 9, 3, (2, 1), (4, 3), 7);
        check(ta, DType::F32, 9, 1, (1, 3), (2, 3), 8);
    }
}

#[test]
fn f16_and_bf16_activations() {
    for ta in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::Q8_0,
        DType::Q5_1,
        DType::Q6_K,
    ] {
        check(ta, DType::F16, 13, 5, (1, 1), (2, 1), 11);
        check(ta, DType::BF16, 13, 1, (1, 1), (1, 1), 12);
    }
}

#[test]
fn packed_gemm_paths_match_reference_with_edges_and_batches() {
    // Enough columns for the packed GEMM (float weights, q4_0, q8_0, q4_K), row
    // counts that leave partial row groups, K with a tail for f32, and
    // broadcast batches and f16 activations.
    for ta in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::Q4_0,
        DType::Q8_0,
        DType::Q4_K,
    ] {
        check(ta, DType::F32, 37, 50, (2, 1), (4, 3), 21);
        check(ta, DType::F16, 21, 17, (1, 1), (1, 2), 22);
    }
}

#[test]
fn large_output_uses_every_panel_and_edge_tile() {
    // More columns than a tile and a K longer than one panel.
    for ta in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
    ] {
        let k = if ta.block_size() == 256 {
            4608
        } else {
            1190 + ta.block_size() as i64 * 2
        };
        let k = k / ta.block_size() as i64 * ta.block_size() as i64;
        let mut g = Graph::new();
        let a = g.weight("a", ta, &[k, 70, 1, 1]).unwrap();
        let b = g.input("b", DType::F32, &[k, 67, 1, 1]).unwrap();
        let c = g.mul_mat(a, b).unwrap();
        let host = run(&g, 5, &[a, b]).unwrap();
        let r = reference(&host.get_f32(&g, a), g.ne(a), &host.get_f32(&g, b), g.ne(b));
        let e = nmse(&host.get_f32(&g, c), &r);
        assert!(e <= bound(ta), "{ta} k={k}: nmse {e:e}");
    }
}

/// MUL_MAT with `b` given as a strided view; `make` builds the view.
fn check_view(ta: DType, stored: [i64; 4], make: impl Fn(&mut Graph, TensorId) -> TensorId) {
    let mut g = Graph::new();
    let k = k_for(ta);
    let stored = stored.map(|v| if v == 0 { k } else { v });
    let bs = g.input("b", DType::F32, &stored).unwrap();
    let b = make(&mut g, bs);
    let bn = g.ne(b);
    let a = g.weight("a", ta, &[k, 6, 1, 1]).unwrap();
    let c = g.mul_mat(a, b).unwrap();
    let host = run(&g, 3, &[a, bs]).unwrap();
    let r = reference(&host.get_f32(&g, a), g.ne(a), &host.get_f32(&g, b), bn);
    let e = nmse(&host.get_f32(&g, c), &r);
    assert!(e <= bound(ta), "{ta} view {bn:?}: nmse {e:e}");
}

#[test]
fn transposed_and_permuted_activations() {
    for ta in [DType::F32, DType::F16, DType::Q8_0, DType::Q4_K] {
        // Stored [n, k], used as [k, n]: every element strided.
        check_view(ta, [5, 0, 1, 1], |g, b| g.transpose(b).unwrap());
        // Stored [k, b2, n, 1], used as [k, n, b2, 1]: rows strided.
        check_view(ta, [0, 3, 4, 1], |g, b| g.permute(b, [0, 2, 1, 3]).unwrap());
    }
}

/// MUL_MAT_ID with `e_b` activation rows per token.
fn check_id(ta: DType, e_b: i64) {
    let (k, m, n_exp, n_used, n_tok) = (k_for(ta), 11, 4, 2, 5);
    let mut g = Graph::new();
    let a = g.weight("experts", ta, &[k, m, n_exp, 1]).unwrap();
    let b = g.input("b", DType::F32, &[k, e_b, n_tok, 1]).unwrap();
    let ids = g.input("ids", DType::I32, &[n_used, n_tok, 1, 1]).unwrap();
    let c = g.mul_mat_id(a, b, ids).unwrap();
    let mut rng = StdRng::seed_from_u64(17);
    let mut host = HostTensors::new(&g);
    host.set_f32(&g, a, &uniform(&mut rng, g.desc(a).nelements() as usize))
        .unwrap();
    host.set_f32(&g, b, &uniform(&mut rng, g.desc(b).nelements() as usize))
        .unwrap();
    // Expert 3 stays unused; expert 1 is picked by most tokens.
    let id_vals: Vec<i32> = (0..n_used * n_tok)
        .map(|i| [1, 0, 1, 2][i as usize % 4])
        .collect();
    host.set_i32(&g, ids, &id_vals).unwrap();
    let ptrs = host.pointers();
    // SAFETY: HostTensors covers every tensor of the graph.
    unsafe { cpu().compute(g.tensors(), &ptrs).unwrap() };
    let (av, bv, out) = (
        host.get_f32(&g, a),
        host.get_f32(&g, b),
        host.get_f32(&g, c),
    );
    let (k, m) = (k as usize, m as usize);
    let mut r = vec![0.0f64; out.len()];
    for t in 0..n_tok as usize {
        for slot in 0..n_used as usize {
            let e = id_vals[t * n_used as usize + slot] as usize;
            let brow = &bv[(t * e_b as usize + slot % e_b as usize) * k..][..k];
            for i in 0..m {
                let arow = &av[(e * m + i) * k..][..k];
                r[(t * n_used as usize + slot) * m + i] = arow
                    .iter()
                    .zip(brow)
                    .map(|(&x, &y)| x as f64 * y as f64)
                    .sum();
            }
        }
    }
    let e = nmse(&out, &r);
    assert!(e <= bound(ta), "mul_mat_id {ta} e_b={e_b}: nmse {e:e}");
}

#[test]
fn mul_mat_id_shared_and_per_slot_activations() {
    for ta in [
        DType::F32,
        DType::F16,
        DType::Q4_0,
        DType::Q8_0,
        DType::Q4_K,
        DType::Q6_K,
    ] {
        check_id(ta, 1);
        check_id(ta, 2);
    }
}

#[test]
fn mul_mat_id_out_of_range_expert_is_an_error() {
    let mut g = Graph::new();
    let a = g.weight("experts", DType::F32, &[8, 3, 2, 1]).unwrap();
    let b = g.input("b", DType::F32, &[8, 1, 2, 1]).unwrap();
    let ids = g.input("ids", DType::I32, &[1, 2, 1, 1]).unwrap();
    g.mul_mat_id(a, b, ids).unwrap();
    let mut host = HostTensors::new(&g);
    host.set_i32(&g, ids, &[0, 2]).unwrap();
    let ptrs = host.pointers();
    // SAFETY: HostTensors covers every tensor of the graph.
    let r = unsafe { cpu().compute(g.tensors(), &ptrs) };
    assert!(matches!(r, Err(CpuError::BadInput { .. })), "{r:?}");
}

#[test]
fn unsupported_shapes_are_refused_with_a_reason() {
    let mut g = Graph::new();
    let a = g.weight("a", DType::Q8_K, &[256, 4, 1, 1]).unwrap();
    let b = g.input("b", DType::F32, &[256, 2, 1, 1]).unwrap();
    let mut d = *g.desc(b);
    d.op = backplane::Op::MulMat.code();
    d.src[0] = a.0 as i32;
    d.src[1] = b.0 as i32;
    d.ne = [4, 2, 1, 1];
    let graph = [*g.desc(a), *g.desc(b), d];
    let why = cpu().supports(&graph, 2).unwrap_err();
    assert!(why.contains("q8_K"), "{why}");
}

/// Random weight and activation rows of `n` rows each for type `ta`, as bytes.
fn rows(ta: DType, k: usize, n: usize, rng: &mut StdRng) -> (Vec<u8>, Vec<u8>, usize, usize) {
    let vt = vec_dot_type(ta);
    let (ra, rb) = (ta.row_size(k).unwrap(), vt.row_size(k).unwrap());
    let mut a = vec![0u8; ra * n];
    let mut b = vec![0u8; rb * n];
    for r in 0..n {
        quantize_row(ta, &uniform(rng, k), &mut a[r * ra..][..ra]).unwrap();
        quantize_row(vt, &uniform(rng, k), &mut b[r * rb..][..rb]).unwrap();
    }
    (a, b, ra, rb)
}

#[test]
fn simd_tiles_match_scalar_reference_dots() {
    let kern = simd::kernels();
    let mut rng = StdRng::seed_from_u64(99);
    for ta in MAT_TYPES {
        let fast = kern.mat(ta).unwrap();
        let slow = simd::scalar::kernel(ta).unwrap();
        let k = match ta.block_size() {
            1 => 263,
            32 => 320,
            _ => 768,
        };
        let rmax = fast.mr.max(fast.mr_vec);
        let (a, b, ra, rb) = rows(ta, k, rmax.max(fast.nr), &mut rng);
        let vt = vec_dot_type(ta);
        // Magnitude scale of each dot product for the tolerance.
        let deq = |t: DType, x: &[u8]| {
            let mut v = vec![0.0f32; k];
            dequantize_row(t, x, &mut v).unwrap();
            v
        };
        for m in 1..=rmax {
            let nmax = if m <= fast.mr { fast.nr } else { 1 };
            for n in 1..=nmax {
                let bp: Vec<*const u8> = (0..n).map(|j| b[j * rb..].as_ptr()).collect();
                let mut got = vec![0.0f32; m * n];
                let mut want = vec![0.0f32; m * n];
                let gp: Vec<*mut f32> = (0..n).map(|j| got[j * m..].as_mut_ptr()).collect();
                let wp: Vec<*mut f32> = (0..n).map(|j| want[j * m..].as_mut_ptr()).collect();
                // SAFETY: the rows cover k values; outputs cover m floats each.
                unsafe {
                    (fast.tile)(k, a.as_ptr(), ra, m, &bp, &gp, false);
                    for r in 0..m {
                        (slow.tile)(
                            k,
                            a[r * ra..].as_ptr(),
                            ra,
                            1,
                            &bp,
                            &wp.iter().map(|p| p.add(r)).collect::<Vec<_>>(),
                            false,
                        );
                    }
                }
                for j in 0..n {
                    let y = deq(vt, &b[j * rb..][..rb]);
                    for r in 0..m {
                        let x = deq(ta, &a[r * ra..][..ra]);
                        let scale: f64 = x
                            .iter()
                            .zip(&y)
                            .map(|(&p, &q)| (p as f64 * q as f64).abs())
                            .sum();
                        let (g, w) = (got[j * m + r], want[j * m + r]);
                        assert!(
                            ((g - w) as f64).abs() <= 1e-5 * scale,
                            "{ta} ({}) tile {m}x{n} at ({r}, {j}): {g} vs reference {w} (scale {scale})",
                            fast.isa.name()
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn tiles_accumulate_when_asked() {
    let kern = simd::kernels().mat(DType::Q4_0).unwrap();
    let mut rng = StdRng::seed_from_u64(4);
    let (a, b, ra, rb) = rows(DType::Q4_0, 64, 2, &mut rng);
    let _ = rb;
    let mut once = [0.0f32];
    let mut c = [1.5f32];
    // SAFETY: rows cover 64 values, outputs one float each.
    unsafe {
        (kern.tile)(
            64,
            a.as_ptr(),
            ra,
            1,
            &[b.as_ptr()],
            &[once.as_mut_ptr()],
            false,
        );
        (kern.tile)(
            64,
            a.as_ptr(),
            ra,
            1,
            &[b.as_ptr()],
            &[c.as_mut_ptr()],
            true,
        );
    }
    let once = once[0];
    assert!((c[0] - (once + 1.5)).abs() <= 1e-5 * once.abs().max(1.0));
}

#[test]
fn simd_activation_conversion_matches_reference_within_rounding() {
    let mut rng = StdRng::seed_from_u64(8);
    let mut x = uniform(&mut rng, 256);
    x[5] = 0.0;
    x[32..64].fill(0.0); // an all-zero block
    for vt in [
        DType::Q8_0,
        DType::Q8_1,
        DType::Q8_K,
        DType::F16,
        DType::BF16,
    ] {
        let n = vt.row_size(256).unwrap();
        let (mut fast, mut slow) = (vec![0u8; n], vec![0u8; n]);
        assert!(simd::convert_row(vt, &x, &mut fast));
        quantize_row(vt, &x, &mut slow).unwrap();
        let (mut yf, mut ys) = (vec![0.0f32; 256], vec![0.0f32; 256]);
        dequantize_row(vt, &fast, &mut yf).unwrap();
        dequantize_row(vt, &slow, &mut ys).unwrap();
        // Ties may round the other way: at most one quantization step apart.
        for (i, (a, b)) in yf.iter().zip(&ys).enumerate() {
            assert!(
                (a - b).abs() <= 1.0 / 127.0 + 1e-6,
                "{vt} value {i}: {a} vs {b}"
            );
        }
    }
    assert!(!simd::convert_row(DType::Q8_0, &x[..31], &mut [0u8; 34]));
}

#[test]
fn packed_gemm_panels_match_scalar_reference_dots() {
    let kern = simd::kernels();
    let mut rng = StdRng::seed_from_u64(7);
    for ta in MAT_TYPES {
        let Some(g) = kern.mat(ta).unwrap().gemm else {
            continue;
        };
        // One K panel with a tail (f32), rows that leave a partial group.
        let k = match ta.block_size() {
            1 => 263,
            32 => 320,
            _ => 768,
        };
        let (m, n) = (g.mr + 5, g.nr);
        let ra = ta.row_size(k).unwrap();
        let rb = g.vt.row_size(k).unwrap();
        let mut a = vec![0u8; ra * m];
        let mut bf = vec![0.0f32; k * n];
        let mut b = vec![0u8; rb * n];
        for r in 0..m {
            quantize_row(ta, &uniform(&mut rng, k), &mut a[r * ra..][..ra]).unwrap();
        }
        for j in 0..n {
            let x = uniform(&mut rng, k);
            quantize_row(g.vt, &x, &mut b[j * rb..][..rb]).unwrap();
            dequantize_row(g.vt, &b[j * rb..][..rb], &mut bf[j * k..][..k]).unwrap();
        }
        let nblk = k / g.vt.block_size();
        let mut scales = vec![0.0f32; 2 * nblk * n];
        if g.b_scales {
            for j in 0..n {
                simd::block_scales(&b[j * rb..][..rb], &mut scales[2 * nblk * j..][..2 * nblk]);
            }
        }
        // Activations packed for kernels that want them so (f32 columns).
        let mut b_pack = vec![0.0f32; k * n];
        if g.b_packed {
            let cols: Vec<*const f32> = (0..n).map(|j| b[j * rb..].as_ptr().cast()).collect();
            // SAFETY: every column holds k f32 values, b_pack k * n floats.
            unsafe { simd::pack_columns(&cols, 0, k, b_pack.as_mut_ptr()) };
        }
        let groups = m.div_ceil(g.mr);
        let mut packed = vec![0u8; groups * k * g.group_bytes];
        let mut got = vec![0.0f32; m * n];
        // SAFETY: `a` holds m rows of k elements, `packed` every group.
        unsafe { (g.pack)(a.as_ptr(), ra, m, 0, k, packed.as_mut_ptr()) };
        for gi in 0..groups {
            let rows = g.mr.min(m - gi * g.mr);
            let bp: Vec<*const u8> = (0..n)
                .map(|j| {
                    if g.b_packed {
                        b_pack.as_ptr().cast()
                    } else {
                        b[j * rb..].as_ptr()
                    }
                })
                .collect();
            let sp: Vec<*const f32> = (0..n).map(|j| scales[2 * nblk * j..].as_ptr()).collect();
            let cp: Vec<*mut f32> = (0..n)
                .map(|j| got[j * m + gi * g.mr..].as_mut_ptr())
                .collect();
            // SAFETY: the group holds k elements, the columns k values and
            // their scale pairs, the outputs `rows` floats each.
            unsafe {
                (g.panel)(
                    k,
                    packed[gi * k * g.group_bytes..].as_ptr(),
                    &bp,
                    &sp,
                    &cp,
                    rows,
                    false,
                )
            };
        }
        let mut x = vec![0.0f32; k];
        for r in 0..m {
            dequantize_row(ta, &a[r * ra..][..ra], &mut x).unwrap();
            for j in 0..n {
                let y = &bf[j * k..][..k];
                let want: f64 = x.iter().zip(y).map(|(&p, &q)| p as f64 * q as f64).sum();
                let scale: f64 = x
                    .iter()
                    .zip(y)
                    .map(|(&p, &q)| (p as f64 * q as f64).abs())
                    .sum();
                let got = got[j * m + r] as f64;
                assert!(
                    (got - want).abs() <= 1e-5 * scale,
                    "{ta} packed panel at ({r}, {j}): {got} vs {want} (scale {scale})"
                );
            }
        }
    }
}
