//! The SYCL plugin, loaded from `target/plugins/` (built by `cargo xtask
//! plugins`), on whatever SYCL device the runtime finds: Intel's OpenCL CPU
//! device in CI, where `cargo xtask test` installs the runtime and exports
//! its environment (`eval "$(scripts/sycl-runtime.sh)"` does the same by
//! hand).
//!
//! Every test needs a device. Without one a test passes after printing why
//! only when the plugin says the runtime itself is missing (not built
//! against, not loadable); zero devices for any other reason is a failure.

use std::path::PathBuf;
use std::sync::OnceLock;

use backplane::examples::{BlockConfig, llama_block, weights};
use backplane::registry::{Device, Registry};
use backplane::sched::{Explanation, SchedOptions, Scheduler};
use backplane::{DType, Graph, Op, SortOrder};
use backplane_tests::{bytes_f32, cpu_plugin, f32_bytes, install, nmse, plugin_dir, require};
use backplane_tests::{filled_leaves, load_backend_from, place, scratch_dir};

/// NMSE bound of a whole block against the CPU backend (conformance's
/// MUL_MAT bound: every projection is a product).
const NMSE_BLOCK: f64 = 5e-4;

/// Parts of the no-device reasons the plugin gives when the runtime is
/// missing (see `backplane_sycl_sys::load`).
const RUNTIME_MISSING: [&str; 3] = [
    "SYCL runtime not available",
    "SYCL shim",
    "cannot load the SYCL shim",
];

/// One directory holding the SYCL plugin and the baseline CPU plugin.
fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch_dir("sycl");
        install(&require(&plugin_dir(), "sycl"), &dir, "sycl");
        install(&cpu_plugin(), &dir, "cpu-x86-64");
        dir
    })
}

/// The registry of the SYCL and CPU plugins; the SYCL one must load.
fn registry() -> Registry {
    load_backend_from(dir(), "sycl")
}

/// The first SYCL device, or None (after printing why) when the runtime is
/// missing; zero devices for any other reason fails the test.
fn device(reg: &Registry) -> Option<Device> {
    let b = reg.backend("sycl").expect("loaded");
    if let Some(d) = b.devices.first() {
        return Some(d.clone());
    }
    let why = b.no_device_reason.as_deref().unwrap_or("");
    assert!(
        RUNTIME_MISSING.iter().any(|m| why.contains(m)),
        "the SYCL plugin has no device although the runtime is there: {why:?} \
         (run `eval \"$(scripts/sycl-runtime.sh)\"` first)"
    );
    eprintln!("skipped: the SYCL runtime is missing here: {why}");
    None
}

#[test]
fn plugin_loads_and_reports_devices_or_why_it_has_none() {
    let reg = registry();
    let b = reg.backend("sycl").expect("loaded");
    assert!(
        b.devices.is_empty() == b.no_device_reason.is_some(),
        "devices {} and reason {:?}",
        b.devices.len(),
        b.no_device_reason
    );
    let Some(d) = device(&reg) else { return };
    assert_eq!(d.backend(), "sycl");
    assert!(d.name().starts_with("sycl"), "{}", d.name());
    let mem = d.memory();
    assert!(
        mem.total_bytes > 0 && mem.free_bytes <= mem.total_bytes,
        "{mem:?}"
    );
    let buft = d.buffer_type();
    assert!(buft.alignment().is_power_of_two());
    assert!(!buft.is_host());
}

#[test]
fn device_description_shows_architecture_and_family() {
    let reg = registry();
    let Some(d) = device(&reg) else { return };
    let desc = d.description();
    println!("{}: {desc}", d.name());
    let field = |key: &str| {
        desc.split(", ")
            .find_map(|part| part.strip_prefix(key))
            .unwrap_or_else(|| panic!("no '{key}' in {desc:?}"))
            .to_string()
    };
    let arch = field("arch ");
    let family = field("family ");
    assert!(!arch.is_empty(), "{desc}");
    let families = [
        "unknown",
        "igpu-non-xe",
        "igpu-xe",
        "dgpu-client",
        "dgpu-cloud",
    ];
    assert!(families.contains(&family.as_str()), "{family} in {desc}");
    // An Intel GPU architecture maps to a GPU family; anything else
    // (the OpenCL CPU device) to `unknown`.
    assert_eq!(
        arch.starts_with("intel_gpu_"),
        family != "unknown",
        "{desc}"
    );
}

