//! `profile=steps`: GPU timestamps between the steps of a native replay,
//! on the first WebGPU adapter (lavapipe on machines without a GPU; the
//! test passes without an adapter, saying so). The profile is device-wide,
//! so it is set in the environment before this binary's only device opens.

mod common;

use common::replay::{Rig, Suite, node_results};
use common::{f32_bytes, leaf, node};

use backplane_abi::plugin::Buffer;
use backplane_abi::{Op, TensorDesc};
use backplane_webgpu::replay::native::timing::step_profiles;
use backplane_webgpu::replay::native::{native_barriers, native_replayed_graphs};

const ROW: i64 = 256;

/// `x + y`, then `rms_norm(sum)`, then `sum * 2` and `norm * 0.5`.
fn graph(buffer: u64, ne0: i64, rows: i64) -> Vec<TensorDesc> {
    let slot = slot_bytes(ne0, rows);
    let at = |i: u64| i * slot;
    let ne = [ne0, rows, 1, 1];
    let mut norm = node(Op::RmsNorm, ne, at(3), buffer, &[2]);
    norm.op_params[0] = 1e-5f32.to_bits() as i32;
    let mut doubled = node(Op::Scale, ne, at(4), buffer, &[2]);
    doubled.op_params[0] = 2.0f32.to_bits() as i32;
    let mut halved = node(Op::Scale, ne, at(5), buffer, &[3]);
    halved.op_params[0] = 0.5f32.to_bits() as i32;
    vec![
        leaf(ne, at(0), buffer),
        leaf(ne, at(1), buffer),
        node(Op::Add, ne, at(2), buffer, &[0, 1]),
        norm,
        doubled,
        halved,
    ]
}

fn slot_bytes(ne0: i64, rows: i64) -> u64 {
    ((ne0 * rows * 4) as u64).next_multiple_of(4096)
}

static SUITE: Suite = Suite {
    graph,
    graph_bytes: |ne0, rows| 6 * slot_bytes(ne0, rows),
    write_inputs,
    counter: native_replayed_graphs,
    reference: "native_replay=off",
};

fn write_inputs(buf: &dyn Buffer, g: &[TensorDesc], seed: i64) {
    for (i, d) in g[..2].iter().enumerate() {
        let n = d.ne[0] * d.ne[1];
        let v: Vec<f32> = (0..n)
            .map(|k| ((k * 7 + seed * 13 + i as i64 * 5) % 23) as f32 / 11.0 - 1.0)
            .collect();
        buf.set_tensor(d, 0, &f32_bytes(&v)).expect("set_tensor");
    }
}

#[test]
fn native_replays_are_timed_step_by_step_without_changing_their_results() {
    // SAFETY: set before any thread of this binary reads the environment
    // (its only test; the device opens in `Rig::new`).
    unsafe { std::env::set_var("BACKPLANE_WEBGPU_PROFILE", "steps") };
    let Some(rig) = Rig::new(&SUITE) else {
        return;
    };
    let (buf, g, stream) = rig.setup((ROW, 2), "native_replay=on");
    let before = step_profiles().len();
    let mut natives = 0;
    for seed in 0..6 {
        // Bitwise against native_replay=off; the first run is recorded,
        // later ones replayed natively.
        let native = rig.counted(&*stream, &*buf, &g, seed);
        assert!(native || seed < 2, "run {seed} not replayed natively");
        natives += u64::from(native);
        assert!(!node_results(&*buf, &g).is_empty());
    }
    let profiles = step_profiles();
    assert_eq!(profiles.len(), before + 1, "one recording timed");
    let p = profiles.last().expect("just checked");
    // Each replay's timestamps are read when the next is submitted: all
    // but the last read so far.
    assert_eq!(p.runs, natives - 1, "{p:?}");
    // A step per barrier of the one twin recorded in this process, and
    // one more; each names its kernels and took time.
    let (barriers, _) = native_barriers();
    assert!(barriers >= 1, "{p:?}");
    assert_eq!(p.steps.len() as u64, barriers + 1, "{p:?}");
    assert_eq!(p.mean_ns.len(), p.steps.len());
    assert!(p.steps.iter().all(|s| s.contains("x1x1)")), "{p:?}");
    assert!(p.mean_ns.iter().all(|&ns| ns > 0.0), "{p:?}");
}
