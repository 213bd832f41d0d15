//! Hyper-parameters from GGUF metadata (`{arch}.*` keys), with llama.cpp's
//! defaults for the optional ones.

use backplane::rope_mode;

use crate::error::LlmError;
use crate::source::{MetaValue, ModelSource};

/// The architectures this crate builds graphs for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Llama 2/3, Mistral, TinyLlama: interleaved ("normal") RoPE.
    Llama,
    /// Qwen2: q/k/v biases, NEOX RoPE.
    Qwen2,
    /// Qwen3: per-head RMS norms on q and k before RoPE, NEOX RoPE.
    Qwen3,
}

impl Arch {
    /// Parses `general.architecture`.
    pub fn from_name(name: &str) -> Option<Arch> {
        match name {
            "llama" => Some(Arch::Llama),
            "qwen2" => Some(Arch::Qwen2),
            "qwen3" => Some(Arch::Qwen3),
            _ => None,
        }
    }

    /// The GGUF name (metadata key prefix).
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
        }
    }

    /// The [`rope_mode`] llama.cpp uses for the architecture.
    pub fn rope_mode(self) -> i32 {
        match self {
            Arch::Llama => rope_mode::NORMAL,
            Arch::Qwen2 | Arch::Qwen3 => rope_mode::NEOX,
        }
    }

    /// q/k/v projections carry biases.
    pub fn has_qkv_bias(self) -> bool {
        self == Arch::Qwen2
    }

    /// q and k get an RMS norm per head before RoPE.
    pub fn has_qk_norm(self) -> bool {
        self == Arch::Qwen3
    }
}

/// A model's shape and numeric constants.
#[derive(Clone, Debug, PartialEq)]
pub struct HParams {
    /// Architecture.
    pub arch: Arch,
    /// Vocabulary size (rows of `token_embd.weight`).
    pub n_vocab: usize,
    /// Embedding width.
    pub n_embd: usize,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (divides `n_head`).
    pub n_head_kv: usize,
    /// Width of one key (and query) head.
    pub head_dim: usize,
    /// Width of one value head.
    pub head_dim_v: usize,
    /// RMS norm epsilon.
    pub rms_eps: f32,
    /// RoPE frequency base.
    pub rope_freq_base: f32,
    /// RoPE position scale (1 / linear scaling factor).
    pub rope_freq_scale: f32,
    /// Dims of each head that rotate.
    pub rope_dims: usize,
    /// Training context length.
    pub n_ctx_train: usize,
}

impl HParams {
    /// Key width of all key/value heads together.
    pub fn n_embd_k_gqa(&self) -> usize {
        self.head_dim * self.n_head_kv
    }

    /// Value width of all key/value heads together.
    pub fn n_embd_v_gqa(&self) -> usize {
        self.head_dim_v * self.n_head_kv
    }

