//! The scheduler: runs one graph over several backends.
//!
//! Backends are given in priority order, the CPU last. Planning a graph
//! ([`Planner::plan`]) goes through these steps, each in its own file:
//!
//! 1. [`plan`] assigns every tensor a backend, in the passes of ggml's
//!    `ggml_backend_sched_split_graph`: pinned tensors and ops reading
//!    pre-placed weights first (a higher-priority backend may take such an op
//!    when the weights are in host memory and the batch is large enough),
//!    then assignments spread to neighbouring nodes, then upgrades to
//!    higher-priority backends sharing a buffer type, then the rest; views
//!    follow their source, nodes writing into existing memory run where that
//!    memory is. Every refusal's reason is kept.
//! 2. [`split`] cuts the node list into splits (runs of nodes on one
//!    backend), finds the inputs each split must copy in from other backends,
//!    and builds each split's own small descriptor graph.
//! 3. [`alloc`] places every intermediate tensor in its backend's compute
//!    buffer, reusing memory by liveness and computing in place where the op
//!    allows, as ggml-alloc does.
//! 4. [`cache`] keeps the finished [`Plan`] under a hash of the graph's
//!    structure, so a graph that did not change is not planned again.
//!
//! What the steps hand each other lives below them, so each step uses the
//! others one way: the [`Assignment`] of step 1 in its own file, the [`Plan`]
//! they make together in this one.
//!
//! [`Scheduler`] adds the devices themselves: streams, compute buffers sized
//! by [`Scheduler::reserve`], weight placement, copies and compute.
//! [`explain`] and [`dot`] show what was decided and why.

pub mod alloc;
mod assignment;
pub mod backend_options;
pub mod cache;
pub mod dot;
pub mod exec;
pub mod explain;
pub mod inputs;
pub mod placement;
pub mod plan;
pub mod split;
mod watchdog;
mod weights;

#[cfg(test)]
mod tests;

use backplane_abi::Op;

pub use alloc::{Allocation, Loc};
pub use assignment::{Assignment, Cause, Decline};
pub use backend_options::BackendOptions;
pub use cache::{PlanCache, structure_hash};
pub use exec::{RunStats, Scheduler};
pub use explain::{Explanation, NodeReport, human_bytes};
pub use placement::{DevicePlacement, Placement};
pub use plan::Planner;
pub use split::{Copy, Split};
pub use weights::WeightBlock;
pub use weights::by_preferred_type;

/// Index of a backend in the scheduler's priority order (0 = highest).
pub type BackendId = usize;

/// The default of [`SchedOptions::device_timeout`]: generous, so only a
/// device that is really stuck trips it.
pub const DEFAULT_DEVICE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Environment override of [`SchedOptions::device_timeout`]'s default:
/// seconds, `0` or `off` for no timeout. Read when options are defaulted.
pub const DEVICE_TIMEOUT_ENV: &str = "BACKPLANE_DEVICE_TIMEOUT";

/// The default device timeout: [`DEVICE_TIMEOUT_ENV`] when set and valid
/// (a warning names an invalid value), else [`DEFAULT_DEVICE_TIMEOUT`].
fn device_timeout_from_env() -> Option<std::time::Duration> {
    let Ok(v) = std::env::var(DEVICE_TIMEOUT_ENV) else {
        return Some(DEFAULT_DEVICE_TIMEOUT);
    };
    match v.trim() {
        "0" | "off" => None,
        s => match s.parse::<f64>() {
            Ok(secs) if secs.is_finite() && secs > 0.0 => {
                Some(std::time::Duration::from_secs_f64(secs))
            }
            _ => {
                tracing::warn!(
                    "{DEVICE_TIMEOUT_ENV}={v:?} is not a number of seconds or 'off'; using {} s",
                    DEFAULT_DEVICE_TIMEOUT.as_secs()
                );
                Some(DEFAULT_DEVICE_TIMEOUT)
            }
        },
    }
}

