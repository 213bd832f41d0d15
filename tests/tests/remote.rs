//! The `remote` plugin loaded through the registry, against `backplane
//! serve` child processes on loopback: devices are listed, a multi-layer
//! graph split across the local CPU and two servers equals the CPU result,
//! a tiny model split across the CPU and a server gives the local logits,
//! `kill -9` of a server mid-run is an error naming it (and the host goes
//! on), and an isolated plugin's crash costs an error and a restart.
//!
//! Needs `cargo build -p backplane-cli -p backplane-remote-plugin` and
//! `cargo xtask plugins` (the CPU plugin the servers run).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use backplane::examples::{BlockConfig, llama_layers, weights};
use backplane::registry::{Device, Registry, RegistryOptions, SearchPath};
use backplane::sched::{SchedOptions, Scheduler};
use backplane::{Graph, HostTensors};
use backplane_tests::{cpu_plugin, generated_model, install, nmse, scratch_dir, target_dir};

#[path = "remote/faults.rs"]
mod faults;
#[path = "remote/layouts.rs"]
mod layouts;
#[path = "remote/questions.rs"]
mod questions;

const TOKEN: &str = "loopback-test-token";

/// The built `backplane` binary.
fn backplane_bin() -> PathBuf {
    let p = target_dir().join("debug").join("backplane");
    assert!(
        p.is_file(),
        "{} missing: cargo build -p backplane-cli",
        p.display()
    );
    p
}

/// A directory holding the remote plugin as `libbackplane_remote.so`
/// (made once per test process).
fn remote_plugin_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(make_remote_plugin_dir).clone()
}

fn make_remote_plugin_dir() -> PathBuf {
    let built = [
        target_dir().join("plugins").join("libbackplane_remote.so"),
        target_dir()
            .join("debug")
            .join("libbackplane_remote_plugin.so"),
    ];
    let file = built
        .iter()
        .filter(|p| p.is_file())
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .unwrap_or_else(|| panic!("remote plugin missing: cargo build -p backplane-remote-plugin"));
    let dir = scratch_dir("remote-plugin");
    install(file, &dir, "remote");
    dir
}

/// Env vars are process-wide: one test at a time sets and reads them.
fn env_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn set_remote_env(servers: &str, isolate: &str, timeout_ms: u64) {
    // SAFETY: every test that touches the environment holds `env_lock`.
    unsafe {
        std::env::set_var("BACKPLANE_REMOTE", servers);
        std::env::set_var("BACKPLANE_REMOTE_TOKEN", TOKEN);
        std::env::set_var("BACKPLANE_REMOTE_INSECURE", "1");
        std::env::set_var("BACKPLANE_REMOTE_ISOLATE", isolate);
        std::env::set_var("BACKPLANE_REMOTE_TIMEOUT_MS", timeout_ms.to_string());
        std::env::set_var("BACKPLANE_SERVE_BIN", backplane_bin());
    }
}

/// A `backplane serve` child on 127.0.0.1 (killed when dropped).
struct Serve {
    child: Child,
    address: String,
}

impl Serve {
    fn start() -> Serve {
        Serve::start_with(&cpu_plugin())
    }

    /// A server of the CPU plugin this machine's registry picks (the same
    /// kernels as the local CPU device).
    fn start_best_cpu() -> Serve {
        Serve::start_with(&best_cpu_plugin())
    }
}

/// The CPU plugin this machine's registry picks.
fn best_cpu_plugin() -> PathBuf {
    let reg = Registry::load(&RegistryOptions {
        search: SearchPath::only([backplane_tests::plugin_dir()]),
        builtin: None,
    });
    reg.backend("cpu")
        .and_then(|b| b.source.path().map(Path::to_path_buf))
        .unwrap_or_else(cpu_plugin)
}

impl Serve {
    fn start_with(plugin: &Path) -> Serve {
        Serve::start_configured(plugin, &[], None)
    }

