//! What the README commands arrange before building: libclang for bindgen
//! (optional: ffi/sycl-sys falls back to checked-in bindings) and Intel's
//! SYCL + OpenCL CPU runtime in `<workspace>/.venv` (scripts/sycl-runtime.sh),
//! whose environment every later step gets.

use std::path::Path;
use std::process::Command;

use crate::workspace_root;

/// Environment variables the later steps need.
pub type Env = Vec<(String, String)>;

/// `libclang.so*` or `libclang-<version>.so*` (not `libclang-cpp`).
fn is_libclang(name: &str) -> bool {
    name.starts_with("libclang.so")
        || name
            .strip_prefix("libclang-")
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
}

fn has_libclang() -> bool {
    let found = |dir: &Path| {
        std::fs::read_dir(dir).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| is_libclang(&e.file_name().to_string_lossy()))
        })
    };
    [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
        "/usr/local/lib",
    ]
    .iter()
    .any(|d| found(Path::new(d)))
        || std::fs::read_dir("/usr/lib")
            .map(|rd| {
                rd.flatten().any(|e| {
                    e.file_name().to_string_lossy().starts_with("llvm-")
                        && found(&e.path().join("lib"))
                })
            })
            .unwrap_or(false)
}

/// Installs libclang-dev with apt when it is missing and we may; a failure
/// is only a warning (bindgen then uses the checked-in bindings).
pub fn ensure_libclang() {
    if has_libclang() {
        return;
    }
    eprintln!("xtask: libclang not found; installing libclang-dev for bindgen");
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success())
    };
    let ok = apt(&["install", "-y", "-q", "libclang-dev"])
        || (apt(&["update", "-q"]) && apt(&["install", "-y", "-q", "libclang-dev"]));
    if !ok {
        eprintln!(
            "xtask: warning: could not install libclang-dev; ffi/sycl-sys will use its checked-in bindings"
        );
    }
}

/// Installs the SYCL runtime wheels into `.venv` when missing and returns
/// the environment scripts/sycl-runtime.sh prints.
pub fn sycl_runtime() -> Result<Env, String> {
    let script = workspace_root().join("scripts/sycl-runtime.sh");
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}): the SYCL runtime could not be installed",
            script.display(),
            out.status
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

fn has_vulkan_driver() -> bool {
    ["/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d"]
        .iter()
        .any(|d| {
            std::fs::read_dir(d).is_ok_and(|rd| {
                rd.flatten()
                    .any(|e| e.path().extension().is_some_and(|x| x == "json"))
            })
        })
        && [
            "/usr/lib/x86_64-linux-gnu/libvulkan.so.1",
            "/usr/lib/aarch64-linux-gnu/libvulkan.so.1",
            "/usr/lib/libvulkan.so.1",
        ]
        .iter()
        .any(|p| Path::new(p).exists())
}

/// On Linux, installs a Vulkan loader and Mesa's drivers (lavapipe, a
/// software Vulkan 1.3 device) when no Vulkan driver is present, so the
/// WebGPU backend has a device; a failure is a warning (the plugin then
/// reports zero devices and why). Returns `XDG_RUNTIME_DIR` (a 0700
/// directory) when unset, which the Vulkan loader wants.
pub fn ensure_vulkan() -> Env {
    let mut env = Env::new();
    if !cfg!(target_os = "linux") {
        return env;
    }
    if !has_vulkan_driver() {
        eprintln!(
            "xtask: no Vulkan driver found; installing mesa-vulkan-drivers (lavapipe) for the WebGPU backend"
        );
        let apt = |args: &[&str]| {
            Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .is_ok_and(|s| s.success())
        };
        let pkgs = ["install", "-y", "-q", "mesa-vulkan-drivers", "libvulkan1"];
        if !(apt(&pkgs) || (apt(&["update", "-q"]) && apt(&pkgs))) {
            eprintln!(
                "xtask: warning: could not install mesa-vulkan-drivers; the WebGPU backend will have no device"
            );
        }
    }
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        let dir = std::env::temp_dir().join(format!("backplane-xdg-{}", std::process::id()));
        if std::fs::create_dir_all(&dir).is_ok() {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
            }
            env.push(("XDG_RUNTIME_DIR".into(), dir.display().to_string()));
        }
    }
    env
}

/// Everything above, in order. With `required`, a SYCL runtime that cannot
/// be installed is an error on x86-64 (where Intel ships the wheels);
/// otherwise it is a warning and the SYCL plugin reports why it has no
/// devices.
pub fn all(required: bool) -> Result<Env, String> {
    ensure_libclang();
    let vulkan = ensure_vulkan();
    match sycl_runtime() {
        Ok(mut env) => {
            env.extend(vulkan);
            Ok(env)
        }
        Err(e) if required && cfg!(target_arch = "x86_64") => Err(e),
        Err(e) => {
            eprintln!("xtask: warning: {e}; continuing without SYCL devices");
            Ok(vulkan)
        }
    }
}
