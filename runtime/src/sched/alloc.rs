//! The graph allocator: places every tensor the scheduler owns (leaves not
//! placed beforehand, intermediate results, copies) in its backend's compute
//! buffer, reusing memory by liveness as ggml-alloc does.
//!
//! Tensors are walked in execution order (split by split; a split's copies
//! before its nodes). Leaves are placed first and never freed, so inputs
//! stay valid across runs. A node's memory is freed after its last reader;
//! outputs (and nodes nobody reads) are never freed. An element-wise node
//! whose first source dies at this node, with the same type, shape and
//! strides, takes over that source's memory (computed in place); the
//! source may be a view that starts at its root's first byte (a reshape),
//! when the node is the root's last reader. Each backend's free space is
//! a best-fit list of blocks over one address range; its high-water mark
//! is the backend's peak.

use backplane_abi::{Op, TensorDesc, flags};

use super::BackendId;
use super::assignment::Assignment;
use super::placement::Placement;
use super::split::{Copy, Entry, Split};

/// Where a tensor's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loc {
    /// Nowhere (a tensor no one computes or reads).
    None,
    /// In backend `backend`'s compute buffer at byte `offset`.
    Compute {
        /// The backend.
        backend: BackendId,
        /// Byte offset in its compute buffer.
        offset: u64,
    },
    /// In a buffer placed before planning (weights, caches), by its key.
    External {
        /// The backend whose memory holds the buffer.
        backend: BackendId,
        /// The buffer's key, as written into `TensorDesc::buffer` (unique in
        /// the host: see [`crate::sched::Scheduler::place_weights`]).
        buffer: u64,
        /// Byte offset in it.
        offset: u64,
    },
}

impl Loc {
    /// This location moved `by` bytes further.
    pub fn advanced(self, by: u64) -> Loc {
        match self {
            Loc::None => Loc::None,
            Loc::Compute { backend, offset } => Loc::Compute {
                backend,
                offset: offset + by,
            },
            Loc::External {
                backend,
                buffer,
                offset,
            } => Loc::External {
                backend,
                buffer,
                offset: offset + by,
            },
        }
    }
}

/// Where every tensor and copy of a plan lives.
#[derive(Clone, Debug, Default)]
pub struct Allocation {
    /// Per tensor (views resolved to their root's memory plus offset).
    pub tensor: Vec<Loc>,
    /// Per copy.
    pub copy: Vec<Loc>,
    /// Compute-buffer bytes each backend needs (the peak with reuse).
    pub peak_bytes: Vec<u64>,
    /// Bytes each backend would need without reuse.
    pub naive_bytes: Vec<u64>,
    /// Nodes computed in place over a dying source.
    pub in_place: usize,
}

/// Best-fit allocator over one backend's address range (ggml's `ggml_dyn_tallocr`).
#[derive(Clone, Debug)]
pub struct DynAlloc {
    alignment: u64,
    /// Free blocks `(offset, size)` sorted by offset; the last one is open-ended.
    free: Vec<(u64, u64)>,
    max: u64,
}

const OPEN: u64 = u64::MAX / 4;

impl DynAlloc {
    /// An empty range whose offsets are multiples of `alignment`.
    pub fn new(alignment: u64) -> DynAlloc {
        DynAlloc {
            alignment: alignment.max(1),
            free: vec![(0, OPEN)],
            max: 0,
        }
    }

    /// `size` rounded up to the alignment.
    pub fn aligned(&self, size: u64) -> u64 {
        size.div_ceil(self.alignment).max(1) * self.alignment
    }

    /// Takes `size` bytes (aligned); returns the offset.
    pub fn alloc(&mut self, size: u64) -> u64 {
        let size = self.aligned(size);
        // Best fit among the closed blocks, else the open-ended last one.
        let last = self.free.len() - 1;
        let best = (0..last)
            .filter(|&k| self.free[k].1 >= size)
            .min_by_key(|&k| self.free[k].1)
            .unwrap_or(last);
        let (off, have) = self.free[best];
        if have == size {
            self.free.remove(best);
        } else {
            self.free[best] = (off + size, have - size);
        }
        self.max = self.max.max(off + size);
        off
    }

