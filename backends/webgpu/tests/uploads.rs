//! Small writes staged in the device's kept upload buffer land in the
//! order they were made, whatever comes between them: reads, writes too
//! large or unaligned to stage, clears, copies from other buffers, more
//! small writes than the staging buffer holds, and graphs reading what
//! was written, with native replay on and off. Checked against a host
//! copy of the buffer's bytes on the first WebGPU adapter (lavapipe on
//! machines without a GPU; the tests pass without an adapter).

mod common;

use backplane_abi::plugin::{Buffer, Device};
use backplane_abi::{DType, Op, TensorDesc, flags};
use backplane_webgpu::replay::native::native_replayed_graphs;
use backplane_webgpu::upload::{UPLOAD_BYTES, staged_writes};

/// A byte range of `buf` as a tensor.
fn bytes_at(buf: &dyn Buffer, offset: u64, n: usize) -> TensorDesc {
    let mut t = TensorDesc::new(DType::I8, [n as i64, 1, 1, 1]);
    t.buffer = buf.id();
    t.offset = offset;
    t
}

/// xorshift: the test's operations, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn staged_writes_land_in_order_among_reads_large_writes_clears_and_copies() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    const SIZE: usize = 3 << 20;
    let buft = dev.buffer_type();
    let buf = buft.alloc_buffer(SIZE as u64).expect("alloc");
    let other = buft.alloc_buffer(SIZE as u64).expect("alloc");
    let mut mirror = vec![0u8; SIZE];
    buf.clear(0).expect("clear");
    let theirs = Rng(99).bytes(SIZE);
    other
        .set_tensor(&bytes_at(other.as_ref(), 0, SIZE), 0, &theirs)
        .expect("fill the other buffer");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (staged_before, mut small) = (staged_writes(), 0);
    for step in 0..400 {
        let kind = rng.below(100);
        // Mostly small aligned writes (staged), some of every other kind.
        let (at, n) = if kind < 70 {
            (
                rng.below(SIZE as u64 / 4 - 1024) * 4,
                4 * (1 + rng.below(256)) as usize,
            )
        } else if kind < 74 {
            // Larger than the staging buffer: written the other way.
            let n = UPLOAD_BYTES as usize + 4 * rng.below(1024) as usize;
            (rng.below((SIZE - n) as u64 / 4) * 4, n)
        } else {
            (rng.below(SIZE as u64 - 4096), 1 + rng.below(2048) as usize)
        };
        small += usize::from(kind < 70);
        match kind {
            0..=73 | 80..=84 => {
                // Aligned small, large, or unaligned (read-modify-write).
                let data = rng.bytes(n);
                buf.set_tensor(&bytes_at(buf.as_ref(), at, n), 0, &data)
                    .expect("set");
                mirror[at as usize..at as usize + n].copy_from_slice(&data);
            }
            74..=79 => {
                let mut out = vec![0u8; n];
                buf.get_tensor(&bytes_at(buf.as_ref(), at, n), 0, &mut out)
                    .expect("get");
                assert!(
                    out == mirror[at as usize..at as usize + n],
                    "step {step}: {n} bytes at {at} differ from what was written"
                );
            }
            85..=89 => {
                // A copy from another buffer (4-byte aligned: on the device).
                let (at, n) = (at & !3, (n + 3) & !3);
                let src = bytes_at(other.as_ref(), at, n);
                let dst = bytes_at(buf.as_ref(), at, n);
                if buf.cpy_tensor(&src, &dst).expect("copy") {
                    mirror[at as usize..at as usize + n]
                        .copy_from_slice(&theirs[at as usize..at as usize + n]);
                }
            }
            90..=91 => {
                let v = rng.next() as u8;
                buf.clear(v).expect("clear");
                mirror.fill(v);
            }
            _ => {
                let v = rng.next() as u8;
                buf.memset_tensor(&bytes_at(buf.as_ref(), at, n), v, 0, n as u64)
                    .expect("memset");
                mirror[at as usize..at as usize + n].fill(v);
            }
        }
    }
    let mut all = vec![0u8; SIZE];
    buf.get_tensor(&bytes_at(buf.as_ref(), 0, SIZE), 0, &mut all)
        .expect("get all");
    let first_bad = all.iter().zip(&mirror).position(|(a, b)| a != b);
    assert_eq!(
        first_bad, None,
        "the buffer's bytes differ from the host's copy"
    );
    // Most small writes are staged; one right after a submission of its
    // own (a flush) finds the staging buffer still being mapped again and
    // takes `write_buffer`. Tests run side by side, so the count may
    // include other tests' writes.
    assert!(
        staged_writes() - staged_before >= small as u64 / 2,
        "only {} of {small} small writes were staged",
        staged_writes() - staged_before
    );
}

