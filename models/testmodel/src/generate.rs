//! Writing a model: metadata, then each tensor generated and written in turn.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use backplane_gguf::{GgufWriter, Value};
use backplane_quant::{DType, quantize_row};
use backplane_quantize::{FileType, QUANTIZATION_VERSION, QuantizeParams, quantize_file};
use rayon::prelude::*;

use crate::TestModelError;
use crate::shape::Shape;
use crate::spec::{ModelSpec, float_dtype};
use crate::tensors::{TensorPlan, plan};
use crate::vocab::{default_vocab_dir, tokenizer_keys};
use crate::weights::{fill, tensor_key};

/// The metadata key of llama.cpp's file type.
const FILE_TYPE_KEY: &str = "general.file_type";

/// Elements generated per parallel work item.
const CHUNK_ELEMENTS: usize = 1 << 16;

/// The phase a [`Progress`] report is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Generating weights and writing them (for quantized types: the f32
    /// model the quantizer reads).
    Generating,
    /// Quantizing the f32 model into the output.
    Quantizing,
}

/// A progress report: `done` of `total` units (tensor elements while
/// generating; the quantizer's units while quantizing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The phase.
    pub stage: Stage,
    /// Units finished.
    pub done: u64,
    /// Units in the phase.
    pub total: u64,
}

/// Where the vocabulary files are and who hears about progress.
pub struct WriteOptions<'a> {
    /// Directory holding llama.cpp's `ggml-vocab-*.gguf` files.
    pub vocab_dir: PathBuf,
    /// Called after each tensor (and by the quantizer as it goes).
    pub progress: Option<&'a (dyn Fn(Progress) + Sync)>,
}

impl Default for WriteOptions<'_> {
    /// The repository's `models/vocab/`, no progress reports.
    fn default() -> Self {
        WriteOptions {
            vocab_dir: default_vocab_dir(),
            progress: None,
        }
    }
}

/// Writes the model `spec` describes to `out` (see the crate documentation).
pub fn write_model(spec: &ModelSpec, out: &Path) -> Result<(), TestModelError> {
    write_model_with(spec, out, &WriteOptions::default())
}

/// [`write_model`] with a vocabulary directory and a progress callback.
///
/// The file appears at `out` only when complete: it is written under a
/// temporary name next to it and renamed. Quantized types also write the
/// f32 model to a temporary file next to `out`, removed afterwards.
pub fn write_model_with(
    spec: &ModelSpec,
    out: &Path,
    options: &WriteOptions<'_>,
) -> Result<(), TestModelError> {
    let shape = Shape::of(spec.arch, spec.preset);
    let tokenizer = tokenizer_keys(&options.vocab_dir, shape.vocab)?;
    match float_dtype(spec.dtype) {
        Some(dtype) => {
            let partial = sibling(out, "partial");
            let metadata = metadata(spec, &shape, tokenizer);
            let written = write_float(spec.seed, &shape, dtype, metadata, &partial, options);
            match written {
                Ok(()) => std::fs::rename(&partial, out).map_err(|source| TestModelError::Io {
                    what: "renaming the finished model to",
                    path: out.to_path_buf(),
                    source,
                }),
                Err(e) => {
                    remove_quietly(&partial);
                    Err(e)
                }
            }
        }
        None => {
            // The quantizer moves general.file_type to the end and adds
            // general.quantization_version, as llama.cpp's does.
            let master = sibling(out, "f32-master");
            let metadata = base_metadata(spec, &shape, tokenizer, FileType::F32);
            let result = write_float(spec.seed, &shape, DType::F32, metadata, &master, options)
                .and_then(|()| quantize(spec, &master, out, options));
            remove_quietly(&master);
            result
        }
    }
}

/// `dir/.name.what.tmp` for output `dir/name`.
fn sibling(out: &Path, what: &str) -> PathBuf {
    let name = out
        .file_name()
        .map_or_else(|| "model".into(), |n| n.to_string_lossy().into_owned());
    out.with_file_name(format!(".{name}.{what}.tmp"))
}

