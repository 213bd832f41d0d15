//! A session's KV cache lives as long as the session: dropping it frees
//! the scheduler buffers it placed.

mod common;

use backplane_llm::{Arch, Logits};
use common::{Tiny, load, make, nmse, reference, tokens};

#[test]
fn sessions_created_and_dropped_in_a_row_do_not_grow_the_placed_buffers() {
    let tiny = make(Tiny::new(Arch::Llama), 5);
    let model = load(&tiny);
    let before = model.scheduler().weight_blocks().count();
    let bytes_before: u64 = model
        .scheduler()
        .weight_blocks()
        .map(|b| b.size_bytes())
        .sum();
    let toks = tokens(4, tiny.spec.n_vocab, 9);
    for _ in 0..50 {
        let mut s = model.session(64).unwrap();
        assert!(
            model.scheduler().weight_blocks().count() > before,
            "a live session holds its KV cache"
        );
        s.eval(&toks, Logits::Last).unwrap();
    }
    assert_eq!(model.scheduler().weight_blocks().count(), before);
    let bytes_after: u64 = model
        .scheduler()
        .weight_blocks()
        .map(|b| b.size_bytes())
        .sum();
    assert_eq!(bytes_after, bytes_before);
}

#[test]
fn a_session_made_after_others_were_dropped_computes_the_reference() {
    let tiny = make(Tiny::new(Arch::Qwen2), 6);
    let model = load(&tiny);
    let toks = tokens(5, tiny.spec.n_vocab, 4);
    let keep = model.session(32).unwrap();
    for _ in 0..3 {
        let mut s = model.session(32).unwrap();
        s.eval(&tokens(7, tiny.spec.n_vocab, 8), Logits::Last)
            .unwrap();
    }
    let mut s = model.session(32).unwrap();
    let got = s.eval(&toks, Logits::Last).unwrap().to_vec();
    let want = reference(&tiny, &toks);
    assert!(nmse(&got, want.last().unwrap()) < 1e-4);
    drop(keep);
}

#[test]
fn explain_routes_the_graph_eval_runs_and_refuses_bad_token_counts() {
    let tiny = make(Tiny::new(Arch::Llama), 7);
    let model = load(&tiny);
    let mut s = model.session(64).unwrap();
    let toks = tokens(5, tiny.spec.n_vocab, 3);
    s.eval(&toks, Logits::Last).unwrap();
    let plans_before = model.scheduler().planner().plans_built();
    // The decode step after the 5 cached tokens: the graph eval runs next.
    let e = s.explain(1).unwrap();
    assert!(!e.nodes.is_empty());
    assert!(e.nodes.iter().all(|n| n.backend == "cpu/cpu"), "{e}");
    let text = e.to_string();
    assert!(text.contains("inp_kq_mask"), "{text}");
    assert!(s.dot(1).unwrap().starts_with("digraph"));
    s.eval(&toks[..1], Logits::Last).unwrap();
    // Explaining planned (and cached) the graph that eval then ran.
    assert_eq!(model.scheduler().planner().plans_built(), plans_before + 1);
    assert_eq!(s.n_past(), 6);
    for bad in [0, backplane_llm::UBATCH + 1] {
        let err = s.explain(bad).unwrap_err().to_string();
        assert!(err.contains(&format!("not {bad}")), "{err}");
    }
    let err = s.explain(60).unwrap_err().to_string();
    assert!(err.contains("context"), "{err}");
}
