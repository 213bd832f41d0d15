//! The small llama-shaped models the reference tests quantize, generated
//! deterministically (integer hashing only, no float library calls), and
//! the hashing the references use.
//!
//! Shared by the tests and by `examples/reference_model.rs`, which writes the
//! same files for `scripts/llama_quantize.py --refs`.
#![allow(dead_code)]

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use backplane_gguf::{DType, GgufWriter, Value};
use sha2::{Digest, Sha256};

/// The two reference inputs: one with its own `output.weight`, 8 layers;
/// one with the output tied to the token embeddings, 2 layers.
pub const VARIANTS: [Variant; 2] = [
    Variant {
        name: "untied",
        n_layer: 8,
        tied: false,
    },
    Variant {
        name: "tied",
        n_layer: 2,
        tied: true,
    },
];

/// One reference input.
#[derive(Clone, Copy, Debug)]
pub struct Variant {
    /// Short name, used in file names (`ref-<name>.gguf`).
    pub name: &'static str,
    /// Layers.
    pub n_layer: u32,
    /// No `output.weight`: the token embeddings double as the output.
    pub tied: bool,
}

/// Row length of the token embeddings and the projections' inputs.
const N_EMBD: i64 = 256;
/// K/V width (2 of 4 heads of 64: grouped-query attention).
const N_EMBD_KV: i64 = 128;
/// FFN width: 11 blocks of 32, not a multiple of 256, so ffn_down takes
/// llama.cpp's fallback types under the K-quant mixes.
const N_FF: i64 = 352;
const N_VOCAB: i64 = 384;

/// SplitMix64: a well-mixed 64-bit value from a counter.
fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Deterministic weights for tensor number `tensor` of shape `[ne0, rows]`:
/// uniform in (-1, 1) from 24 hash bits, times a per-row scale of
/// 0.02 * (1 + row % 7), with every 97th value 8x larger (outliers make the
/// quantizers' scale searches matter).
fn weights(tensor: u64, ne0: i64, rows: i64) -> Vec<f32> {
    let n = (ne0 * rows) as usize;
    (0..n)
        .map(|i| {
            let h = splitmix64((tensor << 40) ^ i as u64);
            let unit = (h >> 40) as f32 / (1u64 << 24) as f32;
            let row = i as i64 / ne0;
            let mut v = (2.0 * unit - 1.0) * 0.02 * (1 + row % 7) as f32;
            if i % 97 == 13 {
                v *= 8.0;
            }
            v
        })
        .collect()
}

/// Norm weights: 1 plus a small deterministic offset.
fn norm(tensor: u64, n: i64) -> Vec<f32> {
    weights(tensor, n, 1).iter().map(|v| 1.0 + v).collect()
}

fn to_bytes(dtype: DType, values: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; dtype.row_size(values.len()).expect("whole blocks")];
    backplane_quant::quantize_row(dtype, values, &mut out).expect("row sizes match");
    out
}

/// Writes the variant's model to `path`: llama metadata, f32 norms and
/// token embeddings, f16 projections, plus one 2-D tensor whose rows (48)
/// are not a multiple of 32, which every quantized type stores as f16.
pub fn write_model(variant: Variant, path: &Path) {
    let mut tensors: Vec<(String, DType, Vec<i64>, Vec<f32>)> = Vec::new();
    let mut next = 0u64;
    let mut add = |name: String, dtype: DType, ne: &[i64], values: Vec<f32>| {
        tensors.push((name, dtype, ne.to_vec(), values));
    };
    let mut id = || {
        next += 1;
        next
    };
    add(
        "token_embd.weight".into(),
        DType::F32,
        &[N_EMBD, N_VOCAB],
        weights(id(), N_EMBD, N_VOCAB),
    );
    add(
        "output_norm.weight".into(),
        DType::F32,
        &[N_EMBD],
        norm(id(), N_EMBD),
    );
    if !variant.tied {
        add(
            "output.weight".into(),
            DType::F16,
            &[N_EMBD, N_VOCAB],
            weights(id(), N_EMBD, N_VOCAB),
        );
    }
    for layer in 0..variant.n_layer {
        let name = |part: &str| format!("blk.{layer}.{part}.weight");
        add(name("attn_norm"), DType::F32, &[N_EMBD], norm(id(), N_EMBD));
        add(
            name("attn_q"),
            DType::F16,
            &[N_EMBD, N_EMBD],
            weights(id(), N_EMBD, N_EMBD),
        );
        add(
            name("attn_k"),
            DType::F16,
            &[N_EMBD, N_EMBD_KV],
            weights(id(), N_EMBD, N_EMBD_KV),
        );
        add(
            name("attn_v"),
            DType::F16,
            &[N_EMBD, N_EMBD_KV],
            weights(id(), N_EMBD, N_EMBD_KV),
        );
        add(
            name("attn_output"),
            DType::F16,
            &[N_EMBD, N_EMBD],
            weights(id(), N_EMBD, N_EMBD),
        );
        add(name("ffn_norm"), DType::F32, &[N_EMBD], norm(id(), N_EMBD));
        add(
            name("ffn_gate"),
            DType::F16,
            &[N_EMBD, N_FF],
            weights(id(), N_EMBD, N_FF),
        );
        add(
            name("ffn_up"),
            DType::F16,
            &[N_EMBD, N_FF],
            weights(id(), N_EMBD, N_FF),
        );
        add(
            name("ffn_down"),
            DType::F16,
            &[N_FF, N_EMBD],
            weights(id(), N_FF, N_EMBD),
        );
        if layer == 0 {
            add(
                name("attn_q_a"),
                DType::F16,
                &[48, 64],
                weights(id(), 48, 64),
            );
        }
    }

    let mut writer = GgufWriter::new();
    let set = |w: &mut GgufWriter, key: &str, value: Value| w.set(key, value);
    set(
        &mut writer,
        "general.architecture",
        Value::String("llama".into()),
    );
    set(
        &mut writer,
        "general.name",
        Value::String(format!("quantize reference ({})", variant.name)),
    );
    set(&mut writer, "general.file_type", Value::U32(1));
    set(&mut writer, "llama.context_length", Value::U32(256));
    set(
        &mut writer,
        "llama.embedding_length",
        Value::U32(N_EMBD as u32),
    );
    set(
        &mut writer,
        "llama.block_count",
        Value::U32(variant.n_layer),
    );
    set(
        &mut writer,
        "llama.feed_forward_length",
        Value::U32(N_FF as u32),
    );
    set(&mut writer, "llama.attention.head_count", Value::U32(4));
    set(&mut writer, "llama.attention.head_count_kv", Value::U32(2));
    set(&mut writer, "llama.rope.dimension_count", Value::U32(64));
    set(&mut writer, "llama.rope.freq_base", Value::F32(10000.0));
    set(
        &mut writer,
        "llama.attention.layer_norm_rms_epsilon",
        Value::F32(1e-5),
    );
    set(&mut writer, "llama.vocab_size", Value::U32(N_VOCAB as u32));
    for (name, dtype, ne, _) in &tensors {
        writer
            .add_tensor(name.clone(), *dtype, ne)
            .expect("valid tensor");
    }
    let file = File::create(path).expect("create the reference model");
    let mut stream = writer
        .begin(BufWriter::new(file))
        .expect("write the header");
    for (name, dtype, _, values) in &tensors {
        stream
            .write_tensor(name, &to_bytes(*dtype, values))
            .expect("write a tensor");
    }
    stream.finish().expect("finish the reference model");
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
