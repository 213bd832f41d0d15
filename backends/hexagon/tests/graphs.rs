//! Small model-shaped graphs through the emulated transport in process,
//! compared with `backplane_reference::compute`: several ops per graph,
//! intermediates in the DSP's shared buffer, one message per node.

mod common;

use backplane::{DType, GluOp, Graph, HostTensors, RopeParams, TensorId, rope_mode};
use backplane_conformance::{Target, compare};

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Fills every leaf, runs the reference and the emulated DSP, and returns
/// the NMSE of `out`.
fn run(g: &Graph, out: TensorId, ints: &[(TensorId, Vec<i32>)]) -> f64 {
    let mut host = HostTensors::new(g);
    for (i, t) in g.ids().enumerate() {
        let d = g.desc(t);
        if d.op().unwrap() != backplane::Op::None {
            continue;
        }
        match ints.iter().find(|(l, _)| *l == t) {
            Some((_, v)) => host.set_i32(g, t, v).unwrap(),
            None => host
                .set_f32(g, t, &values(d.nelements() as usize, i as u64))
                .unwrap(),
        }
    }
    let leaves: Vec<(TensorId, Vec<u8>)> = g
        .ids()
        .filter(|&t| g.desc(t).op().unwrap() == backplane::Op::None)
        .map(|t| (t, host.bytes(t).to_vec()))
        .collect();
    backplane_reference::compute(g, &mut host).expect("reference");
    let want = host.get_f32(g, out);
    let mut target = common::HexagonTarget::new();
    for node in g.compute_nodes() {
        target
            .supports(g, node)
            .unwrap_or_else(|r| panic!("{} refused: {r}", g.name(node)));
    }
    target.load(g, &leaves).expect("load");
    target.compute().expect("compute");
    assert!(
        target.guard_violations().is_empty(),
        "{:?}",
        target.guard_violations()
    );
    compare(&want, &target.read_f32(out).unwrap()).expect("comparable")
}

#[test]
fn swiglu_feed_forward_block_matches_the_reference() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[64, 5]).unwrap();
    let norm_w = g.weight("norm", DType::F32, &[64]).unwrap();
    let gate_w = g.weight("gate", DType::Q4_0, &[64, 96]).unwrap();
    let up_w = g.weight("up", DType::Q8_0, &[64, 96]).unwrap();
    let down_w = g.weight("down", DType::F16, &[96, 64]).unwrap();
    let h = g.rms_norm(x, 1e-5).unwrap();
    let h = g.mul(h, norm_w).unwrap();
    let gate = g.mul_mat(gate_w, h).unwrap();
    let up = g.mul_mat(up_w, h).unwrap();
    let act = g.glu(gate, up, GluOp::Swiglu).unwrap();
    let down = g.mul_mat(down_w, act).unwrap();
    let out = g.add(down, x).unwrap();
    g.mark_output(out).unwrap();
    let nmse = run(&g, out, &[]);
    assert!(nmse < 5e-4, "NMSE {nmse}");
}

#[test]
fn embedding_attention_scores_match_the_reference() {
    let mut g = Graph::new();
    let table = g.weight("tok_embd", DType::Q8_0, &[64, 50]).unwrap();
    let ids = g.input("ids", DType::I32, &[7]).unwrap();
    let keys = g.input("k", DType::F32, &[64, 7]).unwrap();
    let mask = g.input("mask", DType::F16, &[7, 7]).unwrap();
    let q = g.get_rows(table, ids).unwrap();
    let q = g.scale(q, 0.125).unwrap();
    let scores = g.mul_mat(keys, q).unwrap();
    let probs = g.soft_max(scores, Some(mask), None, 1.0, 0.0).unwrap();
    let dst = g.input("probs_f16", DType::F16, &[7, 7]).unwrap();
    let out = g.cpy(probs, dst).unwrap();
    g.mark_output(out).unwrap();
    let nmse = run(&g, out, &[(ids, vec![3, 49, 0, 7, 7, 21, 12])]);
    assert!(nmse < 5e-4, "NMSE {nmse}");
}

#[test]
fn rotary_embedding_of_f16_heads_matches_the_reference() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F16, &[64, 4, 6]).unwrap();
    let pos = g.input("pos", DType::I32, &[6]).unwrap();
    let mut p = RopeParams::new(64, rope_mode::NEOX);
    p.n_ctx_orig = 4096;
    p.ext_factor = 1.0;
    p.freq_scale = 0.25;
    let r = g.rope(x, pos, None, p).unwrap();
    let r2 = g
        .rope(r, pos, None, RopeParams::new(32, rope_mode::NORMAL))
        .unwrap();
    let dst = g.input("out", DType::F32, &[64, 4, 6]).unwrap();
    let out = g.cpy(r2, dst).unwrap();
    g.mark_output(out).unwrap();
    let nmse = run(&g, out, &[(pos, vec![0, 1, 17, 300, 2047, 4095])]);
    assert!(nmse < 1e-6, "NMSE {nmse}");
}
