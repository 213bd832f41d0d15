//! Builds the DSP-side C of `htp/` plus the host emulation layer `emu/` into
//! a static library linked into the plugin (the emulated DSP, and the VTCM
//! planner `htp_op_vtcm_need` that supports_op calls).

fn main() {
    let htp = [
        "main.c",
        "vtcm-plan.c",
        "matmul-ops.c",
        "binary-ops.c",
        "norm-ops.c",
        "rope-ops.c",
        "rows-ops.c",
    ];
    let mut build = cc::Build::new();
    for f in htp {
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
    }
}
