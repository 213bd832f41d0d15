//! [`GgufWriter`]: builds the header and tensor table, then streams tensor
//! data through a [`TensorStream`] one tensor at a time.

use std::io::Write;

use backplane_abi::DType;

use crate::error::GgufError;
use crate::parse::{ALIGNMENT_KEY, MAX_ARRAY_DEPTH, MAX_TENSOR_NAME_LEN, tensor_size_bytes};
use crate::reader::Gguf;
use crate::value::{Array, Value};
use crate::{DEFAULT_ALIGNMENT, GGUF_MAGIC, TensorInfo};

/// The version the writer produces unless told otherwise.
pub const WRITE_VERSION: u32 = 3;

/// Writes a GGUF v3 file in a streaming way: header and tables first, then
/// each tensor's bytes in order (never the whole model in memory).
#[derive(Clone, Debug)]
pub struct GgufWriter {
    /// 2 or 3.
    version: u32,
    metadata: Vec<(String, Value)>,
    tensors: Vec<TensorInfo>,
}

fn write_error(what: impl Into<String>, reason: impl Into<String>) -> GgufError {
    GgufError::Write {
        what: what.into(),
        reason: reason.into(),
    }
}

/// Largest data section the writer lays out.
const MAX_DATA: u64 = i64::MAX as u64;

/// `n` rounded up to a multiple of `alignment` (saturating).
fn align_up(n: u64, alignment: u64) -> u64 {
    n.div_ceil(alignment).saturating_mul(alignment)
}

impl Default for GgufWriter {
    fn default() -> GgufWriter {
        GgufWriter::new()
    }
}

impl GgufWriter {
    /// An empty file: version 3, alignment 32 until `general.alignment` is set.
    pub fn new() -> GgufWriter {
        GgufWriter {
            version: WRITE_VERSION,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// A writer holding `file`'s metadata (same order) and tensor table
    /// (same order, names, types and shapes); data is then streamed by the
    /// caller, e.g. from [`Gguf::tensor_data`].
    pub fn from_gguf(file: &Gguf) -> Result<GgufWriter, GgufError> {
        let mut w = GgufWriter::new();
        for (key, value) in file.metadata() {
            w.set(key.clone(), value.clone());
        }
        for t in file.tensors() {
            w.add_tensor(t.name.clone(), t.dtype, &t.ne[..t.n_dims as usize])?;
        }
        Ok(w)
    }

    /// Chooses the version written: 3 (the default) or 2, whose layout is
    /// the same for little-endian files (for rewriting old files exactly).
    pub fn set_version(&mut self, version: u32) -> Result<(), GgufError> {
        if !matches!(version, 2 | 3) {
            return Err(write_error(
                "header",
                format!("cannot write GGUF version {version}; only 2 and 3"),
            ));
        }
        self.version = version;
        Ok(())
    }

    /// The version that will be written.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Sets `key`: replaces an existing value in place, else appends.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<Value>) {
        let key = key.into();
        let value = value.into();
        let realign = key == ALIGNMENT_KEY;
        match self.metadata.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.metadata.push((key, value)),
        }
        if realign {
            self.layout();
        }
    }

