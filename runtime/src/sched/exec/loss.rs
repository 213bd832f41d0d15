//! Devices lost while running (a remote server killed or restarted, a
//! device gone).
//!
//! After a call into device `b` fails, its compute buffer is let go (the
//! memory may have been lost with the device, as a remote session's is)
//! and the device is asked again whether it runs the first node the failed
//! graph gave it. A device that now refuses it (a remote device whose
//! server cannot be reached says so, naming the server) is taken out of
//! service: later graphs route around it to the next devices, or fail in
//! strict mode naming the reason; graphs reading memory placed on it fail
//! naming the tensor, the device and the reason. Before each run a lost
//! device is asked again (the plugin paces its own reconnection: the
//! remote plugin retries a server no more often than its backoff allows);
//! once it accepts the node, it is back in service and gets a fresh compute
//! buffer when a graph needs one. The last device (the CPU every scheduler
//! ends with) is never taken out this way: nothing would be left to fall
//! back to.

use std::sync::Arc;

use backplane_abi::TensorDesc;
use backplane_abi::tensor::{MAX_SRC, NO_TENSOR};

use super::Scheduler;
use crate::graph::{Graph, TensorId};
use crate::host::HostTensors;
use crate::sched::plan::Plan;
use crate::sched::{BackendId, SchedError};

/// A device out of service after a failed call, and how to ask it again.
pub(super) struct Lost {
    /// The node it refused (with its sources), asked again before each run.
    signature: Vec<TensorDesc>,
}

/// `graph[node]` with its sources alone (sources first, then the node),
/// buffers and offsets cleared: a question any device can answer without
/// the graph's memory.
fn node_signature(graph: &[TensorDesc], node: usize) -> Vec<TensorDesc> {
    let clear = |d: &TensorDesc| TensorDesc {
        buffer: 0,
        offset: 0,
        view_offset: 0,
        src: [NO_TENSOR; MAX_SRC],
        view_src: NO_TENSOR,
        ..*d
    };
    let mut out = Vec::new();
    let mut n = clear(&graph[node]);
    n.src = graph[node].src;
    for slot in n.src.iter_mut() {
        if let Some(s) = usize::try_from(*slot).ok().filter(|&s| s < graph.len()) {
            *slot = out.len() as i32;
            out.push(clear(&graph[s]));
        }
    }
    out.push(n);
    out
}

/// `get_tensor of output 'name' of split k`: the call reading output `t`
/// back, naming the split that made it (a lost device's error names the
/// split whichever call failed).
pub(super) fn output_call(graph: &Graph, plan: &Plan, t: TensorId) -> String {
    let root = plan.assignment.root[t.index()];
    let split = plan
        .splits
        .iter()
        .position(|s| s.nodes.contains(&t.index()) || s.nodes.contains(&root));
    let of = split.map_or_else(String::new, |k| format!(" of split {k}"));
    format!("get_tensor of output '{}'{of}", graph.name(t))
}

impl Scheduler {
    /// Runs `graph` with host data for `inputs` only: every other leaf the
    /// graph reads must be placed ([`Scheduler::place_weights`]: weights,
    /// caches). Then reads each of `outputs` (tensors flagged OUTPUT, or
    /// placed ones) into its slice, which must be exactly its size. Nothing
    /// of the graph is held in host memory, so a model's weights are never
    /// copied to the host; per run the scheduler allocates only small
    /// bookkeeping (a flag per tensor, each split's descriptors).
    ///
    /// A device whose call fails and that then refuses the work it was
    /// given is out of service until it accepts it again (module
    /// `loss`): the failed run is an error naming the device and the call,
    /// later runs route around it.
    pub fn run(
        &mut self,
        graph: &Graph,
        inputs: &[(TensorId, &[u8])],
        outputs: &mut [(TensorId, &mut [u8])],
    ) -> Result<Arc<Plan>, SchedError> {
        self.ask_lost_devices_again();
        let result = self.run_once(graph, inputs, outputs);
        if let Err(e) = &result {
            self.after_failure(graph, e);
        }
        result
    }

