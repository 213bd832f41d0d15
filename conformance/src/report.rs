//! Summaries, JSON/CSV output, the support matrix and external vectors.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::case::Case;
use crate::runner::{CaseResult, PerfResult, Status, compare};
use crate::target::Target;
use crate::vectors;

/// Counts per backend.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counts {
    /// Cases that passed.
    pub pass: usize,
    /// Cases that failed.
    pub fail: usize,
    /// Cases the backend refused.
    pub unsupported: usize,
}

/// Counts per backend, in name order.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Per backend.
    pub backends: BTreeMap<String, Counts>,
}

impl Summary {
    /// Tallies results.
    pub fn of(results: &[CaseResult]) -> Summary {
        let mut s = Summary::default();
        for r in results {
            let c = s.backends.entry(r.backend.clone()).or_default();
            match r.status {
                Status::Pass => c.pass += 1,
                Status::Fail => c.fail += 1,
                Status::Unsupported => c.unsupported += 1,
            }
        }
        s
    }

    /// Failures over all backends.
    pub fn failed(&self) -> usize {
        self.backends.values().map(|c| c.fail).sum()
    }

    /// A plain-text table.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<16} {:>8} {:>8} {:>12}\n",
            "backend", "pass", "fail", "unsupported"
        );
        for (name, c) in &self.backends {
            let _ = writeln!(
                out,
                "{name:<16} {:>8} {:>8} {:>12}",
                c.pass, c.fail, c.unsupported
            );
        }
        let pass: usize = self.backends.values().map(|c| c.pass).sum();
        let skipped: usize = self.backends.values().map(|c| c.unsupported).sum();
        let _ = writeln!(
            out,
            "conformance: {pass} passed, {} failed, {skipped} skipped",
            self.failed()
        );
        out
    }
}

#[derive(Serialize)]
struct JsonReport<'a> {
    cases: &'a [CaseResult],
    summary: &'a Summary,
}

/// Writes `{"cases":[...],"summary":{...}}`.
pub fn write_json(path: &Path, results: &[CaseResult], summary: &Summary) -> Result<(), String> {
    let text = serde_json::to_string_pretty(&JsonReport {
        cases: results,
        summary,
    })
    .map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Writes one line per case: backend,op,case,status,nmse,reason.
pub fn write_csv(path: &Path, results: &[CaseResult]) -> Result<(), String> {
    let mut out = String::from("backend,op,case,status,nmse,reason\n");
    for r in results {
        let status = serde_json::to_value(r.status).map_err(|e| e.to_string())?;
        let _ = writeln!(
            out,
            "{},{},{},{},{},{}",
            csv_field(&r.backend),
            r.op,
            csv_field(&r.case),
            status.as_str().unwrap_or(""),
            r.nmse.map(|v| format!("{v:e}")).unwrap_or_default(),
            csv_field(r.reason.as_deref().unwrap_or(""))
        );
    }
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))
}

/// One human-readable perf line.
pub fn perf_line(r: &PerfResult) -> String {
    match (r.median_us, r.gflops, r.gbps) {
        (Some(us), Some(g), _) => format!(
            "  {:<100} {us:>12.1} us {g:>10.2} GFLOPS ({} runs x {})",
            r.case, r.runs, r.repeats
        ),
        (Some(us), _, Some(b)) => format!(
            "  {:<100} {us:>12.1} us {b:>10.2} GB/s ({} runs x {})",
            r.case, r.runs, r.repeats
        ),
        _ => format!(
            "  {:<100} not run: {}",
            r.case,
            r.reason.as_deref().unwrap_or("")
        ),
    }
}

/// Writes perf results as JSON.
pub fn write_perf_json(path: &Path, results: &[PerfResult]) -> Result<(), String> {
    let text = serde_json::to_string_pretty(&serde_json::json!({ "perf": results }))
        .map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes perf results as CSV.
pub fn write_perf_csv(path: &Path, results: &[PerfResult]) -> Result<(), String> {
    let mut out = String::from("backend,op,case,median_us,runs,repeats,gflops,gbps,reason\n");
    let num = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_default();
    for r in results {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{}",
            csv_field(&r.backend),
            r.op,
            csv_field(&r.case),
            num(r.median_us),
            r.runs,
            r.repeats,
            num(r.gflops),
            num(r.gbps),
            csv_field(r.reason.as_deref().unwrap_or(""))
        );
    }
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))
}

