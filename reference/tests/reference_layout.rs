//! Hand-computed cases for the reference's data-movement, sorting,
//! convolution and state-space kernels.

use backplane_reference as reference;
use backplane_runtime::{
    ComputeError, Conv2dParams, DType, Graph, HostTensors, SortOrder, TensorId,
};

fn run(
    g: &Graph,
    inputs: &[(TensorId, &[f32])],
    ints: &[(TensorId, &[i64])],
) -> Result<HostTensors, ComputeError> {
    let mut host = HostTensors::new(g);
    for (t, v) in inputs {
        host.set_f32(g, *t, v).unwrap();
    }
    for (t, v) in ints {
        host.set_ints(g, *t, v).unwrap();
    }
    reference::compute(g, &mut host).map(|()| host)
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
fn set_rows_writes_converted_rows_at_their_indices() {
    for (dt, idx) in [
        (DType::F16, DType::I64),
        (DType::BF16, DType::I32),
        (DType::F32, DType::I32),
    ] {
        let mut g = Graph::new();
        let dst = g.input("dst", dt, &[2, 3]).unwrap();
        let src = g.input("src", DType::F32, &[2, 2]).unwrap();
        let rows = g.input("rows", idx, &[2]).unwrap();
        let y = g.set_rows(dst, src, rows).unwrap();
        let h = run(
            &g,
            &[(dst, &[9.; 6]), (src, &[1., 2., 3., 4.])],
            &[(rows, &[2, 0])],
        )
        .unwrap();
        assert_eq!(h.get_f32(&g, y), [3., 4., 9., 9., 1., 2.], "{dt}");
    }
}

#[test]
fn set_rows_quantizes_into_a_q8_0_destination() {
    let mut g = Graph::new();
    let dst = g.input("dst", DType::Q8_0, &[32, 2]).unwrap();
    let src = g.input("src", DType::F32, &[32, 1]).unwrap();
    let rows = g.input("rows", DType::I32, &[1]).unwrap();
    let y = g.set_rows(dst, src, rows).unwrap();
    let v: Vec<f32> = (0..32).map(|i| i as f32 - 16.0).collect();
    let h = run(&g, &[(src, &v)], &[(rows, &[1])]).unwrap();
    let mut want = vec![0u8; 34];
    backplane_runtime::quant::quantize_row(DType::Q8_0, &v, &mut want).unwrap();
    assert_eq!(&h.bytes(y)[34..], &want[..]);
    assert!(
        h.bytes(y)[..34].iter().all(|&b| b == 0),
        "row 0 is untouched"
    );
}

#[test]
fn set_rows_out_of_range_index_is_an_error() {
    let mut g = Graph::new();
    let dst = g.input("dst", DType::F32, &[2, 3]).unwrap();
    let src = g.input("src", DType::F32, &[2, 2]).unwrap();
    let rows = g.input("rows", DType::I32, &[2]).unwrap();
    let y = g.set_rows(dst, src, rows).unwrap();
    let err = run(&g, &[(dst, &[9.; 6]), (src, &[1.; 4])], &[(rows, &[0, 5])])
        .err()
        .unwrap();
    assert!(
        matches!(err, ComputeError::BadInput { node, .. } if node == y.index()),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("SET_ROWS") && msg.contains("row 1") && msg.contains("index 5"),
        "{msg}"
    );
}

#[test]
fn get_rows_gathers_float_quantized_and_integer_rows() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F16, &[2, 3]).unwrap();
    let q = g.input("q", DType::Q4_0, &[32, 2]).unwrap();
    let n = g.input("n", DType::I32, &[1, 3]).unwrap();
    let rows = g.input("rows", DType::I32, &[2]).unwrap();
    let ya = g.get_rows(a, rows).unwrap();
    let yq = g.get_rows(q, rows).unwrap();
    let yn = g.get_rows(n, rows).unwrap();
    let qv: Vec<f32> = (0..64).map(|i| (i % 16) as f32).collect();
    let h = run(
        &g,
        &[(a, &[1., 2., 3., 4., 5., 6.]), (q, &qv)],
        &[(rows, &[1, 0]), (n, &[7, -8, 9])],
    )
    .unwrap();
    assert_eq!(h.get_f32(&g, ya), [3., 4., 1., 2.]);
    let qd = h.get_f32(&g, q);
    assert_eq!(h.get_f32(&g, yq), [&qd[32..], &qd[..32]].concat());
    assert_eq!(g.dtype(yn), DType::I32);
    assert_eq!(h.get_f32(&g, yn), [-8., 7.]);
}

