//! The scheduler over real plugins: the `picky` fixture (a GPU-typed
//! backend with its own memory that computes ADD, MUL, SCALE, RMS_NORM and
//! MUL_MAT on f32/f16 weights, and refuses the rest with reasons) ahead of
//! the CPU plugin, both loaded through the registry. Build them first with
//! `cargo xtask plugins --fixtures`.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use backplane::registry::{Device, Registry};
use backplane::sched::{Cause, Explanation, Plan, SchedError, SchedOptions, Scheduler};
use backplane::{DType, Graph, HostTensors, Op, RopeParams, TensorId, rope_mode};
use backplane_abi::plugin::DeviceType;
use backplane_tests::{
    cpu_plugin, cpu_plugin_name, device_of, filled_leaves, load_all_of, nmse, picky_plugin,
    scratch_dir_with,
};

/// NMSE bounds as conformance uses them.
const NMSE_MUL_MAT: f64 = 5e-4;
const NMSE_EXACT: f64 = 1e-7;

const PICKY: &str = "picky/picky0";
const ROPE_REASON: &str = "ROPE not implemented";
const Q4_0_REASON: &str = "weight type q4_0 not implemented";

/// One directory holding the CPU plugin and the picky fixture.
fn plugin_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        scratch_dir_with(
            "sched",
            &[(cpu_plugin(), cpu_plugin_name()), (picky_plugin(), "picky")],
        )
    })
}

/// The registry (kept alive by the caller) and `[picky, cpu]`.
fn devices() -> (Registry, Vec<Device>) {
    let reg = load_all_of(plugin_dir());
    let picky = device_of(&reg, "picky", 0);
    let cpu = device_of(&reg, "cpu", 0);
    assert_eq!(picky.device_type(), DeviceType::Gpu);
    assert!(!picky.buffer_type().is_host());
    assert_eq!(picky.buffer_type().name(), "picky-vram");
    (reg, vec![picky, cpu])
}

fn scheduler(devices: &[Device], options: SchedOptions) -> Scheduler {
    Scheduler::new(devices.to_vec(), options).expect("scheduler")
}

/// A small Llama-ish block: rms_norm, mul by a norm weight, an f16
/// projection, rope (refused by picky), a q4_0 projection (refused by
/// picky), a residual add, an f16 feed-forward and a second residual add.
fn llama_ish() -> Graph {
    let (e, heads, t, ff) = (64i64, 4i64, 4i64, 128i64);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[e, t]).unwrap();
    let pos = g.input("pos", DType::I32, &[t]).unwrap();
    let norm_w = g.weight("blk.attn_norm", DType::F32, &[e]).unwrap();
    let wq = g.weight("blk.wq", DType::F16, &[e, e]).unwrap();
    let wo = g.weight("blk.wo", DType::Q4_0, &[e, e]).unwrap();
    let w_up = g.weight("blk.w_up", DType::F16, &[e, ff]).unwrap();
    let w_down = g.weight("blk.w_down", DType::F16, &[ff, e]).unwrap();

    let n = g.rms_norm(x, 1e-5).unwrap();
    g.set_name(n, "norm");
    let n = g.mul(n, norm_w).unwrap();
    g.set_name(n, "norm_scaled");
    let q = g.mul_mat(wq, n).unwrap();
    g.set_name(q, "q");
    let q = g.reshape(q, &[e / heads, heads, t]).unwrap();
    let q = g
        .rope(
            q,
            pos,
            None,
            RopeParams::new((e / heads) as i32, rope_mode::NORMAL),
        )
        .unwrap();
    g.set_name(q, "q_rope");
    let q = g.reshape(q, &[e, t]).unwrap();
    let o = g.mul_mat(wo, q).unwrap();
    g.set_name(o, "attn_out");
    let h = g.add(o, x).unwrap();
    g.set_name(h, "h");
    let up = g.mul_mat(w_up, h).unwrap();
    g.set_name(up, "ffn_up");
    let down = g.mul_mat(w_down, up).unwrap();
    g.set_name(down, "ffn_down");
    let r = g.add(down, h).unwrap();
    g.set_name(r, "result");
    g.mark_output(r).unwrap();
    g
}