#[test]
fn buffers_round_trip_set_get_memset_and_copy() {
    let reg = registry();
    let Some(d) = device(&reg) else { return };
    let buft = d.buffer_type();
    let buf = buft.alloc_buffer(4096).expect("alloc");
    assert_eq!(buf.size(), 4096);
    buf.clear(0xEE).unwrap();

    // An unaligned byte tensor: its neighbours stay untouched.
    let mut t = backplane::TensorDesc::new(DType::I8, [37, 1, 1, 1]);
    t.buffer = buf.id();
    t.offset = 3;
    let data: Vec<u8> = (0..37u8)
        .map(|i| i.wrapping_mul(7).wrapping_add(1))
        .collect();
    buf.set_tensor(&t, 0, &data).unwrap();
    let mut back = vec![0u8; 37];
    buf.get_tensor(&t, 0, &mut back).unwrap();
    assert_eq!(back, data);
    let mut whole = backplane::TensorDesc::new(DType::I8, [48, 1, 1, 1]);
    whole.buffer = buf.id();
    let mut all = vec![0u8; 48];
    buf.get_tensor(&whole, 0, &mut all).unwrap();
    assert_eq!(&all[..3], &[0xEE; 3]);
    assert_eq!(&all[40..], &[0xEE; 8]);

    // memset of a sub-range, and partial reads at an offset.
    buf.memset_tensor(&t, 0x11, 5, 9).unwrap();
    buf.get_tensor(&t, 0, &mut back).unwrap();
    assert_eq!(&back[5..14], &[0x11; 9]);
    assert_eq!(&back[..5], &data[..5]);
    assert_eq!(&back[14..], &data[14..]);
    let mut tail = [0u8; 4];
    buf.get_tensor(&t, 33, &mut tail).unwrap();
    assert_eq!(tail, data[33..]);

    // f32 values, copied on the device within a buffer and across buffers.
    let values: Vec<f32> = (0..64).map(|i| i as f32 * 0.25 - 3.0).collect();
    let mut a = backplane::TensorDesc::new(DType::F32, [64, 1, 1, 1]);
    a.buffer = buf.id();
    a.offset = 1024;
    buf.set_tensor(&a, 0, &f32_bytes(&values)).unwrap();
    let mut same = a;
    same.offset = 2048;
    assert!(buf.cpy_tensor(&a, &same).unwrap(), "same-buffer copy");
    let other = buft.alloc_buffer(1024).expect("alloc");
    let mut b = a;
    b.buffer = other.id();
    b.offset = 256;
    assert!(other.cpy_tensor(&a, &b).unwrap(), "cross-buffer copy");
    for (src, t) in [(&buf, &same), (&other, &b)] {
        let mut out = vec![0u8; 256];
        src.get_tensor(t, 0, &mut out).unwrap();
        assert_eq!(bytes_f32(&out), values);
    }

    // Out-of-range access is an error, not a crash.
    let mut far = a;
    far.offset = 4090;
    assert!(buf.set_tensor(&far, 0, &[0u8; 16]).is_err());
    assert!(buf.get_tensor(&a, 0, &mut vec![0u8; 8192]).is_err());
    assert!(other.memset_tensor(&b, 0, 0, 4096).is_err());
}

#[test]
fn supports_op_refuses_unimplemented_ops_with_reasons() {
    let reg = registry();
    let Some(d) = device(&reg) else { return };
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[64, 4]).unwrap();
    let sum = g.sum_rows(x).unwrap();
    let sorted = g.argsort(x, SortOrder::Asc).unwrap();
    let w_q5k = g.weight("w_q5k", DType::Q5_K, &[256, 8]).unwrap();
    let xk = g.input("xk", DType::F32, &[256, 4]).unwrap();
    let mm_q5k = g.mul_mat(w_q5k, xk).unwrap();
    let w_f32 = g.weight("w", DType::F32, &[64, 8]).unwrap();
    let mm_f32 = g.mul_mat(w_f32, x).unwrap();
    let added = g.add(x, x).unwrap();
    let max = d.buffer_type().max_size();
    let huge_rows = (max / 4 / 1024 + 1) as i64;
    let big = g.input("big", DType::F32, &[1024, huge_rows]).unwrap();
    let big_sum = g.scale(big, 2.0).unwrap();

    let reason = |t: backplane::TensorId| {
        let v = d.supports_op(g.tensors(), t.index());
        assert!(!v.is_supported(), "{} accepted", g.name(t));
        v.reason().unwrap_or_default().to_string()
    };
    for (t, op) in [(sum, Op::SumRows), (sorted, Op::Argsort)] {
        let why = reason(t);
        assert!(
            why.contains(&op.to_string()) && why.contains("not implemented"),
            "{op}: {why}"
        );
    }
    let why = reason(mm_q5k);
    assert!(
        why.contains("weights of type") && why.contains(DType::Q5_K.name()),
        "{why}"
    );
    let why = reason(big_sum);
    assert!(why.contains("max allocation"), "{why}");
    for t in [mm_f32, added] {
        let v = d.supports_op(g.tensors(), t.index());
        assert!(v.is_supported(), "{}: {:?}", g.name(t), v.reason());
    }
}