#[test]
fn get_rows_out_of_range_index_is_an_error() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[2, 3]).unwrap();
    let rows = g.input("rows", DType::I32, &[1]).unwrap();
    g.get_rows(a, rows).unwrap();
    let msg = run(&g, &[], &[(rows, &[-1])]).err().unwrap().to_string();
    assert!(
        msg.contains("GET_ROWS") && msg.contains("index -1"),
        "{msg}"
    );
}

#[test]
fn cpy_converts_between_types() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[32]).unwrap();
    let f = g.input("f", DType::F16, &[32]).unwrap();
    let i = g.input("i", DType::I32, &[32]).unwrap();
    let q = g.input("q", DType::Q8_0, &[32]).unwrap();
    let back = g.input("back", DType::F32, &[32]).unwrap();
    let cf = g.cpy(a, f).unwrap();
    let ci = g.cpy(a, i).unwrap();
    let cq = g.cpy(a, q).unwrap();
    let cb = g.cpy(cq, back).unwrap();
    let v: Vec<f32> = (0..32).map(|k| (k as f32 - 16.0) * 0.35).collect();
    let h = run(&g, &[(a, &v)], &[]).unwrap();
    let want_f: Vec<f32> = v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect();
    assert_eq!(h.get_f32(&g, cf), want_f);
    let want_i: Vec<f32> = v.iter().map(|&x| x.trunc()).collect();
    assert_eq!(
        h.get_f32(&g, ci),
        want_i,
        "f32 -> i32 truncates like a C cast"
    );
    let mut qb = vec![0u8; 34];
    backplane_runtime::quant::quantize_row(DType::Q8_0, &v, &mut qb).unwrap();
    assert_eq!(h.bytes(cq), &qb[..]);
    assert_eq!(h.get_f32(&g, cb), h.get_f32(&g, cq));
}

#[test]
fn cont_of_a_permuted_view_is_its_logical_order() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[3, 2]).unwrap();
    let t = g.transpose(a).unwrap();
    let c = g.cont(t).unwrap();
    let p = g.input("p", DType::F32, &[2, 1, 3]).unwrap();
    let pv = g.permute(p, [1, 0, 2, 3]).unwrap();
    let pc = g.cont(pv).unwrap();
    let h = run(
        &g,
        &[
            (a, &[1., 2., 3., 4., 5., 6.]),
            (p, &[1., 2., 3., 4., 5., 6.]),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(h.get_f32(&g, c), [1., 4., 2., 5., 3., 6.]);
    assert_eq!(g.ne(pc), [1, 2, 3, 1]);
    assert_eq!(h.get_f32(&g, pc), [1., 2., 3., 4., 5., 6.]);
}

#[test]
fn concat_joins_along_each_dim() {
    let wants: [&[f32]; 4] = [
        &[1., 2., 5., 6., 3., 4., 7., 8.],
        &[1., 2., 3., 4., 5., 6., 7., 8.],
        &[1., 2., 3., 4., 5., 6., 7., 8.],
        &[1., 2., 3., 4., 5., 6., 7., 8.],
    ];
    for (dim, want) in wants.iter().enumerate() {
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &[2, 2]).unwrap();
        let b = g.input("b", DType::F32, &[2, 2]).unwrap();
        let c = g.concat(a, b, dim).unwrap();
        let h = run(&g, &[(a, &[1., 2., 3., 4.]), (b, &[5., 6., 7., 8.])], &[]).unwrap();
        let mut ne = [2, 2, 1, 1];
        ne[dim] *= 2;
        assert_eq!(g.ne(c), ne);
        assert_eq!(h.get_f32(&g, c), *want, "dim {dim}");
    }
}

#[test]
fn repeat_tiles_and_pad_adds_zeros() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[2, 1]).unwrap();
    let shape = g.input("shape", DType::F32, &[4, 2]).unwrap();
    let r = g.repeat(a, shape).unwrap();
    let p = g.pad(a, [1, 0, 0, 1, 0, 0, 0, 0]).unwrap();
    let h = run(&g, &[(a, &[1., 2.])], &[]).unwrap();
    assert_eq!(h.get_f32(&g, r), [1., 2., 1., 2., 1., 2., 1., 2.]);
    assert_eq!(h.get_f32(&g, p), [0., 1., 2., 0., 0., 0.]);
}

#[test]
fn argsort_orders_ties_by_index_both_ways() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[4]).unwrap();
    let asc = g.argsort(a, SortOrder::Asc).unwrap();
    let desc = g.argsort(a, SortOrder::Desc).unwrap();
    let top = g.top_k(a, 3).unwrap();
    let h = run(&g, &[(a, &[3., 1., 3., 1.])], &[]).unwrap();
    assert_eq!(h.get_f32(&g, asc), [1., 3., 0., 2.]);
    assert_eq!(h.get_f32(&g, desc), [0., 2., 1., 3.]);
    assert_eq!(h.get_f32(&g, top), [0., 2., 1.]);
}

