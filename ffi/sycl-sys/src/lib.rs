//! Bindings to backplane's C shim over the SYCL runtime (`shim/bp_sycl.h`).
//!
//! The shim is a shared library built by this crate's build script when the
//! SYCL headers are found (see `build.rs`), and loaded at run time with
//! [`load`]: nothing here links against SYCL, so the workspace builds and the
//! plugin loads on machines without the runtime. The raw functions are the
//! bindgen-generated [`ShimLibrary`]; the safe layer lives in the plugin.

#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    missing_docs,
    clippy::all
)]
#![allow(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
mod bindings {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}

pub use bindings::*;

/// File name of the shim library.
pub const SHIM_FILE: &str = "libbackplane_sycl_shim.so";

/// Environment variable naming the shim library to load (overrides the
/// search).
pub const SHIM_ENV: &str = "BACKPLANE_SYCL_SHIM";

/// Path of the shim this crate's build produced, if it could build one.
pub fn built_shim() -> Option<&'static str> {
    let p = env!("BACKPLANE_SYCL_SHIM_BUILT");
    (!p.is_empty()).then_some(p)
}

/// The runtime's library directory the shim was built against (its rpath),
/// if a shim was built.
pub fn built_lib_dir() -> Option<&'static str> {
    let p = env!("BACKPLANE_SYCL_LIB_DIR");
    (!p.is_empty()).then_some(p)
}

/// Why the build produced no shim ("" when it did).
pub fn build_reason() -> &'static str {
    env!("BACKPLANE_SYCL_SHIM_REASON")
}

/// Where [`load`] looks for the shim, in order: `$BACKPLANE_SYCL_SHIM`,
/// `extra_dirs` (e.g. the plugin's own directory), the path the build wrote.
pub fn candidates(extra_dirs: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    if let Some(p) = std::env::var_os(SHIM_ENV) {
        v.push(std::path::PathBuf::from(p));
    }
    for d in extra_dirs {
        v.push(d.join(SHIM_FILE));
    }
    if let Some(p) = built_shim() {
        v.push(std::path::PathBuf::from(p));
    }
    v
}

/// Loads the shim (and through it libsycl) from the first candidate that
/// exists; the error says what was tried and why it failed.
pub fn load(extra_dirs: &[std::path::PathBuf]) -> Result<ShimLibrary, String> {
    let cands = candidates(extra_dirs);
    let mut tried = Vec::new();
    for c in cands.iter().filter(|c| c.exists()) {
        // SAFETY: loading the shim runs the static initialisers of libsycl
        // and the shim, which have no preconditions; every symbol is checked
        // for presence (dynamic_link_require_all).
        match unsafe { ShimLibrary::new(c) } {
            Ok(lib) => {
                // SAFETY: a plain function without arguments.
                let v = unsafe { lib.bp_shim_version() };
                if v != BP_SYCL_SHIM_VERSION as i32 {
                    tried.push(format!(
                        "{}: shim version {v}, expected {BP_SYCL_SHIM_VERSION}",
                        c.display()
                    ));
                    continue;
                }
                return Ok(lib);
            }
            Err(e) => tried.push(format!("{}: {e}", c.display())),
        }
    }
    if tried.is_empty() {
        let why = build_reason();
        return Err(if why.is_empty() {
            format!(
                "SYCL shim {SHIM_FILE} not found (looked in: {})",
                cands
                    .iter()
                    .map(|c| c.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            format!("SYCL runtime not available at build time: {why}")
        });
    }
    Err(format!("cannot load the SYCL shim: {}", tried.join("; ")))
}

#[cfg(test)]
mod pregenerated {
    /// The checked-in bindings (used when bindgen cannot run) must match
    /// what bindgen generates from the current header.
    #[test]
    fn pregenerated_bindings_match_the_header() {
        let generated = include_str!(concat!(env!("OUT_DIR"), "/bindings.rs"));
        let checked_in = include_str!("bindings_pregenerated.rs");
        fn body(s: &str) -> Vec<&str> {
            s.lines()
                .filter(|l| !l.starts_with("//"))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect()
        }
        assert_eq!(
            body(generated),
            body(checked_in),
            "regenerate src/bindings_pregenerated.rs"
        );
    }
}
