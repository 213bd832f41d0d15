//! Planning speed: a 2,000-node transformer-like graph (84 Llama-style
//! blocks, weights on the first backend) over two backends, the first
//! refusing ROPE so the plan has many splits and copies.
//!
//! `cargo bench -p backplane --bench sched`

use backplane::examples::{BlockConfig, llama_layers, weights};
use backplane::sched::{Placement, Planner, SchedOptions, set_placement};
use backplane::{Graph, Op, TensorDesc};
use backplane_abi::plugin::{DeviceType, Verdict};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

struct Fake {
    cpu: bool,
}

impl Placement for Fake {
    fn name(&self) -> String {
        if self.cpu { "cpu" } else { "gpu" }.into()
    }
    fn device_type(&self) -> DeviceType {
        if self.cpu {
            DeviceType::Cpu
        } else {
            DeviceType::Gpu
        }
    }
    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> Verdict {
        if !self.cpu && graph[node].op() == Ok(Op::Rope) {
            Verdict::unsupported("ROPE not implemented")
        } else {
            Verdict::Supported
        }
    }
    fn offload_op(&self, _: &[TensorDesc], _: usize) -> bool {
        false
    }
    fn buffer_type_name(&self) -> String {
        self.name()
    }
    fn buffer_is_host(&self) -> bool {
        self.cpu
    }
    fn supports_buft(&self, name: &str, _: bool) -> bool {
        name == self.name()
    }
    fn alignment(&self) -> u64 {
        64
    }
}

fn planner() -> Planner {
    let backends: Vec<Box<dyn Placement + Send + Sync>> =
        vec![Box::new(Fake { cpu: false }), Box::new(Fake { cpu: true })];
    let mut p = Planner::new(backends, SchedOptions::default()).expect("two backends");
    p.register_buffer(1, 0).expect("backend 0 exists");
    p
}

fn graph() -> Graph {
    let mut g = llama_layers(
        &BlockConfig {
            n_tokens: 32,
            ..BlockConfig::default()
        },
        84,
    )
    .expect("valid graph");
    let mut offset = 0;
    for t in weights(&g) {
        set_placement(&mut g, t, 1, offset).expect("a weight leaf");
        offset += g.desc(t).nbytes().div_ceil(64) * 64;
    }
    g
}

fn bench(c: &mut Criterion) {
    let g = graph();
    let nodes = g.ids().filter(|&t| g.op(t) != Op::None).count();
    let plan = planner().plan(&g).expect("plannable");
    eprintln!(
        "graph: {} tensors, {nodes} nodes; plan: {} splits, {} copies, peak {:?} vs naive {:?}",
        g.len(),
        plan.stats.splits,
        plan.stats.copies,
        plan.stats.peak_bytes,
        plan.stats.naive_bytes
    );
    c.bench_function("sched/first_plan_2000_nodes", |b| {
        b.iter_batched(
            planner,
            |mut p| p.plan(&g).expect("plannable"),
            BatchSize::SmallInput,
        )
    });
    let mut warm = planner();
    warm.plan(&g).expect("plannable");
    c.bench_function("sched/cached_plan_2000_nodes", |b| {
        b.iter(|| warm.plan(&g).expect("plannable"))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