#[test]
fn argmax_picks_the_last_of_equal_maxima_as_ggml() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[4, 2]).unwrap();
    let m = g.argmax(a).unwrap();
    let h = run(&g, &[(a, &[5., 1., 5., 2., -1., 7., 3., 0.])], &[]).unwrap();
    assert_eq!(h.get_f32(&g, m), [2., 1.]);
}

fn p(s: i32, pad: i32, d: i32) -> Conv2dParams {
    Conv2dParams {
        s0: s,
        s1: s,
        p0: pad,
        p1: pad,
        d0: d,
        d1: d,
    }
}

#[test]
fn conv_2d_3x3_by_hand() {
    let x: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    // Diagonal 2x2 kernel, no padding: out = in[x, y] + in[x + 1, y + 1].
    let mut g = Graph::new();
    let k = g.input("k", DType::F16, &[2, 2, 1, 1]).unwrap();
    let i = g.input("i", DType::F32, &[3, 3, 1, 1]).unwrap();
    let y = g.conv_2d(k, i, p(1, 0, 1)).unwrap();
    let h = run(&g, &[(k, &[1., 0., 0., 1.]), (i, &x)], &[]).unwrap();
    assert_eq!(h.get_f32(&g, y), [6., 8., 12., 14.]);
    // 3x3 box filter with padding 1: sums of each 3x3 neighbourhood.
    let mut g = Graph::new();
    let k = g.input("k", DType::F32, &[3, 3, 1, 2]).unwrap();
    let i = g.input("i", DType::F32, &[3, 3, 1, 1]).unwrap();
    let y = g.conv_2d(k, i, p(1, 1, 1)).unwrap();
    let kv: Vec<f32> = [[1.0f32; 9], [2.0; 9]].concat();
    let h = run(&g, &[(k, &kv), (i, &x)], &[]).unwrap();
    let box3 = [12., 21., 16., 27., 45., 33., 24., 39., 28.];
    let want: Vec<f32> = box3
        .iter()
        .chain(box3.iter().map(|v| v * 2.).collect::<Vec<_>>().iter())
        .copied()
        .collect();
    assert_eq!(g.ne(y), [3, 3, 2, 1]);
    assert_eq!(h.get_f32(&g, y), want);
}

#[test]
fn im2col_lays_out_patches_channel_then_kernel_row_then_column() {
    let x: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    let mut g = Graph::new();
    let k = g.input("k", DType::F16, &[2, 2, 1, 1]).unwrap();
    let i = g.input("i", DType::F32, &[3, 3, 1, 1]).unwrap();
    let y = g.im2col(k, i, p(1, 0, 1), true, DType::F32).unwrap();
    let y16 = g.im2col(k, i, p(1, 0, 1), true, DType::F16).unwrap();
    let h = run(&g, &[(i, &x)], &[]).unwrap();
    let want = [
        1., 2., 4., 5., 2., 3., 5., 6., 4., 5., 7., 8., 5., 6., 8., 9.,
    ];
    assert_eq!(g.ne(y), [4, 2, 2, 1]);
    assert_eq!(h.get_f32(&g, y), want);
    assert_eq!(h.get_f32(&g, y16), want);

    let mut g = Graph::new();
    let k = g.input("k", DType::F32, &[2, 1]).unwrap();
    let i = g.input("i", DType::F32, &[4, 1, 1]).unwrap();
    let y = g
        .im2col(
            k,
            i,
            Conv2dParams {
                p1: 0,
                ..p(1, 0, 1)
            },
            false,
            DType::F32,
        )
        .unwrap();
    let h = run(&g, &[(i, &[1., 2., 3., 4.])], &[]).unwrap();
    assert_eq!(g.ne(y), [2, 3, 1, 1]);
    assert_eq!(h.get_f32(&g, y), [1., 2., 2., 3., 3., 4.]);
}

#[test]
fn ssm_conv_by_hand() {
    let mut g = Graph::new();
    let sx = g.input("sx", DType::F32, &[4, 1, 1]).unwrap();
    let c = g.input("c", DType::F32, &[3, 1]).unwrap();
    let y = g.ssm_conv(sx, c).unwrap();
    let h = run(&g, &[(sx, &[1., 2., 3., 4.]), (c, &[1., 10., 100.])], &[]).unwrap();
    assert_eq!(h.get_f32(&g, y), [321., 432.]);
}

