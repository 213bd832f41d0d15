//! Hand-computed cases proving the reference kernels right: element-wise,
//! reductions, normalisation, softmax, attention, rope and mat-mul.

use backplane_reference as reference;
use backplane_runtime::{
    DType, GluOp, Graph, HostTensors, RopeParams, TensorId, UnaryOp, rope_mode,
};

/// Fills the given tensors, runs the reference, returns the host storage.
fn run(g: &Graph, inputs: &[(TensorId, &[f32])]) -> HostTensors {
    let mut host = HostTensors::new(g);
    for (t, v) in inputs {
        host.set_f32(g, *t, v).unwrap();
    }
    reference::compute(g, &mut host).unwrap();
    host
}

fn assert_close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "got {got:?}, want {want:?}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= tol * w.abs().max(1.0),
            "element {i}: got {g}, want {w} (all: {got:?})"
        );
    }
}

#[test]
fn add_broadcasts_a_row_over_every_row() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[3, 2]).unwrap();
    let b = g.input("b", DType::F32, &[3, 1]).unwrap();
    let c = g.add(a, b).unwrap();
    let h = run(&g, &[(a, &[1., 2., 3., 4., 5., 6.]), (b, &[10., 20., 30.])]);
    assert_eq!(h.get_f32(&g, c), [11., 22., 33., 14., 25., 36.]);
}

#[test]
fn div_in_place_on_f16_rounds_once() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F16, &[2]).unwrap();
    let b = g.input("b", DType::F16, &[1]).unwrap();
    let c = g.div_inplace(a, b).unwrap();
    let h = run(&g, &[(a, &[1., 2.]), (b, &[3.])]);
    let want = [
        half::f16::from_f64(1. / 3.).to_f32(),
        half::f16::from_f64(2. / 3.).to_f32(),
    ];
    assert_eq!(h.get_f32(&g, c), want);
    assert_eq!(h.get_f32(&g, a), want, "the result aliases a");
}

#[test]
fn unary_functions_use_ggml_formulas() {
    let x = [-2.5f32, -1.0, 0.0, 1.0, 2.5, 30.0];
    type Case = (UnaryOp, fn(f64) -> f64);
    let cases: [Case; 8] = [
        (UnaryOp::Round, |x| x.round()),
        (UnaryOp::GeluQuick, |x| x / (1.0 + (-1.702 * x).exp())),
        (UnaryOp::Softplus, |x| {
            if x > 20.0 { x } else { (1.0 + x.exp()).ln() }
        }),
        (UnaryOp::Hardswish, |x| {
            x * ((x + 3.0) / 6.0).clamp(0.0, 1.0)
        }),
        (UnaryOp::Sgn, |x| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }),
        (UnaryOp::Elu, |x| if x > 0.0 { x } else { x.exp_m1() }),
        (UnaryOp::Gelu, |x| {
            0.5 * x * (1.0 + (0.7978845608028654 * x * (1.0 + 0.044715 * x * x)).tanh())
        }),
        (UnaryOp::Silu, |x| x / (1.0 + (-x).exp())),
    ];
    for (f, want) in cases {
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &[6]).unwrap();
        let y = g.unary(a, f).unwrap();
        let h = run(&g, &[(a, &x)]);
        let w: Vec<f64> = x.iter().map(|&v| want(v as f64)).collect();
        assert_close(&h.get_f32(&g, y), &w, 1e-6);
    }
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[2]).unwrap();
    let y = g.unary(a, UnaryOp::Round).unwrap();
    let h = run(&g, &[(a, &[0.5, -0.5])]);
    assert_eq!(
        h.get_f32(&g, y),
        [1.0, -1.0],
        "round is half away from zero"
    );
}

#[test]
fn xielu_applies_softplus_to_its_alphas() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[2]).unwrap();
    let y = g.xielu(a, 0.0, 0.0, 0.5, -1e-6).unwrap();
    let h = run(&g, &[(a, &[2.0, -1.0])]);
    let (an, ap, beta, eps) = (0.5 + 2f64.ln(), 2f64.ln(), 0.5, -1e-6f32 as f64);
    let neg = ((-1f64).min(eps).exp_m1() + 1.0) * an - beta;
    assert_close(&h.get_f32(&g, y), &[ap * 4.0 + beta * 2.0, neg], 1e-6);
}