    /// Removes `key` if present.
    pub fn remove(&mut self, key: &str) {
        self.metadata.retain(|(k, _)| k != key);
        if key == ALIGNMENT_KEY {
            self.layout();
        }
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// All key-value pairs, in the order they will be written.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    /// The data alignment: `general.alignment` when it is a valid u32 power
    /// of two, else 32 ([`GgufWriter::begin`] refuses an invalid one).
    pub fn alignment(&self) -> u64 {
        match self.get(ALIGNMENT_KEY) {
            Some(Value::U32(a)) if a.is_power_of_two() => u64::from(*a),
            _ => DEFAULT_ALIGNMENT,
        }
    }

    /// Adds a tensor entry; `ne` lists 1 to 4 positive dimensions in ggml
    /// order (`ne[0]` is the row length, a whole number of blocks).
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        dtype: DType,
        ne: &[i64],
    ) -> Result<(), GgufError> {
        let name = name.into();
        let what = || format!("tensor '{name}'");
        if name.len() > MAX_TENSOR_NAME_LEN {
            return Err(write_error(
                what(),
                format!(
                    "name is {} bytes; ggml allows at most {MAX_TENSOR_NAME_LEN}",
                    name.len()
                ),
            ));
        }
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(write_error(
                what(),
                "a tensor of that name was already added",
            ));
        }
        if !(1..=4).contains(&ne.len()) {
            return Err(write_error(
                what(),
                format!("{} dimensions; must be 1..=4", ne.len()),
            ));
        }
        if let Some(j) = ne.iter().position(|&d| d <= 0) {
            return Err(write_error(
                what(),
                format!("ne[{j}] is {}; dimensions must be positive", ne[j]),
            ));
        }
        let mut shape = [1i64; 4];
        shape[..ne.len()].copy_from_slice(ne);
        if shape
            .iter()
            .try_fold(1i64, |acc, &d| acc.checked_mul(d))
            .is_none()
        {
            return Err(write_error(
                what(),
                format!("element count of shape {ne:?} overflows i64"),
            ));
        }
        let size_bytes =
            tensor_size_bytes(dtype, &shape).map_err(|reason| write_error(what(), reason))?;
        // No file can be larger than i64::MAX bytes (seek offsets are i64);
        // this also keeps every offset sum below overflow.
        let end = self
            .data_size()
            .saturating_add(align_up(size_bytes.min(MAX_DATA), self.alignment()));
        if size_bytes > MAX_DATA || end > MAX_DATA {
            return Err(write_error(
                what(),
                format!("{size_bytes} bytes would take the data section past i64::MAX bytes"),
            ));
        }
        self.tensors.push(TensorInfo {
            name,
            dtype,
            n_dims: ne.len() as u32,
            ne: shape,
            offset: 0,
            size_bytes,
        });
        self.layout();
        Ok(())
    }

    /// The tensor table, with offsets as they will be written.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// Bytes of the data section: every tensor and its padding.
    pub fn data_size(&self) -> u64 {
        let alignment = self.alignment();
        self.tensors.last().map_or(0, |t| {
            t.offset.saturating_add(align_up(t.size_bytes, alignment))
        })
    }

    /// Assigns each tensor its aligned offset in the data section.
    fn layout(&mut self) {
        let alignment = self.alignment();
        let mut offset = 0u64;
        for t in &mut self.tensors {
            t.offset = offset;
            offset = offset.saturating_add(align_up(t.size_bytes, alignment));
        }
    }

    /// Checks the metadata the reader would refuse: empty or duplicate keys
    /// (impossible through `set`), a bad alignment, too deep arrays.
    fn validate(&self) -> Result<(), GgufError> {
        if let Some(v) = self.get(ALIGNMENT_KEY) {
            match v {
                Value::U32(a) if a.is_power_of_two() => {}
                other => {
                    return Err(write_error(
                        ALIGNMENT_KEY,
                        format!("must be a u32 non-zero power of two, is {other:?}"),
                    ));
                }
            }
        }
        for (key, value) in &self.metadata {
            if key.is_empty() {
                return Err(write_error("metadata", "a key is empty"));
            }
            if let Value::Array(a) = value
                && array_depth(a) > MAX_ARRAY_DEPTH
            {
                return Err(write_error(
                    format!("key '{key}'"),
                    format!("arrays nest deeper than {MAX_ARRAY_DEPTH} levels"),
                ));
            }
        }
        Ok(())
    }

    /// The header, metadata and tensor table, without the padding after them.
    pub fn header_bytes(&self) -> Result<Vec<u8>, GgufError> {
        self.validate()?;
        let mut buf = Vec::new();
        buf.extend_from_slice(&GGUF_MAGIC);
        buf.extend_from_slice(&self.version().to_le_bytes());
        buf.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        buf.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            put_str(&mut buf, key);
            buf.extend_from_slice(&value.type_code().to_le_bytes());
            put_value(&mut buf, value);
        }
        for t in &self.tensors {
            put_str(&mut buf, &t.name);
            buf.extend_from_slice(&t.n_dims.to_le_bytes());
            for d in &t.ne[..t.n_dims as usize] {
                buf.extend_from_slice(&d.to_le_bytes());
            }
            buf.extend_from_slice(&t.dtype.code().to_le_bytes());
            buf.extend_from_slice(&t.offset.to_le_bytes());
        }
        Ok(buf)
    }

    /// Total size of the file [`GgufWriter::begin`] will write.
    pub fn file_size(&self) -> Result<u64, GgufError> {
        let alignment = self.alignment();
        let header = self.header_bytes()?.len() as u64;
        let header = if self.tensors.is_empty() {
            header
        } else {
            align_up(header, alignment)
        };
        Ok(header.saturating_add(self.data_size()))
    }

    /// Writes header, metadata, tensor table and the padding before the data
    /// section (none when there are no tensors); the returned stream takes
    /// the tensors' bytes.
    pub fn begin<W: Write>(&self, mut out: W) -> Result<TensorStream<W>, GgufError> {
        let header = self.header_bytes()?;
        let alignment = self.alignment();
        out.write_all(&header)
            .map_err(|e| write_error("header", e.to_string()))?;
        // A file without tensors ends with its table, as llama.cpp's vocab
        // files do; otherwise the data section starts aligned.
        if !self.tensors.is_empty() {
            write_padding(&mut out, header.len() as u64, alignment)
                .map_err(|e| write_error("padding after the tensor table", e.to_string()))?;
        }
        Ok(TensorStream {
            out,
            tensors: self.tensors.clone(),
            next: 0,
            partial: 0,
            alignment,
        })
    }
}

/// Zero bytes from `written` up to the next multiple of `alignment`.
fn write_padding<W: Write>(out: &mut W, written: u64, alignment: u64) -> std::io::Result<()> {
    const ZEROS: [u8; 4096] = [0; 4096];
    let mut pad = align_up(written, alignment) - written;
    while pad > 0 {
        let n = pad.min(ZEROS.len() as u64);
        out.write_all(&ZEROS[..n as usize])?;
        pad -= n;
    }
    Ok(())
}