/// One head, one channel, one state element, two tokens.
fn scan(a_ne0: i64, a: f32) -> Vec<f32> {
    let mut g = Graph::new();
    let s = g.input("s", DType::F32, &[1, 1, 1, 2]).unwrap();
    let x = g.input("x", DType::F32, &[1, 1, 2, 1]).unwrap();
    let dt = g.input("dt", DType::F32, &[1, 2, 1]).unwrap();
    let av = g.input("A", DType::F32, &[a_ne0, 1]).unwrap();
    let b = g.input("B", DType::F32, &[1, 1, 2, 1]).unwrap();
    let c = g.input("C", DType::F32, &[1, 1, 2, 1]).unwrap();
    let ids = g.input("ids", DType::I32, &[1]).unwrap();
    let y = g.ssm_scan(s, x, dt, av, b, c, ids).unwrap();
    let inputs: [(TensorId, &[f32]); 6] = [
        (s, &[5., 2.]),
        (x, &[1., 1.]),
        (dt, &[0., 0.]),
        (av, &[a]),
        (b, &[1., 1.]),
        (c, &[1., 2.]),
    ];
    run(&g, &inputs, &[(ids, &[1])]).unwrap().get_f32(&g, y)
}

#[test]
fn ssm_scan_by_hand_with_scalar_decay() {
    // dt' = softplus(0) = ln 2, decay exp(-ln 2) = 1/2, state starts at s[.., ids[0] = 1] = 2.
    let l = 2f64.ln();
    let s1 = 2.0 * 0.5 + l;
    let s2 = s1 * 0.5 + l;
    assert_close(&scan(1, -1.0), &[s1, 2.0 * s2, s2], 1e-6);
}

/// Two state elements, one token: A is [1, 1] (Mamba-2) or [2, 1] (Mamba-1).
fn scan_two_states(a: &[f32]) -> Vec<f32> {
    let mut g = Graph::new();
    let s = g.input("s", DType::F32, &[2, 1, 1, 1]).unwrap();
    let x = g.input("x", DType::F32, &[1, 1, 1, 1]).unwrap();
    let dt = g.input("dt", DType::F32, &[1, 1, 1]).unwrap();
    let av = g.input("A", DType::F32, &[a.len() as i64, 1]).unwrap();
    let b = g.input("B", DType::F32, &[2, 1, 1, 1]).unwrap();
    let c = g.input("C", DType::F32, &[2, 1, 1, 1]).unwrap();
    let ids = g.input("ids", DType::I32, &[1]).unwrap();
    let y = g.ssm_scan(s, x, dt, av, b, c, ids).unwrap();
    let inputs: [(TensorId, &[f32]); 6] = [
        (s, &[2., 3.]),
        (x, &[1.]),
        (dt, &[0.]),
        (av, a),
        (b, &[1., 1.]),
        (c, &[1., 1.]),
    ];
    run(&g, &inputs, &[(ids, &[0])]).unwrap().get_f32(&g, y)
}

#[test]
fn ssm_scan_mamba1_decays_each_state_element_by_its_own_a() {
    let l = 2f64.ln();
    let (m2a, m2b) = (2.0 * 0.5 + l, 3.0 * 0.5 + l);
    assert_close(&scan_two_states(&[-1.0]), &[m2a + m2b, m2a, m2b], 1e-6);
    let (m1a, m1b) = (2.0 * 0.5 + l, 3.0 + l);
    assert_close(&scan_two_states(&[-1.0, 0.0]), &[m1a + m1b, m1a, m1b], 1e-6);
}

#[test]
fn ssm_scan_state_slot_out_of_range_is_an_error() {
    let mut g = Graph::new();
    let s = g.input("s", DType::F32, &[1, 1, 1, 1]).unwrap();
    let x = g.input("x", DType::F32, &[1, 1, 1, 1]).unwrap();
    let dt = g.input("dt", DType::F32, &[1, 1, 1]).unwrap();
    let av = g.input("A", DType::F32, &[1, 1]).unwrap();
    let b = g.input("B", DType::F32, &[1, 1, 1, 1]).unwrap();
    let c = g.input("C", DType::F32, &[1, 1, 1, 1]).unwrap();
    let ids = g.input("ids", DType::I32, &[1]).unwrap();
    g.ssm_scan(s, x, dt, av, b, c, ids).unwrap();
    let msg = run(&g, &[], &[(ids, &[3])]).err().unwrap().to_string();
    assert!(
        msg.contains("SSM_SCAN") && msg.contains("ids[0] = 3"),
        "{msg}"
    );
}
