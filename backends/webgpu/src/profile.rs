//! The `profile` option (`BACKPLANE_WEBGPU_PROFILE`): `kernels` (or `1`):
//! per-pipeline GPU time (timestamp queries around each kernel's pass)
//! and CPU encode time, printed at exit.
//!
//! Profiling puts every kernel in its own compute pass and reads the
//! timestamps back after each submission, so it slows the run down; the
//! GPU times stay per-kernel accurate.
//!
//! `BACKPLANE_WEBGPU_PROFILE=graph` changes nothing in how graphs run and
//! prints, per process, the CPU time spent encoding and submitting graphs
//! and the time then spent waiting for the GPU, per kernel; graphs
//! replayed from a recording ([`crate::replay`]) are reported apart from
//! those planned afresh.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Once};

use crate::facts::Facts;
use crate::{KERNELS_PER_SUBMIT, lock};

/// Totals of one pipeline.
#[derive(Default, Clone, Copy)]
struct Totals {
    calls: u64,
    gpu_ns: f64,
    encode_ns: u64,
}

type Table = Mutex<BTreeMap<String, Totals>>;

/// Every profiled device's table, printed by the exit hook.
static TABLES: Mutex<Vec<(String, Arc<Table>)>> = Mutex::new(Vec::new());

unsafe extern "C" {
    fn atexit(cb: extern "C" fn()) -> i32;
}

extern "C" fn report_all() {
    let tables = lock(&TABLES);
    for (name, t) in tables.iter() {
        print_table(name, &lock(t));
    }
}

fn print_table(device: &str, t: &BTreeMap<String, Totals>) {
    if t.is_empty() {
        return;
    }
    let mut rows: Vec<_> = t.iter().collect();
    rows.sort_by(|a, b| b.1.gpu_ns.total_cmp(&a.1.gpu_ns));
    let total_gpu: f64 = rows.iter().map(|r| r.1.gpu_ns).sum();
    eprintln!("backplane-webgpu profile, {device}: per pipeline, GPU time from timestamp queries");
    eprintln!(
        "{:>10} {:>12} {:>10} {:>12} {:>6}  pipeline",
        "calls", "gpu ms", "gpu us/call", "encode ms", "gpu %"
    );
    for (label, r) in rows {
        eprintln!(
            "{:>10} {:>12.3} {:>10.2} {:>12.3} {:>5.1}%  {label}",
            r.calls,
            r.gpu_ns / 1e6,
            r.gpu_ns / 1e3 / r.calls.max(1) as f64,
            r.encode_ns as f64 / 1e6,
            100.0 * r.gpu_ns / total_gpu.max(1.0)
        );
    }
}

/// Where a graph's host time went (`BACKPLANE_WEBGPU_PROFILE=graph`), in
/// nanoseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct GraphTimes {
    /// Encoding and submitting, in all.
    pub encode: u64,
    /// Of that, in `Encoder::dispatch` (pipeline and bind-group lookups,
    /// recording the kernel).
    pub dispatch: u64,
    /// Of that, writing the parameters and recording the compute passes
    /// (wgpu's validation and tracking, the driver's commands).
    pub passes: u64,
    /// Of that, `queue.submit`.
    pub submit: u64,
    /// Waiting for the GPU afterwards.
    pub wait: u64,
    /// Of `dispatch`, compiling kernels used for the first time (left out
    /// of the per-kernel figures, reported apart).
    pub compile: u64,
}

impl GraphTimes {
    /// Nothing yet.
    const ZERO: GraphTimes = GraphTimes {
        encode: 0,
        dispatch: 0,
        passes: 0,
        submit: 0,
        wait: 0,
        compile: 0,
    };

    /// Adds `t` to these totals.
    fn add(&mut self, t: &GraphTimes) {
        self.encode += t.encode;
        self.dispatch += t.dispatch;
        self.passes += t.passes;
        self.submit += t.submit;
        self.wait += t.wait;
        self.compile += t.compile;
    }
}

/// Totals of `BACKPLANE_WEBGPU_PROFILE=graph`: graphs, kernels, times;
/// of graphs planned afresh, then of replayed ones.
static GRAPH_TOTALS: Mutex<[(u64, u64, GraphTimes); 2]> =
    Mutex::new([(0, 0, GraphTimes::ZERO), (0, 0, GraphTimes::ZERO)]);

thread_local! {
    /// Kernels of the last graph run on this thread.
    static LAST_GRAPH_KERNELS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many kernels the last graph computed on this thread recorded (or
/// replayed): tests see fusions by it.
pub fn last_graph_kernels() -> u64 {
    LAST_GRAPH_KERNELS.with(std::cell::Cell::get)
}

/// Notes the kernels of the graph just computed on this thread.
pub(crate) fn note_graph_kernels(kernels: u64) {
    LAST_GRAPH_KERNELS.with(|k| k.set(kernels));
}

/// Adds one graph of `kernels` kernels that took `t`; `replayed` when its
/// kernels came from a recording.
pub fn record_graph(kernels: u64, t: GraphTimes, replayed: bool) {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        // SAFETY: registering a plain extern "C" function with the C runtime.
        unsafe { atexit(report_graphs) };
    });
    let mut all = lock(&GRAPH_TOTALS);
    let totals = &mut all[usize::from(replayed)];
    totals.0 += 1;
    totals.1 += kernels;
    totals.2.add(&t);
}

