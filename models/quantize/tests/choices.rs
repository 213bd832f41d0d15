//! The per-tensor type choice, checked against llama.cpp's rules on
//! synthetic tensor tables (no data needed).

use backplane_gguf::TensorInfo;
use backplane_quantize::{
    DType, FileType, ModelInfo, QuantizeParams, fallback_type, llama_order, plan, tensor_type,
};

fn tensor(name: &str, dtype: DType, ne: &[i64]) -> TensorInfo {
    let mut shape = [1i64; 4];
    shape[..ne.len()].copy_from_slice(ne);
    TensorInfo {
        name: name.to_string(),
        dtype,
        n_dims: ne.len() as u32,
        ne: shape,
        offset: 0,
        size_bytes: 0,
    }
}

fn llama(n_layer: u32) -> ModelInfo {
    ModelInfo {
        arch: "llama".into(),
        n_layer,
        n_head: 32,
        n_head_kv: 8,
        n_expert: 0,
    }
}

/// A Llama-3.2-1B-shaped tensor table (tied embeddings unless `output`).
fn llama_tensors(n_layer: u32, output: bool) -> Vec<TensorInfo> {
    let mut t = vec![
        tensor("token_embd.weight", DType::F16, &[2048, 128256]),
        tensor("output_norm.weight", DType::F32, &[2048]),
    ];
    if output {
        t.push(tensor("output.weight", DType::F16, &[2048, 128256]));
    }
    for i in 0..n_layer {
        let n = |part: &str| format!("blk.{i}.{part}.weight");
        t.push(tensor(&n("attn_norm"), DType::F32, &[2048]));
        t.push(tensor(&n("attn_q"), DType::F16, &[2048, 2048]));
        t.push(tensor(&n("attn_k"), DType::F16, &[2048, 512]));
        t.push(tensor(&n("attn_v"), DType::F16, &[2048, 512]));
        t.push(tensor(&n("attn_output"), DType::F16, &[2048, 2048]));
        t.push(tensor(&n("ffn_norm"), DType::F32, &[2048]));
        t.push(tensor(&n("ffn_gate"), DType::F16, &[2048, 8192]));
        t.push(tensor(&n("ffn_up"), DType::F16, &[2048, 8192]));
        t.push(tensor(&n("ffn_down"), DType::F16, &[8192, 2048]));
    }
    t
}

fn params(ftype: FileType) -> QuantizeParams {
    QuantizeParams {
        ftype,
        ..Default::default()
    }
}

fn type_of(model: &ModelInfo, tensors: &[TensorInfo], p: &QuantizeParams, name: &str) -> DType {
    tensor_type(model, tensors, p, name)
        .expect("plan")
        .unwrap_or_else(|| panic!("no tensor {name}"))
}

#[test]
fn q4_k_m_gives_q6_k_to_the_first_last_and_every_third_attn_v_and_ffn_down() {
    let tensors = llama_tensors(16, false);
    let model = llama(16);
    let p = params(FileType::Q4_K_M);
    let more_bits = [0, 1, 4, 7, 10, 13, 14, 15];
    for layer in 0..16 {
        let expected = if more_bits.contains(&layer) {
            DType::Q6_K
        } else {
            DType::Q4_K
        };
        for part in ["attn_v", "ffn_down"] {
            let name = format!("blk.{layer}.{part}.weight");
            assert_eq!(type_of(&model, &tensors, &p, &name), expected, "{name}");
        }
        for part in ["attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"] {
            let name = format!("blk.{layer}.{part}.weight");
            assert_eq!(type_of(&model, &tensors, &p, &name), DType::Q4_K, "{name}");
        }
        let norm = format!("blk.{layer}.attn_norm.weight");
        assert_eq!(type_of(&model, &tensors, &p, &norm), DType::F32, "{norm}");
    }
}

#[test]
fn tied_token_embeddings_get_the_output_type() {
    let model = llama(16);
    let tied = llama_tensors(16, false);
    let untied = llama_tensors(16, true);
    let q4km = params(FileType::Q4_K_M);
    assert_eq!(
        type_of(&model, &tied, &q4km, "token_embd.weight"),
        DType::Q6_K
    );
    assert_eq!(
        type_of(&model, &untied, &q4km, "token_embd.weight"),
        DType::Q4_K
    );
    assert_eq!(
        type_of(&model, &untied, &q4km, "output.weight"),
        DType::Q6_K
    );
    let q4_0 = params(FileType::Q4_0);
    assert_eq!(
        type_of(&model, &tied, &q4_0, "token_embd.weight"),
        DType::Q6_K
    );
    let q8_0 = params(FileType::Q8_0);
    assert_eq!(
        type_of(&model, &tied, &q8_0, "token_embd.weight"),
        DType::Q8_0
    );
}

