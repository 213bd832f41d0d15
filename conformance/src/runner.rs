//! Runs cases: `test` compares a target with the reference kernels, `perf`
//! times it.

use std::cell::{Cell, OnceCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use backplane::{Graph, HostTensors, TensorId};
use serde::Serialize;

use crate::case::{BuiltCase, Case, Work};
use crate::target::Target;

/// Outcome of one case on one backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Matched the reference within the bound.
    Pass,
    /// Mismatch, error, panic or out-of-bounds write.
    Fail,
    /// The backend refused the case (reason kept).
    Unsupported,
}

/// Result of a `test` case.
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    /// Backend name.
    pub backend: String,
    /// Op name.
    pub op: String,
    /// Case name.
    pub case: String,
    /// Outcome.
    pub status: Status,
    /// Normalised mean squared error against the reference, when computed.
    pub nmse: Option<f64>,
    /// Why it failed or was refused.
    pub reason: Option<String>,
    /// Wall time on the backend in milliseconds (building, loading,
    /// computing and reading back; the reference when this backend was the
    /// first to need it), when measured.
    pub time_ms: Option<f64>,
}

/// Result of a `perf` case.
#[derive(Clone, Debug, Serialize)]
pub struct PerfResult {
    /// Backend name.
    pub backend: String,
    /// Op name.
    pub op: String,
    /// Case name.
    pub case: String,
    /// Median time of one run in microseconds (None when not run).
    pub median_us: Option<f64>,
    /// Runs timed.
    pub runs: usize,
    /// Copies of the op's nodes in each timed graph.
    pub repeats: usize,
    /// GFLOPS for compute-bound cases.
    pub gflops: Option<f64>,
    /// GB/s for memory-bound cases.
    pub gbps: Option<f64>,
    /// Why it was not timed.
    pub reason: Option<String>,
}

/// NMSE of `got` against `want`, or the reason they cannot be compared
/// (length or NaN/Inf mismatch).
pub fn compare(want: &[f32], got: &[f32]) -> Result<f64, String> {
    if want.len() != got.len() {
        return Err(format!(
            "{} values expected, {} produced",
            want.len(),
            got.len()
        ));
    }
    let (mut err, mut norm) = (0f64, 0f64);
    for (i, (&w, &g)) in want.iter().zip(got).enumerate() {
        if !w.is_finite() || !g.is_finite() {
            let same = (w.is_nan() && g.is_nan()) || w == g;
            if !same {
                return Err(format!("element {i}: expected {w}, got {g}"));
            }
            continue;
        }
        let d = w as f64 - g as f64;
        err += d * d;
        norm += w as f64 * w as f64;
    }
    Ok(if norm > 0.0 { err / norm } else { err })
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Whether the target accepts every compute node of the case.
fn check_support(target: &dyn Target, graph: &Graph) -> Result<(), String> {
    for t in graph.compute_nodes() {
        target.supports(graph, t)?;
    }
    Ok(())
}

/// Reference output of a built case.
pub fn reference_output(
    built: &BuiltCase,
    leaves: &[(TensorId, Vec<u8>)],
) -> Result<Vec<f32>, String> {
    let mut host = HostTensors::new(&built.graph);
    for (t, data) in leaves {
        host.set_bytes(&built.graph, *t, data)
            .map_err(|e| e.to_string())?;
    }
    backplane_reference::compute(&built.graph, &mut host).map_err(|e| format!("reference: {e}"))?;
    Ok(host.get_f32(&built.graph, built.out))
}

/// Contiguous bytes of each leaf.
type Leaves = Vec<(TensorId, Vec<u8>)>;

/// A case prepared once for every backend: its graph and, made on first
/// need and then shared, its leaf data and the reference output.
pub struct Prepared<'a> {
    case: &'a Case,
    built: Result<BuiltCase, String>,
    leaves: OnceCell<Leaves>,
    want: OnceCell<Result<Vec<f32>, String>>,
    reference_time: Cell<Duration>,
}

