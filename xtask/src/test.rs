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
    // The cooperative-matrix FLASH_ATTN_EXT kernel needs hardware CI lacks;
    // its emulation (the same tiling, plain code for the matrix calls)
    // runs a slice of the attention grid on lavapipe (17 cases, about 10 s;
    // lavapipe takes some 40 s to compile each variant for head size 128):
    // head sizes 40 and 64, partial and whole tiles, every flag, float and
    // quantized K/V.
    eprintln!("xtask test: conformance, emulated cooperative-matrix flash attention");
    let args = [
        "test",
        "--backend",
        "webgpu",
        "--op",
        "FLASH_ATTN_EXT",
        "--tier",
        "sampled",
        "--case",
        r"hsk=(40|64),.*kv=(29|64),nb=(35|75),.*type_KV=(f16|q4_0|q8_0|f32)",
    ]
    .map(String::from);
    conformance(
        &args,
        &[("BACKPLANE_WEBGPU_FLASH_ATTN", "coopmat-emulated")],
    )?;
    // Likewise the cooperative-matrix MUL_MAT kernel: its emulation, with
    // the weights converted to half rows first (as on GPUs for wide
    // products), over the sampled cases with at least 16 columns (192
    // cases, about 15 s): every weight type, edges, batches, broadcasts.
    eprintln!("xtask test: conformance, emulated cooperative-matrix MUL_MAT");
    let args = [
        "test",
        "--backend",
        "webgpu",
        "--op",
        "MUL_MAT",
        "--tier",
        "sampled",
        "--case",
        r"n=(1[6-9]|[2-9][0-9]|[1-9][0-9][0-9]+),",
    ]
    .map(String::from);
    conformance(
        &args,
        &[("BACKPLANE_WEBGPU_MATMUL", "coopmat-emulated,dequant")],
    )?;
    eprintln!("xtask test: all steps passed");
    Ok(())
}
