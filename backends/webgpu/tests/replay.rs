//! Replayed graphs (`replay`, on by default) against the same graphs
//! planned afresh every time (`replay=off`), on the first WebGPU adapter
//! (lavapipe on machines without a GPU; the tests say so and pass without
//! one). The tests count replays through a process-wide counter, so they
//! take turns.

mod common;

use common::replay::{Rig, Suite};
use common::{f32_bytes, leaf, node, q4_0_pattern};

use backplane_abi::plugin::Buffer;
use backplane_abi::{DType, Op, TensorDesc};
use backplane_webgpu::replay::replayed_graphs;

/// [`graph`] and its inputs, counting replays, compared with `replay=off`.
static SUITE: Suite = Suite {
    graph,
    graph_bytes,
    write_inputs,
    counter: replayed_graphs,
    reference: "replay=off",
};

const EPS: f32 = 1e-5;
/// Rows of the q4_0 weight.
const M: i64 = 16;

/// Byte offsets of a graph's tensors, each slot `slot` bytes.
fn at(slot: u64, k: u64) -> u64 {
    k * slot
}

/// Bytes per tensor slot of a graph of `ne0` x `rows`: the activations,
/// the products or the q4_0 weight, whichever is largest.
fn slot_bytes(ne0: i64, rows: i64) -> u64 {
    let floats = (ne0 * rows).max(M * rows) * 4;
    let weight = ne0 / 32 * 18 * M;
    (floats.max(weight) as u64).next_multiple_of(4096)
}

/// x [ne0, rows], b and w (one row each), a q4_0 weight [ne0, M];
/// s = x + b; n = rms_norm(s); d = n * w; two MUL_MATs of the weight by d
/// (they share one quantized copy of d in scratch memory); r = d + s; and
/// a SCALE of r.
fn graph(buffer: u64, ne0: i64, rows: i64) -> Vec<TensorDesc> {
    let slot = slot_bytes(ne0, rows);
    let ne = [ne0, rows, 1, 1];
    let mut n = node(Op::RmsNorm, ne, at(slot, 5), buffer, &[4]);
    n.op_params[0] = EPS.to_bits() as i32;
    let mut wq = TensorDesc::new(DType::Q4_0, [ne0, M, 1, 1]);
    wq.buffer = buffer;
    wq.offset = at(slot, 3);
    let mut scaled = node(Op::Scale, ne, at(slot, 10), buffer, &[9]);
    scaled.op_params[0] = 0.75f32.to_bits() as i32;
    vec![
        leaf(ne, 0, buffer),
        leaf([ne0, 1, 1, 1], at(slot, 1), buffer),
        leaf([ne0, 1, 1, 1], at(slot, 2), buffer),
        wq,
        node(Op::Add, ne, at(slot, 4), buffer, &[0, 1]),
        n,
        node(Op::Mul, ne, at(slot, 6), buffer, &[5, 2]),
        node(Op::MulMat, [M, rows, 1, 1], at(slot, 7), buffer, &[3, 6]),
        node(Op::MulMat, [M, rows, 1, 1], at(slot, 8), buffer, &[3, 6]),
        node(Op::Add, ne, at(slot, 9), buffer, &[6, 4]),
        scaled,
    ]
}

/// Bytes a buffer for [`graph`] needs.
fn graph_bytes(ne0: i64, rows: i64) -> u64 {
    11 * slot_bytes(ne0, rows)
}

/// Writes inputs that differ with `seed` into x, b, w and the weight.
fn write_inputs(buf: &dyn Buffer, g: &[TensorDesc], seed: i64) {
    let ne0 = g[0].ne[0];
    let x: Vec<f32> = (0..g[0].nelements())
        .map(|i| (((i + seed) * 37 % 101) as f32 - 50.0) / (7.0 + seed as f32))
        .collect();
    let b: Vec<f32> = (0..ne0)
        .map(|i| ((i + seed) % 13) as f32 / 5.0 - 1.0)
        .collect();
    let w: Vec<f32> = (0..ne0)
        .map(|i| 0.5 + ((i * seed) % 7) as f32 / 3.0)
        .collect();
    for (t, v) in [(0, &x), (1, &b), (2, &w)] {
        buf.set_tensor(&g[t], 0, &f32_bytes(v)).expect("set input");
    }
    buf.set_tensor(&g[3], 0, &q4_0_pattern(g[3].nbytes(), 0.02, 0))
        .expect("set weight");
}

#[test]
fn a_graph_computed_again_with_new_inputs_is_replayed_and_matches_planning_afresh() {
    let Some(rig) = Rig::new(&SUITE) else {
        return;
    };
    let (buf, g, stream) = rig.setup((320, 3), "");
    // The first run makes the stream's scratch memory, so it is not kept;
    // the second is.
    rig.assert_counted_from_the_third_run(&*stream, &*buf, &g, 1..6);
    // A different graph is planned; the first is still kept.
    rig.assert_another_graph_is_kept_apart(&*stream, &*buf, &g, 7);
    // replay=off never replays.
    rig.assert_the_reference_never_counts(&*buf, &g, 10..12);
}

#[test]
fn a_graph_is_planned_again_after_another_grew_the_scratch_memory() {
    let Some(rig) = Rig::new(&SUITE) else {
        return;
    };
    // The mat-vecs' quantized copy of d (2 bytes a value) is over the
    // first scratch buffer's 1 MiB.
    let big = (1 << 18, 3);
    rig.assert_counts_resume_after_the_scratch_grows((320, 3), big, "");
}

#[test]
fn a_graph_over_a_freed_buffer_fails_instead_of_replaying() {
    let Some(rig) = Rig::new(&SUITE) else {
        return;
    };
    let shape = (320, 3);
    let (buf, g, stream) = rig.setup(shape, "");
    rig.assert_counted_from_the_third_run(&*stream, &*buf, &g, 0..3);
    rig.assert_a_freed_buffer_fails(&*stream, buf, &g);
    // A new buffer (a new id) gives a new graph, planned afresh, then
    // replayed.
    let buf = rig.alloc(shape);
    let g = rig.graph(&*buf, shape);
    assert!(!rig.counted(&*stream, &*buf, &g, 3));
    assert!(rig.counted(&*stream, &*buf, &g, 4));
}
