//! What a conformance run checks: a backend behind the [`Target`] trait.

use backplane::{Graph, TensorId};
use backplane_cpu::{CpuBackend, CpuConfig};

use crate::guarded::GuardedHost;

/// A backend under test.
pub trait Target {
    /// Name shown in reports (`cpu`, `webgpu:0`, ...).
    fn name(&self) -> String;
    /// The device's one-line description (optional; empty by default).
    fn description(&self) -> String {
        String::new()
    }
    /// Whether this is an accelerator backend whose device is the host CPU
    /// (a software Vulkan rasterizer, an OpenCL CPU runtime): its kernels
    /// run far slower than on the hardware they stand in for. False by
    /// default.
    fn is_host_emulated(&self) -> bool {
        false
    }
    /// Whether the backend accepts `node`; `Err(reason)` if not.
    fn supports(&self, graph: &Graph, node: TensorId) -> Result<(), String>;
    /// Places the graph and its leaf data (contiguous bytes per leaf).
    fn load(&mut self, graph: &Graph, leaves: &[(TensorId, Vec<u8>)]) -> Result<(), String>;
    /// Runs the loaded graph once.
    fn compute(&mut self) -> Result<(), String>;
    /// Runs the loaded graph with every compute node repeated `reps` times
    /// in one submission (as test-backend-ops' perf mode does), so that
    /// per-call overhead is amortised. Default: `reps` calls of `compute`.
    fn compute_repeated(&mut self, reps: usize) -> Result<(), String> {
        for _ in 0..reps {
            self.compute()?;
        }
        Ok(())
    }
    /// Reads a tensor of the loaded graph as f32 in logical order.
    fn read_f32(&mut self, t: TensorId) -> Result<Vec<f32>, String>;
    /// Writes outside any tensor, one line per tensor (empty when clean).
    fn guard_violations(&mut self) -> Vec<String>;
}

/// The built-in CPU backend on guarded host memory.
pub struct CpuTarget {
    backend: CpuBackend,
    loaded: Option<(Graph, GuardedHost)>,
}

impl CpuTarget {
    /// A CPU target with default threads.
    pub fn new() -> CpuTarget {
        CpuTarget {
            backend: CpuBackend::new(CpuConfig::default()),
            loaded: None,
        }
    }
}

impl Default for CpuTarget {
    fn default() -> Self {
        CpuTarget::new()
    }
}

impl Target for CpuTarget {
    fn name(&self) -> String {
        "cpu".into()
    }

    fn supports(&self, graph: &Graph, node: TensorId) -> Result<(), String> {
        self.backend.supports(graph.tensors(), node.index())
    }

    fn load(&mut self, graph: &Graph, leaves: &[(TensorId, Vec<u8>)]) -> Result<(), String> {
        let host = GuardedHost::new(graph, leaves)?;
        self.loaded = Some((graph.clone(), host));
        Ok(())
    }

    fn compute(&mut self) -> Result<(), String> {
        let (graph, host) = self.loaded.as_mut().ok_or("nothing loaded")?;
        let ptrs = host.pointers();
        // SAFETY: the guarded host holds every tensor of `graph` at these pointers.
        unsafe { self.backend.compute(graph.tensors(), &ptrs) }.map_err(|e| e.to_string())
    }

    fn read_f32(&mut self, t: TensorId) -> Result<Vec<f32>, String> {
        let (graph, host) = self.loaded.as_ref().ok_or("nothing loaded")?;
        Ok(host.read(graph, t))
    }

    fn guard_violations(&mut self) -> Vec<String> {
        match &self.loaded {
            Some((graph, host)) => host.violations(graph),
            None => Vec::new(),
        }
    }
}
