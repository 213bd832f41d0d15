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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use backplane::registry::{Device, Registry, RegistryOptions, SearchPath};
use backplane::{DType, Graph, HostTensors, Op};

/// The workspace's target directory as seen at build time
/// (`$CARGO_TARGET_DIR`, else `target/` of the workspace).
pub fn target_dir() -> PathBuf {
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

/// The name of the CPU plugin variant that can run here (the `x86-64` or
/// `aarch64` baseline): [`cpu_plugin`]'s file is that plugin.
pub fn cpu_plugin_name() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "cpu-aarch64"
    } else {
        "cpu-x86-64"
    }
}

/// A CPU plugin variant that can run here (`x86-64` / `aarch64` baseline).
pub fn cpu_plugin() -> PathBuf {
    require(&plugin_dir(), cpu_plugin_name())
}

/// Copies [`cpu_plugin`] into `dir` under its own name; returns the new
/// path.
pub fn install_cpu_plugin(dir: &Path) -> PathBuf {
    install(&cpu_plugin(), dir, cpu_plugin_name())
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

/// A fresh scratch directory for test `name` holding each `(file, as)`
/// of `plugins`, installed as plugin `as` (see [`install`]).
pub fn scratch_dir_with(name: &str, plugins: &[(PathBuf, &str)]) -> PathBuf {
    let dir = scratch_dir(name);
    for (file, backend_and_variant) in plugins {
        install(file, &dir, backend_and_variant);
    }
    dir
}

/// A graph's tensors placed in one buffer of `buft`: the descriptors with
/// `buffer` and `offset` filled in, and the buffer.
pub fn place(
    graph: &Graph,
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

/// Loads only the plugin files in `dirs`, in that order (no built-in CPU
/// backend).
pub fn load_only<P: AsRef<Path>>(dirs: impl IntoIterator<Item = P>) -> Registry {
    Registry::load(&RegistryOptions {
        search: SearchPath::only(dirs.into_iter().map(|d| d.as_ref().to_path_buf())),
        builtin: None,
    })
}

/// Loads only the plugin files in `dir` (no built-in CPU backend) and
/// checks that backend `name` loaded, listing the refused files when not.
pub fn load_backend_from(dir: &Path, name: &str) -> Registry {
    let reg = load_only([dir]);
    assert!(
        reg.backend(name).is_some(),
        "{name} plugin did not load: {:?}",
        reg.refused()
    );
    reg
}

/// [`load_only`], checked to refuse no file.
pub fn load_all_of(dir: &Path) -> Registry {
    let reg = load_only([dir]);
    assert!(reg.refused().is_empty(), "{:?}", reg.refused());
    reg
}

/// Device `index` of backend `name`, or a panic saying the plugin did not
/// load and how to build it.
pub fn device_of(reg: &Registry, name: &str, index: usize) -> Device {
    let backend = reg.backend(name).unwrap_or_else(|| {
        panic!(
            "{name} plugin did not load (run `cargo xtask plugins --fixtures`): {:?}",
            reg.refused()
        )
    });
    backend.devices.get(index).cloned().unwrap_or_else(|| {
        panic!(
            "{name} has no device {index}: {:?}",
            backend.refused_devices
        )
    })
}

/// Why the registry refused the plugin file named `file`, or a panic
/// listing what it did refuse.
pub fn refusal_reason<'a>(reg: &'a Registry, file: &str) -> &'a str {
    reg.refused()
        .iter()
        .find(|r| {
            r.path
                .file_name()
                .is_some_and(|n| n.to_string_lossy() == file)
        })
        .map(|r| r.reason.as_str())
        .unwrap_or_else(|| panic!("{file} not refused; refused: {:?}", reg.refused()))
}

