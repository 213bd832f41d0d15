//! Tiny generated models (backplane-testmodel) on every backend present:
//! the built-in CPU, WebGPU (lavapipe in CI), SYCL and Hexagon plugins
//! from `target/plugins/`, and a mixed placement with only the last layers
//! on the device. Each is compared with the CPU run and, where
//! `models/testdata/logits/<arch>-tiny-<type>.json` exists, with
//! llama.cpp's logits and greedy continuation. A backend without a device
//! is skipped with the reason printed.

use std::path::{Path, PathBuf};

use backplane_llm::{LoadOptions, Logits, Model, Sampler};
use backplane_testmodel::{ModelSpec, Preset, WeightType, write_model};
use backplane_tests::{nmse, plugin_dir};

/// The generated model for `arch` / `dtype`: the one llama.cpp's reference
/// was made from (`models/.cache/`) when present, else made once here.
fn tiny_model(arch: &str, dtype: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cached = root
        .join("models")
        .join(".cache")
        .join(format!("{arch}-tiny-{dtype}.gguf"));
    if cached.is_file() {
        return cached;
    }
    let spec = ModelSpec {
        arch: arch.parse().expect("an architecture"),
        preset: Preset::Tiny,
        dtype: dtype.parse::<WeightType>().expect("a weight type"),
        seed: ModelSpec::DEFAULT_SEED,
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("target")
        .join("tmp")
        .join("backplane-models");
    std::fs::create_dir_all(&dir).expect("creating the model cache dir");
    let path = dir.join(spec.file_name());
    if !path.is_file() {
        let tmp = dir.join(format!("{}.{}.part", spec.file_name(), std::process::id()));
        write_model(&spec, &tmp).expect("writing a test model");
        std::fs::rename(&tmp, &path).expect("renaming the test model");
    }
    path
}

fn options(device: &str, gpu_layers: Option<usize>) -> LoadOptions {
    LoadOptions {
        device: device.into(),
        gpu_layers,
        n_ctx: 512,
        plugin_dirs: vec![plugin_dir()],
    }
}

/// Loads on `device`, or None with the reason printed when this machine
/// has no such device.
fn load_on(path: &Path, device: &str, gpu_layers: Option<usize>) -> Option<Model> {
    match Model::load(path, &options(device, gpu_layers)) {
        Ok(m) => Some(m),
        Err(backplane_llm::LlmError::Device { reason, .. }) => {
            eprintln!("skipping {device}: {reason}");
            None
        }
        Err(e) => panic!("loading {} on {device}: {e}", path.display()),
    }
}

/// Every position's logits of `tokens`.
fn all_logits(model: &Model, tokens: &[u32]) -> Vec<f32> {
    let mut s = model.session(512).expect("a session");
    s.eval(tokens, Logits::All).expect("eval").to_vec()
}

fn greedy(model: &Model, tokens: &[u32], n: usize) -> Vec<u32> {
    let mut s = model.session(512).expect("a session");
    s.generate(tokens, n, &Sampler::greedy(), |_| true)
        .expect("generate")
}

/// llama.cpp's reference for a tiny model, if recorded.
struct Reference {
    tokens: Vec<u32>,
    positions: Vec<usize>,
    n_vocab: usize,
    logits: Vec<f32>,
    greedy: Option<Vec<u32>>,
}

fn reference(arch: &str, dtype: &str) -> Option<Reference> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("models")
        .join("testdata")
        .join("logits");
    let header = dir.join(format!("{arch}-tiny-{dtype}.json"));
    let text = std::fs::read_to_string(&header).ok()?;
    let h: serde_json::Value = serde_json::from_str(&text).expect("a reference header");
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_u64())
                    .map(|x| x as u32)
                    .collect()
            })
            .unwrap_or_default()
    };
    let logits_file = dir.join(h["logits_file"].as_str().expect("logits_file"));
    let raw = std::fs::read(&logits_file).expect("the reference logits");
    Some(Reference {
        tokens: ids(&h["tokens"]),
        positions: ids(&h["positions"])
            .into_iter()
            .map(|p| p as usize)
            .collect(),
        n_vocab: h["n_vocab"].as_u64().expect("n_vocab") as usize,
        logits: backplane_tests::bytes_f32(&raw),
        greedy: h["greedy"].as_array().map(|_| ids(&h["greedy"])),
    })
}

const CASES: [(&str, &str); 5] = [
    ("llama", "f16"),
    ("qwen2", "f16"),
    ("qwen3", "f16"),
    ("llama", "f32"),
    ("llama", "q8_0"),
];

