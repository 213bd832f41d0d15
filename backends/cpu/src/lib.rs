//! The CPU backend of backplane: runs whole graphs on host memory.
//!
//! Every op is implemented; mat-mul and quantized dot products pick SIMD
//! kernels at run time (AVX2, AVX-512, NEON, scalar fallback) and all heavy
//! ops split their rows over a persistent thread pool.
//!
//! The backend sees a graph as [`TensorDesc`]s in topological order plus one
//! data pointer per tensor; it knows nothing of the host's graph type.

mod buffer;
mod error;
mod exec;
pub mod ops;
pub mod plugin;
mod pool;
pub mod repack;
pub mod simd;

pub use error::CpuError;
pub use exec::{CpuBackend, CpuConfig};
pub use ops::NodeCtx;

pub use backplane_abi::TensorDesc;
