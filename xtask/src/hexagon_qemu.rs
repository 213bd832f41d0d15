//! `cargo xtask hexagon-qemu`: the Hexagon backend's DSP C built as real
//! Hexagon code and run under qemu-hexagon.
//!
//! Debian's clang (14) has the Hexagon target and its `lld` links Hexagon
//! ELF; `qemu-hexagon` (package qemu-user, 7.2) runs Hexagon v67 Linux
//! user-mode binaries with HVX. There is no Hexagon libc, so the test is a
//! freestanding static binary: `backends/hexagon/qemu/` brings `_start`,
//! write/exit syscalls, the mem/str functions, a small printf, a bump
//! allocator, the compiler's division helpers and the few math functions
//! the kernels call.
//!
//! Steps:
//! 1. `qemu/kernel-tests.c` with every `htp/` source, built for the host
//!    (portable C) and for v67 with 128-byte HVX (the HVX paths of
//!    `htp/hvx-convert.h`); the Hexagon binary runs under qemu-hexagon and
//!    its output must equal the host's line for line (op status and output
//!    hashes, and in-binary HVX-vs-reference checks).
//! 2. Every `htp/` source and the DSP platform layer `htp/htp-dsp.c` (QuRT,
//!    HAP, dspqueue through `htp/htp-sdk.h`) compiled for v68 and v69 with
//!    HVX (`-c` only: the SDK's libraries are not here to link).
//!
//! qemu 7.2 knows v67 only: HVX float (v68 qf32) stops its decoder, so
//! the HVX paths tested here are the integer ones.
//!
//! The tools are installed with apt when missing (`clang lld qemu-user`).
//! Costs on the 2-core CI machine type: about 15 s for the apt install
//! (libllvm comes with libclang-dev already), 10 s to build and run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::{target_dir, workspace_root};

/// The `htp/` sources of the DSP message loop and kernels.
const HTP: [&str; 7] = [
    "main.c",
    "vtcm-plan.c",
    "matmul-ops.c",
    "binary-ops.c",
    "norm-ops.c",
    "rope-ops.c",
    "rows-ops.c",
];

/// Flags both builds share: C11, no FMA contraction, no libm builtins (the
/// math comes from qemu/mini-math.c in both).
const COMMON: [&str; 7] = [
    "-std=c11",
    "-O2",
    "-ffp-contract=off",
    "-fno-builtin",
    "-Wall",
    "-Wextra",
    "-Werror",
];

fn run(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether clang knows Hexagon and ld.lld and qemu-hexagon run.
fn tools_present() -> bool {
    let ok = |prog: &str, args: &[&str]| {
        Command::new(prog).args(args).output().is_ok_and(|o| {
            o.status.success()
                && (prog != "clang" || String::from_utf8_lossy(&o.stdout).contains("hexagon"))
        })
    };
    ok("clang", &["-print-targets"])
        && ok("ld.lld", &["--version"])
        && ok("qemu-hexagon", &["-version"])
}

/// Installs clang, lld and qemu-user with apt when a tool is missing.
fn ensure_tools() -> Result<(), String> {
    if tools_present() {
        return Ok(());
    }
    eprintln!("xtask hexagon-qemu: installing clang lld qemu-user");
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success())
    };
    let pkgs = ["install", "-y", "-q", "clang", "lld", "qemu-user"];
    if !(apt(&pkgs) || (apt(&["update", "-q"]) && apt(&pkgs))) || !tools_present() {
        return Err(
            "needs clang with the Hexagon target, ld.lld and qemu-hexagon: apt-get install clang lld qemu-user"
                .into(),
        );
    }
    Ok(())
}

fn sources(dir: &Path, extra: &[&str]) -> Vec<PathBuf> {
    HTP.iter()
        .map(|f| dir.join("htp").join(f))
        .chain(extra.iter().map(|f| dir.join(f)))
        .collect()
}

/// Lines of a test run without the `#` comment lines (they name the platform).
fn results(out: &str) -> Vec<&str> {
    out.lines().filter(|l| !l.starts_with('#')).collect()
}

