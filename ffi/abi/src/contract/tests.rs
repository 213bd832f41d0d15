//! One test per rule class (type, shape, parameter, accepted with its
//! result) per family, and the shared wording once.

use super::*;
use crate::{GluOp, MAX_SRC, UnaryOp, rope_mode};

fn t(dtype: DType, ne: [i64; 4]) -> TensorDesc {
    TensorDesc::new(dtype, ne)
}

fn f32t(ne: [i64; 4]) -> TensorDesc {
    t(DType::F32, ne)
}

/// The result of `op` over `srcs` with `params`.
fn run(
    op: Op,
    params: &[(usize, i32)],
    srcs: &[Option<&TensorDesc>],
    chosen: Chosen<'_>,
) -> Result<Shape, Refusal> {
    let mut p = [0; MAX_OP_PARAMS];
    for &(i, v) in params {
        p[i] = v;
    }
    result(op, &p, srcs, chosen)
}

fn f(v: f32) -> i32 {
    v.to_bits() as i32
}

/// The operand a refusal names.
fn operand(r: Result<Shape, Refusal>) -> String {
    r.expect_err("the rule should refuse").operand
}

fn shape(dtype: DType, ne: [i64; 4]) -> Shape {
    Shape { dtype, ne }
}

#[test]
fn refusals_share_one_wording() {
    let sx = f32t([6, 4, 2, 1]);
    let c = t(DType::F16, [3, 4, 1, 1]);
    let r = run(Op::SsmConv, &[], &[Some(&sx), Some(&c)], Chosen::Nothing).unwrap_err();
    assert_eq!(r.to_string(), "SSM_CONV: c: expected type f32, found f16");
    assert_eq!(r.detail(), "c: expected type f32, found f16");
    let q = t(DType::F16, [4, 1, 1, 1]);
    let k = f32t([4, 1, 1, 1]);
    let r = run(
        Op::FlashAttnExt,
        &[],
        &[Some(&q), Some(&k), Some(&k)],
        Chosen::Nothing,
    )
    .unwrap_err();
    assert_eq!(
        r.to_string(),
        "FLASH_ATTN_EXT: q: expected type f32, found f16"
    );
    assert_eq!(
        type_list(&[DType::F32, DType::F16, DType::BF16]),
        "type f32, f16 or bf16"
    );
}

#[test]
fn every_op_has_a_family_and_a_rule() {
    for &op in Op::ALL {
        if op == Op::None {
            assert_eq!(family(op), None);
            continue;
        }
        let fam = family(op).unwrap_or_else(|| panic!("{op} has no family"));
        assert!(FAMILIES.iter().any(|(name, _)| *name == fam));
        // Every rule answers (it refuses a node without sources by name).
        let dst = f32t([1, 1, 1, 1]);
        let none: [Option<&TensorDesc>; MAX_SRC] = [None; MAX_SRC];
        let r = check(op, &dst, &none).unwrap_err();
        assert_eq!(r.op, op);
        assert!(r.found == "none", "{op}: {r}");
    }
    let listed: usize = FAMILIES.iter().map(|(_, ops)| ops.len()).sum();
    assert_eq!(listed, Op::ALL.len() - 1, "each op in exactly one family");
}

#[test]
fn check_compares_the_node_with_the_result_it_should_have() {
    let sx = f32t([6, 4, 2, 1]);
    let c = f32t([3, 4, 1, 1]);
    let good = f32t([4, 4, 2, 1]);
    assert_eq!(
        check(Op::SsmConv, &good, &[Some(&sx), Some(&c)]),
        Ok(shape(DType::F32, [4, 4, 2, 1]))
    );
    let bad = f32t([4, 3, 2, 1]);
    let r = check(Op::SsmConv, &bad, &[Some(&sx), Some(&c)]).unwrap_err();
    assert_eq!(
        r.to_string(),
        "SSM_CONV: result: expected [4, 4, 2, 1] f32, found [4, 3, 2, 1] f32"
    );
    let empty = f32t([0, 4, 2, 1]);
    assert_eq!(
        operand(check(Op::SsmConv, &good, &[Some(&empty), Some(&c)])),
        "src0"
    );
}

// ssm