/// Removes a temporary file; a file that is already gone is fine.
fn remove_quietly(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// The metadata of the file `spec` describes, in order: `general.*`, the
/// architecture's hyperparameters and `general.file_type`, then the
/// vocabulary's tokenizer keys. Quantized files end with
/// `general.quantization_version` (2) and `general.file_type` instead, where
/// llama.cpp's quantizer puts them.
pub fn metadata(
    spec: &ModelSpec,
    shape: &Shape,
    tokenizer: Vec<(String, Value)>,
) -> Vec<(String, Value)> {
    if float_dtype(spec.dtype).is_some() {
        return base_metadata(spec, shape, tokenizer, spec.dtype);
    }
    let mut kv = base_metadata(spec, shape, tokenizer, FileType::F32);
    kv.retain(|(key, _)| key != FILE_TYPE_KEY);
    kv.push((
        "general.quantization_version".to_string(),
        Value::U32(QUANTIZATION_VERSION),
    ));
    kv.push((FILE_TYPE_KEY.to_string(), Value::U32(spec.dtype.code())));
    kv
}

/// The metadata of a float file of type `file_type` (for quantized specs:
/// the f32 model the quantizer reads).
fn base_metadata(
    spec: &ModelSpec,
    shape: &Shape,
    tokenizer: Vec<(String, Value)>,
    file_type: FileType,
) -> Vec<(String, Value)> {
    let arch = spec.arch.name();
    let key = |k: &str| format!("{arch}.{k}");
    let count = |n: usize| Value::U32(n as u32);
    let mut kv = vec![
        ("general.architecture".to_string(), Value::from(arch)),
        (
            "general.name".to_string(),
            Value::String(spec.general_name()),
        ),
        (key("block_count"), count(shape.n_layer)),
        (key("context_length"), count(shape.n_ctx)),
        (key("embedding_length"), count(shape.n_embd)),
        (key("feed_forward_length"), count(shape.n_ff)),
        (key("attention.head_count"), count(shape.n_head)),
        (key("attention.head_count_kv"), count(shape.n_head_kv)),
        (key("rope.freq_base"), Value::F32(shape.rope_base)),
        (
            key("attention.layer_norm_rms_epsilon"),
            Value::F32(shape.rms_eps),
        ),
    ];
    if shape.qk_norm {
        kv.push((key("attention.key_length"), count(shape.head_dim)));
        kv.push((key("attention.value_length"), count(shape.head_dim)));
    }
    kv.push((FILE_TYPE_KEY.to_string(), Value::U32(file_type.code())));
    kv.push((key("vocab_size"), count(shape.n_vocab)));
    kv.push((key("rope.dimension_count"), count(shape.head_dim)));
    kv.extend(tokenizer);
    kv
}

/// The storage type of a tensor in a float file: 2-D weights `dtype`,
/// 1-D tensors f32.
fn storage_type(tensor: &TensorPlan, dtype: DType) -> DType {
    if tensor.is_matrix() {
        dtype
    } else {
        DType::F32
    }
}

/// Writes a model whose 2-D weights are all `dtype` (f32, f16 or bf16).
fn write_float(
    seed: u64,
    shape: &Shape,
    dtype: DType,
    metadata: Vec<(String, Value)>,
    path: &Path,
    options: &WriteOptions<'_>,
) -> Result<(), TestModelError> {
    let gguf_err = |context: String| move |source| TestModelError::Gguf { context, source };
    let tensors = plan(shape);
    let mut writer = GgufWriter::new();
    for (key, value) in metadata {
        writer.set(key, value);
    }
    for t in &tensors {
        let dims: Vec<i64> = t.dims.iter().map(|&d| d as i64).collect();
        writer
            .add_tensor(&t.name, storage_type(t, dtype), &dims)
            .map_err(gguf_err(format!("declaring tensor '{}'", t.name)))?;
    }
    let file = File::create(path).map_err(|source| TestModelError::Io {
        what: "creating",
        path: path.to_path_buf(),
        source,
    })?;
    let mut stream = writer
        .begin(BufWriter::with_capacity(1 << 20, file))
        .map_err(gguf_err(format!(
            "writing the header of {}",
            path.display()
        )))?;
    let total: u64 = tensors.iter().map(|t| t.elements() as u64).sum();
    let mut done = 0u64;
    for t in &tensors {
        let bytes = tensor_bytes(seed, t, storage_type(t, dtype))?;
        stream
            .write_tensor(&t.name, &bytes)
            .map_err(gguf_err(format!("writing tensor '{}'", t.name)))?;
        done += t.elements() as u64;
        if let Some(progress) = options.progress {
            progress(Progress {
                stage: Stage::Generating,
                done,
                total,
            });
        }
    }
    stream
        .finish()
        .map_err(gguf_err(format!("finishing {}", path.display())))?;
    Ok(())
}

/// Generates one tensor's values and converts them to `dtype`, in parallel
/// over row ranges (each range draws its own part of the tensor's stream,
/// so the result does not depend on the split).
pub fn tensor_bytes(
    seed: u64,
    tensor: &TensorPlan,
    dtype: DType,
) -> Result<Vec<u8>, TestModelError> {
    let row_len = tensor.row_len();
    let row_bytes = dtype
        .row_size(row_len)
        .ok_or_else(|| TestModelError::Convert {
            tensor: tensor.name.clone(),
            source: backplane_quant::QuantError {
                dtype,
                kind: backplane_quant::QuantErrorKind::NotWholeBlocks {
                    len: row_len,
                    block_size: dtype.block_size(),
                },
            },
        })?;
    let key = tensor_key(seed, &tensor.name);
    let rows_per_chunk = (CHUNK_ELEMENTS / row_len).max(1);
    let mut bytes = vec![0u8; tensor.rows() * row_bytes];
    bytes
        .par_chunks_mut(rows_per_chunk * row_bytes)
        .enumerate()
        .try_for_each(|(chunk, out)| {
            let first_row = chunk * rows_per_chunk;
            let mut values = vec![0.0f32; out.len() / row_bytes * row_len];
            fill(key, tensor.init, (first_row * row_len) as u64, &mut values);
            quantize_row(dtype, &values, out).map_err(|source| TestModelError::Convert {
                tensor: tensor.name.clone(),
                source,
            })
        })?;
    Ok(bytes)
}

/// Quantizes the f32 model at `master` into `out` with llama.cpp's rules
/// for `spec.dtype` (the quantizer writes a temporary file and renames it).
fn quantize(
    spec: &ModelSpec,
    master: &Path,
    out: &Path,
    options: &WriteOptions<'_>,
) -> Result<(), TestModelError> {
    let quantize_err = |source| TestModelError::Quantize {
        path: out.to_path_buf(),
        dtype: spec.dtype,
        source,
    };
    let params = QuantizeParams {
        ftype: spec.dtype,
        ..Default::default()
    };
    let mut report = |p: &backplane_quantize::Progress<'_>| {
        if let Some(progress) = options.progress {
            progress(Progress {
                stage: Stage::Quantizing,
                done: p.index as u64 + 1,
                total: p.count as u64,
            });
        }
    };
    quantize_file(master, out, &params, &mut report)
        .map(|_summary| ())
        .map_err(quantize_err)
}
