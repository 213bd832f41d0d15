//! What the scheduler decided, for people: per node, the backend it runs on,
//! why, and why every higher-priority backend did not get it.

use std::fmt;

use backplane_abi::Op;

use super::plan::{Decline, Plan};
use crate::graph::{Graph, TensorId};

/// One compute node's routing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReport {
    /// Node index.
    pub node: usize,
    /// Its name.
    pub name: String,
    /// Its op (with the unary or GLU function: `UNARY(SILU)`).
    pub op: String,
    /// `"[4096, 32, 1, 1] f32"`.
    pub shape: String,
    /// The backend it runs on.
    pub backend: String,
    /// Why that backend.
    pub cause: String,
    /// Higher-priority backends that refused it, with their reasons.
    pub refused: Vec<(String, String)>,
    /// Higher-priority backends that support it but were not chosen.
    pub not_chosen: Vec<String>,
    /// The split it belongs to.
    pub split: usize,
}

impl NodeReport {
    /// True when a higher-priority backend refused this node.
    pub fn is_fallback(&self) -> bool {
        !self.refused.is_empty()
    }
}

/// The routing of every compute node of a graph, plus the plan's figures.
#[derive(Clone, Debug)]
pub struct Explanation {
    /// Backend names, in priority order.
    pub backends: Vec<String>,
    /// One report per compute node, in order.
    pub nodes: Vec<NodeReport>,
    /// Splits.
    pub splits: usize,
    /// Copies per run and the bytes they move.
    pub copies: (usize, u64),
    /// Compute nodes per backend.
    pub nodes_per_backend: Vec<usize>,
    /// Peak and naive compute-buffer bytes per backend.
    pub memory: Vec<(u64, u64)>,
    /// Per split: the tensors copied in before it runs, as (name, from backend, bytes).
    pub copies_in: Vec<Vec<(String, String, u64)>>,
    /// The host's writes of the graph inputs before a run, as (backend,
    /// inputs, bytes): one entry per `set_tensor`.
    pub input_writes: Vec<(String, Vec<String>, u64)>,
}

/// `ADD`, `UNARY(SILU)`, `GLU(SWIGLU)`.
pub(crate) fn op_label(graph: &Graph, t: TensorId) -> String {
    let d = graph.desc(t);
    match d.op() {
        Ok(Op::Unary) => match backplane_abi::UnaryOp::from_code(d.op_params[0] as u32) {
            Ok(u) => format!("UNARY({u})"),
            Err(_) => "UNARY(?)".into(),
        },
        Ok(Op::Glu) => match backplane_abi::GluOp::from_code(d.op_params[0] as u32) {
            Ok(f) => format!("GLU({f})"),
            Err(_) => "GLU(?)".into(),
        },
        Ok(op) => op.to_string(),
        Err(e) => e.to_string(),
    }
}

impl Explanation {
    /// The explanation of `plan`, naming tensors from `graph` (the graph it was made for).
    pub fn new(plan: &Plan, graph: &Graph) -> Explanation {
        let a = &plan.assignment;
        let names = &plan.backend_names;
        let name = |i: usize| graph.name(TensorId(i)).to_string();
        let mut split_of = vec![0usize; graph.len()];
        for (k, s) in plan.splits.iter().enumerate() {
            for &i in &s.nodes {
                split_of[i] = k;
            }
        }
        let nodes = plan
            .splits
            .iter()
            .flat_map(|s| s.nodes.iter().copied())
            .map(|i| {
                let mut refused = Vec::new();
                let mut not_chosen = Vec::new();
                for (b, d) in &a.declined[i] {
                    match d {
                        Decline::Refused(r) => refused.push((names[*b].clone(), r.clone())),
                        Decline::NotChosen => not_chosen.push(names[*b].clone()),
                    }
                }
                NodeReport {
                    node: i,
                    name: name(i),
                    op: op_label(graph, TensorId(i)),
                    shape: graph.describe(TensorId(i)),
                    backend: names[a.backend[i]].clone(),
                    cause: a.cause[i].describe(&name),
                    refused,
                    not_chosen,
                    split: split_of[i],
                }
            })
            .collect();
        Explanation {
            backends: names.clone(),
            nodes,
            splits: plan.stats.splits,
            copies: (plan.stats.copies, plan.stats.copy_bytes),
            nodes_per_backend: plan.stats.nodes_per_backend.clone(),
            memory: plan
                .stats
                .peak_bytes
                .iter()
                .copied()
                .zip(plan.stats.naive_bytes.iter().copied())
                .collect(),
            copies_in: plan
                .splits
                .iter()
                .map(|s| {
                    s.copies
                        .iter()
                        .map(|&c| {
                            let c = &plan.copies[c];
                            (name(c.tensor), names[c.from].clone(), c.bytes)
                        })
                        .collect()
                })
                .collect(),
            input_writes: plan
                .input_writes
                .iter()
                .map(|w| {
                    let members = w.members.iter().map(|&(i, _)| name(i)).collect();
                    (names[w.backend].clone(), members, w.len)
                })
                .collect(),
        }
    }

