//! The graph builder: a context that owns tensor metadata and records ops in
//! topological order.

use std::sync::atomic::{AtomicU64, Ordering};

use backplane_abi::{DType, MAX_DIMS, NO_TENSOR, Op, TensorDesc, flags};

use crate::error::{GraphError, describe};

/// Index of a tensor in its [`Graph`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(pub usize);

impl TensorId {
    /// The index into [`Graph::tensors`].
    pub fn index(self) -> usize {
        self.0
    }
}

/// Marks an optional source slot left empty.
pub(crate) const ABSENT: TensorId = TensorId(usize::MAX);

/// A compute graph under construction. Tensors are appended as they are
/// created, and an op can only read tensors that already exist, so the
/// creation order is a topological order.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    tensors: Vec<TensorDesc>,
    names: Vec<String>,
    /// See [`Graph::stamp`].
    stamp: u64,
}

/// A number no graph change of this process has had before.
fn fresh_stamp() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::default()
    }

    /// Names this graph's tensors as they are now: every change (a tensor
    /// added, a flag or descriptor changed) gives a number no graph of the
    /// process had before, so two graphs with the same stamp hold the same
    /// tensors (a clone keeps its original's until either changes). 0 for
    /// an empty graph. Names are not part of it. The scheduler finds the
    /// plan of a graph run again by it.
    pub fn stamp(&self) -> u64 {
        self.stamp
    }

    /// All tensors in topological order.
    pub fn tensors(&self) -> &[TensorDesc] {
        &self.tensors
    }

    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// True when the graph has no tensors.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// Ids of all tensors.
    pub fn ids(&self) -> impl Iterator<Item = TensorId> + use<> {
        (0..self.tensors.len()).map(TensorId)
    }

    /// A tensor's descriptor.
    pub fn desc(&self, t: TensorId) -> &TensorDesc {
        &self.tensors[t.0]
    }

    /// A tensor's descriptor, or an error for a foreign id.
    pub fn try_desc(&self, t: TensorId) -> Result<&TensorDesc, GraphError> {
        self.tensors.get(t.0).ok_or(GraphError::UnknownTensor {
            id: t.0,
            len: self.tensors.len(),
        })
    }

    /// A tensor's name (generated for op results: `"mul_mat-12"`).
    pub fn name(&self, t: TensorId) -> &str {
        &self.names[t.0]
    }

    /// Renames a tensor.
    pub fn set_name(&mut self, t: TensorId, name: impl Into<String>) {
        self.names[t.0] = name.into();
    }

    /// Finds a tensor by name.
    pub fn find(&self, name: &str) -> Option<TensorId> {
        self.names.iter().position(|n| n == name).map(TensorId)
    }

    /// A tensor's element type.
    pub fn dtype(&self, t: TensorId) -> DType {
        self.tensors[t.0]
            .dtype()
            .expect("graph tensors carry known types")
    }

    /// A tensor's op.
    pub fn op(&self, t: TensorId) -> Op {
        self.tensors[t.0]
            .op()
            .expect("graph tensors carry known ops")
    }

    /// A tensor's shape.
    pub fn ne(&self, t: TensorId) -> [i64; MAX_DIMS] {
        self.tensors[t.0].ne
    }

    /// `"[4096, 32, 1, 1] f32"`.
    pub fn describe(&self, t: TensorId) -> String {
        describe(&self.tensors[t.0])
    }

    /// The tensor owning the memory `t` lives in (itself unless a view).
    pub fn storage_root(&self, t: TensorId) -> TensorId {
        let mut cur = t.0;
        while let Some(v) = self.tensors[cur].view_source() {
            cur = v;
        }
        TensorId(cur)
    }

    /// Byte offset of `t` within its storage root.
    pub fn offset_in_root(&self, t: TensorId) -> u64 {
        let mut cur = t.0;
        let mut off = 0;
        while let Some(v) = self.tensors[cur].view_source() {
            off += self.tensors[cur].view_offset;
            cur = v;
        }
        off
    }

    /// A leaf filled by the host before each compute.
    pub fn input(&mut self, name: &str, dtype: DType, ne: &[i64]) -> Result<TensorId, GraphError> {
        self.leaf(name, dtype, ne, flags::INPUT)
    }

    /// A leaf holding a model weight.
    pub fn weight(&mut self, name: &str, dtype: DType, ne: &[i64]) -> Result<TensorId, GraphError> {
        self.leaf(name, dtype, ne, flags::WEIGHT)
    }

    /// Marks a tensor as an output: its memory is kept for the host to read.
    pub fn mark_output(&mut self, t: TensorId) -> Result<(), GraphError> {
        self.try_desc(t)?;
        self.stamp = fresh_stamp();
        self.tensors[t.0].flags |= flags::OUTPUT;
        Ok(())
    }

    /// Tensors flagged as outputs.
    pub fn outputs(&self) -> Vec<TensorId> {
        self.ids()
            .filter(|&t| self.desc(t).has_flag(flags::OUTPUT))
            .collect()
    }

    fn leaf(
        &mut self,
        name: &str,
        dtype: DType,
        ne: &[i64],
        flag: u32,
    ) -> Result<TensorId, GraphError> {
        let ne4 = shape4(ne).map_err(|message| GraphError::InvalidLeaf {
            name: name.to_string(),
            message,
        })?;
        if ne4[0] % dtype.block_size() as i64 != 0 {
            return Err(GraphError::InvalidLeaf {
                name: name.to_string(),
                message: format!(
                    "ne0 = {} is not a multiple of {dtype}'s block size {}",
                    ne4[0],
                    dtype.block_size()
                ),
            });
        }
        let mut d = TensorDesc::new(dtype, ne4);
        d.flags = flag;
        Ok(self.push(d, name.to_string()))
    }

    /// Appends a node whose sources are already in the graph ([`ABSENT`]
    /// leaves a slot empty). Used by the op constructors after validation.
    pub(crate) fn push_node(&mut self, mut d: TensorDesc, op: Op, srcs: &[TensorId]) -> TensorId {
        d.op = op.code();
        for (slot, s) in d.src.iter_mut().zip(srcs) {
            *slot = if *s == ABSENT { NO_TENSOR } else { s.0 as i32 };
        }
        let name = format!("{}-{}", op.name().to_ascii_lowercase(), self.tensors.len());
        self.push(d, name)
    }

    pub(crate) fn tensors_mut(&mut self) -> &mut [TensorDesc] {
        self.stamp = fresh_stamp();
        &mut self.tensors
    }

    fn push(&mut self, d: TensorDesc, name: String) -> TensorId {
        self.stamp = fresh_stamp();
        self.tensors.push(d);
        self.names.push(name);
        TensorId(self.tensors.len() - 1)
    }

    /// Nodes that compute something (not leaves, not views), in order.
    pub fn compute_nodes(&self) -> impl Iterator<Item = TensorId> + '_ {
        self.ids().filter(|&t| {
            let op = self.op(t);
            op != Op::None && !op.is_view()
        })
    }

    /// Sources of a node.
    pub fn sources(&self, t: TensorId) -> impl Iterator<Item = TensorId> + '_ {
        self.tensors[t.0]
            .src
            .iter()
            .filter(|&&s| s != NO_TENSOR)
            .map(|&s| TensorId(s as usize))
    }
}

/// Pads a shape of 1 to 4 dims with ones; rejects empty or negative shapes.
pub(crate) fn shape4(ne: &[i64]) -> Result<[i64; MAX_DIMS], String> {
    if ne.is_empty() || ne.len() > MAX_DIMS {
        return Err(format!("a shape has 1 to 4 dims, got {}", ne.len()));
    }
    let mut out = [1i64; MAX_DIMS];
    for (i, &n) in ne.iter().enumerate() {
        if n <= 0 {
            return Err(format!("dim {i} is {n}; every dim must be at least 1"));
        }
        out[i] = n;
    }
    Ok(out)
}
