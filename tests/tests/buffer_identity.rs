//! Buffer identity across plugins: every plugin numbers its buffers from 1,
//! so a host that keyed placed buffers by the plugin's id alone would write
//! one backend's weights into the other's memory and compute on the wrong
//! bytes, with no error. Here the `picky` fixture and its copy `pickier`
//! (two devices, its own buffer numbering) each hold weights of one graph;
//! the result must equal the CPU's. Build the fixtures first with
//! `cargo xtask plugins --fixtures`.

use std::path::PathBuf;
use std::sync::OnceLock;

use backplane::registry::{Device, Registry, RegistryOptions, SearchPath};
use backplane::sched::{SchedOptions, Scheduler};
use backplane::{DType, Graph, HostTensors, TensorId};
use backplane_tests::{cpu_plugin, fixture, install, nmse, picky_plugin, scratch_dir};

/// One directory with the CPU plugin, `picky` and `pickier`.
fn plugin_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch_dir("buffer-identity");
        install(&cpu_plugin(), &dir, "cpu-x86-64");
        install(&picky_plugin(), &dir, "picky");
        install(&fixture("pickier"), &dir, "pickier");
        dir
    })
}

fn registry() -> Registry {
    let reg = Registry::load(&RegistryOptions {
        search: SearchPath::only([plugin_dir()]),
        builtin_cpu: false,
    });
    assert!(reg.refused().is_empty(), "{:?}", reg.refused());
    reg
}

fn device(reg: &Registry, backend: &str, index: usize) -> Device {
    reg.backend(backend)
        .unwrap_or_else(|| panic!("{backend} loaded (run `cargo xtask plugins --fixtures`)"))
        .devices[index]
        .clone()
}

/// `result = w2 · (w1 · x) + b`, each weight on its own backend.
fn two_layer() -> Graph {
    let (e, t) = (32i64, 3i64);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[e, t]).unwrap();
    let w1 = g.weight("w1", DType::F32, &[e, e]).unwrap();
    let w2 = g.weight("w2", DType::F32, &[e, e]).unwrap();
    let b = g.weight("b", DType::F32, &[e]).unwrap();
    let h = g.mul_mat(w1, x).unwrap();
    let y = g.mul_mat(w2, h).unwrap();
    let r = g.add(y, b).unwrap();
    g.set_name(r, "result");
    g.mark_output(r).unwrap();
    g
}

fn values(seed: u32, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let v = (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(seed * 97)
                % 1000;
            v as f32 / 1000.0 - 0.5
        })
        .collect()
}

fn filled(g: &Graph) -> HostTensors {
    let mut host = HostTensors::new(g);
    for (k, name) in ["x", "w1", "w2", "b"].iter().enumerate() {
        let t = g.find(name).unwrap();
        let n = g.desc(t).nelements() as usize;
        host.set_f32(g, t, &values(k as u32 + 1, n)).unwrap();
    }
    host
}

fn id(g: &Graph, name: &str) -> TensorId {
    g.find(name).unwrap()
}

/// Places `w1` on backend `a`, `w2` on `b`, the bias on the CPU (last),
/// uploads them, runs, and returns the result.
fn run_placed(devices: Vec<Device>, a: usize, b: usize) -> (Vec<f32>, Scheduler) {
    let cpu = devices.len() - 1;
    let mut s = Scheduler::new(devices, SchedOptions::default()).unwrap();
    let mut g = two_layer();
    let host = filled(&g);
    let (w1, w2, bias) = (id(&g, "w1"), id(&g, "w2"), id(&g, "b"));
    let k1 = s.place_weights(&mut g, a, &[w1]).unwrap().key();
    let k2 = s.place_weights(&mut g, b, &[w2]).unwrap().key();
    let k3 = s.place_weights(&mut g, cpu, &[bias]).unwrap().key();
    assert!(
        k1 != k2 && k2 != k3 && k1 != k3,
        "keys are unique in the host"
    );
    for name in ["w1", "w2", "b"] {
        let t = id(&g, name);
        s.upload(&g, t, host.bytes(t)).unwrap();
    }
    let x = id(&g, "x");
    let r = id(&g, "result");
    let mut out = vec![0u8; g.desc(r).nbytes() as usize];
    let plan = s
        .run(&g, &[(x, host.bytes(x))], &mut [(r, &mut out)])
        .unwrap();
    // Each product ran where its weight is.
    for (name, backend) in [("w1", a), ("w2", b)] {
        let t = id(&g, name);
        let user = g
            .compute_nodes()
            .find(|&n| g.sources(n).any(|s| s == t))
            .unwrap();
        assert_eq!(plan.assignment.backend[user.index()], backend, "{name}");
    }
    (backplane_tests::bytes_f32(&out), s)
}

fn cpu_result() -> Vec<f32> {
    let g = two_layer();
    let mut host = filled(&g);
    backplane::reference::compute(&g, &mut host).unwrap();
    host.get_f32(&g, id(&g, "result"))
}

#[test]
fn weights_on_two_plugins_numbering_buffers_alike_give_the_cpu_result() {
    let reg = registry();
    let devices = vec![
        device(&reg, "picky", 0),
        device(&reg, "pickier", 0),
        device(&reg, "cpu", 0),
    ];
    let (got, s) = run_placed(devices, 0, 1);
    let err = nmse(&got, &cpu_result());
    assert!(err < 1e-6, "nmse {err}");
    assert_eq!(s.weight_blocks().count(), 3);
}

#[test]
fn weights_on_two_devices_of_one_plugin_give_the_cpu_result() {
    let reg = registry();
    let devices = vec![
        device(&reg, "pickier", 0),
        device(&reg, "pickier", 1),
        device(&reg, "cpu", 0),
    ];
    let (got, _s) = run_placed(devices, 0, 1);
    let err = nmse(&got, &cpu_result());
    assert!(err < 1e-6, "nmse {err}");
}

#[test]
fn swapping_which_plugin_holds_which_weight_changes_nothing() {
    let reg = registry();
    let devices = vec![
        device(&reg, "pickier", 0),
        device(&reg, "picky", 0),
        device(&reg, "cpu", 0),
    ];
    let (got, _s) = run_placed(devices, 1, 0);
    let err = nmse(&got, &cpu_result());
    assert!(err < 1e-6, "nmse {err}");
}