    /// The nodes that fell back.
    pub fn fallbacks(&self) -> impl Iterator<Item = &NodeReport> {
        self.nodes.iter().filter(|n| n.is_fallback())
    }
}

/// `1.5 MiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "backends (priority order): {}", self.backends.join(", "))?;
        let w_name = self
            .nodes
            .iter()
            .map(|n| n.name.len())
            .max()
            .unwrap_or(4)
            .clamp(4, 28);
        let w_op = self
            .nodes
            .iter()
            .map(|n| n.op.len())
            .max()
            .unwrap_or(2)
            .clamp(2, 20);
        let w_be = self
            .backends
            .iter()
            .map(String::len)
            .max()
            .unwrap_or(7)
            .max(7);
        writeln!(
            f,
            "{:>5}  {:<w_name$}  {:<w_op$}  {:<w_be$}  why",
            "node", "name", "op", "backend"
        )?;
        let mut split = usize::MAX;
        for n in &self.nodes {
            if n.split != split {
                split = n.split;
                writeln!(f, "-- split {split} on {}", n.backend)?;
                for (t, from, bytes) in self.copies_in.get(split).into_iter().flatten() {
                    writeln!(f, "   copy in '{t}' from {from} ({})", human_bytes(*bytes))?;
                }
            }
            let name: String = n.name.chars().take(w_name).collect();
            writeln!(
                f,
                "{:>5}  {:<w_name$}  {:<w_op$}  {:<w_be$}  {}",
                n.node, name, n.op, n.backend, n.cause
            )?;
            for (b, r) in &n.refused {
                writeln!(
                    f,
                    "{:>5}  {:<w_name$}  {:<w_op$}  {:<w_be$}    {b} refused: {r}",
                    "", "", "", ""
                )?;
            }
        }
        writeln!(f)?;
        let fallbacks = self.fallbacks().count();
        writeln!(
            f,
            "{} nodes, {} split(s), {} copies per run ({}), {} fallback(s)",
            self.nodes.len(),
            self.splits,
            self.copies.0,
            human_bytes(self.copies.1),
            fallbacks
        )?;
        for (b, inputs, bytes) in &self.input_writes {
            let inputs: Vec<String> = inputs.iter().map(|t| format!("'{t}'")).collect();
            writeln!(
                f,
                "  input write on {b}: {} ({})",
                inputs.join(", "),
                human_bytes(*bytes)
            )?;
        }
        for (k, b) in self.backends.iter().enumerate() {
            let (peak, naive) = self.memory.get(k).copied().unwrap_or((0, 0));
            writeln!(
                f,
                "  {b}: {} nodes, compute buffer {} (without reuse {})",
                self.nodes_per_backend.get(k).copied().unwrap_or(0),
                human_bytes(peak),
                human_bytes(naive)
            )?;
        }
        Ok(())
    }
}

impl super::Planner {
    /// The routing of `graph` (planned, or from the cache), strict mode or not.
    pub fn explain(&mut self, graph: &Graph) -> Result<Explanation, super::SchedError> {
        let plan = self.plan_lenient(graph)?;
        Ok(Explanation::new(&plan, graph))
    }
}
