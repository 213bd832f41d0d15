//! What to generate: architecture, size preset, weight type and seed.

use std::fmt;
use std::str::FromStr;

use backplane_quant::DType;

/// A model architecture, named as llama.cpp names it in
/// `general.architecture`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Llama 2 / Llama 3: RMSNorm, RoPE, grouped-query attention, SwiGLU.
    Llama,
    /// Qwen2: Llama's layout plus biases on the Q, K and V projections.
    Qwen2,
    /// Qwen3: Llama's layout plus RMSNorm over each Q and K head.
    Qwen3,
}

impl Arch {
    /// Every architecture.
    pub const ALL: [Arch; 3] = [Arch::Llama, Arch::Qwen2, Arch::Qwen3];

    /// llama.cpp's name (`general.architecture` and the key prefix).
    pub const fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Arch {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Arch::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown architecture {s:?} (expected llama, qwen2 or qwen3)"))
    }
}

/// A size preset (see [`crate::Shape::of`] for the numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Preset {
    /// Two layers of width 256: for tests, generated in milliseconds.
    Tiny,
    /// Llama-3.2-1B's dimensions (about 1.2 billion parameters).
    OneB,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 2] = [Preset::Tiny, Preset::OneB];

    /// The name used on the command line (`tiny`, `1b`).
    pub const fn name(self) -> &'static str {
        match self {
            Preset::Tiny => "tiny",
            Preset::OneB => "1b",
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown preset {s:?} (expected tiny or 1b)"))
    }
}

/// The file type of a model: the type of its 2-D weights, named and coded as
/// llama.cpp's `llama_ftype`. 1-D tensors (norms, biases) stay f32 in every
/// file type, as in llama.cpp. The mixed types (`Q4_K_M`, ...) give
/// different tensors different types, chosen by llama.cpp's rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum WeightType {
    /// Every tensor f32 (`LLAMA_FTYPE_ALL_F32`).
    F32,
    /// 2-D weights f16.
    F16,
    /// 2-D weights bf16.
    BF16,
    /// 2-D weights q8_0.
    Q8_0,
    /// 2-D weights q4_0 (output layer q6_K, as llama.cpp quantizes it).
    Q4_0,
    /// 2-D weights q4_1 (output layer q6_K).
    Q4_1,
    /// 2-D weights q5_0 (output layer q6_K).
    Q5_0,
    /// 2-D weights q5_1 (output layer q6_K).
    Q5_1,
    /// llama.cpp's q2_K mix.
    Q2_K,
    /// llama.cpp's q3_K_S mix.
    Q3_K_S,
    /// llama.cpp's q3_K_M mix.
    Q3_K_M,
    /// llama.cpp's q3_K_L mix.
    Q3_K_L,
    /// llama.cpp's q4_K_S mix.
    Q4_K_S,
    /// llama.cpp's q4_K_M mix.
    Q4_K_M,
    /// llama.cpp's q5_K_S mix.
    Q5_K_S,
    /// llama.cpp's q5_K_M mix.
    Q5_K_M,
    /// llama.cpp's q6_K type.
    Q6_K,
}

impl WeightType {
    /// Every weight type, floats first.
    pub const ALL: [WeightType; 17] = [
        WeightType::F32,
        WeightType::F16,
        WeightType::BF16,
        WeightType::Q8_0,
        WeightType::Q4_0,
        WeightType::Q4_1,
        WeightType::Q5_0,
        WeightType::Q5_1,
        WeightType::Q2_K,
        WeightType::Q3_K_S,
        WeightType::Q3_K_M,
        WeightType::Q3_K_L,
        WeightType::Q4_K_S,
        WeightType::Q4_K_M,
        WeightType::Q5_K_S,
        WeightType::Q5_K_M,
        WeightType::Q6_K,
    ];

    /// The name used on the command line and by llama.cpp's quantize tool
    /// (`f16`, `q8_0`, `q4_K_M`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            WeightType::F32 => "f32",
            WeightType::F16 => "f16",
            WeightType::BF16 => "bf16",
            WeightType::Q8_0 => "q8_0",
            WeightType::Q4_0 => "q4_0",
            WeightType::Q4_1 => "q4_1",
            WeightType::Q5_0 => "q5_0",
            WeightType::Q5_1 => "q5_1",
            WeightType::Q2_K => "q2_K",
            WeightType::Q3_K_S => "q3_K_S",
            WeightType::Q3_K_M => "q3_K_M",
            WeightType::Q3_K_L => "q3_K_L",
            WeightType::Q4_K_S => "q4_K_S",
            WeightType::Q4_K_M => "q4_K_M",
            WeightType::Q5_K_S => "q5_K_S",
            WeightType::Q5_K_M => "q5_K_M",
            WeightType::Q6_K => "q6_K",
        }
    }

    /// llama.cpp's `llama_ftype` code, stored as `general.file_type`.
    pub const fn ftype_code(self) -> u32 {
        match self {
            WeightType::F32 => 0,
            WeightType::F16 => 1,
            WeightType::Q4_0 => 2,
            WeightType::Q4_1 => 3,
            WeightType::Q8_0 => 7,
            WeightType::Q5_0 => 8,
            WeightType::Q5_1 => 9,
            WeightType::Q2_K => 10,
            WeightType::Q3_K_S => 11,
            WeightType::Q3_K_M => 12,
            WeightType::Q3_K_L => 13,
            WeightType::Q4_K_S => 14,
            WeightType::Q4_K_M => 15,
            WeightType::Q5_K_S => 16,
            WeightType::Q5_K_M => 17,
            WeightType::Q6_K => 18,
            WeightType::BF16 => 32,
        }
    }

    /// The element type of every 2-D weight when the file type is a plain
    /// float (f32, f16, bf16); `None` for quantized file types, whose
    /// per-tensor types llama.cpp's quantizer decides.
    pub const fn float_dtype(self) -> Option<DType> {
        match self {
            WeightType::F32 => Some(DType::F32),
            WeightType::F16 => Some(DType::F16),
            WeightType::BF16 => Some(DType::BF16),
            _ => None,
        }
    }

    /// True for the block-quantized file types.
    pub const fn is_quantized(self) -> bool {
        self.float_dtype().is_none()
    }
}

impl fmt::Display for WeightType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for WeightType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        WeightType::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<&str> = WeightType::ALL.iter().map(|t| t.name()).collect();
                format!(
                    "unknown weight type {s:?} (expected one of {})",
                    names.join(", ")
                )
            })
    }
}

/// Everything that determines a generated model: the same spec gives the
/// same file, byte for byte, on any machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ModelSpec {
    /// The architecture.
    pub arch: Arch,
    /// The size preset.
    pub preset: Preset,
    /// The file type.
    pub dtype: WeightType,
    /// Seed of the weights. Every tensor's values depend only on the seed
    /// and the tensor's name, so the f16 model is the f32 model rounded.
    pub seed: u64,
}

impl ModelSpec {
    /// The default seed of the command line.
    pub const DEFAULT_SEED: u64 = 0;

    /// The `general.name` of the generated file, e.g.
    /// `backplane-testmodel llama tiny f16 seed 0`.
    pub fn general_name(&self) -> String {
        format!(
            "backplane-testmodel {} {} {} seed {}",
            self.arch, self.preset, self.dtype, self.seed
        )
    }

    /// A file name for the model, e.g. `llama-tiny-f16-s0.gguf`.
    pub fn file_name(&self) -> String {
        format!(
            "{}-{}-{}-s{}.gguf",
            self.arch, self.preset, self.dtype, self.seed
        )
    }
}
