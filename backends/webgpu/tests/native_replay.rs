//! Native replay (`native_replay=on`: a replayed graph submitted as one
//! Vulkan command buffer recorded once) against the same graphs computed
//! with it off, bit for bit, on the first WebGPU adapter (lavapipe on
//! machines without a GPU; the tests pass without an adapter, saying so).
//! They count native replays through a process-wide counter, so they take
//! turns.

mod common;

use common::replay::{Rig, Suite, node_results};
use common::{f32_bytes, leaf, node, q4_0_pattern};

use backplane_abi::plugin::Buffer;
use backplane_abi::{DType, Op, TensorDesc};
use backplane_webgpu::replay::native::{native_barriers, native_replayed_graphs};

/// [`graph`] and its inputs (every token id in range), counting native
/// replays, compared with `native_replay=off`.
static SUITE: Suite = Suite {
    graph,
    graph_bytes,
    write_inputs: |buf, g, seed| write_inputs(buf, g, seed, false),
    counter: native_replayed_graphs,
    reference: "native_replay=off",
};

/// Rows of the embedding table.
const VOCAB: i64 = 8;
/// Rows of the q4_0 projection.
const M: i64 = 16;
/// Bytes per tensor slot (every tensor of the graphs below fits).
fn slot_bytes(ne0: i64, rows: i64) -> u64 {
    let floats = (ne0 * rows.max(VOCAB)) * 4;
    (floats as u64).next_multiple_of(4096)
}

/// A decode-like graph over `buffer`: q4_0 embeddings [ne0, VOCAB] picked
/// by `rows` i32 token ids (GET_ROWS, which binds the error flag), then
/// RMS_NORM, MUL by a norm weight, a q4_0 MUL_MAT [ne0, M], a residual ADD
/// and a SCALE.
fn graph(buffer: u64, ne0: i64, rows: i64) -> Vec<TensorDesc> {
    let slot = slot_bytes(ne0, rows);
    let at = |k: u64| k * slot;
    let ne = [ne0, rows, 1, 1];
    let mut table = TensorDesc::new(DType::Q4_0, [ne0, VOCAB, 1, 1]);
    table.buffer = buffer;
    let mut ids = TensorDesc::new(DType::I32, [rows, 1, 1, 1]);
    ids.buffer = buffer;
    ids.offset = at(1);
    let mut proj = TensorDesc::new(DType::Q4_0, [ne0, M, 1, 1]);
    proj.buffer = buffer;
    proj.offset = at(3);
    let mut norm = node(Op::RmsNorm, ne, at(5), buffer, &[4]);
    norm.op_params[0] = 1e-5f32.to_bits() as i32;
    let mut scaled = node(Op::Scale, ne, at(9), buffer, &[8]);
    scaled.op_params[0] = 0.5f32.to_bits() as i32;
    vec![
        table,
        ids,
        leaf([ne0, 1, 1, 1], at(2), buffer),
        proj,
        node(Op::GetRows, ne, at(4), buffer, &[0, 1]),
        norm,
        node(Op::Mul, ne, at(6), buffer, &[5, 2]),
        node(Op::MulMat, [M, rows, 1, 1], at(7), buffer, &[3, 6]),
        node(Op::Add, ne, at(8), buffer, &[6, 4]),
        scaled,
    ]
}

/// Bytes a buffer for [`graph`] needs.
fn graph_bytes(ne0: i64, rows: i64) -> u64 {
    10 * slot_bytes(ne0, rows)
}

/// Writes inputs that differ with `seed` (token ids, norm weight, both
/// quantized tensors); `bad_id` puts an out-of-range id in the last row.
fn write_inputs(buf: &dyn Buffer, g: &[TensorDesc], seed: i64, bad_id: bool) {
    let rows = g[1].ne[0];
    let mut ids: Vec<i32> = (0..rows).map(|r| ((r + seed) % VOCAB) as i32).collect();
    if bad_id {
        ids[rows as usize - 1] = VOCAB as i32 + 3;
    }
    let ids: Vec<u8> = ids.iter().flat_map(|v| v.to_le_bytes()).collect();
    let w: Vec<f32> = (0..g[2].ne[0])
        .map(|i| 0.25 + ((i * (seed + 1)) % 5) as f32 / 4.0)
        .collect();
    buf.set_tensor(&g[1], 0, &ids).expect("set ids");
    buf.set_tensor(&g[2], 0, &f32_bytes(&w))
        .expect("set norm weight");
    for t in [0, 3] {
        let q = q4_0_pattern(g[t].nbytes(), 0.03, seed as u64);
        buf.set_tensor(&g[t], 0, &q).expect("set quantized");
    }
}