/// Bound on the normalised error against llama.cpp.
fn bound(dtype: &str) -> f64 {
    if dtype == "f32" || dtype == "f16" {
        1e-4
    } else {
        1e-3
    }
}

/// Compares with llama.cpp's reference; false when none is recorded.
fn check_against_reference(model: &Model, arch: &str, dtype: &str, label: &str) -> bool {
    let Some(r) = reference(arch, dtype) else {
        return false;
    };
    assert_eq!(model.n_vocab(), r.n_vocab, "{label}: n_vocab");
    let got = all_logits(model, &r.tokens);
    for (k, &p) in r.positions.iter().enumerate() {
        let want: Vec<f32> = r.logits[k * r.n_vocab..(k + 1) * r.n_vocab].to_vec();
        let e = nmse(&got[p * r.n_vocab..(p + 1) * r.n_vocab], &want);
        assert!(
            e <= bound(dtype),
            "{label} {arch}-{dtype} position {p}: nmse {e} vs llama.cpp"
        );
    }
    if let Some(want) = &r.greedy {
        let got = greedy(model, &r.tokens, want.len());
        assert_eq!(
            &got, want,
            "{label} {arch}-{dtype}: greedy continuation vs llama.cpp"
        );
    }
    true
}

fn prompt(model: &Model) -> Vec<u32> {
    let tok = model.tokenizer().expect("the model has a vocabulary");
    tok.encode(
        "The quick brown fox jumps over the lazy dog. Once upon a time",
        true,
        false,
    )
    .expect("tokenizing")
}

/// One backend against llama.cpp's reference, or against the CPU where
/// none is recorded (quantized models).
fn run_backend(device: &str, gpu_layers: Option<usize>, cases: &[(&str, &str)]) {
    for &(arch, dtype) in cases {
        let path = tiny_model(arch, dtype);
        let Some(model) = load_on(&path, device, gpu_layers) else {
            return;
        };
        let label = format!("{device} (gpu layers {gpu_layers:?})");
        if check_against_reference(&model, arch, dtype, &label) {
            continue;
        }
        eprintln!("{arch}-tiny-{dtype}: no llama.cpp reference recorded; compared with the CPU");
        let cpu = Model::load(&path, &options("cpu", None)).expect("loading on the CPU");
        let tokens = prompt(&cpu);
        let want = all_logits(&cpu, &tokens);
        if device != "cpu" {
            let e = nmse(&all_logits(&model, &tokens), &want);
            assert!(
                e <= bound(dtype),
                "{label} {arch}-{dtype}: nmse {e} vs the CPU"
            );
        }
        assert!(
            want.iter().all(|v| v.is_finite()),
            "{arch}-{dtype}: finite logits"
        );
    }
}

/// The emulated DSP is slow: one model of each family of ops.
const FEW: [(&str, &str); 2] = [("qwen2", "f16"), ("llama", "q8_0")];

#[test]
fn tiny_models_on_the_cpu_match_llama_cpp() {
    run_backend("cpu", None, &CASES);
}

#[test]
fn tiny_models_on_webgpu_match_the_cpu() {
    run_backend("webgpu", None, &CASES);
}

#[test]
fn tiny_models_on_sycl_match_the_cpu() {
    run_backend("sycl", None, &CASES);
}

#[test]
fn tiny_models_on_hexagon_match_the_cpu() {
    run_backend("hexagon", None, &FEW);
}

#[test]
fn tiny_models_with_only_the_last_layer_offloaded_match_the_cpu() {
    // llama.cpp's -ngl counts the output as a layer: 2 = last block + output.
    for device in ["webgpu", "sycl", "hexagon"] {
        run_backend(device, Some(2), &FEW[..1]);
    }
}

#[test]
fn one_gpu_layer_puts_only_the_output_on_the_device() {
    let path = tiny_model("llama", "f16");
    for device in ["webgpu", "sycl", "hexagon"] {
        let Some(model) = load_on(&path, device, Some(1)) else {
            continue;
        };
        let p = model.placement();
        assert_eq!(p.offloaded_layers(), 0, "{device}");
        assert_eq!(p.output_backend, 0, "{device}: the output is on the device");
        let cpu = Model::load(&path, &options("cpu", None)).expect("cpu");
        let tokens = prompt(&cpu);
        let e = nmse(&all_logits(&model, &tokens), &all_logits(&cpu, &tokens));
        assert!(e <= 1e-4, "{device} -ngl 1: nmse {e}");
    }
}
