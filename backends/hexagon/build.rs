//! Builds the DSP-side C of `htp/`:
//! - with the host emulation layer `emu/htp-emu.c` into a static library
//!   linked into the plugin (the emulated DSP, and the VTCM planner
//!   `htp_op_vtcm_need` that supports_op calls);
//! - on Linux, with the DSP platform layer `htp/htp-dsp.c` and the SDK
//!   stand-ins `emu/cdsprpc-double*.c` into `OUT_DIR/cdsprpc-double/libcdsprpc.so`,
//!   the test double of Qualcomm's FastRPC library that the FastRPC
//!   transport's tests load (path in `BACKPLANE_HEXAGON_CDSPRPC_DOUBLE` at
//!   compile time). It is never installed or shipped.

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

fn main() {
    let mut build = cc::Build::new();
    for f in HTP {
        build.file(format!("htp/{f}"));
    }
    build
        .file("emu/htp-emu.c")
        .include("htp")
        .include("emu")
        .std("c11")
        .flag("-Wall")
        .flag("-Wextra")
        .flag_if_supported("-ffp-contract=off")
        .opt_level(2)
        .warnings_into_errors(true)
        .compile("backplane_htp_emu");
    println!("cargo:rerun-if-changed=htp");
    println!("cargo:rerun-if-changed=emu");
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
