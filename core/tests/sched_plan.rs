//! Planner and allocator tests against fake backends, over the example
//! graphs. Runs through the CPU device (plus a fake "GPU" made of a second
//! CPU instance with its own buffer type) checked against the reference
//! kernels are in `sched_run.rs`.

use std::sync::Arc;

use backplane_abi::plugin::{DeviceType, Verdict};
use backplane_abi::{DType, Op, TensorDesc, UnaryOp, flags};

use backplane::examples::{BlockConfig, llama_block, llama_layers, weights};
use backplane::sched::alloc::DynAlloc;
use backplane::sched::plan::{Cause, Decline};
use backplane::sched::split::Entry;
use backplane::sched::*;
use backplane::{Graph, TensorId};

/// A backend that refuses the listed ops.
struct Fake {
    name: &'static str,
    ty: DeviceType,
    refuse: Vec<Op>,
    buft: &'static str,
    host: bool,
    /// Other buffer types it reads.
    reads: Vec<&'static str>,
    offload: bool,
}

impl Fake {
    fn gpu(refuse: Vec<Op>) -> Fake {
        Fake {
            name: "gpu",
            ty: DeviceType::Gpu,
            refuse,
            buft: "gpu",
            host: false,
            reads: vec![],
            offload: false,
        }
    }
    fn cpu() -> Fake {
        Fake {
            name: "cpu",
            ty: DeviceType::Cpu,
            refuse: vec![],
            buft: "cpu",
            host: true,
            reads: vec![],
            offload: false,
        }
    }
}

impl Placement for Fake {
    fn name(&self) -> String {
        self.name.into()
    }
    fn device_type(&self) -> DeviceType {
        self.ty
    }
    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> Verdict {
        let op = graph[node].op().unwrap_or(Op::None);
        if self.refuse.contains(&op) {
            Verdict::unsupported(format!("{op} not implemented on {}", self.name))
        } else {
            Verdict::Supported
        }
    }
    fn offload_op(&self, _: &[TensorDesc], _: usize) -> bool {
        self.offload
    }
    fn buffer_type_name(&self) -> String {
        self.buft.into()
    }
    fn buffer_is_host(&self) -> bool {
        self.host
    }
    fn supports_buft(&self, name: &str, _: bool) -> bool {
        name == self.buft || self.reads.contains(&name)
    }
    fn alignment(&self) -> u64 {
        64
    }
}

fn planner(backends: Vec<Fake>, options: SchedOptions) -> Planner {
    Planner::new(
        backends
            .into_iter()
            .map(|b| Box::new(b) as Box<dyn Placement + Send + Sync>)
            .collect(),
        options,
    )
    .unwrap()
}

/// Places every weight of `g` in fake buffer `id` (registered to `backend`).
fn place_all(p: &mut Planner, g: &mut Graph, id: u64, backend: usize) {
    p.register_buffer(id, backend).unwrap();
    let mut off = 0;
    for t in weights(g) {
        set_placement(g, t, id, off).unwrap();
        off += g.desc(t).nbytes().div_ceil(64) * 64;
    }
}

fn node_named(g: &Graph, prefix: &str) -> Vec<usize> {
    g.ids()
        .filter(|&t| g.name(t).starts_with(prefix))
        .map(|t| t.index())
        .collect()
}

fn of_op(g: &Graph, op: Op) -> Vec<usize> {
    g.ids()
        .filter(|&t| g.op(t) == op)
        .map(|t| t.index())
        .collect()
}

#[test]
fn cpu_only_runs_everything_in_one_split() {
    let g = llama_block(&BlockConfig::default()).unwrap();
    let mut p = planner(vec![Fake::cpu()], SchedOptions::default());
    let plan = p.plan(&g).unwrap();
    assert_eq!(plan.stats.splits, 1);
    assert_eq!(plan.stats.copies, 0);
    assert!(plan.fallbacks.is_empty());
}

