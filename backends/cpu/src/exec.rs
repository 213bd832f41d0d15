//! Graph execution: the thread pool, and each node's context handed to
//! [`crate::ops::run`].

use std::sync::Mutex;

use backplane_abi::{MAX_SRC, Op, TensorDesc};

use crate::error::CpuError;
use crate::ops::{self, NodeCtx, SharedPtr};
use crate::pool::WorkerPool;

/// Settings of a [`CpuBackend`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuConfig {
    /// Worker threads; `None` means the number of physical cores.
    pub n_threads: Option<usize>,
}

/// The CPU backend: a thread pool and scratch memory reused across graphs.
pub struct CpuBackend {
    pool: WorkerPool,
    scratch: Mutex<Vec<u8>>,
}

impl CpuBackend {
    /// A backend with the given settings.
    pub fn new(config: CpuConfig) -> CpuBackend {
        let n_threads = config
            .n_threads
            .unwrap_or_else(num_cpus::get_physical)
            .max(1);
        let pool = WorkerPool::new(n_threads).expect("spawning CPU worker threads");
        CpuBackend {
            pool,
            scratch: Mutex::new(Vec::new()),
        }
    }

    /// Worker thread count.
    pub fn n_threads(&self) -> usize {
        self.pool.threads()
    }

    /// Whether the CPU can run `node` (with its sources in `graph`), and if
    /// not, why.
    pub fn supports(&self, graph: &[TensorDesc], node: usize) -> Result<(), String> {
        Self::supports_node(graph, node)
    }

    /// As [`CpuBackend::supports`], without a backend.
    pub fn supports_node(graph: &[TensorDesc], node: usize) -> Result<(), String> {
        let d = graph.get(node).ok_or("node out of range")?;
        let op = d.op().map_err(|e| e.to_string())?;
        let src = sources(graph, d).map_err(|e| e.to_string())?;
        ops::supports(op, d, &src)
    }

    /// Runs every compute node of `graph` in order.
    ///
    /// # Safety
    /// `data[i]` must point to memory valid for reads and writes of
    /// `graph[i].nbytes()` bytes for every tensor `i`, views pointing into
    /// their source's memory, and nothing else may access that memory
    /// during the call.
    pub unsafe fn compute(&self, graph: &[TensorDesc], data: &[*mut u8]) -> Result<(), CpuError> {
        // SAFETY: forwarded contract; nothing is repacked.
        unsafe { self.compute_with_layouts(graph, data, &[]) }
    }

    /// As [`CpuBackend::compute`], with `repacked[i]` telling that tensor
    /// `i` is in the repacked layout of [`crate::repack`] (missing entries:
    /// not). Only MUL_MAT reads that layout, as its weights; any other use
    /// is refused naming the node and tensor.
    ///
    /// # Safety
    /// As [`CpuBackend::compute`]; a repacked tensor's bytes must be in
    /// that layout.
    pub unsafe fn compute_with_layouts(
        &self,
        graph: &[TensorDesc],
        data: &[*mut u8],
        repacked: &[bool],
    ) -> Result<(), CpuError> {
        let is_repacked = |i: usize| repacked.get(i).copied().unwrap_or(false);
        if data.len() != graph.len() {
            return Err(CpuError::Malformed {
                node: 0,
                reason: format!("{} tensors but {} data pointers", graph.len(), data.len()),
            });
        }
        for (index, d) in graph.iter().enumerate() {
            let op = d.op().map_err(|e| CpuError::Malformed {
                node: index,
                reason: e.to_string(),
            })?;
            if op == Op::None || op.is_view() {
                continue;
            }
            let src_desc = sources(graph, d).map_err(|reason| CpuError::Malformed {
                node: index,
                reason,
            })?;
            let mut src_ptr = [SharedPtr(std::ptr::null_mut()); MAX_SRC];
            let mut src_repacked = [false; MAX_SRC];
            for (i, s) in d.src.iter().enumerate() {
                if *s >= 0 {
                    src_ptr[i] = SharedPtr(data[*s as usize]);
                    src_repacked[i] = is_repacked(*s as usize);
                }
            }
            let ctx = NodeCtx {
                index,
                op,
                dst: d,
                dst_ptr: SharedPtr(data[index]),
                src: src_desc,
                src_ptr,
                pool: &self.pool,
                n_threads: self.pool.threads(),
                scratch: &self.scratch,
                src_repacked,
            };
            ops::supports(op, d, &ctx.src).map_err(|r| ctx.unsupported(r))?;
            if is_repacked(index) {
                return Err(ctx.unsupported("its output is in a repacked weight buffer"));
            }
            let reads_repacked = matches!(op, Op::MulMat | Op::GetRows);
            if let Some(i) = (0..MAX_SRC).find(|&i| src_repacked[i] && (!reads_repacked || i != 0))
            {
                return Err(ctx.unsupported(format!(
                    "source {i} is in a repacked weight buffer, which only MUL_MAT and GET_ROWS read (as src0)"
                )));
            }
            // SAFETY: the caller guarantees every pointer covers its tensor.
            unsafe { ops::run(&ctx)? };
        }
        Ok(())
    }
}

fn sources<'a>(
    graph: &'a [TensorDesc],
    d: &TensorDesc,
) -> Result<[Option<&'a TensorDesc>; MAX_SRC], String> {
    let mut out = [None; MAX_SRC];
    for (i, &s) in d.src.iter().enumerate() {
        if s >= 0 {
            out[i] = Some(
                graph
                    .get(s as usize)
                    .ok_or_else(|| format!("source {i} index {s} out of range"))?,
            );
        }
    }
    Ok(out)
}
