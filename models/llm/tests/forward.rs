//! The forward graphs on the CPU against a plain f64 forward pass, and
//! their internal consistency: prefill vs decode, ubatch splits, plan reuse.

mod common;

use backplane_llm::{Arch, Logits, Sampler, argmax};
use common::{Tiny, load, make, nmse, reference, tokens};

const ARCHS: [Arch; 3] = [Arch::Llama, Arch::Qwen2, Arch::Qwen3];

#[test]
fn every_arch_matches_the_f64_reference_at_every_position() {
    for arch in ARCHS {
        let tiny = make(Tiny::new(arch), 11);
        let model = load(&tiny);
        let toks = tokens(9, tiny.spec.n_vocab, 3);
        let mut s = model.session(64).unwrap();
        let got = s.eval(&toks, Logits::All).unwrap().to_vec();
        let want = reference(&tiny, &toks);
        let n_vocab = model.n_vocab();
        assert_eq!(got.len(), toks.len() * n_vocab);
        for (i, row) in want.iter().enumerate() {
            let e = nmse(&got[i * n_vocab..(i + 1) * n_vocab], row);
            assert!(e < 1e-4, "{arch:?} position {i}: nmse {e}");
        }
    }
}

#[test]
fn prefill_logits_equal_token_by_token_decode() {
    for arch in ARCHS {
        let tiny = make(Tiny::new(arch), 5);
        let model = load(&tiny);
        let toks = tokens(12, tiny.spec.n_vocab, 9);
        let n_vocab = model.n_vocab();
        let mut s = model.session(64).unwrap();
        let all = s.eval(&toks, Logits::All).unwrap().to_vec();
        s.reset();
        for (i, &t) in toks.iter().enumerate() {
            let row = s.eval(&[t], Logits::Last).unwrap();
            let want: Vec<f64> = all[i * n_vocab..(i + 1) * n_vocab]
                .iter()
                .map(|&v| f64::from(v))
                .collect();
            // Prefill's GEMM and decode's mat-vec sum in different orders;
            // a last-bit difference can round a cached K/V value to the
            // neighbouring f16, which moves the later logits of that
            // sequence by up to ~1e-7 (llama: 2.8e-8 from token 3 on).
            // Anything larger is a real inconsistency.
            let e = nmse(row, &want);
            assert!(e < 1e-6, "{arch:?} token {i}: nmse {e}");
        }
        assert_eq!(s.n_past(), toks.len());
    }
}

#[test]
fn last_logits_are_the_last_row_of_all_logits() {
    let tiny = make(Tiny::new(Arch::Llama), 2);
    let model = load(&tiny);
    let toks = tokens(7, tiny.spec.n_vocab, 4);
    let n_vocab = model.n_vocab();
    let mut s = model.session(32).unwrap();
    let all = s.eval(&toks, Logits::All).unwrap().to_vec();
    s.reset();
    let last = s.eval(&toks, Logits::Last).unwrap().to_vec();
    assert_eq!(last.len(), n_vocab);
    let want: Vec<f64> = all[6 * n_vocab..].iter().map(|&v| f64::from(v)).collect();
    assert!(nmse(&last, &want) < 1e-10);
}