#[test]
fn ssm_conv_rules() {
    let sx = f32t([6, 4, 2, 1]);
    let c = f32t([3, 4, 1, 1]);
    assert_eq!(
        run(Op::SsmConv, &[], &[Some(&sx), Some(&c)], Chosen::Nothing),
        Ok(shape(DType::F32, [4, 4, 2, 1]))
    );
    let c5 = f32t([3, 5, 1, 1]);
    let r = run(Op::SsmConv, &[], &[Some(&sx), Some(&c5)], Chosen::Nothing).unwrap_err();
    assert_eq!(
        r.detail(),
        "sx: expected ne0 >= 3 (c's d_conv) and ne1 = 5 (c's d_inner), found [6, 4, 2, 1] f32"
    );
    let c3d = f32t([3, 4, 2, 1]);
    assert_eq!(
        operand(run(
            Op::SsmConv,
            &[],
            &[Some(&sx), Some(&c3d)],
            Chosen::Nothing
        )),
        "c"
    );
}

fn scan_operands() -> [TensorDesc; 7] {
    let (d_state, head_dim, n_head, n_tok, n_seqs) = (4, 2, 2, 3, 1);
    [
        f32t([d_state, head_dim, n_head, 2]),
        f32t([head_dim, n_head, n_tok, n_seqs]),
        f32t([n_head, n_tok, n_seqs, 1]),
        f32t([1, n_head, 1, 1]),
        f32t([d_state, 1, n_tok, n_seqs]),
        f32t([d_state, 1, n_tok, n_seqs]),
        t(DType::I32, [n_seqs, 1, 1, 1]),
    ]
}

#[test]
fn ssm_scan_rules() {
    let ops = scan_operands();
    let srcs: Vec<Option<&TensorDesc>> = ops.iter().map(Some).collect();
    // y (2*2*3) then the states (4*2*2*1).
    assert_eq!(
        run(Op::SsmScan, &[], &srcs, Chosen::Nothing),
        Ok(shape(DType::F32, [12 + 16, 1, 1, 1]))
    );
    let ids = t(DType::I64, [1, 1, 1, 1]);
    let mut bad = srcs.clone();
    bad[6] = Some(&ids);
    assert_eq!(operand(run(Op::SsmScan, &[], &bad, Chosen::Nothing)), "ids");
    let dt = f32t([3, 3, 1, 1]);
    let mut bad = srcs.clone();
    bad[2] = Some(&dt);
    assert_eq!(operand(run(Op::SsmScan, &[], &bad, Chosen::Nothing)), "dt");
}

// attention

fn attn(
    q: &TensorDesc,
    k: &TensorDesc,
    mask: Option<&TensorDesc>,
    max_bias: f32,
) -> Result<Shape, Refusal> {
    run(
        Op::FlashAttnExt,
        &[(1, f(max_bias))],
        &[Some(q), Some(k), Some(k), mask],
        Chosen::Nothing,
    )
}

#[test]
fn flash_attn_ext_rules() {
    let q = f32t([8, 3, 4, 1]);
    let k = t(DType::F16, [8, 5, 2, 1]);
    let mask = t(DType::F16, [5, 3, 1, 1]);
    assert_eq!(
        attn(&q, &k, Some(&mask), 0.0),
        Ok(shape(DType::F32, [8, 4, 3, 1]))
    );
    let k_bad = t(DType::F16, [8, 5, 3, 1]);
    assert_eq!(operand(attn(&q, &k_bad, None, 0.0)), "k");
    let k_q2k = t(DType::Q2_K, [256, 5, 2, 1]);
    let q256 = f32t([256, 3, 4, 1]);
    let r = attn(&q256, &k_q2k, None, 0.0).unwrap_err();
    assert_eq!(
        r.detail(),
        "k: expected type f32, f16, bf16, q4_0, q4_1, q5_0, q5_1 or q8_0, found q2_K"
    );
    let r = attn(&q, &k, None, 8.0).unwrap_err();
    assert_eq!(
        r.detail(),
        "op_params[1] (max_bias): expected 0 without a mask, found 8"
    );
    let short = t(DType::F16, [5, 2, 1, 1]);
    assert_eq!(operand(attn(&q, &k, Some(&short), 0.0)), "mask");
}

// softmax