/// The output `result` of `g` computed by the reference kernels.
fn reference(g: &Graph) -> Vec<f32> {
    let mut host = filled_leaves(g);
    backplane_reference::compute(g, &mut host).unwrap();
    host.get_f32(g, g.find("result").unwrap())
}

fn id(g: &Graph, name: &str) -> TensorId {
    g.find(name)
        .unwrap_or_else(|| panic!("no tensor named {name}"))
}

/// Places the f32/f16 weights of `g` on picky (backend 0) and the q4_0
/// one in CPU memory (backend 1), then uploads them from `host`.
fn place_and_upload(s: &mut Scheduler, g: &mut Graph, host: &HostTensors) {
    let on_picky: Vec<TensorId> = ["blk.attn_norm", "blk.wq", "blk.w_up", "blk.w_down"]
        .iter()
        .map(|n| id(g, n))
        .collect();
    let on_cpu = [id(g, "blk.wo")];
    s.place_weights(g, 0, &on_picky).unwrap();
    s.place_weights(g, 1, &on_cpu).unwrap();
    for &t in on_picky.iter().chain(&on_cpu) {
        s.upload(g, t, host.bytes(t)).unwrap();
    }
}

/// [`llama_ish`] with its leaves filled and its weights placed and uploaded
/// (see [`place_and_upload`]) on a scheduler over `devs`.
fn placed_llama_ish(devs: &[Device], options: SchedOptions) -> (Graph, HostTensors, Scheduler) {
    let mut g = llama_ish();
    let host = filled_leaves(&g);
    let mut s = scheduler(devs, options);
    place_and_upload(&mut s, &mut g, &host);
    (g, host, s)
}

fn node<'a>(ex: &'a Explanation, g: &Graph, name: &str) -> &'a backplane::sched::NodeReport {
    let i = id(g, name).index();
    ex.nodes
        .iter()
        .find(|n| n.node == i)
        .unwrap_or_else(|| panic!("{name} not in the explanation:\n{ex}"))
}

#[test]
fn llama_ish_graph_over_picky_and_cpu_equals_the_reference() {
    let (_reg, devs) = devices();
    let want = reference(&llama_ish());
    let (g, mut host, mut s) = placed_llama_ish(&devs, SchedOptions::default());
    let plan = s.compute(&g, &mut host).unwrap();
    let ex = Explanation::new(&plan, &g);
    // Both backends did real work, with copies between them.
    assert!(plan.stats.nodes_per_backend[0] >= 6, "{ex}");
    assert!(plan.stats.nodes_per_backend[1] >= 2, "{ex}");
    assert!(plan.stats.splits >= 3, "{ex}");
    assert!(plan.stats.copies > 0, "{ex}");
    for name in [
        "norm",
        "norm_scaled",
        "q",
        "h",
        "ffn_up",
        "ffn_down",
        "result",
    ] {
        assert_eq!(node(&ex, &g, name).backend, PICKY, "{name}\n{ex}");
    }
    let got = host.get_f32(&g, id(&g, "result"));
    let e = nmse(&got, &want);
    println!("{ex}nmse {e:e}");
    assert!(e <= NMSE_MUL_MAT, "nmse {e} > {NMSE_MUL_MAT}\n{ex}");
}

#[test]
fn explain_gives_pickys_reasons_for_rope_and_the_q4_0_mul_mat() {
    let (_reg, devs) = devices();
    let (g, _host, mut s) = placed_llama_ish(&devs, SchedOptions::default());
    let ex = s.explain(&g).unwrap();
    let cpu = &ex.backends[1];
    for (name, reason) in [("q_rope", ROPE_REASON), ("attn_out", Q4_0_REASON)] {
        let n = node(&ex, &g, name);
        assert_eq!(&n.backend, cpu, "{name}\n{ex}");
        assert_eq!(
            n.refused,
            vec![(PICKY.to_string(), reason.to_string())],
            "{name}\n{ex}"
        );
    }
    let fallbacks: Vec<&str> = ex.fallbacks().map(|n| n.name.as_str()).collect();
    assert_eq!(fallbacks, ["q_rope", "attn_out"], "{ex}");
    let text = ex.to_string();
    for reason in [ROPE_REASON, Q4_0_REASON] {
        assert!(
            text.contains(&format!("{PICKY} refused: {reason}")),
            "{text}"
        );
    }
    assert!(text.contains("2 fallback(s)"), "{text}");
}