#[test]
fn weights_on_a_backend_pull_their_ops_there() {
    let mut g = llama_block(&BlockConfig::default()).unwrap();
    let mut p = planner(
        vec![Fake::gpu(vec![]), Fake::cpu()],
        SchedOptions::default(),
    );
    place_all(&mut p, &mut g, 0x100, 0);
    let plan = p.plan(&g).unwrap();
    let a = &plan.assignment;
    for i in of_op(&g, Op::MulMat).into_iter().filter(|&i| {
        g.desc(TensorId(i))
            .src(0)
            .is_some_and(|s| g.desc(TensorId(s)).has_flag(flags::WEIGHT))
    }) {
        assert_eq!(a.backend[i], 0, "{}", g.name(TensorId(i)));
        assert!(
            matches!(a.cause[i], Cause::Weights { .. }),
            "{:?}",
            a.cause[i]
        );
    }
    // Spreading puts the whole block on the GPU: one split. Its inputs are
    // read there only, so they live in the GPU's memory (nothing copied)
    // and are written in one go.
    assert_eq!(plan.stats.splits, 1, "{}", Explanation::new(&plan, &g));
    assert_eq!(plan.splits[0].backend, 0);
    assert!(plan.copies.is_empty(), "{:?}", plan.copies);
    let inputs = ["x", "pos", "kq_mask"].map(|n| g.find(n).unwrap().index());
    for i in inputs {
        assert_eq!(a.backend[i], 0);
        assert_eq!(a.cause[i], Cause::InputAtReader);
    }
    assert_eq!(plan.input_writes.len(), 1, "{:?}", plan.input_writes);
    let w = &plan.input_writes[0];
    assert_eq!(w.backend, 0);
    let mut members: Vec<usize> = w.members.iter().map(|&(i, _)| i).collect();
    members.sort_unstable();
    assert_eq!(members, inputs);
    for &(i, at) in &w.members {
        let Loc::Compute { backend: 0, offset } = plan.allocation.tensor[i] else {
            panic!("input {i} is not in the GPU's compute buffer");
        };
        assert_eq!(offset, w.offset + at);
        assert!(at + g.desc(TensorId(i)).nbytes() <= w.len);
    }
}

#[test]
fn refused_ops_fall_back_and_explain_gives_the_reason() {
    let mut g = llama_block(&BlockConfig::default()).unwrap();
    let mut p = planner(
        vec![Fake::gpu(vec![Op::Rope]), Fake::cpu()],
        SchedOptions::default(),
    );
    place_all(&mut p, &mut g, 0x100, 0);
    let plan = p.plan(&g).unwrap();
    let ropes = of_op(&g, Op::Rope);
    assert_eq!(ropes.len(), 2);
    for &r in &ropes {
        assert_eq!(plan.assignment.backend[r], 1);
        assert_eq!(
            plan.assignment.declined[r],
            vec![(0, Decline::Refused("ROPE not implemented on gpu".into()))]
        );
    }
    assert_eq!(plan.fallbacks, ropes);
    // gpu (q/k/v) -> cpu (rope) -> gpu (attention onwards).
    assert_eq!(
        plan.splits.iter().map(|s| s.backend).collect::<Vec<_>>(),
        [0, 1, 0]
    );
    let text = p.explain(&g).unwrap().to_string();
    assert!(
        text.contains("gpu refused: ROPE not implemented on gpu"),
        "{text}"
    );
    assert!(text.contains("2 fallback(s)"), "{text}");
}

#[test]
fn strict_mode_errors_listing_the_fallback_nodes() {
    let mut g = llama_block(&BlockConfig::default()).unwrap();
    let options = SchedOptions {
        strict: true,
        ..SchedOptions::default()
    };
    let mut p = planner(vec![Fake::gpu(vec![Op::Rope]), Fake::cpu()], options);
    place_all(&mut p, &mut g, 0x100, 0);
    let err = p.plan(&g).unwrap_err();
    let SchedError::Fallback(nodes) = &err else {
        panic!("{err}")
    };
    assert_eq!(
        nodes.iter().map(|n| n.node).collect::<Vec<_>>(),
        of_op(&g, Op::Rope)
    );
    assert!(
        nodes
            .iter()
            .all(|n| n.op == Op::Rope && n.backend == "cpu" && n.refusals[0].0 == "gpu")
    );
    let msg = err.to_string();
    assert!(
        msg.contains("2 node(s) would fall back") && msg.contains("ROPE not implemented"),
        "{msg}"
    );
    // Explaining still works in strict mode, and a supported graph passes.
    assert_eq!(p.explain(&g).unwrap().fallbacks().count(), 2);
    let mut ok = planner(
        vec![Fake::gpu(vec![]), Fake::cpu()],
        SchedOptions {
            strict: true,
            ..SchedOptions::default()
        },
    );
    place_all(&mut ok, &mut g, 0x100, 0);
    ok.plan(&g).unwrap();
}

