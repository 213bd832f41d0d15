//! Reads through the device's kept staging buffer: reads of growing and
//! shrinking sizes at unaligned offsets return exactly the bytes written,
//! and a read over the kept buffer's limit goes through one of its own.

mod common;

use backplane_abi::plugin::Buffer;
use backplane_abi::{DType, TensorDesc};

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
