//! Out-of-process isolation: a plugin named in `BACKPLANE_REMOTE_ISOLATE`
//! runs inside a child `backplane serve --unix <socket> --plugin <file>`;
//! the remote plugin talks to it like any server. When the child crashes
//! or hangs (a call past its deadline), the next use kills what is left
//! and starts a new one: the host sees an error, never the crash.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The environment variable naming the `backplane` binary that serves
/// isolated plugins (default: `backplane` beside the running program,
/// then on `PATH`).
pub const SERVE_BIN_ENV: &str = "BACKPLANE_SERVE_BIN";

/// The variable the registry sets in its probe child (`backplane`'s
/// `registry::probe::PROBE_CHILD_ENV`), naming the plugin file to probe.
const PROBE_CHILD_ENV: &str = "BACKPLANE_PROBE_CHILD";

/// How long a child has to create its socket.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// One isolated plugin and its supervised child server.
pub struct Isolated {
    file: PathBuf,
    socket: PathBuf,
    child: Mutex<Option<Child>>,
    starts: AtomicU64,
}

impl Isolated {
    /// A supervisor for `file`; starts nothing yet.
    pub fn new(file: PathBuf) -> Isolated {
        static N: AtomicU64 = AtomicU64::new(0);
        let socket = std::env::temp_dir().join(format!(
            "backplane-isolate-{}-{}.sock",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        Isolated {
            file,
            socket,
            child: Mutex::new(None),
            starts: AtomicU64::new(0),
        }
    }

    /// The child's socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// How many children were started so far.
    pub fn starts(&self) -> u64 {
        self.starts.load(Ordering::Relaxed)
    }

    /// Makes sure a child serves the plugin: after a failure the old one
    /// is killed (it may hang) and a new one started.
    pub fn ensure_running(&self, after_failure: bool) -> Result<(), String> {
        let mut guard = self.child.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = guard.as_mut() {
            let alive = matches!(c.try_wait(), Ok(None));
            if alive && !after_failure {
                return Ok(());
            }
            let _ = c.kill();
            let _ = c.wait();
            *guard = None;
        }
        let _ = std::fs::remove_file(&self.socket);
        let bin = serve_binary();
        let mut child = Command::new(&bin)
            .arg("serve")
            .arg("--unix")
            .arg(&self.socket)
            .arg("--plugin")
            .arg(&self.file)
            .arg("--exit-on-stdin-eof")
            // The child serves that one plugin and nothing else: it must not
            // read our remote configuration, nor (when we are the
            // registry's probe child) the probe request, or each child
            // would start another.
            .env_remove("BACKPLANE_REMOTE")
            .env_remove("BACKPLANE_REMOTE_ISOLATE")
            .env_remove(PROBE_CHILD_ENV)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                format!(
                    "starting {} serve for {}: {e}",
                    bin.display(),
                    self.file.display()
                )
            })?;
        self.starts.fetch_add(1, Ordering::Relaxed);
        let t0 = Instant::now();
        while !self.socket.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "isolated server for {} exited at start ({status})",
                    self.file.display()
                ));
            }
            if t0.elapsed() > START_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "isolated server for {} did not open {} within {:?}",
                    self.file.display(),
                    self.socket.display(),
                    START_TIMEOUT
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        *guard = Some(child);
        Ok(())
    }
}

impl Drop for Isolated {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// The `backplane` binary to run `serve` with.
pub fn serve_binary() -> PathBuf {
    if let Some(p) = std::env::var_os(SERVE_BIN_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.parent()
    {
        let beside = dir.join("backplane");
        if beside.is_file() {
            return beside;
        }
    }
    PathBuf::from("backplane")
}
