//! Random-weight test models in llama.cpp's GGUF conventions.
//!
//! No model weights can be downloaded where this project is tested, so it
//! generates its own: Llama, Qwen2 and Qwen3 models with llama.cpp's
//! metadata keys, tensor names, shapes and types, the tokenizer of one of
//! llama.cpp's vocabulary test files (`models/vocab/`), and seeded random
//! weights scaled so that activations stay sane through the layers and
//! greedy decoding has clear winners.
//!
//! ```no_run
//! use backplane_testmodel::{Arch, FileType, ModelSpec, Preset, write_model};
//!
//! let spec = ModelSpec { arch: Arch::Qwen3, preset: Preset::Tiny, dtype: FileType::F16, seed: 0 };
//! write_model(&spec, std::path::Path::new("qwen3-tiny-f16.gguf")).unwrap();
//! ```
//!
//! Same spec, same bytes, on any machine: every value comes from a ChaCha8
//! stream keyed by the seed and the tensor's name through exact f32
//! operations (see [`weights`]). Quantized file types are made by writing
//! the f32 model to a temporary file and running llama.cpp's quantization
//! rules on it ([`backplane_quantize::quantize_file`]), so each tensor gets
//! the type `llama-quantize` would give it.

mod generate;
mod shape;
mod spec;
pub mod tensors;
mod vocab;
pub mod weights;

use std::path::PathBuf;

pub use backplane_quantize::FileType;
pub use generate::{Progress, Stage, WriteOptions, metadata, write_model, write_model_with};
pub use shape::{Shape, Vocab};
pub use spec::{Arch, ModelSpec, Preset, type_label};
pub use tensors::{TensorPlan, plan};
pub use vocab::{default_vocab_dir, is_tokenizer_key, tokenizer_keys};

/// Why a model could not be written.
#[derive(Debug, thiserror::Error)]
pub enum TestModelError {
    /// A file operation failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done (`creating`, `renaming`, ...).
        what: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// Reading or writing a GGUF file failed.
    #[error("{context}: {source}")]
    Gguf {
        /// What was being read or written.
        context: String,
        /// The GGUF library's error.
        source: backplane_gguf::GgufError,
    },
    /// A vocabulary file is not the one the presets assume.
    #[error("vocabulary {}: {reason}", path.display())]
    Vocab {
        /// The vocabulary file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A tensor could not be converted to its storage type.
    #[error("tensor '{tensor}': {source}")]
    Convert {
        /// The tensor's name.
        tensor: String,
        /// The conversion error.
        source: backplane_quant::QuantError,
    },
    /// Quantizing the f32 model failed.
    #[error("quantizing {} to {dtype}: {source}", path.display())]
    Quantize {
        /// The output file.
        path: PathBuf,
        /// The file type asked for.
        dtype: FileType,
        /// The quantizer's error.
        source: backplane_quantize::QuantizeError,
    },
}