#[test]
fn replays_submitted_natively_match_wgpu_bitwise_as_the_inputs_change() {
    let Some(rig) = Rig::new(&SUITE) else {
        return;
    };
    let (buf, g, stream) = rig.setup((256, 3), "native_replay=on");
    // The first run makes the scratch memory (not recorded), the second is
    // recorded; every later one is replayed, natively.
    rig.assert_counted_from_the_third_run(&*stream, &*buf, &g, 1..3);
    let mut seen: Vec<Vec<Vec<u8>>> = Vec::new();
    for seed in 3..8 {
        assert!(rig.counted(&*stream, &*buf, &g, seed), "run {seed}");
        // New inputs give new results: nothing stale is replayed.
        let r = node_results(&*buf, &g);
        assert!(!seen.contains(&r), "seed {seed} repeats an earlier result");
        seen.push(r);
    }
    // Another graph is recorded, then replayed natively too; the first is
    // still kept.
    rig.assert_another_graph_is_kept_apart(&*stream, &*buf, &g, 8);
    // native_replay=off never submits natively.
    rig.assert_the_reference_never_counts(&*buf, &g, 11..14);
}

#[test]
fn kernels_apart_in_memory_share_a_barrier_with_the_same_bits_as_serial_ones() {
    let Some(rig) = Rig::new(&SUITE) else {
        return;
    };
    // The MUL_MAT and the residual ADD both read the normalised row and
    // write apart: no barrier between them unless serial.
    for (params, serial) in [("native_replay=on", false), ("native_replay=serial", true)] {
        let (buf, g, stream) = rig.setup((256, 3), params);
        let before = native_barriers();
        for seed in 0..4 {
            // Bitwise against native_replay=off each time.
            assert_eq!(rig.counted(&*stream, &*buf, &g, seed), seed >= 2);
        }
        let (barriers, gaps) = (
            native_barriers().0 - before.0,
            native_barriers().1 - before.1,
        );
        assert!(gaps > 0, "{params}: no native twin recorded");
        if serial {
            assert_eq!(barriers, gaps, "{params}: a barrier between every two");
        } else {
            assert!(
                barriers < gaps,
                "{params}: {barriers} barriers in {gaps} gaps"
            );
        }
    }
}

#[test]
fn a_bad_token_id_fails_a_native_replay_as_it_fails_wgpu() {
    let Some(rig) = Rig::new(&SUITE) else {
        return;
    };
    let (buf, g, stream) = rig.setup((256, 2), "native_replay=on");
    for seed in 0..3 {
        rig.counted(&*stream, &*buf, &g, seed);
    }
    let before = native_replayed_graphs();
    write_inputs(&*buf, &g, 3, true);
    let err = stream
        .graph_compute(&g)
        .expect_err("an out-of-range id computed");
    assert!(native_replayed_graphs() > before, "not replayed natively");
    let msg = err.to_string();
    assert!(
        msg.contains("node 4") && msg.contains("out of range"),
        "{msg}"
    );
    // The flag is cleared again for the next graph.
    assert!(rig.counted(&*stream, &*buf, &g, 4));
}

#[test]
fn native_replays_stop_after_the_scratch_grows_or_a_buffer_is_freed() {
    let Some(rig) = Rig::new(&SUITE) else {
        return;
    };
    let small = (256, 3);
    // The mat-vec's quantized copy of the activations is over the first
    // scratch buffer's 1 MiB.
    let big = (1 << 18, 3);
    // The big graph replaces the scratch buffer: the small one is planned
    // again on the new one, then replayed natively again.
    let (buf, g, stream) =
        rig.assert_counts_resume_after_the_scratch_grows(small, big, "native_replay=on");
    // A freed buffer empties the recordings: the graph fails, natively
    // submitting nothing.
    rig.assert_a_freed_buffer_fails(&*stream, buf, &g);
    let buf = rig.alloc(big);
    let g = rig.graph(&*buf, small);
    assert!(!rig.counted(&*stream, &*buf, &g, 8));
    assert!(rig.counted(&*stream, &*buf, &g, 9));
}

#[test]
fn native_mat_vec_kernels_replay_natively_from_their_own_spirv() {
    let Some(mut rig) = Rig::new(&SUITE) else {
        return;
    };
    // One row: the decode shape the native mat-vec serves (in builds with
    // the native-vulkan feature, on devices it runs on; the WGSL kernel
    // otherwise, which this then checks again).
    let (buf, g, stream) = rig.setup((256, 1), "native_replay=on; native=on");
    rig.reference = "native_replay=off; native=on";
    rig.assert_counted_from_the_third_run(&*stream, &*buf, &g, 0..5);
}
