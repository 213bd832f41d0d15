//! The plan cache: plans kept under a hash of the graph's structure (ops,
//! types, shapes, strides, params, sources, views, flags, pre-placed
//! buffers, pins), never its data. A hit is confirmed by comparing the
//! descriptors, so a hash collision can never return a wrong plan.
//!
//! The last plan returned is also kept under the graph's stamp
//! ([`crate::Graph::stamp`], new after every change to a graph): the same
//! graph object run again (a decode step) finds it without hashing and
//! comparing its descriptors.

use std::sync::Arc;

use backplane_abi::TensorDesc;

use super::BackendId;
use super::Plan;

/// FxHash's multiply-rotate step.
#[inline(always)]
fn fx(h: u64, w: u64) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    (h.rotate_left(5) ^ w).wrapping_mul(K)
}

/// The words of a descriptor that planning depends on (all of them).
#[inline(always)]
fn words(d: &TensorDesc) -> [u64; 28] {
    let p =
        |k: usize| u64::from(d.op_params[k] as u32) | u64::from(d.op_params[k + 1] as u32) << 32;
    let s = |k: usize| u64::from(d.src[k] as u32) | u64::from(d.src[k + 1] as u32) << 32;
    [
        u64::from(d.dtype) | u64::from(d.op) << 32,
        d.ne[0] as u64,
        d.ne[1] as u64,
        d.ne[2] as u64,
        d.ne[3] as u64,
        d.nb[0],
        d.nb[1],
        d.nb[2],
        d.nb[3],
        p(0),
        p(2),
        p(4),
        p(6),
        p(8),
        p(10),
        p(12),
        p(14),
        s(0),
        s(2),
        s(4),
        s(6),
        s(8),
        u64::from(d.view_src as u32) | u64::from(d.flags) << 32,
        d.view_offset,
        d.buffer,
        d.offset,
        0,
        0,
    ]
}

/// Hash of everything about `graph` that planning depends on. Four
/// independent lanes keep the multiplier busy (about 10 ns per tensor).
pub fn structure_hash(graph: &[TensorDesc], pins: &[(usize, BackendId)]) -> u64 {
    let mut l = [graph.len() as u64, 1, 2, 3];
    for d in graph {
        let w = words(d);
        for c in w.chunks_exact(4) {
            l[0] = fx(l[0], c[0]);
            l[1] = fx(l[1], c[1]);
            l[2] = fx(l[2], c[2]);
            l[3] = fx(l[3], c[3]);
        }
    }
    for &(t, b) in pins {
        l[0] = fx(l[0], t as u64);
        l[1] = fx(l[1], b as u64);
    }
    fx(fx(fx(l[0], l[1]), l[2]), l[3])
}

struct CacheEntry {
    key: u64,
    graph: Vec<TensorDesc>,
    pins: Vec<(usize, BackendId)>,
    plan: Arc<Plan>,
    last_used: u64,
}

/// The last plan returned, under the stamp of its graph and the pins.
struct LastPlan {
    stamp: u64,
    pins: Vec<(usize, BackendId)>,
    plan: Arc<Plan>,
}

/// Plans by graph structure, least recently used dropped first.
pub struct PlanCache {
    capacity: usize,
    entries: Vec<CacheEntry>,
    clock: u64,
    last: Option<LastPlan>,
}

impl PlanCache {
    /// A cache of at most `capacity` plans (0: nothing is kept).
    pub fn new(capacity: usize) -> PlanCache {
        PlanCache {
            capacity,
            entries: Vec::new(),
            clock: 0,
            last: None,
        }
    }

    /// The last plan returned, if it was for the graph with this stamp
    /// (never for stamp 0, an empty graph) and these pins.
    pub fn last_for(&self, stamp: u64, pins: &[(usize, BackendId)]) -> Option<Arc<Plan>> {
        self.last
            .as_ref()
            .filter(|l| stamp != 0 && l.stamp == stamp && l.pins == pins)
            .map(|l| l.plan.clone())
    }

    /// Keeps `plan` as the last one returned, for the graph with `stamp`.
    pub fn remember(&mut self, stamp: u64, pins: &[(usize, BackendId)], plan: &Arc<Plan>) {
        if self.capacity == 0 {
            return;
        }
        match &mut self.last {
            Some(l) if l.stamp == stamp && l.pins == pins => l.plan = plan.clone(),
            _ => {
                self.last = Some(LastPlan {
                    stamp,
                    pins: pins.to_vec(),
                    plan: plan.clone(),
                })
            }
        }
    }

    /// The plan stored for this structure, if any.
    pub fn get(
        &mut self,
        key: u64,
        graph: &[TensorDesc],
        pins: &[(usize, BackendId)],
    ) -> Option<Arc<Plan>> {
        self.clock += 1;
        let clock = self.clock;
        let e = self
            .entries
            .iter_mut()
            .find(|e| e.key == key && e.pins == pins && e.graph == graph)?;
        e.last_used = clock;
        Some(e.plan.clone())
    }

    /// Stores a plan, dropping the least recently used one when full.
    pub fn insert(
        &mut self,
        key: u64,
        graph: &[TensorDesc],
        pins: &[(usize, BackendId)],
        plan: Arc<Plan>,
    ) {
        if self.capacity == 0 {
            return;
        }
        if self.entries.len() >= self.capacity
            && let Some(k) = (0..self.entries.len()).min_by_key(|&k| self.entries[k].last_used)
        {
            self.entries.swap_remove(k);
        }
        self.clock += 1;
        self.entries.push(CacheEntry {
            key,
            graph: graph.to_vec(),
            pins: pins.to_vec(),
            plan,
            last_used: self.clock,
        });
    }

    /// Plans stored.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops every plan.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.last = None;
    }
}