/// Computes `d = mul_mat(w, a + b)` (k = 8, m = 3, n = 2) on `device`
/// through its own buffer and stream, after checking that it accepts every
/// node, and checks `d` against a plain computation: the plumbing between
/// host and plugin works.
pub fn assert_add_mul_mat_computes(device: &Device) {
    let (k, m, n) = (8usize, 3usize, 2usize);
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[k as i64, n as i64]).unwrap();
    let b = g.input("b", DType::F32, &[k as i64, n as i64]).unwrap();
    let w = g.weight("w", DType::F32, &[k as i64, m as i64]).unwrap();
    let c = g.add(a, b).unwrap();
    let d = g.mul_mat(w, c).unwrap();
    g.mark_output(d).unwrap();
    for node in g.compute_nodes() {
        let v = device.supports_op(g.tensors(), node.index());
        assert!(
            v.is_supported(),
            "{} refused node {}: {:?}",
            device.name(),
            node.index(),
            v.reason()
        );
    }
    let (descs, buffer) = place(&g, &device.buffer_type());
    let av: Vec<f32> = (0..k * n).map(|i| i as f32 * 0.5).collect();
    let bv: Vec<f32> = (0..k * n).map(|i| 1.0 - i as f32 * 0.25).collect();
    let wv: Vec<f32> = (0..k * m).map(|i| (i % 5) as f32 - 2.0).collect();
    for (t, v) in [(a, &av), (b, &bv), (w, &wv)] {
        buffer
            .set_tensor(&descs[t.index()], 0, &f32_bytes(v))
            .unwrap();
    }
    let stream = device.init_backend("threads=1").unwrap();
    stream.graph_compute(&descs).unwrap();
    stream.synchronize().unwrap();
    let mut out = vec![0u8; m * n * 4];
    buffer.get_tensor(&descs[d.index()], 0, &mut out).unwrap();
    let got = bytes_f32(&out);
    for j in 0..n {
        for i in 0..m {
            let terms = (0..k).map(|x| wv[i * k + x] * (av[j * k + x] + bv[j * k + x]));
            let want: f32 = terms.clone().sum();
            let scale: f32 = terms.map(f32::abs).sum::<f32>().max(1.0);
            let g = got[j * m + i];
            // The plumbing is under test, not kernel precision (conformance
            // does that): allow for f16-rounded activations.
            assert!(
                (g - want).abs() <= 2e-3 * scale,
                "{}: d[{i},{j}] = {g}, want {want}",
                device.name()
            );
        }
    }
}

/// `n` deterministic values in [-0.5, 0.5) (an xorshift stream keyed by
/// `seed`), the same on every machine.
pub fn test_values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

/// Host tensors of `g` with every leaf filled: i32 leaves with positions
/// 0, 1, ...; an f32 leaf named `kq_mask` with a causal mask (0 where the
/// key's position is at most the query's, -inf elsewhere); every other leaf
/// `k` (in id order, counting all leaves) with [`test_values`] of seed
/// `k + 1`.
pub fn filled_leaves(g: &Graph) -> HostTensors {
    let mut host = HostTensors::new(g);
    for (k, t) in g.ids().filter(|&t| g.op(t) == Op::None).enumerate() {
        let n = g.desc(t).nelements() as usize;
        if g.dtype(t) == DType::I32 {
            let positions: Vec<i32> = (0..n as i32).collect();
            host.set_i32(g, t, &positions).unwrap();
        } else if g.name(t) == "kq_mask" {
            let side = g.desc(t).ne[0] as usize;
            let mask: Vec<f32> = (0..n)
                .map(|i| {
                    if i % side <= i / side {
                        0.0
                    } else {
                        f32::NEG_INFINITY
                    }
                })
                .collect();
            host.set_f32(g, t, &mask).unwrap();
        } else {
            host.set_f32(g, t, &test_values(k as u64 + 1, n)).unwrap();
        }
    }
    host
}

/// The generated model `file_name` in `target/tmp/backplane-models/`,
/// made by `write` (given the path to write) once per test process, so a
/// file left by an older generator is never used; later calls with the
/// same name return the path at once. The file is written under a name of
/// this process's and renamed into place: another test process may be
/// reading an identical file.
pub fn generated_model(file_name: &str, write: impl FnOnce(&Path)) -> PathBuf {
    static MADE: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let made = MADE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut made = made.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(path) = made.get(file_name) {
        return path.clone();
    }
    let dir = target_dir().join("tmp").join("backplane-models");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    let path = dir.join(file_name);
    let part = dir.join(format!("{file_name}.{}.part", std::process::id()));
    write(&part);
    std::fs::rename(&part, &path)
        .unwrap_or_else(|e| panic!("renaming {} to {}: {e}", part.display(), path.display()));
    made.insert(file_name.to_string(), path.clone());
    path
}

/// The hostile fixture's cases: the features of `tests/fixtures/hostile`
/// (one misbehaviour each; `cargo xtask plugins --fixtures` builds every
/// one as `libbackplane_hostile-<case>.so`).
pub fn hostile_cases() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hostile/Cargo.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let cases: Vec<String> = text
        .lines()
        .skip_while(|l| l.trim() != "[features]")
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('=').map(|(name, _)| name.trim().to_string()))
        .collect();
    assert!(!cases.is_empty(), "no [features] in {}", path.display());
    cases
}
