//! `cargo xtask test`: everything CI checks, cheapest failure first.

use std::process::Command;

use crate::{conformance, plugins, set_env, setup, workspace_root};

/// Environment for test runs: the emulated Hexagon DSP is offered only when
/// asked for, so tests and CI ask.
const TEST_ENV: &[(&str, &str)] = &[("BACKPLANE_HEXAGON_EMULATE", "1")];

fn cargo(step: &str, args: &[&str]) -> Result<(), String> {
    eprintln!("xtask test: {step}: cargo {}", args.join(" "));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(args)
        .current_dir(workspace_root())
        .envs(TEST_ENV.iter().copied())
        .status()
        .map_err(|e| format!("{step}: cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("step '{step}' failed ({status})"))
    }
}

/// Runs every step; stops at the first failure.
pub fn run() -> Result<(), String> {
    set_env(&setup::all(true)?);
    cargo("format", &["fmt", "--all", "--check"])?;
    cargo(
        "clippy",
        &[
            "clippy",
            "-j2",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    eprintln!("xtask test: plugins");
    plugins(true)?;
    cargo("tests", &["test", "-j2", "--workspace"])?;
    eprintln!("xtask test: hexagon-qemu");
    crate::hexagon_qemu::run_all()?;
    eprintln!("xtask test: conformance");
    let args = ["test", "--vectors", "conformance/vectors/cpy-quant"].map(String::from);
    conformance(&args, TEST_ENV)?;
    eprintln!("xtask test: all steps passed");
    Ok(())
}
