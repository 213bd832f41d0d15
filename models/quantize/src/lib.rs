//! Turns a GGUF model into a quantized one with llama.cpp's choices and bytes.
//!
//! [`quantize_file`] reads a model (f32, f16 or bf16 weights; quantized ones
//! only with [`QuantizeParams::requantize`]), picks each tensor's type as
//! llama.cpp's `llama_model_quantize` does for the chosen [`FileType`]
//! (which tensors stay as they are, which get more bits in the `_M` mixes,
//! the fallbacks for rows that do not split into whole blocks: see
//! [`plan`]), quantizes the rows with ggml's reference quantizers (in
//! `backplane-quant`) on a thread pool, and writes the tensors in llama.cpp's
//! order with its metadata (`general.file_type`,
//! `general.quantization_version`). The tensor bytes equal llama.cpp's; the
//! tests check that against references made by llama.cpp itself.
//!
//! The output is written to `OUT.tmp-<pid>` next to `OUT`, synced, and
//! renamed over `OUT` only when complete: a failed run leaves no partial
//! model behind. Tensors stream one at a time, so memory stays at about one
//! tensor's output (plus the memory-mapped input).
//!
//! ```no_run
//! use backplane_quantize::{quantize_file, FileType, QuantizeParams};
//! use std::path::Path;
//!
//! let params = QuantizeParams { ftype: "q4_k_m".parse::<FileType>()?, ..Default::default() };
//! let summary = quantize_file(
//!     Path::new("model-f16.gguf"),
//!     Path::new("model-q4_k_m.gguf"),
//!     &params,
//!     &mut |p| eprintln!("[{}/{}] {} {} -> {}", p.index + 1, p.count, p.name, p.from, p.to),
//! )?;
//! println!("{} -> {} bytes in {:.1} s", summary.bytes_in, summary.bytes_out, summary.seconds);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod choose;
mod file;
mod ftype;
mod kernels;
mod validate;

use std::path::PathBuf;

pub use backplane_abi::DType;
pub use choose::{
    Category, ModelInfo, TensorPlan, allows_quantization, fallback_type, llama_order, plan,
    tensor_type,
};
pub use file::quantize_file;
pub use ftype::{FileType, UnknownFileType};

/// `general.quantization_version` as llama.cpp writes it (ggml's
/// `GGML_QNT_VERSION`).
pub const QUANTIZATION_VERSION: u32 = 2;

/// How to quantize (llama.cpp's `llama_model_quantize_params`, the parts
/// this crate supports).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantizeParams {
    /// The target type or mix.
    pub ftype: FileType,
    /// Allow converting tensors that are already quantized (llama.cpp's
    /// `allow_requantize`; off: such a tensor is an error).
    pub requantize: bool,
    /// Quantize `output.weight` too (llama.cpp's `quantize_output_tensor`;
    /// `--leave-output-tensor` turns it off and keeps the tensor as it is).
    pub quantize_output: bool,
    /// Worker threads; 0 means one per core.
    pub threads: usize,
    /// Give every quantized tensor the mix's default type, without the
    /// per-tensor rules (llama.cpp's `--pure`; the fallbacks still apply).
    pub pure: bool,
}

impl Default for QuantizeParams {
    /// Q8_0, no requantizing, output quantized, all cores, mixed.
    fn default() -> QuantizeParams {
        QuantizeParams {
            ftype: FileType::default(),
            requantize: false,
            quantize_output: true,
            threads: 0,
            pure: false,
        }
    }
}

/// Reported after each tensor is written.
#[derive(Clone, Copy, Debug)]
pub struct Progress<'a> {
    /// 0-based position of the tensor in the output.
    pub index: usize,
    /// Number of tensors.
    pub count: usize,
    /// The tensor's name.
    pub name: &'a str,
    /// Its input type.
    pub from: DType,
    /// Its output type (equal to `from` when copied).
    pub to: DType,
    /// Its bytes in the output.
    pub bytes: u64,
}

/// What a run did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// Tensors written.
    pub tensors: usize,
    /// Tensors converted to another type (the rest were copied).
    pub quantized: usize,
    /// Size of the input file in bytes.
    pub bytes_in: u64,
    /// Size of the output file in bytes.
    pub bytes_out: u64,
    /// Wall-clock time of the run.
    pub seconds: f64,
}

/// Why a model could not be quantized; every variant names the file or
/// tensor it is about.
#[derive(Debug, thiserror::Error)]
pub enum QuantizeError {
    /// The input could not be opened or parsed.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The input path.
        path: PathBuf,
        /// What the GGUF reader said.
        source: backplane_gguf::GgufError,
    },
    /// A tensor is already quantized and requantizing is off.
    #[error(
        "tensor '{tensor}' is already quantized ({from}); requantizing to {to} is disabled \
         (llama.cpp refuses it too: allow it with requantize / --allow-requantize, at a loss of quality)"
    )]
    AlreadyQuantized {
        /// The tensor.
        tensor: String,
        /// Its type in the input.
        from: DType,
        /// The type it would get.
        to: DType,
    },
    /// A tensor's type cannot be converted (integer tensors).
    #[error("tensor '{tensor}' of type {from} cannot be converted to {to}")]
    Unsupported {
        /// The tensor.
        tensor: String,
        /// Its type in the input.
        from: DType,
        /// The type it would get.
        to: DType,
    },
    /// The model's metadata or tensor names break a rule of the type choice.
    #[error("{reason}")]
    Model {
        /// What is wrong.
        reason: String,
    },
    /// Quantized output failed llama.cpp's validation (NaN or infinite
    /// scales, from NaN or infinite weights).
    #[error(
        "tensor '{tensor}': quantized data validation failed at {what} (NaN or infinite values in the weights?)"
    )]
    Validation {
        /// The tensor.
        tensor: String,
        /// Which row and block.
        what: String,
    },
    /// The output could not be written (unwritable directory, disk full...).
    #[error("cannot write {}: {reason}", path.display())]
    Write {
        /// The file being written (the temporary file next to the output).
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// The worker thread pool could not be started.
    #[error("cannot start {threads} quantization threads: {reason}")]
    Threads {
        /// Threads asked for.
        threads: usize,
        /// What failed.
        reason: String,
    },
}
