//! Tiny models of every architecture and type: written, reopened with the
//! GGUF reader, and checked against llama.cpp's conventions.

mod common;
mod forward;

use backplane_gguf::{DType, Gguf, Value};
use backplane_testmodel::weights::{Init, fill, tensor_key};
use backplane_testmodel::{
    Arch, FileType, Preset, Shape, TestModelError, WriteOptions, default_vocab_dir, plan,
    write_model, write_model_with,
};
use common::{tiny, tmp_path, write_and_open};

/// The float file types, written directly.
const FLOAT_TYPES: [FileType; 3] = [FileType::F32, FileType::F16, FileType::BF16];

fn u32_key(file: &Gguf, key: &str) -> u32 {
    file.get_u32(key).unwrap_or_else(|e| panic!("{key}: {e}"))
}

#[test]
fn float_models_carry_llama_cpp_hyperparameters() {
    for arch in Arch::ALL {
        for dtype in FLOAT_TYPES {
            let spec = tiny(arch, dtype, 0);
            let file = write_and_open(&spec, "hparams");
            let a = arch.name();
            let shape = Shape::of(arch, Preset::Tiny);
            assert_eq!(file.get_str("general.architecture").unwrap(), a);
            assert_eq!(file.get_str("general.name").unwrap(), spec.general_name());
            assert_eq!(u32_key(&file, "general.file_type"), dtype.code());
            assert!(file.get("general.quantization_version").is_none());
            let expected = [
                ("block_count", 2),
                ("context_length", 512),
                ("embedding_length", 256),
                ("feed_forward_length", 512),
                ("attention.head_count", 4),
                ("attention.head_count_kv", 2),
                ("rope.dimension_count", 64),
                ("vocab_size", shape.n_vocab as u32),
            ];
            for (key, value) in expected {
                assert_eq!(u32_key(&file, &format!("{a}.{key}")), value, "{a}.{key}");
            }
            let eps = file
                .get_f32(&format!("{a}.attention.layer_norm_rms_epsilon"))
                .unwrap();
            assert_eq!(eps, if arch == Arch::Llama { 1e-5 } else { 1e-6 });
            let base = file.get_f32(&format!("{a}.rope.freq_base")).unwrap();
            assert_eq!(base, if arch == Arch::Llama { 10_000.0 } else { 1e6 });
            let key_length = file.get(&format!("{a}.attention.key_length"));
            if arch == Arch::Qwen3 {
                assert_eq!(u32_key(&file, &format!("{a}.attention.key_length")), 64);
                assert_eq!(u32_key(&file, &format!("{a}.attention.value_length")), 64);
            } else {
                assert!(key_length.is_none(), "{a} has no key_length");
            }
        }
    }
}

/// The tensors llama.cpp loads for each architecture, in ggml order.
fn expected_tensors(arch: Arch) -> Vec<(String, Vec<i64>)> {
    let mut t = vec![(
        "token_embd.weight".to_string(),
        vec![256, shape_vocab(arch)],
    )];
    for l in 0..2 {
        let b = |p: &str| format!("blk.{l}.{p}");
        t.push((b("attn_norm.weight"), vec![256]));
        t.push((b("attn_q.weight"), vec![256, 256]));
        if arch == Arch::Qwen2 {
            t.push((b("attn_q.bias"), vec![256]));
        }
        t.push((b("attn_k.weight"), vec![256, 128]));
        if arch == Arch::Qwen2 {
            t.push((b("attn_k.bias"), vec![128]));
        }
        t.push((b("attn_v.weight"), vec![256, 128]));
        if arch == Arch::Qwen2 {
            t.push((b("attn_v.bias"), vec![128]));
        }
        if arch == Arch::Qwen3 {
            t.push((b("attn_q_norm.weight"), vec![64]));
            t.push((b("attn_k_norm.weight"), vec![64]));
        }
        t.push((b("attn_output.weight"), vec![256, 256]));
        t.push((b("ffn_norm.weight"), vec![256]));
        t.push((b("ffn_gate.weight"), vec![256, 512]));
        t.push((b("ffn_up.weight"), vec![256, 512]));
        t.push((b("ffn_down.weight"), vec![512, 256]));
    }
    t.push(("output_norm.weight".to_string(), vec![256]));
    if arch != Arch::Qwen2 {
        t.push(("output.weight".to_string(), vec![256, shape_vocab(arch)]));
    }
    t
}