/// Builds and runs the kernel tests on the host and under qemu-hexagon and
/// compares them; compiles the DSP platform layer for v68 and v69.
pub fn run_all() -> Result<(), String> {
    let t0 = Instant::now();
    ensure_tools()?;
    let t_tools = t0.elapsed();
    let dir = workspace_root().join("backends/hexagon");
    let out = target_dir().join("hexagon-qemu");
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let host_bin = out.join("kernel-tests-host");
    let hex_bin = out.join("kernel-tests-v67");
    let resource = run(
        Command::new("clang").arg("-print-resource-dir"),
        "clang -print-resource-dir",
    )?;
    let builtin_include = PathBuf::from(resource.trim()).join("include");
    let hexagon = |cpu: &str| {
        let mut c = Command::new("clang");
        c.args([
            "--target=hexagon-unknown-elf",
            cpu,
            "-mhvx",
            "-mhvx-length=128b",
            "-ffreestanding",
            "-nostdinc",
        ])
        .arg("-isystem")
        .arg(&builtin_include)
        .arg("-I")
        .arg(dir.join("qemu/include"))
        .arg("-I")
        .arg(dir.join("htp"))
        .args(COMMON);
        c
    };

    run(
        Command::new("cc")
            .args(COMMON)
            .arg("-I")
            .arg(dir.join("htp"))
            .args(sources(&dir, &["qemu/mini-math.c", "qemu/kernel-tests.c"]))
            .arg("-o")
            .arg(&host_bin),
        "building the kernel tests for the host",
    )?;
    run(
        hexagon("-mv67")
            .args(["-nostdlib", "-static", "-fuse-ld=lld"])
            .args(sources(
                &dir,
                &[
                    "qemu/mini-libc.c",
                    "qemu/mini-math.c",
                    "qemu/kernel-tests.c",
                ],
            ))
            .arg("-o")
            .arg(&hex_bin),
        "building the kernel tests for Hexagon v67 + HVX",
    )?;
    for cpu in ["-mv68", "-mv69"] {
        let objs = out.join(&cpu[1..]);
        std::fs::create_dir_all(&objs).map_err(|e| format!("{}: {e}", objs.display()))?;
        run(
            hexagon(cpu)
                .current_dir(&objs)
                .arg("-c")
                .args(sources(&dir, &["htp/htp-dsp.c"])),
            &format!("compiling htp/ and the DSP platform layer htp-dsp.c for Hexagon {cpu}"),
        )?;
    }
    let t_build = t0.elapsed();
    let want = run(
        &mut Command::new(&host_bin),
        "running the host kernel tests",
    )?;
    let got = run(
        Command::new("qemu-hexagon").arg(&hex_bin),
        "running the kernel tests under qemu-hexagon",
    )?;
    let (want_lines, got_lines) = (results(&want), results(&got));
    let mut diffs = Vec::new();
    for i in 0..want_lines.len().max(got_lines.len()) {
        let (w, g) = (want_lines.get(i), got_lines.get(i));
        if w != g {
            diffs.push(format!(
                "  host:    {}\n  hexagon: {}",
                w.unwrap_or(&"(none)"),
                g.unwrap_or(&"(none)")
            ));
        }
    }
    let bad_in_binary: Vec<&&str> = got_lines
        .iter()
        .filter(|l| l.contains("mismatches=") && !l.contains("mismatches=0 "))
        .collect();
    eprintln!(
        "xtask hexagon-qemu: tools {:.1}s, build {:.1}s, run {:.1}s; {} cases",
        t_tools.as_secs_f64(),
        (t_build - t_tools).as_secs_f64(),
        (t0.elapsed() - t_build).as_secs_f64(),
        want_lines.len()
    );
    if !diffs.is_empty() || !bad_in_binary.is_empty() || want_lines.is_empty() {
        return Err(format!(
            "Hexagon results differ from the host's:\n{}\n{:?}",
            diffs.join("\n"),
            bad_in_binary
        ));
    }
    eprintln!("xtask hexagon-qemu: Hexagon v67 + HVX under qemu matches the host on every case");
    Ok(())
}
