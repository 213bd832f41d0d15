//! What the device watchdog costs a run: a decode-sized step (one token
//! through one Llama-style block, weights placed on the built-in CPU
//! device) through `Scheduler::run`, with the per-device timeout on (calls
//! made on the device's call thread) and off (calls made inline).
//!
//! `cargo bench -p backplane --bench run`

use std::time::Duration;

use backplane::examples::{BlockConfig, llama_block, weights};
use backplane::registry::{Registry, RegistryOptions, SearchPath};
use backplane::sched::{SchedOptions, Scheduler};
use backplane::{Graph, HostTensors, Op, TensorId};
use criterion::{Criterion, criterion_group, criterion_main};

fn step_graph() -> Graph {
    llama_block(&BlockConfig {
        n_tokens: 1,
        n_embd: 256,
        n_ff: 512,
        ..BlockConfig::default()
    })
    .expect("valid graph")
}

fn scheduler(registry: &Registry, timeout: Option<Duration>) -> (Scheduler, Graph, HostTensors) {
    let devices: Vec<_> = registry.devices().cloned().collect();
    let mut s = Scheduler::new(
        devices,
        SchedOptions {
            device_timeout: timeout,
            ..SchedOptions::default()
        },
    )
    .expect("scheduler");
    let mut g = step_graph();
    let mut host = HostTensors::new(&g);
    for t in g.ids().filter(|&t| g.op(t) == Op::None).collect::<Vec<_>>() {
        let n = g.desc(t).nelements() as usize;
        if g.name(t) == "pos" {
            host.set_i32(&g, t, &[0]).expect("pos");
        } else {
            let v: Vec<f32> = (0..n).map(|i| ((i % 17) as f32 - 8.0) / 64.0).collect();
            host.set_f32(&g, t, &v).expect("values");
        }
    }
    let w = weights(&g);
    s.place_weights(&mut g, 0, &w).expect("placing weights");
    for &t in &w {
        s.upload(&g, t, host.bytes(t)).expect("upload");
    }
    (s, g, host)
}

fn bench(c: &mut Criterion) {
    let registry = Registry::load(&RegistryOptions {
        search: SearchPath::only(Vec::<std::path::PathBuf>::new()),
        builtin: Some(backplane::builtin_cpu()),
    });
    let mut group = c.benchmark_group("decode_step_run");
    for (label, timeout) in [
        ("timeout_off", None),
        ("timeout_60s", Some(Duration::from_secs(60))),
    ] {
        let (mut s, g, host) = scheduler(&registry, timeout);
        let inputs: Vec<(TensorId, &[u8])> = ["x", "pos", "kq_mask"]
            .iter()
            .map(|n| {
                let t = g.find(n).expect("input");
                (t, host.bytes(t))
            })
            .collect();
        let result = g.find("result").expect("result");
        let mut out = vec![0u8; g.desc(result).nbytes() as usize];
        group.bench_function(label, |b| {
            b.iter(|| {
                s.run(&g, &inputs, &mut [(result, &mut out)]).expect("run");
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
