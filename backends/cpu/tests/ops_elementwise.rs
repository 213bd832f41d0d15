//! Binary, unary, GLU, SCALE, CLAMP and FILL on the CPU backend against the
//! reference kernels.

mod common;

use backplane::{DType, GluOp, Graph, UnaryOp};
use common::*;

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

#[test]
fn binary_ops_match_reference_with_broadcast_and_type_mixes() {
    let shapes: [([i64; 4], [i64; 4]); 5] = [
        ([37, 5, 3, 2], [37, 5, 3, 2]),
        ([37, 5, 3, 2], [37, 1, 3, 1]),
        ([40, 6, 2, 1], [8, 3, 1, 1]),
        ([33, 4, 1, 1], [1, 4, 1, 1]),
        ([300, 130, 1, 1], [300, 1, 1, 1]),
    ];
    let mut seed = 0;
    for (ta, tb) in [
        (DType::F32, DType::F32),
        (DType::F16, DType::F16),
        (DType::BF16, DType::BF16),
        (DType::F16, DType::F32),
        (DType::F32, DType::F16),
        (DType::BF16, DType::F32),
    ] {
        for (sa, sb) in shapes {
            for op in 0..4 {
                let mut g = Graph::new();
                let a = g.input("a", ta, &sa).unwrap();
                let b = g.input("b", tb, &sb).unwrap();
                let r = match op {
                    0 => g.add(a, b),
                    1 => g.sub(a, b),
                    2 => g.mul(a, b),
                    _ => g.div(a, b),
                }
                .unwrap();
                seed += 1;
                let run = run(&g, seed, &[]);
                assert_close(
                    &g,
                    &run,
                    r,
                    bound_for(ta),
                    &format!("op {op} {ta}/{tb} {sa:?}/{sb:?}"),
                );
            }
        }
    }
}

#[test]
fn binary_ops_in_place_and_on_permuted_sources() {
    for (i, ta) in FLOATS.into_iter().enumerate() {
        // In place: the result aliases a.
        let mut g = Graph::new();
        let a = g.input("a", ta, &[45, 7, 3, 1]).unwrap();
        let b = g.input("b", DType::F32, &[45, 7, 1, 1]).unwrap();
        let r = g.add_inplace(a, b).unwrap();
        let run1 = run(&g, 100 + i as u64, &[]);
        assert_close(&g, &run1, r, bound_for(ta), "add_inplace");
        let mut g = Graph::new();
        let a = g.input("a", ta, &[300, 120, 1, 1]).unwrap();
        let b = g.input("b", ta, &[300, 1, 1, 1]).unwrap();
        let r = g.mul_inplace(a, b).unwrap();
        let run2 = run(&g, 110 + i as u64, &[]);
        assert_close(&g, &run2, r, bound_for(ta), "mul_inplace (threaded)");

        // Permuted src0: a transposed matrix plus a broadcast row.
        let mut g = Graph::new();
        let a = permuted_input(&mut g, "a", ta, [19, 23, 2, 1], [1, 0, 2, 3]);
        let b = g.input("b", ta, &[23, 1, 2, 1]).unwrap();
        let r = g.sub(a, b).unwrap();
        let run3 = run(&g, 120 + i as u64, &[]);
        assert_close(&g, &run3, r, bound_for(ta), "sub permuted");
    }
}

#[test]
fn simple_maps_match_reference() {
    for (i, ta) in FLOATS.into_iter().enumerate() {
        for f in 0..8 {
            let mut g = Graph::new();
            let a = g.input("a", ta, &[67, 9, 2, 1]).unwrap();
            let r = match f {
                0 => g.sqr(a),
                1 => g.sqrt(a),
                2 => g.log(a),
                3 => g.sin(a),
                4 => g.cos(a),
                5 => g.scale_bias(a, 1.7, -0.3, false),
                6 => g.clamp(a, -0.25, 0.5),
                _ => g.fill(a, 0.625),
            }
            .unwrap();
            let n = g.desc(a).nelements() as usize;
            let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(f);
            let positive = Data::F32(uniform(&mut rng, n, 0.05, 4.0));
            let custom = if f == 1 || f == 2 {
                vec![(a, positive)]
            } else {
                vec![]
            };
            let run = run(&g, 200 + (i * 10 + f as usize) as u64, &custom);
            assert_close(&g, &run, r, bound_for(ta), &format!("map {f} on {ta}"));
        }
    }
}

