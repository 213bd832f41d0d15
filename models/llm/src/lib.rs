//! Llama-family models (GGUF architectures `llama`, `qwen2`, `qwen3`) run
//! through backplane's graph builder and scheduler, on any backend that
//! passes conformance, as a host app would: only the public graph and
//! scheduler API.
//!
//! - [`Model::load`] reads a GGUF file, checks its hyper-parameters and
//!   tensors, places each weight on its device ([`LoadOptions::device`],
//!   [`LoadOptions::gpu_layers`]; several devices split the layers in
//!   contiguous ranges, [`Split`]) and copies it there straight from the
//!   memory map.
//! - [`Session`] holds a KV cache (f16, each layer's on that layer's
//!   device; released when the session drops) and runs forward graphs: prefill in ubatches of 512 tokens,
//!   decode one token at a time. Graphs are built once per shape; a decode
//!   graph's KV length is padded to a multiple of 256, so the scheduler's
//!   plan cache serves every step.
//! - [`Session::generate`] samples ([`Sampler`]: greedy at temperature 0).
//! - [`bench()`] measures prefill and decode speed like llama-bench.
//!
//! ```no_run
//! use backplane_llm::{LoadOptions, Logits, Model, Sampler};
//!
//! let model = Model::load("tinyllama.gguf", &LoadOptions::default())?;
//! let tok = model.tokenizer()?;
//! let prompt = tok.encode("Once upon a time", true, false).map_err(|e| e.to_string())?;
//! let mut session = model.session(2048)?;
//! let logits = session.eval(&prompt, Logits::Last)?;
//! assert_eq!(logits.len(), model.n_vocab());
//! session.reset();
//! let sampler = Sampler { temp: 0.8, seed: 1, ..Sampler::default() };
//! let generated = session.generate(&prompt, 32, &sampler, |t| {
//!     print!("{}", String::from_utf8_lossy(&tok.piece(t)));
//!     true
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod bench;
mod error;
mod gguf_file;
mod graph;
mod hparams;
mod model;
mod placement;
mod sample;
mod session;
mod source;
mod tok;
mod weights;

pub use bench::{BenchResult, HostCost, bench};
pub use error::LlmError;
pub use gguf_file::load_tokenizer;
pub use graph::Shape;
pub use hparams::{Arch, HParams};
pub use model::{LoadOptions, LoadProgress, Model};
pub use placement::{Placement, Split, SplitMode};
pub use sample::{Sampler, SamplerState, argmax};
pub use session::{KV_PAD, Logits, Session, UBATCH};
pub use source::{MemoryModel, MetaValue, ModelSource, TensorRef};
pub use tok::Tokenizer;
pub use weights::Role;
