//! Real compute through the CPU device.

use std::sync::Arc;

use backplane_abi::plugin::{
    Backend, BufferType, Device as AbiDevice, DeviceType, PluginError, Reg, Verdict, device_object,
};
use backplane_abi::{Op, TensorDesc};
use backplane_cpu::plugin::{CpuReg, Isa};
use rand::{Rng, SeedableRng};

use backplane::examples::{BlockConfig, explain_example, llama_block, weights};
use backplane::registry::Device;
use backplane::sched::*;
use backplane::{Graph, HostTensors, TensorId};

/// A second CPU instance posing as a GPU: its own buffers (a buffer
/// type the CPU cannot read), refusing the listed ops.
struct FakeGpu {
    inner: Arc<dyn AbiDevice>,
    buft: Arc<dyn BufferType>,
    refuse: Vec<Op>,
    /// Its streams' `graph_compute` blocks this long before computing.
    hang: Option<std::time::Duration>,
}

/// A stream whose `graph_compute` first blocks (a stuck driver).
struct HangingBackend {
    inner: Box<dyn Backend>,
    hang: std::time::Duration,
}

impl Backend for HangingBackend {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn graph_compute(&self, graph: &[TensorDesc]) -> Result<(), PluginError> {
        std::thread::sleep(self.hang);
        self.inner.graph_compute(graph)
    }
}

struct RenamedBuft(Arc<dyn BufferType>);

impl BufferType for RenamedBuft {
    fn name(&self) -> String {
        "fakegpu".into()
    }
    fn alloc_buffer(
        &self,
        size_bytes: u64,
    ) -> Result<Box<dyn backplane_abi::plugin::Buffer>, PluginError> {
        self.0.alloc_buffer(size_bytes)
    }
    fn alignment(&self) -> u64 {
        self.0.alignment()
    }
}

impl AbiDevice for FakeGpu {
    fn name(&self) -> String {
        "gpu0".into()
    }
    fn device_type(&self) -> DeviceType {
        DeviceType::Gpu
    }
    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> Verdict {
        let op = graph[node].op().unwrap_or(Op::None);
        if self.refuse.contains(&op) {
            return Verdict::unsupported(format!("{op} is not implemented here"));
        }
        self.inner.supports_op(graph, node)
    }
    fn buffer_type(&self) -> Arc<dyn BufferType> {
        self.buft.clone()
    }
    fn init_backend(&self, params: &str) -> Result<Box<dyn Backend>, PluginError> {
        let inner = self.inner.init_backend(params)?;
        Ok(match self.hang {
            Some(hang) => Box::new(HangingBackend { inner, hang }),
            None => inner,
        })
    }
}

fn cpu() -> Device {
    let reg = CpuReg::new(Isa::detect());
    Device::from_object("cpu", device_object(reg.devices()[0].clone())).expect("cpu device")
}

fn fake_gpu(refuse: Vec<Op>) -> Device {
    fake_gpu_hanging(refuse, None)
}

fn fake_gpu_hanging(refuse: Vec<Op>, hang: Option<std::time::Duration>) -> Device {
    let inner = CpuReg::new(Isa::detect()).devices()[0].clone();
    let buft = Arc::new(RenamedBuft(inner.buffer_type()));
    Device::from_object(
        "fake",
        device_object(Arc::new(FakeGpu {
            inner,
            buft,
            refuse,
            hang,
        })),
    )
    .expect("fake gpu device")
}

fn fill(g: &Graph, host: &mut HostTensors, seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for t in g.ids().filter(|&t| g.op(t) == Op::None) {
        let d = *g.desc(t);
        let n = d.nelements() as usize;
        match g.name(t) {
            "pos" => host
                .set_i32(g, t, &(0..n as i32).collect::<Vec<_>>())
                .unwrap(),
            "kq_mask" => {
                let (kv, q) = (d.ne[0] as usize, d.ne[1] as usize);
                let m: Vec<f32> = (0..kv * q)
                    .map(|k| {
                        if k % kv <= k / kv {
                            0.0
                        } else {
                            f32::NEG_INFINITY
                        }
                    })
                    .collect();
                host.set_f32(g, t, &m).unwrap();
            }
            _ => host
                .set_f32(
                    g,
                    t,
                    &(0..n)
                        .map(|_| rng.random_range(-0.5..0.5))
                        .collect::<Vec<_>>(),
                )
                .unwrap(),
        }
    }
}

fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    let err: f64 = got
        .iter()
        .zip(want)
        .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
        .sum();
    let norm: f64 = want.iter().map(|b| (*b as f64).powi(2)).sum();
    assert!(err / norm.max(1e-12) < 1e-6, "nmse {}", err / norm);
}

