//! The one error type of the crate.

use std::path::PathBuf;

/// Everything that can go wrong while reading or writing a GGUF file.
///
/// Every variant names what it is about: the file, the field and its byte
/// offset, the key, or the part of the output being written.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The file could not be opened, inspected or mapped.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A field runs past the end of the file.
    #[error("truncated: {field} at byte {offset} needs {need} bytes, file has {file_size}")]
    Truncated {
        /// The field being read, e.g. `kv[3] 'general.name' value`.
        field: String,
        /// File offset where the field starts.
        offset: u64,
        /// Bytes the field needs from `offset` on.
        need: u64,
        /// Size of the whole file.
        file_size: u64,
    },
    /// A field holds a value the format does not allow.
    #[error("{field} at byte {offset}: {reason}")]
    Invalid {
        /// The field concerned, e.g. `tensor[3] 'output.weight' ne[1]`.
        field: String,
        /// File offset of the field.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A metadata key a caller asked for is absent.
    #[error("missing metadata key '{key}'")]
    MissingKey {
        /// The key asked for.
        key: String,
    },
    /// A metadata key holds a value of another type than asked for.
    #[error("metadata key '{key}' holds {found}, expected {expected}")]
    WrongType {
        /// The key asked for.
        key: String,
        /// The type the caller asked for.
        expected: &'static str,
        /// The type the file holds.
        found: &'static str,
    },
    /// Writing a file failed, or the writer was used out of order.
    #[error("writing {what}: {reason}")]
    Write {
        /// What was being written (a tensor, the header, ...).
        what: String,
        /// Why it failed.
        reason: String,
    },
}