    /// Returns `size` bytes at `offset` (as given by `alloc` for that size).
    pub fn free(&mut self, offset: u64, size: u64) {
        let size = self.aligned(size);
        let k = self.free.partition_point(|&(o, _)| o < offset);
        let merges_prev = k > 0 && self.free[k - 1].0 + self.free[k - 1].1 == offset;
        let merges_next = k < self.free.len() && offset + size == self.free[k].0;
        match (merges_prev, merges_next) {
            (true, true) => {
                let next = self.free.remove(k);
                self.free[k - 1].1 += size + next.1;
            }
            (true, false) => self.free[k - 1].1 += size,
            (false, true) => {
                self.free[k].0 = offset;
                self.free[k].1 += size;
            }
            (false, false) => self.free.insert(k, (offset, size)),
        }
    }

    /// The high-water mark: bytes a buffer must have.
    pub fn max_size(&self) -> u64 {
        self.max
    }
}

/// Ops that may write their result over their first source.
fn can_inplace(op: Op) -> bool {
    matches!(
        op,
        Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Sqr
            | Op::Sqrt
            | Op::Log
            | Op::Sin
            | Op::Cos
            | Op::Scale
            | Op::Clamp
            | Op::Unary
            | Op::Rope
            | Op::RmsNorm
            | Op::Norm
            | Op::SoftMax
    )
}

fn same_layout(a: &TensorDesc, b: &TensorDesc) -> bool {
    a.dtype == b.dtype && a.ne == b.ne && a.nb == b.nb
}