#[test]
fn soft_max_rules() {
    let a = f32t([6, 3, 2, 1]);
    let mask = t(DType::F16, [6, 4, 1, 1]);
    let sinks = f32t([2, 1, 1, 1]);
    let srcs = [Some(&a), Some(&mask), Some(&sinks)];
    assert_eq!(
        run(Op::SoftMax, &[(1, f(8.0))], &srcs, Chosen::Nothing),
        Ok(shape(DType::F32, a.ne))
    );
    let mask_i32 = t(DType::I32, [6, 4, 1, 1]);
    assert_eq!(
        operand(run(
            Op::SoftMax,
            &[],
            &[Some(&a), Some(&mask_i32)],
            Chosen::Nothing
        )),
        "mask"
    );
    let few = f32t([1, 1, 1, 1]);
    assert_eq!(
        operand(run(
            Op::SoftMax,
            &[],
            &[Some(&a), None, Some(&few)],
            Chosen::Nothing
        )),
        "sinks"
    );
    assert_eq!(
        operand(run(
            Op::SoftMax,
            &[(1, f(8.0))],
            &[Some(&a)],
            Chosen::Nothing
        )),
        "op_params[1] (max_bias)"
    );
}

// matmul

#[test]
fn mul_mat_rules() {
    let a = t(DType::Q4_0, [64, 5, 2, 1]);
    let b = f32t([64, 3, 4, 1]);
    assert_eq!(
        run(Op::MulMat, &[], &[Some(&a), Some(&b)], Chosen::Nothing),
        Ok(shape(DType::F32, [5, 3, 4, 1]))
    );
    let b3 = f32t([64, 3, 3, 1]);
    assert_eq!(
        operand(run(
            Op::MulMat,
            &[],
            &[Some(&a), Some(&b3)],
            Chosen::Nothing
        )),
        "b"
    );
    let q8k = t(DType::Q8_K, [256, 5, 1, 1]);
    let b256 = f32t([256, 1, 1, 1]);
    assert_eq!(
        operand(run(
            Op::MulMat,
            &[],
            &[Some(&q8k), Some(&b256)],
            Chosen::Nothing
        )),
        "a"
    );
    let mut at = f32t([5, 64, 1, 1]);
    at.ne.swap(0, 1);
    at.nb.swap(0, 1);
    let b1 = f32t([64, 3, 1, 1]);
    let r = run(Op::MulMat, &[], &[Some(&at), Some(&b1)], Chosen::Nothing).unwrap_err();
    assert!(
        r.detail().starts_with("a: expected rows not transposed"),
        "{r}"
    );
}

#[test]
fn mul_mat_id_rules() {
    let experts = t(DType::Q8_0, [32, 6, 4, 1]);
    let b = f32t([32, 1, 5, 1]);
    let ids = t(DType::I32, [2, 5, 1, 1]);
    assert_eq!(
        run(
            Op::MulMatId,
            &[],
            &[Some(&experts), Some(&b), Some(&ids)],
            Chosen::Nothing
        ),
        Ok(shape(DType::F32, [6, 2, 5, 1]))
    );
    let ids_f = f32t([2, 5, 1, 1]);
    assert_eq!(
        operand(run(
            Op::MulMatId,
            &[],
            &[Some(&experts), Some(&b), Some(&ids_f)],
            Chosen::Nothing
        )),
        "ids"
    );
    let b_bad = f32t([32, 3, 5, 1]);
    assert_eq!(
        operand(run(
            Op::MulMatId,
            &[],
            &[Some(&experts), Some(&b_bad), Some(&ids)],
            Chosen::Nothing
        )),
        "b"
    );
}

// norm

#[test]
fn norm_rules() {
    let a = f32t([8, 2, 1, 1]);
    assert_eq!(
        run(Op::RmsNorm, &[(0, f(1e-5))], &[Some(&a)], Chosen::Nothing),
        Ok(shape(DType::F32, a.ne))
    );
    let h = t(DType::F16, [8, 2, 1, 1]);
    assert_eq!(
        operand(run(Op::Norm, &[], &[Some(&h)], Chosen::Nothing)),
        "a"
    );
    assert_eq!(
        operand(run(
            Op::L2Norm,
            &[(0, f(-1.0))],
            &[Some(&a)],
            Chosen::Nothing
        )),
        "op_params[0] (eps)"
    );
    // A transposed view: its rows are not dense.
    let mut at = f32t([2, 8, 1, 1]);
    at.ne.swap(0, 1);
    at.nb.swap(0, 1);
    let r = run(Op::Norm, &[], &[Some(&at)], Chosen::Nothing).unwrap_err();
    assert!(
        r.detail()
            .starts_with("a: expected contiguous rows, found [8, 2, 1, 1] f32"),
        "{r}"
    );
}

// rope