#[test]
fn strict_mode_fails_listing_exactly_the_fallback_nodes() {
    let (_reg, devs) = devices();
    let strict = SchedOptions {
        strict: true,
        ..SchedOptions::default()
    };
    let (g, mut host, mut s) = placed_llama_ish(&devs, strict);
    let err = s.compute(&g, &mut host).unwrap_err();
    let SchedError::Fallback(nodes) = &err else {
        panic!("expected a fallback error, got: {err}")
    };
    let listed: Vec<(usize, Op, &str)> = nodes
        .iter()
        .map(|n| (n.node, n.op, n.name.as_str()))
        .collect();
    assert_eq!(
        listed,
        [
            (id(&g, "q_rope").index(), Op::Rope, "q_rope"),
            (id(&g, "attn_out").index(), Op::MulMat, "attn_out"),
        ]
    );
    assert_eq!(
        nodes[0].refusals,
        vec![(PICKY.to_string(), ROPE_REASON.to_string())]
    );
    assert_eq!(
        nodes[1].refusals,
        vec![(PICKY.to_string(), Q4_0_REASON.to_string())]
    );
    let msg = err.to_string();
    assert!(msg.contains("2 node(s) would fall back"), "{msg}");
    assert!(
        msg.contains(ROPE_REASON) && msg.contains(Q4_0_REASON),
        "{msg}"
    );
    assert_eq!(s.stats().runs, 0, "nothing ran");
}

#[test]
fn weights_placed_on_picky_pull_their_ops_there() {
    let (_reg, devs) = devices();
    // Unplaced weights: inputs live in host memory, so the CPU, reading
    // them without copies, gets everything; picky supports but is not chosen.
    let g = llama_ish();
    let mut s = scheduler(&devs, SchedOptions::default());
    let ex = s.explain(&g).unwrap();
    assert_eq!(ex.nodes_per_backend[0], 0, "{ex}");
    let q = node(&ex, &g, "q");
    assert_ne!(q.backend, PICKY, "{ex}");
    assert_eq!(q.not_chosen, [PICKY], "{ex}");

    // Placed on picky: the ops reading them move there, and say why.
    let (g, mut host, mut s) = placed_llama_ish(&devs, SchedOptions::default());
    let plan = s.compute(&g, &mut host).unwrap();
    let names = |i: usize| g.name(TensorId(i)).to_string();
    for (op, weight) in [
        ("norm_scaled", "blk.attn_norm"),
        ("q", "blk.wq"),
        ("ffn_up", "blk.w_up"),
        ("ffn_down", "blk.w_down"),
    ] {
        let i = id(&g, op).index();
        assert_eq!(plan.assignment.backend[i], 0, "{op}");
        assert_eq!(
            plan.assignment.cause[i],
            Cause::Weights {
                src: id(&g, weight).index()
            },
            "{op}"
        );
        assert_eq!(
            plan.assignment.cause[i].describe(&names),
            format!("reads weights '{weight}' that live there")
        );
    }
    let ex = s.explain(&g).unwrap();
    let text = ex.to_string();
    assert!(
        text.contains("reads weights 'blk.wq' that live there"),
        "{text}"
    );
    // The q4_0 weight stays in host memory: its op runs on the CPU, for that reason.
    assert_eq!(
        node(&ex, &g, "attn_out").cause,
        "reads weights 'blk.wo' that live there"
    );
    // The rms_norm reads no weight: it follows its neighbours to picky.
    let norm = node(&ex, &g, "norm");
    assert_eq!(norm.backend, PICKY, "{ex}");
    assert_eq!(norm.cause, Cause::Spread.describe(&names));
}

