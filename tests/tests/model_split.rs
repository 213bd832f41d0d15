//! A model's layers split across several devices (llama.cpp's
//! `--split-mode layer`): the two GPU-typed devices of the `pickier` test
//! fixture (each with its own memory; it computes ADD MUL SCALE RMS_NORM
//! MUL_MAT and leaves the rest to the CPU), the CPU with WebGPU where an
//! adapter exists, and two WebGPU adapters (two GPUs) where there are two. Activations cross devices at the split points; the
//! logits must equal the CPU-only run. Build the fixtures first with
//! `cargo xtask plugins --fixtures`.

use std::path::PathBuf;
use std::sync::OnceLock;

use backplane_llm::{LlmError, LoadOptions, Logits, Model, Split, SplitMode};
use backplane_testmodel::{Arch, FileType, ModelSpec, write_model};
use backplane_tests::{fixture, generated_model, nmse, plugin_dir, scratch_dir_with};

const PICKIER_BOTH: &str = "pickier:pickier0,pickier:pickier1";

/// A directory holding the `pickier` fixture (two devices).
fn pickier_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| scratch_dir_with("model-split-plugins", &[(fixture("pickier"), "pickier")]))
}

/// The tiny llama model in f32, generated once per test process.
fn tiny_llama() -> PathBuf {
    let spec = ModelSpec::tiny(Arch::Llama, FileType::F32);
    generated_model(&spec.file_name(), |path| {
        write_model(&spec, path).expect("writing the tiny model");
    })
}

fn options(device: &str) -> LoadOptions {
    LoadOptions {
        device: device.into(),
        gpu_layers: None,
        n_ctx: 256,
        plugin_dirs: vec![pickier_dir().clone(), plugin_dir()],
        repack: true,
        ..LoadOptions::default()
    }
}

fn load(device: &str, mode: SplitMode, ratios: &[f32]) -> Result<Model, LlmError> {
    let split = Split {
        mode,
        tensor_split: ratios.to_vec(),
    };
    Model::load_split(tiny_llama(), &options(device), &split, &mut |_| {})
}

fn tokens() -> Vec<u32> {
    (0..40u32).map(|i| 1 + (i * 7919) % 31_000).collect()
}

/// Every position's logits of a prefill, then of three decode steps.
fn logits(model: &Model) -> Vec<f32> {
    let mut s = model.session(256).expect("a session");
    let mut out = s.eval(&tokens(), Logits::All).expect("prefill").to_vec();
    for t in [17u32, 4242, 999] {
        out.extend_from_slice(s.eval(&[t], Logits::Last).expect("decode"));
    }
    out
}

fn cpu_logits() -> &'static [f32] {
    static LOGITS: OnceLock<Vec<f32>> = OnceLock::new();
    LOGITS.get_or_init(|| {
        let model = load("cpu", SplitMode::Layer, &[]).expect("loading on the CPU");
        logits(&model)
    })
}

/// Checks that `model` (loaded on `devices`) gives the CPU-only run's
/// logits, printing the error.
fn assert_logits_match_the_cpu(model: &Model, devices: &str) {
    let e = nmse(&logits(model), cpu_logits());
    eprintln!("{devices} vs CPU: nmse {e:e}");
    assert!(e <= 1e-6, "{devices}: nmse {e} vs the CPU");
}

/// [`load`] split by layer with `ratios`, or None with the reason printed
/// when this machine lacks one of `devices`.
fn load_or_skip(devices: &str, ratios: &[f32]) -> Option<Model> {
    match load(devices, SplitMode::Layer, ratios) {
        Ok(m) => Some(m),
        Err(LlmError::Device { reason, .. }) => {
            eprintln!("skipping {devices}: {reason}");
            None
        }
        Err(e) => panic!("loading {devices}: {e}"),
    }
}

