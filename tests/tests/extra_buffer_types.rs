//! Extra buffer types through real plugin files: the CPU plugin's
//! `cpu_repack` layout offered through the ABI extension symbol, chosen by
//! the scheduler for the weights whose every reader it runs, and giving
//! the same results as ggml's layout. (x86-64: the repacked kernels exist
//! there only.)
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