    /// A server of the CPU plugin listening on `address` (a restart on
    /// the port of a killed one); tried for up to 10 s while the port is
    /// still held.
    fn start_at(address: &str) -> Serve {
        let t0 = Instant::now();
        loop {
            match Serve::try_start_on(address, &cpu_plugin(), &[], None) {
                Ok(s) => return s,
                Err(status) if t0.elapsed() > Duration::from_secs(10) => {
                    panic!("backplane serve on {address} did not start ({status})")
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    /// A server of `plugin` with extra environment variables, its stderr
    /// into `stderr` when given. A server that exits before printing its
    /// address (seen once under a full workspace test run, exit status
    /// unknown then) is reported with its status and started once more.
    fn start_configured(
        plugin: &Path,
        env: &[(&str, &std::ffi::OsStr)],
        stderr: Option<&Path>,
    ) -> Serve {
        match Serve::try_start(plugin, env, stderr) {
            Ok(s) => s,
            Err(status) => {
                eprintln!(
                    "backplane serve exited before printing its address ({status}); starting it again"
                );
                Serve::try_start(plugin, env, stderr).unwrap_or_else(|status| {
                    panic!("backplane serve exited twice before printing its address ({status})")
                })
            }
        }
    }

    fn try_start(
        plugin: &Path,
        env: &[(&str, &std::ffi::OsStr)],
        stderr: Option<&Path>,
    ) -> Result<Serve, String> {
        Serve::try_start_on("127.0.0.1:0", plugin, env, stderr)
    }

    fn try_start_on(
        listen: &str,
        plugin: &Path,
        env: &[(&str, &std::ffi::OsStr)],
        stderr: Option<&Path>,
    ) -> Result<Serve, String> {
        let mut cmd = Command::new(backplane_bin());
        cmd.envs(env.iter().copied());
        if let Some(p) = stderr {
            cmd.stderr(std::fs::File::create(p).unwrap());
        } else {
            cmd.stderr(Stdio::inherit());
        }
        let mut child = cmd
            .args(["serve", "--listen", listen, "--insecure", "--token", TOKEN])
            .arg("--plugin")
            .arg(plugin)
            .env_remove("BACKPLANE_REMOTE")
            .env_remove("BACKPLANE_REMOTE_ISOLATE")
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting backplane serve");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(out).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("serve printed its address");
        if line.is_empty() {
            let status = child
                .wait()
                .map_or_else(|e| e.to_string(), |s| s.to_string());
            return Err(status);
        }
        let address = line
            .split(" on ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        Ok(Serve { child, address })
    }

    fn kill9(&mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn load(dir: &Path) -> Registry {
    Registry::load(&RegistryOptions {
        search: SearchPath::only([dir]),
        builtin: Some(backplane::builtin_cpu()),
    })
}

fn remote_devices(reg: &Registry) -> Vec<Device> {
    let b = reg
        .backend("remote")
        .unwrap_or_else(|| panic!("remote backend not loaded; refused: {:?}", reg.refused()));
    assert!(b.refused_devices.is_empty(), "{:?}", b.refused_devices);
    b.devices.clone()
}

fn cpu(reg: &Registry) -> Device {
    reg.backend("cpu").unwrap().devices[0].clone()
}

fn filled(g: &Graph) -> HostTensors {
    let mut host = HostTensors::new(g);
    for t in g
        .ids()
        .filter(|&t| g.desc(t).op().is_ok_and(|o| o == backplane::Op::None))
    {
        let d = g.desc(t);
        let n = d.nelements() as usize;
        match d.dtype().unwrap() {
            backplane::DType::I32 => {
                let pos: Vec<i32> = (0..n as i32).collect();
                host.set_i32(g, t, &pos).unwrap();
            }
            _ if g.name(t).contains("mask") => {
                let m = d.ne[0] as usize;
                let v: Vec<f32> = (0..n)
                    .map(|i| {
                        if i % m <= i / m {
                            0.0
                        } else {
                            f32::NEG_INFINITY
                        }
                    })
                    .collect();
                host.set_f32(g, t, &v).unwrap();
            }
            _ => {
                let scale = if g.name(t).contains("norm") {
                    1.0
                } else {
                    0.08
                };
                let v: Vec<f32> = (0..n)
                    .map(|i| {
                        let h = (i as u32 ^ (t.index() as u32 * 7919)).wrapping_mul(2_654_435_761);
                        scale * ((h >> 16) % 2001) as f32 / 1000.0 - scale
                    })
                    .collect();
                host.set_f32(g, t, &v).unwrap();
            }
        }
    }
    host
}

fn layers() -> Graph {
    let cfg = BlockConfig {
        n_embd: 64,
        n_head: 4,
        n_head_kv: 2,
        n_ff: 128,
        n_tokens: 4,
        ..BlockConfig::default()
    };
    llama_layers(&cfg, 3).unwrap()
}

/// Runs [`layers`] with its weights dealt over `devices` (in thirds),
/// inputs from `host`; returns the output and how many nodes ran on each
/// device.
fn run_layers_counted(
    devices: Vec<Device>,
    host: &HostTensors,
) -> Result<(Vec<f32>, Vec<usize>), String> {
    let n = devices.len();
    let mut s = Scheduler::new(devices, SchedOptions::default()).map_err(|e| e.to_string())?;
    let mut g = layers();
    let w = weights(&g);
    let per = w.len().div_ceil(n);
    for (k, part) in w.chunks(per).enumerate() {
        s.place_weights(&mut g, k, part)
            .map_err(|e| e.to_string())?;
    }
    for &t in &w {
        s.upload(&g, t, host.bytes(t)).map_err(|e| e.to_string())?;
    }
    let inputs: Vec<_> = g
        .ids()
        .filter(|&t| g.desc(t).op().is_ok_and(|o| o == backplane::Op::None) && !w.contains(&t))
        .map(|t| (t, host.bytes(t)))
        .collect();
    let r = g.outputs()[0];
    let mut out = vec![0u8; g.desc(r).nbytes() as usize];
    let plan = s
        .run(&g, &inputs, &mut [(r, &mut out)])
        .map_err(|e| e.to_string())?;
    let mut per_device = vec![0usize; n];
    for node in g.compute_nodes() {
        per_device[plan.assignment.backend[node.index()]] += 1;
    }
    Ok((backplane_tests::bytes_f32(&out), per_device))
}

/// [`run_layers_counted`] without the counts.
fn run_layers(devices: Vec<Device>, host: &HostTensors) -> Result<Vec<f32>, String> {
    run_layers_counted(devices, host).map(|(out, _)| out)
}

#[test]
fn remote_devices_are_listed_with_their_server_backend_and_device() {
    let _env = env_lock();
    let (a, b) = (Serve::start(), Serve::start());
    set_remote_env(&format!("{},{}", a.address, b.address), "", 20_000);
    let dir = remote_plugin_dir();
    let reg = load(&dir);
    let devs = remote_devices(&reg);
    assert_eq!(devs.len(), 2, "{devs:?}");
    assert!(devs[0].name().starts_with("r0-cpu-"), "{}", devs[0].name());
    assert!(devs[1].name().starts_with("r1-cpu-"), "{}", devs[1].name());
    assert!(
        devs[0].description().contains(&a.address),
        "{}",
        devs[0].description()
    );
    assert!(
        devs[1].description().contains(&b.address),
        "{}",
        devs[1].description()
    );
    assert!(devs[0].memory().total_bytes > 0);
    // And `backplane devices` shows them.
    let out = Command::new(backplane_bin())
        .args(["devices", "--plugin-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("remote"), "{text}");
    assert!(
        text.contains(&a.address) || text.contains("r0-cpu"),
        "{text}"
    );
}

#[test]
fn layers_split_across_the_cpu_and_two_servers_equal_the_cpu_result() {
    let _env = env_lock();
    let (a, b) = (Serve::start(), Serve::start());
    set_remote_env(&format!("{},{}", a.address, b.address), "", 60_000);
    let reg = load(&remote_plugin_dir());
    let remote = remote_devices(&reg);
    let g = layers();
    let host = filled(&g);
    let want = run_layers(vec![cpu(&reg)], &host).unwrap();
    let (got, per_device) =
        run_layers_counted(vec![remote[0].clone(), remote[1].clone(), cpu(&reg)], &host).unwrap();
    assert!(
        per_device.iter().all(|&n| n > 0),
        "nodes per device {per_device:?}"
    );
    let e = nmse(&got, &want);
    assert!(e < 1e-10, "nmse {e}");
    eprintln!(
        "nodes per device {per_device:?}, nmse {e}, bitwise equal: {}",
        got == want
    );
    assert!(want.iter().all(|v| v.is_finite()));
}

#[test]
fn server_killed_mid_run_is_an_error_naming_it_and_the_host_goes_on() {
    let _env = env_lock();
    let (mut a, b) = (Serve::start(), Serve::start());
    set_remote_env(&format!("{},{}", a.address, b.address), "", 10_000);
    let reg = load(&remote_plugin_dir());
    let remote = remote_devices(&reg);
    let g = layers();
    let host = filled(&g);
    let want = run_layers(vec![cpu(&reg)], &host).unwrap();
    // Kill server A while graphs run (bounded: 60 s; not by a count of
    // runs, which can all finish before the kill on a fast client).
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        a.kill9();
        a
    });
    let t0 = Instant::now();
    let mut failure = None;
    loop {
        match run_layers(vec![remote[0].clone(), remote[1].clone(), cpu(&reg)], &host) {
            Ok(got) => assert!(nmse(&got, &want) < 1e-10),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
        if t0.elapsed() > Duration::from_secs(60) {
            break;
        }
    }
    let a = killer.join().unwrap();
    let err = failure.expect("a run failed after the kill");
    assert!(
        err.contains(&a.address),
        "error does not name the server: {err}"
    );
    // The host keeps working: server B and the CPU still compute.
    let got = run_layers(vec![remote[1].clone(), cpu(&reg)], &host).unwrap();
    assert!(nmse(&got, &want) < 1e-10);
    drop(b);
}

/// Pids of the isolated `backplane serve` children this process started.
fn isolated_children() -> Vec<u32> {
    let me = std::process::id();
    let out = Command::new("pgrep")
        .args(["-f", &format!("backplane-isolate-{me}-")])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

#[test]
fn isolated_plugin_crash_costs_an_error_and_a_restart_not_the_host() {
    let _env = env_lock();
    set_remote_env("", &cpu_plugin().display().to_string(), 20_000);
    let reg = load(&remote_plugin_dir());
    let remote = remote_devices(&reg);
    assert_eq!(remote.len(), 1, "{remote:?}");
    assert!(
        remote[0].description().contains("isolated child"),
        "{}",
        remote[0].description()
    );
    let g = layers();
    let host = filled(&g);
    let want = run_layers(vec![cpu(&reg)], &host).unwrap();
    let got = run_layers(vec![remote[0].clone(), cpu(&reg)], &host).unwrap();
    assert!(nmse(&got, &want) < 1e-10);
    // The plugin's process dies (as a crashing plugin would): an error.
    let children = isolated_children();
    assert_eq!(children.len(), 1, "isolated children {children:?}");
    let status = Command::new("kill")
        .args(["-9", &children[0].to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    std::thread::sleep(Duration::from_millis(100));
    let err = run_layers(vec![remote[0].clone(), cpu(&reg)], &host).unwrap_err();
    assert!(
        err.contains("backplane-isolate-"),
        "error does not name the child: {err}"
    );
    // The next use (after the backoff) starts a new child and computes.
    let t0 = Instant::now();
    let got = loop {
        std::thread::sleep(Duration::from_millis(300));
        match run_layers(vec![remote[0].clone(), cpu(&reg)], &host) {
            Ok(got) => break got,
            Err(e) if t0.elapsed() > Duration::from_secs(30) => panic!("no restart: {e}"),
            Err(_) => {}
        }
    };
    assert!(nmse(&got, &want) < 1e-10);
    let again = isolated_children();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_ne!(again[0], children[0], "a new child serves the plugin");
}

#[test]
fn isolated_hostile_plugin_that_crashes_leaves_an_error_and_the_host_computing() {
    let _env = env_lock();
    let hostile = backplane_tests::fixture("hostile-crash-in-devices");
    set_remote_env("", &hostile.display().to_string(), 20_000);
    let reg = load(&remote_plugin_dir());
    let b = reg.backend("remote").expect("the remote plugin loads");
    assert!(b.devices.is_empty());
    let why = b.no_device_reason.clone().unwrap_or_default();
    assert!(why.contains("hostile-crash-in-devices"), "{why}");
    // The host computes on.
    let g = layers();
    let host = filled(&g);
    let out = run_layers(vec![cpu(&reg)], &host).unwrap();
    assert!(out.iter().all(|v| v.is_finite()));
}

#[test]
fn tiny_model_split_across_the_cpu_and_a_server_gives_the_local_logits() {
    use backplane_testmodel::{Arch, FileType, ModelSpec, write_model};
    let _env = env_lock();
    let server = Serve::start_best_cpu();
    set_remote_env(&server.address, "", 60_000);
    let spec = ModelSpec::tiny(Arch::Llama, FileType::F32);
    let path = generated_model(&spec.file_name(), |p| {
        write_model(&spec, p).expect("writing the tiny model");
    });
    let split = split_model_matches_local(&path, 128, &(1..24).collect::<Vec<_>>(), &[5, 9, 13]);
    eprintln!("placement {:?}", split.placement());
}

/// Loads the model at `path` on the local CPU and with its last two layers
/// on the remote device (repacked weights where a side offers them), and
/// checks that a prefill of `prompt` (every position's logits) and then
/// decoding `decode` a token at a time give bitwise the local logits.
/// Returns the split model.
fn split_model_matches_local(
    path: &Path,
    n_ctx: usize,
    prompt: &[u32],
    decode: &[u32],
) -> backplane_llm::Model {
    use backplane_llm::{LoadOptions, Logits, Model};
    let options = |device: &str, gpu_layers| LoadOptions {
        device: device.into(),
        gpu_layers,
        n_ctx,
        plugin_dirs: vec![remote_plugin_dir()],
        repack: true,
        ..LoadOptions::default()
    };
    let local = Model::load(path, &options("cpu", None)).unwrap();
    let split = Model::load(path, &options("remote", Some(2))).unwrap();
    let want = local
        .session(n_ctx)
        .unwrap()
        .eval(prompt, Logits::All)
        .unwrap()
        .to_vec();
    let mut s = split.session(n_ctx).unwrap();
    let got = s.eval(prompt, Logits::All).unwrap().to_vec();
    assert_eq!(
        got, want,
        "prefill logits of the split model differ from the local run"
    );
    let mut l = local.session(n_ctx).unwrap();
    l.eval(prompt, Logits::Last).unwrap();
    for &t in decode {
        let a = l.eval(&[t], Logits::Last).unwrap().to_vec();
        let b = s.eval(&[t], Logits::Last).unwrap().to_vec();
        assert_eq!(a, b, "decode logits after token {t}");
    }
    drop(s);
    split
}

/// The newest built conformance runner (release or debug).
fn conformance_bin() -> PathBuf {
    ["release", "debug"]
        .iter()
        .map(|p| target_dir().join(p).join("backplane-conformance"))
        .filter(|p| p.is_file())
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .unwrap_or_else(|| {
            panic!("conformance runner missing: cargo build --release -p backplane-conformance")
        })
}

/// Ops of the representative subset the conformance test runs on a remote
/// device (sampled tier): element-wise, copies and conversions, row
/// gathers and scatters, normalisation, softmax, rope, gated units, matrix
/// products with and without ids, attention.
const CONFORMANCE_OPS: &[&str] = &[
    "ADD",
    "MUL",
    "CPY",
    "CONT",
    "GET_ROWS",
    "SET_ROWS",
    "RMS_NORM",
    "SOFT_MAX",
    "ROPE",
    "GLU",
    "MUL_MAT",
    "MUL_MAT_ID",
    "FLASH_ATTN_EXT",
];

#[test]
fn conformance_runner_on_a_remote_device_passes_the_cases_the_local_cpu_passes() {
    // Not for the environment (the runner gets its own), but so that its
    // load on a small machine does not run beside the timing-sensitive
    // tests (connection deadlines, child restarts).
    let _env = env_lock();
    let server = Serve::start_best_cpu();
    let scratch = scratch_dir("remote-conformance");
    let out = scratch.join("report.json");
    let log = scratch.join("runner.log");
    let mut cmd = Command::new(conformance_bin());
    cmd.args([
        "test",
        "--backend",
        "cpu",
        "--backend",
        "remote",
        "--tier",
        "sampled",
    ]);
    for op in CONFORMANCE_OPS {
        cmd.args(["--op", op]);
    }
    cmd.arg("--json")
        .arg(&out)
        .env("BACKPLANE_REMOTE", &server.address)
        .env("BACKPLANE_REMOTE_TOKEN", TOKEN)
        .env("BACKPLANE_REMOTE_INSECURE", "1")
        .env("BACKPLANE_REMOTE_ISOLATE", "")
        .env("BACKPLANE_PLUGIN_PATH", remote_plugin_dir())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(scratch.join("runner.err")).unwrap());
    let started = Instant::now();
    let mut child = cmd.spawn().expect("starting the conformance runner");
    // Bounded wait: the runner is killed after 300 s.
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("conformance runner still running after 300 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = std::fs::read_to_string(&log).unwrap_or_default();
    let stderr = std::fs::read_to_string(scratch.join("runner.err")).unwrap_or_default();
    eprintln!(
        "conformance on remote took {:.1} s\n{stdout}{stderr}",
        started.elapsed().as_secs_f64()
    );
    assert!(status.success(), "runner failed: {status}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let cases = report["cases"].as_array().unwrap();
    let status_of = |backend: &str| -> std::collections::BTreeMap<String, String> {
        cases
            .iter()
            .filter(|c| c["backend"] == backend)
            .map(|c| {
                (
                    c["case"].as_str().unwrap().to_string(),
                    c["status"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let (cpu, remote) = (status_of("cpu"), status_of("remote"));
    assert!(cpu.len() > 500, "only {} cases ran on the cpu", cpu.len());
    assert_eq!(
        cpu.keys().collect::<Vec<_>>(),
        remote.keys().collect::<Vec<_>>(),
        "the remote device ran other cases"
    );
    let differ: Vec<_> = cpu
        .iter()
        .filter(|(case, s)| remote[*case] != **s)
        .map(|(case, s)| format!("{case}: cpu {s}, remote {}", remote[case]))
        .collect();
    assert!(differ.is_empty(), "{differ:#?}");
    assert!(
        remote.values().all(|s| s == "pass"),
        "{:?}",
        remote
            .iter()
            .filter(|(_, s)| *s != "pass")
            .collect::<Vec<_>>()
    );
}

#[test]
fn model_weights_come_from_the_servers_own_copy_and_give_the_local_logits() {
    use backplane_llm::{LoadOptions, Logits, Model};
    use backplane_testmodel::{Arch, FileType, ModelSpec, write_model};
    let _env = env_lock();
    let spec = ModelSpec::tiny(Arch::Llama, FileType::F32);
    let dir = scratch_dir("remote-store-model");
    let path = dir.join(spec.file_name());
    write_model(&spec, &path).unwrap();
    let log = scratch_dir("remote-store-log").join("serve.err");
    let server = Serve::start_configured(
        &best_cpu_plugin(),
        &[
            ("BACKPLANE_SERVE_MODELS", dir.as_os_str()),
            ("BACKPLANE_LOG", "debug".as_ref()),
        ],
        Some(&log),
    );
    set_remote_env(&server.address, "", 60_000);
    let options = |device: &str, gpu_layers| LoadOptions {
        device: device.into(),
        gpu_layers,
        n_ctx: 64,
        plugin_dirs: vec![remote_plugin_dir()],
        repack: true,
        ..LoadOptions::default()
    };
    let local = Model::load(&path, &options("cpu", None)).unwrap();
    let split = Model::load(&path, &options("remote", Some(2))).unwrap();
    let tokens: Vec<u32> = (1..12).collect();
    let want = local
        .session(64)
        .unwrap()
        .eval(&tokens, Logits::All)
        .unwrap()
        .to_vec();
    let got = split
        .session(64)
        .unwrap()
        .eval(&tokens, Logits::All)
        .unwrap()
        .to_vec();
    assert_eq!(got, want, "logits with server-side weights differ");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("model store: ") && text.contains("of 1 GGUF files indexed"),
        "{text}"
    );
    let filled = text.matches("filled from the model store").count();
    assert!(
        filled >= 4,
        "only {filled} tensors came from the server's copy:\n{text}"
    );
}
