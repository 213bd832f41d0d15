//! Extra buffer types through real plugin files: the CPU plugin's
//! `cpu_repack` layout offered through the ABI extension symbol, chosen by
//! the scheduler for the weights whose every reader it runs, and giving
//! the same results as ggml's layout; SYCL's reordered and WebGPU's split
//! layouts likewise, round-tripping ggml's bytes at any offset and length
//! and refusing the readers they do not serve. (x86-64: the CPU's
//! repacked kernels exist there only.)
#![cfg(target_arch = "x86_64")]

use backplane::sched::{SchedOptions, Scheduler};
use backplane::{DType, Graph, TensorId};
use backplane_quant::quantize_row;
use backplane_tests::{bytes_f32, load_only, plugin_dir, require, scratch_dir_with, test_values};

/// The AVX2 CPU plugin (the baseline variant has no repacked kernels),
/// or None on a CPU without AVX2.
fn avx2_cpu(test: &str) -> Option<backplane::registry::Device> {
    avx2_cpus(test, 1).pop()
}

/// The AVX2 CPU plugin's device from `count` registries loaded one after
/// another from the same file (one library, several registrations).
fn avx2_cpus(test: &str, count: usize) -> Vec<backplane::registry::Device> {
    if !std::arch::is_x86_feature_detected!("avx2") {
        eprintln!("no AVX2: the repacked kernels are not offered; skipped");
        return Vec::new();
    }
    let file = require(&plugin_dir(), "cpu-avx2");
    let dir = scratch_dir_with(test, &[(file, "cpu-avx2")]);
    (0..count)
        .map(|_| {
            let reg = load_only([&dir]);
            reg.devices().next().expect("the cpu device").clone()
        })
        .collect()
}

/// Weights `w` (q4_0 [256, 16]) read by MUL_MAT with `x` and by GET_ROWS
/// with `ids`, and `bias` read by ADD.
struct Net {
    g: Graph,
    w: TensorId,
    bias: TensorId,
    x: TensorId,
    ids: TensorId,
    out: TensorId,
    rows: TensorId,
}

fn net() -> Net {
    let mut g = Graph::new();
    let w = g.weight("w", DType::Q4_0, &[256, 16]).unwrap();
    let bias = g.weight("bias", DType::F32, &[16]).unwrap();
    let x = g.input("x", DType::F32, &[256, 1]).unwrap();
    let ids = g.input("ids", DType::I32, &[2]).unwrap();
    let y = g.mul_mat(w, x).unwrap();
    let out = g.add(y, bias).unwrap();
    let rows = g.get_rows(w, ids).unwrap();
    g.mark_output(out).unwrap();
    g.mark_output(rows).unwrap();
    Net {
        g,
        w,
        bias,
        x,
        ids,
        out,
        rows,
    }
}

