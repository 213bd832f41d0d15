//! Cutting the assigned node list into splits, finding the tensors each
//! split must copy in, and building each split's own descriptor graph.

use std::collections::HashMap;

use backplane_abi::{MAX_SRC, NO_TENSOR, Op, TensorDesc};

use super::BackendId;
use super::assignment::Assignment;
use super::placement::BackendFacts;

/// What an entry of a split's descriptor graph is, to fill in its buffer
/// and offset when the plan is bound to real buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    /// Tensor `i` of the full graph, in its own memory.
    Tensor(usize),
    /// Copy `c` of [`Plan::copies`](super::Plan::copies).
    Copy(usize),
}

/// One read of a node in a split: source slot `slot` of node `node` reads `from`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Read {
    /// The reading node.
    pub node: usize,
    /// Its source slot.
    pub slot: usize,
    /// The memory read: the source itself or its copy.
    pub from: Entry,
}

/// A run of consecutive compute nodes on one backend.
#[derive(Clone, Debug)]
pub struct Split {
    /// The backend running it.
    pub backend: BackendId,
    /// Its compute nodes (indices into the full graph), in order.
    pub nodes: Vec<usize>,
    /// Copies (indices into the plan's copies) made before it runs.
    pub copies: Vec<usize>,
    /// Every source read of its nodes, in node order.
    pub reads: Vec<Read>,
    /// Its descriptor graph: inputs as leaves, then its nodes, re-indexed;
    /// `buffer` and `offset` are filled in when bound.
    pub graph: Vec<TensorDesc>,
    /// What each entry of `graph` is.
    pub entries: Vec<Entry>,
}

/// A tensor copied from the memory of one backend into another's before a split.
#[derive(Clone, Debug)]
pub struct Copy {
    /// The tensor copied (may be a view).
    pub tensor: usize,
    /// The backend whose memory holds it.
    pub from: BackendId,
    /// The backend receiving the copy.
    pub to: BackendId,
    /// The split that first needs it (the copy is made before it runs).
    pub split: usize,
    /// Bytes moved.
    pub bytes: u64,
    /// The copy's descriptor: the tensor's type, shape and strides as a leaf.
    pub desc: TensorDesc,
}

/// `d` as a leaf: no op, no sources, not a view (buffer fields kept).
pub(crate) fn as_leaf(d: &TensorDesc) -> TensorDesc {
    let mut l = *d;
    l.op = Op::None.code();
    l.src = [NO_TENSOR; MAX_SRC];
    l.view_src = NO_TENSOR;
    l.view_offset = 0;
    l.op_params = [0; backplane_abi::MAX_OP_PARAMS];
    l
}

/// Builds the splits and copies of an assigned graph.
pub(crate) fn build_splits(
    g: &[TensorDesc],
    a: &Assignment,
    facts: &BackendFacts,
) -> (Vec<Split>, Vec<Copy>) {
    let mut splits: Vec<Split> = Vec::new();
    for (i, d) in g.iter().enumerate() {
        let op = d.op().unwrap_or(Op::None);
        if op == Op::None || op.is_view() {
            continue;
        }
        let b = a.backend[i];
        match splits.last_mut() {
            Some(s) if s.backend == b => s.nodes.push(i),
            _ => splits.push(Split {
                backend: b,
                nodes: vec![i],
                copies: Vec::new(),
                reads: Vec::new(),
                graph: Vec::new(),
                entries: Vec::new(),
            }),
        }
    }

    let mut copies: Vec<Copy> = Vec::new();
    let mut copy_of: HashMap<(usize, BackendId), usize> = HashMap::new();
    for (si, split) in splits.iter_mut().enumerate() {
        let b = split.backend;
        let mut reads = Vec::new();
        for &i in &split.nodes {
            for slot in 0..MAX_SRC {
                let Some(s) = g[i].src(slot) else { continue };
                let m = a.memory_backend(s);
                let from = if facts.can_access(b, m) {
                    Entry::Tensor(s)
                } else {
                    let c = *copy_of.entry((s, b)).or_insert_with(|| {
                        copies.push(Copy {
                            tensor: s,
                            from: m,
                            to: b,
                            split: si,
                            bytes: g[s].nbytes(),
                            desc: as_leaf(&g[s]),
                        });
                        split.copies.push(copies.len() - 1);
                        copies.len() - 1
                    });
                    Entry::Copy(c)
                };
                reads.push(Read {
                    node: i,
                    slot,
                    from,
                });
            }
        }
        split.reads = reads;
        build_split_graph(g, split);
    }
    (splits, copies)
}

/// The split's descriptor graph: every tensor its nodes read that it does
/// not compute (copies, tensors of other splits, views, leaves) as a leaf,
/// then its nodes with sources re-indexed.
fn build_split_graph(g: &[TensorDesc], split: &mut Split) {
    let mut local: HashMap<Entry, usize> = HashMap::with_capacity(split.nodes.len() * 3);
    let mut graph: Vec<TensorDesc> = Vec::new();
    let mut entries: Vec<Entry> = Vec::new();
    let computed: std::collections::HashSet<usize> = split.nodes.iter().copied().collect();
    let mut add_leaf =
        |e: Entry, desc: TensorDesc, graph: &mut Vec<TensorDesc>, entries: &mut Vec<Entry>| {
            local.entry(e).or_insert_with(|| {
                graph.push(as_leaf(&desc));
                entries.push(e);
                graph.len() - 1
            });
        };
    for r in &split.reads {
        match r.from {
            Entry::Tensor(s) if computed.contains(&s) => {}
            Entry::Tensor(s) => add_leaf(r.from, g[s], &mut graph, &mut entries),
            Entry::Copy(_) => {
                let s = g[r.node].src(r.slot).unwrap_or(0);
                add_leaf(r.from, g[s], &mut graph, &mut entries);
            }
        }
    }
    for &i in &split.nodes {
        if let Some(vs) = g[i].view_source()
            && !computed.contains(&vs)
        {
            add_leaf(Entry::Tensor(vs), g[vs], &mut graph, &mut entries);
        }
    }
    let mut index: HashMap<Entry, usize> = HashMap::with_capacity(graph.len() + split.nodes.len());
    for (k, e) in entries.iter().enumerate() {
        index.insert(*e, k);
    }
    let mut reads = split.reads.iter().peekable();
    for &i in &split.nodes {
        let mut d = g[i];
        d.src = [NO_TENSOR; MAX_SRC];
        while let Some(r) = reads.next_if(|r| r.node == i) {
            d.src[r.slot] = index.get(&r.from).map_or(NO_TENSOR, |&k| k as i32);
        }
        d.view_src = d
            .view_source()
            .and_then(|vs| index.get(&Entry::Tensor(vs)))
            .map_or(NO_TENSOR, |&k| k as i32);
        index.insert(Entry::Tensor(i), graph.len());
        graph.push(d);
        entries.push(Entry::Tensor(i));
    }
    split.graph = graph;
    split.entries = entries;
}
