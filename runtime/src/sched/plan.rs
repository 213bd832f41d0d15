//! Assigning every tensor of a graph to a backend, in the passes of ggml's
//! `ggml_backend_sched_split_graph`, and the [`Planner`] that runs the whole
//! pipeline (assignment, splits, allocation) behind a plan cache.

use std::collections::HashMap;
use std::sync::Arc;

use backplane_abi::{Op, TensorDesc, flags};

use super::alloc::{Loc, allocate};
use super::cache::{PlanCache, structure_hash};
use super::placement::{BackendFacts, Placement};
use super::split::build_splits;
use super::{BackendId, SchedError, SchedOptions};
use crate::graph::Graph;

pub use super::assignment::{Assignment, Cause, Decline};
pub use super::{Plan, PlanStats};

/// Marks a tensor not assigned yet.
const NONE: BackendId = usize::MAX;

/// What kind of tensor an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Leaf,
    View,
    Compute,
}

/// Memoised `supports_op` answers: each (node, backend) asked at most once.
pub(crate) struct Verdicts {
    nb: usize,
    state: Vec<u8>,
    reasons: HashMap<usize, String>,
    /// Per backend: why it refuses every node (it failed), if it does.
    failed: Vec<Option<String>>,
}

impl Verdicts {
    fn new(n: usize, nb: usize, failed: &[Option<String>]) -> Verdicts {
        Verdicts {
            nb,
            state: vec![0; n * nb],
            reasons: HashMap::new(),
            failed: failed.to_vec(),
        }
    }

    fn supports(
        &mut self,
        backends: &[Box<dyn Placement + Send + Sync>],
        g: &[TensorDesc],
        b: usize,
        i: usize,
    ) -> bool {
        let k = i * self.nb + b;
        match self.state[k] {
            1 => true,
            2 => false,
            _ if self.failed[b].is_some() => {
                self.state[k] = 2;
                let why = self.failed[b].clone().unwrap_or_default();
                self.reasons.insert(k, why);
                false
            }
            _ => {
                let v = backends[b].supports_op(g, i);
                let ok = v.is_supported();
                self.state[k] = if ok { 1 } else { 2 };
                if let Some(r) = v.reason() {
                    self.reasons.insert(k, r.to_string());
                }
                ok
            }
        }
    }

    fn reason(&self, b: usize, i: usize) -> String {
        self.reasons
            .get(&(i * self.nb + b))
            .cloned()
            .unwrap_or_else(|| "refused".into())
    }
}

/// Plans graphs over a fixed list of backends (priority order, CPU last),
/// caching plans by graph structure.
pub struct Planner {
    backends: Vec<Box<dyn Placement + Send + Sync>>,
    pub(crate) facts: BackendFacts,
    options: SchedOptions,
    cache: PlanCache,
    buffers: HashMap<u64, BackendId>,
    /// Per backend: why it is out of service (a call into it timed out).
    failed: Vec<Option<String>>,
    pins: Vec<(usize, BackendId)>,
    plans_built: u64,
    cache_hits: u64,
}

impl Planner {
    /// A planner over `backends`, highest priority first.
    pub fn new(
        backends: Vec<Box<dyn Placement + Send + Sync>>,
        options: SchedOptions,
    ) -> Result<Planner, SchedError> {
        if backends.is_empty() {
            return Err(SchedError::NoBackends);
        }
        let facts = BackendFacts::read(&backends);
        let cache = PlanCache::new(options.cache_capacity);
        Ok(Planner {
            failed: vec![None; backends.len()],
            backends,
            facts,
            options,
            cache,
            buffers: HashMap::new(),
            pins: Vec::new(),
            plans_built: 0,
            cache_hits: 0,
        })
    }

    /// The options.
    pub fn options(&self) -> &SchedOptions {
        &self.options
    }

    /// Changes the options (strictness applies at once; the rest to plans
    /// made from now on, so the cache is cleared).
    pub fn set_options(&mut self, options: SchedOptions) {
        if options.offload_min_batch != self.options.offload_min_batch
            || options.cache_capacity != self.options.cache_capacity
        {
            self.cache = PlanCache::new(options.cache_capacity);
        }
        self.options = options;
    }

    /// Backend names, in priority order.
    pub fn backend_names(&self) -> &[String] {
        &self.facts.names
    }