/// What the scheduler may do.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedOptions {
    /// Error instead of running any node on a lower-priority backend because
    /// a higher-priority one refused it.
    pub strict: bool,
    /// With an op's weights in host memory, a higher-priority backend takes
    /// the op (copying the weights in) when its batch (ne1, ne2 for
    /// MUL_MAT_ID) is at least this, or when its `offload_op` says so.
    /// `None`: only `offload_op` decides.
    pub offload_min_batch: Option<i64>,
    /// Plans kept in the plan cache (0 = no caching).
    pub cache_capacity: usize,
    /// Longest a device's `graph_compute` or `synchronize` may take before
    /// the run fails with an error naming the device and split, and the
    /// device is taken out of service (later graphs route around it).
    /// `None`: wait forever, calling the device on the caller's thread.
    pub device_timeout: Option<std::time::Duration>,
    /// Params each backend's streams are created with (`init_backend`),
    /// by backend name; none set: every backend's defaults.
    pub backend_options: BackendOptions,
}

impl Default for SchedOptions {
    fn default() -> Self {
        SchedOptions {
            strict: false,
            offload_min_batch: Some(32),
            cache_capacity: 16,
            device_timeout: device_timeout_from_env(),
            backend_options: BackendOptions::default(),
        }
    }
}

/// Summary figures of a plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanStats {
    /// Splits (runs of nodes on one backend).
    pub splits: usize,
    /// Tensors copied between backends per run.
    pub copies: usize,
    /// Bytes those copies move per run.
    pub copy_bytes: u64,
    /// Compute nodes per backend.
    pub nodes_per_backend: Vec<usize>,
    /// Peak compute-buffer bytes per backend with reuse.
    pub peak_bytes: Vec<u64>,
    /// Bytes per backend if nothing were reused.
    pub naive_bytes: Vec<u64>,
    /// Nodes computed in place over a dying source.
    pub in_place: usize,
}

/// Everything decided for one graph structure.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Leaves the host writes on every run (inputs the scheduler placed in
    /// compute memory), in graph order.
    pub inputs: Vec<usize>,
    /// How the host writes those inputs: one write per backend holding
    /// several of them side by side in device memory, else one per input.
    pub input_writes: Vec<inputs::InputWrite>,
    /// Backend per tensor.
    pub assignment: Assignment,
    /// Runs of nodes per backend, in execution order.
    pub splits: Vec<Split>,
    /// Tensors copied between backends.
    pub copies: Vec<Copy>,
    /// Where every tensor lives.
    pub allocation: Allocation,
    /// Summary figures.
    pub stats: PlanStats,
    /// Compute nodes that fell back because a higher-priority backend refused them.
    pub fallbacks: Vec<usize>,
    /// Backend names, in priority order.
    pub backend_names: Vec<String>,
}

impl Plan {
    /// The fallbacks as reportable values, with names from `graph`.
    pub fn fallback_list(&self, graph: &crate::Graph) -> Vec<Fallback> {
        self.fallbacks
            .iter()
            .map(|&i| Fallback {
                node: i,
                name: graph
                    .tensors()
                    .get(i)
                    .map_or_else(String::new, |_| graph.name(crate::TensorId(i)).to_string()),
                op: graph.tensors()[i].op().unwrap_or(Op::None),
                backend: self.backend_names[self.assignment.backend[i]].clone(),
                refusals: self.assignment.declined[i]
                    .iter()
                    .filter_map(|(b, d)| match d {
                        Decline::Refused(r) => Some((self.backend_names[*b].clone(), r.clone())),
                        Decline::NotChosen => None,
                    })
                    .collect(),
            })
            .collect()
    }
}