fn reference(g: &Graph) -> (HostTensors, Vec<f32>) {
    let mut host = HostTensors::new(g);
    fill(g, &mut host, 7);
    let mut want = HostTensors::new(g);
    fill(g, &mut want, 7);
    backplane_reference::compute(g, &mut want).unwrap();
    let out = g.find("result").unwrap();
    let w = want.get_f32(g, out);
    (host, w)
}

#[test]
fn scheduled_run_on_the_cpu_equals_the_reference() {
    for flash_attn in [true, false] {
        let g = llama_block(&BlockConfig {
            flash_attn,
            n_embd: 64,
            n_ff: 128,
            ..BlockConfig::default()
        })
        .unwrap();
        let (mut host, want) = reference(&g);
        let mut s = Scheduler::new(vec![cpu()], SchedOptions::default()).unwrap();
        s.compute(&g, &mut host).unwrap();
        assert_close(&host.get_f32(&g, g.find("result").unwrap()), &want);
    }
}

#[test]
fn two_backends_with_copies_equal_the_reference() {
    let mut g = llama_block(&BlockConfig {
        flash_attn: false,
        n_embd: 64,
        n_ff: 128,
        ..BlockConfig::default()
    })
    .unwrap();
    let (mut host, want) = reference(&g);
    let mut s = Scheduler::new(
        vec![fake_gpu(vec![Op::Rope, Op::SoftMax]), cpu()],
        SchedOptions::default(),
    )
    .unwrap();
    let w = weights(&g);
    s.place_weights(&mut g, 0, &w).unwrap();
    for &t in &w {
        s.upload(&g, t, host.bytes(t)).unwrap();
    }
    let plan = s.compute(&g, &mut host).unwrap();
    assert!(plan.stats.splits >= 3, "{}", Explanation::new(&plan, &g));
    assert!(plan.stats.copies > 0);
    assert_close(&host.get_f32(&g, g.find("result").unwrap()), &want);
    let copies = s.stats().copies;
    // A second run of a rebuilt graph: cached plan, no new buffers, same result.
    let mut g2 = llama_block(&BlockConfig {
        flash_attn: false,
        n_embd: 64,
        n_ff: 128,
        ..BlockConfig::default()
    })
    .unwrap();
    assert_eq!(s.bind_weights(&mut g2), w.len());
    let allocations = s.stats().buffer_allocations;
    let mut host2 = HostTensors::new(&g2);
    fill(&g2, &mut host2, 7);
    s.compute(&g2, &mut host2).unwrap();
    assert_eq!(s.planner().plans_built(), 1);
    assert_eq!(s.stats().buffer_allocations, allocations);
    assert_eq!(s.stats().copies, 2 * copies);
    assert_close(&host2.get_f32(&g2, g2.find("result").unwrap()), &want);
}

#[test]
fn reserve_allocates_once_for_smaller_graphs() {
    let mut s = Scheduler::new(vec![cpu()], SchedOptions::default()).unwrap();
    let big = llama_block(&BlockConfig {
        n_tokens: 32,
        n_embd: 64,
        n_ff: 128,
        ..BlockConfig::default()
    })
    .unwrap();
    s.reserve(&big).unwrap();
    assert_eq!(s.stats().buffer_allocations, 1);
    for n_tokens in [1, 8, 16, 32] {
        let g = llama_block(&BlockConfig {
            n_tokens,
            n_embd: 64,
            n_ff: 128,
            ..BlockConfig::default()
        })
        .unwrap();
        let mut host = HostTensors::new(&g);
        fill(&g, &mut host, 1);
        s.compute(&g, &mut host).unwrap();
    }
    assert_eq!(s.stats().buffer_allocations, 1);
}

#[test]
fn explain_example_lists_every_node() {
    let text = explain_example(&[fake_gpu(vec![Op::Rope]), cpu()]).unwrap();
    println!("{text}");
    assert!(
        text.contains("fake/gpu0 refused: ROPE is not implemented here"),
        "{text}"
    );
    assert!(text.contains("FLASH_ATTN_EXT"));
    let _ = TensorId(0);
}

fn small_block() -> Graph {
    llama_block(&BlockConfig {
        n_embd: 64,
        n_ff: 128,
        ..BlockConfig::default()
    })
    .unwrap()
}

fn inputs_of<'a>(g: &Graph, host: &'a HostTensors) -> Vec<(TensorId, &'a [u8])> {
    ["x", "pos", "kq_mask"]
        .iter()
        .map(|n| {
            let t = g.find(n).unwrap();
            (t, host.bytes(t))
        })
        .collect()
}