fn array_depth(a: &Array) -> u32 {
    match a {
        Array::Array(inner) => 1 + inner.iter().map(array_depth).max().unwrap_or(0),
        _ => 1,
    }
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
    buf.extend_from_slice(s.as_bytes());
}

fn put_value(buf: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U8(v) => buf.push(*v),
        Value::I8(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::U16(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::I16(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::U32(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::I32(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::U64(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::F32(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::F64(v) => buf.extend_from_slice(&v.to_le_bytes()),
        Value::Bool(v) => buf.push(u8::from(*v)),
        Value::String(s) => put_str(buf, s),
        Value::Array(a) => put_array(buf, a),
    }
}

fn put_array(buf: &mut Vec<u8>, a: &Array) {
    buf.extend_from_slice(&a.element_type_code().to_le_bytes());
    buf.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! each_le {
        ($v:expr) => {
            for x in $v {
                buf.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match a {
        Array::U8(v) => buf.extend_from_slice(v),
        Array::I8(v) => each_le!(v),
        Array::U16(v) => each_le!(v),
        Array::I16(v) => each_le!(v),
        Array::U32(v) => each_le!(v),
        Array::I32(v) => each_le!(v),
        Array::U64(v) => each_le!(v),
        Array::I64(v) => each_le!(v),
        Array::F32(v) => each_le!(v),
        Array::F64(v) => each_le!(v),
        Array::Bool(v) => buf.extend(v.iter().map(|&b| u8::from(b))),
        Array::String(v) => v.iter().for_each(|s| put_str(buf, s)),
        Array::Array(v) => v.iter().for_each(|inner| put_array(buf, inner)),
    }
}

/// The data half of a file being written: takes each tensor's bytes in the
/// order the tensors were added, whole or in parts.
pub struct TensorStream<W: Write> {
    out: W,
    tensors: Vec<TensorInfo>,
    next: usize,
    /// Bytes of tensor `next` written so far.
    partial: u64,
    alignment: u64,
}

impl<W: Write> TensorStream<W> {
    /// The entry of tensor `next`, checked to be called `name`.
    fn expect(&self, name: &str) -> Result<&TensorInfo, GgufError> {
        let Some(expected) = self.tensors.get(self.next) else {
            return Err(write_error(
                format!("tensor '{name}'"),
                format!("all {} tensors are already written", self.tensors.len()),
            ));
        };
        if expected.name != name {
            return Err(write_error(
                format!("tensor '{name}'"),
                format!(
                    "expected tensor[{}] '{}' next: tensors must be written in the order they were added",
                    self.next, expected.name
                ),
            ));
        }
        Ok(expected)
    }

    /// Writes the next tensor's bytes (exactly its `size_bytes`) and the
    /// padding after them. Tensors must come in the order they were added.
    pub fn write_tensor(&mut self, name: &str, bytes: &[u8]) -> Result<(), GgufError> {
        let expected = self.expect(name)?;
        if self.partial != 0 || bytes.len() as u64 != expected.size_bytes {
            return Err(write_error(
                format!("tensor '{name}'"),
                format!(
                    "got {} bytes (after {} already written), the {} tensor of shape {:?} takes {}",
                    bytes.len(),
                    self.partial,
                    expected.dtype,
                    expected.shape(),
                    expected.size_bytes
                ),
            ));
        }
        self.write_tensor_part(name, bytes)
    }

    /// Writes the next part of tensor `name`'s bytes (e.g. a run of rows);
    /// when its `size_bytes` are complete the padding follows and the
    /// stream moves on to the next tensor.
    pub fn write_tensor_part(&mut self, name: &str, bytes: &[u8]) -> Result<(), GgufError> {
        let expected = self.expect(name)?;
        let size = expected.size_bytes;
        let total = self.partial + bytes.len() as u64;
        if total > size {
            return Err(write_error(
                format!("tensor '{name}'"),
                format!(
                    "{} bytes after {} already written exceed its size of {size} bytes",
                    bytes.len(),
                    self.partial
                ),
            ));
        }
        let io = |e: std::io::Error| write_error(format!("tensor '{name}'"), e.to_string());
        self.out.write_all(bytes).map_err(io)?;
        self.partial = total;
        if total == size {
            write_padding(&mut self.out, size, self.alignment).map_err(io)?;
            self.next += 1;
            self.partial = 0;
        }
        Ok(())
    }

    /// The tensors completely written so far.
    pub fn written(&self) -> usize {
        self.next
    }

    /// Flushes and returns the output; fails if any tensor is missing or
    /// only partly written.
    pub fn finish(mut self) -> Result<W, GgufError> {
        if let Some(missing) = self.tensors.get(self.next) {
            return Err(write_error(
                "tensor data",
                format!(
                    "{} of {} tensors written; tensor[{}] '{}' is missing ({} of {} bytes written)",
                    self.next,
                    self.tensors.len(),
                    self.next,
                    missing.name,
                    self.partial,
                    missing.size_bytes
                ),
            ));
        }
        self.out
            .flush()
            .map_err(|e| write_error("tensor data", format!("flush: {e}")))?;
        Ok(self.out)
    }
}
