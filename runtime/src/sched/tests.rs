//! Planner tests that edit a built graph's descriptors by hand (which only
//! this crate can do): broken graphs are errors, not panics. The planner's
//! other tests run over the example graphs in the `backplane` facade's
//! tests.

use std::sync::Arc;

use backplane_abi::plugin::{DeviceType, Verdict};
use backplane_abi::{DType, Op, TensorDesc};

use super::*;
use crate::graph::Graph;

/// A backend with its own buffer type that refuses the listed ops.
struct Fake {
    name: &'static str,
    ty: DeviceType,
    refuse: Vec<Op>,
}

impl Fake {
    fn gpu() -> Fake {
        Fake {
            name: "gpu",
            ty: DeviceType::Gpu,
            refuse: vec![],
        }
    }
    fn cpu(refuse: Vec<Op>) -> Fake {
        Fake {
            name: "cpu",
            ty: DeviceType::Cpu,
            refuse,
        }
    }
}

impl Placement for Fake {
    fn name(&self) -> String {
        self.name.into()
    }
    fn device_type(&self) -> DeviceType {
        self.ty
    }
    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> Verdict {
        let op = graph[node].op().unwrap_or(Op::None);
        if self.refuse.contains(&op) {
            Verdict::unsupported(format!("{op} not implemented on {}", self.name))
        } else {
            Verdict::Supported
        }
    }
    fn offload_op(&self, _: &[TensorDesc], _: usize) -> bool {
        false
    }
    fn buffer_type_name(&self) -> String {
        self.name.into()
    }
    fn buffer_is_host(&self) -> bool {
        self.ty == DeviceType::Cpu
    }
    fn supports_buft(&self, name: &str, _: bool) -> bool {
        name == self.name
    }
    fn alignment(&self) -> u64 {
        64
    }
}

fn planner(backends: Vec<Fake>) -> Planner {
    Planner::new(
        backends
            .into_iter()
            .map(|b| Box::new(b) as Box<dyn Placement + Send + Sync>)
            .collect(),
        SchedOptions::default(),
    )
    .unwrap()
}

/// x, a weight, and a chain of five nodes (tensors 2..=6), the last one the
/// output.
fn chain_graph() -> (Graph, crate::TensorId) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[8, 2]).unwrap();
    let w = g.weight("w", DType::F32, &[8, 8]).unwrap();
    let y = g.mul_mat(w, x).unwrap();
    let s = g.scale(y, 2.0).unwrap();
    let sum = g.add(s, y).unwrap();
    let half = g.scale(sum, 0.5).unwrap();
    let out = g.scale(half, 1.0).unwrap();
    g.mark_output(out).unwrap();
    (g, w)
}

#[test]
fn bad_graphs_are_errors_not_panics() {
    let (mut g, w) = chain_graph();
    let mut p = planner(vec![Fake::gpu(), Fake::cpu(vec![])]);
    assert!(p.plan(&g).is_ok());
    // A buffer nobody registered.
    g.tensors_mut()[w.index()].buffer = 0xdead;
    assert!(matches!(p.plan(&g), Err(SchedError::InvalidGraph { .. })));
    g.tensors_mut()[w.index()].buffer = 0;
    // A source that is not earlier.
    let last = g.len() - 1;
    g.tensors_mut()[5].src[0] = last as i32;
    assert!(matches!(
        p.plan(&g),
        Err(SchedError::InvalidGraph { node: 5, .. })
    ));
    g.tensors_mut()[5].src[0] = 4;
    g.tensors_mut()[6].op = 9999;
    assert!(matches!(
        p.plan(&g),
        Err(SchedError::InvalidGraph { node: 6, .. })
    ));
    // No backend at all; no backend supporting an op.
    assert!(matches!(
        Planner::new(vec![], SchedOptions::default()),
        Err(SchedError::NoBackends)
    ));
    let (g, _) = chain_graph();
    let mut p = planner(vec![Fake::cpu(vec![Op::Scale])]);
    let err = p.plan(&g).unwrap_err();
    assert!(
        matches!(&err, SchedError::Unassignable { op: Op::Scale, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("SCALE not implemented on cpu"));
}

#[test]
fn nodes_breaking_their_contract_are_refused_when_planning() {
    let mut g = Graph::new();
    let sx = g.input("sx", DType::F32, &[6, 4, 2]).unwrap();
    let c = g.weight("c", DType::F32, &[3, 4]).unwrap();
    let conv = g.ssm_conv(sx, c).unwrap();
    g.mark_output(conv).unwrap();
    // A descriptor edited after building: c now has 5 channels.
    g.tensors_mut()[c.index()].ne[1] = 5;
    let mut p = planner(vec![Fake::cpu(vec![])]);
    let err = p.plan(&g).unwrap_err();
    assert!(
        matches!(&err, SchedError::Contract { node, refusal } if *node == conv.index() && refusal.op == Op::SsmConv),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "node 2: SSM_CONV: sx: expected ne0 >= 3 (c's d_conv) and ne1 = 5 (c's d_inner), found [6, 4, 2, 1] f32"
    );
}

#[test]
fn a_graph_run_again_finds_its_plan_by_its_stamp() {
    let (mut g, w) = chain_graph();
    let mut p = planner(vec![Fake::gpu(), Fake::cpu(vec![])]);
    let first = p.plan(&g).unwrap();
    let stamp = g.stamp();
    assert_ne!(stamp, 0);
    // Again, and a clone (the same stamp): the same plan, no planning.
    let again = p.plan(&g).unwrap();
    let copy = g.clone();
    assert_eq!(copy.stamp(), stamp);
    assert!(Arc::ptr_eq(&first, &again));
    assert!(Arc::ptr_eq(&first, &p.plan(&copy).unwrap()));
    assert_eq!((p.plans_built(), p.cache_hits()), (1, 2));
    // A changed descriptor: a new stamp, planned again (an error here).
    g.tensors_mut()[w.index()].buffer = 0xdead;
    assert_ne!(g.stamp(), stamp);
    assert!(p.plan(&g).is_err());
    // The same graph built again: a new stamp, found by its structure.
    let (h, _) = chain_graph();
    assert_ne!(h.stamp(), stamp);
    assert!(Arc::ptr_eq(&first, &p.plan(&h).unwrap()));
    // Other pins: not the kept plan.
    p.pin(2, 1).unwrap();
    let pinned = p.plan(&h).unwrap();
    assert!(!Arc::ptr_eq(&first, &pinned));
    assert_eq!(pinned.assignment.backend[2], 1);
    p.clear_pins();
    assert!(Arc::ptr_eq(&first, &p.plan(&h).unwrap()));
    // A backend out of service drops every plan, the kept one too.
    p.mark_failed(0, "gone".into()).unwrap();
    let rerouted = p.plan(&h).unwrap();
    assert!(!Arc::ptr_eq(&first, &rerouted));
    assert!(rerouted.assignment.backend[2..].iter().all(|&b| b == 1));
}
