//! Graph building: shape inference, views and the errors op constructors give.

use backplane_runtime::{DType, Graph, GraphError, Op, RopeParams, SortOrder, UnaryOp, rope_mode};
use proptest::prelude::*;

fn err_text(e: GraphError) -> String {
    e.to_string()
}

#[test]
fn mul_mat_infers_ggml_shape() {
    let mut g = Graph::new();
    let a = g.weight("w", DType::Q4_0, &[64, 10, 2]).unwrap();
    let b = g.input("x", DType::F32, &[64, 3, 4, 2]).unwrap();
    let c = g.mul_mat(a, b).unwrap();
    assert_eq!(g.ne(c), [10, 3, 4, 2]);
    assert_eq!(g.dtype(c), DType::F32);
    assert_eq!(g.op(c), Op::MulMat);
    assert_eq!(g.sources(c).collect::<Vec<_>>(), vec![a, b]);
}

#[test]
fn mul_mat_mismatch_names_op_and_shapes() {
    let mut g = Graph::new();
    let a = g.weight("w", DType::F32, &[64, 10]).unwrap();
    let b = g.input("x", DType::F32, &[32, 3]).unwrap();
    let msg = err_text(g.mul_mat(a, b).unwrap_err());
    assert_eq!(
        msg,
        "MUL_MAT: b: expected ne0 = 64 and ne2, ne3 multiples of 1, 1 (a is [64, 10, 1, 1] f32), found [32, 3, 1, 1] f32"
    );
}

#[test]
fn add_refuses_shapes_that_do_not_broadcast() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[6, 4]).unwrap();
    let b = g.input("b", DType::F32, &[4, 4]).unwrap();
    let msg = err_text(g.add(a, b).unwrap_err());
    assert_eq!(
        msg,
        "ADD: b: expected dims dividing a's [6, 4, 1, 1] (b broadcasts over a), found [4, 4, 1, 1] f32"
    );
    let row = g.input("row", DType::F32, &[6]).unwrap();
    let c = g.add(a, row).unwrap();
    assert_eq!(g.ne(c), [6, 4, 1, 1]);
}

#[test]
fn inplace_add_aliases_its_destination() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[6, 4]).unwrap();
    let b = g.input("b", DType::F32, &[6]).unwrap();
    let c = g.add_inplace(a, b).unwrap();
    assert_eq!(g.storage_root(c), a);
    assert_eq!(g.desc(c).view_source(), Some(a.index()));
}

#[test]
fn leaf_with_partial_block_is_refused() {
    let mut g = Graph::new();
    let msg = err_text(g.weight("w", DType::Q4_K, &[100, 2]).unwrap_err());
    assert!(
        msg.contains("'w'") && msg.contains("block size 256"),
        "{msg}"
    );
    assert!(g.input("zero", DType::F32, &[0]).is_err());
    assert!(g.input("five", DType::F32, &[1, 1, 1, 1, 1]).is_err());
}

#[test]
fn view_past_the_end_is_refused() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[8, 4]).unwrap();
    assert!(g.view(a, &[8, 2], &[32], 64).is_ok());
    let msg = err_text(g.view(a, &[8, 2], &[32], 96).unwrap_err());
    assert!(
        msg.starts_with("VIEW:") && msg.contains("past the end"),
        "{msg}"
    );
}

#[test]
fn transpose_swaps_shape_and_strides() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[5, 3]).unwrap();
    let t = g.transpose(a).unwrap();
    assert_eq!(g.op(t), Op::Transpose);
    assert_eq!(g.ne(t), [3, 5, 1, 1]);
    assert_eq!(g.desc(t).nb[..2], [20, 4]);
    assert!(g.desc(t).is_transposed());
    let c = g.cont(t).unwrap();
    assert!(g.desc(c).is_contiguous());
}

#[test]
fn reshape_needs_contiguous_source() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[5, 3]).unwrap();
    let t = g.transpose(a).unwrap();
    let msg = err_text(g.reshape(t, &[15]).unwrap_err());
    assert!(
        msg.contains("RESHAPE") && msg.contains("contiguous"),
        "{msg}"
    );
    let msg = err_text(g.reshape(a, &[4, 4]).unwrap_err());
    assert!(msg.contains("15 elements"), "{msg}");
}

#[test]
fn flash_attn_result_is_head_major() {
    let mut g = Graph::new();
    let q = g.input("q", DType::F32, &[128, 7, 8, 1]).unwrap();
    let k = g.input("k", DType::F16, &[128, 32, 2, 1]).unwrap();
    let v = g.input("v", DType::F16, &[128, 32, 2, 1]).unwrap();
    let m = g.input("m", DType::F16, &[32, 7]).unwrap();
    let o = g
        .flash_attn_ext(q, k, v, Some(m), None, 0.1, 0.0, 0.0)
        .unwrap();
    assert_eq!(g.ne(o), [128, 8, 7, 1]);
    assert_eq!(g.desc(o).src(3), Some(m.index()));
    assert_eq!(g.desc(o).src(4), None);
    let bad = g.input("bad", DType::F16, &[31, 7]).unwrap();
    assert!(
        g.flash_attn_ext(q, k, v, Some(bad), None, 0.1, 0.0, 0.0)
            .is_err()
    );
}

#[test]
fn soft_max_without_mask_leaves_slot_empty() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[10, 4, 2]).unwrap();
    let s = g.input("s", DType::F32, &[2]).unwrap();
    let o = g.soft_max(a, None, Some(s), 1.0, 0.0).unwrap();
    assert_eq!(g.desc(o).src(1), None);
    assert_eq!(g.desc(o).src(2), Some(s.index()));
    assert!(
        g.soft_max(a, None, None, 1.0, 8.0).is_err(),
        "ALiBi needs a mask"
    );
}

