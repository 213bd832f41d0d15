//! Helpers for tests that load real built plugins.
//!
//! The plugins come from `cargo xtask plugins --fixtures`:
//! - [`plugin_dir`]: `target/plugins/` (the CPU plugin variants), or
//!   `$BACKPLANE_TEST_PLUGIN_DIR`;
//! - [`fixture_dir`]: `target/plugin-fixtures/` (fixture plugins from
//!   `tests/fixtures/*`), or `$BACKPLANE_TEST_FIXTURE_DIR`.
//!
//! A test that needs a file that is not there fails with a message saying
//! to run `cargo xtask plugins --fixtures`.

use std::path::{Path, PathBuf};

/// The workspace's target directory as seen at build time.
fn target_dir() -> PathBuf {
    match option_env!("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("target"),
    }
}

/// Directory of the built plugins.
pub fn plugin_dir() -> PathBuf {
    std::env::var_os("BACKPLANE_TEST_PLUGIN_DIR")
        .map_or_else(|| target_dir().join("plugins"), PathBuf::from)
}

/// Directory of the built fixture plugins.
pub fn fixture_dir() -> PathBuf {
    std::env::var_os("BACKPLANE_TEST_FIXTURE_DIR")
        .map_or_else(|| target_dir().join("plugin-fixtures"), PathBuf::from)
}

/// The platform file name of plugin `backend[-variant]`.
pub fn plugin_file_name(backend_and_variant: &str) -> String {
    use backplane::registry::search::{FILE_PREFIX, FILE_SUFFIX};
    format!("{FILE_PREFIX}{backend_and_variant}{FILE_SUFFIX}")
}

/// Path of a built file, or a panic telling how to build it.
pub fn require(dir: &Path, backend_and_variant: &str) -> PathBuf {
    let p = dir.join(plugin_file_name(backend_and_variant));
    assert!(
        p.is_file(),
        "{} is missing: run `cargo xtask plugins --fixtures` to build the plugins the tests load",
        p.display()
    );
    p
}

/// A CPU plugin variant that can run here (`x86-64` / `aarch64` baseline).
pub fn cpu_plugin() -> PathBuf {
    let baseline = if cfg!(target_arch = "aarch64") {
        "cpu-aarch64"
    } else {
        "cpu-x86-64"
    };
    require(&plugin_dir(), baseline)
}

/// A fixture plugin.
pub fn fixture(backend_and_variant: &str) -> PathBuf {
    require(&fixture_dir(), backend_and_variant)
}

/// A fresh empty directory for test `name` under `target/tmp/backplane-tests/`.
pub fn scratch_dir(name: &str) -> PathBuf {
    let d = target_dir()
        .join("tmp")
        .join("backplane-tests")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("creating a scratch dir");
    // Canonical, as the registry reports directories.
    d.canonicalize().expect("canonicalizing a scratch dir")
}

/// Copies `file` into `dir` as plugin `backend[-variant]`; returns the new path.
pub fn install(file: &Path, dir: &Path, backend_and_variant: &str) -> PathBuf {
    let dest = dir.join(plugin_file_name(backend_and_variant));
    std::fs::copy(file, &dest).expect("copying a plugin");
    dest
}

/// A graph's tensors placed in one buffer of `buft`: the descriptors with
/// `buffer` and `offset` filled in, and the buffer.
pub fn place(
    graph: &backplane::Graph,
    buft: &backplane::registry::BufferType,
) -> (Vec<backplane::TensorDesc>, backplane::registry::Buffer) {
    let align = buft.alignment().max(1);
    let mut descs: Vec<backplane::TensorDesc> = graph.tensors().to_vec();
    let mut root_offset = vec![0u64; descs.len()];
    let mut total = 0u64;
    for (i, d) in descs.iter().enumerate() {
        if d.view_source().is_none() {
            root_offset[i] = total;
            total += buft.alloc_size(d).div_ceil(align) * align;
        }
    }
    let buffer = buft
        .alloc_buffer(total)
        .expect("allocating the graph's buffer");
    for t in graph.ids() {
        let root = graph.storage_root(t);
        let d = &mut descs[t.index()];
        d.buffer = buffer.id();
        d.offset = root_offset[root.index()] + graph.offset_in_root(t);
    }
    (descs, buffer)
}

/// f32 values as bytes.
pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Bytes as f32 values.
pub fn bytes_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The `picky` fixture plugin (a GPU-typed backend refusing some ops).
pub fn picky_plugin() -> PathBuf {
    fixture("picky")
}

/// Normalised mean squared error of `got` against `want`, as conformance
/// computes it: `sum((got - want)^2) / sum(want^2)`.
pub fn nmse(got: &[f32], want: &[f32]) -> f64 {
    assert_eq!(got.len(), want.len(), "nmse of different lengths");
    let err: f64 = got
        .iter()
        .zip(want)
        .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
        .sum();
    let norm: f64 = want.iter().map(|b| f64::from(*b).powi(2)).sum();
    if norm == 0.0 { err } else { err / norm }
}

/// Loads only the plugin files in `dir` (no built-in CPU backend) and
/// checks that backend `name` loaded, listing the refused files when not.
pub fn load_backend_from(dir: &Path, name: &str) -> backplane::registry::Registry {
    use backplane::registry::{Registry, RegistryOptions, SearchPath};
    let reg = Registry::load(&RegistryOptions {
        search: SearchPath::only([dir]),
        builtin_cpu: false,
    });
    assert!(
        reg.backend(name).is_some(),
        "{name} plugin did not load: {:?}",
        reg.refused()
    );
    reg
}