#[test]
fn glu_split_takes_gate_half_first_unless_swapped() {
    for (swapped, want) in [(false, 0.0), (true, -3.0)] {
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &[2]).unwrap();
        let y = g.glu_split(a, GluOp::Reglu, swapped).unwrap();
        let h = run(&g, &[(a, &[-1.0, 3.0])]);
        assert_eq!(h.get_f32(&g, y), [want]);
    }
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[1]).unwrap();
    let b = g.input("b", DType::F32, &[1]).unwrap();
    let y = g.swiglu_oai(a, Some(b), 1.702, 7.0).unwrap();
    let h = run(&g, &[(a, &[10.0]), (b, &[-9.0])]);
    assert_close(
        &h.get_f32(&g, y),
        &[7.0 / (1.0 + (-1.702f64 * 7.0).exp()) * -6.0],
        1e-6,
    );
}

#[test]
fn scale_clamp_fill_and_simple_math() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[3]).unwrap();
    let s = g.scale_bias(a, 2.0, 1.0, false).unwrap();
    let c = g.clamp(a, -1.0, 1.0).unwrap();
    let f = g.fill(a, 7.0).unwrap();
    let q = g.sqr(a).unwrap();
    let h = run(&g, &[(a, &[-3.0, 0.5, 4.0])]);
    assert_eq!(h.get_f32(&g, s), [-5.0, 2.0, 9.0]);
    assert_eq!(h.get_f32(&g, c), [-1.0, 0.5, 1.0]);
    assert_eq!(h.get_f32(&g, f), [7.0; 3]);
    assert_eq!(h.get_f32(&g, q), [9.0, 0.25, 16.0]);
}

#[test]
fn sums_and_prefix_sums() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[3, 2]).unwrap();
    let s = g.sum(a).unwrap();
    let r = g.sum_rows(a).unwrap();
    let c = g.cumsum(a).unwrap();
    let h = run(&g, &[(a, &[1., 2., 3., 4., 5., 6.])]);
    assert_eq!(h.get_f32(&g, s), [21.]);
    assert_eq!(h.get_f32(&g, r), [6., 15.]);
    assert_eq!(h.get_f32(&g, c), [1., 3., 6., 4., 9., 15.]);
}

#[test]
fn norms_by_hand() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[2]).unwrap();
    let n = g.norm(a, 0.0).unwrap();
    let r = g.rms_norm(a, 0.0).unwrap();
    let l = g.l2_norm(a, 0.0).unwrap();
    let h = run(&g, &[(a, &[3., 4.])]);
    assert_close(&h.get_f32(&g, n), &[-1., 1.], 1e-6);
    let rms = 12.5f64.sqrt();
    assert_close(&h.get_f32(&g, r), &[3. / rms, 4. / rms], 1e-6);
    assert_close(&h.get_f32(&g, l), &[0.6, 0.8], 1e-6);
}

#[test]
fn softmax_of_zero_and_ln2_is_a_third_and_two_thirds() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[2]).unwrap();
    let y = g.soft_max(a, None, None, 1.0, 0.0).unwrap();
    let h = run(&g, &[(a, &[0.0, 2f32.ln()])]);
    assert_close(&h.get_f32(&g, y), &[1. / 3., 2. / 3.], 1e-6);
}

#[test]
fn softmax_mask_and_sink_join_the_denominator() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[2, 1, 1]).unwrap();
    let m = g.input("m", DType::F16, &[2, 1]).unwrap();
    let s = g.input("s", DType::F32, &[1]).unwrap();
    let y = g.soft_max(a, Some(m), Some(s), 1.0, 0.0).unwrap();
    let h = run(
        &g,
        &[
            (a, &[0.0, 0.0]),
            (m, &[0.0, f32::NEG_INFINITY]),
            (s, &[2f32.ln()]),
        ],
    );
    assert_close(&h.get_f32(&g, y), &[1. / 3., 0.], 1e-6);
}

