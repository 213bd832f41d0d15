//! Where a model's metadata and tensor bytes come from: a GGUF file (see
//! [`crate::Model::load`]) or, for tests and hosts that build models in
//! memory, a [`MemoryModel`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use backplane::DType;

/// One metadata value, as far as the hyper-parameters need it.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    /// Any integer type.
    Int(i64),
    /// f32 or f64.
    Float(f64),
    /// A string.
    Str(String),
    /// A bool.
    Bool(bool),
    /// Anything else (an array...), by its type name.
    Other(String),
}

impl MetaValue {
    /// `"u32 4096"`, `"string \"llama\""`: for error messages.
    pub fn describe(&self) -> String {
        match self {
            MetaValue::Int(v) => format!("integer {v}"),
            MetaValue::Float(v) => format!("float {v}"),
            MetaValue::Str(s) => format!("string {s:?}"),
            MetaValue::Bool(b) => format!("bool {b}"),
            MetaValue::Other(t) => t.clone(),
        }
    }
}

/// A tensor's type, shape and bytes (borrowed: a memory map's slice).
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    /// Element type.
    pub dtype: DType,
    /// Shape, ggml order (ne0 fastest), padded with ones.
    pub ne: [i64; 4],
    /// The tensor's bytes.
    pub data: &'a [u8],
}

/// Metadata and tensors of a model.
pub trait ModelSource {
    /// The file (or a label) named in errors.
    fn path(&self) -> &Path;
    /// A metadata value by key.
    fn meta(&self, key: &str) -> Option<MetaValue>;
    /// A tensor by its GGUF name.
    fn tensor(&self, name: &str) -> Option<TensorRef<'_>>;
}

/// A model held in memory: metadata and owned tensor bytes.
#[derive(Clone, Debug, Default)]
pub struct MemoryModel {
    label: PathBuf,
    meta: HashMap<String, MetaValue>,
    tensors: HashMap<String, (DType, [i64; 4], Vec<u8>)>,
}

impl MemoryModel {
    /// An empty model; `label` stands for the path in errors.
    pub fn new(label: impl Into<PathBuf>) -> MemoryModel {
        MemoryModel {
            label: label.into(),
            ..MemoryModel::default()
        }
    }

    /// Sets a metadata value.
    pub fn set_meta(&mut self, key: impl Into<String>, value: MetaValue) {
        self.meta.insert(key.into(), value);
    }

    /// Removes a metadata key.
    pub fn remove_meta(&mut self, key: &str) {
        self.meta.remove(key);
    }

    /// Adds (or replaces) a tensor; `ne` may have 1 to 4 dims.
    pub fn set_tensor(&mut self, name: impl Into<String>, dtype: DType, ne: &[i64], data: Vec<u8>) {
        let mut ne4 = [1i64; 4];
        for (d, &n) in ne4.iter_mut().zip(ne) {
            *d = n;
        }
        self.tensors.insert(name.into(), (dtype, ne4, data));
    }

    /// Removes a tensor.
    pub fn remove_tensor(&mut self, name: &str) {
        self.tensors.remove(name);
    }
}

impl ModelSource for MemoryModel {
    fn path(&self) -> &Path {
        &self.label
    }

    fn meta(&self, key: &str) -> Option<MetaValue> {
        self.meta.get(key).cloned()
    }

    fn tensor(&self, name: &str) -> Option<TensorRef<'_>> {
        self.tensors.get(name).map(|(dtype, ne, data)| TensorRef {
            dtype: *dtype,
            ne: *ne,
            data,
        })
    }
}
