//! GGUF files as a [`ModelSource`], and [`Model::load`].

use std::path::{Path, PathBuf};

use backplane_gguf::{Gguf, Value};

use crate::error::LlmError;
use crate::model::{LoadOptions, LoadProgress, Model};
use crate::placement::Split;
use crate::source::{MetaValue, ModelSource, TensorRef};
use crate::tok::Tokenizer;

/// An open GGUF file.
struct GgufSource {
    path: PathBuf,
    file: Gguf,
}

impl ModelSource for GgufSource {
    fn path(&self) -> &Path {
        &self.path
    }

    fn meta(&self, key: &str) -> Option<MetaValue> {
        Some(match self.file.get(key)? {
            Value::U8(v) => MetaValue::Int(i64::from(*v)),
            Value::I8(v) => MetaValue::Int(i64::from(*v)),
            Value::U16(v) => MetaValue::Int(i64::from(*v)),
            Value::I16(v) => MetaValue::Int(i64::from(*v)),
            Value::U32(v) => MetaValue::Int(i64::from(*v)),
            Value::I32(v) => MetaValue::Int(i64::from(*v)),
            Value::U64(v) => MetaValue::Int(i64::try_from(*v).unwrap_or(i64::MAX)),
            Value::I64(v) => MetaValue::Int(*v),
            Value::F32(v) => MetaValue::Float(f64::from(*v)),
            Value::F64(v) => MetaValue::Float(*v),
            Value::Bool(v) => MetaValue::Bool(*v),
            Value::String(s) => MetaValue::Str(s.clone()),
            Value::Array(_) => MetaValue::Other("an array".into()),
        })
    }

    fn tensor(&self, name: &str) -> Option<TensorRef<'_>> {
        let info = self.file.tensor(name)?;
        Some(TensorRef {
            dtype: info.dtype,
            ne: info.ne,
            data: self.file.tensor_data(info),
        })
    }
}

impl Model {
    /// Loads a GGUF model onto the devices `options` asks for.
    pub fn load(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Model, LlmError> {
        Model::load_with_progress(path, options, &mut |_| {})
    }

    /// [`Model::load`], reporting the weight upload through `progress`.
    pub fn load_with_progress(
        path: impl AsRef<Path>,
        options: &LoadOptions,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Model, LlmError> {
        Model::load_split(path, options, &Split::default(), progress)
    }

    /// [`Model::load_with_progress`] with the layers spread over the
    /// devices `options.device` lists as `split` says.
    pub fn load_split(
        path: impl AsRef<Path>,
        options: &LoadOptions,
        split: &Split,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Model, LlmError> {
        let path = path.as_ref().to_path_buf();
        let file = Gguf::open(&path).map_err(|e| LlmError::File {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let tokenizer = Tokenizer::from_gguf(&file).map_err(|e| LlmError::File {
            path: path.clone(),
            message: format!("tokenizer: {e}"),
        })?;
        let source = GgufSource { path, file };
        let mut model = Model::from_source_split(&source, options, split, progress)?;
        model.set_tokenizer(tokenizer);
        Ok(model)
    }
}

/// The tokenizer of a GGUF file, without loading its weights.
pub fn load_tokenizer(path: impl AsRef<Path>) -> Result<Tokenizer, LlmError> {
    let path = path.as_ref();
    let file = Gguf::open(path).map_err(|e| LlmError::File {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Tokenizer::from_gguf(&file).map_err(|e| LlmError::File {
        path: path.to_path_buf(),
        message: format!("tokenizer: {e}"),
    })
}