/// Runs the net with weights placed preferring extra types (`prefer`) or
/// not; returns the outputs and the number of blocks placed.
fn run(device: &backplane::registry::Device, prefer: bool) -> (Vec<f32>, Vec<f32>, usize) {
    let mut n = net();
    let mut s = Scheduler::new(vec![device.clone()], SchedOptions::default()).unwrap();
    let leaves = [n.w, n.bias];
    let blocks = if prefer {
        s.place_weights_preferred(&mut n.g, 0, &leaves)
            .unwrap()
            .len()
    } else {
        s.place_weights(&mut n.g, 0, &leaves).unwrap();
        1
    };
    let mut q = vec![0u8; DType::Q4_0.row_size(256).unwrap() * 16];
    for (r, out) in q
        .chunks_exact_mut(DType::Q4_0.row_size(256).unwrap())
        .enumerate()
    {
        quantize_row(DType::Q4_0, &test_values(r as u64, 256), out).unwrap();
    }
    s.upload(&n.g, n.w, &q).unwrap();
    let bias: Vec<u8> = test_values(99, 16)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    s.upload(&n.g, n.bias, &bias).unwrap();
    let x: Vec<u8> = test_values(7, 256)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let ids: Vec<u8> = [11i32, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut out = vec![0u8; 16 * 4];
    let mut rows = vec![0u8; 2 * 256 * 4];
    s.run(
        &n.g,
        &[(n.x, &x), (n.ids, &ids)],
        &mut [(n.out, &mut out), (n.rows, &mut rows)],
    )
    .unwrap();
    (bytes_f32(&out), bytes_f32(&rows), blocks)
}

#[test]
fn the_cpu_plugin_offers_its_repacked_layout_through_the_extension() {
    let Some(cpu) = avx2_cpu("extra-types-offered") else {
        return;
    };
    let names: Vec<String> = cpu.extra_buffer_types().iter().map(|b| b.name()).collect();
    assert_eq!(names, ["cpu_repack"]);
}

#[test]
fn preferred_placement_repacks_only_weights_whose_readers_run_repacked() {
    let Some(cpu) = avx2_cpu("extra-types-placement") else {
        return;
    };
    let mut n = net();
    let mut s = Scheduler::new(vec![cpu], SchedOptions::default()).unwrap();
    let keys = s
        .place_weights_preferred(&mut n.g, 0, &[n.w, n.bias])
        .unwrap();
    // The f32 bias (read by ADD) stays in ggml's layout; the q4_0 weight
    // (MUL_MAT and GET_ROWS) is repacked: two blocks, default first.
    assert_eq!(keys.len(), 2);
    let (w_key, bias_key) = (n.g.desc(n.w).buffer, n.g.desc(n.bias).buffer);
    assert_eq!(keys, [bias_key, w_key]);
}

#[test]
fn repacked_weights_give_the_results_of_ggml_layout() {
    let Some(cpu) = avx2_cpu("extra-types-results") else {
        return;
    };
    let (out_plain, rows_plain, _) = run(&cpu, false);
    let (out_packed, rows_packed, blocks) = run(&cpu, true);
    assert_eq!(blocks, 2);
    // One column: the repacked mat-vec sums in the ggml-layout kernel's
    // order, so the results are equal, not just close.
    assert_eq!(out_packed, out_plain);
    assert_eq!(rows_packed, rows_plain);
}

#[test]
fn each_registration_of_one_plugin_file_gets_its_own_repacked_buffers() {
    // The same file loaded by two registries is one library with two
    // registrations, each with its own table of live buffers: the second's
    // extra buffer type must be its own, or its device refuses the buffers.
    let cpus = avx2_cpus("extra-types-two-registries", 2);
    let Some(second) = cpus.last() else { return };
    let (out_plain, rows_plain, _) = run(second, false);
    let (out_packed, rows_packed, blocks) = run(second, true);
    assert_eq!(blocks, 2);
    assert_eq!(out_packed, out_plain);
    assert_eq!(rows_packed, rows_plain);
}

// Layouts of the accelerator backends, checked through their plugin files
// on the devices here (Intel's OpenCL CPU device for SYCL, lavapipe for
// WebGPU): SYCL's reordered q4_0 / q8_0 (`sycl0_reorder`) and WebGPU's
// split q4_0 and q4_K (`webgpu-gpu0-split`).

/// Marks the child process a test reruns itself in (see [`in_child`]).
const LAYOUT_CHILD: &str = "BACKPLANE_TEST_LAYOUT_CHILD";

/// True inside the child process; otherwise reruns test `name` in a child
/// with `env` set (options a plugin reads once, when it loads), checks that
/// it passed, and returns false.
fn in_child(name: &str, env: &[(&str, &str)]) -> bool {
    if std::env::var_os(LAYOUT_CHILD).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args(["--exact", name, "--nocapture"])
        .env(LAYOUT_CHILD, "1")
        .envs(env.iter().copied())
        .output()
        .expect("running the child test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    false
}

/// The first device of plugin `backend` installed alone in a scratch
/// directory, or None (printed) when it has none here.
fn plugin_device(test: &str, backend: &str) -> Option<backplane::registry::Device> {
    let file = require(&plugin_dir(), backend);
    let dir = scratch_dir_with(test, &[(file, backend)]);
    let reg = backplane_tests::load_backend_from(&dir, backend);
    let b = reg.backend(backend).expect("loaded");
    let d = b.devices.first().cloned();
    if d.is_none() {
        eprintln!(
            "skipped: {backend} has no device here: {:?}",
            b.no_device_reason
        );
    }
    d
}

/// The device's extra buffer type called `layout`; fails naming the ones
/// it has.
fn layout_of(
    device: &backplane::registry::Device,
    layout: &str,
) -> backplane::registry::BufferType {
    let extra = device.extra_buffer_types();
    let names: Vec<String> = extra.iter().map(|b| b.name()).collect();
    extra
        .iter()
        .find(|b| b.name() == layout)
        .cloned()
        .unwrap_or_else(|| panic!("{} offers {names:?}, not {layout}", device.name()))
}

/// ggml bytes of a `dtype` matrix of `k` x `m` from test values.
fn quantized(dtype: DType, k: usize, m: usize, seed: u64) -> Vec<u8> {
    let row = dtype.row_size(k).unwrap();
    let mut q = vec![0u8; row * m];
    for (r, out) in q.chunks_exact_mut(row).enumerate() {
        quantize_row(dtype, &test_values(seed + r as u64, k), out).unwrap();
    }
    q
}

/// Row length of the layout tests' weights: 96, or one block of a type
/// with longer blocks (q4_K: 256).
fn row_len(dtype: DType) -> usize {
    dtype.block_size().max(96)
}

/// Writes a `dtype` [K, 5] tensor into a buffer of `layout` in pieces of
/// odd lengths (partial blocks at both ends), reads it back whole and in
/// odd pieces, and memsets a range across blocks: always ggml's bytes.
fn assert_round_trips(layout: &backplane::registry::BufferType, dtype: DType) {
    let k = row_len(dtype);
    let ggml = quantized(dtype, k, 5, 3);
    let align = layout.alignment();
    let mut t = backplane::TensorDesc::new(dtype, [k as i64, 5, 1, 1]);
    let buf = layout.alloc_buffer(align + layout.alloc_size(&t)).unwrap();
    t.buffer = buf.id();
    t.offset = align;
    let mut at = 0;
    for len in [1usize, 17, 18, 35, 7, 100].iter().cycle() {
        if at == ggml.len() {
            break;
        }
        let n = (*len).min(ggml.len() - at);
        buf.set_tensor(&t, at as u64, &ggml[at..at + n]).unwrap();
        at += n;
    }
    let mut whole = vec![0u8; ggml.len()];
    buf.get_tensor(&t, 0, &mut whole).unwrap();
    assert_eq!(whole, ggml, "{} {dtype}: whole tensor", layout.name());
    for (off, len) in [(5usize, 33usize), (18, 18), (1, ggml.len() - 2), (0, 1)] {
        let mut part = vec![0u8; len];
        buf.get_tensor(&t, off as u64, &mut part).unwrap();
        assert_eq!(part, &ggml[off..off + len], "{dtype}: {len} bytes at {off}");
    }
    buf.memset_tensor(&t, 0x11, 20, 30).unwrap();
    let mut want = ggml.clone();
    want[20..50].fill(0x11);
    buf.get_tensor(&t, 0, &mut whole).unwrap();
    assert_eq!(whole, want, "{dtype}: after memset");
}

/// Weights `w` (`dtype` [K, 8]) read by MUL_MAT with `n` columns and,
/// with `rows`, by GET_ROWS; returns the graph and its outputs.
fn layout_net(dtype: DType, n: i64, rows: bool) -> (Graph, TensorId, Vec<TensorId>) {
    let mut g = Graph::new();
    let k = row_len(dtype) as i64;
    let w = g.weight("w", dtype, &[k, 8]).unwrap();
    let x = g.input("x", DType::F32, &[k, n]).unwrap();
    let mut outs = vec![g.mul_mat(w, x).unwrap()];
    if rows {
        let ids = g.input("ids", DType::I32, &[3]).unwrap();
        outs.push(g.get_rows(w, ids).unwrap());
    }
    for &o in &outs {
        g.mark_output(o).unwrap();
    }
    (g, w, outs)
}

/// Runs `layout_net` on `device` with `w` in ggml's layout or, with
/// `layout`, in a buffer of it; returns the outputs' bytes.
fn run_layout_net(
    device: &backplane::registry::Device,
    layout: Option<&backplane::registry::BufferType>,
    dtype: DType,
    n: i64,
    rows: bool,
) -> Vec<Vec<u8>> {
    let (g, w, outs) = layout_net(dtype, n, rows);
    let (mut descs, buf) = backplane_tests::place(&g, &device.buffer_type());
    let stream = device.init_backend("").unwrap();
    for (i, d) in descs.iter().enumerate() {
        assert!(
            device.supports_op(&descs, i).is_supported(),
            "{}: node {i} ({:?}) refused",
            device.name(),
            d.op()
        );
    }
    let kept = layout.map(|l| {
        let b = l.alloc_buffer(l.alloc_size(&descs[w.index()])).unwrap();
        descs[w.index()].buffer = b.id();
        descs[w.index()].offset = 0;
        b
    });
    let host = backplane_tests::filled_leaves(&g);
    for t in g.ids() {
        if g.desc(t).op().is_ok_and(|op| op == backplane::Op::None) {
            let bytes = if t == w {
                quantized(dtype, row_len(dtype), 8, 11)
            } else if g.desc(t).dtype().unwrap() == DType::I32 {
                [7i32, 0, 3].iter().flat_map(|v| v.to_le_bytes()).collect()
            } else {
                host.bytes(t).to_vec()
            };
            match (&kept, t == w) {
                (Some(b), true) => b.set_tensor(&descs[t.index()], 0, &bytes).unwrap(),
                _ => buf.set_tensor(&descs[t.index()], 0, &bytes).unwrap(),
            }
        }
    }
    stream.graph_compute(&descs).unwrap();
    outs.iter()
        .map(|o| {
            let mut out = vec![0u8; descs[o.index()].nbytes() as usize];
            buf.get_tensor(&descs[o.index()], 0, &mut out).unwrap();
            out
        })
        .collect()
}

/// A CONT of weights in `layout`: the buffer type refuses it, and a graph
/// running it anyway is refused naming the layout.
fn assert_other_readers_refused(device: &backplane::registry::Device, layout: &str, dtype: DType) {
    let l = layout_of(device, layout);
    let mut g = Graph::new();
    let w = g.weight("w", dtype, &[row_len(dtype) as i64, 8]).unwrap();
    let c = g.cont(w).unwrap();
    g.mark_output(c).unwrap();
    let (mut descs, _buf) = backplane_tests::place(&g, &device.buffer_type());
    assert!(!l.supports_op(&descs, c.index()), "{layout} accepts CONT");
    let b = l.alloc_buffer(l.alloc_size(&descs[w.index()])).unwrap();
    descs[w.index()].buffer = b.id();
    descs[w.index()].offset = 0;
    b.set_tensor(
        &descs[w.index()],
        0,
        &quantized(dtype, row_len(dtype), 8, 1),
    )
    .unwrap();
    let stream = device.init_backend("").unwrap();
    let e = stream.graph_compute(&descs).unwrap_err().to_string();
    assert!(e.contains(layout), "{e}");
}

/// Every check of a layout: offered, round trips, equal results with the
/// plain layout for MUL_MAT (one, three and nine columns) and, where
/// `get_rows`, GET_ROWS; other readers refused.
fn assert_layout(
    device: &backplane::registry::Device,
    layout: &str,
    types: &[DType],
    get_rows: bool,
) {
    let l = layout_of(device, layout);
    for &t in types {
        assert_round_trips(&l, t);
        for n in [1, 3, 9] {
            let plain = run_layout_net(device, None, t, n, get_rows);
            let stored = run_layout_net(device, Some(&l), t, n, get_rows);
            assert_eq!(stored, plain, "{layout} {t} n={n}");
        }
        assert_other_readers_refused(device, layout, t);
    }
    // The layout takes the weights of the readers it runs, and only those.
    let (g, _, outs) = layout_net(types[0], 1, true);
    let descs = g.tensors();
    assert!(l.supports_op(descs, outs[0].index()));
    assert_eq!(l.supports_op(descs, outs[1].index()), get_rows);
}

#[test]
fn sycl_reordered_weights_round_trip_and_give_the_results_of_ggml_layout() {
    // The layout is offered where the reorder applies: Intel GPUs, or any
    // device with enable_reorder (the OpenCL CPU device here).
    let name = "sycl_reordered_weights_round_trip_and_give_the_results_of_ggml_layout";
    if !in_child(name, &[("BACKPLANE_SYCL_ENABLE_REORDER", "1")]) {
        return;
    }
    let Some(sycl) = plugin_device("layout-sycl", "sycl") else {
        return;
    };
    let layout = format!("{}_reorder", sycl.name());
    assert_layout(&sycl, &layout, &[DType::Q4_0, DType::Q8_0], true);
    eprintln!("child computed on {}", sycl.description());
}

/// Whether this process asks the WebGPU devices for their split weight
/// layout (device-wide option `split_weights`, off by default; `cargo
/// xtask test` turns it on so that the layout stays tested).
fn webgpu_split_on() -> bool {
    std::env::var("BACKPLANE_WEBGPU_SPLIT_WEIGHTS")
        .is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "on" | "1" | "true" | "yes"))
}

