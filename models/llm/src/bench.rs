//! [`bench`]: prefill and decode speed measured as llama-bench does
//! (`pp512`: one prefill of 512 tokens into an empty cache; `tg128`: 128
//! single-token decodes from an empty cache), with the host's share of the
//! decode time.

use std::time::{Duration, Instant};

use backplane::sched::RunStats;

use crate::error::LlmError;
use crate::model::Model;
use crate::session::{Logits, Session};

/// The figures of one [`bench`].
#[derive(Clone, Debug, PartialEq)]
pub struct BenchResult {
    /// Tokens of the prefill test (0: not run).
    pub pp_tokens: usize,
    /// Prefill speed, mean over the repetitions (tokens per second).
    pub pp_tok_s: f64,
    /// Tokens of the decode test (0: not run).
    pub tg_tokens: usize,
    /// Decode speed, mean over the repetitions (tokens per second).
    pub tg_tok_s: f64,
    /// Share of the decode time spent outside the backends' compute and
    /// synchronize calls: planning, input uploads, reading logits,
    /// dispatch, building the inputs (0 to 1).
    pub host_share: f64,
    /// The same share for the prefill.
    pub pp_host_share: f64,
    /// Per decoded token of the timed repetitions (the warm-up's first
    /// planning left out), microseconds the scheduler spent planning (a
    /// plan-cache lookup when the shape repeats), writing inputs, and
    /// reading logits back.
    pub tg_host_us: HostCost,
    /// Timed repetitions of each test (after one warm-up run).
    pub repetitions: usize,
}

/// Host-side costs per token, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HostCost {
    /// Planning (or finding the plan in the cache).
    pub plan: f64,
    /// Writing the inputs (token ids, positions, KV indices, mask).
    pub upload: f64,
    /// Reading the logits back.
    pub download: f64,
    /// The rest of the host time (the session's and the scheduler's own
    /// work between the backends' calls), so that the four add up to the
    /// host share of the decode time.
    pub other: f64,
    /// The part of `other` spent inside `Scheduler::run` (finding bound
    /// descriptors, dispatching splits and copies, handing calls to the
    /// devices' call threads, bookkeeping); the rest of `other` is outside
    /// it (the session building its inputs, the benchmark's loop).
    pub scheduler: f64,
    /// Time copying tensors between backends (e.g. a token's embedding
    /// row from the CPU to a GPU), waits included: a part of `scheduler`
    /// where the copy itself is host work, of the backend time where a
    /// backend call waits in it.
    pub copies: f64,
}

/// Token ids for a benchmark: deterministic, spread over the vocabulary.
fn bench_tokens(n: usize, n_vocab: usize) -> Vec<u32> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n_vocab as u64) as u32
        })
        .collect()
}

/// Measures `pp` tokens of prefill and `tg` tokens of decode, each once to
/// warm up and then `repetitions` times (at least once).
pub fn bench(
    model: &Model,
    pp: usize,
    tg: usize,
    repetitions: usize,
) -> Result<BenchResult, LlmError> {
    let repetitions = repetitions.max(1);
    let n_ctx = pp.max(tg).max(1);
    let mut session = Session::with_context(model, n_ctx)?;
    let tokens = bench_tokens(pp.max(tg), model.n_vocab());
    let stats = || model.scheduler().stats().clone();

    let mut pp_tok_s = 0.0;
    let mut pp_host_share = 0.0;
    if pp > 0 {
        let (speed, share, ..) = timed(&mut session, PREFILL_WARMUPS, repetitions, &stats, |s| {
            s.eval(&tokens[..pp], Logits::Last).map(|_| pp)
        })?;
        pp_tok_s = speed;
        pp_host_share = share;
    }
    let mut tg_tok_s = 0.0;
    let mut host_share = 0.0;
    let mut tg_host_us = HostCost::default();
    if tg > 0 {
        let (speed, share, before, host) = timed(&mut session, 1, repetitions, &stats, |s| {
            for &t in &tokens[..tg] {
                s.eval(&[t], Logits::Last)?;
            }
            Ok(tg)
        })?;
        tg_tok_s = speed;
        host_share = share;
        let after = stats();
        let per_token = |a: Duration, b: Duration| {
            a.saturating_sub(b).as_secs_f64() * 1e6 / (repetitions * tg) as f64
        };
        let (plan, upload, download) = (
            per_token(after.plan_time, before.plan_time),
            per_token(after.upload_time, before.upload_time),
            per_token(after.download_time, before.download_time),
        );
        let in_run = per_token(after.total_time, before.total_time)
            - per_token(after.backend_time, before.backend_time);
        tg_host_us = HostCost {
            plan,
            upload,
            download,
            other: (per_token(host, Duration::ZERO) - plan - upload - download).max(0.0),
            scheduler: (in_run - plan - upload - download).max(0.0),
            copies: per_token(after.copy_time, before.copy_time),
        };
    }
    Ok(BenchResult {
        pp_tokens: pp,
        pp_tok_s,
        tg_tokens: tg,
        tg_tok_s,
        host_share,
        pp_host_share,
        tg_host_us,
        repetitions,
    })
}

/// Untimed prefills before the timed ones. A backend reaches its steady
/// state for a repeated graph on the third: the WebGPU backend records a
/// graph the second time (the first allocates its scratch memory) and
/// replays it from the third on, building the native twin of a replay
/// then. A decode warm-up repeats its graph once per token, so one is
/// enough there.
const PREFILL_WARMUPS: usize = 3;

/// Runs `test` `warmups` times to warm up, then `repetitions` times from
/// an empty cache; returns the mean tokens per second, the host share, the
/// scheduler's counters when the timed repetitions began (so the warm-ups'
/// first planning stays out of the per-token costs) and the host time of
/// the timed repetitions (their time outside the backends' calls).
fn timed(
    session: &mut Session<'_>,
    warmups: usize,
    repetitions: usize,
    stats: &dyn Fn() -> RunStats,
    mut test: impl FnMut(&mut Session<'_>) -> Result<usize, LlmError>,
) -> Result<(f64, f64, RunStats, Duration), LlmError> {
    for _ in 0..warmups {
        session.reset();
        test(session)?;
    }
    let warm = stats();
    let mut speeds = 0.0;
    let mut wall = Duration::ZERO;
    let mut backend = Duration::ZERO;
    for _ in 0..repetitions {
        session.reset();
        let b0 = stats().backend_time;
        let t0 = Instant::now();
        let n = test(session)?;
        let dt = t0.elapsed();
        wall += dt;
        backend += stats().backend_time.saturating_sub(b0);
        speeds += n as f64 / dt.as_secs_f64().max(1e-9);
    }
    let share = if wall.is_zero() {
        0.0
    } else {
        (1.0 - backend.as_secs_f64() / wall.as_secs_f64()).clamp(0.0, 1.0)
    };
    Ok((
        speeds / repetitions as f64,
        share,
        warm,
        wall.saturating_sub(backend),
    ))
}