#[test]
fn rope_rules() {
    let a = t(DType::F16, [8, 2, 3, 1]);
    let pos = t(DType::I32, [3, 1, 1, 1]);
    let ok = run(
        Op::Rope,
        &[(1, 8), (2, rope_mode::NEOX)],
        &[Some(&a), Some(&pos)],
        Chosen::Nothing,
    );
    assert_eq!(ok, Ok(shape(DType::F16, a.ne)));
    let bf = t(DType::BF16, [8, 2, 3, 1]);
    assert_eq!(
        operand(run(
            Op::Rope,
            &[(1, 8)],
            &[Some(&bf), Some(&pos)],
            Chosen::Nothing
        )),
        "a"
    );
    // Multi-section rope needs sections summing to at most ne0.
    let pos4 = t(DType::I32, [12, 1, 1, 1]);
    assert_eq!(
        operand(run(
            Op::Rope,
            &[(1, 8), (2, rope_mode::MROPE)],
            &[Some(&a), Some(&pos4)],
            Chosen::Nothing
        )),
        "op_params[11..15] (sections)"
    );
    assert_eq!(
        run(
            Op::Rope,
            &[(1, 8), (2, rope_mode::MROPE), (11, 2), (12, 2)],
            &[Some(&a), Some(&pos4)],
            Chosen::Nothing
        ),
        Ok(shape(DType::F16, a.ne))
    );
    assert_eq!(
        operand(run(
            Op::Rope,
            &[(1, 8), (2, rope_mode::MROPE)],
            &[Some(&a), Some(&pos)],
            Chosen::Nothing
        )),
        "pos"
    );
    assert_eq!(
        operand(run(
            Op::Rope,
            &[(1, 7)],
            &[Some(&a), Some(&pos)],
            Chosen::Nothing
        )),
        "op_params[1] (n_dims)"
    );
    assert_eq!(
        operand(run(
            Op::Rope,
            &[(1, 8), (2, 5)],
            &[Some(&a), Some(&pos)],
            Chosen::Nothing
        )),
        "op_params[2] (mode)"
    );
}

// conv

#[test]
fn conv_rules() {
    let geometry = [(0, 1), (1, 1), (2, 1), (3, 1), (4, 1), (5, 1)];
    let k = t(DType::F16, [3, 3, 2, 4]);
    let x = f32t([5, 5, 2, 1]);
    assert_eq!(
        run(
            Op::Conv2d,
            &geometry,
            &[Some(&k), Some(&x)],
            Chosen::Nothing
        ),
        Ok(shape(DType::F32, [5, 5, 4, 1]))
    );
    let x3 = f32t([5, 5, 3, 1]);
    assert_eq!(
        operand(run(
            Op::Conv2d,
            &geometry,
            &[Some(&k), Some(&x3)],
            Chosen::Nothing
        )),
        "input"
    );
    assert_eq!(
        operand(run(
            Op::Conv2d,
            &[(1, 1), (4, 1), (5, 1)],
            &[Some(&k), Some(&x)],
            Chosen::Nothing
        )),
        "op_params[0..6] (s0, s1, p0, p1, d0, d1)"
    );
    let mut im = geometry.to_vec();
    im.push((6, 1));
    assert_eq!(
        run(
            Op::Im2col,
            &im,
            &[Some(&k), Some(&x)],
            Chosen::Type(DType::F16)
        ),
        Ok(shape(DType::F16, [18, 5, 5, 1]))
    );
    assert_eq!(
        operand(run(
            Op::Im2col,
            &im,
            &[Some(&k), Some(&x)],
            Chosen::Type(DType::BF16)
        )),
        "result"
    );
    assert_eq!(conv_output_size(5, 3, 2, 0, 1), 2);
}

// binary, unary

#[test]
fn binary_rules() {
    let a = f32t([4, 3, 2, 1]);
    let b = t(DType::F16, [4, 1, 2, 1]);
    assert_eq!(
        run(Op::Add, &[], &[Some(&a), Some(&b)], Chosen::Nothing),
        Ok(shape(DType::F32, a.ne))
    );
    let b3 = f32t([3, 1, 1, 1]);
    assert_eq!(
        operand(run(Op::Mul, &[], &[Some(&a), Some(&b3)], Chosen::Nothing)),
        "b"
    );
    let i = t(DType::I32, [4, 3, 2, 1]);
    assert_eq!(
        operand(run(Op::Sub, &[], &[Some(&i), Some(&b)], Chosen::Nothing)),
        "a"
    );
}