#[test]
fn host_weights_are_offloaded_only_for_large_batches() {
    for (tokens, min_batch, expect_gpu) in [
        (8, Some(32), false),
        (64, Some(32), true),
        (64, None, false),
    ] {
        let cfg = BlockConfig {
            n_tokens: tokens,
            ..BlockConfig::default()
        };
        let mut g = llama_block(&cfg).unwrap();
        let options = SchedOptions {
            offload_min_batch: min_batch,
            ..SchedOptions::default()
        };
        let mut p = planner(vec![Fake::gpu(vec![]), Fake::cpu()], options);
        place_all(&mut p, &mut g, 0x200, 1);
        let plan = p.plan(&g).unwrap();
        let q = node_named(&g, "mul_mat")[0];
        let a = &plan.assignment;
        if expect_gpu {
            assert_eq!(a.backend[q], 0);
            assert!(matches!(a.cause[q], Cause::Offload { .. }));
        } else {
            assert_eq!(a.backend[q], 1, "tokens {tokens}");
            assert!(matches!(a.cause[q], Cause::Weights { .. }));
            assert_eq!(a.declined[q], vec![(0, Decline::NotChosen)]);
            assert!(plan.fallbacks.is_empty());
        }
    }
    // A backend's own offload_op also pulls the op.
    let mut g = llama_block(&BlockConfig::default()).unwrap();
    let gpu = Fake {
        offload: true,
        ..Fake::gpu(vec![])
    };
    let mut p = planner(
        vec![gpu, Fake::cpu()],
        SchedOptions {
            offload_min_batch: None,
            ..SchedOptions::default()
        },
    );
    place_all(&mut p, &mut g, 0x200, 1);
    let plan = p.plan(&g).unwrap();
    assert_eq!(plan.assignment.backend[node_named(&g, "mul_mat")[0]], 0);
}

#[test]
fn pins_are_obeyed_and_a_refusing_pin_is_an_error() {
    let g = llama_block(&BlockConfig::default()).unwrap();
    let mut p = planner(
        vec![Fake::gpu(vec![Op::Rope]), Fake::cpu()],
        SchedOptions::default(),
    );
    let norm = of_op(&g, Op::RmsNorm)[0];
    p.pin(norm, 0).unwrap();
    let plan = p.plan(&g).unwrap();
    assert_eq!(plan.assignment.backend[norm], 0);
    assert_eq!(plan.assignment.cause[norm], Cause::Pinned);
    let rope = of_op(&g, Op::Rope)[0];
    p.pin(rope, 0).unwrap();
    let err = p.plan(&g).unwrap_err();
    assert!(
        matches!(&err, SchedError::PinRefused { node, op: Op::Rope, .. } if *node == rope),
        "{err}"
    );
    assert!(matches!(
        p.pin(0, 7),
        Err(SchedError::UnknownBackend { index: 7, count: 2 })
    ));
}

#[test]
fn views_follow_their_source() {
    let mut g = llama_block(&BlockConfig::default()).unwrap();
    let mut p = planner(
        vec![Fake::gpu(vec![Op::Rope]), Fake::cpu()],
        SchedOptions::default(),
    );
    place_all(&mut p, &mut g, 0x100, 0);
    let plan = p.plan(&g).unwrap();
    let a = &plan.assignment;
    for t in g.ids().filter(|&t| g.op(t).is_view()) {
        let root = g.storage_root(t).index();
        assert_eq!(a.backend[t.index()], a.backend[root], "{}", g.name(t));
        assert_eq!(a.root[t.index()], root);
        assert_eq!(a.offset_in_root[t.index()], g.offset_in_root(t));
    }
}

#[test]
fn unplaced_leaves_go_where_their_first_consumer_runs() {
    let g = llama_block(&BlockConfig::default()).unwrap();
    let mut p = planner(
        vec![Fake::gpu(vec![]), Fake::cpu()],
        SchedOptions::default(),
    );
    let norm = of_op(&g, Op::RmsNorm)[0];
    p.pin(norm, 0).unwrap();
    let plan = p.plan(&g).unwrap();
    let wq = g.find("blk.0.attn_q.weight").unwrap().index();
    assert_eq!(plan.assignment.cause[wq], Cause::Consumer);
    assert_eq!(plan.assignment.backend[wq], 0);
    // The block's inputs are read by the GPU only: they go into its memory.
    for name in ["x", "pos", "kq_mask"] {
        let t = g.find(name).unwrap().index();
        let a = &plan.assignment;
        assert_eq!(
            (a.backend[t], a.cause[t]),
            (0, Cause::InputAtReader),
            "{name}"
        );
    }
}

