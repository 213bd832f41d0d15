//! FLASH_ATTN_EXT on the CPU backend against the reference kernels.
//!
//! The CPU kernel accumulates in f32 and the reference in f64, both on the
//! same dequantized K/V, so one bound fits every K/V type.

mod common;

use backplane::{DType, Graph};
use common::*;

const KV_TYPES: [DType; 8] = DType::ATTENTION_KV_TYPES;

/// Bound for f16 K/V with fewer than 64 queries, where the kernel follows
/// ggml's CPU kernel: Q rounded to f16 and V·softmax summed in f16 (about
/// 2^-11 relative per rounding) against the reference's f64 sums.
const F16_ACCUMULATOR_NMSE: f64 = 5e-6;

#[allow(clippy::too_many_arguments)]
fn attn_case(
    kv: DType,
    d: i64,
    n_q: i64,
    n_kv: i64,
    heads: (i64, i64),
    mask: bool,
    sinks: bool,
    bias: f32,
    softcap: f32,
    permuted_q: bool,
    seed: u64,
) {
    let (h, h_kv) = heads;
    let mut g = Graph::new();
    let q = if permuted_q {
        permuted_input(&mut g, "q", DType::F32, [d, h, n_q, 1], [0, 2, 1, 3])
    } else {
        g.input("q", DType::F32, &[d, n_q, h, 1]).unwrap()
    };
    let k = g.input("k", kv, &[d, n_kv, h_kv, 1]).unwrap();
    let v = g.input("v", kv, &[d, n_kv, h_kv, 1]).unwrap();
    let m = mask.then(|| g.input("m", DType::F16, &[n_kv, n_q + 3, 1, 1]).unwrap());
    let s = sinks.then(|| g.input("s", DType::F32, &[h]).unwrap());
    let r = g
        .flash_attn_ext(q, k, v, m, s, 1.0 / (d as f32).sqrt(), bias, softcap)
        .unwrap();
    let mut custom = Vec::new();
    if let Some(m) = m {
        // Causal with an offset, plus a random-ish bias.
        let vals: Vec<f32> = (0..n_q + 3)
            .flat_map(|i| {
                (0..n_kv).map(move |j| {
                    if j > i + n_kv - n_q {
                        f32::NEG_INFINITY
                    } else {
                        ((i * 7 + j * 3) % 5) as f32 * -0.1
                    }
                })
            })
            .collect();
        custom.push((m, Data::F32(vals)));
    }
    let run = run(&g, seed, &custom);
    let bound = if kv == DType::F16 && n_q < 64 {
        F16_ACCUMULATOR_NMSE
    } else {
        NMSE
    };
    assert_close(
        &g,
        &run,
        r,
        bound,
        &format!(
            "flash_attn {kv} d {d} n_q {n_q} n_kv {n_kv} heads {heads:?} mask {mask} sinks {sinks} bias {bias} softcap {softcap}"
        ),
    );
}

#[test]
fn flash_attn_every_kv_type() {
    for (i, kv) in KV_TYPES.into_iter().enumerate() {
        attn_case(
            kv,
            64,
            5,
            40,
            (4, 2),
            true,
            false,
            0.0,
            0.0,
            false,
            i as u64,
        );
    }
}

#[test]
fn flash_attn_mask_sinks_softcap_alibi() {
    let mut seed = 100;
    for mask in [false, true] {
        for sinks in [false, true] {
            for softcap in [0.0, 20.0] {
                seed += 1;
                attn_case(
                    DType::F16,
                    32,
                    7,
                    33,
                    (4, 4),
                    mask,
                    sinks,
                    0.0,
                    softcap,
                    false,
                    seed,
                );
            }
        }
    }
    attn_case(
        DType::F32,
        32,
        7,
        33,
        (8, 2),
        true,
        true,
        8.0,
        0.0,
        true,
        120,
    );
    attn_case(
        DType::Q8_0,
        64,
        1,
        100,
        (6, 3),
        true,
        true,
        0.0,
        0.0,
        false,
        121,
    );
}

