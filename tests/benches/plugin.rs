//! Plugin boundary costs: cold load of one plugin and a `supports_op` call
//! across the ABI.
//!
//! `cargo xtask plugins && cargo bench -p backplane-tests --bench plugin`

use std::hint::black_box;
use std::time::{Duration, Instant};

use backplane::registry::{Registry, RegistryOptions, SearchPath, load};
use backplane::{DType, Graph};
use backplane_tests::{cpu_plugin, install, scratch_dir};
use criterion::Criterion;

/// Times preflight + abi_stable load + registration of fresh copies of the
/// CPU plugin (a fresh file each time, so the system loader cannot reuse
/// a mapping). Device enumeration is not included.
fn cold_load() {
    let src = cpu_plugin();
    let n = 15;
    let mut preflight = Vec::new();
    let mut full = Vec::new();
    for i in 0..n {
        let dir = scratch_dir(&format!("bench-load-{i}"));
        let path = install(&src, &dir, "cpu-x86-64");
        let t0 = Instant::now();
        let score = load::preflight(&path).expect("preflight");
        let t1 = Instant::now();
        let reg = load::load(&path).expect("load");
        let t2 = Instant::now();
        black_box((score, reg));
        preflight.push(t1 - t0);
        full.push(t2 - t0);
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let first = full[0];
    println!(
        "plugin load (cold, {n} fresh copies): first {:.3} ms, median {:.3} ms, max {:.3} ms; of which preflight (dlopen + 2 symbols) median {:.3} ms",
        first.as_secs_f64() * 1e3,
        median(&mut full.clone()).as_secs_f64() * 1e3,
        full.iter().max().unwrap().as_secs_f64() * 1e3,
        median(&mut preflight).as_secs_f64() * 1e3,
    );
}

fn supports_op(c: &mut Criterion) {
    let dir = scratch_dir("bench-supports-op");
    install(&cpu_plugin(), &dir, "cpu-x86-64");
    let reg = Registry::load(&RegistryOptions {
        search: SearchPath::only([&dir]),
        builtin: None,
    });
    let dev = reg.backend("cpu").expect("cpu plugin").devices[0].clone();
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[4096, 32]).unwrap();
    let w = g.weight("w", DType::Q8_0, &[4096, 4096]).unwrap();
    let s = g.add(a, a).unwrap();
    let m = g.mul_mat(w, s).unwrap();
    let descs = g.tensors().to_vec();
    for (name, node) in [("add f32", s.index()), ("mul_mat q8_0 x f32", m.index())] {
        c.bench_function(&format!("supports_op across the ABI ({name})"), |b| {
            b.iter(|| dev.supports_op(black_box(&descs), black_box(node)))
        });
    }
    let direct = backplane_cpu::plugin::CpuReg::new(backplane_cpu::plugin::Isa::X86_64);
    let direct_dev = backplane_abi::plugin::Reg::devices(&direct).remove(0);
    c.bench_function("supports_op direct Rust call (add f32)", |b| {
        b.iter(|| direct_dev.supports_op(black_box(&descs), black_box(s.index())))
    });
}

fn main() {
    cold_load();
    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    supports_op(&mut c);
    c.final_summary();
}