    /// Says that the buffer with key `id` (as written into
    /// `TensorDesc::buffer`) belongs to backend `backend`: leaves in it are
    /// pre-placed there. A key names one buffer of one backend: registering
    /// a key already held by another backend is an error (plugins number
    /// their buffers independently, so raw plugin ids of two backends may
    /// be equal; [`crate::sched::Scheduler::place_weights`] hands out keys
    /// unique in the host).
    pub fn register_buffer(&mut self, id: u64, backend: BackendId) -> Result<(), SchedError> {
        self.check_backend(backend)?;
        if id == 0 {
            return Err(SchedError::InvalidGraph {
                node: 0,
                reason: "buffer key 0 means 'no buffer' and cannot be registered".into(),
            });
        }
        match self.buffers.get(&id) {
            Some(&old) if old != backend => Err(SchedError::BufferKeyClash {
                key: id,
                registered: self.facts.names[old].clone(),
                asked: self.facts.names[backend].clone(),
            }),
            Some(_) => Ok(()),
            None => {
                self.buffers.insert(id, backend);
                Ok(())
            }
        }
    }

    /// Takes backend `backend` out of service: from now on it refuses every
    /// node with `reason`, so graphs route around it (or fail in strict
    /// mode, naming the reason). Cached plans are dropped.
    pub fn mark_failed(&mut self, backend: BackendId, reason: String) -> Result<(), SchedError> {
        self.check_backend(backend)?;
        self.failed[backend] = Some(reason);
        self.cache.clear();
        Ok(())
    }

    /// Puts backend `backend` back in service after [`Planner::mark_failed`]
    /// (a lost device that answers again). Cached plans are dropped.
    pub fn return_to_service(&mut self, backend: BackendId) {
        if let Some(f) = self.failed.get_mut(backend)
            && f.take().is_some()
        {
            self.cache.clear();
        }
    }

    /// Why backend `backend` is out of service, if it is.
    pub fn failure(&self, backend: BackendId) -> Option<&str> {
        self.failed.get(backend).and_then(|f| f.as_deref())
    }

    /// Forgets a buffer registered with [`Planner::register_buffer`].
    pub fn unregister_buffer(&mut self, id: u64) {
        if self.buffers.remove(&id).is_some() {
            self.cache.clear();
        }
    }

    /// Pins tensor `t` (by index) to `backend` in every graph planned from now on.
    pub fn pin(&mut self, t: usize, backend: BackendId) -> Result<(), SchedError> {
        self.check_backend(backend)?;
        self.pins.retain(|&(p, _)| p != t);
        self.pins.push((t, backend));
        self.pins.sort_unstable();
        Ok(())
    }

    /// Removes every pin.
    pub fn clear_pins(&mut self) {
        self.pins.clear();
    }

    /// Full planning passes run so far (cache misses).
    pub fn plans_built(&self) -> u64 {
        self.plans_built
    }

    /// Plans served from the cache so far.
    pub fn cache_hits(&self) -> u64 {
        self.cache_hits
    }

    fn check_backend(&self, backend: BackendId) -> Result<(), SchedError> {
        if backend < self.backends.len() {
            Ok(())
        } else {
            Err(SchedError::UnknownBackend {
                index: backend,
                count: self.backends.len(),
            })
        }
    }

    /// The plan for `graph`: from the cache when a graph of the same
    /// structure was planned before, else planned now. In strict mode, an
    /// error listing the nodes that would fall back.
    pub fn plan(&mut self, graph: &Graph) -> Result<Arc<Plan>, SchedError> {
        let plan = self.plan_lenient(graph)?;
        if self.options.strict && !plan.fallbacks.is_empty() {
            return Err(SchedError::Fallback(plan.fallback_list(graph)));
        }
        Ok(plan)
    }

    /// Like [`Planner::plan`] but never refuses for fallbacks (for explaining).
    pub fn plan_lenient(&mut self, graph: &Graph) -> Result<Arc<Plan>, SchedError> {
        let stamp = graph.stamp();
        if let Some(plan) = self.cache.last_for(stamp, &self.pins) {
            self.cache_hits += 1;
            return Ok(plan);
        }
        let g = graph.tensors();
        let key = structure_hash(g, &self.pins);
        let plan = match self.cache.get(key, g, &self.pins) {
            Some(plan) => {
                self.cache_hits += 1;
                plan
            }
            None => {
                let plan = Arc::new(self.build(graph)?);
                self.plans_built += 1;
                self.cache.insert(key, g, &self.pins, plan.clone());
                plan
            }
        };
        self.cache.remember(stamp, &self.pins, &plan);
        Ok(plan)
    }