#[test]
fn leave_output_tensor_keeps_output_weight_as_it_is() {
    let model = llama(2);
    let tensors = llama_tensors(2, true);
    let p = QuantizeParams {
        quantize_output: false,
        ..params(FileType::Q4_0)
    };
    assert_eq!(type_of(&model, &tensors, &p, "output.weight"), DType::F16);
    assert_eq!(
        type_of(&model, &tensors, &p, "blk.0.attn_q.weight"),
        DType::Q4_0
    );
}

#[test]
fn pure_skips_the_mix_rules_but_not_the_fallbacks() {
    let model = llama(16);
    let mut tensors = llama_tensors(16, false);
    tensors.push(tensor("blk.0.odd.weight", DType::F16, &[352, 4]));
    let p = QuantizeParams {
        pure: true,
        ..params(FileType::Q4_K_M)
    };
    assert_eq!(
        type_of(&model, &tensors, &p, "token_embd.weight"),
        DType::Q4_K
    );
    assert_eq!(
        type_of(&model, &tensors, &p, "blk.0.attn_v.weight"),
        DType::Q4_K
    );
    assert_eq!(
        type_of(&model, &tensors, &p, "blk.0.odd.weight"),
        DType::Q5_0
    );
}

#[test]
fn rows_that_do_not_split_into_blocks_fall_back_as_llama_cpp_does() {
    assert_eq!(fallback_type(DType::Q4_K, 256), None);
    assert_eq!(fallback_type(DType::Q4_K, 352), Some(DType::Q5_0));
    assert_eq!(fallback_type(DType::Q5_K, 352), Some(DType::Q5_1));
    assert_eq!(fallback_type(DType::Q6_K, 352), Some(DType::Q8_0));
    assert_eq!(fallback_type(DType::Q2_K, 352), Some(DType::Q4_0));
    assert_eq!(fallback_type(DType::Q3_K, 352), Some(DType::Q4_0));
    assert_eq!(fallback_type(DType::Q8_0, 48), Some(DType::F16));
    assert_eq!(fallback_type(DType::Q4_K, 48), Some(DType::F16));
    assert_eq!(fallback_type(DType::Q4_0, 64), None);
}

#[test]
fn an_output_row_that_does_not_split_into_blocks_becomes_q8_0() {
    let model = llama(1);
    let tensors = vec![
        tensor("token_embd.weight", DType::F16, &[320, 1000]),
        tensor("blk.0.attn_q.weight", DType::F16, &[320, 320]),
    ];
    let p = params(FileType::Q4_K_M);
    assert_eq!(
        type_of(&model, &tensors, &p, "token_embd.weight"),
        DType::Q8_0
    );
    assert_eq!(
        type_of(&model, &tensors, &p, "blk.0.attn_q.weight"),
        DType::Q5_0
    );
}

#[test]
fn only_weights_of_two_or_more_dimensions_are_quantized() {
    let model = llama(1);
    let tensors = vec![
        tensor("blk.0.attn_q.bias", DType::F32, &[256, 2]),
        tensor("blk.0.attn_q_norm.weight", DType::F32, &[256, 2]),
        tensor("blk.0.ffn_gate_inp.weight", DType::F32, &[256, 8]),
        tensor("position_embd.weight", DType::F32, &[256, 64]),
        tensor("blk.0.flat.weight", DType::F16, &[256, 1, 1, 1]),
        tensor("blk.0.attn_k.weight", DType::F32, &[256, 256]),
    ];
    let p = params(FileType::Q8_0);
    let plans = plan(&model, &tensors, &p).expect("plan");
    let to = |name: &str| plans.iter().find(|t| t.name == name).map(|t| t.to);
    assert_eq!(to("blk.0.attn_q.bias"), Some(DType::F32));
    assert_eq!(to("blk.0.attn_q_norm.weight"), Some(DType::F32));
    assert_eq!(to("blk.0.ffn_gate_inp.weight"), Some(DType::F32));
    assert_eq!(to("position_embd.weight"), Some(DType::F32));
    assert_eq!(to("blk.0.flat.weight"), Some(DType::F16));
    assert_eq!(to("blk.0.attn_k.weight"), Some(DType::Q8_0));
}

#[test]
fn tensors_come_in_llama_cpp_order_non_layer_first_then_by_layer_number() {
    let tensors = vec![
        tensor("blk.10.b.weight", DType::F32, &[4]),
        tensor("output.weight", DType::F32, &[4]),
        tensor("blk.2.z.weight", DType::F32, &[4]),
        tensor("blk.2.a.weight", DType::F32, &[4]),
        tensor("a.weight", DType::F32, &[4]),
    ];
    let names: Vec<&str> = llama_order(&tensors)
        .iter()
        .map(|&i| tensors[i].name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "a.weight",
            "output.weight",
            "blk.2.a.weight",
            "blk.2.z.weight",
            "blk.10.b.weight"
        ]
    );
}