#[test]
fn webgpu_split_weights_round_trip_and_give_the_results_of_ggml_layout() {
    let Some(gpu) = plugin_device("layout-webgpu", "webgpu") else {
        return;
    };
    if !webgpu_split_on() {
        assert!(
            gpu.extra_buffer_types().is_empty(),
            "the split layout is offered only with split_weights on"
        );
        eprintln!("split_weights off: the device offers no weight layout");
        return;
    }
    let layout = format!("webgpu-{}-split", gpu.name());
    // GET_ROWS does not read the split layout: refused, so a tied
    // embedding stays in ggml's layout.
    assert_layout(&gpu, &layout, &[DType::Q4_0, DType::Q4_K], false);
}

#[test]
fn backplane_devices_lists_the_sycl_and_webgpu_weight_layouts() {
    let bin = backplane_tests::target_dir()
        .join("debug")
        .join("backplane");
    assert!(
        bin.is_file(),
        "{} missing: cargo build -p backplane-cli",
        bin.display()
    );
    let plugins = [
        (require(&plugin_dir(), "sycl"), "sycl"),
        (require(&plugin_dir(), "webgpu"), "webgpu"),
    ];
    let dir = scratch_dir_with("layout-cli", &plugins);
    let out = std::process::Command::new(bin)
        .args(["devices", "--plugin-dir"])
        .arg(&dir)
        .env("BACKPLANE_PROBE", "off")
        .env("BACKPLANE_SYCL_ENABLE_REORDER", "1")
        .env_remove("BACKPLANE_REMOTE")
        .output()
        .expect("running backplane");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).expect("UTF-8 output");
    // Each device line of these backends is followed by its memory line,
    // then its weight layouts.
    let mut seen = 0;
    let split = webgpu_split_on().then_some("webgpu-gpu0-split");
    for (device, layout) in [("sycl0", Some("sycl0_reorder")), ("gpu0", split)] {
        let Some(at) = text.find(&format!("device {device} ")) else {
            eprintln!("no {device} here");
            continue;
        };
        let block: Vec<&str> = text[at..].lines().take(3).collect();
        let third = block.get(2).map(|l| l.trim()).unwrap_or("");
        match layout {
            Some(layout) => assert_eq!(third, format!("weight layouts: {layout}"), "{text}"),
            None => assert!(!third.starts_with("weight layouts"), "{text}"),
        }
        seen += 1;
    }
    eprintln!("{seen} of 2 devices present:\n{text}");
}

