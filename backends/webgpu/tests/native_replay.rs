//! Native replay (`native_replay=on`: a replayed graph submitted as one
//! Vulkan command buffer recorded once) against the same graphs computed
//! with it off, bit for bit, on the first WebGPU adapter (lavapipe on
//! machines without a GPU; the tests pass without an adapter, saying so).
//! They count native replays through a process-wide counter, so they take
//! turns.

mod common;

use common::{leaf, node};

use std::sync::Mutex;

use backplane_abi::plugin::{Backend, Buffer, Device};
use backplane_abi::{DType, Op, TensorDesc};
use backplane_webgpu::replay::native::native_replayed_graphs;

/// One test at a time: they compare the counter before and after.
static TURN: Mutex<()> = Mutex::new(());

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

/// q4_0 blocks of `n` bytes: scale 0.03, nibbles of a pattern by `seed`.
fn q4_0(n: u64, seed: u64) -> Vec<u8> {
    let scale = half::f16::from_f32(0.03).to_bits().to_le_bytes();
    (0..n / 18)
        .flat_map(|blk| {
            let quants = (0..16u64).map(move |i| ((blk * 7 + i * 13 + seed) % 256) as u8);
            scale.into_iter().chain(quants)
        })
        .collect()
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
    let w: Vec<u8> = (0..g[2].ne[0])
        .map(|i| 0.25 + ((i * (seed + 1)) % 5) as f32 / 4.0)
        .flat_map(|v| v.to_le_bytes())
        .collect();
    buf.set_tensor(&g[1], 0, &ids).expect("set ids");
    buf.set_tensor(&g[2], 0, &w).expect("set norm weight");
    for t in [0, 3] {
        let q = q4_0(g[t].nbytes(), seed as u64);
        buf.set_tensor(&g[t], 0, &q).expect("set quantized");
    }
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
    write_inputs(buf, g, seed, false);
    stream.graph_compute(g).expect("graph_compute");
    results(buf, g)
}

/// Computes `g` with `seed` on the native stream `native`; returns whether
/// it was submitted natively, after checking its results bitwise against
/// a `native_replay=off` stream's.
fn natively(
    dev: &dyn Device,
    native: &dyn Backend,
    buf: &dyn Buffer,
    g: &[TensorDesc],
    seed: i64,
) -> bool {
    natively_against(dev, native, "native_replay=off", buf, g, seed)
}

/// [`natively`], against a stream made with `off_params`.
fn natively_against(
    dev: &dyn Device,
    native: &dyn Backend,
    off_params: &str,
    buf: &dyn Buffer,
    g: &[TensorDesc],
    seed: i64,
) -> bool {
    let before = native_replayed_graphs();
    let got = compute(native, buf, g, seed);
    let was = native_replayed_graphs() > before;
    let off_stream = dev.init_backend(off_params).expect("stream");
    let want = compute(&*off_stream, buf, g, seed);
    assert!(
        got == want,
        "seed {seed}: results differ from native_replay=off"
    );
    was
}

#[test]
fn replays_submitted_natively_match_wgpu_bitwise_as_the_inputs_change() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let (ne0, rows) = (256, 3);
    let buf = dev
        .buffer_type()
        .alloc_buffer(graph_bytes(ne0, rows))
        .expect("alloc");
    let g = graph(buf.id(), ne0, rows);
    let stream = dev.init_backend("native_replay=on").expect("stream");
    // The first run makes the scratch memory (not recorded), the second is
    // recorded; every later one is replayed, natively.
    assert!(!natively(&*dev, &*stream, &*buf, &g, 1), "first run");
    assert!(!natively(&*dev, &*stream, &*buf, &g, 2), "second run");
    let mut seen: Vec<Vec<Vec<u8>>> = Vec::new();
    for seed in 3..8 {
        assert!(natively(&*dev, &*stream, &*buf, &g, seed), "run {seed}");
        // New inputs give new results: nothing stale is replayed.
        let r = results(&*buf, &g);
        assert!(!seen.contains(&r), "seed {seed} repeats an earlier result");
        seen.push(r);
    }
    // Another graph is recorded, then replayed natively too; the first is
    // still kept.
    let mut other = g.clone();
    other[9].op_params[0] = 1.5f32.to_bits() as i32;
    assert!(!natively(&*dev, &*stream, &*buf, &other, 8));
    assert!(natively(&*dev, &*stream, &*buf, &other, 9));
    assert!(natively(&*dev, &*stream, &*buf, &g, 10));
    // native_replay=off never submits natively.
    let off = dev.init_backend("native_replay=off").expect("stream");
    for seed in 11..14 {
        assert!(!natively(&*dev, &*off, &*buf, &g, seed));
    }
}