    fn build(&self, graph: &Graph) -> Result<Plan, SchedError> {
        let g = graph.tensors();
        let assignment = self.assign(graph)?;
        let (splits, copies) = build_splits(g, &assignment, &self.facts);
        let allocation = allocate(g, &assignment, &splits, &copies, &self.backends);
        let nb = self.backends.len();
        let mut nodes_per_backend = vec![0; nb];
        for s in &splits {
            nodes_per_backend[s.backend] += s.nodes.len();
        }
        let fallbacks = (0..g.len())
            .filter(|&i| {
                assignment.declined[i]
                    .iter()
                    .any(|(_, d)| matches!(d, Decline::Refused(_)))
            })
            .collect();
        let stats = PlanStats {
            splits: splits.len(),
            copies: copies.len(),
            copy_bytes: copies.iter().map(|c| c.bytes).sum(),
            nodes_per_backend,
            peak_bytes: allocation.peak_bytes.clone(),
            naive_bytes: allocation.naive_bytes.clone(),
            in_place: allocation.in_place,
        };
        let inputs: Vec<usize> = (0..g.len())
            .filter(|&i| {
                g[i].op().is_ok_and(|op| op == Op::None)
                    && assignment.root[i] == i
                    && assignment.preplaced[i].is_none()
                    && allocation.tensor[i] != Loc::None
            })
            .collect();
        let input_writes = super::inputs::plan_writes(
            g,
            &inputs,
            &assignment.root,
            &allocation,
            &copies,
            &self.facts,
        );
        Ok(Plan {
            inputs,
            input_writes,
            assignment,
            splits,
            copies,
            allocation,
            stats,
            fallbacks,
            backend_names: self.facts.names.clone(),
        })
    }

    /// Whether backend `b` wants node `i` although its weights are in host memory.
    fn wants_offload(&self, g: &[TensorDesc], b: usize, i: usize) -> bool {
        let d = &g[i];
        let op = d.op().unwrap_or(Op::None);
        let batch = if op == Op::MulMatId { d.ne[2] } else { d.ne[1] };
        let by_batch =
            op != Op::GetRows && self.options.offload_min_batch.is_some_and(|m| batch >= m);
        by_batch || self.backends[b].offload_op(g, i)
    }