#[test]
fn unary_and_glu_rules() {
    let a = t(DType::BF16, [6, 2, 1, 1]);
    assert_eq!(
        run(
            Op::Unary,
            &[(0, UnaryOp::Silu.code() as i32)],
            &[Some(&a)],
            Chosen::Nothing
        ),
        Ok(shape(DType::BF16, a.ne))
    );
    assert_eq!(
        operand(run(Op::Unary, &[(0, 99)], &[Some(&a)], Chosen::Nothing)),
        "op_params[0] (function)"
    );
    let i = t(DType::I32, [6, 2, 1, 1]);
    assert_eq!(
        operand(run(Op::Sqr, &[], &[Some(&i)], Chosen::Nothing)),
        "a"
    );
    let swiglu = [(0, GluOp::Swiglu.code() as i32)];
    assert_eq!(
        run(Op::Glu, &swiglu, &[Some(&a)], Chosen::Nothing),
        Ok(shape(DType::BF16, [3, 2, 1, 1]))
    );
    let odd = t(DType::BF16, [5, 2, 1, 1]);
    assert_eq!(
        operand(run(Op::Glu, &swiglu, &[Some(&odd)], Chosen::Nothing)),
        "a"
    );
}

// reduce

#[test]
fn reduce_rules() {
    let a = f32t([6, 2, 3, 1]);
    assert_eq!(
        run(Op::SumRows, &[], &[Some(&a)], Chosen::Nothing),
        Ok(shape(DType::F32, [1, 2, 3, 1]))
    );
    assert_eq!(
        run(Op::TopK, &[(0, 2)], &[Some(&a)], Chosen::Nothing),
        Ok(shape(DType::I32, [2, 2, 3, 1]))
    );
    assert_eq!(
        operand(run(Op::TopK, &[(0, 7)], &[Some(&a)], Chosen::Nothing)),
        "op_params[0] (k)"
    );
    assert_eq!(
        operand(run(Op::Argmax, &[], &[Some(&a)], Chosen::Nothing)),
        "a"
    );
    let h = t(DType::F16, [6, 2, 1, 1]);
    assert_eq!(
        operand(run(Op::Argsort, &[], &[Some(&h)], Chosen::Nothing)),
        "a"
    );
}

// layout

#[test]
fn layout_rules() {
    let a = f32t([4, 3, 2, 1]);
    let rows = t(DType::I32, [5, 2, 1, 1]);
    assert_eq!(
        run(Op::GetRows, &[], &[Some(&a), Some(&rows)], Chosen::Nothing),
        Ok(shape(DType::F32, [4, 5, 2, 1]))
    );
    let rows_bad = t(DType::I32, [5, 3, 1, 1]);
    assert_eq!(
        operand(run(
            Op::GetRows,
            &[],
            &[Some(&a), Some(&rows_bad)],
            Chosen::Nothing
        )),
        "rows"
    );
    let b = t(DType::I32, [4, 3, 2, 1]);
    assert_eq!(
        operand(run(
            Op::Concat,
            &[(0, 1)],
            &[Some(&a), Some(&b)],
            Chosen::Nothing
        )),
        "b"
    );
    assert_eq!(
        run(
            Op::Concat,
            &[(0, 1)],
            &[Some(&a), Some(&a)],
            Chosen::Nothing
        ),
        Ok(shape(DType::F32, [4, 6, 2, 1]))
    );
    assert_eq!(
        operand(run(
            Op::Concat,
            &[(0, 4)],
            &[Some(&a), Some(&a)],
            Chosen::Nothing
        )),
        "op_params[0] (dim)"
    );
    assert_eq!(
        run(
            Op::Permute,
            &[(0, 2), (1, 0), (2, 1), (3, 3)],
            &[Some(&a)],
            Chosen::Nothing
        ),
        Ok(shape(DType::F32, [3, 2, 4, 1]))
    );
    let q = t(DType::Q8_0, [64, 2, 1, 1]);
    assert_eq!(
        run(
            Op::Cpy,
            &[],
            &[Some(&f32t([64, 2, 1, 1])), Some(&q)],
            Chosen::Nothing
        ),
        Ok(shape(DType::Q8_0, [64, 2, 1, 1]))
    );
    let dst = t(DType::F16, [4, 9, 2, 1]);
    let src = f32t([4, 5, 2, 1]);
    let idx = t(DType::I64, [5, 1, 1, 1]);
    assert_eq!(
        run(
            Op::SetRows,
            &[],
            &[Some(&src), Some(&idx)],
            Chosen::Result(&dst)
        ),
        Ok(shape(DType::F16, dst.ne))
    );
    assert_eq!(
        operand(run(
            Op::SetRows,
            &[],
            &[Some(&src), Some(&idx)],
            Chosen::Nothing
        )),
        "result"
    );
}