/// Runs projections of `x` by `proj` (read by MUL_MAT only) and `embd`
/// (MUL_MAT and GET_ROWS) on `device` through the scheduler, the weights
/// placed preferring extra types or not; returns the outputs, the keys of
/// the blocks made (the default buffer type's first) and those of the
/// weights (`proj`, `embd`).
fn run_two_weights(
    device: &backplane::registry::Device,
    prefer: bool,
) -> (Vec<Vec<u8>>, Vec<u64>, [u64; 2]) {
    let mut g = Graph::new();
    let proj = g.weight("proj", DType::Q4_0, &[96, 8]).unwrap();
    let embd = g.weight("embd", DType::Q4_0, &[96, 8]).unwrap();
    let x = g.input("x", DType::F32, &[96, 1]).unwrap();
    let ids = g.input("ids", DType::I32, &[2]).unwrap();
    let outs = [
        g.mul_mat(proj, x).unwrap(),
        g.mul_mat(embd, x).unwrap(),
        g.get_rows(embd, ids).unwrap(),
    ];
    for o in outs {
        g.mark_output(o).unwrap();
    }
    let mut s = Scheduler::new(vec![device.clone()], SchedOptions::default()).unwrap();
    let blocks = if prefer {
        s.place_weights_preferred(&mut g, 0, &[proj, embd]).unwrap()
    } else {
        s.place_weights(&mut g, 0, &[proj, embd]).unwrap();
        Vec::new()
    };
    s.upload(&g, proj, &quantized(DType::Q4_0, 96, 8, 5))
        .unwrap();
    s.upload(&g, embd, &quantized(DType::Q4_0, 96, 8, 6))
        .unwrap();
    let xb: Vec<u8> = test_values(7, 96)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let idb: Vec<u8> = [5i32, 1].iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut bufs = vec![vec![0u8; 8 * 4], vec![0u8; 8 * 4], vec![0u8; 2 * 96 * 4]];
    {
        let mut wanted: Vec<(TensorId, &mut [u8])> = outs
            .iter()
            .zip(bufs.iter_mut())
            .map(|(&o, b)| (o, b.as_mut_slice()))
            .collect();
        s.run(&g, &[(x, &xb), (ids, &idb)], &mut wanted).unwrap();
    }
    (bufs, blocks, [g.desc(proj).buffer, g.desc(embd).buffer])
}

#[test]
fn webgpu_preferred_placement_splits_only_weights_no_other_op_reads() {
    let Some(gpu) = plugin_device("layout-webgpu-sched", "webgpu") else {
        return;
    };
    let (plain, _, _) = run_two_weights(&gpu, false);
    let (preferred, blocks, [proj_key, embd_key]) = run_two_weights(&gpu, true);
    if !webgpu_split_on() {
        // No weight layout offered: both weights in the default block.
        assert_eq!(blocks, [embd_key]);
        assert_eq!(proj_key, embd_key);
        assert_eq!(preferred, plain);
        return;
    }
    // The embedding, also read by GET_ROWS, stays in ggml's layout (the
    // default block, first); the projection is split. Same results.
    assert_eq!(blocks, [embd_key, proj_key]);
    assert_eq!(preferred, plain);
}