#[test]
fn a_bad_token_id_fails_a_native_replay_as_it_fails_wgpu() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let (ne0, rows) = (256, 2);
    let buf = dev
        .buffer_type()
        .alloc_buffer(graph_bytes(ne0, rows))
        .expect("alloc");
    let g = graph(buf.id(), ne0, rows);
    let stream = dev.init_backend("native_replay=on").expect("stream");
    for seed in 0..3 {
        natively(&*dev, &*stream, &*buf, &g, seed);
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
    assert!(natively(&*dev, &*stream, &*buf, &g, 4));
}

#[test]
fn native_replays_stop_after_the_scratch_grows_or_a_buffer_is_freed() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let small = (256, 3);
    // The mat-vec's quantized copy of the activations is over the first
    // scratch buffer's 1 MiB.
    let big = (1 << 18, 3);
    let bytes = graph_bytes(big.0, big.1);
    let buf = dev.buffer_type().alloc_buffer(bytes).expect("alloc");
    let g = graph(buf.id(), small.0, small.1);
    let g_big = graph(buf.id(), big.0, big.1);
    let stream = dev.init_backend("native_replay=on").expect("stream");
    assert!(!natively(&*dev, &*stream, &*buf, &g, 0));
    assert!(!natively(&*dev, &*stream, &*buf, &g, 1));
    assert!(natively(&*dev, &*stream, &*buf, &g, 2));
    // The big graph replaces the scratch buffer: the small one is planned
    // again on the new one, then replayed natively again.
    assert!(!natively(&*dev, &*stream, &*buf, &g_big, 3));
    assert!(!natively(&*dev, &*stream, &*buf, &g, 4), "old scratch");
    assert!(natively(&*dev, &*stream, &*buf, &g, 5));
    assert!(!natively(&*dev, &*stream, &*buf, &g_big, 6));
    assert!(natively(&*dev, &*stream, &*buf, &g_big, 7));
    // A freed buffer empties the recordings: the graph fails, natively
    // submitting nothing.
    drop(buf);
    let before = native_replayed_graphs();
    let err = stream
        .graph_compute(&g)
        .expect_err("a graph over a freed buffer computed");
    assert_eq!(native_replayed_graphs(), before, "replayed a freed buffer");
    assert!(err.to_string().contains("buffer"), "{err}");
    let buf = dev.buffer_type().alloc_buffer(bytes).expect("alloc");
    let g = graph(buf.id(), small.0, small.1);
    assert!(!natively(&*dev, &*stream, &*buf, &g, 8));
    assert!(natively(&*dev, &*stream, &*buf, &g, 9));
}

#[test]
fn native_mat_vec_kernels_replay_natively_from_their_own_spirv() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    // One row: the decode shape the native mat-vec serves (in builds with
    // the native-vulkan feature, on devices it runs on; the WGSL kernel
    // otherwise, which this then checks again).
    let (ne0, rows) = (256, 1);
    let buf = dev
        .buffer_type()
        .alloc_buffer(graph_bytes(ne0, rows))
        .expect("alloc");
    let g = graph(buf.id(), ne0, rows);
    let stream = dev
        .init_backend("native_replay=on; native=on")
        .expect("stream");
    let off = "native_replay=off; native=on";
    assert!(!natively_against(&*dev, &*stream, off, &*buf, &g, 0));
    assert!(!natively_against(&*dev, &*stream, off, &*buf, &g, 1));
    for seed in 2..5 {
        assert!(
            natively_against(&*dev, &*stream, off, &*buf, &g, seed),
            "run {seed}"
        );
    }
}