/// The block's result on the CPU plugin alone.
fn on_cpu(reg: &Registry, g: &Graph) -> Vec<f32> {
    let cpu = reg.backend("cpu").expect("cpu plugin loaded").devices[0].clone();
    let mut s = Scheduler::new(vec![cpu], SchedOptions::default()).expect("scheduler");
    let mut host = filled_leaves(g);
    s.compute(g, &mut host).expect("CPU compute");
    host.get_f32(g, g.find("result").expect("result"))
}

/// Runs `cfg`'s block with the SYCL device first and the CPU last, in
/// strict mode with the weights in SYCL memory; checks that every node
/// ran on the SYCL device and that the result matches the CPU's.
fn block_on_sycl(cfg: &BlockConfig) {
    let reg = registry();
    let Some(sycl) = device(&reg) else { return };
    let cpu = reg.backend("cpu").expect("cpu plugin loaded").devices[0].clone();
    let mut g = llama_block(cfg).expect("block graph");
    let want = on_cpu(&reg, &g);

    let strict = SchedOptions {
        strict: true,
        ..SchedOptions::default()
    };
    let mut s = Scheduler::new(vec![sycl, cpu], strict).expect("scheduler");
    let mut host = filled_leaves(&g);
    let w = weights(&g);
    s.place_weights(&mut g, 0, &w).expect("placing weights");
    for &t in &w {
        s.upload(&g, t, host.bytes(t)).expect("uploading weights");
    }

    // Planned: every compute node on the SYCL device, nothing refused.
    let ex = s.explain(&g).expect("explain");
    let sycl_name = ex.backends[0].clone();
    assert!(sycl_name.starts_with("sycl"), "{ex}");
    assert!(!ex.nodes.is_empty(), "{ex}");
    for n in &ex.nodes {
        assert_eq!(
            n.backend, sycl_name,
            "node {} '{}' ({}) not on SYCL\n{ex}",
            n.node, n.name, n.op
        );
        assert!(!n.is_fallback(), "{}: {:?}\n{ex}", n.name, n.refused);
    }
    assert_eq!(ex.fallbacks().count(), 0, "{ex}");
    assert_eq!(ex.nodes_per_backend[1], 0, "{ex}");
    assert_eq!(ex.splits, 1, "{ex}");

    // Run: the plan that ran says the same.
    let plan = s.compute(&g, &mut host).expect("strict compute on SYCL");
    let ran = Explanation::new(&plan, &g);
    assert_eq!(plan.stats.nodes_per_backend[0], ex.nodes.len(), "{ran}");
    assert_eq!(plan.stats.nodes_per_backend[1], 0, "{ran}");
    assert!(ran.nodes.iter().all(|n| n.backend == sycl_name), "{ran}");

    let got = host.get_f32(&g, g.find("result").expect("result"));
    assert!(got.iter().all(|v| v.is_finite()), "non-finite output");
    let e = nmse(&got, &want);
    println!(
        "{} weights, flash_attn {}: {} nodes on {sycl_name}, nmse vs cpu {e:e}",
        cfg.weight_type,
        cfg.flash_attn,
        ex.nodes.len()
    );
    assert!(e <= NMSE_BLOCK, "nmse {e} > {NMSE_BLOCK}\n{ran}");
}

#[test]
fn llama_block_runs_entirely_on_sycl_in_strict_mode() {
    block_on_sycl(&BlockConfig::default());
}

#[test]
fn llama_block_with_q4_0_weights_and_soft_max_attention_runs_entirely_on_sycl() {
    block_on_sycl(&BlockConfig {
        weight_type: DType::Q4_0,
        flash_attn: false,
        ..BlockConfig::default()
    });
}

#[test]
fn graph_results_match_the_host_after_place() {
    // A small graph placed by hand (no scheduler): RMS_NORM, MUL, MUL_MAT.
    let reg = registry();
    let Some(d) = device(&reg) else { return };
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[64, 3]).unwrap();
    let gain = g.weight("gain", DType::F32, &[64]).unwrap();
    let w = g.weight("w", DType::F16, &[64, 16]).unwrap();
    let n = g.rms_norm(x, 1e-5).unwrap();
    let n = g.mul(n, gain).unwrap();
    let r = g.mul_mat(w, n).unwrap();
    g.set_name(r, "result");
    g.mark_output(r).unwrap();
    let host = filled_leaves(&g);
    let mut want = filled_leaves(&g);
    backplane_reference::compute(&g, &mut want).unwrap();

    let (descs, buf) = place(&g, &d.buffer_type());
    for t in [x, gain, w] {
        buf.set_tensor(&descs[t.index()], 0, host.bytes(t)).unwrap();
    }
    let s = d.init_backend("").expect("stream");
    s.graph_compute(&descs).expect("graph_compute");
    let mut out = vec![0u8; 3 * 16 * 4];
    buf.get_tensor(&descs[r.index()], 0, &mut out).unwrap();
    let e = nmse(&bytes_f32(&out), &want.get_f32(&g, r));
    assert!(e <= NMSE_BLOCK, "nmse {e}");
}
