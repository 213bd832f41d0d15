//! Probing plugin files in a child process before loading them in process.
//!
//! A plugin that hangs in `score`, init or `devices`, calls `exit`, aborts
//! or crashes while loading would take the host with it. So before the
//! registry opens a file in process, a child process opens it and does
//! everything the registry will do (ABI version, score, root module and
//! layout check, registration, name rule, devices and their checks) and
//! prints the outcome. A file whose probe hangs past the timeout, exits,
//! aborts or crashes is refused with what happened and the last stage the
//! child reached.
//!
//! The child is an `exec` of an executable, never a bare `fork`: after
//! `fork` in a multithreaded host only async-signal-safe calls are allowed,
//! and `dlopen` is not one. By default the executable is the host's own
//! (`current_exe`): every program that links this crate and calls
//! [`Registry::load`](super::Registry::load) carries a start-up hook (an
//! `.init_array` entry) that, when [`PROBE_CHILD_ENV`] is set, probes that
//! file and exits before `main` runs. So tests, the CLI, the conformance
//! runner and embedding programs need no extra binary. A host whose
//! executable does not link this crate (a Python interpreter loading a
//! wrapper library) names one that does in [`PROBE_EXE_ENV`] (the
//! `backplane` CLI serves).
//!
//! Outcomes are cached ([`cache`](super::cache)) so a warm start runs no
//! child at all.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use super::ProbeOptions;

/// Set in the probe child: the plugin file to probe.
pub const PROBE_CHILD_ENV: &str = "BACKPLANE_PROBE_CHILD";
/// The executable to run as probe (default: this program); `off` loads
/// plugins in process without probing them.
pub const PROBE_EXE_ENV: &str = "BACKPLANE_PROBE";
/// Probe timeout in seconds (default [`DEFAULT_TIMEOUT`]).
pub const PROBE_TIMEOUT_ENV: &str = "BACKPLANE_PROBE_TIMEOUT";
/// Default probe timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Marks the child's outcome line on its stdout.
const RESULT_MARK: &str = "backplane-probe-result ";
/// Marks the child's stage lines on its stdout.
const STAGE_MARK: &str = "backplane-probe-stage ";
/// Bytes of child output kept (the rest is read and dropped).
const MAX_CAPTURE: usize = 64 * 1024;

/// What a probe found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The file loads; its score on this machine.
    Accepted {
        /// The variant's score.
        score: u32,
    },
    /// The file is refused, and why (one line).
    Refused {
        /// Why.
        reason: String,
    },
}

/// Whether this platform has the start-up hook (ELF `.init_array`).
pub const HOOK_SUPPORTED: bool = cfg!(all(unix, not(target_vendor = "apple")));

/// The start-up hook: in a probe child, probe and exit before `main`.
#[cfg(all(unix, not(target_vendor = "apple")))]
#[used]
#[unsafe(link_section = ".init_array")]
pub(crate) static PROBE_CHILD_HOOK: extern "C" fn() = probe_child_hook;

/// Placeholder where the start-up hook is not implemented (the probe
/// executable must then be named in [`PROBE_EXE_ENV`] and call
/// [`child_main`]).
#[cfg(not(all(unix, not(target_vendor = "apple"))))]
pub(crate) static PROBE_CHILD_HOOK: extern "C" fn() = probe_child_hook;

extern "C" fn probe_child_hook() {
    if std::env::var_os(PROBE_CHILD_ENV).is_some() {
        child_main();
    }
}

/// Runs the probe of the file named in [`PROBE_CHILD_ENV`] and exits: 0
/// with an outcome line on stdout. For a dedicated probe executable's
/// `main`.
pub fn child_main() -> ! {
    use std::io::Write;
    let Some(path) = std::env::var_os(PROBE_CHILD_ENV) else {
        eprintln!("{PROBE_CHILD_ENV} is not set");
        std::process::exit(2);
    };
    let path = PathBuf::from(path);
    let stdout = std::io::stdout();
    let mut stage = |s: &str| {
        let mut out = stdout.lock();
        let _ = writeln!(out, "{STAGE_MARK}{s}");
        let _ = out.flush();
    };
    let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        super::judge_in_process(&path, &mut stage)
    })) {
        Ok(Ok(score)) => Outcome::Accepted { score },
        Ok(Err(reason)) => Outcome::Refused { reason },
        Err(p) => Outcome::Refused {
            reason: format!(
                "the host panicked probing it: {}",
                backplane_abi::plugin::panic_message(&*p)
            ),
        },
    };
    let line = serde_json::to_string(&outcome).unwrap_or_default();
    let mut out = stdout.lock();
    let _ = writeln!(out, "{RESULT_MARK}{line}");
    let _ = out.flush();
    drop(out);
    exit_now(0)
}

