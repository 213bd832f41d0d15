//! What the assignment passes of [`plan`](super::plan) decide: the backend
//! of every tensor, why, and which higher-priority backends declined it.

use super::BackendId;

/// Why a tensor was assigned its backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// Not decided yet (never in a finished plan).
    Unassigned,
    /// The user pinned it there.
    Pinned,
    /// A leaf whose memory was placed on that backend before planning.
    Preplaced,
    /// A graph input: host memory, the last backend.
    Input,
    /// A graph input read only by nodes of this backend, which cannot read
    /// host memory: written straight into its memory.
    InputAtReader,
    /// It reads weights (tensor `src`) living in that backend's memory.
    Weights {
        /// The weight tensor.
        src: usize,
    },
    /// Its weights (tensor `src`) are in host memory, but the batch is large
    /// enough for this higher-priority backend to take it.
    Offload {
        /// The weight tensor.
        src: usize,
    },
    /// It writes into memory (tensor `root`) that only backends able to reach it may touch.
    InPlace {
        /// The tensor whose memory it writes.
        root: usize,
    },
    /// Spread from a neighbouring node on the same backend.
    Spread,
    /// Moved up to a higher-priority backend sharing the buffer type.
    Upgraded,
    /// The highest-priority backend accepting the op and able to read all its inputs.
    BestFit,
    /// No backend reads all its inputs; the one reading most of them.
    MostInputs,
    /// A view: where its source's memory is.
    ViewSource,
    /// A leaf placed where its first consumer runs.
    Consumer,
    /// A leaf nobody reads: the last backend.
    Unused,
}

impl Cause {
    /// A short phrase for explanations, naming tensors through `name`.
    pub fn describe(&self, name: &dyn Fn(usize) -> String) -> String {
        match *self {
            Cause::Unassigned => "unassigned".into(),
            Cause::Pinned => "pinned by the user".into(),
            Cause::Preplaced => "memory placed there before planning".into(),
            Cause::Input => "graph input (host memory)".into(),
            Cause::InputAtReader => {
                "graph input written straight into the memory of the only backend reading it".into()
            }
            Cause::Weights { src } => format!("reads weights '{}' that live there", name(src)),
            Cause::Offload { src } => format!(
                "batch large enough to copy weights '{}' in from host memory",
                name(src)
            ),
            Cause::InPlace { root } => format!(
                "writes in place into '{}', whose memory is there",
                name(root)
            ),
            Cause::Spread => "spread from neighbouring nodes".into(),
            Cause::Upgraded => "upgraded: shares the buffer type of a lower-priority choice".into(),
            Cause::BestFit => {
                "highest-priority backend accepting the op and its inputs' memory".into()
            }
            Cause::MostInputs => "backend reading most of its inputs without copies".into(),
            Cause::ViewSource => "view: follows its source".into(),
            Cause::Consumer => "leaf: placed where its first consumer runs".into(),
            Cause::Unused => "leaf nobody reads".into(),
        }
    }
}

/// Why a higher-priority backend did not get a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decline {
    /// Its `supports_op` refused, with this reason.
    Refused(String),
    /// It supports the node; the assignment rules chose another backend.
    NotChosen,
}

/// The backend of every tensor, and why.
#[derive(Clone, Debug)]
pub struct Assignment {
    /// Per tensor: the backend running it (compute nodes) or holding its
    /// memory (leaves, views).
    pub backend: Vec<BackendId>,
    /// Per tensor: why.
    pub cause: Vec<Cause>,
    /// Per compute node: every higher-priority backend, in order, and why it
    /// did not get the node (empty for leaves and views).
    pub declined: Vec<Vec<(BackendId, Decline)>>,
    /// Per tensor: its storage root (itself unless a view or an in-place result).
    pub root: Vec<usize>,
    /// Per tensor: byte offset within its root.
    pub offset_in_root: Vec<u64>,
    /// Per tensor: the backend whose pre-placed buffer holds its root, if any.
    pub preplaced: Vec<Option<BackendId>>,
}

impl Assignment {
    /// The backend whose memory holds tensor `t`'s bytes.
    pub fn memory_backend(&self, t: usize) -> BackendId {
        self.backend[self.root[t]]
    }
}
