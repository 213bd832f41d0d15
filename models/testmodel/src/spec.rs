//! What to generate: architecture, size preset, file type and seed.

use std::fmt;
use std::str::FromStr;

use backplane_quant::DType;
use backplane_quantize::FileType;

/// The member of `all` whose name is `text` (ignoring case), or an error
/// naming what was asked for and listing the names.
fn parse_by_name<T: Copy>(
    all: &[T],
    name: fn(T) -> &'static str,
    what: &str,
    text: &str,
) -> Result<T, String> {
    all.iter()
        .copied()
        .find(|&t| name(t).eq_ignore_ascii_case(text))
        .ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|&t| name(t)).collect();
            format!(
                "unknown {what} {text:?} (expected one of {})",
                names.join(", ")
            )
        })
}

/// `Display` (the name) and `FromStr` (a name, ignoring case) for an enum
/// with `ALL` and `name()`.
macro_rules! display_and_parse_by_name {
    ($ty:ident, $what:literal) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $ty {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                parse_by_name(&$ty::ALL, $ty::name, $what, s)
            }
        }
    };
}

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

display_and_parse_by_name!(Arch, "architecture");

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

display_and_parse_by_name!(Preset, "preset");

/// How the names of generated models spell a file type: llama.cpp's name
/// with its first part (up to the first `_`) in lower case (`f16`, `q8_0`,
/// `q4_K_M`), the spelling of `cargo xtask make-model --type`.
///
/// It is part of `general.name` and of [`ModelSpec::file_name`], so it
/// must not change: the recorded llama.cpp references name their files'
/// SHA-256.
pub fn type_label(dtype: FileType) -> String {
    let name = dtype.name();
    let first = name.find('_').unwrap_or(name.len());
    format!("{}{}", name[..first].to_ascii_lowercase(), &name[first..])
}

/// The element type of every 2-D weight when the file type is a plain
/// float (f32, f16, bf16); `None` for the quantized file types, whose
/// per-tensor types llama.cpp's rules decide.
pub(crate) fn float_dtype(dtype: FileType) -> Option<DType> {
    match dtype {
        FileType::F32 | FileType::F16 | FileType::BF16 => Some(dtype.default_type()),
        _ => None,
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
    /// The file type: the type of its 2-D weights, or one of llama.cpp's
    /// mixes (1-D tensors stay f32 in every file type, as in llama.cpp).
    pub dtype: FileType,
    /// Seed of the weights. Every tensor's values depend only on the seed
    /// and the tensor's name, so the f16 model is the f32 model rounded.
    pub seed: u64,
}

impl ModelSpec {
    /// The default seed of the command line.
    pub const DEFAULT_SEED: u64 = 0;

    /// The tiny preset of `arch` in `dtype` with the default seed: the
    /// models the tests run.
    pub const fn tiny(arch: Arch, dtype: FileType) -> ModelSpec {
        ModelSpec {
            arch,
            preset: Preset::Tiny,
            dtype,
            seed: ModelSpec::DEFAULT_SEED,
        }
    }

    /// The `general.name` of the generated file, e.g.
    /// `backplane-testmodel llama tiny f16 seed 0`.
    pub fn general_name(&self) -> String {
        format!(
            "backplane-testmodel {} {} {} seed {}",
            self.arch,
            self.preset,
            type_label(self.dtype),
            self.seed
        )
    }

    /// A file name for the model, e.g. `llama-tiny-f16-s0.gguf`.
    pub fn file_name(&self) -> String {
        format!(
            "{}-{}-{}-s{}.gguf",
            self.arch,
            self.preset,
            type_label(self.dtype),
            self.seed
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_labels_keep_the_spelling_of_generated_names_and_parse_back() {
        let labels: Vec<String> = FileType::ALL.into_iter().map(type_label).collect();
        assert_eq!(
            labels,
            [
                "f32", "f16", "q4_0", "q4_1", "q8_0", "q5_0", "q5_1", "q2_K", "q3_K_S", "q3_K_M",
                "q3_K_L", "q4_K_S", "q4_K_M", "q5_K_S", "q5_K_M", "q6_K", "bf16",
            ]
        );
        for t in FileType::ALL {
            assert_eq!(type_label(t).parse::<FileType>(), Ok(t));
        }
    }

    #[test]
    fn only_the_float_file_types_have_one_weight_dtype() {
        assert_eq!(float_dtype(FileType::F32), Some(DType::F32));
        assert_eq!(float_dtype(FileType::F16), Some(DType::F16));
        assert_eq!(float_dtype(FileType::BF16), Some(DType::BF16));
        let quantized = FileType::ALL
            .into_iter()
            .filter(|&t| float_dtype(t).is_none())
            .count();
        assert_eq!(quantized, FileType::ALL.len() - 3);
    }

    #[test]
    fn unknown_names_are_refused_listing_the_known_ones() {
        assert_eq!("QWEN3".parse::<Arch>(), Ok(Arch::Qwen3));
        assert_eq!("1B".parse::<Preset>(), Ok(Preset::OneB));
        assert_eq!(
            "mistral".parse::<Arch>(),
            Err("unknown architecture \"mistral\" (expected one of llama, qwen2, qwen3)".into())
        );
        assert_eq!(
            "huge".parse::<Preset>(),
            Err("unknown preset \"huge\" (expected one of tiny, 1b)".into())
        );
    }

    #[test]
    fn names_spell_the_type_in_lower_case_but_the_k_mix() {
        let spec = ModelSpec {
            seed: 3,
            ..ModelSpec::tiny(Arch::Llama, FileType::Q4_K_M)
        };
        assert_eq!(spec.file_name(), "llama-tiny-q4_K_M-s3.gguf");
        assert_eq!(
            spec.general_name(),
            "backplane-testmodel llama tiny q4_K_M seed 3"
        );
    }
}