#[test]
fn a_batch_split_across_ubatches_equals_the_same_tokens_in_other_splits() {
    let tiny = make(Tiny::new(Arch::Qwen2), 8);
    let model = load(&tiny);
    let toks = tokens(600, tiny.spec.n_vocab, 12); // 512 + 88
    let n_vocab = model.n_vocab();
    let mut s = model.session(1024).unwrap();
    let one = s.eval(&toks, Logits::All).unwrap().to_vec();
    assert_eq!(one.len(), 600 * n_vocab);
    s.reset();
    let mut parts = Vec::new();
    for chunk in toks.chunks(150) {
        parts.extend_from_slice(s.eval(chunk, Logits::All).unwrap());
    }
    let want: Vec<f64> = one.iter().map(|&v| f64::from(v)).collect();
    let e = nmse(&parts, &want);
    assert!(e < 1e-8, "nmse {e}");
    // Only the last row, over both ubatches: the first one's row is not
    // kept.
    s.reset();
    let last = s.eval(&toks, Logits::Last).unwrap().to_vec();
    assert_eq!(last.len(), n_vocab);
    let e = nmse(&last, &want[599 * n_vocab..]);
    assert!(e < 1e-10, "last row: nmse {e}");
    // Past 256 tokens the KV length crosses a padding bucket; check a row
    // there against the f64 reference too.
    let r = reference(&tiny, &toks[..300]);
    let e = nmse(&one[299 * n_vocab..300 * n_vocab], &r[299]);
    assert!(e < 1e-4, "position 299: nmse {e}");
}

#[test]
fn decode_steps_reuse_one_plan_per_kv_bucket() {
    let tiny = make(Tiny::new(Arch::Llama), 1);
    let model = load(&tiny);
    let mut s = model.session(512).unwrap();
    s.eval(&tokens(4, tiny.spec.n_vocab, 1), Logits::Last)
        .unwrap();
    s.eval(&[1], Logits::Last).unwrap();
    let (built, hits) = {
        let sched = model.scheduler();
        (sched.planner().plans_built(), sched.planner().cache_hits())
    };
    for t in 0..20 {
        s.eval(&[t], Logits::Last).unwrap();
    }
    let sched = model.scheduler();
    assert_eq!(
        sched.planner().plans_built(),
        built,
        "no new plan within one bucket"
    );
    assert_eq!(sched.planner().cache_hits(), hits + 20);
    drop(sched);
    // Crossing 256 cached tokens takes one new plan, then hits again.
    s.eval(&tokens(240, tiny.spec.n_vocab, 2), Logits::Last)
        .unwrap();
    let built = model.scheduler().planner().plans_built();
    for t in 0..3 {
        s.eval(&[t], Logits::Last).unwrap();
    }
    assert_eq!(model.scheduler().planner().plans_built(), built + 1);
}

#[test]
fn tied_output_reads_the_token_embedding() {
    let mut spec = Tiny::new(Arch::Qwen3);
    spec.tied = true;
    let tiny = make(spec, 21);
    let model = load(&tiny);
    let toks = tokens(5, tiny.spec.n_vocab, 6);
    let mut s = model.session(16).unwrap();
    let got = s.eval(&toks, Logits::Last).unwrap().to_vec();
    let want = reference(&tiny, &toks);
    let e = nmse(&got, &want[4]);
    assert!(e < 1e-4, "nmse {e}");
}

#[test]
fn greedy_generation_follows_the_argmax_of_each_step() {
    let tiny = make(Tiny::new(Arch::Llama), 13);
    let model = load(&tiny);
    let prompt = tokens(4, tiny.spec.n_vocab, 8);
    let mut s = model.session(64).unwrap();
    let mut seen = Vec::new();
    let got = s
        .generate(&prompt, 6, &Sampler::greedy(), |t| {
            seen.push(t);
            true
        })
        .unwrap();
    assert_eq!(got, seen);
    assert_eq!(got.len(), 6);
    let mut ctx = prompt.clone();
    for &t in &got {
        let r = reference(&tiny, &ctx);
        let want = r.last().unwrap();
        let best = want
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .unwrap()
            .0 as u32;
        assert_eq!(t, best, "after {ctx:?}");
        ctx.push(t);
    }
    // The session holds prompt + every generated token but the last.
    assert_eq!(s.n_past(), prompt.len() + got.len() - 1);
    let _ = argmax(&[0.0]);
}

