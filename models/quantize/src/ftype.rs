//! The file types (llama.cpp's `llama_ftype`): a target type or a mix.

use std::fmt;
use std::str::FromStr;

use backplane_abi::DType;

/// What a quantized file is made of: one target type, or one of llama.cpp's
/// mixes (`_S`/`_M`/`_L`) that give some tensors more bits.
///
/// [`FileType::code`] is llama.cpp's `llama_ftype` value, written to the
/// output's `general.file_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum FileType {
    /// Every tensor f32.
    F32,
    /// 2-D weights f16, 1-D tensors as they are.
    F16,
    /// 2-D weights bf16, 1-D tensors as they are.
    BF16,
    /// 2-D weights q8_0.
    Q8_0,
    /// 2-D weights q4_0, output q6_K.
    Q4_0,
    /// 2-D weights q4_1, output q6_K.
    Q4_1,
    /// 2-D weights q5_0, output q6_K.
    Q5_0,
    /// 2-D weights q5_1, output q6_K.
    Q5_1,
    /// Mostly q2_K, with q3_K/q4_K for the sensitive tensors.
    Q2_K,
    /// Mostly q3_K (small mix).
    Q3_K_S,
    /// Mostly q3_K (medium mix: attn_v, ffn_down and attn_output get more bits).
    Q3_K_M,
    /// Mostly q3_K (large mix).
    Q3_K_L,
    /// Mostly q4_K (small mix).
    Q4_K_S,
    /// Mostly q4_K, half of attn_v and ffn_down q6_K.
    Q4_K_M,
    /// Mostly q5_K (small mix).
    Q5_K_S,
    /// Mostly q5_K, half of attn_v and ffn_down q6_K.
    Q5_K_M,
    /// 2-D weights q6_K.
    Q6_K,
}

impl FileType {
    /// Every file type, in llama.cpp's code order.
    pub const ALL: [FileType; 17] = [
        FileType::F32,
        FileType::F16,
        FileType::Q4_0,
        FileType::Q4_1,
        FileType::Q8_0,
        FileType::Q5_0,
        FileType::Q5_1,
        FileType::Q2_K,
        FileType::Q3_K_S,
        FileType::Q3_K_M,
        FileType::Q3_K_L,
        FileType::Q4_K_S,
        FileType::Q4_K_M,
        FileType::Q5_K_S,
        FileType::Q5_K_M,
        FileType::Q6_K,
        FileType::BF16,
    ];

    /// llama.cpp's `llama_ftype` code (`general.file_type`).
    pub const fn code(self) -> u32 {
        match self {
            FileType::F32 => 0,
            FileType::F16 => 1,
            FileType::Q4_0 => 2,
            FileType::Q4_1 => 3,
            FileType::Q8_0 => 7,
            FileType::Q5_0 => 8,
            FileType::Q5_1 => 9,
            FileType::Q2_K => 10,
            FileType::Q3_K_S => 11,
            FileType::Q3_K_M => 12,
            FileType::Q3_K_L => 13,
            FileType::Q4_K_S => 14,
            FileType::Q4_K_M => 15,
            FileType::Q5_K_S => 16,
            FileType::Q5_K_M => 17,
            FileType::Q6_K => 18,
            FileType::BF16 => 32,
        }
    }

    /// The file type with llama.cpp code `code`, if this crate supports it.
    pub fn from_code(code: u32) -> Option<FileType> {
        FileType::ALL.into_iter().find(|t| t.code() == code)
    }

    /// llama.cpp's name for the type, as `llama-quantize` spells it (`"Q4_K_M"`).
    pub const fn name(self) -> &'static str {
        match self {
            FileType::F32 => "F32",
            FileType::F16 => "F16",
            FileType::BF16 => "BF16",
            FileType::Q8_0 => "Q8_0",
            FileType::Q4_0 => "Q4_0",
            FileType::Q4_1 => "Q4_1",
            FileType::Q5_0 => "Q5_0",
            FileType::Q5_1 => "Q5_1",
            FileType::Q2_K => "Q2_K",
            FileType::Q3_K_S => "Q3_K_S",
            FileType::Q3_K_M => "Q3_K_M",
            FileType::Q3_K_L => "Q3_K_L",
            FileType::Q4_K_S => "Q4_K_S",
            FileType::Q4_K_M => "Q4_K_M",
            FileType::Q5_K_S => "Q5_K_S",
            FileType::Q5_K_M => "Q5_K_M",
            FileType::Q6_K => "Q6_K",
        }
    }

    /// The type most 2-D weights get (llama.cpp's
    /// `llama_ftype_get_default_type`); the mixes change it per tensor.
    pub const fn default_type(self) -> DType {
        match self {
            FileType::F32 => DType::F32,
            FileType::F16 => DType::F16,
            FileType::BF16 => DType::BF16,
            FileType::Q8_0 => DType::Q8_0,
            FileType::Q4_0 => DType::Q4_0,
            FileType::Q4_1 => DType::Q4_1,
            FileType::Q5_0 => DType::Q5_0,
            FileType::Q5_1 => DType::Q5_1,
            FileType::Q2_K => DType::Q2_K,
            FileType::Q3_K_S | FileType::Q3_K_M | FileType::Q3_K_L => DType::Q3_K,
            FileType::Q4_K_S | FileType::Q4_K_M => DType::Q4_K,
            FileType::Q5_K_S | FileType::Q5_K_M => DType::Q5_K,
            FileType::Q6_K => DType::Q6_K,
        }
    }

    /// The names [`FileType::from_str`] accepts besides the type names
    /// (the aliases `llama-quantize` accepts).
    const ALIASES: [(&'static str, FileType); 3] = [
        ("Q3_K", FileType::Q3_K_M),
        ("Q4_K", FileType::Q4_K_M),
        ("Q5_K", FileType::Q5_K_M),
    ];

    /// The valid names, comma separated, for error messages.
    pub fn valid_names() -> String {
        let mut names: Vec<&str> = FileType::ALL.iter().map(|t| t.name()).collect();
        names.extend(FileType::ALIASES.iter().map(|(alias, _)| *alias));
        names.join(", ")
    }
}

impl Default for FileType {
    /// Q8_0: the known-good type when the caller does not choose.
    fn default() -> FileType {
        FileType::Q8_0
    }
}

impl fmt::Display for FileType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A file-type name that is neither a supported type nor an alias.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownFileType(pub String);

impl fmt::Display for UnknownFileType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown quantization type '{}': valid types are {} (or a llama_ftype number)",
            self.0,
            FileType::valid_names()
        )
    }
}

impl std::error::Error for UnknownFileType {}

impl FromStr for FileType {
    type Err = UnknownFileType;

    /// Parses llama.cpp's names case-insensitively (`q4_k_m`, `Q8_0`,
    /// `bf16`), its aliases (`Q4_K` = `Q4_K_M`), or a `llama_ftype` number.
    fn from_str(text: &str) -> Result<FileType, UnknownFileType> {
        let name = text.trim();
        if let Some(t) = FileType::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(name))
        {
            return Ok(t);
        }
        if let Some((_, t)) = FileType::ALIASES
            .iter()
            .find(|(alias, _)| alias.eq_ignore_ascii_case(name))
        {
            return Ok(*t);
        }
        name.parse::<u32>()
            .ok()
            .and_then(FileType::from_code)
            .ok_or_else(|| UnknownFileType(text.to_string()))
    }
}