/// Why loading `devices` split by layer with `ratios` fails.
fn load_error(devices: &str, ratios: &[f32]) -> String {
    match load(devices, SplitMode::Layer, ratios) {
        Ok(_) => panic!("{devices} with ratios {ratios:?} loaded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn ratios_one_to_three_put_one_block_on_each_pickier_device() {
    let model = load(PICKIER_BOTH, SplitMode::Layer, &[1.0, 3.0]).expect("loading split");
    let p = model.placement();
    assert_eq!(p.device, PICKIER_BOTH);
    assert_eq!(p.backends.len(), 3, "{:?}", p.backends);
    assert_eq!(p.layer_backend, [0, 1], "{p:?}");
    assert_eq!(p.output_backend, 1, "the output goes with the last range");
    assert_logits_match_the_cpu(&model, "pickier 1,3");
    assert!(
        model.scheduler().stats().copies > 0,
        "activations are copied between devices"
    );
}

#[test]
fn equal_free_memory_splits_blocks_and_output_like_llama_cpp() {
    // Both devices report 1 GiB free: shares 1:1, so of blocks 0, 1 and the
    // output (fractions 0, 1/3, 2/3) the blocks go to the first device.
    let model = load(PICKIER_BOTH, SplitMode::Layer, &[]).expect("loading split");
    let p = model.placement();
    assert_eq!(p.layer_backend, [0, 0], "{p:?}");
    assert_eq!(p.output_backend, 1, "{p:?}");
    assert_logits_match_the_cpu(&model, "pickier, split by free memory");
}

#[test]
fn split_mode_none_uses_only_the_first_device() {
    let model = load(PICKIER_BOTH, SplitMode::None, &[]).expect("loading");
    let p = model.placement();
    assert_eq!(p.device, "pickier:pickier0");
    assert_eq!(p.backends.len(), 2, "{:?}", p.backends);
    assert_eq!(
        (p.layer_backend.as_slice(), p.output_backend),
        (&[0, 0][..], 0)
    );
    assert_logits_match_the_cpu(&model, "one pickier device");
}

#[test]
fn the_cpu_can_take_the_first_range() {
    let model = load("cpu,pickier:pickier1", SplitMode::Layer, &[1.0, 3.0]).expect("loading");
    let p = model.placement();
    assert_eq!(p.cpu_backend, 1);
    assert_eq!(p.layer_backend, [1, 0], "{p:?}");
    assert_eq!(p.output_backend, 0, "{p:?}");
    assert_logits_match_the_cpu(&model, "cpu,pickier 1,3");
}

#[test]
fn cpu_and_webgpu_split_matches_the_cpu() {
    let Some(model) = load_or_skip("cpu,webgpu", &[1.0, 3.0]) else {
        return;
    };
    let p = model.placement();
    assert_eq!(p.layer_backend, [1, 0], "{p:?}");
    assert_logits_match_the_cpu(&model, "cpu,webgpu 1,3");
}

/// Two GPUs of one machine: wgpu lists each as an adapter (`webgpu:gpu0`,
/// `webgpu:gpu1`). Skipped, saying so, with fewer than two adapters.
#[test]
fn two_webgpu_adapters_split_matches_the_cpu() {
    let Some(model) = load_or_skip("webgpu:gpu0,webgpu:gpu1", &[1.0, 3.0]) else {
        return;
    };
    let p = model.placement();
    assert_eq!(p.layer_backend, [0, 1], "{p:?}");
    assert_eq!(p.output_backend, 1, "{p:?}");
    assert_logits_match_the_cpu(&model, "webgpu gpu0,gpu1 1,3");
}

#[test]
fn bad_tensor_split_and_repeated_devices_are_refused_with_the_reason() {
    let e = load_error(PICKIER_BOTH, &[1.0, 2.0, 3.0]);
    assert!(e.contains("3 ratios for 2 devices"), "{e}");
    let e = load_error(PICKIER_BOTH, &[1.0, -1.0]);
    assert!(e.contains("-1"), "{e}");
    let e = load_error("pickier:pickier0,pickier0", &[]);
    assert!(e.contains("listed once"), "{e}");
    let e = load_error("pickier:pickier0,nosuch", &[]);
    assert!(
        e.contains("'nosuch'") && e.contains("pickier:pickier1"),
        "{e}"
    );
}
