//! Shared helpers for the op tests: random leaf data, running a graph on the
//! CPU backend and on the reference kernels, and comparing the results.

#![allow(dead_code)]

use std::sync::OnceLock;

use backplane::{DType, Graph, HostTensors, Op, TensorId};
use backplane_cpu::{CpuBackend, CpuConfig, CpuError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Default NMSE bound for float ops.
pub const NMSE: f64 = 1e-7;

/// A two-thread backend, shared by every test of a binary.
pub fn cpu() -> &'static CpuBackend {
    static CPU: OnceLock<CpuBackend> = OnceLock::new();
    CPU.get_or_init(|| CpuBackend::new(CpuConfig { n_threads: Some(2) }))
}

/// A one-thread backend.
pub fn cpu1() -> &'static CpuBackend {
    static CPU: OnceLock<CpuBackend> = OnceLock::new();
    CPU.get_or_init(|| CpuBackend::new(CpuConfig { n_threads: Some(1) }))
}

/// Leaf data a test chooses instead of random values.
pub enum Data {
    /// Values for a float or quantized leaf.
    F32(Vec<f32>),
    /// Values for an integer leaf.
    Ints(Vec<i64>),
}

/// Host memory after running a graph both ways.
pub struct Run {
    /// Results of the CPU backend.
    pub cpu: HostTensors,
    /// Results of the reference kernels.
    pub reference: HostTensors,
}

/// Uniform random values in `[lo, hi)`.
pub fn uniform(rng: &mut StdRng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

fn fill(g: &Graph, host: &mut HostTensors, t: TensorId, data: &Data) {
    match data {
        Data::F32(v) => host.set_f32(g, t, v).expect("set_f32"),
        Data::Ints(v) => host.set_ints(g, t, v).expect("set_ints"),
    }
}

/// Fills every leaf (random in [-1, 1) unless `custom` names it), runs the
/// graph on `backend` and on the reference, and returns both memories.
pub fn run_on(backend: &CpuBackend, g: &Graph, seed: u64, custom: &[(TensorId, Data)]) -> Run {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut cpu_host = HostTensors::new(g);
    let mut ref_host = HostTensors::new(g);
    for t in g.ids() {
        if g.op(t) != Op::None {
            continue;
        }
        let data = match custom.iter().find(|(c, _)| *c == t) {
            Some((_, d)) => d,
            None => {
                let n = g.desc(t).nelements() as usize;
                let dt = g.dtype(t);
                let d = if dt.is_integer() {
                    Data::Ints((0..n).map(|_| rng.random_range(-100..100)).collect())
                } else {
                    Data::F32(uniform(&mut rng, n, -1.0, 1.0))
                };
                fill(g, &mut cpu_host, t, &d);
                fill(g, &mut ref_host, t, &d);
                continue;
            }
        };
        fill(g, &mut cpu_host, t, data);
        fill(g, &mut ref_host, t, data);
    }
    let ptrs = cpu_host.pointers();
    // SAFETY: HostTensors gives every tensor of `g` its bytes.
    unsafe { backend.compute(g.tensors(), &ptrs) }.expect("cpu compute");
    backplane_reference::compute(g, &mut ref_host).expect("reference compute");
    Run {
        cpu: cpu_host,
        reference: ref_host,
    }
}

/// [`run_on`] with the shared two-thread backend.
pub fn run(g: &Graph, seed: u64, custom: &[(TensorId, Data)]) -> Run {
    run_on(cpu(), g, seed, custom)
}

/// Runs on the CPU only and returns its error.
pub fn cpu_error(g: &Graph, custom: &[(TensorId, Data)]) -> CpuError {
    let mut host = HostTensors::new(g);
    for (t, d) in custom {
        fill(g, &mut host, *t, d);
    }
    let ptrs = host.pointers();
    // SAFETY: HostTensors gives every tensor of `g` its bytes.
    unsafe { cpu().compute(g.tensors(), &ptrs) }.expect_err("expected an error")
}

/// Normalised mean squared error of `got` against `want`.
pub fn nmse(got: &[f32], want: &[f32]) -> f64 {
    assert_eq!(got.len(), want.len(), "lengths differ");
    let mut err = 0f64;
    let mut norm = 0f64;
    for (&a, &b) in got.iter().zip(want) {
        if a.is_nan() && b.is_nan() || a == b {
            continue;
        }
        err += (a as f64 - b as f64).powi(2);
        norm += (b as f64).powi(2);
    }
    if err == 0.0 {
        0.0
    } else {
        err / norm.max(f64::MIN_POSITIVE)
    }
}

/// Asserts tensor `t` agrees between the two runs within `bound` NMSE.
pub fn assert_close(g: &Graph, r: &Run, t: TensorId, bound: f64, what: &str) {
    let got = r.cpu.get_f32(g, t);
    let want = r.reference.get_f32(g, t);
    let e = nmse(&got, &want);
    assert!(
        e <= bound,
        "{what}: NMSE {e:e} > {bound:e} for {}\n got {:?}\nwant {:?}",
        g.describe(t),
        &got[..got.len().min(8)],
        &want[..want.len().min(8)]
    );
}

/// Asserts tensor `t` is identical between the two runs.
pub fn assert_same(g: &Graph, r: &Run, t: TensorId, what: &str) {
    assert_eq!(
        r.cpu.get_f32(g, t),
        r.reference.get_f32(g, t),
        "{what}: {}",
        g.describe(t)
    );
}

/// The NMSE bound for a result of type `dt` (f16/bf16 round once more).
pub fn bound_for(dt: DType) -> f64 {
    match dt {
        DType::F16 => 1e-6,
        DType::BF16 => 1e-4,
        _ => NMSE,
    }
}

/// A permuted view of a fresh input: a leaf of shape `ne` permuted by
/// `axes` (the logical shape is `ne` permuted).
pub fn permuted_input(
    g: &mut Graph,
    name: &str,
    dt: DType,
    ne: [i64; 4],
    axes: [usize; 4],
) -> TensorId {
    let t = g.input(name, dt, &ne).expect("input");
    g.permute(t, axes).expect("permute")
}
