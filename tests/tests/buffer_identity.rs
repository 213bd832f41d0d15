//! Buffer identity across plugins: every plugin numbers its buffers from 1,
//! so a host that keyed placed buffers by the plugin's id alone would write
//! one backend's weights into the other's memory and compute on the wrong
//! bytes, with no error. Here the `picky` fixture and its copy `pickier`
//! (two devices, its own buffer numbering) each hold weights of one graph;
//! the result must equal the CPU's. Build the fixtures first with
//! `cargo xtask plugins --fixtures`.

use std::path::PathBuf;
use std::sync::OnceLock;

use backplane::registry::Device;
use backplane::sched::{SchedOptions, Scheduler};
use backplane::{DType, Graph, TensorId};
use backplane_tests::{
    cpu_plugin, cpu_plugin_name, device_of, filled_leaves, fixture, load_all_of, nmse,
    picky_plugin, scratch_dir_with,
};

/// One directory with the CPU plugin, `picky` and `pickier`.
fn plugin_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        scratch_dir_with(
            "buffer-identity",
            &[
                (cpu_plugin(), cpu_plugin_name()),
                (picky_plugin(), "picky"),
                (fixture("pickier"), "pickier"),
            ],
        )
    })
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

fn id(g: &Graph, name: &str) -> TensorId {
    g.find(name).unwrap()
}

/// Places `w1` on backend 0, `w2` on backend 1 and the bias on the CPU
/// (backend 2), uploads them, runs, and returns the result.
fn run_placed(devices: [Device; 3]) -> (Vec<f32>, Scheduler) {
    let (a, b, cpu) = (0, 1, 2);
    let mut s = Scheduler::new(devices.to_vec(), SchedOptions::default()).unwrap();
    let mut g = two_layer();
    let host = filled_leaves(&g);
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
    let mut host = filled_leaves(&g);
    backplane_reference::compute(&g, &mut host).unwrap();
    host.get_f32(&g, id(&g, "result"))
}

/// Loads `picky`, `pickier` and the CPU plugin; places `w1` on device
/// `first` (backend name, device index) and `w2` on `second`, runs, and
/// checks the result against the CPU's alone. Returns the scheduler.
fn assert_placed_run_equals_the_cpu(first: (&str, usize), second: (&str, usize)) -> Scheduler {
    let reg = load_all_of(plugin_dir());
    let (got, s) = run_placed([
        device_of(&reg, first.0, first.1),
        device_of(&reg, second.0, second.1),
        device_of(&reg, "cpu", 0),
    ]);
    let err = nmse(&got, &cpu_result());
    assert!(err < 1e-6, "{first:?} and {second:?}: nmse {err}");
    s
}

#[test]
fn weights_on_two_plugins_numbering_buffers_alike_give_the_cpu_result() {
    let s = assert_placed_run_equals_the_cpu(("picky", 0), ("pickier", 0));
    assert_eq!(s.weight_blocks().count(), 3);
}

#[test]
fn weights_on_two_devices_of_one_plugin_give_the_cpu_result() {
    assert_placed_run_equals_the_cpu(("pickier", 0), ("pickier", 1));
}

#[test]
fn swapping_which_plugin_holds_which_weight_changes_nothing() {
    // w1 on pickier and w2 on picky: the other way round from the first test.
    assert_placed_run_equals_the_cpu(("pickier", 0), ("picky", 0));
}