/// A small block with its weights on a fake GPU refusing `refuse`, the CPU
/// behind it, and the reference result.
fn block_on_fake_gpu(refuse: Vec<Op>) -> (Graph, HostTensors, Vec<f32>, Scheduler) {
    let mut g = small_block();
    let (host, want) = reference(&g);
    let mut s = Scheduler::new(vec![fake_gpu(refuse), cpu()], SchedOptions::default()).unwrap();
    let w = weights(&g);
    s.place_weights(&mut g, 0, &w).unwrap();
    for &t in &w {
        s.upload(&g, t, host.bytes(t)).unwrap();
    }
    (g, host, want, s)
}

/// Runs `g` twice through `Scheduler::run` (the second run rewriting the
/// inputs over the first's), checking the result each time.
fn run_twice(s: &mut Scheduler, g: &Graph, host: &HostTensors, want: &[f32]) {
    let result = g.find("result").unwrap();
    let mut out = vec![0u8; g.desc(result).nbytes() as usize];
    for _ in 0..2 {
        s.run(g, &inputs_of(g, host), &mut [(result, &mut out)])
            .unwrap();
        let got: Vec<f32> = out
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_close(&got, want);
    }
}

#[test]
fn run_uploads_only_the_given_inputs_and_reads_only_the_asked_outputs() {
    let (g, host, want, mut s) = block_on_fake_gpu(vec![Op::Rope]);
    run_twice(&mut s, &g, &host, &want);
    assert_eq!(s.planner().plans_built(), 1);
    let st = s.stats();
    assert_eq!(st.runs, 2);
    assert!(st.total_time >= st.backend_time && st.backend_time > std::time::Duration::ZERO);
    assert!((0.0..=1.0).contains(&st.host_share()));
}

#[test]
fn inputs_read_only_by_a_device_are_written_there_in_one_set_tensor() {
    let (g, host, want, mut s) = block_on_fake_gpu(vec![]);
    run_twice(&mut s, &g, &host, &want);
    let plan = s.planner_mut().plan(&g).unwrap();
    assert!(plan.copies.is_empty(), "{}", Explanation::new(&plan, &g));
    assert_eq!(plan.input_writes.len(), 1, "{:?}", plan.input_writes);
    assert_eq!(plan.input_writes[0].members.len(), 3);
    assert_eq!(s.stats().copies, 0);
    // The same through `compute` (inputs from a HostTensors).
    let mut host2 = HostTensors::new(&g);
    fill(&g, &mut host2, 7);
    s.compute(&g, &mut host2).unwrap();
    assert_close(&host2.get_f32(&g, g.find("result").unwrap()), &want);
}

#[test]
fn run_names_a_missing_input_an_unflagged_output_and_a_wrong_size() {
    let mut g = small_block();
    let (host, _) = reference(&g);
    let mut s = Scheduler::new(vec![cpu()], SchedOptions::default()).unwrap();
    let w = weights(&g);
    s.place_weights(&mut g, 0, &w).unwrap();
    let result = g.find("result").unwrap();
    let mut out = vec![0u8; g.desc(result).nbytes() as usize];
    let mut inputs = inputs_of(&g, &host);
    inputs.pop();
    let err = s.run(&g, &inputs, &mut [(result, &mut out)]).unwrap_err();
    assert!(err.to_string().contains("kq_mask"), "{err}");
    assert!(err.to_string().contains("neither given"), "{err}");

    let inner = g.sources(result).next().unwrap();
    let mut small = vec![0u8; g.desc(inner).nbytes() as usize];
    let err = s
        .run(&g, &inputs_of(&g, &host), &mut [(inner, &mut small)])
        .unwrap_err();
    assert!(
        err.to_string().contains("not flagged as an output"),
        "{err}"
    );

    let mut short = vec![0u8; 4];
    let err = s
        .run(&g, &inputs_of(&g, &host), &mut [(result, &mut short)])
        .unwrap_err();
    assert!(
        err.to_string().contains("output slice has 4 bytes"),
        "{err}"
    );
}

#[test]
fn a_device_past_its_timeout_fails_the_run_and_later_runs_route_around_it() {
    let mut g = small_block();
    let (host0, want) = reference(&g);
    // Weights in CPU memory; every batch is offloaded to the device.
    let options = SchedOptions {
        device_timeout: Some(std::time::Duration::from_millis(200)),
        offload_min_batch: Some(1),
        ..SchedOptions::default()
    };
    let hang = Some(std::time::Duration::from_secs(5));
    let mut s = Scheduler::new(vec![fake_gpu_hanging(vec![], hang), cpu()], options).unwrap();
    let w = weights(&g);
    s.place_weights(&mut g, 1, &w).unwrap();
    for &t in &w {
        s.upload(&g, t, host0.bytes(t)).unwrap();
    }
    let mut host1 = HostTensors::new(&g);
    fill(&g, &mut host1, 7);
    let started = std::time::Instant::now();
    let err = s.compute(&g, &mut host1).unwrap_err();
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
    let SchedError::Timeout { backend, call, .. } = &err else {
        panic!("expected a timeout, got {err}");
    };
    assert_eq!(backend, "fake/gpu0");
    assert!(call.contains("graph_compute of split"), "{call}");
    assert!(s.planner().failure(0).is_some());

    // The next graph runs on the CPU, with the reason in the explanation.
    let mut host2 = HostTensors::new(&g);
    fill(&g, &mut host2, 7);
    let plan = s.compute(&g, &mut host2).unwrap();
    assert!(plan.splits.iter().all(|sp| sp.backend == 1));
    assert_close(&host2.get_f32(&g, g.find("result").unwrap()), &want);
    let text = s.explain(&g).unwrap().to_string();
    assert!(text.contains("out of service"), "{text}");

    // Strict mode refuses to fall back, naming the reason.
    let strict = SchedOptions {
        strict: true,
        ..s.planner().options().clone()
    };
    s.planner_mut().set_options(strict);
    let err = s.compute(&g, &mut host2).unwrap_err();
    assert!(err.to_string().contains("timed out"), "{err}");
}