#[test]
fn softmax_alibi_slopes_follow_n_head_log2() {
    // 2 heads, max_bias 8: n_head_log2 = 2, m0 = 2^-4, slopes 1/16 and 1/256.
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[2, 1, 2]).unwrap();
    let m = g.input("m", DType::F32, &[2, 1]).unwrap();
    let y = g.soft_max(a, Some(m), None, 1.0, 8.0).unwrap();
    let h = run(&g, &[(a, &[0.0; 4]), (m, &[0.0, 16.0])]);
    let e = std::f64::consts::E;
    let e2 = (16.0f64 / 256.0).exp();
    assert_close(
        &h.get_f32(&g, y),
        &[1. / (1. + e), e / (1. + e), 1. / (1. + e2), e2 / (1. + e2)],
        1e-6,
    );
}

fn attention(kv: DType, mask: Option<&[f32]>, sink: Option<f32>, softcap: f32) -> Vec<f32> {
    let mut g = Graph::new();
    let q = g.input("q", DType::F32, &[2, 1, 1, 1]).unwrap();
    let k = g.input("k", kv, &[2, 2, 1, 1]).unwrap();
    let v = g.input("v", kv, &[2, 2, 1, 1]).unwrap();
    let m = mask.map(|_| g.input("m", DType::F16, &[2, 1]).unwrap());
    let s = sink.map(|_| g.input("s", DType::F32, &[1]).unwrap());
    let o = g.flash_attn_ext(q, k, v, m, s, 1.0, 0.0, softcap).unwrap();
    let ln2 = 2f32.ln();
    let mut inputs: Vec<(TensorId, Vec<f32>)> = vec![
        (q, vec![1.0, 0.0]),
        (k, vec![0.0, 0.0, ln2, 0.0]),
        (v, vec![3.0, 0.0, 0.0, 3.0]),
    ];
    if let (Some(m), Some(mv)) = (m, mask) {
        inputs.push((m, mv.to_vec()));
    }
    if let (Some(s), Some(sv)) = (s, sink) {
        inputs.push((s, vec![sv]));
    }
    let refs: Vec<(TensorId, &[f32])> = inputs.iter().map(|(t, v)| (*t, v.as_slice())).collect();
    run(&g, &refs).get_f32(&g, o)
}

#[test]
fn flash_attention_weights_values_by_softmax() {
    // logits [0, ln 2] -> p = [1/3, 2/3]; values [3, 0] and [0, 3].
    let ln2 = 2f64.ln() as f32 as f64;
    let w1 = ln2.exp() / (1.0 + ln2.exp());
    assert_close(
        &attention(DType::F32, None, None, 0.0),
        &[3. * (1. - w1), 3. * w1],
        1e-6,
    );
    assert_close(
        &attention(DType::F16, Some(&[0.0, f32::NEG_INFINITY]), None, 0.0),
        &[3., 0.],
        1e-6,
    );
    // A sink of ln 2 adds 2 to the denominator (1 + 2 + 2).
    let p = attention(DType::F32, None, Some(2f32.ln()), 0.0);
    assert_close(&p, &[3. / 5., 6. / 5.], 1e-3);
    // Fully masked with no sink: zeros.
    let inf = f32::NEG_INFINITY;
    assert_eq!(
        attention(DType::F32, Some(&[inf, inf]), None, 0.0),
        [0.0, 0.0]
    );
    // softcap 1: score -> tanh(score).
    let t = ln2.tanh().exp();
    assert_close(
        &attention(DType::BF16, None, None, 1.0),
        &[3. / (1. + t), 3. * t / (1. + t)],
        1e-3,
    );
}

#[test]
fn flash_attention_with_q8_0_keys_uses_dequantized_keys() {
    let mut g = Graph::new();
    let q = g.input("q", DType::F32, &[32, 1, 1, 1]).unwrap();
    let k = g.input("k", DType::Q8_0, &[32, 2, 1, 1]).unwrap();
    let v = g.input("v", DType::F16, &[32, 2, 1, 1]).unwrap();
    let o = g
        .flash_attn_ext(q, k, v, None, None, 0.125, 0.0, 0.0)
        .unwrap();
    let qv: Vec<f32> = (0..32).map(|i| (i as f32 * 0.37).sin()).collect();
    let kv: Vec<f32> = (0..64).map(|i| (i as f32 * 0.11).cos()).collect();
    let vv: Vec<f32> = (0..64).map(|i| i as f32 / 8.0).collect();
    let h = run(&g, &[(q, &qv), (k, &kv), (v, &vv)]);
    let kd: Vec<f64> = h.get_f32(&g, k).iter().map(|&x| x as f64).collect();
    let s: Vec<f64> = (0..2)
        .map(|j| 0.125 * (0..32).map(|i| qv[i] as f64 * kd[32 * j + i]).sum::<f64>())
        .collect();
    let mx = s[0].max(s[1]);
    let (e0, e1) = ((s[0] - mx).exp(), (s[1] - mx).exp());
    let want: Vec<f64> = (0..32)
        .map(|i| (e0 * vv[i] as f64 + e1 * vv[32 + i] as f64) / (e0 + e1))
        .collect();
    assert_close(&h.get_f32(&g, o), &want, 1e-5);
}