#[test]
fn inputs_move_into_device_memory_only_when_one_device_reads_them() {
    let mut g = Graph::new();
    let shared = g.input("shared", DType::F32, &[64]).unwrap();
    let gpu_only = g.input("gpu_only", DType::F32, &[64]).unwrap();
    let cpu_only = g.input("cpu_only", DType::F32, &[64]).unwrap();
    let on_gpu = g.add(shared, gpu_only).unwrap();
    let on_cpu = g.mul(shared, cpu_only).unwrap();
    let out = g.add(on_gpu, on_cpu).unwrap();
    g.mark_output(out).unwrap();
    let mut p = planner(
        vec![Fake::gpu(vec![]), Fake::cpu()],
        SchedOptions::default(),
    );
    p.pin(on_gpu.index(), 0).unwrap();
    p.pin(on_cpu.index(), 1).unwrap();
    let plan = p.plan(&g).unwrap();
    let a = &plan.assignment;
    let at = |t: TensorId| (a.backend[t.index()], a.cause[t.index()]);
    assert_eq!(at(shared), (1, Cause::Input));
    assert_eq!(at(cpu_only), (1, Cause::Input));
    assert_eq!(at(gpu_only), (0, Cause::InputAtReader));
    // Only 'shared' is copied to the GPU; 'gpu_only' is written there.
    let copied: Vec<&str> = plan
        .copies
        .iter()
        .filter(|c| c.to == 0)
        .map(|c| g.name(TensorId(c.tensor)))
        .collect();
    assert_eq!(copied, ["shared"]);
    // The CPU's two inputs are host memory: written one by one.
    let mut writes: Vec<(usize, Vec<usize>)> = plan
        .input_writes
        .iter()
        .map(|w| (w.backend, w.members.iter().map(|&(i, _)| i).collect()))
        .collect();
    writes.sort();
    assert_eq!(
        writes,
        [
            (0, vec![gpu_only.index()]),
            (1, vec![shared.index()]),
            (1, vec![cpu_only.index()]),
        ]
    );
    let text = Explanation::new(&plan, &g).to_string();
    assert!(
        text.contains("input write on gpu: 'gpu_only' (256 B)"),
        "{text}"
    );
}

#[test]
fn backends_sharing_memory_need_no_copies() {
    // An accelerator that reads host buffers: its splits copy nothing in.
    let mut acc = Fake::gpu(vec![Op::Rope]);
    acc.reads = vec!["cpu"];
    let mut g = llama_block(&BlockConfig::default()).unwrap();
    let mut p = planner(vec![acc, Fake::cpu()], SchedOptions::default());
    place_all(&mut p, &mut g, 0x100, 0);
    let plan = p.plan(&g).unwrap();
    assert!(plan.stats.splits > 1);
    assert!(
        plan.copies.iter().all(|c| c.to == 1),
        "only the cpu copies gpu memory in"
    );
}

#[test]
fn split_graphs_are_reindexed_with_inputs_as_leaves() {
    let mut g = llama_block(&BlockConfig {
        flash_attn: false,
        ..BlockConfig::default()
    })
    .unwrap();
    let mut p = planner(
        vec![Fake::gpu(vec![Op::Rope, Op::SoftMax]), Fake::cpu()],
        SchedOptions::default(),
    );
    place_all(&mut p, &mut g, 0x100, 0);
    let plan = p.plan(&g).unwrap();
    for split in &plan.splits {
        assert_eq!(split.graph.len(), split.entries.len());
        let n_leaves = split.graph.len() - split.nodes.len();
        for (k, d) in split.graph.iter().enumerate() {
            if k < n_leaves {
                assert_eq!(d.op().unwrap(), Op::None);
                assert_eq!(d.view_src, backplane_abi::NO_TENSOR);
            } else {
                assert_eq!(split.entries[k], Entry::Tensor(split.nodes[k - n_leaves]));
                let orig = g.desc(TensorId(split.nodes[k - n_leaves]));
                for slot in 0..backplane_abi::MAX_SRC {
                    assert_eq!(d.src(slot).is_some(), orig.src(slot).is_some());
                    if let Some(s) = d.src(slot) {
                        assert!(s < k);
                        assert_eq!(
                            split.graph[s].ne,
                            g.desc(TensorId(orig.src(slot).unwrap())).ne
                        );
                    }
                }
            }
        }
    }
    // Every copy is read through its entry in a split graph of its backend.
    for (c, copy) in plan.copies.iter().enumerate() {
        assert!(plan.splits[copy.split].entries.contains(&Entry::Copy(c)));
        assert_eq!(plan.splits[copy.split].backend, copy.to);
    }
}

