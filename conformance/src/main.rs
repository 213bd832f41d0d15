//! `backplane-conformance` (run as `cargo xtask conformance`): checks every
//! op on every backend against the reference kernels.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use backplane_conformance::report::{self, Summary};
use backplane_conformance::{
    Case, CaseResult, Catalogue, PerfOptions, PerfResult, Prepared, Status, Target, perf_case,
    test_prepared,
};
use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use regex::Regex;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Compare each backend with the reference kernels.
    Test,
    /// Time each case (GFLOPS or GB/s).
    Perf,
    /// Write the op x backend support matrix to docs/ops.md.
    Support,
}

/// Which cases `test` runs on a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Tier {
    /// `full` everywhere except on accelerator backends whose device is
    /// the host CPU (lavapipe, an OpenCL CPU runtime), which get `sampled`.
    Auto,
    /// Every case.
    Full,
    /// Every hand-picked case and one in 8 of the test-backend-ops grids
    /// (chosen by a hash of the case name).
    Sampled,
}

/// Check backplane backends against the reference kernels.
#[derive(Parser, Debug)]
#[command(name = "backplane-conformance", version)]
struct Args {
    /// What to do (default: test).
    #[arg(value_enum)]
    mode: Option<Mode>,
    /// Backends to check (default: every backend found).
    #[arg(long = "backend")]
    backends: Vec<String>,
    /// Ops to check, by ggml name (default: all).
    #[arg(long = "op")]
    ops: Vec<String>,
    /// Only cases whose name matches this regex.
    #[arg(long = "case")]
    case: Option<String>,
    /// Write results as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write results as CSV.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Also run external vectors from DIR/manifest.json.
    #[arg(long)]
    vectors: Option<PathBuf>,
    /// Print the number of cases per op and exit.
    #[arg(long)]
    list: bool,
    /// perf: minimum timing per case in milliseconds.
    #[arg(long, default_value_t = 1000)]
    min_time_ms: u64,
    /// perf: copies of the op in each timed graph (default: sized so a
    /// graph takes about 20 ms, at most 1,024).
    #[arg(long)]
    repeats: Option<usize>,
    /// support: where to write the matrix.
    #[arg(long, default_value = "docs/ops.md")]
    ops_md: PathBuf,
    /// test: which cases each backend runs (see docs/conformance.md, "Tiers").
    #[arg(long, value_enum, default_value_t = Tier::Auto)]
    tier: Tier,
    /// Print every failing and unsupported case, not only failures.
    #[arg(long, short)]
    verbose: bool,
    /// Put each weight in its device's preferred layout (an extra buffer
    /// type such as the CPU's repacked weights) where one runs every op
    /// reading it, as the model loader does; the rest as usual.
    #[arg(long)]
    weight_layouts: bool,
    /// Set a backend option, NAME.KEY=VALUE (repeatable; `backplane
    /// devices --options` lists them), e.g. webgpu.matmul_path=tiled.
    #[arg(long = "backend-option", value_name = "NAME.KEY=VALUE")]
    backend_options: Vec<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn select_cases(args: &Args, mode: Mode) -> Result<Vec<Case>, String> {
    let re = args
        .case
        .as_deref()
        .map(Regex::new)
        .transpose()
        .map_err(|e| format!("--case: {e}"))?;
    let mut ops = Vec::new();
    for name in &args.ops {
        ops.push(backplane::Op::from_name(name).ok_or_else(|| format!("--op {name}: no such op"))?);
    }
    Ok(Catalogue::all()
        .into_iter()
        .filter(|c| ops.is_empty() || ops.contains(&c.op))
        .filter(|c| re.as_ref().is_none_or(|r| r.is_match(&c.name)))
        .filter(|c| mode == Mode::Perf || !c.perf_only)
        .collect())
}

fn run(args: Args) -> Result<ExitCode, String> {
    let mode = args.mode.unwrap_or(Mode::Test);
    let cases = select_cases(&args, mode)?;
    if args.list {
        // Cases per op, and how many of them the sampled tier runs.
        let mut per_op: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for c in &cases {
            let e = per_op.entry(c.op.name()).or_default();
            e.0 += 1;
            e.1 += c.in_sample() as usize;
        }
        println!("{:<16} {:>6} {:>8}", "op", "cases", "sampled");
        for (op, (n, s)) in &per_op {
            println!("{op:<16} {n:>6} {s:>8}");
        }
        let sampled = cases.iter().filter(|c| c.in_sample()).count();
        println!("{:<16} {:>6} {:>8}", "total", cases.len(), sampled);
        return Ok(ExitCode::SUCCESS);
    }
    let options = backplane::sched::BackendOptions::from_assignments(&args.backend_options)?;
    let mut targets = backplane_conformance::device_target::discover(
        &args.backends,
        args.weight_layouts,
        &options,
    )?;
    if targets.is_empty() {
        return Err(format!("no backend matches {:?}", args.backends));
    }
    match mode {
        Mode::Test => run_test(&args, &cases, &mut targets),
        Mode::Perf => run_perf(&args, &cases, &mut targets),
        Mode::Support => {
            let md = report::support_matrix(&cases, &targets);
            std::fs::write(&args.ops_md, md)
                .map_err(|e| format!("{}: {e}", args.ops_md.display()))?;
            println!("wrote {}", args.ops_md.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn progress(n: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(n as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>8} [{bar:40}] {pos}/{len} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(what.to_string());
    bar
}

fn run_test(
    args: &Args,
    cases: &[Case],
    targets: &mut [Box<dyn Target>],
) -> Result<ExitCode, String> {
    // Case by case, every backend in turn: each case is built and its
    // reference computed once, however many backends run it.
    let mut per_target: Vec<Vec<CaseResult>> = vec![Vec::new(); targets.len()];
    let mut busy = vec![Duration::ZERO; targets.len()];
    let mut reference = Duration::ZERO;
    let sampled: Vec<bool> = targets
        .iter()
        .map(|t| {
            let desc = t.description();
            let sampled = match args.tier {
                Tier::Full => false,
                Tier::Sampled => true,
                Tier::Auto => t.is_host_emulated(),
            };
            if sampled {
                eprintln!(
                    "note: {} ({desc}): sampled tier (accelerator backend on the host CPU), one in {} grid cases; --tier full runs all",
                    t.name(),
                    backplane_conformance::case::GRID_SAMPLE
                );
            }
            sampled
        })
        .collect();
    let in_sample = cases.iter().filter(|c| c.in_sample()).count();
    let runs: usize = sampled
        .iter()
        .map(|&s| if s { in_sample } else { cases.len() })
        .sum();
    let bar = progress(runs, "test");
    for case in cases {
        bar.set_message(case.op.name());
        let prepared = Prepared::new(case);
        for (i, target) in targets.iter_mut().enumerate() {
            if sampled[i] && !case.in_sample() {
                continue;
            }
            let t0 = Instant::now();
            let mut r = test_prepared(&prepared, target.as_mut());
            busy[i] += t0.elapsed();
            r.time_ms = Some(t0.elapsed().as_secs_f64() * 1e3);
            if r.status == Status::Fail || (args.verbose && r.status == Status::Unsupported) {
                say(
                    &bar,
                    format!(
                        "  {:?} {} {}: {}",
                        r.status,
                        r.backend,
                        r.case,
                        r.reason.as_deref().unwrap_or("")
                    ),
                );
            }
            per_target[i].push(r);
            bar.inc(1);
        }
        // The first backend to need the reference paid for it.
        reference += prepared.reference_time();
    }
    bar.finish_and_clear();
    let mut results: Vec<CaseResult> = per_target.into_iter().flatten().collect();
    let backend_time: Vec<String> = targets
        .iter()
        .zip(&busy)
        .map(|(t, d)| format!("{} {:.1} s", t.name(), d.as_secs_f64()))
        .collect();
    eprintln!(
        "time: reference {:.1} s (once per case, included below in the first backend that ran it); {}",
        reference.as_secs_f64(),
        backend_time.join(", ")
    );
    if let Some(dir) = &args.vectors {
        results.extend(report::run_vectors(dir, targets)?);
    }
    let summary = Summary::of(&results);
    print!("{}", summary.table());
    if let Some(p) = &args.json {
        report::write_json(p, &results, &summary)?;
    }
    if let Some(p) = &args.csv {
        report::write_csv(p, &results)?;
    }
    Ok(if summary.failed() > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn run_perf(
    args: &Args,
    cases: &[Case],
    targets: &mut [Box<dyn Target>],
) -> Result<ExitCode, String> {
    let mut results: Vec<PerfResult> = Vec::new();
    let opts = PerfOptions {
        min_time: Duration::from_millis(args.min_time_ms),
        repeats: args.repeats,
    };
    for target in targets.iter_mut() {
        let bar = progress(cases.len(), &target.name());
        // Which device the figures below come from.
        say(&bar, format!("{}: {}", target.name(), target.description()));
        for case in cases {
            bar.set_message(case.op.name());
            let r = perf_case(case, target.as_mut(), opts);
            say(&bar, report::perf_line(&r));
            results.push(r);
            bar.inc(1);
        }
        bar.finish_and_clear();
    }
    if let Some(p) = &args.json {
        report::write_perf_json(p, &results)?;
    }
    if let Some(p) = &args.csv {
        report::write_perf_csv(p, &results)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints a line above the progress bar, or on stderr when the bar is
/// hidden (not a terminal), so `-v` and perf lines show in logs too.
fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}