#[test]
fn picky_refuses_tensors_over_its_size_limit_naming_the_limit() {
    let (_reg, devs) = devices();
    let n = 96 * 1024; // 384 KiB of f32
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[n]).unwrap();
    let bias = g.weight("bias", DType::F32, &[n]).unwrap();
    let small_w = g.weight("small", DType::F32, &[1024]).unwrap();
    let big = g.add(a, bias).unwrap();
    g.set_name(big, "big_add");
    let small_in = g.input("s", DType::F32, &[1024]).unwrap();
    let small = g.mul(small_in, small_w).unwrap();
    g.set_name(small, "small_mul");
    let r = g.scale(small, 2.0).unwrap();
    g.set_name(r, "result");
    g.mark_output(big).unwrap();
    g.mark_output(r).unwrap();

    let mut host = filled_leaves(&g);
    let mut s = scheduler(&devs, SchedOptions::default());
    s.place_weights(&mut g, 0, &[small_w]).unwrap();
    s.upload(&g, small_w, host.bytes(small_w)).unwrap();
    let ex = s.explain(&g).unwrap();
    let b = node(&ex, &g, "big_add");
    assert_ne!(b.backend, PICKY, "{ex}");
    let [(who, why)] = b.refused.as_slice() else {
        panic!("{ex}")
    };
    assert_eq!(who, PICKY);
    assert!(
        why.contains("over the max tensor size of 262144 bytes (256 KiB)"),
        "{why}"
    );
    assert_eq!(node(&ex, &g, "small_mul").backend, PICKY, "{ex}");
    assert_eq!(node(&ex, &g, "result").backend, PICKY, "{ex}");

    let mut want = filled_leaves(&g);
    backplane_reference::compute(&g, &mut want).unwrap();
    s.compute(&g, &mut host).unwrap();
    for t in [big, r] {
        let e = nmse(&host.get_f32(&g, t), &want.get_f32(&g, t));
        assert!(e <= NMSE_EXACT, "{}: nmse {e}", g.name(t));
    }
}

/// `len` element-wise ops (ADD, MUL, SCALE, RMS_NORM in turn) over a
/// 1024-float vector; the weights they read are named `c` and `g`.
/// Runs `g` once on a scheduler over `devs`, with the `weights` (by name)
/// placed on the first device; returns the plan, the host tensors after
/// the run and the reference result.
fn run_placed(
    devs: &[Device],
    g: &mut Graph,
    weights: &[&str],
) -> (Arc<Plan>, HostTensors, Vec<f32>) {
    let want = reference(g);
    let mut host = filled_leaves(g);
    let mut s = scheduler(devs, SchedOptions::default());
    let w: Vec<TensorId> = weights.iter().map(|n| id(g, n)).collect();
    s.place_weights(g, 0, &w).unwrap();
    for &t in &w {
        s.upload(g, t, host.bytes(t)).unwrap();
    }
    let plan = s.compute(g, &mut host).unwrap();
    (plan, host, want)
}

fn chain(len: usize) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[1024]).unwrap();
    let c = g.weight("c", DType::F32, &[1024]).unwrap();
    let gain = g.weight("g", DType::F32, &[1024]).unwrap();
    let mut cur = x;
    for i in 0..len {
        cur = match i % 4 {
            0 => g.add(cur, c).unwrap(),
            1 => g.mul(cur, gain).unwrap(),
            2 => g.scale(cur, 0.75).unwrap(),
            _ => g.rms_norm(cur, 1e-6).unwrap(),
        };
    }
    g.set_name(cur, "result");
    g.mark_output(cur).unwrap();
    g
}