fn chain(len: usize, inplace_ok: bool) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[1024]).unwrap();
    let mut cur = x;
    let mut keep = Vec::new();
    for i in 0..len {
        cur = if i % 2 == 0 {
            g.unary(cur, UnaryOp::Tanh).unwrap()
        } else {
            g.scale(cur, 0.5).unwrap()
        };
        if !inplace_ok {
            keep.push(cur);
        }
    }
    for k in keep {
        // A second reader much later keeps every link alive.
        cur = g.add(cur, k).unwrap();
    }
    g.mark_output(cur).unwrap();
    g
}

#[test]
fn allocator_reuses_memory_on_a_long_chain() {
    let g = chain(200, true);
    let mut p = planner(vec![Fake::cpu()], SchedOptions::default());
    let plan = p.plan(&g).unwrap();
    let (peak, naive) = (plan.stats.peak_bytes[0], plan.stats.naive_bytes[0]);
    assert_eq!(naive, 201 * 4096);
    assert!(peak <= 3 * 4096, "peak {peak} naive {naive}");
    assert!(
        plan.stats.in_place >= 190,
        "in place {}",
        plan.stats.in_place
    );
    check_no_live_overlap(&g, &plan);
}

#[test]
fn memory_of_values_still_needed_is_not_reused() {
    let g = chain(20, false);
    let mut p = planner(vec![Fake::cpu()], SchedOptions::default());
    let plan = p.plan(&g).unwrap();
    // Every link of the chain is read again at the end: all live at once.
    assert!(plan.stats.peak_bytes[0] >= 21 * 4096);
    check_no_live_overlap(&g, &plan);
    let mut g = llama_layers(
        &BlockConfig {
            flash_attn: false,
            ..BlockConfig::default()
        },
        3,
    )
    .unwrap();
    place_all(&mut p, &mut g, 0x300, 0);
    let plan = p.plan(&g).unwrap();
    assert!(plan.stats.peak_bytes[0] < plan.stats.naive_bytes[0] / 2);
    check_no_live_overlap(&g, &plan);
}

/// Replays the plan and checks that no two objects live at the same time
/// share bytes of one backend's buffer.
fn check_no_live_overlap(g: &Graph, plan: &Plan) {
    let a = &plan.assignment;
    let n = g.len();
    let mut def = vec![usize::MAX; n + plan.copies.len()];
    let mut last = vec![0usize; n + plan.copies.len()];
    let mut step = 1;
    for (i, d) in g.tensors().iter().enumerate() {
        if d.op().unwrap() == Op::None {
            def[i] = 0;
            last[i] = usize::MAX;
        }
        if d.has_flag(flags::OUTPUT) {
            last[a.root[i]] = usize::MAX;
        }
    }
    for split in &plan.splits {
        for &c in &split.copies {
            def[n + c] = step;
            let r = a.root[plan.copies[c].tensor];
            last[r] = last[r].max(step);
            step += 1;
        }
        for &i in &split.nodes {
            if a.root[i] == i {
                def[i] = step;
            }
            for r in split.reads.iter().filter(|r| r.node == i) {
                let o = match r.from {
                    Entry::Tensor(s) => a.root[s],
                    Entry::Copy(c) => n + c,
                };
                last[o] = last[o].max(step);
            }
            step += 1;
        }
    }
    let loc = |o: usize| {
        if o < n {
            plan.allocation.tensor[o]
        } else {
            plan.allocation.copy[o - n]
        }
    };
    let size = |o: usize| {
        if o < n {
            g.tensors()[o].nbytes()
        } else {
            plan.copies[o - n].bytes
        }
    };
    let objs: Vec<usize> = (0..def.len())
        .filter(|&o| def[o] != usize::MAX && (o >= n || a.root[o] == o))
        .collect();
    for (x, &o1) in objs.iter().enumerate() {
        for &o2 in &objs[x + 1..] {
            let (
                Loc::Compute {
                    backend: b1,
                    offset: f1,
                },
                Loc::Compute {
                    backend: b2,
                    offset: f2,
                },
            ) = (loc(o1), loc(o2))
            else {
                continue;
            };
            let live_together =
                def[o1] < last[o2].max(def[o2] + 1) && def[o2] < last[o1].max(def[o1] + 1);
            let share = b1 == b2 && f1 < f2 + size(o2) && f2 < f1 + size(o1);
            assert!(
                !(live_together && share),
                "objects {o1} and {o2} overlap while live"
            );
        }
    }
}

