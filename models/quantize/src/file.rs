//! The file pipeline: read, plan, convert tensor by tensor on a thread pool,
//! write to a temporary file, sync and rename.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Instant;

use backplane_abi::DType;
use backplane_gguf::{Gguf, GgufWriter, TensorInfo, Value};
use rayon::prelude::*;

use crate::choose::{ModelInfo, TensorPlan, plan};
use crate::validate::first_invalid;
use crate::{Progress, QUANTIZATION_VERSION, QuantizeError, QuantizeParams, Summary};

/// Keys llama.cpp drops from the copied metadata (a quantized model is one file).
const SPLIT_KEYS: [&str; 3] = ["split.no", "split.count", "split.tensors.count"];

/// Keys llama.cpp rewrites; they move to the end of the metadata, in this order.
const REWRITTEN_KEYS: [&str; 2] = ["general.quantization_version", "general.file_type"];

/// Values converted per work item: enough to amortise scheduling, small
/// enough to balance rows across threads and keep the f32 scratch in cache.
const CHUNK_VALUES: usize = 32 * 1024;

/// Output buffer size between the tensor stream and the file.
const WRITE_BUFFER: usize = 1 << 20;

/// Quantizes the model at `input` into `output` (see the crate docs).
///
/// `progress` is called after each tensor is written. On error nothing is
/// left at `output` (an existing file there is untouched) and the temporary
/// file is removed.
pub fn quantize_file(
    input: &Path,
    output: &Path,
    params: &QuantizeParams,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Summary, QuantizeError> {
    let start = Instant::now();
    let model = Gguf::open(input).map_err(|source| QuantizeError::Read {
        path: input.to_path_buf(),
        source,
    })?;
    let info = ModelInfo::from_gguf(&model);
    let plans = plan(&info, model.tensors(), params)?;
    check_conversions(&plans, params)?;
    let writer = output_layout(&model, &plans, params)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(params.threads)
        .build()
        .map_err(|e| QuantizeError::Threads {
            threads: params.threads,
            reason: e.to_string(),
        })?;

    let temp = TempFile::create(output)?;
    let temp_path = temp.path.clone();
    let write_error = |reason: String| QuantizeError::Write {
        path: output.to_path_buf(),
        reason: format!("{reason} (temporary file {}, removed)", temp_path.display()),
    };
    let file = temp.file().map_err(|e| write_error(e.to_string()))?;
    let mut stream = writer
        .begin(BufWriter::with_capacity(WRITE_BUFFER, file))
        .map_err(|e| write_error(e.to_string()))?;
    let mut converted = Vec::new();
    let mut quantized = 0;
    for (index, p) in plans.iter().enumerate() {
        let tensor = &model.tensors()[p.index];
        let data = model.tensor_data(tensor);
        let bytes = if p.from == p.to {
            data
        } else {
            pool.install(|| convert(tensor, p.to, data, &mut converted))?;
            quantized += 1;
            converted.as_slice()
        };
        stream
            .write_tensor(&p.name, bytes)
            .map_err(|e| write_error(e.to_string()))?;
        progress(&Progress {
            index,
            count: plans.len(),
            name: &p.name,
            from: p.from,
            to: p.to,
            bytes: bytes.len() as u64,
        });
    }
    let buffered = stream.finish().map_err(|e| write_error(e.to_string()))?;
    let file = buffered
        .into_inner()
        .map_err(|e| write_error(e.error().to_string()))?;
    file.sync_all()
        .map_err(|e| write_error(format!("fsync: {e}")))?;
    drop(file);
    let bytes_out = temp.commit().map_err(|reason| QuantizeError::Write {
        path: output.to_path_buf(),
        reason,
    })?;
    Ok(Summary {
        tensors: plans.len(),
        quantized,
        bytes_in: model.file_size(),
        bytes_out,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Refuses conversions llama.cpp refuses, before anything is written:
/// quantized inputs without `requantize`, and integer tensors.
fn check_conversions(plans: &[TensorPlan], params: &QuantizeParams) -> Result<(), QuantizeError> {
    for p in plans.iter().filter(|p| p.from != p.to) {
        if p.from.is_quantized() && !params.requantize {
            return Err(QuantizeError::AlreadyQuantized {
                tensor: p.name.clone(),
                from: p.from,
                to: p.to,
            });
        }
        if !p.from.is_quantized() && !p.from.is_float() {
            return Err(QuantizeError::Unsupported {
                tensor: p.name.clone(),
                from: p.from,
                to: p.to,
            });
        }
    }
    Ok(())
}

/// Number of dimensions without trailing ones, as ggml writes them.
fn written_dims(ne: &[i64; 4]) -> usize {
    (1..4).rev().find(|&i| ne[i] > 1).map_or(1, |i| i + 1)
}

/// The output's metadata and tensor table, as llama.cpp lays them out: the
/// input's keys in order (less the split keys), then the quantization
/// version and file type; the tensors in the planned order.
fn output_layout(
    model: &Gguf,
    plans: &[TensorPlan],
    params: &QuantizeParams,
) -> Result<GgufWriter, QuantizeError> {
    let mut writer = GgufWriter::new();
    for (key, value) in model.metadata() {
        if !SPLIT_KEYS.contains(&key.as_str()) && !REWRITTEN_KEYS.contains(&key.as_str()) {
            writer.set(key.clone(), value.clone());
        }
    }
    writer.set(REWRITTEN_KEYS[0], Value::U32(QUANTIZATION_VERSION));
    writer.set(REWRITTEN_KEYS[1], Value::U32(params.ftype.code()));
    for p in plans {
        let ne = &model.tensors()[p.index].ne;
        writer
            .add_tensor(p.name.clone(), p.to, &ne[..written_dims(ne)])
            .map_err(|e| QuantizeError::Model {
                reason: format!("tensor '{}' as {}: {e}", p.name, p.to),
            })?;
    }
    Ok(writer)
}

/// Converts one tensor's bytes to `to` into `out` (resized to the output
/// size), in parallel over chunks of whole rows on the current pool.
fn convert(
    tensor: &TensorInfo,
    to: DType,
    data: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), QuantizeError> {
    let from = tensor.dtype;
    let name = &tensor.name;
    let bad_shape = || QuantizeError::Model {
        reason: format!(
            "tensor '{name}': rows of {} values do not split into {from} or {to} blocks",
            tensor.ne[0]
        ),
    };
    let ne0 = usize::try_from(tensor.ne[0]).map_err(|_| bad_shape())?;
    let src_row = from.row_size(ne0).ok_or_else(bad_shape)?;
    let dst_row = to.row_size(ne0).ok_or_else(bad_shape)?;
    if src_row == 0 || dst_row == 0 || !data.len().is_multiple_of(src_row) {
        return Err(bad_shape());
    }
    let rows = data.len() / src_row;
    let size = rows * dst_row;
    if out.len() < size {
        out.resize(size, 0);
    }
    out.truncate(size);
    let rows_per_chunk = (CHUNK_VALUES / ne0).max(1);
    out.par_chunks_mut(rows_per_chunk * dst_row)
        .zip(data.par_chunks(rows_per_chunk * src_row))
        .enumerate()
        .try_for_each_init(Vec::new, |values: &mut Vec<f32>, (chunk, (dst, src))| {
            let n_rows = src.len() / src_row;
            values.resize(n_rows * ne0, 0.0);
            let first_row = chunk * rows_per_chunk;
            let row_error = |e: backplane_quant::QuantError| QuantizeError::Model {
                reason: format!(
                    "tensor '{name}' rows {first_row}..{}: {e}",
                    first_row + n_rows
                ),
            };
            backplane_quant::dequantize_row(from, src, values).map_err(row_error)?;
            crate::kernels::quantize_rows(to, values, dst).map_err(row_error)?;
            match first_invalid(to, dst) {
                None => Ok(()),
                Some(at) => {
                    let per_row = dst_row / to.type_size();
                    Err(QuantizeError::Validation {
                        tensor: name.clone(),
                        what: format!(
                            "row {}, {} {}",
                            first_row + at / per_row,
                            if to.is_quantized() { "block" } else { "value" },
                            at % per_row
                        ),
                    })
                }
            }
        })
}

/// The output being written: `OUT.tmp-<pid>` next to `OUT`, removed on drop
/// unless committed.
struct TempFile {
    path: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl TempFile {
    /// Picks the temporary path for `output` (nothing is created yet).
    fn create(output: &Path) -> Result<TempFile, QuantizeError> {
        let name = output.file_name().ok_or_else(|| QuantizeError::Write {
            path: output.to_path_buf(),
            reason: "not a file path".into(),
        })?;
        let mut temp_name = name.to_os_string();
        temp_name.push(format!(".tmp-{}", std::process::id()));
        Ok(TempFile {
            path: output.with_file_name(temp_name),
            target: output.to_path_buf(),
            committed: false,
        })
    }

    /// Creates (or truncates) the temporary file.
    fn file(&self) -> std::io::Result<File> {
        File::create(&self.path)
    }

    /// Renames the finished file over the target and syncs the directory;
    /// returns the file's size.
    fn commit(mut self) -> Result<u64, String> {
        let size = std::fs::metadata(&self.path)
            .map_err(|e| format!("{}: {e}", self.path.display()))?
            .len();
        std::fs::rename(&self.path, &self.target)
            .map_err(|e| format!("renaming {} to it: {e}", self.path.display()))?;
        self.committed = true;
        if let Some(dir) = self.target.parent() {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            // Make the rename durable; some filesystems refuse to sync a
            // directory, which loses nothing already written.
            if let Ok(handle) = File::open(dir) {
                let _ = handle.sync_all();
            }
        }
        Ok(size)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
