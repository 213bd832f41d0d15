//! Missing or inconsistent metadata and tensors give errors naming the
//! key or tensor, the file, and what was expected and found.

mod common;

use backplane::DType;
use backplane_llm::{Arch, MetaValue, Model};
use common::{Tiny, cpu, make};

fn load_err(m: &backplane_llm::MemoryModel) -> String {
    match Model::from_source(m, &cpu(), &mut |_| {}) {
        Ok(_) => panic!("the model loaded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_missing_key_names_the_key_and_file() {
    let mut t = make(Tiny::new(Arch::Llama), 1);
    t.source.remove_meta("llama.block_count");
    let e = load_err(&t.source);
    assert!(
        e.contains("tiny-llama.gguf") && e.contains("'llama.block_count' is missing"),
        "{e}"
    );
}

#[test]
fn a_key_of_the_wrong_type_says_expected_and_found() {
    let mut t = make(Tiny::new(Arch::Qwen2), 1);
    t.source.set_meta(
        "qwen2.attention.layer_norm_rms_epsilon",
        MetaValue::Str("x".into()),
    );
    let e = load_err(&t.source);
    assert!(
        e.contains("qwen2.attention.layer_norm_rms_epsilon")
            && e.contains("expected a float")
            && e.contains("string \"x\""),
        "{e}"
    );
}

#[test]
fn kv_heads_that_do_not_divide_the_heads_are_refused() {
    let mut t = make(Tiny::new(Arch::Llama), 1);
    t.source
        .set_meta("llama.attention.head_count_kv", MetaValue::Int(3));
    let e = load_err(&t.source);
    assert!(
        e.contains("head_count_kv")
            && e.contains("divisor of head_count 4")
            && e.contains("found 3"),
        "{e}"
    );
}

#[test]
fn a_missing_tensor_is_named() {
    let mut t = make(Tiny::new(Arch::Qwen3), 1);
    t.source.remove_tensor("blk.1.attn_k_norm.weight");
    let e = load_err(&t.source);
    assert!(
        e.contains("tensor 'blk.1.attn_k_norm.weight' is missing"),
        "{e}"
    );
}

#[test]
fn a_tensor_of_the_wrong_shape_says_expected_and_found() {
    let mut t = make(Tiny::new(Arch::Llama), 1);
    t.source.set_tensor(
        "blk.0.ffn_up.weight",
        DType::F32,
        &[64, 95],
        vec![0; 64 * 95 * 4],
    );
    let e = load_err(&t.source);
    assert!(
        e.contains("blk.0.ffn_up.weight")
            && e.contains("expected shape [64, 96]")
            && e.contains("[64, 95, 1, 1]"),
        "{e}"
    );
}

#[test]
fn a_norm_weight_of_the_wrong_type_is_refused() {
    let mut t = make(Tiny::new(Arch::Llama), 1);
    t.source
        .set_tensor("output_norm.weight", DType::F16, &[64], vec![0; 128]);
    let e = load_err(&t.source);
    assert!(
        e.contains("output_norm.weight") && e.contains("type f32") && e.contains("type f16"),
        "{e}"
    );
}

#[test]
fn truncated_tensor_data_is_refused_with_both_sizes() {
    let mut t = make(Tiny::new(Arch::Llama), 1);
    t.source
        .set_tensor("blk.1.attn_q.weight", DType::F32, &[64, 64], vec![0; 100]);
    let e = load_err(&t.source);
    assert!(
        e.contains("16384 bytes") && e.contains("found 100 bytes"),
        "{e}"
    );
}

#[test]
fn an_unknown_architecture_is_named() {
    let mut t = make(Tiny::new(Arch::Llama), 1);
    t.source
        .set_meta("general.architecture", MetaValue::Str("mamba".into()));
    let e = load_err(&t.source);
    assert!(e.contains("'mamba' is not supported"), "{e}");
}

#[test]
fn an_unknown_device_lists_the_devices_there_are() {
    let t = make(Tiny::new(Arch::Llama), 1);
    let opts = backplane_llm::LoadOptions {
        device: "nosuchdevice".into(),
        ..cpu()
    };
    let e = match Model::from_source(&t.source, &opts, &mut |_| {}) {
        Ok(_) => panic!("loaded"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("nosuchdevice") && e.contains("cpu:"), "{e}");
}
