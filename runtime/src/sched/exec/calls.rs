//! A run's splits, in order: the copies between backends, each split's
//! `graph_compute`, and the waits; every call that may hang goes through
//! the device's call thread ([`crate::sched::watchdog`]) when the device
//! timeout is on.

use std::sync::Arc;
use std::time::Instant;

use backplane_abi::TensorDesc;
use backplane_abi::plugin::PluginError;

use super::{Scheduler, plugin_err};
use crate::graph::{Graph, TensorId};
use crate::registry::Stream;
use crate::sched::plan::Plan;
use crate::sched::split::Entry;
use crate::sched::watchdog::CallError;
use crate::sched::{BackendId, SchedError, data_err};

/// A plan's split descriptors with buffer keys and compute offsets
/// replaced by the plugins' buffer ids and offsets, as `graph_compute`
/// takes them: built once per plan and set of buffers, not per run.
pub(super) struct BoundSplits {
    /// The plan (kept alive, so its address names it).
    plan: Arc<Plan>,
    /// [`Scheduler::buffers_generation`] when bound.
    generation: u64,
    /// Per split.
    splits: Vec<Arc<[TensorDesc]>>,
}

impl Scheduler {
    /// The descriptors of `plan`'s splits bound to this scheduler's
    /// buffers, from the last run when nothing changed since.
    fn bound_splits(&mut self, plan: &Arc<Plan>) -> Vec<Arc<[TensorDesc]>> {
        if let Some(b) = &self.bound
            && Arc::ptr_eq(&b.plan, plan)
            && b.generation == self.buffers_generation
        {
            return b.splits.clone();
        }
        let alloc = &plan.allocation;
        let splits: Vec<Arc<[TensorDesc]>> = plan
            .splits
            .iter()
            .map(|split| {
                split
                    .graph
                    .iter()
                    .zip(&split.entries)
                    .map(|(d, e)| match *e {
                        Entry::Tensor(t) => self.bound(d, alloc.tensor[t]),
                        Entry::Copy(c) => self.bound(d, alloc.copy[c]),
                    })
                    .collect()
            })
            .collect();
        self.bound = Some(BoundSplits {
            plan: Arc::clone(plan),
            generation: self.buffers_generation,
            splits: splits.clone(),
        });
        splits
    }

    /// Computes the plan's splits in order, with their copies, then waits
    /// for every backend used.
    pub(super) fn run_splits(&mut self, graph: &Graph, plan: &Arc<Plan>) -> Result<(), SchedError> {
        let g = graph.tensors();
        let bound = self.bound_splits(plan);
        let nb = self.devices.len();
        let mut pending: Vec<Vec<BackendId>> = vec![Vec::new(); nb];
        let mut used = vec![false; nb];
        // The last split's backend, when no event is recorded after it, is
        // synchronized in the same call as that split's compute (one trip
        // to the device's call thread instead of two).
        let synced = plan
            .splits
            .last()
            .map(|s| s.backend)
            .filter(|&b| self.events[b].is_none());
        for (k, split) in plan.splits.iter().enumerate() {
            let b = split.backend;
            for r in std::mem::take(&mut pending[b]) {
                self.wait_for(r, b)?;
            }
            let t0 = Instant::now();
            for &c in &split.copies {
                self.copy(graph, plan, c, &mut pending)?;
            }
            self.stats.copy_time += t0.elapsed();
            let descs = Arc::clone(&bound[k]);
            let first = split.nodes[0];
            let then_sync = k + 1 == plan.splits.len() && synced == Some(b);
            let what = || {
                format!(
                    "graph_compute of split {k} ({} nodes from node {first} '{}', {}){}",
                    split.nodes.len(),
                    graph.name(TensorId(first)),
                    g[first]
                        .op()
                        .map_or_else(|e| e.to_string(), |o| o.to_string()),
                    if then_sync { ", then synchronize" } else { "" }
                )
            };
            self.idle[b] = false;
            self.device_call(b, what, move |s| {
                s.graph_compute(&descs)?;
                if then_sync { s.synchronize() } else { Ok(()) }
            })?;
            // Without async ops, graph_compute returns when the work is done.
            self.idle[b] = then_sync || !self.caps[b].async_ops;
            used[b] = true;
            if let Some(ev) = &self.events[b] {
                self.streams[b]
                    .event_record(ev)
                    .map_err(|e| plugin_err(self.name(b), "event_record", e))?;
            }
        }
        for b in 0..nb {
            if (used[b] && synced != Some(b)) || !pending[b].is_empty() {
                self.synchronize(b)?;
            }
            for r in std::mem::take(&mut pending[b]) {
                self.synchronize(r)?;
            }
        }
        Ok(())
    }