    /// Runs the assignment passes.
    pub(crate) fn assign(&self, graph: &Graph) -> Result<Assignment, SchedError> {
        let g = graph.tensors();
        let n = g.len();
        let nb = self.backends.len();
        let last = nb - 1;
        let facts = &self.facts;
        let kinds = classify(g)?;
        let mut root = vec![0usize; n];
        let mut offset_in_root = vec![0u64; n];
        let mut preplaced = vec![None; n];
        for i in 0..n {
            if let Some(v) = g[i].view_source() {
                root[i] = root[v];
                offset_in_root[i] = offset_in_root[v] + g[i].view_offset;
                preplaced[i] = preplaced[v];
            } else {
                root[i] = i;
                if g[i].buffer != 0 {
                    let Some(&b) = self.buffers.get(&g[i].buffer) else {
                        return Err(SchedError::InvalidGraph {
                            node: i,
                            reason: format!(
                                "buffer id {:#x} is not registered with this scheduler",
                                g[i].buffer
                            ),
                        });
                    };
                    if let Some(why) = &self.failed[b] {
                        return Err(SchedError::InvalidGraph {
                            node: i,
                            reason: format!(
                                "'{}' lives in the memory of {}, which is out of service: {why}",
                                graph.name(crate::TensorId(i)),
                                self.facts.names[b]
                            ),
                        });
                    }
                    preplaced[i] = Some(b);
                }
            }
        }
        let mut v = Verdicts::new(n, nb, &self.failed);
        let mut be = vec![NONE; n];
        let mut cause = vec![Cause::Unassigned; n];
        let name = |i: usize| graph.name(crate::TensorId(i)).to_string();
        let op_of = |i: usize| g[i].op().unwrap_or(Op::None);

        // Pass 1: pins, pre-placed memory, inputs, ops reading weights.
        let mut pins = vec![NONE; n];
        for &(t, b) in &self.pins {
            if t < n {
                pins[t] = b;
            }
        }
        for i in 0..n {
            if pins[i] != NONE {
                let b = pins[i];
                if kinds[i] == Kind::Compute && !v.supports(&self.backends, g, b, i) {
                    return Err(SchedError::PinRefused {
                        node: i,
                        op: op_of(i),
                        backend: facts.names[b].clone(),
                        reason: v.reason(b, i),
                    });
                }
                if kinds[i] != Kind::View {
                    be[i] = b;
                    cause[i] = Cause::Pinned;
                }
                continue;
            }
            match kinds[i] {
                Kind::Leaf => {
                    if let Some(b) = preplaced[i] {
                        be[i] = b;
                        cause[i] = Cause::Preplaced;
                    } else if g[i].has_flag(flags::INPUT) {
                        be[i] = last;
                        cause[i] = Cause::Input;
                    }
                }
                Kind::View => {}
                Kind::Compute => {
                    if root[i] != i {
                        if let Some(m) = preplaced[root[i]] {
                            let b = self
                                .reach(&mut v, g, i, m)
                                .ok_or_else(|| self.unassignable(graph, &mut v, i))?;
                            be[i] = b;
                            cause[i] = Cause::InPlace { root: root[i] };
                        }
                        continue;
                    }
                    if op_of(i) == Op::Rope {
                        continue; // its frequency factors are too small to decide by
                    }
                    for s in graph.sources(crate::TensorId(i)).map(|s| s.0) {
                        let r = root[s];
                        let Some(m) = preplaced[r] else { continue };
                        if !g[r].has_flag(flags::WEIGHT) {
                            continue;
                        }
                        let Some(wb) = self.reach(&mut v, g, i, m) else {
                            continue;
                        };
                        if facts.host[m] && facts.is_cpu[wb] {
                            let off = (0..wb).find(|&b| {
                                !facts.is_cpu[b]
                                    && v.supports(&self.backends, g, b, i)
                                    && self.wants_offload(g, b, i)
                            });
                            if let Some(b) = off {
                                be[i] = b;
                                cause[i] = Cause::Offload { src: s };
                                break;
                            }
                        }
                        be[i] = wb;
                        cause[i] = Cause::Weights { src: s };
                        break;
                    }
                }
            }
        }

        // Pass 2: spread assignments to neighbours: non-CPU backends down and
        // up first, then any backend down and up.
        let order: Vec<usize> = (0..n).filter(|&i| kinds[i] == Kind::Compute).collect();
        for (skip_last, rev) in [(true, false), (true, true), (false, false), (false, true)] {
            let mut cur = NONE;
            let mut step =
                |i: usize, be: &mut Vec<usize>, cause: &mut Vec<Cause>, v: &mut Verdicts| {
                    if be[i] != NONE {
                        cur = if skip_last && be[i] == last {
                            NONE
                        } else {
                            be[i]
                        };
                    } else if cur != NONE && v.supports(&self.backends, g, cur, i) {
                        be[i] = cur;
                        cause[i] = Cause::Spread;
                    }
                };
            if rev {
                order
                    .iter()
                    .rev()
                    .for_each(|&i| step(i, &mut be, &mut cause, &mut v));
            } else {
                order
                    .iter()
                    .for_each(|&i| step(i, &mut be, &mut cause, &mut v));
            }
        }

        // Pass 3: upgrade assigned nodes to higher-priority backends of the
        // same buffer type; place the rest on the best backend for their inputs.
        for &i in &order {
            let srcs: Vec<usize> = graph.sources(crate::TensorId(i)).map(|s| s.0).collect();
            let mem = |s: usize, be: &Vec<usize>| be[root[s]];
            if be[i] == NONE {
                let mut best: Option<(usize, usize)> = None; // (backend, inputs reachable)
                for b in 0..nb {
                    if !v.supports(&self.backends, g, b, i) {
                        continue;
                    }
                    let known = srcs.iter().filter(|&&s| mem(s, &be) != NONE).count();
                    let reach = srcs
                        .iter()
                        .filter(|&&s| mem(s, &be) != NONE && facts.can_access(b, mem(s, &be)))
                        .count();
                    if reach == known {
                        best = Some((b, usize::MAX));
                        break;
                    }
                    if best.is_none_or(|(_, r)| reach > r) {
                        best = Some((b, reach));
                    }
                }
                if let Some((b, r)) = best {
                    be[i] = b;
                    cause[i] = if r == usize::MAX {
                        Cause::BestFit
                    } else {
                        Cause::MostInputs
                    };
                }
            } else if root[i] == i {
                let cur = be[i];
                for b in 0..cur {
                    if facts.buft[b] == facts.buft[cur]
                        && v.supports(&self.backends, g, b, i)
                        && srcs
                            .iter()
                            .all(|&s| mem(s, &be) != NONE && facts.can_access(b, mem(s, &be)))
                    {
                        be[i] = b;
                        cause[i] = Cause::Upgraded;
                        break;
                    }
                }
            }
        }

        // Pass 4: in order, leaves take their first consumer's backend, nodes
        // writing into existing memory move where that memory is reachable,
        // anything left goes to the first backend supporting it.
        for i in 0..n {
            if kinds[i] != Kind::Compute {
                continue;
            }
            if be[i] == NONE {
                be[i] = (0..nb)
                    .find(|&b| v.supports(&self.backends, g, b, i))
                    .ok_or_else(|| self.unassignable(graph, &mut v, i))?;
                cause[i] = Cause::BestFit;
            }
            let r = root[i];
            if r != i {
                if be[r] == NONE {
                    be[r] = be[i];
                    cause[r] = Cause::Consumer;
                }
                if !facts.can_access(be[i], be[r]) {
                    be[i] = self
                        .reach(&mut v, g, i, be[r])
                        .ok_or_else(|| self.unassignable(graph, &mut v, i))?;
                    cause[i] = Cause::InPlace { root: r };
                }
            }
            for s in graph.sources(crate::TensorId(i)).map(|s| s.0) {
                let r = root[s];
                if be[r] == NONE {
                    be[r] = be[i];
                    cause[r] = Cause::Consumer;
                }
            }
        }
        super::inputs::move_to_readers(
            |j| graph.sources(crate::TensorId(j)).map(|s| s.0).collect(),
            &order,
            &root,
            &mut be,
            &mut cause,
            facts,
            last,
        );
        for i in 0..n {
            match kinds[i] {
                Kind::View => {
                    be[i] = be[root[i]];
                    if be[i] == NONE {
                        be[i] = last;
                        be[root[i]] = last;
                        cause[root[i]] = Cause::Unused;
                    }
                    cause[i] = Cause::ViewSource;
                }
                Kind::Leaf if be[i] == NONE => {
                    be[i] = last;
                    cause[i] = Cause::Unused;
                }
                _ => {}
            }
        }

        // Why the better backends did not get each compute node.
        let mut declined = vec![Vec::new(); n];
        for &i in &order {
            declined[i] = (0..be[i])
                .map(|b| {
                    if v.supports(&self.backends, g, b, i) {
                        (b, Decline::NotChosen)
                    } else {
                        (b, Decline::Refused(v.reason(b, i)))
                    }
                })
                .collect();
        }
        let _ = name;
        Ok(Assignment {
            backend: be,
            cause,
            declined,
            root,
            offset_in_root,
            preplaced,
        })
    }

