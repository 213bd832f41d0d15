//! The one error type of the crate: every variant names what it is about
//! (the file, the metadata key, the tensor, the op or backend call).

use std::path::PathBuf;

/// Loading or running a model failed.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The model file could not be opened or parsed.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A metadata key the architecture needs is absent.
    #[error("{path}: metadata key '{key}' is missing")]
    MissingKey {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
    },
    /// A metadata key has the wrong type or a value that does not fit the rest.
    #[error("{path}: metadata key '{key}': expected {expected}, found {found}")]
    BadKey {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// What was expected.
        expected: String,
        /// What the file holds.
        found: String,
    },
    /// A tensor the architecture needs is absent.
    #[error("{path}: tensor '{name}' is missing")]
    MissingTensor {
        /// The file.
        path: PathBuf,
        /// The tensor's GGUF name.
        name: String,
    },
    /// A tensor has the wrong shape, type or data size.
    #[error("{path}: tensor '{name}': expected {expected}, found {found}")]
    BadTensor {
        /// The file.
        path: PathBuf,
        /// The tensor's GGUF name.
        name: String,
        /// What was expected.
        expected: String,
        /// What the file holds.
        found: String,
    },
    /// The file's architecture is not one this crate builds.
    #[error("{path}: architecture '{arch}' is not supported (llama, qwen2, qwen3 are)")]
    UnsupportedArch {
        /// The file.
        path: PathBuf,
        /// `general.architecture`.
        arch: String,
    },
    /// No device matches the request.
    #[error("device '{requested}': {reason}")]
    Device {
        /// What was asked for (`cpu`, `webgpu`, `auto`, ...).
        requested: String,
        /// Why it cannot be used; lists the devices that exist.
        reason: String,
    },
    /// Building a graph failed (a bug or an inconsistent model).
    #[error("building the {what} graph: {source}")]
    Graph {
        /// Which graph (`"decode, 256 keys"`).
        what: String,
        /// The op's error.
        source: backplane::GraphError,
    },
    /// The scheduler or a backend failed.
    #[error("{what}: {source}")]
    Sched {
        /// What was being done.
        what: String,
        /// The scheduler's error.
        source: backplane::sched::SchedError,
    },
    /// The tokenizer failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The context window is full.
    #[error("context full: {used} tokens in the cache + {adding} new exceed n_ctx = {n_ctx}")]
    ContextFull {
        /// Tokens already in the KV cache.
        used: usize,
        /// Tokens being added.
        adding: usize,
        /// Cache size.
        n_ctx: usize,
    },
    /// A caller-supplied value is out of range (token id, empty batch, ...).
    #[error("{0}")]
    Input(String),
}

impl LlmError {
    pub(crate) fn sched(what: impl Into<String>, source: backplane::sched::SchedError) -> LlmError {
        LlmError::Sched {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn graph(what: impl Into<String>, source: backplane::GraphError) -> LlmError {
        LlmError::Graph {
            what: what.into(),
            source,
        }
    }
}