impl<'a> Prepared<'a> {
    /// Builds the case's graph.
    pub fn new(case: &'a Case) -> Prepared<'a> {
        Prepared {
            case,
            built: case
                .build()
                .map_err(|e| format!("case does not build: {e}")),
            leaves: OnceCell::new(),
            want: OnceCell::new(),
            reference_time: Cell::new(Duration::ZERO),
        }
    }

    /// Time spent in the reference kernels (zero until a backend needed it).
    pub fn reference_time(&self) -> Duration {
        self.reference_time.get()
    }

    fn leaves(&self, built: &BuiltCase) -> &Leaves {
        self.leaves
            .get_or_init(|| built.leaf_data(self.case.seed()))
    }

    fn reference(&self, built: &BuiltCase) -> &Result<Vec<f32>, String> {
        self.want.get_or_init(|| {
            let t0 = Instant::now();
            let want = reference_output(built, self.leaves(built));
            self.reference_time.set(t0.elapsed());
            want
        })
    }
}

/// Runs one case in `test` mode.
pub fn test_case(case: &Case, target: &mut dyn Target) -> CaseResult {
    test_prepared(&Prepared::new(case), target)
}

/// Runs a prepared case in `test` mode; the reference output is computed
/// by the first backend that supports the case and reused by the others.
pub fn test_prepared(prepared: &Prepared<'_>, target: &mut dyn Target) -> CaseResult {
    let case = prepared.case;
    let mut result = CaseResult {
        backend: target.name(),
        op: case.op.name().to_string(),
        case: case.name.clone(),
        status: Status::Fail,
        nmse: None,
        reason: None,
        time_ms: None,
    };
    let built = match &prepared.built {
        Ok(b) => b,
        Err(e) => {
            result.reason = Some(e.clone());
            return result;
        }
    };
    if let Err(reason) = check_support(target, &built.graph) {
        result.status = Status::Unsupported;
        result.reason = Some(reason);
        return result;
    }
    let want = match prepared.reference(built) {
        Ok(w) => w,
        Err(e) => {
            result.reason = Some(e.clone());
            return result;
        }
    };
    let run = catch_unwind(AssertUnwindSafe(|| -> Result<Vec<f32>, String> {
        target.load(&built.graph, prepared.leaves(built))?;
        target.compute()?;
        target.read_f32(built.out)
    }));
    let got = match run {
        Ok(Ok(g)) => g,
        Ok(Err(e)) => {
            result.reason = Some(e);
            return result;
        }
        Err(p) => {
            result.reason = Some(format!("panicked: {}", panic_text(p)));
            return result;
        }
    };
    let guards = target.guard_violations();
    if !guards.is_empty() {
        result.reason = Some(format!("out-of-bounds write: {}", guards.join("; ")));
        return result;
    }
    match compare(want, &got) {
        Ok(nmse) => {
            result.nmse = Some(nmse);
            if nmse <= case.nmse_max {
                result.status = Status::Pass;
            } else {
                result.reason = Some(format!("NMSE {nmse:.3e} > {:.1e}", case.nmse_max));
            }
        }
        Err(e) => result.reason = Some(e),
    }
    result
}

/// Wall time one timed perf graph should take at least.
pub const REPEAT_TARGET: Duration = Duration::from_millis(20);
/// Most copies of a node in one timed perf graph (test-backend-ops puts
/// up to 8,192 in its graph, 852 for a 4096 x 14336 mat-vec).
pub const MAX_REPEATS: usize = 1024;

/// Wall time of warm-up runs before a perf case is timed.
pub const WARM_UP: Duration = Duration::from_millis(200);
/// Most wall time of the timed-size warm-up graphs that follow.
pub const WARM_UP_MAX: Duration = Duration::from_millis(2000);
/// Warm-up ends with a timed-size graph no more than this much faster
/// than the one before (0.05: 5%).
pub const WARM_UP_SPREAD: f64 = 0.05;

/// How `perf` times a case.
#[derive(Clone, Copy, Debug)]
pub struct PerfOptions {
    /// Time the timed graphs for at least this long (and at least 3 runs).
    pub min_time: Duration,
    /// Copies of the op's nodes in each timed graph; `None` sizes them
    /// from the first timed graph (about [`REPEAT_TARGET`], at most
    /// [`MAX_REPEATS`]).
    pub repeats: Option<usize>,
}

/// Runs one case in `perf` mode: warm-up runs for [`WARM_UP`], one run to
/// size the repeats (unless `opts` fixes them), graphs holding the op's
/// nodes `reps` times until their times stop falling, then such graphs
/// until `opts.min_time` has passed (at least 3), reporting the median
/// time per repeat.
pub fn perf_case(case: &Case, target: &mut dyn Target, opts: PerfOptions) -> PerfResult {
    let mut result = PerfResult {
        backend: target.name(),
        op: case.op.name().to_string(),
        case: case.name.clone(),
        median_us: None,
        runs: 0,
        repeats: 0,
        gflops: None,
        gbps: None,
        reason: None,
    };
    let built = match case.build() {
        Ok(b) => b,
        Err(e) => {
            result.reason = Some(format!("case does not build: {e}"));
            return result;
        }
    };
    if let Err(reason) = check_support(target, &built.graph) {
        result.reason = Some(format!("unsupported: {reason}"));
        return result;
    }
    let leaves = built.leaf_data(case.seed());
    if let Err(e) = target.load(&built.graph, &leaves) {
        result.reason = Some(e);
        return result;
    }
    // Warm up for WARM_UP of work, not one run: building the leaves (say,
    // quantizing q4_K weights on the host) can take seconds, and a GPU left
    // idle that long drops its clocks and takes a while to raise them (an
    // H200 timed some q4_K products 2-5x slower after one warm-up run).
    let warm = Instant::now();
    loop {
        if let Err(e) = target.compute() {
            result.reason = Some(e);
            return result;
        }
        if warm.elapsed() >= WARM_UP {
            break;
        }
    }
    // One run's time gives a first count of copies per timed graph
    // (enough for about REPEAT_TARGET, at most MAX_REPEATS). A one-node
    // graph is mostly submission and wait for a small op, so the first
    // timed graph's time per copy sizes the count again: on an H200 a
    // q4_0 mat-vec sized from one run got about 190 copies and read 13.3
    // us, with 1,024 copies 11.9 us (test-backend-ops puts 852 in its
    // graph for this case).
    let t = Instant::now();
    if let Err(e) = target.compute() {
        result.reason = Some(e);
        return result;
    }
    let fill = |per_copy: f64| {
        ((REPEAT_TARGET.as_secs_f64() / per_copy.max(1e-9)).ceil() as usize).clamp(1, MAX_REPEATS)
    };
    let mut reps = opts
        .repeats
        .map_or_else(|| fill(t.elapsed().as_secs_f64()), |r| r.max(1));
    let mut resized = opts.repeats.is_some();
    // Then the timed graphs themselves until one is no more than
    // WARM_UP_SPREAD faster per copy than the one before (at most
    // WARM_UP_MAX): single-node runs are mostly host overhead for a small
    // op and need not raise the clocks (after them an H200 timed a q4_K
    // mat-vec at 43.7 us in two rounds of three, 15.2 in the third).
    let settle = Instant::now();
    let mut previous = f64::INFINITY;
    loop {
        let t = Instant::now();
        if let Err(e) = target.compute_repeated(reps) {
            result.reason = Some(e);
            return result;
        }
        let per_copy = t.elapsed().as_secs_f64() / reps as f64;
        if !resized {
            resized = true;
            reps = fill(per_copy).max(reps);
            continue;
        }
        if per_copy >= previous * (1.0 - WARM_UP_SPREAD) || settle.elapsed() >= WARM_UP_MAX {
            break;
        }
        previous = per_copy;
    }
    result.repeats = reps;
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 3 || (start.elapsed() < opts.min_time && times.len() < 10_000) {
        let t = Instant::now();
        if let Err(e) = target.compute_repeated(reps) {
            result.reason = Some(e);
            return result;
        }
        times.push(t.elapsed().as_secs_f64() / reps as f64);
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    result.runs = times.len();
    result.median_us = Some(median * 1e6);
    match case.work {
        Work::Flops(f) => result.gflops = Some(f / median / 1e9),
        Work::Bytes => result.gbps = Some(built.bytes_moved() / median / 1e9),
    }
    result
}
