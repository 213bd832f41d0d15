//! What the replay tests (`replay.rs`, `native_replay.rs`) share: a
//! [`Suite`] names a test file's decode-shaped graph, how its inputs are
//! written and which process-wide replay counter it checks; a [`Rig`] runs
//! that graph on the first WebGPU device, reads whether each run was
//! counted, and checks every result bit for bit against a reference stream
//! planned afresh.

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};

use backplane_abi::plugin::{Backend, Buffer, Device};
use backplane_abi::{Op, TensorDesc};
use backplane_webgpu::device::WebGpuReg;

/// One test at a time: each compares a process-wide counter before and
/// after its runs.
static TURN: Mutex<()> = Mutex::new(());

/// A test file's graph and the replays it counts.
pub struct Suite {
    /// The graph over the buffer of an id, for a row length and a row count.
    pub graph: fn(u64, i64, i64) -> Vec<TensorDesc>,
    /// Bytes a buffer for [`Suite::graph`] of that row length and count
    /// needs.
    pub graph_bytes: fn(i64, i64) -> u64,
    /// Writes the inputs of a seed into a graph's leaves.
    pub write_inputs: fn(&dyn Buffer, &[TensorDesc], i64),
    /// The process-wide count of the replays under test.
    pub counter: fn() -> u64,
    /// Params of the stream results are compared against (one whose runs
    /// never count).
    pub reference: &'static str,
}

/// A test's turn, the first WebGPU device and the [`Suite`] it runs.
pub struct Rig {
    /// The device (lavapipe on machines without a GPU).
    pub dev: Arc<dyn Device>,
    /// Params of the stream every result is compared against; the
    /// suite's unless a test sets others.
    pub reference: &'static str,
    suite: &'static Suite,
    // Fields drop in order: the device before its registration, the turn
    // last.
    _reg: WebGpuReg,
    _turn: MutexGuard<'static, ()>,
}

impl Rig {
    /// Waits for this test's turn, then takes the first device; `None`
    /// (the reason printed) when this machine has no WebGPU adapter.
    pub fn new(suite: &'static Suite) -> Option<Rig> {
        let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let (reg, dev) = super::first_device()?;
        Some(Rig {
            dev,
            reference: suite.reference,
            suite,
            _reg: reg,
            _turn: turn,
        })
    }

    /// A buffer sized for the suite's graph of `(ne0, rows)`.
    pub fn alloc(&self, (ne0, rows): (i64, i64)) -> Box<dyn Buffer> {
        let bytes = (self.suite.graph_bytes)(ne0, rows);
        self.dev
            .buffer_type()
            .alloc_buffer(bytes)
            .unwrap_or_else(|e| panic!("alloc {bytes} bytes for a {ne0} x {rows} graph: {e}"))
    }

    /// The suite's graph of `(ne0, rows)` over `buf`.
    pub fn graph(&self, buf: &dyn Buffer, (ne0, rows): (i64, i64)) -> Vec<TensorDesc> {
        (self.suite.graph)(buf.id(), ne0, rows)
    }

    /// A stream made with `params`.
    pub fn stream(&self, params: &str) -> Box<dyn Backend> {
        self.dev
            .init_backend(params)
            .unwrap_or_else(|e| panic!("stream with params {params:?}: {e}"))
    }

    /// A buffer for the suite's graph of `shape`, that graph over it, and a
    /// stream made with `stream_params`.
    pub fn setup(
        &self,
        shape: (i64, i64),
        stream_params: &str,
    ) -> (Box<dyn Buffer>, Vec<TensorDesc>, Box<dyn Backend>) {
        let buf = self.alloc(shape);
        let g = self.graph(&*buf, shape);
        (buf, g, self.stream(stream_params))
    }

    /// Clears `buf`, writes the inputs of `seed` and computes `g` on
    /// `stream`; the bytes of its nodes' results.
    pub fn compute(
        &self,
        stream: &dyn Backend,
        buf: &dyn Buffer,
        g: &[TensorDesc],
        seed: i64,
    ) -> Vec<Vec<u8>> {
        buf.clear(0).expect("clear");
        (self.suite.write_inputs)(buf, g, seed);
        stream.graph_compute(g).expect("graph_compute");
        node_results(buf, g)
    }

    /// Computes `g` with `seed` on `stream`; returns whether the suite's
    /// counter rose, after checking the results bitwise against a fresh
    /// [`Rig::reference`] stream's.
    pub fn counted(
        &self,
        stream: &dyn Backend,
        buf: &dyn Buffer,
        g: &[TensorDesc],
        seed: i64,
    ) -> bool {
        let before = (self.suite.counter)();
        let got = self.compute(stream, buf, g, seed);
        let was = (self.suite.counter)() > before;
        let reference = self.stream(self.reference);
        let want = self.compute(&*reference, buf, g, seed);
        assert!(
            got == want,
            "seed {seed}: results differ from {}",
            self.reference
        );
        was
    }