#[test]
fn more_small_writes_than_the_staging_buffer_holds_all_land() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    let n = 4096;
    let writes = (UPLOAD_BYTES as usize / n) * 2 + 3;
    let size = writes * n;
    let buf = dev.buffer_type().alloc_buffer(size as u64).expect("alloc");
    let mut rng = Rng(7);
    let data = rng.bytes(size);
    for k in 0..writes {
        buf.set_tensor(
            &bytes_at(buf.as_ref(), (k * n) as u64, n),
            0,
            &data[k * n..(k + 1) * n],
        )
        .expect("set");
    }
    let mut out = vec![0u8; size];
    buf.get_tensor(&bytes_at(buf.as_ref(), 0, size), 0, &mut out)
        .expect("get");
    assert!(out == data, "a staged write was lost or misplaced");
    assert!(staged_writes() >= (UPLOAD_BYTES as usize / n) as u64);
}

/// x (64 f32 at 0), y (64 at 256), their sum (at 512, OUTPUT).
fn sum_graph(buffer: u64) -> Vec<TensorDesc> {
    let mut sum = common::node(Op::Add, [64, 1, 1, 1], 512, buffer, &[0, 1]);
    sum.flags = flags::OUTPUT;
    vec![
        common::leaf([64, 1, 1, 1], 0, buffer),
        common::leaf([64, 1, 1, 1], 256, buffer),
        sum,
    ]
}

#[test]
fn graphs_read_the_inputs_written_just_before_them_with_native_replay_on_and_off() {
    let Some((_reg, dev)) = common::first_device() else {
        return;
    };
    for params in ["native_replay=on", "native_replay=off", "replay=off"] {
        let dev: &dyn Device = dev.as_ref();
        let buf = dev.buffer_type().alloc_buffer(4096).expect("alloc");
        let stream = dev.init_backend(params).expect("stream");
        let g = sum_graph(buf.id());
        let native_before = native_replayed_graphs();
        // Many runs of the same graph (replayed after the first), each with
        // new inputs; some runs write x twice, the second write winning.
        for run in 0..40u32 {
            let x: Vec<f32> = (0..64).map(|i| (run * 64 + i) as f32).collect();
            let y: Vec<f32> = (0..64).map(|i| i as f32 * 0.5 - run as f32).collect();
            if run % 3 == 0 {
                let stale = vec![-1.0f32; 64];
                buf.set_tensor(&g[0], 0, &common::f32_bytes(&stale))
                    .expect("x");
            }
            buf.set_tensor(&g[0], 0, &common::f32_bytes(&x)).expect("x");
            buf.set_tensor(&g[1], 0, &common::f32_bytes(&y)).expect("y");
            stream.graph_compute(&g).expect("compute");
            let mut out = vec![0u8; 256];
            buf.get_tensor(&g[2], 0, &mut out).expect("sum");
            let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
            assert_eq!(common::f32s(&out), want, "{params}, run {run}");
        }
        if params == "native_replay=on" {
            // The only test of this file running graphs: nothing else counts.
            assert!(
                native_replayed_graphs() > native_before,
                "no run was a native replay"
            );
        }
    }
}
