//! NORM, RMS_NORM, L2_NORM, SOFT_MAX and ROPE on the CPU backend against
//! the reference kernels.

mod common;

use backplane::{DType, Graph, RopeParams, rope_mode};
use common::*;
use rand::SeedableRng;
use rand::rngs::StdRng;

#[test]
fn norms_match_reference() {
    for (i, ne) in [[37i64, 5, 3, 2], [4096, 20, 1, 1], [1, 3, 1, 1]]
        .into_iter()
        .enumerate()
    {
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &ne).unwrap();
        let n = g.norm(a, 1e-5).unwrap();
        let r = g.rms_norm(a, 1e-6).unwrap();
        let l = g.l2_norm(a, 1e-12).unwrap();
        let run = run(&g, i as u64, &[]);
        assert_close(&g, &run, n, NMSE, "norm");
        assert_close(&g, &run, r, NMSE, "rms_norm");
        assert_close(&g, &run, l, NMSE, "l2_norm");
    }
    // Rows of a permuted view (dense rows, strided dims 1..3).
    let mut g = Graph::new();
    let a = permuted_input(&mut g, "a", DType::F32, [33, 4, 6, 1], [0, 2, 1, 3]);
    let r = g.rms_norm(a, 1e-6).unwrap();
    let run = run(&g, 10, &[]);
    assert_close(&g, &run, r, NMSE, "rms_norm permuted");
}

#[test]
fn soft_max_with_masks_alibi_and_sinks() {
    let mut seed = 20;
    for mask_t in [None, Some(DType::F32), Some(DType::F16)] {
        for max_bias in [0.0, 8.0] {
            for sinks in [false, true] {
                if max_bias > 0.0 && mask_t.is_none() {
                    continue;
                }
                let mut g = Graph::new();
                let a = g.input("a", DType::F32, &[45, 7, 6, 2]).unwrap();
                let m = mask_t.map(|t| g.input("m", t, &[45, 9, 3, 1]).unwrap());
                let s = sinks.then(|| g.input("s", DType::F32, &[6]).unwrap());
                let r = g.soft_max(a, m, s, 0.37, max_bias).unwrap();
                seed += 1;
                let run = run(&g, seed, &[]);
                assert_close(
                    &g,
                    &run,
                    r,
                    NMSE,
                    &format!("soft_max mask {mask_t:?} bias {max_bias} sinks {sinks}"),
                );
            }
        }
    }
    // Large rows with a causal -inf mask, threaded.
    let (n_kv, n_q) = (300i64, 128i64);
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[n_kv, n_q, 4, 1]).unwrap();
    let m = g.input("m", DType::F16, &[n_kv, n_q, 1, 1]).unwrap();
    let r = g.soft_max(a, Some(m), None, 0.125, 0.0).unwrap();
    let mask: Vec<f32> = (0..n_q)
        .flat_map(|q| (0..n_kv).map(move |k| if k <= q + 100 { 0.0 } else { f32::NEG_INFINITY }))
        .collect();
    let run = run(&g, 30, &[(m, Data::F32(mask))]);
    assert_close(&g, &run, r, NMSE, "soft_max causal");
}

fn rope_case(dt: DType, ne: [i64; 4], p: RopeParams, ff: bool, permuted: bool, seed: u64) {
    let mut g = Graph::new();
    let a = if permuted {
        permuted_input(&mut g, "a", dt, [ne[0], ne[2], ne[1], ne[3]], [0, 2, 1, 3])
    } else {
        g.input("a", dt, &ne).unwrap()
    };
    let multi = p.mode & rope_mode::MROPE != 0;
    let n_pos = ne[2] * if multi { 4 } else { 1 };
    let pos = g.input("pos", DType::I32, &[n_pos]).unwrap();
    let f = ff.then(|| g.input("ff", DType::F32, &[ne[0] / 2]).unwrap());
    let r = g.rope(a, pos, f, p).unwrap();
    let positions: Vec<i64> = (0..n_pos).map(|i| (i * 37 + 5) % 200).collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut custom = vec![(pos, Data::Ints(positions))];
    if let Some(f) = f {
        custom.push((
            f,
            Data::F32(uniform(&mut rng, (ne[0] / 2) as usize, 0.5, 2.0)),
        ));
    }
    let run = run(&g, seed, &custom);
    assert_close(
        &g,
        &run,
        r,
        bound_for(dt),
        &format!("rope {dt} mode {} ff {ff} permuted {permuted}", p.mode),
    );
}

#[test]
fn rope_every_mode_matches_reference() {
    let mut seed = 40;
    for dt in [DType::F32, DType::F16] {
        for mode in [
            rope_mode::NORMAL,
            rope_mode::NEOX,
            rope_mode::MROPE,
            rope_mode::IMROPE,
            rope_mode::VISION,
        ] {
            for ff in [false, true] {
                let ne = [64i64, 3, 7, 2];
                let n_dims = if mode == rope_mode::VISION {
                    32
                } else if mode & rope_mode::MROPE != 0 {
                    64
                } else {
                    48
                };
                let mut p = RopeParams::new(n_dims, mode);
                if mode & rope_mode::MROPE != 0 {
                    p.sections = if mode == rope_mode::VISION {
                        [8, 8, 0, 0]
                    } else {
                        [11, 11, 10, 0]
                    };
                }
                seed += 1;
                rope_case(dt, ne, p, ff, false, seed);
                rope_case(dt, ne, p, ff, true, seed + 1000);
            }
        }
    }
}

#[test]
fn rope_yarn_scaling_and_threads() {
    for (i, mode) in [rope_mode::NORMAL, rope_mode::NEOX].into_iter().enumerate() {
        let mut p = RopeParams::new(128, mode);
        p.n_ctx_orig = 4096;
        p.freq_scale = 0.25;
        p.ext_factor = 1.0;
        p.attn_factor = 1.1;
        p.beta_fast = 32.0;
        p.beta_slow = 1.0;
        p.freq_base = 500000.0;
        rope_case(DType::F32, [128, 8, 40, 1], p, false, false, 90 + i as u64);
    }
}
