//! The `backplane` command survives every plugin of the hostile catalogue:
//! `devices --json` exits 0 with valid JSON, the CPU device is listed, and
//! each hostile file is refused (or its bad device is) with a one-line
//! reason tied to the file; `explain` still plans its example block.
//!
//! The binary of this test's profile is brought up to date once per run with
//! `cargo build -p backplane-cli` (a no-op of a second or two when fresh).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use backplane_testmodel::{Arch, FileType, ModelSpec, write_model};
use backplane_tests::{fixture, generated_model, hostile_cases, install, scratch_dir};

/// Cases whose device looks sound at listing time (they misbehave only
/// when buffers are allocated or freed), so they are listed, not refused.
const LISTED_AT_LOAD: &[&str] = &[
    "panic-in-drop",
    "device-type-newer",
    "alloc-size-max",
    "alloc-size-small",
    "buffer-id-zero",
    "buffer-short",
    "long-description",
];

/// The probe timeout the test sets, in seconds (hangs cost this much).
const PROBE_TIMEOUT_S: u64 = 2;

/// The `backplane` binary of this test's profile, built once if needed.
fn backplane_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        // This test runs as <target>/<profile>/deps/hostile_cli-<hash>.
        let me = std::env::current_exe().expect("the test's own path");
        let profile_dir = me
            .parent()
            .and_then(Path::parent)
            .expect("the test binary lives in <target>/<profile>/deps");
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => "dev".to_string(),
            Some(p) => p.to_string(),
        };
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
            .args([
                "build",
                "--quiet",
                "--profile",
                &profile,
                "-p",
                "backplane-cli",
                "--bin",
                "backplane",
            ])
            .status()
            .expect("running cargo build -p backplane-cli");
        assert!(status.success(), "cargo build -p backplane-cli failed");
        let exe = profile_dir.join("backplane");
        assert!(exe.is_file(), "{} was not built", exe.display());
        exe
    })
}

/// Runs `backplane args...` with the probe timeout set and the probe cache
/// in `scratch` (so no earlier verdict is reused).
fn run_backplane(scratch: &Path, args: &[&str]) -> Output {
    Command::new(backplane_exe())
        .args(args)
        .env("BACKPLANE_PROBE_TIMEOUT", PROBE_TIMEOUT_S.to_string())
        .env("BACKPLANE_PROBE_CACHE", scratch.join("probe-cache.json"))
        .env_remove("BACKPLANE_PROBE")
        .env_remove("BACKPLANE_REMOTE")
        .output()
        .expect("running backplane")
}

/// Creates `dir` and installs the hostile fixture of each of `cases` in it
/// (as `hostile-<case>`): the installed files.
fn install_hostile(dir: &Path, cases: &[String]) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    cases
        .iter()
        .map(|case| {
            let name = format!("hostile-{case}");
            install(&fixture(&name), dir, &name)
        })
        .collect()
}