fn shape_vocab(arch: Arch) -> i64 {
    match arch {
        Arch::Llama => 32_000,
        Arch::Qwen2 | Arch::Qwen3 => 151_936,
    }
}

#[test]
fn float_models_have_llama_cpp_tensor_names_shapes_and_types() {
    for arch in Arch::ALL {
        for dtype in FLOAT_TYPES {
            let file = write_and_open(&tiny(arch, dtype, 0), "tensors");
            let found: Vec<(String, Vec<i64>)> = file
                .tensors()
                .iter()
                .map(|t| (t.name.clone(), t.shape().to_vec()))
                .collect();
            assert_eq!(found, expected_tensors(arch), "{arch} {dtype}");
            let weight_type = dtype.default_type();
            for t in file.tensors() {
                let want = if t.n_dims == 1 {
                    DType::F32
                } else {
                    weight_type
                };
                assert_eq!(t.dtype, want, "{arch} {dtype} {}", t.name);
            }
        }
    }
}

#[test]
fn qwen2_tiny_ties_its_output_to_the_embeddings_and_the_others_do_not() {
    for arch in Arch::ALL {
        let file = write_and_open(&tiny(arch, FileType::F32, 0), "tied");
        let has_output = file.tensor("output.weight").is_some();
        assert_eq!(has_output, arch != Arch::Qwen2, "{arch}");
        assert_eq!(!has_output, Shape::of(arch, Preset::Tiny).tied_embeddings);
    }
}

#[test]
fn the_same_spec_writes_identical_bytes() {
    for arch in Arch::ALL {
        let spec = tiny(arch, FileType::F16, 42);
        let a = tmp_path(&format!("twice-a-{}", spec.file_name()));
        let b = tmp_path(&format!("twice-b-{}", spec.file_name()));
        write_model(&spec, &a).unwrap();
        write_model(&spec, &b).unwrap();
        let bytes = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        std::fs::remove_file(a).unwrap();
        std::fs::remove_file(b).unwrap();
        let (a, b) = bytes;
        assert!(a.len() > 1_000_000);
        assert!(a == b, "{arch}: two runs differ");
    }
}

#[test]
fn another_seed_changes_every_tensor_but_no_key() {
    let s1 = write_and_open(&tiny(Arch::Qwen3, FileType::F32, 1), "seed");
    let s2 = write_and_open(&tiny(Arch::Qwen3, FileType::F32, 2), "seed");
    for (t1, t2) in s1.tensors().iter().zip(s2.tensors()) {
        assert_eq!((&t1.name, t1.ne, t1.dtype), (&t2.name, t2.ne, t2.dtype));
        assert_ne!(s1.tensor_data(t1), s2.tensor_data(t2), "{}", t1.name);
    }
    let keys = |f: &Gguf| -> Vec<(String, Value)> {
        f.metadata()
            .iter()
            .filter(|(k, _)| k != "general.name")
            .cloned()
            .collect()
    };
    assert_eq!(keys(&s1), keys(&s2));
}

#[test]
fn tokenizer_keys_equal_the_source_vocabulary() {
    for arch in Arch::ALL {
        let shape = Shape::of(arch, Preset::Tiny);
        let model = write_and_open(&tiny(arch, FileType::F16, 0), "vocab");
        let source = Gguf::open(default_vocab_dir().join(shape.vocab.file_name())).unwrap();
        let tokenizer = |f: &Gguf| -> Vec<(String, Value)> {
            f.metadata()
                .iter()
                .filter(|(k, _)| k.starts_with("tokenizer."))
                .cloned()
                .collect()
        };
        let copied = tokenizer(&model);
        assert!(copied.iter().any(|(k, _)| k == "tokenizer.ggml.merges") == (arch != Arch::Llama));
        assert_eq!(copied, tokenizer(&source), "{arch}");
        let tokens = model.get_str_array("tokenizer.ggml.tokens").unwrap();
        assert_eq!(tokens.len(), shape.n_vocab);
    }
}