#[test]
fn flash_attn_threaded_prefill() {
    attn_case(
        DType::F16,
        64,
        70,
        96,
        (4, 1),
        true,
        false,
        0.0,
        0.0,
        true,
        200,
    );
    attn_case(
        DType::F32,
        64,
        70,
        96,
        (4, 4),
        true,
        true,
        0.0,
        0.0,
        false,
        201,
    );
}

/// ggml's CPU kernel for one query row with f16 K/V and fewer than 64
/// queries, written out plainly: Q rounded to f16, keys one at a time, the
/// V·softmax sum rounded to f16 after every rescale and every added value.
fn ggml_f16_attention_row(q: &[f32], keys: &[f32], vals: &[f32], scale: f32) -> Vec<f32> {
    let round = |x: f32| half::f16::from_f32(x).to_f32();
    let d = q.len();
    let q16: Vec<f32> = q.iter().map(|&x| round(x)).collect();
    let mut acc = vec![0f32; d];
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0f32);
    for (key, val) in keys.chunks_exact(d).zip(vals.chunks_exact(d)) {
        let s = q16.iter().zip(key).map(|(a, b)| a * b).sum::<f32>() * scale;
        let (ms, vs) = if s > max {
            let ms = (max - s).exp();
            max = s;
            acc.iter_mut().for_each(|a| *a = round(*a * ms));
            (ms, 1.0)
        } else {
            (1.0, (s - max).exp())
        };
        for (a, &x) in acc.iter_mut().zip(val) {
            *a = round(x.mul_add(vs, *a));
        }
        sum = sum * ms + vs;
    }
    acc.iter().map(|a| a / sum).collect()
}

#[test]
fn flash_attn_f16_kv_with_few_queries_accumulates_in_f16_like_ggml() {
    let (d, n_q, n_kv, h, h_kv) = (64usize, 5usize, 40usize, 4usize, 2usize);
    let mut g = Graph::new();
    let q = g
        .input("q", DType::F32, &[d as i64, n_q as i64, h as i64, 1])
        .unwrap();
    let k = g
        .input("k", DType::F16, &[d as i64, n_kv as i64, h_kv as i64, 1])
        .unwrap();
    let v = g
        .input("v", DType::F16, &[d as i64, n_kv as i64, h_kv as i64, 1])
        .unwrap();
    let scale = 1.0 / (d as f32).sqrt();
    let r = g
        .flash_attn_ext(q, k, v, None, None, scale, 0.0, 0.0)
        .unwrap();
    let run = run(&g, 11, &[]);
    let (qs, ks, vs) = (
        run.cpu.get_f32(&g, q),
        run.cpu.get_f32(&g, k),
        run.cpu.get_f32(&g, v),
    );
    // dst is [d, h, n_q]: query iq1 of head ih at (ih + h * iq1) * d.
    let mut want = vec![0f32; d * h * n_q];
    for ih in 0..h {
        let kv = ih / (h / h_kv) * n_kv * d..(ih / (h / h_kv) + 1) * n_kv * d;
        for iq1 in 0..n_q {
            let qrow = &qs[(iq1 + n_q * ih) * d..(iq1 + n_q * ih + 1) * d];
            let row = ggml_f16_attention_row(qrow, &ks[kv.clone()], &vs[kv.clone()], scale);
            want[(ih + h * iq1) * d..(ih + h * iq1 + 1) * d].copy_from_slice(&row);
        }
    }
    let got = run.cpu.get_f32(&g, r);
    let to_ggml = nmse(&got, &want);
    let to_f64 = nmse(&got, &run.reference.get_f32(&g, r));
    // Only the order of the score sums differs from the plain loop above.
    assert!(to_ggml < 1e-9, "NMSE {to_ggml:e} to ggml's f16 kernel");
    assert!(
        to_f64 > 100.0 * to_ggml,
        "the f16 sums must be visible: NMSE {to_f64:e} to the f64 reference, {to_ggml:e} to ggml's"
    );
}
