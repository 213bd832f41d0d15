//! [`Gguf`]: an opened file with its metadata and tensor table.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::TensorInfo;
use crate::error::GgufError;
use crate::parse::parse;
use crate::value::{Array, Value};

/// Where the file's bytes live.
enum Storage {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        }
    }
}

/// An opened GGUF file: metadata and tensor table parsed, tensor data
/// memory-mapped (zero-copy).
pub struct Gguf {
    storage: Storage,
    path: Option<PathBuf>,
    version: u32,
    alignment: u64,
    data_offset: u64,
    metadata: Vec<(String, Value)>,
    value_offsets: Vec<u64>,
    key_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

impl std::fmt::Debug for Gguf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gguf")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("file_size", &self.file_size())
            .field("metadata", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

impl Gguf {
    /// Maps the file read-only and parses its header, metadata and tensor
    /// table; the data section is not read.
    pub fn open(path: impl AsRef<Path>) -> Result<Gguf, GgufError> {
        let path = path.as_ref();
        let io = |source| GgufError::Io {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let storage = if len == 0 {
            Storage::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only. Like every mmap-based reader we
            // rely on nobody truncating or rewriting the file while it is
            // open; the bytes are treated as untrusted either way.
            Storage::Mapped(unsafe { Mmap::map(&file) }.map_err(io)?)
        };
        Gguf::build(storage, Some(path.to_owned()))
    }

    /// Parses a file held in memory (tests, fuzzing, downloads).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Gguf, GgufError> {
        Gguf::build(Storage::Owned(bytes), None)
    }

    fn build(storage: Storage, path: Option<PathBuf>) -> Result<Gguf, GgufError> {
        let p = parse(storage.bytes())?;
        Ok(Gguf {
            storage,
            path,
            version: p.version,
            alignment: p.alignment,
            data_offset: p.data_offset,
            metadata: p.metadata,
            value_offsets: p.value_offsets,
            key_index: p.key_index,
            tensors: p.tensors,
            tensor_index: p.tensor_index,
        })
    }

    /// The path given to [`Gguf::open`]; `None` for [`Gguf::from_bytes`].
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The format version: 2 or 3.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data alignment: `general.alignment`, or 32.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// File offset where the tensor data section starts.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Size of the whole file in bytes.
    pub fn file_size(&self) -> u64 {
        self.storage.bytes().len() as u64
    }

    /// The whole file (mapped or owned).
    pub fn bytes(&self) -> &[u8] {
        self.storage.bytes()
    }

    /// All key-value pairs, in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.key_index.get(key).map(|&i| &self.metadata[i].1)
    }

    /// File offset where the value of `key` starts, if present.
    pub fn value_offset(&self, key: &str) -> Option<u64> {
        self.key_index.get(key).map(|&i| self.value_offsets[i])
    }

    fn require(&self, key: &str) -> Result<&Value, GgufError> {
        self.get(key).ok_or_else(|| GgufError::MissingKey {
            key: key.to_owned(),
        })
    }

    fn wrong(key: &str, expected: &'static str, found: &Value) -> GgufError {
        GgufError::WrongType {
            key: key.to_owned(),
            expected,
            found: found.type_name(),
        }
    }

    fn integer<T: TryFrom<i128>>(&self, key: &str, expected: &'static str) -> Result<T, GgufError> {
        let value = self.require(key)?;
        let wide = value
            .as_i128()
            .ok_or_else(|| Gguf::wrong(key, expected, value))?;
        T::try_from(wide).map_err(|_| GgufError::Invalid {
            field: format!("key '{key}'"),
            offset: self.value_offset(key).unwrap_or(0),
            reason: format!(
                "{} value {wide} does not fit in {expected}",
                value.type_name()
            ),
        })
    }

    /// An integer value of any GGUF integer type that fits in u32.
    pub fn get_u32(&self, key: &str) -> Result<u32, GgufError> {
        self.integer(key, "u32")
    }

    /// An integer value of any GGUF integer type that fits in u64.
    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        self.integer(key, "u64")
    }

    /// An integer value of any GGUF integer type that fits in i32.
    pub fn get_i32(&self, key: &str) -> Result<i32, GgufError> {
        self.integer(key, "i32")
    }

    /// An f32 value, or an f64 value rounded to f32.
    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        let value = self.require(key)?;
        value.as_f32().ok_or_else(|| Gguf::wrong(key, "f32", value))
    }

    /// A bool value.
    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        let value = self.require(key)?;
        value
            .as_bool()
            .ok_or_else(|| Gguf::wrong(key, "bool", value))
    }

    /// A string value.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        let value = self.require(key)?;
        value
            .as_str()
            .ok_or_else(|| Gguf::wrong(key, "string", value))
    }

    /// An array value of any element type.
    pub fn get_array(&self, key: &str) -> Result<&Array, GgufError> {
        let value = self.require(key)?;
        value
            .as_array()
            .ok_or_else(|| Gguf::wrong(key, "array", value))
    }

    /// An array of strings.
    pub fn get_str_array(&self, key: &str) -> Result<&[String], GgufError> {
        match self.require(key)? {
            Value::Array(Array::String(v)) => Ok(v),
            other => Err(Gguf::wrong(key, "array<string>", other)),
        }
    }

    /// An array of f32.
    pub fn get_f32_array(&self, key: &str) -> Result<&[f32], GgufError> {
        match self.require(key)? {
            Value::Array(Array::F32(v)) => Ok(v),
            other => Err(Gguf::wrong(key, "array<f32>", other)),
        }
    }

    /// An array of i32.
    pub fn get_i32_array(&self, key: &str) -> Result<&[i32], GgufError> {
        match self.require(key)? {
            Value::Array(Array::I32(v)) => Ok(v),
            other => Err(Gguf::wrong(key, "array<i32>", other)),
        }
    }

    /// The tensor table, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor called `name` (a hash lookup).
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// The tensor's bytes: a zero-copy slice of the map, `size_bytes` long.
    ///
    /// Every entry of [`Gguf::tensors`] was checked to lie inside the file;
    /// a `TensorInfo` that does not (one from another file) gets an empty
    /// slice.
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        let range = (|| {
            let start = usize::try_from(self.data_offset.checked_add(t.offset)?).ok()?;
            let end = start.checked_add(usize::try_from(t.size_bytes).ok()?)?;
            Some(start..end)
        })();
        range.and_then(|r| self.bytes().get(r)).unwrap_or(&[])
    }
}
