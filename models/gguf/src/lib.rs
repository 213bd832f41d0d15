//! GGUF files: a memory-mapped, zero-copy reader and a streaming writer.
//!
//! # Format support
//!
//! * GGUF versions 2 and 3, little-endian (version 1 and byte-swapped,
//!   big-endian files are refused with an error that says so).
//! * All thirteen metadata value types, including arrays of arrays (up to
//!   eight levels deep).
//! * Tensor types: every [`DType`] (ggml type ids); other ggml types (the IQ
//!   formats, TQ, MXFP4, ...) are refused with an error naming the tensor
//!   and the type code.
//! * `general.alignment` (a u32 non-zero power of two) or 32.
//!
//! # Guarantees on hostile input
//!
//! Parsing never panics and never allocates from an unchecked count: each
//! count and length is checked against the bytes left in the file before
//! anything is reserved for it, so memory use is a small multiple of the
//! file's size. Checks follow ggml's loader: unique non-empty keys, unique
//! tensor names under 64 bytes, 1 to 4 positive dimensions whose element
//! count fits in i64, rows that are whole blocks, tensor offsets that are
//! aligned, data that lies inside the file and does not overlap; every
//! string is valid UTF-8. Tensor data may come in any order and with gaps
//! (ggml's loader wants it packed in table order; this writer always packs
//! it). A bool byte other than 0 reads as true, as in ggml. Every error names the field (`kv[12]
//! 'tokenizer.ggml.tokens' value[1041]`, `tensor[3] 'output.weight' ne[1]`)
//! and its byte offset.
//!
//! # Zero copy
//!
//! [`Gguf::open`] maps the file read-only and parses only the header,
//! metadata and tensor table; [`Gguf::tensor_data`] hands out slices of the
//! map, so the data section is read only when those slices are touched.
//!
//! # Writing
//!
//! [`GgufWriter`] collects metadata and a tensor table, then
//! [`GgufWriter::begin`] writes the header and returns a [`TensorStream`]
//! that takes each tensor's bytes in turn, so a model never has to be whole
//! in memory. Files come out as version 3, laid out as ggml lays them out:
//! the data section and every tensor start aligned, and each tensor is
//! padded with zeros to the alignment. A file without tensors ends right
//! after its tables, like llama.cpp's vocab files, which the writer
//! reproduces byte for byte.
//!
//! ```
//! use backplane_gguf::{DType, Gguf, GgufWriter};
//!
//! let mut writer = GgufWriter::new();
//! writer.set("general.architecture", "llama");
//! writer.set("llama.context_length", 4096u32);
//! writer.add_tensor("token_embd.weight", DType::F32, &[4, 2])?;
//! let mut stream = writer.begin(Vec::new())?;
//! stream.write_tensor("token_embd.weight", &[0u8; 32])?;
//! let bytes = stream.finish()?;
//!
//! let file = Gguf::from_bytes(bytes)?;
//! assert_eq!(file.get_str("general.architecture")?, "llama");
//! assert_eq!(file.get_u32("llama.context_length")?, 4096);
//! let embd = file.tensor("token_embd.weight").unwrap();
//! assert_eq!((embd.ne, embd.size_bytes), ([4, 2, 1, 1], 32));
//! assert_eq!(file.tensor_data(embd), &[0u8; 32]);
//! # Ok::<(), backplane_gguf::GgufError>(())
//! ```

mod error;
mod parse;
mod reader;
mod value;
mod write;

pub use backplane_abi::DType;
pub use error::GgufError;
pub use parse::{ALIGNMENT_KEY, MAX_ARRAY_DEPTH, MAX_TENSOR_NAME_LEN};
pub use reader::Gguf;
pub use value::{Array, Value, type_code, type_code_name};
pub use write::{GgufWriter, TensorStream, WRITE_VERSION};

/// The four bytes every GGUF file starts with.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// The data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// One tensor's entry in the file's tensor table.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// The tensor's name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// The element type.
    pub dtype: DType,
    /// Number of dimensions as stored (1..=4).
    pub n_dims: u32,
    /// Element counts, unused dimensions 1 (ggml order: `ne[0]` is the row length).
    pub ne: [i64; 4],
    /// Byte offset relative to the start of the data section.
    pub offset: u64,
    /// `dtype.row_size(ne[0]) * ne[1] * ne[2] * ne[3]`.
    pub size_bytes: u64,
}

impl TensorInfo {
    /// Number of elements.
    pub fn n_elements(&self) -> u64 {
        // Checked at parse/add time to fit in i64; saturates for hand-made entries.
        self.ne
            .iter()
            .fold(1u64, |acc, &d| acc.saturating_mul(d.max(0) as u64))
    }

    /// The stored dimensions, `ne[..n_dims]`.
    pub fn shape(&self) -> &[i64] {
        &self.ne[..self.n_dims as usize]
    }
}
