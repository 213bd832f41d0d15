//! Generates the bindings of `shim/bp_sycl.h` (always) and, when the SYCL
//! headers are found, builds `shim/bp_sycl.cpp` with the C++ compiler `cc`
//! picks (plain g++) into `libbackplane_sycl_shim.so` in OUT_DIR.
//!
//! The runtime is looked for in `$BACKPLANE_SYCL_ROOT`, else in the
//! workspace's `.venv` (what `scripts/sycl-runtime.sh` installs): headers
//! under `include/sycl`, libraries under `lib`. Without it the crate still
//! builds; the plugin then reports why it has no devices.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let header = manifest.join("shim/bp_sycl.h");
    let source = manifest.join("shim/bp_sycl.cpp");
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-changed={}", source.display());
    println!("cargo:rerun-if-env-changed=BACKPLANE_SYCL_ROOT");

    // bindgen panics (rather than erring) when libclang cannot be loaded.
    let generated = std::panic::catch_unwind(|| {
        bindgen::Builder::default()
            .header(header.to_string_lossy())
            .dynamic_library_name("ShimLibrary")
            .dynamic_link_require_all(true)
            .allowlist_function("bp_.*")
            .allowlist_type("bp_.*")
            .allowlist_var("BP_.*")
            .generate()
            .map_err(|e| e.to_string())
    })
    .unwrap_or_else(|_| Err("libclang could not be loaded".to_string()));
    match generated {
        Ok(b) => b
            .write_to_file(out.join("bindings.rs"))
            .expect("write bindings.rs"),
        Err(e) => {
            // No libclang here: fall back to the checked-in copy, which the
            // test below keeps in step with the header.
            println!("cargo:warning=bindgen unavailable ({e}); using src/bindings_pregenerated.rs");
            std::fs::copy(
                manifest.join("src/bindings_pregenerated.rs"),
                out.join("bindings.rs"),
            )
            .expect("copy pregenerated bindings");
        }
    }
    println!(
        "cargo:rerun-if-changed={}",
        manifest.join("src/bindings_pregenerated.rs").display()
    );

    let workspace_venv = manifest.join("../../.venv");
    let root = match std::env::var_os("BACKPLANE_SYCL_ROOT") {
        Some(r) => PathBuf::from(r),
        None => {
            println!(
                "cargo:rerun-if-changed={}",
                workspace_venv.join("include/sycl/sycl.hpp").display()
            );
            workspace_venv
        }
    };
    let shim = out.join("libbackplane_sycl_shim.so");
    match build_shim(&root, &source, &shim) {
        Ok(()) => {
            println!(
                "cargo:rustc-env=BACKPLANE_SYCL_SHIM_BUILT={}",
                shim.display()
            );
            println!("cargo:rustc-env=BACKPLANE_SYCL_SHIM_REASON=");
            let lib = root.join("lib");
            println!(
                "cargo:rustc-env=BACKPLANE_SYCL_LIB_DIR={}",
                lib.canonicalize().unwrap_or(lib).display()
            );
        }
        Err(reason) => {
            println!("cargo:warning=SYCL shim not built: {reason}");
            println!("cargo:rustc-env=BACKPLANE_SYCL_SHIM_BUILT=");
            println!("cargo:rustc-env=BACKPLANE_SYCL_SHIM_REASON={reason}");
            println!("cargo:rustc-env=BACKPLANE_SYCL_LIB_DIR=");
        }
    }
}

fn build_shim(root: &Path, source: &Path, shim: &Path) -> Result<(), String> {
    let include = root.join("include");
    let lib = root.join("lib");
    if !include.join("sycl/sycl.hpp").is_file() {
        return Err(format!(
            "no SYCL headers at {} (set BACKPLANE_SYCL_ROOT or run scripts/sycl-runtime.sh, then rebuild)",
            include.join("sycl/sycl.hpp").display()
        ));
    }
    if !lib.join("libsycl.so").exists() {
        return Err(format!("no libsycl.so in {}", lib.display()));
    }
    let compiler = cc::Build::new()
        .cpp(true)
        .cargo_metadata(false)
        .get_compiler();
    let mut cmd: Command = compiler.to_command();
    cmd.args([
        "-std=c++17",
        "-O2",
        "-fPIC",
        "-shared",
        "-DSYCL_DISABLE_FSYCL_SYCLHPP_WARNING",
        "-w",
    ])
    .arg(format!("-I{}", include.display()))
    .arg(format!(
        "-I{}",
        source.parent().expect("shim dir").display()
    ))
    .arg(source)
    .arg(format!("-L{}", lib.display()))
    .arg("-lsycl")
    .arg(format!(
        "-Wl,--disable-new-dtags,-rpath,{}",
        lib.canonicalize().unwrap_or(lib.clone()).display()
    ))
    .arg("-o")
    .arg(shim);
    let output = cmd
        .output()
        .map_err(|e| format!("cannot run the C++ compiler: {e}"))?;
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        let head: String = err.lines().take(20).collect::<Vec<_>>().join(" | ");
        return Err(format!("compiling the shim failed: {head}"));
    }
    Ok(())
}