    /// Calls `f` on backend `b`'s stream, bounded by the device timeout;
    /// a call that times out takes the device out of service.
    fn device_call<R: Send + 'static>(
        &mut self,
        b: BackendId,
        what: impl FnOnce() -> String,
        f: impl FnOnce(&Stream) -> Result<R, PluginError> + Send + 'static,
    ) -> Result<R, SchedError> {
        let t0 = Instant::now();
        let result = match self.planner.options().device_timeout {
            None => f(&self.streams[b]),
            Some(limit) => {
                let stream = Arc::clone(&self.streams[b]);
                let label = self.name(b).to_string();
                match self.watchdogs[b].call(&label, limit, move || f(&stream)) {
                    Ok(r) => r,
                    Err(e) => {
                        let call = what();
                        let reason = match e {
                            CallError::TimedOut => {
                                format!("{call} timed out after {} s", limit.as_secs_f64())
                            }
                            CallError::Stuck => "an earlier call timed out".to_string(),
                        };
                        tracing::error!(backend = %label, "device out of service: {reason}");
                        self.planner
                            .mark_failed(b, format!("out of service: {reason}"))?;
                        self.stats.backend_time += t0.elapsed();
                        return Err(SchedError::Timeout {
                            backend: label,
                            call,
                            seconds: limit.as_secs_f64(),
                        });
                    }
                }
            }
        };
        self.stats.backend_time += t0.elapsed();
        result.map_err(|e| plugin_err(self.name(b), what(), e))
    }

    /// Waits for backend `b`'s queued work; nothing to do (and no call)
    /// when nothing was queued since its last synchronize.
    fn synchronize(&mut self, b: BackendId) -> Result<(), SchedError> {
        if self.idle[b] {
            return Ok(());
        }
        self.device_call(b, || "synchronize".to_string(), |s| s.synchronize())?;
        self.idle[b] = true;
        Ok(())
    }

    /// Makes backend `m` wait until backend `r`'s queued work (reading `m`'s memory) is done.
    fn wait_for(&mut self, r: BackendId, m: BackendId) -> Result<(), SchedError> {
        if let (Some(ev), true) = (&self.events[r], self.caps[m].events) {
            self.idle[m] = false;
            self.streams[r]
                .event_record(ev)
                .map_err(|e| plugin_err(self.name(r), "event_record", e))?;
            self.streams[m]
                .event_wait(ev)
                .map_err(|e| plugin_err(self.name(m), "event_wait", e))
        } else {
            self.synchronize(r)
        }
    }

    /// Copies plan copy `c` into its backend: queued on the destination
    /// stream when both sides are one plugin offering async copies and
    /// events, else synchronously (through host memory when the plugins differ).
    fn copy(
        &mut self,
        graph: &Graph,
        plan: &Plan,
        c: usize,
        pending: &mut [Vec<BackendId>],
    ) -> Result<(), SchedError> {
        let copy = &plan.copies[c];
        let (m, to) = (copy.from, copy.to);
        let src_loc = plan.allocation.tensor[copy.tensor];
        let dst_loc = plan.allocation.copy[c];
        let src = self.bound(&graph.tensors()[copy.tensor], src_loc);
        let dst = self.bound(&copy.desc, dst_loc);
        self.stats.copies += 1;
        self.stats.bytes_copied += copy.bytes;
        let from_name = self.name(m).to_string();
        let what = || {
            format!(
                "copy of '{}' ({} bytes) from {from_name}",
                graph.name(TensorId(copy.tensor)),
                copy.bytes,
            )
        };
        let same_plugin = self.devices[m].backend() == self.devices[to].backend();
        if same_plugin && self.caps[to].async_ops && self.caps[to].events {
            if let Some(ev) = &self.events[m] {
                self.idle[to] = false;
                self.streams[to]
                    .event_wait(ev)
                    .map_err(|e| plugin_err(self.name(to), "event_wait", e))?;
            } else {
                self.synchronize(m)?;
            }
            self.idle[to] = false;
            if self.streams[to]
                .cpy_tensor_async(&src, &dst)
                .map_err(|e| plugin_err(self.name(to), what(), e))?
            {
                pending[m].push(to);
                return Ok(());
            }
        }
        self.synchronize(m)?;
        self.synchronize(to)?;
        let src_buf = self.buffer_at(src_loc).ok_or_else(|| {
            data_err(
                graph,
                TensorId(copy.tensor),
                "copy source has no memory".into(),
            )
        })?;
        let dst_buf = self.buffer_at(dst_loc).ok_or_else(|| {
            data_err(
                graph,
                TensorId(copy.tensor),
                "copy destination has no memory".into(),
            )
        })?;
        if same_plugin
            && dst_buf
                .cpy_tensor(&src, &dst)
                .map_err(|e| plugin_err(self.name(to), what(), e))?
        {
            return Ok(());
        }
        let mut tmp = vec![0u8; copy.bytes as usize];
        src_buf
            .get_tensor(&src, 0, &mut tmp)
            .map_err(|e| plugin_err(self.name(m), what(), e))?;
        dst_buf
            .set_tensor(&dst, 0, &tmp)
            .map_err(|e| plugin_err(self.name(to), what(), e))
    }
}