#[test]
fn allocator_reuses_picky_memory_on_a_long_element_wise_chain() {
    let (_reg, devs) = devices();
    let len = 200;
    let mut g = chain(len);
    let (plan, host, want) = run_placed(&devs, &mut g, &["c", "g"]);
    let ex = Explanation::new(&plan, &g);
    assert_eq!(plan.stats.nodes_per_backend[0], len, "{ex}");
    assert_eq!(plan.stats.splits, 1, "{ex}");
    let (peak, naive) = (plan.stats.peak_bytes[0], plan.stats.naive_bytes[0]);
    let link = 1024 * 4;
    assert!(naive >= len as u64 * link, "naive {naive}");
    assert!(
        peak <= 3 * link,
        "peak {peak} not far below naive {naive}\n{ex}"
    );
    let got = host.get_f32(&g, id(&g, "result"));
    let e = nmse(&got, &want);
    println!(
        "peak {peak} naive {naive} in place {} nmse {e:e}",
        plan.stats.in_place
    );
    assert!(e <= NMSE_EXACT, "nmse {e}");
}

#[test]
fn a_cached_plan_is_not_planned_again_and_a_second_compute_allocates_nothing() {
    let (_reg, devs) = devices();
    let want = reference(&llama_ish());
    let (g, mut host, mut s) = placed_llama_ish(&devs, SchedOptions::default());
    s.compute(&g, &mut host).unwrap();
    let (built, hits) = (s.planner().plans_built(), s.planner().cache_hits());
    assert_eq!(built, 1);
    let stats = s.stats().clone();
    assert!(stats.buffer_allocations > 0);

    // The same structure, built afresh and bound to the placed weights.
    let mut g2 = llama_ish();
    assert_eq!(s.bind_weights(&mut g2), 5);
    let mut host2 = filled_leaves(&g2);
    s.compute(&g2, &mut host2).unwrap();
    assert_eq!(s.planner().plans_built(), built, "no new planning");
    assert_eq!(s.planner().cache_hits(), hits + 1);
    let after = s.stats();
    assert_eq!(after.buffer_allocations, stats.buffer_allocations);
    assert_eq!(after.runs, stats.runs + 1);
    assert_eq!(after.copies, 2 * stats.copies);
    let e = nmse(&host2.get_f32(&g2, id(&g2, "result")), &want);
    assert!(e <= NMSE_MUL_MAT, "nmse {e}");
}

/// Q and K projections of one input, each reshaped to heads and rotated,
/// then added: the shape of a layer's attention inputs.
fn rotated_projections() -> Graph {
    let (e, heads, t) = (64i64, 4i64, 3i64);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[e, t]).unwrap();
    let pos = g.input("pos", DType::I32, &[t]).unwrap();
    let mut rotated = Vec::new();
    for name in ["q", "k"] {
        let w = g.weight(&format!("w{name}"), DType::F32, &[e, e]).unwrap();
        let p = g.mul_mat(w, x).unwrap();
        g.set_name(p, name);
        let p = g.reshape(p, &[e / heads, heads, t]).unwrap();
        let params = RopeParams::new((e / heads) as i32, rope_mode::NEOX);
        let r = g.rope(p, pos, None, params).unwrap();
        g.set_name(r, format!("{name}_rope"));
        rotated.push(r);
    }
    let sum = g.add(rotated[0], rotated[1]).unwrap();
    let r = g.reshape(sum, &[e, t]).unwrap();
    let r = g.scale(r, 1.0).unwrap();
    g.set_name(r, "result");
    g.mark_output(r).unwrap();
    g
}

#[test]
fn a_rope_over_a_reshaped_projection_takes_the_projection_memory() {
    let (_reg, devs) = devices();
    let mut g = rotated_projections();
    let (plan, host, want) = run_placed(&devs[1..], &mut g, &["wq", "wk"]);
    let ex = Explanation::new(&plan, &g);
    // Each ROPE reads a reshape of its projection, which dies there: it
    // writes over the projection, so Q's and K's ROPEs touch apart memory
    // (neither writes what the other reads).
    let loc = |name: &str| plan.allocation.tensor[id(&g, name).0];
    for name in ["q", "k"] {
        assert_eq!(loc(&format!("{name}_rope")), loc(name), "{name}\n{ex}");
    }
    assert_ne!(loc("q"), loc("k"), "{ex}");
    assert!(plan.stats.in_place >= 2, "{ex}");
    let got = host.get_f32(&g, id(&g, "result"));
    let e = nmse(&got, &want);
    assert!(e <= NMSE_MUL_MAT, "nmse {e:e}");
}