fn rope_once(mode: i32, n_dims: i32, x: &[f32], pos: &[i32], ne: &[i64]) -> Vec<f32> {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, ne).unwrap();
    let p = g.input("p", DType::I32, &[pos.len() as i64]).unwrap();
    let mut rp = RopeParams::new(n_dims, mode);
    if mode & rope_mode::MROPE != 0 {
        rp.sections = [1, 1, 0, 0];
    }
    let y = g.rope(a, p, None, rp).unwrap();
    let mut h = HostTensors::new(&g);
    h.set_f32(&g, a, x).unwrap();
    h.set_i32(&g, p, pos).unwrap();
    reference::compute(&g, &mut h).unwrap();
    h.get_f32(&g, y)
}

#[test]
fn rope_neox_rotates_half_split_pairs_at_position_one() {
    // n_dims 4, base 10000: pair angles 1 and 0.01.
    let y = rope_once(rope_mode::NEOX, 4, &[1., 2., 3., 4.], &[1], &[4, 1, 1]);
    let (c1, s1, c2, s2) = (1f64.cos(), 1f64.sin(), 0.01f64.cos(), 0.01f64.sin());
    let want = [
        1. * c1 - 3. * s1,
        2. * c2 - 4. * s2,
        1. * s1 + 3. * c1,
        2. * s2 + 4. * c2,
    ];
    assert_close(&y, &want, 1e-6);
}

#[test]
fn rope_normal_rotates_adjacent_pairs_and_passes_the_rest() {
    let y = rope_once(rope_mode::NORMAL, 2, &[1., 2., 3., 4.], &[1], &[4, 1, 1]);
    let (c, s) = (1f64.cos(), 1f64.sin());
    assert_close(&y, &[c - 2. * s, s + 2. * c, 3., 4.], 1e-6);
    let y = rope_once(rope_mode::NORMAL, 4, &[1., 0., 1., 0.], &[0], &[4, 1, 1]);
    assert_eq!(y, [1., 0., 1., 0.], "position 0 is the identity");
}

#[test]
fn rope_mrope_picks_each_sections_position() {
    // sections [1, 1]: pair 0 uses the time position, pair 1 the height one.
    let y = rope_once(
        rope_mode::MROPE,
        4,
        &[1., 1., 0., 0.],
        &[1, 100, 0, 0],
        &[4, 1, 1],
    );
    let t_h = 100.0f32 * 0.01f32;
    let want = [
        1f64.cos(),
        (t_h as f64).cos(),
        1f64.sin(),
        (t_h as f64).sin(),
    ];
    assert_close(&y, &want, 1e-6);
}

#[test]
fn rope_vision_restarts_each_section_and_rotates_the_whole_row() {
    // ne0 4, n_dims 2: pairs (0, 2) and (1, 3); sections [1, 1] give pair 0
    // the time position and pair 1 the height position, each unscaled.
    let y = rope_once(
        rope_mode::VISION,
        2,
        &[1., 1., 0., 0.],
        &[1, 2, 0, 0],
        &[4, 1, 1],
    );
    assert_close(&y, &[1f64.cos(), 2f64.cos(), 1f64.sin(), 2f64.sin()], 1e-6);
}

