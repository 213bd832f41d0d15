//! Builds the DSP-side C of `htp/` for the host:
//! - always, the VTCM planner `htp/vtcm-plan.c` (`htp_op_vtcm_need`, which
//!   supports_op calls so the host and the DSP agree on the budget), as a
//!   static library linked into the plugin; nothing else of the DSP C;
//! - with the `emulation` feature instead, every `htp/` source with the host
//!   emulation layer `emu/htp-emu.c` (the emulated DSP and its fault
//!   injection) and, on Linux, the DSP platform layer `htp/htp-dsp.c` with
//!   the SDK stand-ins `emu/cdsprpc-double*.c` into
//!   `OUT_DIR/cdsprpc-double/libcdsprpc.so`, the test double of Qualcomm's
//!   FastRPC library that the FastRPC transport's tests load (path in
//!   `BACKPLANE_HEXAGON_CDSPRPC_DOUBLE` at compile time). The shipped plugin
//!   is built without the feature, so it holds neither.

use std::path::PathBuf;
use std::process::Command;

/// The DSP-side message loop and kernels.
const HTP: [&str; 7] = [
    "main.c",
    "vtcm-plan.c",
    "matmul-ops.c",
    "binary-ops.c",
    "norm-ops.c",
    "rope-ops.c",
    "rows-ops.c",
];

/// The planner alone, for the shipped plugin.
const PLANNER: &str = "vtcm-plan.c";

fn main() {
    println!("cargo:rerun-if-changed=htp");
    println!("cargo:rerun-if-changed=emu");
    let emulation = std::env::var_os("CARGO_FEATURE_EMULATION").is_some();
    let mut build = cc::Build::new();
    build
        .include("htp")
        .std("c11")
        .flag("-Wall")
        .flag("-Wextra")
        .flag_if_supported("-ffp-contract=off")
        .opt_level(2)
        .warnings_into_errors(true);
    if !emulation {
        build
            .file(format!("htp/{PLANNER}"))
            .compile("backplane_htp_plan");
        return;
    }
    for f in HTP {
        build.file(format!("htp/{f}"));
    }
    build
        .file("emu/htp-emu.c")
        .include("emu")
        .compile("backplane_htp_emu");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-lib=pthread");
        println!("cargo:rustc-link-lib=m");
        build_cdsprpc_double();
    }
}

/// Compiles the libcdsprpc.so test double with the target's C compiler.
fn build_cdsprpc_double() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("cdsprpc-double");
    std::fs::create_dir_all(&out).expect("creating OUT_DIR/cdsprpc-double");
    let lib = out.join("libcdsprpc.so");
    let compiler = cc::Build::new().get_compiler();
    let mut cmd: Command = compiler.to_command();
    for f in HTP.iter().map(|f| format!("htp/{f}")).chain([
        "htp/htp-dsp.c".to_string(),
        "emu/cdsprpc-double.c".to_string(),
        "emu/cdsprpc-double-queue.c".to_string(),
        "emu/cdsprpc-double-sdk.c".to_string(),
    ]) {
        cmd.arg(f);
    }
    cmd.args([
        "-std=c11",
        "-O2",
        "-g",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-ffp-contract=off",
        "-fPIC",
        "-shared",
        "-fvisibility=hidden",
        "-pthread",
        "-DHTP_DSP_HOST_DOUBLE",
        "-Ihtp",
        "-Iemu",
        "-o",
    ])
    .arg(&lib)
    .arg("-lm");
    let status = cmd.status().unwrap_or_else(|e| {
        panic!("running the C compiler for the libcdsprpc.so test double: {e}")
    });
    assert!(
        status.success(),
        "building the libcdsprpc.so test double failed: {cmd:?}"
    );
    println!(
        "cargo:rustc-env=BACKPLANE_HEXAGON_CDSPRPC_DOUBLE={}",
        lib.display()
    );
}