/// Ends the probe child at once: no `atexit` handlers or library
/// destructors (a GPU driver's may be slow or crash at exit, which says
/// nothing about loading the plugin).
#[cfg(unix)]
fn exit_now(code: i32) -> ! {
    unsafe extern "C" {
        fn _exit(code: i32) -> !;
    }
    // SAFETY: `_exit` is the POSIX process exit; stdout was flushed above.
    unsafe { _exit(code) }
}

#[cfg(not(unix))]
fn exit_now(code: i32) -> ! {
    std::process::exit(code)
}

/// A running probe.
struct Running {
    child: Child,
    stdout: std::thread::JoinHandle<Vec<u8>>,
    stderr: std::thread::JoinHandle<Vec<u8>>,
}

/// Reads all of `r`, keeping the first [`MAX_CAPTURE`] bytes.
fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = MAX_CAPTURE.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
        kept
    })
}

fn spawn(exe: &Path, file: &Path) -> Result<Running, String> {
    let mut child = Command::new(exe)
        .env(PROBE_CHILD_ENV, file)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the probe process {}: {e}", exe.display()))?;
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    Ok(Running {
        child,
        stdout,
        stderr,
    })
}

/// Probes `files` in parallel child processes of `exe`, each within
/// `timeout`; one outcome per file, in order.
pub fn probe_files(exe: &Path, files: &[PathBuf], timeout: Duration) -> Vec<Outcome> {
    let start = Instant::now();
    let mut running: Vec<Option<Result<Running, String>>> =
        files.iter().map(|f| Some(spawn(exe, f))).collect();
    let mut outcomes: Vec<Option<Outcome>> = vec![None; files.len()];
    let mut pause = Duration::from_micros(200);
    loop {
        let mut pending = false;
        for (i, slot) in running.iter_mut().enumerate() {
            let Some(state) = slot else { continue };
            let finished = match state {
                Err(e) => Some((None, Err(e.clone()))),
                Ok(r) => match r.child.try_wait() {
                    Ok(Some(status)) => Some((Some(status), Ok(()))),
                    Ok(None) if start.elapsed() >= timeout => {
                        let _ = r.child.kill();
                        let _ = r.child.wait();
                        Some((None, Ok(())))
                    }
                    Ok(None) => None,
                    Err(e) => Some((None, Err(format!("waiting for the probe: {e}")))),
                },
            };
            let Some((status, err)) = finished else {
                pending = true;
                continue;
            };
            let state = slot.take().expect("probe state present");
            outcomes[i] = Some(match (state, err) {
                (_, Err(e)) | (Err(e), _) => Outcome::Refused { reason: e },
                (Ok(r), Ok(())) => {
                    let out = r.stdout.join().unwrap_or_default();
                    let err_text = r.stderr.join().unwrap_or_default();
                    interpret(status, &out, &err_text, timeout)
                }
            });
        }
        if !pending {
            break;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
    outcomes
        .into_iter()
        .map(|o| o.expect("every probe finished"))
        .collect()
}

/// The outcome of a finished (or killed: `status` `None`) probe child.
fn interpret(
    status: Option<std::process::ExitStatus>,
    stdout: &[u8],
    stderr: &[u8],
    timeout: Duration,
) -> Outcome {
    let text = String::from_utf8_lossy(stdout);
    let stage = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(STAGE_MARK))
        .unwrap_or("start");
    let result = text.lines().rev().find_map(|l| l.strip_prefix(RESULT_MARK));
    let last_err = String::from_utf8_lossy(stderr)
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map(|l| format!(" (last stderr line: {})", super::check::clean_text(l, 160)))
        .unwrap_or_default();
    let Some(status) = status else {
        return Outcome::Refused {
            reason: format!(
                "probe timed out after {} s in {stage} (the plugin hangs; limit set by {PROBE_TIMEOUT_ENV})",
                timeout.as_secs_f64()
            ),
        };
    };
    if status.success()
        && let Some(line) = result
        && let Ok(outcome) = serde_json::from_str::<Outcome>(line)
    {
        return outcome;
    }
    let how = describe_exit(status);
    Outcome::Refused {
        reason: format!("probe process {how} in {stage}{last_err}"),
    }
}

/// `exited with code 3`, `was killed by signal 6 (SIGABRT)`.
fn describe_exit(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = match sig {
                4 => " (SIGILL)",
                6 => " (SIGABRT)",
                7 => " (SIGBUS)",
                8 => " (SIGFPE)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                15 => " (SIGTERM)",
                _ => "",
            };
            return format!("was killed by signal {sig}{name}");
        }
    }
    match status.code() {
        Some(0) => "exited with code 0 before finishing".to_string(),
        Some(c) => format!("exited with code {c}"),
        None => "ended abnormally".to_string(),
    }
}

/// The executable to probe with: the option, else this program.
pub fn probe_exe(options: &ProbeOptions) -> Result<PathBuf, String> {
    match &options.exe {
        Some(e) => Ok(e.clone()),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find this program to run as plugin probe: {e}")),
    }
}