/// The op x backend matrix as markdown: for each op and backend, whether the
/// backend accepts all, some or none of the op's cases.
pub fn support_matrix(cases: &[Case], targets: &[Box<dyn Target>]) -> String {
    let mut per_op: BTreeMap<&str, Vec<(usize, usize)>> = BTreeMap::new();
    let mut reasons: BTreeMap<(&str, String), String> = BTreeMap::new();
    for case in cases {
        let Ok(built) = case.build() else { continue };
        let row = per_op
            .entry(case.op.name())
            .or_insert_with(|| vec![(0, 0); targets.len()]);
        for (i, t) in targets.iter().enumerate() {
            row[i].1 += 1;
            match built
                .graph
                .compute_nodes()
                .try_for_each(|n| t.supports(&built.graph, n))
            {
                Ok(()) => row[i].0 += 1,
                Err(r) => {
                    reasons.entry((case.op.name(), t.name())).or_insert(r);
                }
            }
        }
    }
    let mut md = String::from(
        "# Op support\n\nGenerated by `cargo xtask conformance support`; do not edit by hand.\n\n\
         Legend: ✅ every conformance case is accepted, 🟡 some are (count shown), ❌ none.\n\n| op |",
    );
    for t in targets {
        let _ = write!(md, " {} |", t.name());
    }
    md.push_str("\n|---|");
    md.push_str(&"---|".repeat(targets.len()));
    md.push('\n');
    for (op, row) in &per_op {
        let _ = write!(md, "| {op} |");
        for &(ok, total) in row {
            let cell = if ok == total {
                "✅".to_string()
            } else if ok == 0 {
                "❌".to_string()
            } else {
                format!("🟡 {ok}/{total}")
            };
            let _ = write!(md, " {cell} |");
        }
        md.push('\n');
    }
    if !reasons.is_empty() {
        md.push_str("\n## First refusal per op and backend\n\n");
        for ((op, backend), reason) in &reasons {
            let _ = writeln!(md, "- {op} on {backend}: {}", reason.replace('\n', " "));
        }
    }
    md
}

/// Runs the external vectors in `dir` on every target.
pub fn run_vectors(dir: &Path, targets: &mut [Box<dyn Target>]) -> Result<Vec<CaseResult>, String> {
    let loaded = vectors::load(dir)?;
    let mut results = Vec::new();
    for target in targets.iter_mut() {
        for v in &loaded {
            let mut r = CaseResult {
                backend: target.name(),
                op: String::new(),
                case: String::new(),
                status: Status::Fail,
                nmse: None,
                reason: None,
                time_ms: None,
            };
            match v {
                Err((name, reason)) => {
                    r.case = format!("vectors:{name}");
                    r.reason = Some(format!("cannot load: {reason}"));
                }
                Ok(v) => {
                    r.case = format!("vectors:{}", v.name);
                    r.op = v.op.name().to_string();
                    let supported = v
                        .graph
                        .compute_nodes()
                        .try_for_each(|n| target.supports(&v.graph, n));
                    if let Err(reason) = supported {
                        r.status = Status::Unsupported;
                        r.reason = Some(reason);
                    } else {
                        let got = target
                            .load(&v.graph, &v.leaves)
                            .and_then(|_| target.compute())
                            .and_then(|_| target.read_f32(v.out));
                        match got.and_then(|g| compare(&v.expected, &g)) {
                            Ok(nmse) if nmse <= v.nmse_max => {
                                r.status = Status::Pass;
                                r.nmse = Some(nmse);
                            }
                            Ok(nmse) => {
                                r.nmse = Some(nmse);
                                r.reason = Some(format!("NMSE {nmse:.3e} > {:.1e}", v.nmse_max));
                            }
                            Err(e) => r.reason = Some(e),
                        }
                    }
                }
            }
            results.push(r);
        }
    }
    Ok(results)
}