#[test]
fn weights_placed_on_a_device_out_of_service_are_an_error_naming_it() {
    let options = SchedOptions {
        device_timeout: Some(std::time::Duration::from_millis(200)),
        ..SchedOptions::default()
    };
    let hang = Some(std::time::Duration::from_secs(5));
    let mut s = Scheduler::new(vec![fake_gpu_hanging(vec![], hang), cpu()], options).unwrap();
    let mut g = small_block();
    let (host, _) = reference(&g);
    let w = weights(&g);
    s.place_weights(&mut g, 0, &w).unwrap();
    for &t in &w {
        s.upload(&g, t, host.bytes(t)).unwrap();
    }
    let result = g.find("result").unwrap();
    let mut out = vec![0u8; g.desc(result).nbytes() as usize];
    let err = s
        .run(&g, &inputs_of(&g, &host), &mut [(result, &mut out)])
        .unwrap_err();
    assert!(matches!(err, SchedError::Timeout { .. }), "{err}");
    let err = s
        .run(&g, &inputs_of(&g, &host), &mut [(result, &mut out)])
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("out of service") && text.contains("fake/gpu0"),
        "{text}"
    );
}

#[test]
fn a_buffer_key_names_one_backend_only() {
    let mut s = Scheduler::new(vec![fake_gpu(vec![]), cpu()], SchedOptions::default()).unwrap();
    let mut g = small_block();
    let w = weights(&g);
    let (first, second) = w.split_at(w.len() / 2);
    let k0 = s.place_weights(&mut g, 0, first).unwrap().key();
    let k1 = s.place_weights(&mut g, 1, second).unwrap().key();
    assert_ne!(k0, k1);
    let err = s.planner_mut().register_buffer(k0, 1).unwrap_err();
    assert!(matches!(err, SchedError::BufferKeyClash { .. }), "{err}");
    assert!(err.to_string().contains("fake/gpu0"), "{err}");
}

#[test]
fn a_released_buffer_is_forgotten_and_graphs_naming_it_fail_to_plan() {
    let mut s = Scheduler::new(vec![cpu()], SchedOptions::default()).unwrap();
    let mut g = small_block();
    let w = weights(&g);
    let key = s.place_weights(&mut g, 0, &w).unwrap().key();
    assert_eq!(s.weight_blocks().count(), 1);
    assert!(s.release_weights(key));
    assert!(!s.release_weights(key));
    assert_eq!(s.weight_blocks().count(), 0);
    let err = s.reserve(&g).unwrap_err();
    assert!(err.to_string().contains("not registered"), "{err}");
}

#[test]
fn a_graph_run_again_after_its_buffers_changed_uses_the_new_ones() {
    let block = |n_tokens| {
        llama_block(&BlockConfig {
            n_tokens,
            n_embd: 64,
            n_ff: 128,
            ..BlockConfig::default()
        })
        .unwrap()
    };
    let small = block(1);
    let (mut host, want) = reference(&small);
    let mut s = Scheduler::new(vec![cpu()], SchedOptions::default()).unwrap();
    s.compute(&small, &mut host).unwrap();
    assert_eq!(s.stats().buffer_allocations, 1);
    // Reserving for a larger graph replaces the compute buffer; the small
    // graph's plan, whose descriptors were bound last, then runs on the
    // new buffer, bound afresh.
    s.reserve(&block(32)).unwrap();
    assert_eq!(s.stats().buffer_allocations, 2);
    let built = s.planner().plans_built();
    let mut again = HostTensors::new(&small);
    fill(&small, &mut again, 7);
    s.compute(&small, &mut again).unwrap();
    assert_eq!(s.planner().plans_built(), built, "the small plan is reused");
    assert_close(&again.get_f32(&small, small.find("result").unwrap()), &want);
}
