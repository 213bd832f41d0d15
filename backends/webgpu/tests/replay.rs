//! Replayed graphs (`replay`, on by default) against the same graphs
//! planned afresh every time (`replay=off`), on the first WebGPU adapter
//! (lavapipe on machines without a GPU; the tests say so and pass without
//! one). The tests count replays through a process-wide counter, so they
//! take turns.

mod common;

use common::{leaf, node};

use std::sync::Mutex;

use backplane_abi::plugin::{Backend, Buffer, Device};
use backplane_abi::{DType, Op, TensorDesc};
use backplane_webgpu::replay::replayed_graphs;

/// One test at a time: they compare the replay counter before and after.
static TURN: Mutex<()> = Mutex::new(());

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

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// q4_0 blocks: scale 0.02, nibbles of a pattern.
fn q4_0_weight(n: u64) -> Vec<u8> {
    let scale = half::f16::from_f32(0.02).to_bits().to_le_bytes();
    (0..n / 18)
        .flat_map(|blk| {
            let quants = (0..16u64).map(move |i| ((blk * 7 + i * 13) % 256) as u8);
            scale.into_iter().chain(quants)
        })
        .collect()
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
        buf.set_tensor(&g[t], 0, &bytes(v)).expect("set input");
    }
    buf.set_tensor(&g[3], 0, &q4_0_weight(g[3].nbytes()))
        .expect("set weight");
}

/// The bytes of every node's result (nodes 4..).
fn results(buf: &dyn Buffer, g: &[TensorDesc]) -> Vec<Vec<u8>> {
    (4..g.len())
        .map(|t| {
            let mut out = vec![0u8; g[t].nbytes() as usize];
            buf.get_tensor(&g[t], 0, &mut out).expect("get");
            out
        })
        .collect()
}

/// Computes `g` on `stream` with inputs of `seed`; its results.
fn compute(stream: &dyn Backend, buf: &dyn Buffer, g: &[TensorDesc], seed: i64) -> Vec<Vec<u8>> {
    buf.clear(0).expect("clear");
    write_inputs(buf, g, seed);
    stream.graph_compute(g).expect("graph_compute");
    results(buf, g)
}

/// Computes `g` with `seed` on `stream`; returns whether it was replayed,
/// after checking its results bitwise against a `replay=off` stream's.
fn replayed(
    dev: &dyn Device,
    stream: &dyn Backend,
    buf: &dyn Buffer,
    g: &[TensorDesc],
    seed: i64,
) -> bool {
    let before = replayed_graphs();
    let fresh = compute(stream, buf, g, seed);
    let was = replayed_graphs() > before;
    let off_stream = dev.init_backend("replay=off").expect("stream");
    let off = compute(&*off_stream, buf, g, seed);
    assert!(fresh == off, "seed {seed}: results differ from replay=off");
    was
}

#[test]
fn a_graph_computed_again_with_new_inputs_is_replayed_and_matches_planning_afresh() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let (ne0, rows) = (320, 3);
    let buf = dev
        .buffer_type()
        .alloc_buffer(graph_bytes(ne0, rows))
        .expect("alloc");
    let g = graph(buf.id(), ne0, rows);
    let stream = dev.init_backend("").expect("stream");
    // The first run makes the stream's scratch memory, so it is not kept;
    // the second is.
    assert!(
        !replayed(&*dev, &*stream, &*buf, &g, 1),
        "first run replayed"
    );
    assert!(
        !replayed(&*dev, &*stream, &*buf, &g, 2),
        "second run replayed"
    );
    for seed in 3..6 {
        assert!(
            replayed(&*dev, &*stream, &*buf, &g, seed),
            "run {seed} planned"
        );
    }
    // A different graph is planned; the first is still kept.
    let mut other = g.clone();
    other[10].op_params[0] = 1.5f32.to_bits() as i32;
    assert!(!replayed(&*dev, &*stream, &*buf, &other, 7));
    assert!(replayed(&*dev, &*stream, &*buf, &other, 8));
    assert!(replayed(&*dev, &*stream, &*buf, &g, 9));
    // replay=off never replays.
    let off = dev.init_backend("replay=off").expect("stream");
    for seed in 10..12 {
        assert!(!replayed(&*dev, &*off, &*buf, &g, seed));
    }
}

#[test]
fn a_graph_is_planned_again_after_another_grew_the_scratch_memory() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let small = (320, 3);
    // The mat-vecs' quantized copy of d (2 bytes a value) is over the
    // first scratch buffer's 1 MiB.
    let big = (1 << 18, 3);
    let buf = dev
        .buffer_type()
        .alloc_buffer(graph_bytes(big.0, big.1))
        .expect("alloc");
    let g = graph(buf.id(), small.0, small.1);
    let g_big = graph(buf.id(), big.0, big.1);
    let stream = dev.init_backend("").expect("stream");
    assert!(!replayed(&*dev, &*stream, &*buf, &g, 0));
    assert!(!replayed(&*dev, &*stream, &*buf, &g, 1));
    assert!(replayed(&*dev, &*stream, &*buf, &g, 2));
    // Its scratch memory does not fit the small graph's: the stream's
    // scratch buffer is replaced, and the small graph is planned again.
    assert!(!replayed(&*dev, &*stream, &*buf, &g_big, 3));
    assert!(
        !replayed(&*dev, &*stream, &*buf, &g, 4),
        "replayed on old scratch"
    );
    assert!(replayed(&*dev, &*stream, &*buf, &g, 5));
    // The big graph grew the scratch while it was planned, so it was not
    // recorded then.
    assert!(!replayed(&*dev, &*stream, &*buf, &g_big, 6));
    assert!(replayed(&*dev, &*stream, &*buf, &g_big, 7));
}

#[test]
fn a_graph_over_a_freed_buffer_fails_instead_of_replaying() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let (ne0, rows) = (320, 3);
    let bytes = graph_bytes(ne0, rows);
    let buf = dev.buffer_type().alloc_buffer(bytes).expect("alloc");
    let g = graph(buf.id(), ne0, rows);
    let stream = dev.init_backend("").expect("stream");
    assert!(!replayed(&*dev, &*stream, &*buf, &g, 0));
    assert!(!replayed(&*dev, &*stream, &*buf, &g, 1));
    assert!(replayed(&*dev, &*stream, &*buf, &g, 2));
    drop(buf);
    let before = replayed_graphs();
    let err = stream
        .graph_compute(&g)
        .expect_err("a graph over a freed buffer computed");
    assert_eq!(replayed_graphs(), before, "replayed over a freed buffer");
    assert!(err.to_string().contains("buffer"), "{err}");
    // A new buffer (a new id) gives a new graph, planned afresh, then
    // replayed.
    let buf = dev.buffer_type().alloc_buffer(bytes).expect("alloc");
    let g = graph(buf.id(), ne0, rows);
    assert!(!replayed(&*dev, &*stream, &*buf, &g, 3));
    assert!(replayed(&*dev, &*stream, &*buf, &g, 4));
}