    /// Reads and checks the hyper-parameters of `src`; `n_vocab` comes from
    /// the token embedding's shape.
    pub fn from_source(src: &dyn ModelSource) -> Result<HParams, LlmError> {
        let m = Meta { src };
        let arch_name = m.string("general.architecture")?;
        let arch = Arch::from_name(&arch_name).ok_or_else(|| LlmError::UnsupportedArch {
            path: src.path().to_path_buf(),
            arch: arch_name.clone(),
        })?;
        let k = |s: &str| format!("{arch_name}.{s}");
        let n_embd = m.positive(&k("embedding_length"))?;
        let n_layer = m.positive(&k("block_count"))?;
        let n_ff = m.positive(&k("feed_forward_length"))?;
        let n_head = m.positive(&k("attention.head_count"))?;
        let n_head_kv = m
            .opt_positive(&k("attention.head_count_kv"))?
            .unwrap_or(n_head);
        if n_head % n_head_kv != 0 {
            return Err(m.bad(
                &k("attention.head_count_kv"),
                format!("a divisor of head_count {n_head}"),
                n_head_kv.to_string(),
            ));
        }
        if n_embd % n_head != 0 && m.src.meta(&k("attention.key_length")).is_none() {
            return Err(m.bad(
                &k("attention.head_count"),
                format!("a divisor of embedding_length {n_embd} (no key_length given)"),
                n_head.to_string(),
            ));
        }
        let head_dim = m
            .opt_positive(&k("attention.key_length"))?
            .unwrap_or(n_embd / n_head);
        let head_dim_v = m
            .opt_positive(&k("attention.value_length"))?
            .unwrap_or(head_dim);
        let rms_eps = m.float(&k("attention.layer_norm_rms_epsilon"))? as f32;
        if !(rms_eps >= 0.0 && rms_eps.is_finite()) {
            return Err(m.bad(
                &k("attention.layer_norm_rms_epsilon"),
                "a finite non-negative float".into(),
                rms_eps.to_string(),
            ));
        }
        let rope_freq_base = m.opt_float(&k("rope.freq_base"))?.unwrap_or(10000.0) as f32;
        let scaling = m
            .opt_string(&k("rope.scaling.type"))?
            .unwrap_or_else(|| "linear".into());
        if scaling != "linear" && scaling != "none" {
            return Err(m.bad(
                &k("rope.scaling.type"),
                "'none' or 'linear'".into(),
                format!("'{scaling}' (not supported)"),
            ));
        }
        let factor = m.opt_float(&k("rope.scaling.factor"))?.unwrap_or(0.0);
        let rope_freq_scale = if factor == 0.0 || scaling == "none" {
            1.0
        } else {
            (1.0 / factor) as f32
        };
        let rope_dims = m
            .opt_positive(&k("rope.dimension_count"))?
            .unwrap_or(head_dim);
        if rope_dims > head_dim || rope_dims % 2 != 0 {
            return Err(m.bad(
                &k("rope.dimension_count"),
                format!("an even count up to the head width {head_dim}"),
                rope_dims.to_string(),
            ));
        }
        let n_ctx_train = m.positive(&k("context_length"))?;
        let embd = src
            .tensor("token_embd.weight")
            .ok_or_else(|| LlmError::MissingTensor {
                path: src.path().to_path_buf(),
                name: "token_embd.weight".into(),
            })?;
        let n_vocab = usize::try_from(embd.ne[1]).unwrap_or(0);
        if embd.ne[0] != n_embd as i64 || n_vocab == 0 || embd.ne[2] != 1 || embd.ne[3] != 1 {
            return Err(LlmError::BadTensor {
                path: src.path().to_path_buf(),
                name: "token_embd.weight".into(),
                expected: format!("shape [{n_embd}, n_vocab]"),
                found: format!("{:?}", embd.ne),
            });
        }
        Ok(HParams {
            arch,
            n_vocab,
            n_embd,
            n_layer,
            n_ff,
            n_head,
            n_head_kv,
            head_dim,
            head_dim_v,
            rms_eps,
            rope_freq_base,
            rope_freq_scale,
            rope_dims,
            n_ctx_train,
        })
    }
}

/// Typed metadata lookups that name the key and file in their errors.
struct Meta<'a> {
    src: &'a dyn ModelSource,
}

impl Meta<'_> {
    fn missing(&self, key: &str) -> LlmError {
        LlmError::MissingKey {
            path: self.src.path().to_path_buf(),
            key: key.into(),
        }
    }

    fn bad(&self, key: &str, expected: String, found: String) -> LlmError {
        LlmError::BadKey {
            path: self.src.path().to_path_buf(),
            key: key.into(),
            expected,
            found,
        }
    }

    fn opt_positive(&self, key: &str) -> Result<Option<usize>, LlmError> {
        match self.src.meta(key) {
            None => Ok(None),
            Some(MetaValue::Int(v)) if v > 0 && v <= 1 << 31 => Ok(Some(v as usize)),
            Some(v) => Err(self.bad(key, "a positive integer".into(), v.describe())),
        }
    }

    fn positive(&self, key: &str) -> Result<usize, LlmError> {
        self.opt_positive(key)?.ok_or_else(|| self.missing(key))
    }

    fn opt_float(&self, key: &str) -> Result<Option<f64>, LlmError> {
        match self.src.meta(key) {
            None => Ok(None),
            Some(MetaValue::Float(v)) => Ok(Some(v)),
            Some(v) => Err(self.bad(key, "a float".into(), v.describe())),
        }
    }

    fn float(&self, key: &str) -> Result<f64, LlmError> {
        self.opt_float(key)?.ok_or_else(|| self.missing(key))
    }

    fn opt_string(&self, key: &str) -> Result<Option<String>, LlmError> {
        match self.src.meta(key) {
            None => Ok(None),
            Some(MetaValue::Str(s)) => Ok(Some(s)),
            Some(v) => Err(self.bad(key, "a string".into(), v.describe())),
        }
    }

    fn string(&self, key: &str) -> Result<String, LlmError> {
        self.opt_string(key)?.ok_or_else(|| self.missing(key))
    }
}