#[test]
fn generation_stops_when_the_callback_says_so() {
    let tiny = make(Tiny::new(Arch::Llama), 13);
    let model = load(&tiny);
    let mut s = model.session(64).unwrap();
    let mut n = 0;
    let got = s
        .generate(&[1, 2], 10, &Sampler::greedy(), |_| {
            n += 1;
            n < 3
        })
        .unwrap();
    assert_eq!(got.len(), 3);
}

#[test]
fn a_full_context_is_an_error_naming_the_sizes() {
    let tiny = make(Tiny::new(Arch::Llama), 3);
    let model = load(&tiny);
    let mut s = model.session(8).unwrap();
    s.eval(&tokens(6, tiny.spec.n_vocab, 1), Logits::Last)
        .unwrap();
    let e = s.eval(&[1, 2, 3], Logits::Last).unwrap_err().to_string();
    assert!(e.contains("6 tokens") && e.contains("n_ctx = 8"), "{e}");
    let e = s.eval(&[500], Logits::Last).unwrap_err().to_string();
    assert!(e.contains("500") && e.contains("n_vocab = 96"), "{e}");
}

#[test]
fn two_sessions_keep_their_own_caches() {
    let tiny = make(Tiny::new(Arch::Qwen2), 4);
    let model = load(&tiny);
    let a_toks = tokens(5, tiny.spec.n_vocab, 1);
    let b_toks = tokens(5, tiny.spec.n_vocab, 2);
    let mut a = model.session(32).unwrap();
    let mut b = model.session(32).unwrap();
    a.eval(&a_toks, Logits::Last).unwrap();
    b.eval(&b_toks, Logits::Last).unwrap();
    let got = a.eval(&[7], Logits::Last).unwrap().to_vec();
    let mut ctx = a_toks.clone();
    ctx.push(7);
    let want = reference(&tiny, &ctx);
    assert!(nmse(&got, want.last().unwrap()) < 1e-4);
}

#[test]
fn bench_reports_both_speeds_and_a_host_share() {
    let tiny = make(Tiny::new(Arch::Llama), 3);
    let model = load(&tiny);
    let r = backplane_llm::bench(&model, 64, 8, 2).unwrap();
    assert_eq!((r.pp_tokens, r.tg_tokens, r.repetitions), (64, 8, 2));
    assert!(r.pp_tok_s > 0.0 && r.tg_tok_s > 0.0, "{r:?}");
    assert!((0.0..=1.0).contains(&r.host_share), "{r:?}");
    assert!((0.0..=1.0).contains(&r.pp_host_share), "{r:?}");
    // Per-token host costs: a plan-cache hit, inputs and logits every
    // token, and the rest of the scheduler's host time.
    let h = r.tg_host_us;
    for v in [h.plan, h.upload, h.download, h.other] {
        assert!(v.is_finite() && v >= 0.0, "{r:?}");
    }
    assert!(h.upload > 0.0 && h.download > 0.0, "{r:?}");
}

#[test]
fn rope_frequency_factors_of_one_change_nothing_and_others_do() {
    let plain = make(Tiny::new(Arch::Llama), 17);
    let toks = tokens(6, plain.spec.n_vocab, 5);
    let want = {
        let model = load(&plain);
        let mut s = model.session(16).unwrap();
        s.eval(&toks, Logits::All).unwrap().to_vec()
    };
    let half_dim = plain.spec.head_dim() / 2;
    let with_factors = |value: f32| {
        let mut t = make(Tiny::new(Arch::Llama), 17);
        let bytes = (0..half_dim).flat_map(|_| value.to_le_bytes()).collect();
        t.source.set_tensor(
            "rope_freqs.weight",
            backplane::DType::F32,
            &[half_dim as i64],
            bytes,
        );
        let model = load(&t);
        let mut s = model.session(16).unwrap();
        s.eval(&toks, Logits::All).unwrap().to_vec()
    };
    let as_f64 = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
    assert!(nmse(&with_factors(1.0), &as_f64(&want)) < 1e-12);
    assert!(nmse(&with_factors(4.0), &as_f64(&want)) > 1e-6);
}