/// A node that ran on a lower-priority backend because better ones refused it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    /// Node index.
    pub node: usize,
    /// Its name in the graph.
    pub name: String,
    /// Its op.
    pub op: Op,
    /// The backend it was assigned.
    pub backend: String,
    /// `(backend, reason)` for each higher-priority backend that refused it.
    pub refusals: Vec<(String, String)>,
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node {} '{}' ({}) fell back to {}",
            self.node, self.name, self.op, self.backend
        )?;
        for (b, r) in &self.refusals {
            write!(f, "; {b}: {r}")?;
        }
        Ok(())
    }
}

fn list_fallbacks(nodes: &[Fallback]) -> String {
    nodes.iter().map(|n| format!("\n  {n}")).collect()
}

/// Scheduling or running a graph failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SchedError {
    /// The scheduler was given no backends.
    #[error("the scheduler needs at least one backend (the CPU, last)")]
    NoBackends,
    /// A tensor descriptor is malformed (unknown op or type, source out of order).
    #[error("node {node}: {reason}")]
    InvalidGraph {
        /// Tensor index.
        node: usize,
        /// What is wrong.
        reason: String,
    },
    /// A node breaks its op's contract (types, shapes, parameters): no
    /// backend is asked.
    #[error("node {node}: {refusal}")]
    Contract {
        /// Tensor index.
        node: usize,
        /// The contract's reason.
        refusal: backplane_abi::Refusal,
    },
    /// No backend accepts a node.
    #[error("node {node} '{name}' ({op}): no backend can run it:{reasons}")]
    Unassignable {
        /// Node index.
        node: usize,
        /// Its name.
        name: String,
        /// Its op.
        op: Op,
        /// One line per backend: `\n  backend: reason`.
        reasons: String,
    },
    /// A tensor was pinned to a backend that refuses it.
    #[error("node {node} ({op}) is pinned to {backend}, which refuses it: {reason}")]
    PinRefused {
        /// Node index.
        node: usize,
        /// Its op.
        op: Op,
        /// The backend pinned.
        backend: String,
        /// The backend's reason.
        reason: String,
    },
    /// A pin or placement named a backend index that does not exist.
    #[error("backend index {index} out of range ({count} backends)")]
    UnknownBackend {
        /// The index given.
        index: usize,
        /// Backends the scheduler has.
        count: usize,
    },
    /// Strict mode: nodes would fall back to lower-priority backends.
    #[error("strict mode: {} node(s) would fall back:{}", .0.len(), list_fallbacks(.0))]
    Fallback(Vec<Fallback>),
    /// A compute buffer would exceed what the backend can allocate at once.
    #[error(
        "backend {backend}: compute buffer of {size_bytes} bytes exceeds its maximum of {max_bytes}"
    )]
    BufferTooLarge {
        /// The backend.
        backend: String,
        /// Bytes needed.
        size_bytes: u64,
        /// Largest buffer it allows.
        max_bytes: u64,
    },
    /// A backend call failed.
    #[error("backend {backend}: {call}: {message}")]
    Backend {
        /// The backend.
        backend: String,
        /// What was being done (`"graph_compute of split 3 (nodes 12..40, first MUL_MAT)"`).
        call: String,
        /// The plugin's message.
        message: String,
    },
    /// A buffer key was registered for two backends.
    #[error(
        "buffer key {key:#x} is already registered to backend {registered}, not {asked} \
         (keys must be unique in the host: use Scheduler::place_weights)"
    )]
    BufferKeyClash {
        /// The key.
        key: u64,
        /// The backend holding it.
        registered: String,
        /// The backend asked for.
        asked: String,
    },
    /// A device call did not return within [`SchedOptions::device_timeout`].
    #[error(
        "backend {backend}: {call} did not return within {seconds} s; the device is out of \
         service (its call thread stays blocked in the plugin; run the plugin out of process \
         to recover it)"
    )]
    Timeout {
        /// The backend.
        backend: String,
        /// What was being done (`"graph_compute of split 3 (...)"`).
        call: String,
        /// The timeout.
        seconds: f64,
    },
    /// Host data did not fit a tensor, or a tensor has no memory.
    #[error("tensor {tensor} '{name}': {reason}")]
    Data {
        /// Tensor index.
        tensor: usize,
        /// Its name.
        name: String,
        /// What was wrong.
        reason: String,
    },
}

