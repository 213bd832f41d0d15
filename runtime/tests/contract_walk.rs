//! Every op through the builder and the op contract: the builder's result
//! is the one the contract computes, and every op is covered.

use std::collections::BTreeSet;

use backplane_abi::contract;
use backplane_abi::{GluOp, rope_mode};
use backplane_runtime::{
    Conv2dParams, DType, Graph, GraphError, Op, RopeParams, SortOrder, UnaryOp,
};

/// Builds one valid node of every op (leaves aside).
fn one_of_each() -> Result<Graph, GraphError> {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[8, 4, 2])?;
    let b = g.input("b", DType::F32, &[8, 1, 2])?;
    g.add(a, b)?;
    g.sub(a, b)?;
    g.mul_inplace(a, b)?;
    g.div(a, b)?;
    g.sqr(a)?;
    g.sqrt(a)?;
    g.log(a)?;
    g.sin(a)?;
    g.cos(a)?;
    g.scale(a, 0.5)?;
    g.clamp(a, -1.0, 1.0)?;
    g.fill(a, 2.0)?;
    g.unary(a, UnaryOp::Silu)?;
    g.glu_split(a, GluOp::Swiglu, false)?;
    g.sum(a)?;
    g.sum_rows(a)?;
    g.cumsum(a)?;
    let m = g.input("m", DType::F32, &[8, 4])?;
    g.argmax(m)?;
    g.argsort(a, SortOrder::Desc)?;
    g.top_k(a, 3)?;
    let r = g.reshape(a, &[16, 4])?;
    g.view(r, &[8, 2], &[64], 32)?;
    g.permute(a, [1, 0, 2, 3])?;
    g.transpose(m)?;
    g.cont(a)?;
    let h = g.input("h", DType::F16, &[8, 4, 2])?;
    g.cpy(a, h)?;
    g.repeat(b, a)?;
    g.concat(a, a, 1)?;
    g.pad(a, [1, 0, 0, 2, 0, 0, 0, 0])?;
    let idx = g.input("idx", DType::I32, &[3, 2])?;
    g.get_rows(a, idx)?;
    let cache = g.weight("cache", DType::F16, &[8, 6, 2])?;
    let rows = g.input("rows", DType::I64, &[4])?;
    let src = g.input("src", DType::F32, &[8, 4, 2])?;
    g.set_rows(cache, src, rows)?;
    let w = g.weight("w", DType::Q8_0, &[32, 5])?;
    let x = g.input("x", DType::F32, &[32, 3])?;
    g.mul_mat(w, x)?;
    let experts = g.weight("experts", DType::F16, &[32, 5, 4])?;
    let xe = g.input("xe", DType::F32, &[32, 1, 3])?;
    let ids = g.input("ids", DType::I32, &[2, 3])?;
    g.mul_mat_id(experts, xe, ids)?;
    g.norm(a, 1e-5)?;
    g.rms_norm(a, 1e-5)?;
    g.l2_norm(a, 1e-5)?;
    let mask = g.input("mask", DType::F16, &[8, 4])?;
    g.soft_max(a, Some(mask), None, 0.5, 0.0)?;
    let q = g.input("q", DType::F32, &[8, 4, 2])?;
    let pos = g.input("pos", DType::I32, &[2])?;
    g.rope(q, pos, None, RopeParams::new(8, rope_mode::NEOX))?;
    let k = g.input("k", DType::F16, &[8, 6, 1])?;
    let kmask = g.input("kmask", DType::F16, &[6, 4])?;
    g.flash_attn_ext(q, k, k, Some(kmask), None, 0.3, 0.0, 0.0)?;
    let kernel = g.weight("kernel", DType::F16, &[3, 3, 2, 4])?;
    let image = g.input("image", DType::F32, &[6, 5, 2])?;
    let p = Conv2dParams {
        s0: 1,
        s1: 1,
        p0: 1,
        p1: 1,
        d0: 1,
        d1: 1,
    };
    g.conv_2d(kernel, image, p)?;
    g.im2col(kernel, image, p, true, DType::F16)?;
    let sx = g.input("sx", DType::F32, &[6, 4, 2])?;
    let c = g.weight("c", DType::F32, &[3, 4])?;
    g.ssm_conv(sx, c)?;
    let (d_state, head_dim, n_head, n_tok) = (4, 2, 2, 3);
    let s = g.input("s", DType::F32, &[d_state, head_dim, n_head, 2])?;
    let xs = g.input("xs", DType::F32, &[head_dim, n_head, n_tok, 1])?;
    let dt = g.input("dt", DType::F32, &[n_head, n_tok, 1])?;
    let decay = g.input("A", DType::F32, &[1, n_head])?;
    let bm = g.input("B", DType::F32, &[d_state, 1, n_tok, 1])?;
    let cm = g.input("C", DType::F32, &[d_state, 1, n_tok, 1])?;
    let seq = g.input("seq", DType::I32, &[1])?;
    g.ssm_scan(s, xs, dt, decay, bm, cm, seq)?;
    Ok(g)
}

#[test]
fn every_op_is_built_to_the_result_its_contract_computes() {
    let g = one_of_each().expect("every node is valid");
    let graph = g.tensors();
    let mut seen = BTreeSet::new();
    for (i, d) in graph.iter().enumerate() {
        let op = d.op().unwrap();
        if op == Op::None {
            continue;
        }
        seen.insert(op);
        let shape = contract::check_node(graph, i).unwrap_or_else(|e| panic!("node {i}: {e}"));
        assert_eq!((shape.dtype.code(), shape.ne), (d.dtype, d.ne), "{op}");
        assert!(contract::family(op).is_some(), "{op} has no family");
    }
    let all: BTreeSet<Op> = Op::ALL.iter().copied().filter(|&o| o != Op::None).collect();
    let missing: Vec<&Op> = all.difference(&seen).collect();
    assert!(missing.is_empty(), "ops not walked: {missing:?}");
}

#[test]
fn the_builder_refuses_with_the_contracts_reason() {
    let mut g = Graph::new();
    let sx = g.input("sx", DType::F32, &[6, 4, 2]).unwrap();
    let c = g.weight("c", DType::F16, &[3, 4]).unwrap();
    let err = g.ssm_conv(sx, c).unwrap_err();
    assert_eq!(err.to_string(), "SSM_CONV: c: expected type f32, found f16");
    let a = g.input("a", DType::F32, &[8, 4]).unwrap();
    let err = g.top_k(a, 9).unwrap_err();
    assert_eq!(
        err.to_string(),
        "TOP_K: op_params[0] (k): expected a count in 1..=8 (a's ne0), found 9"
    );
}
