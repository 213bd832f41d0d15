//! The real plugin file (`libbackplane_hexagon.so`, as cargo builds it for
//! this test) loaded through the registry with the FastRPC transport, its
//! `libcdsprpc.so` being the test double build.rs makes
//! (`BACKPLANE_HEXAGON_CDSPRPC` points the plugin at it). Real graphs run
//! across the plugin ABI, FastRPC invokes, dspqueue and the DSP platform
//! layer; each injected failure must come back as an error naming what
//! failed, with the host still working afterwards.
//!
//! The plugin reads its settings from the environment when a registry
//! loads it, so every test holds [`ENV`] while it sets variables and runs.
#![cfg(target_os = "linux")]

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};

use backplane::registry::{Device, Registry, RegistryOptions, SearchPath};
use backplane::{DType, GluOp, Graph, HostTensors, Op, TensorDesc, TensorId};

/// Serialises the tests: the environment is process-wide.
static ENV: Mutex<()> = Mutex::new(());

/// Variables a test may set; each test starts from none of them.
const VARS: [&str; 6] = [
    "BACKPLANE_HEXAGON_EMULATE",
    "BACKPLANE_HEXAGON_SESSIONS",
    "BACKPLANE_HEXAGON_URI_OPTIONS",
    "BACKPLANE_HEXAGON_CDSPRPC",
    "BACKPLANE_HEXAGON_TIMEOUT_MS",
    "BACKPLANE_CDSPRPC_DOUBLE_FAULT",
];

/// A directory holding only the plugin, copied from next to this test binary
/// (written under a temporary name and renamed, so a run of this binary that
/// has the previous copy loaded keeps its file).
fn plugin_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary path");
        let deps = exe.parent().expect("deps dir");
        let so = deps.join("libbackplane_hexagon.so");
        assert!(so.is_file(), "{} was not built", so.display());
        let dir = deps.join("..").join("tmp").join("hexagon-fastrpc-plugin");
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let tmp = dir.join(format!(".libbackplane_hexagon.so.{}", std::process::id()));
        std::fs::copy(&so, &tmp).expect("copying the plugin");
        std::fs::rename(&tmp, dir.join("libbackplane_hexagon.so")).expect("installing the plugin");
        dir.canonicalize().expect("canonical dir")
    })
}

/// Takes the environment lock and sets the FastRPC settings plus `vars`.
fn env(vars: &[(&str, &str)]) -> MutexGuard<'static, ()> {
    let guard = ENV.lock().unwrap_or_else(|e| e.into_inner());
    for k in VARS {
        // SAFETY: every test of this binary touches the environment only
        // while holding ENV, and the plugin and the double read it only
        // inside calls made under it.
        unsafe { std::env::remove_var(k) };
    }
    let base = [(
        "BACKPLANE_HEXAGON_CDSPRPC",
        env!("BACKPLANE_HEXAGON_CDSPRPC_DOUBLE"),
    )];
    for (k, v) in base.iter().chain(vars) {
        // SAFETY: as above.
        unsafe { std::env::set_var(k, v) };
    }
    guard
}

fn load() -> Registry {
    let reg = Registry::load(&RegistryOptions {
        search: SearchPath::only([plugin_dir()]),
        builtin: None,
    });
    assert!(
        reg.backend("hexagon").is_some(),
        "refused: {:?}",
        reg.refused()
    );
    reg
}

/// The first device, or a panic with the plugin's reason.
fn device(reg: &Registry) -> Device {
    let b = reg.backend("hexagon").expect("loaded");
    b.devices
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("no device: {:?}", b.no_device_reason))
}

/// Why the plugin has no device.
fn no_device_reason(reg: &Registry) -> String {
    let b = reg.backend("hexagon").expect("loaded");
    assert!(b.devices.is_empty(), "unexpected devices");
    b.no_device_reason.clone().expect("a reason")
}

fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// A Llama feed-forward block with Q4_0, Q8_0 and F16 weights.
fn feed_forward() -> (Graph, TensorId) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[64, 3]).unwrap();
    let norm_w = g.weight("norm", DType::F32, &[64]).unwrap();
    let gate_w = g.weight("gate", DType::Q4_0, &[64, 96]).unwrap();
    let up_w = g.weight("up", DType::Q8_0, &[64, 96]).unwrap();
    let down_w = g.weight("down", DType::F16, &[96, 64]).unwrap();
    let h = g.rms_norm(x, 1e-5).unwrap();
    let h = g.mul(h, norm_w).unwrap();
    let gate = g.mul_mat(gate_w, h).unwrap();
    let up = g.mul_mat(up_w, h).unwrap();
    let act = g.glu(gate, up, GluOp::Swiglu).unwrap();
    let down = g.mul_mat(down_w, act).unwrap();
    let out = g.add(down, x).unwrap();
    g.mark_output(out).unwrap();
    (g, out)
}

/// The graph's tensors in one buffer of the device, leaves filled.
struct Placed {
    descs: Vec<TensorDesc>,
    buffer: backplane::registry::Buffer,
    host: HostTensors,
}

fn place(g: &Graph, d: &Device) -> Result<Placed, String> {
    let buft = d.buffer_type();
    let align = buft.alignment();
    let mut descs = g.tensors().to_vec();
    let mut root_off = vec![0u64; descs.len()];
    let mut total = 0u64;
    for t in g.ids() {
        if g.desc(t).view_source().is_none() {
            root_off[t.index()] = total;
            total += buft.alloc_size(g.desc(t)).div_ceil(align) * align;
        }
    }
    let buffer = buft.alloc_buffer(total).map_err(|e| e.to_string())?;
    let mut host = HostTensors::new(g);
    for t in g.ids() {
        let desc = &mut descs[t.index()];
        desc.buffer = buffer.id();
        desc.offset = root_off[g.storage_root(t).index()] + g.offset_in_root(t);
        if g.desc(t).op().unwrap() == Op::None {
            let n = g.desc(t).nelements() as usize;
            host.set_f32(g, t, &values(n, t.index() as u64)).unwrap();
            buffer
                .set_tensor(desc, 0, host.bytes(t))
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(Placed {
        descs,
        buffer,
        host,
    })
}

/// Runs `g` on `d` and returns the NMSE of `out` against the reference.
fn run(g: &Graph, out: TensorId, d: &Device) -> Result<f64, String> {
    let mut p = place(g, d)?;
    let stream = d.init_backend("").map_err(|e| e.to_string())?;
    stream.graph_compute(&p.descs).map_err(|e| e.to_string())?;
    stream.synchronize().map_err(|e| e.to_string())?;
    let od = p.descs[out.index()];
    let mut bytes = vec![0u8; od.nbytes() as usize];
    p.buffer
        .get_tensor(&od, 0, &mut bytes)
        .map_err(|e| e.to_string())?;
    let got = backplane::host::read_f32(&od, &bytes);
    backplane_reference::compute(g, &mut p.host).expect("reference");
    let want = p.host.get_f32(g, out);
    let err: f64 = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
        .sum();
    let norm: f64 = want.iter().map(|b| f64::from(*b).powi(2)).sum();
    Ok(err / norm)
}

#[test]
fn plugin_over_fastrpc_runs_a_feed_forward_block() {
    let _env = env(&[("BACKPLANE_HEXAGON_SESSIONS", "2")]);
    let reg = load();
    let b = reg.backend("hexagon").unwrap();
    assert_eq!(b.devices.len(), 2);
    for d in &b.devices {
        assert!(d.description().contains("FastRPC"), "{}", d.description());
        let (g, out) = feed_forward();
        for node in g.compute_nodes() {
            assert!(
                d.supports_op(g.tensors(), node.index()).is_supported(),
                "{}",
                g.name(node)
            );
        }
        let nmse = run(&g, out, d).expect("the block runs");
        assert!(nmse < 5e-4, "{}: NMSE {nmse}", d.name());
    }
}

#[test]
fn plugin_without_the_library_has_no_device_and_says_why() {
    let _env = env(&[("BACKPLANE_HEXAGON_CDSPRPC", "/nonexistent/libcdsprpc.so")]);
    let why = no_device_reason(&load());
    assert!(
        why.contains("/nonexistent/libcdsprpc.so") && why.contains("BACKPLANE_HEXAGON_EMULATE=1"),
        "{why}"
    );
}

#[test]
fn plugin_reports_each_open_failure_as_its_no_device_reason() {
    let cases = [
        (
            ("BACKPLANE_HEXAGON_URI_OPTIONS", "emu_fault=open"),
            "DSP session 0: opening DSP session file:///libbackplane_htp_skel.so",
        ),
        (
            ("BACKPLANE_HEXAGON_URI_OPTIONS", "emu_fault=hmx"),
            "HAP power request for the HMX clock at its max corner failed with error 0x1",
        ),
        (
            ("BACKPLANE_CDSPRPC_DOUBLE_FAULT", "unsigned_pd"),
            "remote_session_control(unsigned PD) failed with error 0x14",
        ),
    ];
    for (var, want) in cases {
        let why = {
            let _env = env(&[var]);
            no_device_reason(&load())
        };
        assert!(why.contains(want), "{var:?}: {why}");
    }
    // The host goes on: the next load opens a working session.
    let _env = env(&[]);
    let (g, out) = feed_forward();
    assert!(run(&g, out, &device(&load())).expect("runs") < 5e-4);
}

/// Runs the block under a fault that strikes after the buffer is mapped
/// (`emu_fault_after=1`); returns the error, then checks the host goes on.
fn graph_error_under(fault: &str) -> String {
    let e = {
        let opts = format!("emu_fault={fault}&emu_fault_after=1");
        let _env = env(&[
            ("BACKPLANE_HEXAGON_URI_OPTIONS", opts.as_str()),
            ("BACKPLANE_HEXAGON_TIMEOUT_MS", "100"),
        ]);
        let reg = load();
        let d = device(&reg);
        let (g, out) = feed_forward();
        let e = run(&g, out, &d).expect_err("the fault must fail the graph");
        // Later calls on the same session fail with a reason, not a hang.
        let e2 = d
            .init_backend("")
            .and_then(|s| s.synchronize())
            .err()
            .map(|e| e.to_string());
        format!("{e} / then: {e2:?}")
    };
    let _env = env(&[]);
    let (g, out) = feed_forward();
    assert!(run(&g, out, &device(&load())).expect("runs") < 5e-4);
    e
}

#[test]
fn plugin_queue_full_fails_the_graph_and_the_host_goes_on() {
    let e = graph_error_under("queue_full");
    assert!(
        e.contains("graph_compute: DSP request queue full: no room after 100 ms")
            && e.contains("the DSP session is broken"),
        "{e}"
    );
}

#[test]
fn plugin_stalled_dsp_times_out_and_the_host_goes_on() {
    let e = graph_error_under("stall");
    assert!(
        e.contains("graph_compute: DSP did not answer within 100 ms")
            && e.contains("the DSP session is broken"),
        "{e}"
    );
}

#[test]
fn plugin_dsp_error_code_names_the_node_and_the_session_goes_on() {
    let _env = env(&[("BACKPLANE_HEXAGON_URI_OPTIONS", "emu_fault=dsp_error")]);
    let reg = load();
    let d = device(&reg);
    let (g, out) = feed_forward();
    let e = run(&g, out, &d).expect_err("damaged requests");
    assert!(
        e.contains("graph_compute node")
            && e.contains("(RMS_NORM): DSP error 3 (invalid parameters): op 32767"),
        "{e}"
    );
    d.init_backend("")
        .unwrap()
        .synchronize()
        .expect("the session still answers");
}

#[test]
fn plugin_shared_memory_failures_name_the_call_and_the_host_goes_on() {
    for (fault, want) in [
        ("rpcmem", "rpcmem_alloc failed with error 0x2"),
        ("mmap", "fastrpc_mmap failed with error 0x2"),
    ] {
        let _env = env(&[("BACKPLANE_CDSPRPC_DOUBLE_FAULT", fault)]);
        let reg = load();
        let d = device(&reg);
        let e = d
            .buffer_type()
            .alloc_buffer(4096)
            .err()
            .expect("allocation must fail")
            .to_string();
        assert!(
            e.contains("shared buffer of 4096 bytes") && e.contains(want),
            "{fault}: {e}"
        );
        // SAFETY: as in env(): the lock is held.
        unsafe { std::env::remove_var("BACKPLANE_CDSPRPC_DOUBLE_FAULT") };
        let (g, out) = feed_forward();
        assert!(run(&g, out, &d).expect("the same session runs") < 5e-4);
    }
}