#[test]
fn rope_yarn_scales_magnitude_with_ext_factor() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[2, 1, 1]).unwrap();
    let p = g.input("p", DType::I32, &[1]).unwrap();
    let mut rp = RopeParams::new(2, rope_mode::NORMAL);
    rp.freq_scale = 0.5;
    rp.ext_factor = 1.0;
    rp.n_ctx_orig = 4096;
    let y = g.rope(a, p, None, rp).unwrap();
    let mut h = HostTensors::new(&g);
    h.set_f32(&g, a, &[1., 0.]).unwrap();
    h.set_i32(&g, p, &[3]).unwrap();
    reference::compute(&g, &mut h).unwrap();
    // Pair 0 sits below the low correction dim: ramp 1, pure extrapolation.
    let mscale = 1.0 + 0.1 * 2f64.ln();
    assert_close(
        &h.get_f32(&g, y),
        &[3f64.cos() * mscale, 3f64.sin() * mscale],
        1e-6,
    );
}

#[test]
fn mul_mat_2x3_by_hand() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[3, 2]).unwrap();
    let b = g.input("b", DType::F32, &[3, 2]).unwrap();
    let c = g.mul_mat(a, b).unwrap();
    let h = run(
        &g,
        &[
            (a, &[1., 2., 3., 4., 5., 6.]),
            (b, &[1., 0., 1., 0., 1., 0.]),
        ],
    );
    assert_eq!(h.get_f32(&g, c), [4., 10., 2., 5.]);
}

#[test]
fn mul_mat_broadcasts_a_over_b_batches_and_reads_transposed_b() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F16, &[2, 1, 1]).unwrap();
    let bt = g.input("bt", DType::F32, &[2, 2, 2]).unwrap();
    let b = g.transpose(bt).unwrap();
    let c = g.mul_mat(a, b).unwrap();
    let h = run(
        &g,
        &[(a, &[1., 10.]), (bt, &[1., 2., 3., 4., 5., 6., 7., 8.])],
    );
    // b batch 0 = [[1, 3], [2, 4]] (columns), batch 1 = [[5, 7], [6, 8]].
    assert_eq!(h.get_f32(&g, c), [31., 42., 75., 86.]);
}

#[test]
fn mul_mat_with_quantized_weights_is_the_exact_dequantized_product() {
    for dt in [
        DType::Q4_0,
        DType::Q5_1,
        DType::Q8_0,
        DType::Q4_K,
        DType::Q6_K,
    ] {
        let k = 256;
        let mut g = Graph::new();
        let a = g.weight("a", dt, &[k, 2]).unwrap();
        let b = g.input("b", DType::F32, &[k, 1]).unwrap();
        let c = g.mul_mat(a, b).unwrap();
        let av: Vec<f32> = (0..2 * k)
            .map(|i| ((i * 7 % 23) as f32 - 11.0) / 5.0)
            .collect();
        let bv: Vec<f32> = (0..k).map(|i| (i as f32 * 0.3).sin()).collect();
        let h = run(&g, &[(a, &av), (b, &bv)]);
        let ad = h.get_f32(&g, a);
        let want: Vec<f64> = (0..2)
            .map(|m| {
                (0..k as usize)
                    .map(|i| ad[m * k as usize + i] as f64 * bv[i] as f64)
                    .sum()
            })
            .collect();
        assert_close(&h.get_f32(&g, c), &want, 1e-6);
    }
}

#[test]
fn mul_mat_id_routes_each_slot_to_its_expert() {
    let mut g = Graph::new();
    let w = g.weight("w", DType::F32, &[2, 1, 3]).unwrap();
    let b = g.input("b", DType::F32, &[2, 1, 2]).unwrap();
    let ids = g.input("ids", DType::I32, &[2, 2]).unwrap();
    let y = g.mul_mat_id(w, b, ids).unwrap();
    let mut h = HostTensors::new(&g);
    h.set_f32(&g, w, &[1., 0., 0., 1., 1., 1.]).unwrap();
    h.set_f32(&g, b, &[2., 3., 5., 7.]).unwrap();
    h.set_i32(&g, ids, &[0, 2, 1, 1]).unwrap();
    reference::compute(&g, &mut h).unwrap();
    assert_eq!(h.get_f32(&g, y), [2., 5., 7., 7.]);
    h.set_i32(&g, ids, &[0, 3, 1, 1]).unwrap();
    let err = reference::compute(&g, &mut h).unwrap_err().to_string();
    assert!(err.contains("MUL_MAT_ID") && err.contains("= 3"), "{err}");
}