/// A [`SchedError::Data`] for tensor `t` of `graph`, named when `t` is in it.
pub(crate) fn data_err(graph: &crate::Graph, t: crate::TensorId, reason: String) -> SchedError {
    let name = if t.index() < graph.len() {
        graph.name(t).to_string()
    } else {
        String::new()
    };
    SchedError::Data {
        tensor: t.index(),
        name,
        reason,
    }
}

/// Records that leaf `t` of `graph` lives at byte `offset` of buffer
/// `buffer` (an id from `Buffer::id`); register the buffer's backend with
/// [`Planner::register_buffer`] so ops reading it are pulled there.
pub fn set_placement(
    graph: &mut crate::Graph,
    t: crate::TensorId,
    buffer: u64,
    offset: u64,
) -> Result<(), SchedError> {
    let d = graph.try_desc(t).map_err(|e| SchedError::Data {
        tensor: t.index(),
        name: String::new(),
        reason: e.to_string(),
    })?;
    if d.op().is_ok_and(|op| op != Op::None) || d.view_source().is_some() {
        return Err(SchedError::Data {
            tensor: t.index(),
            name: graph.name(t).to_string(),
            reason: "only leaves (not views) can be placed".into(),
        });
    }
    let d = &mut graph.tensors_mut()[t.index()];
    d.buffer = buffer;
    d.offset = offset;
    Ok(())
}

/// Name of the native CPU backend, the fallback every scheduler ends with.
pub const CPU_BACKEND: &str = "cpu";

/// A device automatic placement does not use, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftOut {
    /// `backend/device`.
    pub device: String,
    /// Why it is left out.
    pub reason: String,
}

/// The devices automatic placement uses, in priority order (the native CPU
/// last), and those it leaves out with the reason.
pub struct AutoOrder {
    /// Devices in priority order.
    pub devices: Vec<crate::registry::Device>,
    /// Devices left out.
    pub left_out: Vec<LeftOut>,
}

/// Orders devices for automatic placement: discrete GPUs, integrated GPUs,
/// other accelerators, then the native CPU backend (stable within each
/// kind). A device of type CPU offered by another backend (a software
/// Vulkan device such as lavapipe, an OpenCL CPU device behind SYCL) is the
/// host CPU behind another API: slower than the native CPU backend on the
/// same cores, so it never outranks it and automatic placement leaves it
/// out (choose it by name to use it).
pub fn auto_order(devices: Vec<crate::registry::Device>) -> AutoOrder {
    use backplane_abi::plugin::DeviceType;
    let (mut keep, host_cpus): (Vec<_>, Vec<_>) = devices
        .into_iter()
        .partition(|d| d.device_type() != DeviceType::Cpu || d.backend() == CPU_BACKEND);
    keep.sort_by_key(|d| {
        let t = d.device_type();
        if t == DeviceType::Gpu {
            0
        } else if t == DeviceType::IGpu {
            1
        } else if t == DeviceType::Cpu {
            3
        } else {
            2
        }
    });
    let left_out = host_cpus
        .iter()
        .map(|d| LeftOut {
            device: format!("{}/{}", d.backend(), d.name()),
            reason: format!(
                "the host CPU behind another API (device type cpu, {}): the native {CPU_BACKEND} \
                 backend runs the same cores faster, so automatic placement leaves it out",
                d.description()
            ),
        })
        .collect();
    AutoOrder {
        devices: keep,
        left_out,
    }
}

/// The devices of [`auto_order`], in priority order.
pub fn priority_order(devices: Vec<crate::registry::Device>) -> Vec<crate::registry::Device> {
    auto_order(devices).devices
}