    /// The first backend that supports node `i` and can reach memory of backend `m`.
    fn reach(
        &self,
        v: &mut Verdicts,
        g: &[TensorDesc],
        i: usize,
        m: BackendId,
    ) -> Option<BackendId> {
        (0..self.backends.len())
            .find(|&b| self.facts.can_access(b, m) && v.supports(&self.backends, g, b, i))
    }

    fn unassignable(&self, graph: &Graph, v: &mut Verdicts, i: usize) -> SchedError {
        let g = graph.tensors();
        let reasons = (0..self.backends.len())
            .map(|b| {
                let why = if v.supports(&self.backends, g, b, i) {
                    "supports the op but cannot reach the memory it must write".to_string()
                } else {
                    v.reason(b, i)
                };
                format!("\n  {}: {}", self.facts.names[b], why)
            })
            .collect();
        SchedError::Unassignable {
            node: i,
            name: graph.name(crate::TensorId(i)).to_string(),
            op: g[i].op().unwrap_or(Op::None),
            reasons,
        }
    }
}

/// Checks every descriptor, every node against its op's contract (once,
/// when a plan is made), and sorts tensors into leaves, views and compute
/// nodes.
pub(crate) fn classify(g: &[TensorDesc]) -> Result<Vec<Kind>, SchedError> {
    let mut kinds = Vec::with_capacity(g.len());
    for (i, d) in g.iter().enumerate() {
        let bad = |reason: String| SchedError::InvalidGraph { node: i, reason };
        let op = d.op().map_err(|e| bad(e.to_string()))?;
        d.dtype().map_err(|e| bad(e.to_string()))?;
        for &s in &d.src {
            if s != backplane_abi::NO_TENSOR && (s < 0 || s as usize >= i) {
                return Err(bad(format!("source index {s} is not an earlier tensor")));
            }
        }
        if d.view_src != backplane_abi::NO_TENSOR && (d.view_src < 0 || d.view_src as usize >= i) {
            return Err(bad(format!(
                "view source index {} is not an earlier tensor",
                d.view_src
            )));
        }
        if op != Op::None {
            let src = backplane_abi::support::sources(g, d).map_err(bad)?;
            backplane_abi::contract::check(op, d, &src)
                .map_err(|refusal| SchedError::Contract { node: i, refusal })?;
        }
        kinds.push(if op == Op::None {
            Kind::Leaf
        } else if op.is_view() {
            Kind::View
        } else {
            Kind::Compute
        });
    }
    Ok(kinds)
}
