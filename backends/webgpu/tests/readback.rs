//! Reads through the device's kept staging buffer: reads of growing and
//! shrinking sizes at unaligned offsets return exactly the bytes written,
//! and a read over the kept buffer's limit goes through one of its own.
//! A graph's outputs, copied for the host in the graph's wait, are read
//! from that copy until anything writes the device's memory.

mod common;

use backplane_abi::plugin::{Backend, Buffer};
use backplane_abi::{DType, Op, TensorDesc, flags};
use backplane_webgpu::prefetch::prefetched_reads;

fn pattern(n: usize, seed: usize) -> Vec<u8> {
    (0..n).map(|i| ((i * 31 + seed * 7) % 251) as u8).collect()
}

fn round_trip(buf: &dyn Buffer, offset: u64, n: usize, seed: usize) {
    let mut t = TensorDesc::new(DType::I8, [n as i64, 1, 1, 1]);
    t.buffer = buf.id();
    t.offset = offset;
    let data = pattern(n, seed);
    buf.set_tensor(&t, 0, &data).expect("set");
    let mut out = vec![0u8; n];
    buf.get_tensor(&t, 0, &mut out).expect("get");
    assert!(
        out == data,
        "{n} bytes at offset {offset} read back different bytes"
    );
}

#[test]
fn reads_of_any_size_reuse_the_staging_buffer_and_return_the_bytes_written() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let big = (65 << 20) + 4096;
    let buf = dev
        .buffer_type()
        .alloc_buffer(big as u64 + 64)
        .expect("alloc");
    // Small, grown (a logits row), small again (the kept buffer is larger
    // than the read), grown again, then over the kept limit, then small.
    for (k, &(offset, n)) in [
        (3u64, 13usize),
        (1024, 513_024),
        (5, 41),
        (0, 2 << 20),
        (7, big),
        (9, 100),
    ]
    .iter()
    .enumerate()
    {
        round_trip(buf.as_ref(), offset, n, k);
    }
}

/// x (8 f32 at 0), y (8 at 64), their sum (8 at 132, an unaligned
/// offset for the copy's 4-byte units is fine; 132 is flagged OUTPUT).
fn sum_graph(buffer: u64) -> Vec<TensorDesc> {
    let mut sum = common::node(Op::Add, [8, 1, 1, 1], 132, buffer, &[0, 1]);
    sum.flags = flags::OUTPUT;
    vec![
        common::leaf([8, 1, 1, 1], 0, buffer),
        common::leaf([8, 1, 1, 1], 64, buffer),
        sum,
    ]
}

/// Writes x and y, computes their sum on `stream` and reads it back.
fn sum_of(
    buf: &dyn Buffer,
    stream: &dyn Backend,
    g: &[TensorDesc],
    x: &[f32],
    y: &[f32],
) -> Vec<f32> {
    buf.set_tensor(&g[0], 0, &common::f32_bytes(x)).expect("x");
    buf.set_tensor(&g[1], 0, &common::f32_bytes(y)).expect("y");
    stream.graph_compute(g).expect("compute");
    read(buf, &g[2])
}

fn read(buf: &dyn Buffer, t: &TensorDesc) -> Vec<f32> {
    let mut out = vec![0u8; t.nbytes() as usize];
    buf.get_tensor(t, 0, &mut out).expect("get");
    common::f32s(&out)
}

#[test]
fn a_graphs_outputs_are_read_from_its_own_wait_and_never_stale() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let buf = dev.buffer_type().alloc_buffer(4096).expect("alloc");
    let other = dev.buffer_type().alloc_buffer(4096).expect("alloc");
    let g = sum_graph(buf.id());
    let stream = dev.init_backend("").expect("stream");
    let second = dev.init_backend("").expect("stream");
    let x: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let ones = vec![1.0f32; 8];
    let plus = |a: &[f32], b: &[f32]| -> Vec<f32> { a.iter().zip(b).map(|(p, q)| p + q).collect() };

    // Read after the graph: from the prefetched copy, whole and in part.
    let served = prefetched_reads();
    assert_eq!(
        sum_of(buf.as_ref(), stream.as_ref(), &g, &x, &ones),
        plus(&x, &ones)
    );
    let mut part = [0u8; 8];
    buf.get_tensor(&g[2], 12, &mut part).expect("part");
    assert_eq!(common::f32s(&part), vec![4.0, 5.0]);
    assert!(prefetched_reads() >= served + 2, "outputs not prefetched");

    // A host write over the output: the write is what is read.
    let written = vec![-3.0f32; 8];
    buf.set_tensor(&g[2], 0, &common::f32_bytes(&written))
        .expect("set");
    assert_eq!(read(buf.as_ref(), &g[2]), written);

    // A fill, a clear and a copy into the output after a graph.
    sum_of(buf.as_ref(), stream.as_ref(), &g, &x, &x);
    buf.memset_tensor(&g[2], 0, 0, 16).expect("memset");
    assert_eq!(read(buf.as_ref(), &g[2])[..5], [0.0, 0.0, 0.0, 0.0, 8.0]);
    sum_of(buf.as_ref(), stream.as_ref(), &g, &x, &x);
    let mut src = g[2];
    src.buffer = other.id();
    src.offset = 256;
    other
        .set_tensor(&src, 0, &common::f32_bytes(&ones))
        .expect("src");
    if buf.cpy_tensor(&src, &g[2]).expect("cpy") {
        assert_eq!(read(buf.as_ref(), &g[2]), ones);
    }
    sum_of(buf.as_ref(), stream.as_ref(), &g, &x, &x);
    buf.clear(0).expect("clear");
    assert_eq!(read(buf.as_ref(), &g[2]), vec![0.0; 8]);

    // Another stream's graph over the same output after this one's: its
    // result is read, not this one's copy.
    sum_of(buf.as_ref(), stream.as_ref(), &g, &x, &ones);
    let twice = sum_of(buf.as_ref(), second.as_ref(), &g, &x, &x);
    assert_eq!(twice, plus(&x, &x));
    assert_eq!(read(buf.as_ref(), &g[2]), plus(&x, &x));
}