#[test]
fn rope_stores_ggml_params() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[64, 4, 5]).unwrap();
    let p = g.input("p", DType::I32, &[5]).unwrap();
    let mut params = RopeParams::new(32, rope_mode::NEOX);
    params.freq_base = 500000.0;
    let r = g.rope(a, p, None, params).unwrap();
    let d = g.desc(r);
    assert_eq!(d.param_i32(1), 32);
    assert_eq!(d.param_i32(2), rope_mode::NEOX);
    assert_eq!(d.param_f32(5), 500000.0);
    let short = g.input("p2", DType::I32, &[4]).unwrap();
    assert!(g.rope(a, short, None, params).is_err());
}

#[test]
fn index_ops_produce_i32() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[10, 3]).unwrap();
    let s = g.argsort(a, SortOrder::Desc).unwrap();
    assert_eq!(g.dtype(s), DType::I32);
    let k = g.top_k(a, 4).unwrap();
    assert_eq!(g.ne(k), [4, 3, 1, 1]);
    assert!(g.top_k(a, 11).is_err());
    let m = g.argmax(a).unwrap();
    assert_eq!(g.ne(m), [3, 1, 1, 1]);
}

#[test]
fn set_rows_aliases_destination_and_checks_index_type() {
    let mut g = Graph::new();
    let dst = g.input("cache", DType::F16, &[8, 16]).unwrap();
    let src = g.input("new", DType::F32, &[8, 3]).unwrap();
    let idx = g.input("idx", DType::I64, &[3]).unwrap();
    let r = g.set_rows(dst, src, idx).unwrap();
    assert_eq!(g.storage_root(r), dst);
    let fidx = g.input("fidx", DType::F32, &[3]).unwrap();
    let msg = err_text(g.set_rows(dst, src, fidx).unwrap_err());
    assert!(msg.contains("SET_ROWS") && msg.contains("rows"), "{msg}");
}

#[test]
fn unary_refuses_integer_tensors() {
    let mut g = Graph::new();
    let a = g.input("a", DType::I32, &[4]).unwrap();
    let msg = err_text(g.unary(a, UnaryOp::Silu).unwrap_err());
    assert!(msg.starts_with("UNARY:") && msg.contains("i32"), "{msg}");
}

#[test]
fn foreign_tensor_id_is_an_error() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[4]).unwrap();
    let mut other = Graph::new();
    for _ in 0..3 {
        other.input("x", DType::F32, &[4]).unwrap();
    }
    let far = other.input("far", DType::F32, &[4]).unwrap();
    assert!(matches!(
        g.add(a, far),
        Err(GraphError::UnknownTensor { id: 3, len: 1 })
    ));
}

fn shape() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(1i64..6, 1..=4)
}

proptest! {
    #[test]
    fn permute_keeps_elements_and_bytes(ne in shape(), perm in Just([0usize, 1, 2, 3]).prop_shuffle()) {
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &ne).unwrap();
        let p = g.permute(a, perm).unwrap();
        let (da, dp) = (*g.desc(a), *g.desc(p));
        prop_assert_eq!(da.nelements(), dp.nelements());
        prop_assert_eq!(da.nbytes(), dp.nbytes());
        for (i, &to) in perm.iter().enumerate() {
            prop_assert_eq!(dp.ne[to], da.ne[i]);
            prop_assert_eq!(dp.nb[to], da.nb[i]);
        }
        let c = g.cont(p).unwrap();
        prop_assert!(g.desc(c).is_contiguous());
        prop_assert_eq!(g.ne(c), dp.ne);
    }

    #[test]
    fn broadcast_add_keeps_a_shape(ne in shape(), mask in 0u8..16) {
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &ne).unwrap();
        let bne: Vec<i64> = ne.iter().enumerate().map(|(i, &n)| if mask >> i & 1 == 1 { 1 } else { n }).collect();
        let b = g.input("b", DType::F32, &bne).unwrap();
        let c = g.add(a, b).unwrap();
        prop_assert_eq!(g.ne(c), g.ne(a));
    }

    #[test]
    fn reshape_round_trips(ne in shape()) {
        let mut g = Graph::new();
        let a = g.input("a", DType::F16, &ne).unwrap();
        let n: i64 = ne.iter().product();
        let flat = g.reshape(a, &[n]).unwrap();
        let back = g.reshape(flat, &ne).unwrap();
        prop_assert_eq!(g.ne(back), g.ne(a));
        prop_assert_eq!(g.desc(back).nb, g.desc(a).nb);
        prop_assert_eq!(g.storage_root(back), a);
    }

    #[test]
    fn mul_mat_shape_inference(k in 1i64..5, m in 1i64..5, n in 1i64..5, a2 in 1i64..3, r2 in 1i64..3, a3 in 1i64..3, r3 in 1i64..3) {
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &[k * 32, m, a2, a3]).unwrap();
        let b = g.input("b", DType::F32, &[k * 32, n, a2 * r2, a3 * r3]).unwrap();
        let c = g.mul_mat(a, b).unwrap();
        prop_assert_eq!(g.ne(c), [m, n, a2 * r2, a3 * r3]);
        let bad = g.input("bad", DType::F32, &[k * 32 + 1, n]).unwrap();
        prop_assert!(g.mul_mat(a, bad).is_err());
    }

    #[test]
    fn views_stay_inside_their_source(ne0 in 1i64..9, ne1 in 1i64..9, off_rows in 0i64..9, rows in 1i64..9) {
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &[ne0, ne1]).unwrap();
        let nb1 = (ne0 * 4) as u64;
        let r = g.view(a, &[ne0, rows], &[nb1], off_rows as u64 * nb1);
        prop_assert_eq!(r.is_ok(), off_rows + rows <= ne1);
    }
}
