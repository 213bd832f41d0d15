//! CONV_2D, IM2COL, SSM_CONV and SSM_SCAN on the CPU backend against the
//! reference kernels.

mod common;

use backplane::{Conv2dParams, DType, Graph};
use backplane_cpu::CpuError;
use common::*;

const P1: Conv2dParams = Conv2dParams {
    s0: 1,
    s1: 1,
    p0: 0,
    p1: 0,
    d0: 1,
    d1: 1,
};
const P2: Conv2dParams = Conv2dParams {
    s0: 2,
    s1: 1,
    p0: 1,
    p1: 2,
    d0: 1,
    d1: 2,
};

#[test]
fn conv_2d_matches_reference() {
    let mut seed = 0;
    for kt in [DType::F32, DType::F16] {
        for p in [P1, P2] {
            let mut g = Graph::new();
            let k = g.input("k", kt, &[3, 3, 5, 4]).unwrap();
            let x = g.input("x", DType::F32, &[17, 13, 5, 2]).unwrap();
            let r = g.conv_2d(k, x, p).unwrap();
            seed += 1;
            let run = run(&g, seed, &[]);
            assert_close(&g, &run, r, NMSE, &format!("conv_2d {kt} {p:?}"));
        }
    }
    // Bigger, threaded.
    let mut g = Graph::new();
    let k = g.input("k", DType::F32, &[3, 3, 16, 8]).unwrap();
    let x = g.input("x", DType::F32, &[40, 30, 16, 1]).unwrap();
    let r = g.conv_2d(k, x, P1).unwrap();
    let run = run(&g, 10, &[]);
    assert_close(&g, &run, r, NMSE, "conv_2d threaded");
}

#[test]
fn im2col_matches_reference() {
    let mut seed = 20;
    for out in [DType::F32, DType::F16] {
        for p in [P1, P2] {
            let mut g = Graph::new();
            let k = g.input("k", DType::F16, &[3, 2, 4, 6]).unwrap();
            let x = g.input("x", DType::F32, &[11, 9, 4, 2]).unwrap();
            let r = g.im2col(k, x, p, true, out).unwrap();
            let k1 = g.input("k1", DType::F16, &[3, 4, 6, 1]).unwrap();
            let x1 = g.input("x1", DType::F32, &[13, 4, 3, 1]).unwrap();
            let r1 = g.im2col(k1, x1, p, false, out).unwrap();
            seed += 1;
            let run = run(&g, seed, &[]);
            assert_close(&g, &run, r, 0.0, &format!("im2col 2d {out} {p:?}"));
            assert_close(&g, &run, r1, 0.0, &format!("im2col 1d {out} {p:?}"));
        }
    }
}

#[test]
fn ssm_conv_matches_reference() {
    let mut g = Graph::new();
    let sx = g.input("sx", DType::F32, &[3 + 9, 40, 3, 1]).unwrap();
    let c = g.input("c", DType::F32, &[4, 40, 1, 1]).unwrap();
    let r = g.ssm_conv(sx, c).unwrap();
    let run1 = run(&g, 30, &[]);
    assert_close(&g, &run1, r, NMSE, "ssm_conv");
}

fn ssm_scan_graph(d_state: i64, a_ne0: i64, ids: &[i64], seed: u64) {
    let (head_dim, n_head, n_group, n_tok, n_seqs) = (8i64, 4i64, 2i64, 5i64, ids.len() as i64);
    let mut g = Graph::new();
    let s = g
        .input("s", DType::F32, &[d_state, head_dim, n_head, 3])
        .unwrap();
    let x = g
        .input("x", DType::F32, &[head_dim, n_head, n_tok, n_seqs])
        .unwrap();
    let dt = g.input("dt", DType::F32, &[n_head, n_tok, n_seqs]).unwrap();
    let a = g.input("A", DType::F32, &[a_ne0, n_head]).unwrap();
    let b = g
        .input("B", DType::F32, &[d_state, n_group, n_tok, n_seqs])
        .unwrap();
    let c = g
        .input("C", DType::F32, &[d_state, n_group, n_tok, n_seqs])
        .unwrap();
    let id = g.input("ids", DType::I32, &[n_seqs]).unwrap();
    let r = g.ssm_scan(s, x, dt, a, b, c, id).unwrap();
    let run = run(&g, seed, &[(id, Data::Ints(ids.to_vec()))]);
    assert_close(
        &g,
        &run,
        r,
        NMSE,
        &format!("ssm_scan d_state {d_state} A ne0 {a_ne0}"),
    );
}

#[test]
fn ssm_scan_mamba1_and_mamba2_match_reference() {
    ssm_scan_graph(16, 16, &[2, 0], 40);
    ssm_scan_graph(16, 1, &[1, 2], 41);
    ssm_scan_graph(7, 1, &[0], 42);
}

#[test]
fn ssm_scan_out_of_range_state_is_an_error() {
    let mut g = Graph::new();
    let s = g.input("s", DType::F32, &[4, 2, 2, 1]).unwrap();
    let x = g.input("x", DType::F32, &[2, 2, 1, 1]).unwrap();
    let dt = g.input("dt", DType::F32, &[2, 1, 1]).unwrap();
    let a = g.input("A", DType::F32, &[1, 2]).unwrap();
    let b = g.input("B", DType::F32, &[4, 1, 1, 1]).unwrap();
    let c = g.input("C", DType::F32, &[4, 1, 1, 1]).unwrap();
    let id = g.input("ids", DType::I32, &[1]).unwrap();
    g.ssm_scan(s, x, dt, a, b, c, id).unwrap();
    assert!(matches!(
        cpu_error(&g, &[(id, Data::Ints(vec![5]))]),
        CpuError::BadInput { .. }
    ));
}
