//! Graphviz DOT export of a scheduled graph: nodes filled with their
//! backend's colour, leaves as ellipses, one cluster per split, copies
//! between backends as bold dashed edges labelled with their size.

use std::fmt::Write;

use backplane_abi::Op;

use super::explain::{human_bytes, op_label};
use super::plan::Plan;
use super::split::Entry;
use crate::graph::{Graph, TensorId};

/// Fill colours by backend priority (the last backend, usually the CPU, is grey).
const PALETTE: [&str; 6] = [
    "#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3", "#b3de69",
];
const LAST: &str = "#d9d9d9";

fn colour(b: usize, n: usize) -> &'static str {
    if b + 1 == n {
        LAST
    } else {
        PALETTE[b % PALETTE.len()]
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The scheduled `graph` (the graph `plan` was made for) as DOT text.
pub fn to_dot(plan: &Plan, graph: &Graph) -> String {
    let a = &plan.assignment;
    let nb = plan.backend_names.len();
    let mut out = String::new();
    let _ = writeln!(out, "digraph backplane {{");
    let _ = writeln!(
        out,
        "  rankdir=TB;\n  node [style=filled, fontname=\"monospace\", fontsize=10];"
    );
    let _ = writeln!(out, "  subgraph cluster_legend {{\n    label=\"backends\";");
    for (b, name) in plan.backend_names.iter().enumerate() {
        let _ = writeln!(
            out,
            "    legend{b} [label=\"{}\", shape=box, fillcolor=\"{}\"];",
            escape(name),
            colour(b, nb)
        );
    }
    let _ = writeln!(out, "  }}");
    let mut drawn = vec![false; graph.len()];
    for (k, split) in plan.splits.iter().enumerate() {
        let _ = writeln!(
            out,
            "  subgraph cluster_split{k} {{\n    label=\"split {k}: {}\";\n    style=dashed;",
            escape(&plan.backend_names[split.backend])
        );
        for &i in &split.nodes {
            drawn[i] = true;
            let _ = writeln!(
                out,
                "    t{i} [label=\"{}\\n{}\\n{}\", shape=box, fillcolor=\"{}\"];",
                escape(graph.name(TensorId(i))),
                op_label(graph, TensorId(i)),
                escape(&graph.describe(TensorId(i))),
                colour(a.backend[i], nb)
            );
        }
        let _ = writeln!(out, "  }}");
    }
    for (i, _) in drawn.iter().enumerate().filter(|(_, d)| !**d) {
        let op = graph.tensors()[i].op().unwrap_or(Op::None);
        let shape = if op == Op::None { "ellipse" } else { "note" };
        let _ = writeln!(
            out,
            "  t{i} [label=\"{}\\n{}\", shape={shape}, fillcolor=\"{}\"];",
            escape(graph.name(TensorId(i))),
            if op == Op::None {
                graph.describe(TensorId(i))
            } else {
                op.to_string()
            },
            colour(a.backend[i], nb)
        );
    }
    let mut via_copy = std::collections::HashMap::new();
    for split in &plan.splits {
        for r in &split.reads {
            if let Entry::Copy(c) = r.from {
                via_copy.insert((plan.copies[c].tensor, r.node), c);
            }
        }
    }
    for (i, d) in graph.tensors().iter().enumerate() {
        for s in (0..backplane_abi::MAX_SRC).filter_map(|k| d.src(k)) {
            match via_copy.get(&(s, i)) {
                Some(&c) => {
                    let _ = writeln!(
                        out,
                        "  t{s} -> t{i} [style=\"bold,dashed\", color=red, label=\"copy {}\"];",
                        human_bytes(plan.copies[c].bytes)
                    );
                }
                None => {
                    let _ = writeln!(out, "  t{s} -> t{i};");
                }
            }
        }
    }
    let _ = writeln!(out, "}}");
    out
}

impl super::Planner {
    /// The scheduled `graph` as Graphviz DOT, coloured by backend.
    pub fn dot(&mut self, graph: &Graph) -> Result<String, super::SchedError> {
        let plan = self.plan_lenient(graph)?;
        Ok(to_dot(&plan, graph))
    }
}