#[test]
fn scale_in_place_and_threaded() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[512, 100, 1, 1]).unwrap();
    let r = g.scale_bias(a, -2.5, 0.125, true).unwrap();
    let run = run(&g, 300, &[]);
    assert_close(&g, &run, r, NMSE, "scale_bias in place");
}

#[test]
fn every_unary_function_matches_reference() {
    for (i, ta) in FLOATS.into_iter().enumerate() {
        for (j, &f) in UnaryOp::ALL.iter().enumerate() {
            let mut g = Graph::new();
            let a = g.input("a", ta, &[70, 5, 3, 1]).unwrap();
            let r = if f == UnaryOp::Xielu {
                g.xielu(a, 0.8, 0.6, 0.5, -1e-6)
            } else {
                g.unary(a, f)
            }
            .unwrap();
            let n = g.desc(a).nelements() as usize;
            let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(j as u64);
            let wide = Data::F32(uniform(&mut rng, n, -5.0, 5.0));
            let run = run(&g, 400 + (i * 40 + j) as u64, &[(a, wide)]);
            assert_close(&g, &run, r, bound_for(ta), &format!("{f} on {ta}"));
        }
    }
}

#[test]
fn unary_in_place_on_permuted_and_large_tensors() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[1000, 70, 1, 1]).unwrap();
    let r = g.unary_inplace(a, UnaryOp::Silu).unwrap();
    let run1 = run(&g, 500, &[]);
    assert_close(&g, &run1, r, NMSE, "silu in place");

    let mut g = Graph::new();
    let a = permuted_input(&mut g, "a", DType::F16, [16, 12, 3, 1], [2, 0, 1, 3]);
    let c = g.cont(a).unwrap();
    let r = g.unary(c, UnaryOp::Gelu).unwrap();
    let run2 = run(&g, 501, &[]);
    assert_close(
        &g,
        &run2,
        r,
        bound_for(DType::F16),
        "gelu after cont of permuted",
    );
}

#[test]
fn glu_split_swapped_and_two_source_match_reference() {
    for (i, ta) in FLOATS.into_iter().enumerate() {
        for (j, &f) in GluOp::ALL.iter().enumerate() {
            for form in 0..3 {
                let mut g = Graph::new();
                let r = match form {
                    0 | 1 => {
                        let a = g.input("a", ta, &[2 * 45, 6, 2, 1]).unwrap();
                        if f == GluOp::SwigluOai {
                            g.swiglu_oai(a, None, 1.702, 0.7).unwrap()
                        } else {
                            g.glu_split(a, f, form == 1).unwrap()
                        }
                    }
                    _ => {
                        let a = g.input("a", ta, &[45, 6, 2, 1]).unwrap();
                        let b = g.input("b", ta, &[45, 6, 2, 1]).unwrap();
                        if f == GluOp::SwigluOai {
                            g.swiglu_oai(a, Some(b), 1.702, 0.7)
                        } else {
                            g.glu(a, b, f)
                        }
                        .unwrap()
                    }
                };
                let run = run(&g, 600 + (i * 100 + j * 10 + form) as u64, &[]);
                assert_close(
                    &g,
                    &run,
                    r,
                    bound_for(ta),
                    &format!("{f} form {form} on {ta}"),
                );
            }
        }
    }
}

#[test]
fn glu_threaded_rows() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[2 * 500, 80, 1, 1]).unwrap();
    let r = g.glu_split(a, GluOp::Swiglu, false).unwrap();
    let run1 = run(&g, 700, &[]);
    assert_close(&g, &run1, r, NMSE, "swiglu threaded");
    let run2 = run_on(cpu1(), &g, 700, &[]);
    assert_close(&g, &run2, r, NMSE, "swiglu one thread");
}
