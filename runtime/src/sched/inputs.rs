//! Graph inputs in the memory of the backend that reads them, and their
//! writes batched into one transfer per backend.
//!
//! A graph input starts on the last backend (host memory). When every
//! node reading it runs on one backend that cannot read host memory (a
//! GPU), the input moves into that backend's memory: the host writes it
//! there directly instead of into host memory followed by a copy before
//! the split. Inputs are leaves, placed first in a compute buffer and
//! never freed, so a backend's inputs lie side by side; the host then
//! writes them all with one `set_tensor` over their joint range (a decode
//! step's positions, KV indices and mask: one transfer instead of three
//! copies, each a trip through both plugins).

use backplane_abi::{DType, TensorDesc};

use super::BackendId;
use super::alloc::{Allocation, Loc};
use super::assignment::Cause;
use super::placement::BackendFacts;
use super::split::Copy;

/// Marks a tensor not assigned yet.
const NONE: BackendId = usize::MAX;

/// Moves each graph input (`Cause::Input`, on `last`) that only nodes of one
/// backend `b` read, and that `b` cannot read in host memory, into `b`'s
/// memory. `compute` lists the compute nodes, `sources` gives a node's
/// sources. An input some node writes in place stays where it is (that
/// node's placement already depends on it).
pub(crate) fn move_to_readers(
    sources: impl Fn(usize) -> Vec<usize>,
    compute: &[usize],
    root: &[usize],
    be: &mut [BackendId],
    cause: &mut [Cause],
    facts: &BackendFacts,
    last: BackendId,
) {
    let n = root.len();
    // Per input: the one backend reading it so far, NONE, or `last` when
    // it must stay (several readers' backends, written in place).
    let mut reader = vec![NONE; n];
    let keep = |r: usize, b: BackendId, reader: &mut Vec<BackendId>| {
        reader[r] = match reader[r] {
            NONE => b,
            cur if cur == b => b,
            _ => last,
        };
    };
    for &j in compute {
        if root[j] != j && cause[root[j]] == Cause::Input {
            keep(root[j], last, &mut reader);
        }
        for s in sources(j) {
            let r = root[s];
            if cause[r] == Cause::Input {
                keep(r, be[j], &mut reader);
            }
        }
    }
    for r in 0..n {
        let b = reader[r];
        if cause[r] == Cause::Input && b != NONE && b != last && !facts.can_access(b, last) {
            be[r] = b;
            cause[r] = Cause::InputAtReader;
        }
    }
}

/// One `set_tensor` writing the inputs `members` of a backend at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputWrite {
    /// The backend whose compute buffer is written.
    pub backend: BackendId,
    /// First byte of the range in that buffer.
    pub offset: u64,
    /// Bytes written (the members' bytes and the alignment gaps between
    /// them, which belong to no tensor).
    pub len: u64,
    /// The inputs, `(tensor, byte offset in the range)`.
    pub members: Vec<(usize, u64)>,
}

impl InputWrite {
    /// The range as a descriptor of `len` bytes (to bind and write).
    pub fn desc(&self) -> TensorDesc {
        TensorDesc::new(DType::I8, [self.len as i64, 1, 1, 1])
    }
}

/// How the host writes `inputs` each run: per backend whose memory is not
/// host memory, the inputs in its compute buffer as one write when nothing
/// else lies in their joint range; every other input alone.
pub(crate) fn plan_writes(
    g: &[TensorDesc],
    inputs: &[usize],
    root: &[usize],
    allocation: &Allocation,
    copies: &[Copy],
    facts: &BackendFacts,
) -> Vec<InputWrite> {
    let alone = |i: usize| {
        let Loc::Compute { backend, offset } = allocation.tensor[i] else {
            return None;
        };
        Some(InputWrite {
            backend,
            offset,
            len: g[i].nbytes(),
            members: vec![(i, 0)],
        })
    };
    let mut writes = Vec::new();
    for b in 0..facts.len() {
        let on_b: Vec<usize> = inputs
            .iter()
            .copied()
            .filter(
                |&i| matches!(allocation.tensor[i], Loc::Compute { backend, .. } if backend == b),
            )
            .collect();
        if on_b.len() < 2 || facts.host[b] {
            writes.extend(on_b.into_iter().filter_map(alone));
            continue;
        }
        let at = |i: usize| match allocation.tensor[i] {
            Loc::Compute { offset, .. } => offset,
            _ => unreachable!("filtered to compute memory"),
        };
        let lo = on_b.iter().map(|&i| at(i)).min().unwrap_or(0);
        let hi = on_b
            .iter()
            .map(|&i| at(i) + g[i].nbytes())
            .max()
            .unwrap_or(0);
        // Rounded to 4 bytes where that stays clear of other tensors: some
        // devices copy only whole 32-bit words.
        let hi4 = hi.next_multiple_of(4);
        let member = |t: usize| on_b.contains(&root[t]);
        let clear = |end: u64| {
            let tensors =
                (0..g.len())
                    .filter(|&t| !member(t))
                    .filter_map(|t| match allocation.tensor[t] {
                        Loc::Compute { backend, offset } if backend == b => {
                            Some((offset, g[t].nbytes()))
                        }
                        _ => None,
                    });
            let copied = copies
                .iter()
                .zip(&allocation.copy)
                .filter_map(|(c, l)| match *l {
                    Loc::Compute { backend, offset } if backend == b => Some((offset, c.bytes)),
                    _ => None,
                });
            tensors
                .chain(copied)
                .all(|(o, n)| n == 0 || o + n <= lo || o >= end)
        };
        let end = if clear(hi4) && hi4 <= allocation.peak_bytes[b] {
            hi4
        } else if clear(hi) {
            hi
        } else {
            writes.extend(on_b.into_iter().filter_map(alone));
            continue;
        };
        writes.push(InputWrite {
            backend: b,
            offset: lo,
            len: end - lo,
            members: on_b.iter().map(|&i| (i, at(i) - lo)).collect(),
        });
    }
    writes
}