extern "C" fn report_graphs() {
    let totals = *lock(&GRAPH_TOTALS);
    for (what, (graphs, kernels, t)) in ["planned", "replayed"].into_iter().zip(totals) {
        if graphs > 0 {
            report(what, graphs, kernels, t);
        }
    }
    let (barriers, gaps) = crate::replay::native::native_barriers();
    if gaps > 0 {
        eprintln!(
            "backplane-webgpu graph timing: native twins recorded {barriers} barriers between {gaps} pairs of consecutive kernels"
        );
    }
}

/// Prints the totals of the `graphs` graphs of one kind (`what`).
fn report(what: &str, graphs: u64, kernels: u64, mut t: GraphTimes) {
    // Compiling a kernel on its first use is a one-time cost.
    t.encode = t.encode.saturating_sub(t.compile);
    t.dispatch = t.dispatch.saturating_sub(t.compile);
    let per = |ns: u64| ns as f64 / 1e3 / kernels.max(1) as f64;
    let planning = t.encode.saturating_sub(t.dispatch + t.passes + t.submit);
    eprintln!(
        "backplane-webgpu graph timing: {graphs} graphs {what}, {kernels} kernels, {:.1} ms compiling kernels on first use (left out below); per kernel {:.2} us encoding and submitting ({:.2} planning the ops, {:.2} in dispatch, {:.2} recording passes, {:.2} submitting), {:.2} us waiting for the GPU",
        t.compile as f64 / 1e6,
        per(t.encode),
        per(planning),
        per(t.dispatch),
        per(t.passes),
        per(t.submit),
        per(t.wait)
    );
    // A decode step is one graph: these are the per-token figures.
    let per_graph = |ns: u64| ns as f64 / 1e3 / graphs.max(1) as f64;
    eprintln!(
        "backplane-webgpu graph timing: per graph {what} {:.1} kernels, {:.1} us encoding and submitting, {:.1} us waiting for the GPU",
        kernels as f64 / graphs.max(1) as f64,
        per_graph(t.encode),
        per_graph(t.wait)
    );
}

/// The query set and readback buffers of one device.
pub struct Profiler {
    queries: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    readback: wgpu::Buffer,
    period_ns: f32,
    table: Arc<Table>,
}

impl Profiler {
    /// A profiler when the `profile` option (`profile`) is `kernels` and
    /// the device has timestamp queries (else a note on stderr).
    pub fn new(
        profile: &str,
        device: &wgpu::Device,
        facts: &Facts,
        name: &str,
    ) -> Option<Profiler> {
        if profile != "kernels" {
            return None;
        }
        if !facts.timestamps {
            eprintln!(
                "backplane-webgpu: {name} has no timestamp queries; BACKPLANE_WEBGPU_PROFILE ignored"
            );
            return None;
        }
        let n = 2 * KERNELS_PER_SUBMIT as u32;
        let queries = device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("backplane profile"),
            ty: wgpu::QueryType::Timestamp,
            count: n,
        });
        let bytes = u64::from(n) * 8;
        let resolve = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("backplane profile resolve"),
            size: bytes,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let readback = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("backplane profile readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let table: Arc<Table> = Arc::default();
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            // SAFETY: registering a plain extern "C" function with the C runtime.
            unsafe { atexit(report_all) };
        });
        lock(&TABLES).push((format!("{name} ({})", facts.adapter), Arc::clone(&table)));
        Some(Profiler {
            queries,
            resolve,
            readback,
            period_ns: 0.0,
            table,
        })
    }

    /// Timestamp writes around kernel `i` of a batch.
    pub fn pass_writes(&self, i: usize) -> Option<wgpu::ComputePassTimestampWrites<'_>> {
        Some(wgpu::ComputePassTimestampWrites {
            query_set: &self.queries,
            beginning_of_pass_write_index: Some(2 * i as u32),
            end_of_pass_write_index: Some(2 * i as u32 + 1),
        })
    }

    /// Resolves the timestamps of `n` kernels into the readback buffer.
    pub fn resolve(&self, enc: &mut wgpu::CommandEncoder, n: usize) {
        let q = 2 * n as u32;
        enc.resolve_query_set(&self.queries, 0..q, &self.resolve, 0);
        enc.copy_buffer_to_buffer(&self.resolve, 0, &self.readback, 0, u64::from(q) * 8);
    }

    /// Reads the timestamps of the batch just submitted to `queue` and adds
    /// them up (waiting for `device` to finish it).
    pub fn collect(&self, device: &wgpu::Device, queue: &wgpu::Queue, labels: &[(String, u64)]) {
        let period = if self.period_ns > 0.0 {
            self.period_ns
        } else {
            queue.get_timestamp_period()
        };
        let slice = self.readback.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        let idle = device.poll(wgpu::PollType::wait_indefinitely()).is_ok();
        if !idle || !matches!(rx.recv(), Ok(Ok(()))) {
            return;
        }
        {
            let Ok(view) = slice.get_mapped_range() else {
                return;
            };
            let ts: &[u64] = bytemuck::cast_slice(&view);
            let mut t = lock(&self.table);
            for (i, (label, enc_ns)) in labels.iter().enumerate() {
                let d = ts[2 * i + 1].saturating_sub(ts[2 * i]) as f64 * f64::from(period);
                let e = t.entry(label.clone()).or_default();
                e.calls += 1;
                e.gpu_ns += d;
                e.encode_ns += enc_ns;
            }
        }
        self.readback.unmap();
    }
}