    /// Computes `g` with each seed of `seeds` in turn: the first run makes
    /// the stream's scratch memory and the second records the graph, so
    /// neither counts; every later run does.
    pub fn assert_counted_from_the_third_run(
        &self,
        stream: &dyn Backend,
        buf: &dyn Buffer,
        g: &[TensorDesc],
        seeds: Range<i64>,
    ) {
        for (run, seed) in seeds.enumerate() {
            let was = self.counted(stream, buf, g, seed);
            assert_eq!(
                was,
                run >= 2,
                "run {} (seed {seed}) counted: {was}",
                run + 1
            );
        }
    }

    /// A copy of `g` whose last node (a SCALE) has another factor is a
    /// graph of its own: not counted at `first_seed`, counted at the next
    /// seed; `g` is still counted at the one after.
    pub fn assert_another_graph_is_kept_apart(
        &self,
        stream: &dyn Backend,
        buf: &dyn Buffer,
        g: &[TensorDesc],
        first_seed: i64,
    ) {
        let mut other = g.to_vec();
        let last = other.last_mut().expect("a graph with nodes");
        assert_eq!(last.op, Op::Scale.code(), "the last node is not a SCALE");
        last.op_params[0] = 1.5f32.to_bits() as i32;
        assert!(!self.counted(stream, buf, &other, first_seed));
        assert!(self.counted(stream, buf, &other, first_seed + 1));
        assert!(self.counted(stream, buf, g, first_seed + 2));
    }

    /// A [`Rig::reference`] stream never counts: `g` with each of `seeds`.
    pub fn assert_the_reference_never_counts(
        &self,
        buf: &dyn Buffer,
        g: &[TensorDesc],
        seeds: Range<i64>,
    ) {
        let reference = self.stream(self.reference);
        for seed in seeds {
            assert!(!self.counted(&*reference, buf, g, seed), "seed {seed}");
        }
    }

    /// On a buffer sized for `big` and a stream made with `stream_params`,
    /// seeds 0 to 7 over the graphs `g` of `small` and `g_big` of `big`
    /// (whose scratch memory is larger than the stream's first): `g` is
    /// counted from its third run; `g_big` replaces the scratch buffer, so
    /// `g` is planned and recorded again before it counts; `g_big`, which
    /// grew the scratch while planned, is recorded on its second run and
    /// counted on its third. Returns the buffer, `g` and the stream for
    /// the checks that follow.
    pub fn assert_counts_resume_after_the_scratch_grows(
        &self,
        small: (i64, i64),
        big: (i64, i64),
        stream_params: &str,
    ) -> (Box<dyn Buffer>, Vec<TensorDesc>, Box<dyn Backend>) {
        let (buf, g_big, stream) = self.setup(big, stream_params);
        let g = self.graph(&*buf, small);
        let on = |g: &[TensorDesc], seed| self.counted(&*stream, &*buf, g, seed);
        self.assert_counted_from_the_third_run(&*stream, &*buf, &g, 0..3);
        assert!(!on(&g_big, 3));
        assert!(!on(&g, 4), "counted on the old scratch");
        assert!(on(&g, 5));
        assert!(!on(&g_big, 6));
        assert!(on(&g_big, 7));
        (buf, g, stream)
    }

    /// Frees `buf`, then checks that `g` over it fails on `stream` with an
    /// error naming the buffer, counting nothing.
    pub fn assert_a_freed_buffer_fails(
        &self,
        stream: &dyn Backend,
        buf: Box<dyn Buffer>,
        g: &[TensorDesc],
    ) {
        drop(buf);
        let before = (self.suite.counter)();
        let err = stream
            .graph_compute(g)
            .expect_err("a graph over a freed buffer computed");
        assert_eq!(
            (self.suite.counter)(),
            before,
            "counted over a freed buffer"
        );
        assert!(err.to_string().contains("buffer"), "{err}");
    }
}

/// The bytes of every node's result (the tensors with an op), in order.
pub fn node_results(buf: &dyn Buffer, g: &[TensorDesc]) -> Vec<Vec<u8>> {
    g.iter()
        .filter(|t| t.op != Op::None.code())
        .map(|t| {
            let mut out = vec![0u8; t.nbytes() as usize];
            buf.get_tensor(t, 0, &mut out).expect("get");
            out
        })
        .collect()
}