/// Places every tensor the scheduler owns. Object ids: tensor roots `0..n`,
/// copies `n..n + copies`.
pub(crate) fn allocate(
    g: &[TensorDesc],
    a: &Assignment,
    splits: &[Split],
    copies: &[Copy],
    backends: &[Box<dyn Placement + Send + Sync>],
) -> Allocation {
    let n = g.len();
    let nb = backends.len();
    let obj_count = n + copies.len();
    let obj_of = |e: Entry| match e {
        Entry::Tensor(s) => a.root[s],
        Entry::Copy(c) => n + c,
    };
    let desc = |o: usize| if o < n { &g[o] } else { &copies[o - n].desc };
    let home = |o: usize| {
        if o < n {
            a.backend[o]
        } else {
            copies[o - n].to
        }
    };

    // Readers left per object; roots that must outlive the graph.
    let mut uses = vec![0u32; obj_count];
    let mut keep = vec![false; n];
    for (i, d) in g.iter().enumerate() {
        if d.has_flag(flags::OUTPUT) {
            keep[a.root[i]] = true;
        }
    }
    for split in splits {
        for &c in &split.copies {
            uses[a.root[copies[c].tensor]] += 1;
        }
        for r in &split.reads {
            uses[obj_of(r.from)] += 1;
        }
        for &i in &split.nodes {
            if a.root[i] != i {
                uses[a.root[i]] += 1;
            }
        }
    }
    let owned = |o: usize| o >= n || a.preplaced[o].is_none();
    let is_leaf = |o: usize| o < n && g[o].op().is_ok_and(|op| op == Op::None);
    let freeable = |o: usize, keep: &[bool]| o >= n || (owned(o) && !is_leaf(o) && !keep[o]);

    let mut allocs: Vec<DynAlloc> = (0..nb)
        .map(|b| DynAlloc::new(backends[b].alignment()))
        .collect();
    let mut offset = vec![u64::MAX; obj_count];
    let mut size = vec![0u64; obj_count];
    let mut naive = vec![0u64; nb];
    let mut transferred = vec![false; obj_count];
    let mut in_place = 0;

    let place = |o: usize,
                 allocs: &mut Vec<DynAlloc>,
                 offset: &mut Vec<u64>,
                 size: &mut Vec<u64>,
                 naive: &mut Vec<u64>| {
        let b = home(o);
        let bytes = backends[b].alloc_size(desc(o)).max(desc(o).nbytes());
        size[o] = bytes;
        offset[o] = allocs[b].alloc(bytes);
        naive[b] += allocs[b].aligned(bytes);
    };

    // Leaves first (inputs before the rest), never freed.
    for pass_inputs in [true, false] {
        for (i, d) in g.iter().enumerate() {
            if a.root[i] == i && is_leaf(i) && owned(i) && d.has_flag(flags::INPUT) == pass_inputs {
                place(i, &mut allocs, &mut offset, &mut size, &mut naive);
            }
        }
    }

    let release = |o: usize,
                   uses: &mut Vec<u32>,
                   allocs: &mut Vec<DynAlloc>,
                   offset: &[u64],
                   size: &[u64],
                   transferred: &[bool]| {
        uses[o] = uses[o].saturating_sub(1);
        if uses[o] == 0 && freeable(o, &keep) && !transferred[o] && offset[o] != u64::MAX {
            allocs[home(o)].free(offset[o], size[o]);
        }
    };

    for split in splits {
        for &c in &split.copies {
            place(n + c, &mut allocs, &mut offset, &mut size, &mut naive);
            release(
                a.root[copies[c].tensor],
                &mut uses,
                &mut allocs,
                &offset,
                &size,
                &transferred,
            );
        }
        let mut reads = split.reads.iter().peekable();
        for &i in &split.nodes {
            let node_reads: Vec<_> =
                std::iter::from_fn(|| reads.next_if(|r| r.node == i)).collect();
            if a.root[i] == i && owned(i) {
                let op = g[i].op().unwrap_or(Op::None);
                let donor = node_reads
                    .iter()
                    .find(|r| r.slot == 0)
                    .map(|r| (r.from, obj_of(r.from)))
                    .filter(|&(e, o)| {
                        let layout_fits = match e {
                            Entry::Tensor(s) if a.root[s] != s => {
                                // A view at the start of its root (a reshape
                                // of a projection before its ROPE), as
                                // ggml-alloc allows: the node takes the
                                // root's memory.
                                a.offset_in_root[s] == 0
                                    && same_layout(&g[s], &g[i])
                                    && g[i].nbytes() <= size[o]
                            }
                            _ => same_layout(desc(o), &g[i]),
                        };
                        can_inplace(op)
                            && layout_fits
                            && uses[o] == 1
                            && freeable(o, &keep)
                            && !transferred[o]
                            && offset[o] != u64::MAX
                            && home(o) == a.backend[i]
                    });
                if let Some((_, o)) = donor {
                    offset[i] = offset[o];
                    size[i] = size[o];
                    naive[a.backend[i]] += allocs[a.backend[i]].aligned(size[o]);
                    transferred[o] = true;
                    in_place += 1;
                } else {
                    place(i, &mut allocs, &mut offset, &mut size, &mut naive);
                }
            }
            for r in &node_reads {
                release(
                    obj_of(r.from),
                    &mut uses,
                    &mut allocs,
                    &offset,
                    &size,
                    &transferred,
                );
            }
            if a.root[i] != i {
                release(
                    a.root[i],
                    &mut uses,
                    &mut allocs,
                    &offset,
                    &size,
                    &transferred,
                );
            }
        }
    }

    let loc_of_root = |r: usize| {
        if let Some(b) = a.preplaced[r] {
            Loc::External {
                backend: b,
                buffer: g[r].buffer,
                offset: g[r].offset,
            }
        } else if offset[r] != u64::MAX {
            Loc::Compute {
                backend: a.backend[r],
                offset: offset[r],
            }
        } else {
            Loc::None
        }
    };
    let tensor = (0..n)
        .map(|i| loc_of_root(a.root[i]).advanced(a.offset_in_root[i]))
        .collect();
    let copy = (0..copies.len())
        .map(|c| Loc::Compute {
            backend: copies[c].to,
            offset: offset[n + c],
        })
        .collect();
    Allocation {
        tensor,
        copy,
        peak_bytes: allocs.iter().map(DynAlloc::max_size).collect(),
        naive_bytes: naive,
        in_place,
    }
}
