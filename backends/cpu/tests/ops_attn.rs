//! FLASH_ATTN_EXT on the CPU backend against the reference kernels.
//!
//! The CPU kernel accumulates in f32 and the reference in f64, both on the
//! same dequantized K/V, so one bound fits every K/V type.

mod common;

use backplane::{DType, Graph};
use common::*;

const KV_TYPES: [DType; 8] = DType::ATTENTION_KV_TYPES;

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
    assert_close(
        &g,
        &run,
        r,
        NMSE,
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