    /// Runs `graph`: uploads its leaves that are not placed weights from
    /// `host`, computes split by split with copies between backends, waits
    /// for every backend, and reads its outputs (tensors flagged OUTPUT, or
    /// the last node when none is) back into `host`. Lost devices are
    /// handled as in [`Scheduler::run`].
    pub fn compute(
        &mut self,
        graph: &Graph,
        host: &mut HostTensors,
    ) -> Result<Arc<Plan>, SchedError> {
        self.ask_lost_devices_again();
        let result = self.compute_once(graph, host);
        if let Err(e) = &result {
            self.after_failure(graph, e);
        }
        result
    }

    /// Why backend `b` is out of service after a failed call, if it is
    /// (`None` also for a device taken out by a timeout: see
    /// [`crate::sched::Planner::failure`]).
    pub fn lost(&self, b: BackendId) -> Option<&str> {
        self.lost
            .get(b)
            .and_then(Option::as_ref)
            .and(self.planner.failure(b))
    }

    /// After `error` in a run of `graph`: lets the failed device's compute
    /// buffer go and takes the device out of service if it now refuses its
    /// first node of the graph.
    fn after_failure(&mut self, graph: &Graph, error: &SchedError) {
        let SchedError::Backend { backend, .. } = error else {
            return;
        };
        let Some(b) = self
            .planner
            .backend_names()
            .iter()
            .position(|n| n == backend)
        else {
            return;
        };
        if self.watchdogs[b].is_stuck() || self.lost[b].is_some() {
            return;
        }
        self.compute[b] = None;
        self.buffers_generation += 1;
        if b + 1 == self.devices.len() {
            return;
        }
        let Ok(plan) = self.planner.plan_lenient(graph) else {
            return;
        };
        let Some(node) = plan
            .splits
            .iter()
            .find(|s| s.backend == b)
            .and_then(|s| s.nodes.first().copied())
        else {
            return;
        };
        let signature = node_signature(graph.tensors(), node);
        let verdict = self.devices[b].supports_op(&signature, signature.len() - 1);
        if verdict.is_supported() {
            return;
        }
        let why = verdict.reason().unwrap_or("refused").to_string();
        tracing::warn!(backend = %backend, "device out of service after a failed call: {why}");
        if self
            .planner
            .mark_failed(b, format!("lost after a failed call: {why}"))
            .is_ok()
        {
            self.lost[b] = Some(Lost { signature });
        }
    }

    /// Asks each lost device again about the node it refused; one that
    /// accepts it is back in service.
    fn ask_lost_devices_again(&mut self) {
        for b in 0..self.devices.len() {
            let Some(lost) = &self.lost[b] else {
                continue;
            };
            let verdict = self.devices[b].supports_op(&lost.signature, lost.signature.len() - 1);
            if verdict.is_supported() {
                tracing::info!(backend = %self.name(b), "device back in service");
                self.lost[b] = None;
                self.planner.return_to_service(b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backplane_abi::{DType, Op};

    #[test]
    fn node_signature_keeps_the_node_and_its_sources_renumbered_without_memory() {
        let leaf = |buffer| {
            let mut d = TensorDesc::new(DType::F32, [4, 1, 1, 1]);
            d.buffer = buffer;
            d.offset = 64;
            d
        };
        let mut add = TensorDesc::new(DType::F32, [4, 1, 1, 1]);
        add.op = Op::Add.code();
        add.src[0] = 2;
        add.src[1] = 0;
        add.buffer = 9;
        let graph = [leaf(7), leaf(8), leaf(7), add];
        let sig = node_signature(&graph, 3);
        assert_eq!(sig.len(), 3);
        assert_eq!(sig[2].src[0], 0);
        assert_eq!(sig[2].src[1], 1);
        assert_eq!(sig[2].src[2], NO_TENSOR);
        assert_eq!(sig[2].op(), Ok(Op::Add));
        assert!(sig.iter().all(|d| d.buffer == 0 && d.offset == 0));
    }
}
