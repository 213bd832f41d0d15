//! `SupportsOps`: several supports_op questions in one round trip give the
//! verdicts the single questions give, and a bad question is refused
//! naming it, with the connection still serving.

mod common;

use backplane_abi::{DType, Op, TensorDesc};
use backplane_remote::Limits;
use common::*;

/// Questions, each `(sources..., node)` with the node's sources numbered
/// from the start of its own question: a mat-mul, an add, a mat-mul of
/// i32 data (refused by the CPU) and a unary of f16 data.
fn questions() -> Vec<Vec<TensorDesc>> {
    let leaf = |t: DType, ne: [i64; 4]| TensorDesc::new(t, ne);
    let node = |op: Op, t: DType, ne: [i64; 4], srcs: &[i32]| {
        let mut d = TensorDesc::new(t, ne);
        d.op = op.code();
        d.src[..srcs.len()].copy_from_slice(srcs);
        d
    };
    vec![
        vec![
            leaf(DType::F32, [64, 8, 1, 1]),
            leaf(DType::F32, [64, 4, 1, 1]),
            node(Op::MulMat, DType::F32, [8, 4, 1, 1], &[0, 1]),
        ],
        vec![
            leaf(DType::F32, [16, 3, 1, 1]),
            node(Op::Add, DType::F32, [16, 3, 1, 1], &[0, 0]),
        ],
        vec![
            leaf(DType::I32, [64, 8, 1, 1]),
            leaf(DType::I32, [64, 4, 1, 1]),
            node(Op::MulMat, DType::F32, [8, 4, 1, 1], &[0, 1]),
        ],
        vec![
            leaf(DType::F16, [32, 2, 1, 1]),
            node(Op::Scale, DType::F16, [32, 2, 1, 1], &[0]),
        ],
    ]
}

/// The questions as one graph (sources renumbered) and the node of each.
fn batched(questions: &[Vec<TensorDesc>]) -> (Vec<TensorDesc>, Vec<u32>) {
    let mut graph = Vec::new();
    let mut nodes = Vec::new();
    for q in questions {
        let base = graph.len() as i32;
        graph.extend(q.iter().map(|d| {
            let mut d = *d;
            d.src
                .iter_mut()
                .filter(|s| **s >= 0)
                .for_each(|s| *s += base);
            d
        }));
        nodes.push((graph.len() - 1) as u32);
    }
    (graph, nodes)
}

#[test]
fn batched_verdicts_equal_the_verdicts_of_single_questions() {
    let server = loopback_server(Limits::default());
    let client = client(&server);
    let qs = questions();
    let single: Vec<_> = qs
        .iter()
        .map(|q| client.supports_op(0, "", q, q.len() - 1).unwrap())
        .collect();
    let (graph, nodes) = batched(&qs);
    let batch = client.supports_ops(0, "", &graph, &nodes).unwrap();
    assert_eq!(batch, single);
    assert!(batch[0].is_ok() && batch[1].is_ok(), "{batch:?}");
    assert!(
        batch.iter().any(Result::is_err),
        "no question refused: {batch:?}"
    );
}

#[test]
fn a_batch_naming_a_node_outside_its_graph_is_refused_and_the_client_goes_on() {
    let server = loopback_server(Limits::default());
    let client = client(&server);
    let (graph, mut nodes) = batched(&questions());
    nodes.insert(1, graph.len() as u32);
    let err = client.supports_ops(0, "", &graph, &nodes).unwrap_err();
    assert!(err.is_bad_input(), "{err}");
    assert!(err.to_string().contains("question 1"), "{err}");
    nodes.remove(1);
    assert_eq!(client.supports_ops(0, "", &graph, &nodes).unwrap().len(), 4);
}
