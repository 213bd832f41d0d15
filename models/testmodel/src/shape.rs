//! What a preset means: the hyperparameters of each architecture and size.

use crate::spec::{Arch, Preset};

/// One of llama.cpp's vocabulary test files in `models/vocab/`, whose
/// `tokenizer.*` keys a generated model carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Vocab {
    /// `ggml-vocab-llama-spm.gguf`: SentencePiece, 32,000 tokens (Llama 2,
    /// TinyLlama).
    LlamaSpm,
    /// `ggml-vocab-llama-bpe.gguf`: byte-level BPE, 128,256 tokens (Llama 3).
    LlamaBpe,
    /// `ggml-vocab-qwen2.gguf`: byte-level BPE, 151,936 tokens (Qwen2 and
    /// Qwen3).
    Qwen2,
}

impl Vocab {
    /// The file name inside the vocabulary directory.
    pub const fn file_name(self) -> &'static str {
        match self {
            Vocab::LlamaSpm => "ggml-vocab-llama-spm.gguf",
            Vocab::LlamaBpe => "ggml-vocab-llama-bpe.gguf",
            Vocab::Qwen2 => "ggml-vocab-qwen2.gguf",
        }
    }

    /// The number of tokens in the file (`tokenizer.ggml.tokens`); checked
    /// against the file when a model is written.
    pub const fn token_count(self) -> usize {
        match self {
            Vocab::LlamaSpm => 32_000,
            Vocab::LlamaBpe => 128_256,
            Vocab::Qwen2 => 151_936,
        }
    }
}

/// The hyperparameters of a generated model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// The vocabulary the model's tokenizer keys come from.
    pub vocab: Vocab,
    /// Tokens in the vocabulary: rows of `token_embd.weight`.
    pub n_vocab: usize,
    /// Width of the residual stream.
    pub n_embd: usize,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (fewer than `n_head`: grouped-query attention).
    pub n_head_kv: usize,
    /// Width of one attention head (keys, values and RoPE'd dimensions).
    pub head_dim: usize,
    /// Hidden width of the SwiGLU feed-forward network.
    pub n_ff: usize,
    /// Training context length (`{arch}.context_length`).
    pub n_ctx: usize,
    /// RoPE frequency base.
    pub rope_base: f32,
    /// Epsilon of every RMSNorm.
    pub rms_eps: f32,
    /// True when the output layer reuses `token_embd.weight` (no
    /// `output.weight` tensor).
    pub tied_embeddings: bool,
    /// True when Q, K and V have biases (Qwen2).
    pub qkv_bias: bool,
    /// True when each Q and K head is RMS-normalised before RoPE (Qwen3).
    pub qk_norm: bool,
}

impl Shape {
    /// The shape of `arch` at `preset`.
    ///
    /// * `tiny`: 2 layers, width 256, 4 query heads and 2 KV heads of 64,
    ///   feed-forward 512, context 512. Llama uses the 32,000-token
    ///   SentencePiece vocabulary and an untied output layer; Qwen2 ties the
    ///   output to the embeddings; Qwen3 does not.
    /// * `1b`: Llama-3.2-1B: 16 layers, width 2048, 32 query heads and 8 KV
    ///   heads of 64, feed-forward 8192, context 4096, tied embeddings. Llama
    ///   uses the Llama 3 vocabulary and RoPE base 500,000; Qwen2/Qwen3 the
    ///   Qwen2 vocabulary and RoPE base 1,000,000.
    pub const fn of(arch: Arch, preset: Preset) -> Shape {
        let vocab = match (arch, preset) {
            (Arch::Llama, Preset::Tiny) => Vocab::LlamaSpm,
            (Arch::Llama, Preset::OneB) => Vocab::LlamaBpe,
            (Arch::Qwen2 | Arch::Qwen3, _) => Vocab::Qwen2,
        };
        let rope_base = match (arch, preset) {
            (Arch::Llama, Preset::Tiny) => 10_000.0,
            (Arch::Llama, Preset::OneB) => 500_000.0,
            (Arch::Qwen2 | Arch::Qwen3, _) => 1_000_000.0,
        };
        let rms_eps = match arch {
            Arch::Llama => 1e-5,
            Arch::Qwen2 | Arch::Qwen3 => 1e-6,
        };
        let tied_embeddings = match preset {
            Preset::Tiny => matches!(arch, Arch::Qwen2),
            Preset::OneB => true,
        };
        let (n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx) = match preset {
            Preset::Tiny => (256, 2, 4, 2, 512, 512),
            Preset::OneB => (2048, 16, 32, 8, 8192, 4096),
        };
        Shape {
            vocab,
            n_vocab: vocab.token_count(),
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            head_dim: 64,
            n_ff,
            n_ctx,
            rope_base,
            rms_eps,
            tied_embeddings,
            qkv_bias: matches!(arch, Arch::Qwen2),
            qk_norm: matches!(arch, Arch::Qwen3),
        }
    }

    /// Width of all query heads together (`n_head * head_dim`).
    pub const fn q_dim(&self) -> usize {
        self.n_head * self.head_dim
    }

    /// Width of all key (or value) heads together (`n_head_kv * head_dim`).
    pub const fn kv_dim(&self) -> usize {
        self.n_head_kv * self.head_dim
    }

    /// Number of weights in the model.
    pub const fn parameter_count(&self) -> u64 {
        let (d, f, q, kv) = (
            self.n_embd as u64,
            self.n_ff as u64,
            self.q_dim() as u64,
            self.kv_dim() as u64,
        );
        let mut per_layer = 2 * d + d * q + 2 * d * kv + q * d + 3 * d * f;
        if self.qkv_bias {
            per_layer += q + 2 * kv;
        }
        if self.qk_norm {
            per_layer += 2 * self.head_dim as u64;
        }
        let embeddings = self.n_vocab as u64 * d;
        let output = if self.tied_embeddings { 0 } else { embeddings };
        embeddings + output + d + self.n_layer as u64 * per_layer
    }
}
