//! `cargo xtask test`: everything CI checks, cheapest failure first.

use std::process::Command;

use crate::{conformance, plugins, set_env, setup, workspace_root};

/// Environment for test runs: the emulated Hexagon DSP is offered only when
/// asked for, so tests and CI ask.
/// Lavapipe compiles pipelines inside `graph_compute` on a CPU shared with
/// the whole test run: the scheduler's per-device timeout is raised so a
/// slow first compile on a loaded machine is not taken for a hung device.
const TEST_ENV: &[(&str, &str)] = &[
    ("BACKPLANE_HEXAGON_EMULATE", "1"),
    ("BACKPLANE_DEVICE_TIMEOUT", "900"),
    // Off by default (slower prefill); on here so the layout stays tested.
    ("BACKPLANE_WEBGPU_SPLIT_WEIGHTS", "on"),
];

/// `BACKPLANE_PLUGIN_PATH` with the test-only plugins (the emulated
/// Hexagon DSP build, which the shipped plugin leaves out) searched after
/// whatever the caller set.
fn test_plugin_path() -> (String, String) {
    let dir = crate::target_dir().join("test-plugins");
    let path = match std::env::var("BACKPLANE_PLUGIN_PATH") {
        Ok(p) if !p.is_empty() => format!("{p}:{}", dir.display()),
        _ => dir.display().to_string(),
    };
    ("BACKPLANE_PLUGIN_PATH".to_string(), path)
}

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
    set_env(&[test_plugin_path()]);
    cargo("format", &["fmt", "--all", "--check"])?;
    cargo(
        "clippy",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    // The workspace build enables the Hexagon emulation feature (its tests
    // use it); the shipped plugin is built without it.
    cargo(
        "clippy, shipped hexagon plugin",
        &["clippy", "-p", "backplane-hexagon", "--", "-D", "warnings"],
    )?;
    eprintln!("xtask test: check-modules");
    crate::modules::run(&[])?;
    eprintln!("xtask test: plugins");
    plugins(true)?;
    // Tests that start the `backplane` binary (remote servers, the hostile
    // catalogue through the CLI) need it built; `cargo test` does not build
    // another package's binaries.
    cargo("cli binary", &["build", "-p", "backplane-cli"])?;
    // The remote tests run the conformance runner against a server.
    cargo(
        "conformance runner",
        &["build", "--release", "-p", "backplane-conformance"],
    )?;
    cargo("tests", &["test", "--workspace"])?;
    eprintln!("xtask test: hexagon-qemu");
    crate::hexagon_qemu::run_all()?;
    eprintln!("xtask test: conformance");
    let args = ["test", "--vectors", "conformance/vectors/cpy-quant"].map(String::from);
    conformance(&args, TEST_ENV)?;
    // Weights in the devices' own layouts, as the model loader places
    // them: every MUL_MAT and GET_ROWS case whose weight a layout takes.
    // The CPU's repacked q4_0, q8_0, q4_K and q6_K first.
    eprintln!("xtask test: conformance, weights in the devices' own layouts");
    let args = [
        "test",
        "--backend",
        "cpu",
        "--op",
        "MUL_MAT",
        "--op",
        "GET_ROWS",
        "--weight-layouts",
    ]
    .map(String::from);
    conformance(&args, TEST_ENV)?;
    // SYCL's reordered q4_0 / q8_0 (offered on Intel GPUs; on the OpenCL
    // CPU device with enable_reorder) and WebGPU's split q4_0 and q4_K
    // (lavapipe here): their sampled cases on two cores, SYCL about 13 s
    // (also with an empty kernel cache), WebGPU 7 s (28 s with Mesa's
    // shader cache empty).
    let layouts = |backend: &str, ops: &[&str]| {
        let mut args = vec!["test", "--backend", backend, "--tier", "sampled"];
        for op in ops {
            args.extend(["--op", op]);
        }
        args.push("--weight-layouts");
        args.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let reorder = [TEST_ENV, &[("BACKPLANE_SYCL_ENABLE_REORDER", "1")]].concat();
    conformance(&layouts("sycl", &["MUL_MAT", "GET_ROWS"]), &reorder)?;
    conformance(&layouts("webgpu", &["MUL_MAT"]), TEST_ENV)?;
    // The cooperative-matrix kernels need hardware CI lacks; their
    // emulations (the same tiling, plain code for the matrix calls) run on
    // lavapipe.
    // FLASH_ATTN_EXT: 17 cases: head sizes 40 and 64, partial and whole
    // tiles, every flag, float and quantized K/V. Lavapipe's LLVM takes
    // most of the time compiling the variants: 5.5 minutes on a fresh
    // machine (Mesa's shader cache empty, as in CI), 4 s once it is warm;
    // head size 128 would take some 40 s more per variant. Then 8 cases
    // of one or three queries with 4 query heads per K/V head, which the
    // kernel packs into one workgroup (mask, sinks, ALiBi's per-head
    // slopes; f32 and q8_0 K/V): about 1 minute more.
    forced(
        "emulated cooperative-matrix flash attention",
        "FLASH_ATTN_EXT",
        r"hsk=(40|64),.*kv=(29|64),nb=(35|75),.*type_KV=(f16|q4_0|q8_0|f32)",
        ("BACKPLANE_WEBGPU_FLASH_ATTN", "coopmat-emulated"),
    )?;
    forced(
        "emulated cooperative-matrix flash attention, packed query heads",
        "FLASH_ATTN_EXT",
        concat!(
            r"hsk=64,hsv=64,nh=4,nr23=\[4,[13]\],kv=32,nb=(1|3),mask=true,sinks=(true|false),",
            r"max_bias=(0|8),logit_softcap=0,type_KV=(q8_0|f32),permute=\[0,1,2,3\]"
        ),
        ("BACKPLANE_WEBGPU_FLASH_ATTN", "coopmat-emulated"),
    )?;
    // MUL_MAT, with the weights converted to half rows first (as on GPUs
    // for wide products): the sampled cases with at least 16 columns (200
    // cases, about 15 s): every weight type, edges, batches, broadcasts.
    // K split in 3 where K > 64 (K = 96, 256, 512; K = 64 stays whole), so
    // both the split kernel with its partial sums and the whole one run.
    let wide = (
        "BACKPLANE_WEBGPU_MATMUL",
        "coopmat-emulated,dequant,splitk=3",
    );
    let at_least_16 = r"n=(1[6-9]|[2-9][0-9]|[1-9][0-9][0-9]+),";
    forced(
        "emulated cooperative-matrix MUL_MAT",
        "MUL_MAT",
        at_least_16,
        wide,
    )?;
    // The same products of q4_0 and q4_K weights stored split (WebGPU's
    // own layout, 26 cases): the weights converted to half rows straight
    // from the split layout.
    let split = |cases: &str, env: (&str, &str)| {
        let mut args = forced_args("MUL_MAT", cases);
        args.push("--weight-layouts".into());
        conformance(&args, &[TEST_ENV, &[env]].concat())
    };
    eprintln!("xtask test: conformance, emulated cooperative-matrix MUL_MAT, split weights");
    split(&format!("type_a=q4_(0|K),.*{at_least_16}"), wide)?;
    // Every other reader of split weights, in place too: the float mat-vec
    // (xf32), the tiled GEMM and the cooperative-matrix GEMM dequantizing
    // while it stages (nodequant); every sampled q4_0/q4_K case (188,
    // about 2 s).
    eprintln!("xtask test: conformance, float mat-vec and GEMMs staging split weights");
    let staging = ("BACKPLANE_WEBGPU_MATMUL", "coopmat-emulated,nodequant,xf32");
    split("type_a=q4_(0|K),", staging)?;
    // One query runs flash_attn_vec by default; the tiled plain kernel
    // stays the fallback (too little workgroup memory, value heads over
    // 512), so its single-query tiling runs too: the sampled single-query
    // cases (300; 5 s once Mesa's shader cache is warm).
    forced(
        "plain flash attention, one query",
        "FLASH_ATTN_EXT",
        r"nb=1,",
        ("BACKPLANE_WEBGPU_FLASH_ATTN", "plain"),
    )?;
    eprintln!("xtask test: all steps passed");
    Ok(())
}

/// Runs the sampled WebGPU cases of `op` matching `cases` with `env` set
/// (which forces a kernel: an emulated cooperative-matrix one, or a
/// fallback the default choice skips).
fn forced(what: &str, op: &str, cases: &str, env: (&str, &str)) -> Result<(), String> {
    eprintln!("xtask test: conformance, {what}");
    conformance(&forced_args(op, cases), &[env])
}

/// The conformance arguments of the sampled WebGPU cases of `op` matching
/// `cases`.
fn forced_args(op: &str, cases: &str) -> Vec<String> {
    [
        "test",
        "--backend",
        "webgpu",
        "--op",
        op,
        "--tier",
        "sampled",
        "--case",
        cases,
    ]
    .map(String::from)
    .to_vec()
}