/// `devices --json --plugin-dir dir`: exit 0 and the parsed JSON.
fn devices_json(scratch: &Path, dir: &Path) -> serde_json::Value {
    let out = run_backplane(
        scratch,
        &[
            "devices",
            "--json",
            "--plugin-dir",
            dir.to_str().expect("utf-8 dir"),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "backplane devices --json with {} exited {:?}: {stderr}",
        dir.display(),
        out.status
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "backplane devices --json printed invalid JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// What the JSON says about `file`: a refusal of the file, or the reasons
/// its loaded backend refused devices, or that it offers a listed device.
#[derive(Debug)]
enum Verdict {
    Refused(String),
    DevicesRefused(Vec<String>),
    Listed,
}

fn verdict_of(json: &serde_json::Value, file: &Path) -> Option<Verdict> {
    let file = file.to_str()?;
    let arr = |k: &str| json[k].as_array().cloned().unwrap_or_default();
    if let Some(r) = arr("refused").iter().find(|r| r["path"] == file) {
        return Some(Verdict::Refused(r["reason"].as_str()?.to_string()));
    }
    let backend = arr("backends").into_iter().find(|b| b["path"] == file)?;
    let refused: Vec<String> = backend["refused_devices"]
        .as_array()?
        .iter()
        .filter_map(|r| r.as_str().map(str::to_string))
        .collect();
    let listed = arr("devices").iter().any(|d| d["path"] == file);
    if listed {
        Some(Verdict::Listed)
    } else {
        Some(Verdict::DevicesRefused(refused))
    }
}

fn has_cpu_device(json: &serde_json::Value) -> bool {
    json["devices"]
        .as_array()
        .is_some_and(|d| d.iter().any(|d| d["type"] == "cpu"))
}

fn assert_one_line(case: &str, reason: &str) {
    assert!(
        !reason.trim().is_empty() && !reason.contains('\n') && reason.len() < 400,
        "{case}: the reason must be one short line: {reason:?}"
    );
}

#[test]
fn devices_json_survives_each_hostile_plugin_alone_with_a_one_line_reason() {
    let started = Instant::now();
    backplane_exe();
    // Each case alone in its directory (one backend name, so no case hides
    // behind another as a duplicate); all run at once.
    let handles: Vec<_> = hostile_cases()
        .into_iter()
        .map(|case| {
            std::thread::spawn(move || {
                let scratch = scratch_dir(&format!("hostile-cli-{case}"));
                let dir = scratch.join("plugins");
                let [file] = &install_hostile(&dir, std::slice::from_ref(&case))[..] else {
                    unreachable!("one case installs one file")
                };
                let file = file.clone();
                let json = devices_json(&scratch, &dir);
                let _ = std::fs::remove_dir_all(&scratch);
                (case, file, json)
            })
        })
        .collect();
    for h in handles {
        let (case, file, json) = h.join().expect("a case's thread");
        assert!(has_cpu_device(&json), "{case}: no CPU device: {json}");
        let verdict = verdict_of(&json, &file)
            .unwrap_or_else(|| panic!("{case}: {} is not in the output: {json}", file.display()));
        match (&verdict, LISTED_AT_LOAD.contains(&case.as_str())) {
            (Verdict::Refused(reason), false) => assert_one_line(&case, reason),
            (Verdict::DevicesRefused(reasons), false) => {
                assert!(!reasons.is_empty(), "{case}: no device and no reason");
                for r in reasons {
                    assert_one_line(&case, r);
                    assert!(r.contains("device 0 refused"), "{case}: {r}");
                }
            }
            (Verdict::Listed, true) => {}
            (v, _) => panic!("{case}: unexpected verdict {v:?}"),
        }
    }
    // The three hangs ran in parallel, so the whole costs about one timeout
    // plus the builds' checks.
    let probe_bound = Duration::from_secs(PROBE_TIMEOUT_S * 6);
    assert!(
        started.elapsed() < probe_bound + Duration::from_secs(120),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn devices_json_and_explain_survive_the_whole_catalogue_in_one_directory() {
    let scratch = scratch_dir("hostile-cli-all");
    let dir = scratch.join("plugins");
    let files = install_hostile(&dir, &hostile_cases());
    backplane_exe();
    let started = Instant::now();
    let json = devices_json(&scratch, &dir);
    let took = started.elapsed();
    assert!(has_cpu_device(&json), "no CPU device: {json}");
    // Every file is accounted for: refused with a reason naming it (the
    // entry's path), or the one backend 'hostile' kept, its path named.
    let mut kept = 0;
    for file in &files {
        match verdict_of(&json, file) {
            Some(Verdict::Refused(reason)) => assert_one_line(&file.display().to_string(), &reason),
            Some(Verdict::DevicesRefused(_) | Verdict::Listed) => kept += 1,
            None => panic!("{} is not in the output: {json}", file.display()),
        }
    }
    assert_eq!(kept, 1, "exactly one 'hostile' backend is kept: {json}");
    // The hangs are probed in parallel: one timeout, not three.
    assert!(
        took < Duration::from_secs(PROBE_TIMEOUT_S * 3 + 10),
        "devices took {took:?}"
    );

    // Planning over whatever survived still works.
    let out = run_backplane(
        &scratch,
        &["explain", "--plugin-dir", dir.to_str().expect("utf-8 dir")],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "explain exited {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.trim().is_empty(), "explain printed nothing");
    let _ = std::fs::remove_dir_all(&scratch);
}

/// The tiny f32 llama test model, generated once per test process.
fn tiny_model() -> PathBuf {
    let spec = ModelSpec::tiny(Arch::Llama, FileType::F32);
    generated_model(&spec.file_name(), |path| {
        write_model(&spec, path).expect("writing the tiny model");
    })
}

/// `backplane logits` of tokens 1..8 on `device`, with `plugin_dir` searched
/// first when given: the exit status, the JSON written and stderr.
fn logits(
    scratch: &Path,
    model: &Path,
    device: &str,
    plugin_dir: Option<&Path>,
    name: &str,
) -> (Output, Option<String>) {
    let out_file = scratch.join(format!("{name}.json"));
    let mut args = vec![
        "logits".to_string(),
        "-m".into(),
        model.display().to_string(),
        "--device".into(),
        device.into(),
        "-c".into(),
        "64".into(),
        "--tokens".into(),
        "1,2,3,4,5,6,7,8".into(),
        "--json".into(),
        out_file.display().to_string(),
    ];
    if let Some(d) = plugin_dir {
        args.extend(["--plugin-dir".into(), d.display().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_backplane(scratch, &args);
    (out, std::fs::read_to_string(&out_file).ok())
}

#[test]
fn a_model_run_beside_the_whole_catalogue_gives_the_same_logits() {
    let scratch = scratch_dir("hostile-cli-run");
    let dir = scratch.join("plugins");
    install_hostile(&dir, &hostile_cases());
    let model = tiny_model();
    let (plain, want) = logits(&scratch, &model, "cpu", None, "plain");
    assert!(
        plain.status.success(),
        "the run without hostile plugins failed: {}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let (beside, got) = logits(&scratch, &model, "cpu", Some(&dir), "beside");
    assert!(
        beside.status.success(),
        "the run beside the catalogue failed: {}",
        String::from_utf8_lossy(&beside.stderr)
    );
    let want = want.expect("logits written by the plain run");
    assert!(want.len() > 100, "{want}");
    assert_eq!(
        got.as_deref(),
        Some(want.as_str()),
        "logits differ beside the catalogue"
    );
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn a_model_run_on_each_listed_hostile_device_ends_cleanly() {
    let scratch = scratch_dir("hostile-cli-run-on");
    let model = tiny_model();
    for case in LISTED_AT_LOAD {
        let dir = scratch.join(case);
        install_hostile(&dir, &[case.to_string()]);
        let (out, written) = logits(&scratch, &model, "hostile", Some(&dir), case);
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Either it ran (whatever the device did was caught or routed
        // around) or it stopped with an error; never a signal.
        match out.status.code() {
            Some(0) => assert!(written.is_some(), "{case}: exit 0 without logits"),
            Some(_) => {
                let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
                assert!(
                    last.is_some_and(|l| l.starts_with("error")),
                    "{case}: failed without an error line: {stderr}"
                );
            }
            None => panic!("{case}: killed by a signal: {stderr}"),
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
}
