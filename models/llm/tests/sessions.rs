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