#[test]
fn q3_k_m_and_q2_k_give_attention_and_ffn_down_more_bits() {
    let model = ModelInfo {
        n_head: 4,
        n_head_kv: 2,
        ..llama(16)
    };
    let tensors = llama_tensors(16, true);
    let q3km = params(FileType::Q3_K_M);
    assert_eq!(
        type_of(&model, &tensors, &q3km, "blk.0.attn_v.weight"),
        DType::Q5_K
    );
    assert_eq!(
        type_of(&model, &tensors, &q3km, "blk.1.attn_v.weight"),
        DType::Q5_K
    );
    assert_eq!(
        type_of(&model, &tensors, &q3km, "blk.2.attn_v.weight"),
        DType::Q4_K
    );
    assert_eq!(
        type_of(&model, &tensors, &q3km, "blk.0.ffn_down.weight"),
        DType::Q5_K
    );
    assert_eq!(
        type_of(&model, &tensors, &q3km, "blk.5.ffn_down.weight"),
        DType::Q4_K
    );
    assert_eq!(
        type_of(&model, &tensors, &q3km, "blk.5.attn_output.weight"),
        DType::Q4_K
    );
    assert_eq!(
        type_of(&model, &tensors, &q3km, "blk.5.attn_q.weight"),
        DType::Q3_K
    );
    let q2k = params(FileType::Q2_K);
    assert_eq!(
        type_of(&model, &tensors, &q2k, "blk.3.attn_v.weight"),
        DType::Q3_K
    );
    let gqa8 = llama(16);
    assert_eq!(
        type_of(&gqa8, &tensors, &q2k, "blk.3.attn_v.weight"),
        DType::Q4_K
    );
    assert_eq!(
        type_of(&gqa8, &tensors, &q2k, "blk.3.ffn_down.weight"),
        DType::Q3_K
    );
    assert_eq!(
        type_of(&gqa8, &tensors, &q2k, "blk.3.ffn_up.weight"),
        DType::Q2_K
    );
}

#[test]
fn a_70b_llama_gets_q5_k_attn_v_and_eight_experts_get_q8_0() {
    let model = ModelInfo {
        n_layer: 80,
        ..llama(80)
    };
    assert!(model.is_70b());
    let tensors = llama_tensors(80, true);
    let p = params(FileType::Q4_K_M);
    // Layer 11 of 80 is not one of the more-bits layers: q4_K, raised to q5_K.
    assert_eq!(
        type_of(&model, &tensors, &p, "blk.11.attn_v.weight"),
        DType::Q5_K
    );
    assert_eq!(
        type_of(&model, &tensors, &p, "blk.3.attn_v.weight"),
        DType::Q6_K
    );
    let moe = ModelInfo {
        n_expert: 8,
        ..llama(16)
    };
    let tensors = llama_tensors(16, true);
    assert_eq!(
        type_of(&moe, &tensors, &p, "blk.3.attn_v.weight"),
        DType::Q8_0
    );
    assert_eq!(
        type_of(&moe, &tensors, &p, "blk.3.attn_k.weight"),
        DType::Q8_0
    );
}

#[test]
fn float_file_types_convert_every_quantizable_weight_without_fallbacks() {
    let model = llama(1);
    let tensors = vec![
        tensor("token_embd.weight", DType::F32, &[48, 10]),
        tensor("blk.0.attn_norm.weight", DType::F32, &[48]),
    ];
    let p = params(FileType::F16);
    assert_eq!(
        type_of(&model, &tensors, &p, "token_embd.weight"),
        DType::F16
    );
    assert_eq!(
        type_of(&model, &tensors, &p, "blk.0.attn_norm.weight"),
        DType::F32
    );
    let p = params(FileType::BF16);
    assert_eq!(
        type_of(&model, &tensors, &p, "token_embd.weight"),
        DType::BF16
    );
}

#[test]
fn file_types_parse_case_insensitively_with_aliases_and_codes() {
    assert_eq!("q4_k_m".parse::<FileType>(), Ok(FileType::Q4_K_M));
    assert_eq!("Q8_0".parse::<FileType>(), Ok(FileType::Q8_0));
    assert_eq!("bf16".parse::<FileType>(), Ok(FileType::BF16));
    assert_eq!("Q4_K".parse::<FileType>(), Ok(FileType::Q4_K_M));
    assert_eq!("15".parse::<FileType>(), Ok(FileType::Q4_K_M));
    assert_eq!(FileType::Q4_K_M.code(), 15);
    assert_eq!(FileType::Q8_0.code(), 7);
    assert_eq!(FileType::BF16.code(), 32);
    let err = "q4_k_x"
        .parse::<FileType>()
        .expect_err("unknown")
        .to_string();
    assert!(
        err.contains("'q4_k_x'") && err.contains("Q4_K_M") && err.contains("Q8_0"),
        "{err}"
    );
}

#[test]
fn the_default_is_q8_0() {
    assert_eq!(QuantizeParams::default().ftype, FileType::Q8_0);
    assert!(!QuantizeParams::default().requantize);
    assert!(QuantizeParams::default().quantize_output);
}