#[test]
fn the_f16_model_is_the_f32_model_rounded() {
    let f32_file = write_and_open(&tiny(Arch::Llama, FileType::F32, 5), "rounded");
    let f16_file = write_and_open(&tiny(Arch::Llama, FileType::F16, 5), "rounded");
    for (a, b) in f32_file.tensors().iter().zip(f16_file.tensors()) {
        let exact = forward::read_f32(&f32_file, &a.name);
        let halves = forward::read_f32(&f16_file, &b.name);
        let expected: Vec<f32> = if a.n_dims == 1 {
            exact
        } else {
            exact
                .iter()
                .map(|&x| backplane_quant::f16::from_f32(x).to_f32())
                .collect()
        };
        assert!(expected == halves, "{}", a.name);
    }
}

#[test]
fn the_plan_matches_the_parameter_count_of_each_preset() {
    for arch in Arch::ALL {
        for preset in Preset::ALL {
            let shape = Shape::of(arch, preset);
            let total: u64 = plan(&shape).iter().map(|t| t.elements() as u64).sum();
            assert_eq!(total, shape.parameter_count(), "{arch} {preset}");
        }
    }
    // Llama-3.2-1B has 1,235,814,400 parameters.
    assert_eq!(
        Shape::of(Arch::Llama, Preset::OneB).parameter_count(),
        1_235_814_400
    );
}

#[test]
fn a_missing_vocabulary_names_the_file_and_leaves_no_output() {
    let out = tmp_path("no-vocab.gguf");
    let options = WriteOptions {
        vocab_dir: tmp_path("no-such-dir"),
        ..WriteOptions::default()
    };
    let err = write_model_with(&tiny(Arch::Llama, FileType::F32, 0), &out, &options).unwrap_err();
    assert!(matches!(err, TestModelError::Gguf { .. }), "{err}");
    assert!(
        err.to_string().contains("ggml-vocab-llama-spm.gguf"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn logits_spread_wide_with_clear_winners_and_activations_stay_sane() {
    for arch in Arch::ALL {
        let file = write_and_open(&tiny(arch, FileType::F32, 0), "forward");
        let model = forward::Model::load(&file, &Shape::of(arch, Preset::Tiny));
        let mut gaps = Vec::new();
        let mut repeats = 0;
        // 32 tokens spread over the 32,000 ids every vocabulary has.
        for token in (0..32).map(|i| 1 + i * 997) {
            let run = model.first_token(token);
            assert!(
                (1.0..8.0).contains(&run.final_rms),
                "{arch} token {token}: residual RMS {}",
                run.final_rms
            );
            let std = forward::std(&run.logits);
            assert!(
                (4.0..6.0).contains(&std),
                "{arch} token {token}: logit std {std}"
            );
            let gap = forward::top2_gap(&run.logits);
            gaps.push(gap);
            repeats += usize::from(forward::argmax(&run.logits) == token);
        }
        // The winner usually leads the runner-up by far more than f16 or
        // accumulation-order rounding could move a logit (near-ties happen
        // at a rate of about the gap over the typical gap, ~5% below 0.05).
        gaps.sort_by(f32::total_cmp);
        let near_ties = gaps.iter().filter(|&&g| g < 0.05).count();
        let median = gaps[gaps.len() / 2];
        eprintln!("{arch}: top-2 gaps {gaps:?}");
        assert!(near_ties <= 4, "{arch}: {near_ties} near-ties in {gaps:?}");
        assert!(median > 0.3, "{arch}: median top-2 gap {median}");
        // A token's own embedding does not win its logits (with tied
        // embeddings it would if the final state were mostly the input).
        assert!(repeats <= 2, "{arch}: {repeats} tokens predict themselves");
    }
}

#[test]
fn weight_values_have_the_requested_mean_and_spread() {
    let init = Init::around_one(0.05);
    let mut v = vec![0.0f32; 100_000];
    fill(tensor_key(1, "x"), init, 0, &mut v);
    let mean = forward::mean(&v);
    let std = forward::std(&v);
    assert!((mean - 1.0).abs() < 0.001, "mean {mean}");
    assert!((std - 0.05).abs() < 0.001, "std {std}");
    let half = f64::from(init.half_width);
    assert!(v.iter().all(|&x| (f64::from(x) - 1.0).abs() <= half + 1e-6));
}