#[test]
fn dyn_alloc_takes_best_fit_and_merges_freed_blocks() {
    let mut d = DynAlloc::new(64);
    let a = d.alloc(100); // 128
    let b = d.alloc(64);
    let c = d.alloc(256);
    assert_eq!((a, b, c), (0, 128, 192));
    d.free(a, 100);
    d.free(c, 256);
    // 64 fits the 128 hole best.
    assert_eq!(d.alloc(64), 0);
    d.free(0, 64);
    d.free(b, 64);
    // All merged: a 448-byte request starts at 0 again.
    assert_eq!(d.alloc(448), 0);
    assert_eq!(d.max_size(), 448);
}

#[test]
fn cached_plan_is_reused_without_planning() {
    let cfg = BlockConfig::default();
    let mut p = planner(
        vec![Fake::gpu(vec![Op::Rope]), Fake::cpu()],
        SchedOptions::default(),
    );
    let g1 = llama_block(&cfg).unwrap();
    let first = p.plan(&g1).unwrap();
    assert_eq!((p.plans_built(), p.cache_hits()), (1, 0));
    // The same structure built again (fresh graph, same shapes): a hit.
    let g2 = llama_block(&cfg).unwrap();
    let second = p.plan(&g2).unwrap();
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!((p.plans_built(), p.cache_hits()), (1, 1));
    // Another batch size is another structure.
    let g3 = llama_block(&BlockConfig {
        n_tokens: 4,
        ..cfg.clone()
    })
    .unwrap();
    p.plan(&g3).unwrap();
    assert_eq!(p.plans_built(), 2);
    // Pins are part of the key.
    p.pin(of_op(&g1, Op::RmsNorm)[0], 1).unwrap();
    p.plan(&g1).unwrap();
    assert_eq!(p.plans_built(), 3);
    p.clear_pins();
    p.plan(&g1).unwrap();
    assert_eq!((p.plans_built(), p.cache_hits()), (3, 2));
}

#[test]
fn dot_export_colours_nodes_by_backend() {
    let mut g = llama_block(&BlockConfig::default()).unwrap();
    let mut p = planner(
        vec![Fake::gpu(vec![Op::Rope]), Fake::cpu()],
        SchedOptions::default(),
    );
    place_all(&mut p, &mut g, 0x100, 0);
    let dot = p.dot(&g).unwrap();
    assert!(dot.starts_with("digraph backplane {"));
    assert!(dot.trim_end().ends_with('}'));
    assert!(dot.contains("cluster_split0") && dot.contains("cluster_split2"));
    let rope = of_op(&g, Op::Rope)[0];
    let line = dot
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("t{rope} [")))
        .unwrap();
    assert!(line.contains("#d9d9d9"), "{line}");
    assert!(dot.contains("color=red"), "copies drawn");
}

#[test]
fn in_place_results_run_where_their_memory_is() {
    // set_rows writes into a cache placed on the gpu: it runs there even
    // though nothing else pulls it.
    let mut g = Graph::new();
    let cache = g.weight("cache", DType::F32, &[16, 8]).unwrap();
    let src = g.input("src", DType::F32, &[16, 2]).unwrap();
    let rows = g.input("rows", DType::I32, &[2]).unwrap();
    let s = g.scale(src, 2.0).unwrap();
    let w = g.set_rows(cache, s, rows).unwrap();
    g.mark_output(w).unwrap();
    let mut p = planner(
        vec![Fake::gpu(vec![]), Fake::cpu()],
        SchedOptions::default(),
    );
    p.register_buffer(7, 0).unwrap();
    set_placement(&mut g, cache, 7, 0).unwrap();
    let plan = p.plan(&g).unwrap();
    assert_eq!(plan.assignment.backend[w.index()], 0);
    assert_eq!(
        plan.assignment.cause[w.index()],
        Cause::InPlace {
            root: cache.index()
        }
    );
    assert_eq!(
        plan.allocation.tensor[w.index()],
        Loc::External {
            backend: 0,
            buffer: 7,
            offset: 0
        }
    );
}
