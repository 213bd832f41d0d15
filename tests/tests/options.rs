//! Backend options through the registry and the scheduler: a plugin's
//! option schema comes from its options extension, params reach each
//! device's `init_backend` from `SchedOptions::backend_options`, a bad
//! value is refused naming the backend, key and allowed values, and a
//! plugin built before the extension lists no options but still loads.

use backplane::host::HostTensors;
use backplane::registry::Registry;
use backplane::sched::{BackendOptions, SchedOptions, Scheduler};
use backplane::{DType, Graph};
use backplane_tests::{
    cpu_plugin, cpu_plugin_name, fixture, load_backend_from, plugin_dir, require, scratch_dir_with,
};

fn cpu_registry() -> Registry {
    let dir = scratch_dir_with("options-cpu", &[(cpu_plugin(), cpu_plugin_name())]);
    load_backend_from(&dir, "cpu")
}

fn scheduler(reg: &Registry, assignment: &str) -> Result<Scheduler, String> {
    let devices = reg.backend("cpu").expect("cpu").devices.clone();
    let options = SchedOptions {
        backend_options: BackendOptions::from_assignments(&[assignment])?,
        ..SchedOptions::default()
    };
    Scheduler::new(devices, options).map_err(|e| e.to_string())
}

#[test]
fn the_cpu_plugin_reports_its_schema_through_the_extension() {
    let reg = cpu_registry();
    let b = reg.backend("cpu").unwrap();
    assert!(
        b.source.path().is_some(),
        "the plugin file, not the built-in"
    );
    let names: Vec<&str> = b.options.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["threads"]);
    assert_eq!(b.options[0].describe_kind(), "integer 1..=4096");
}

#[test]
fn a_bad_value_from_the_host_is_refused_by_the_plugins_init_backend() {
    let reg = cpu_registry();
    let e = scheduler(&reg, "cpu.threads=0").err().expect("refused");
    assert!(e.contains("init_backend"), "{e}");
    assert!(
        e.contains("cpu backend option 'threads': 0 is outside 1..=4096"),
        "{e}"
    );
    let e = scheduler(&reg, "cpu.fast=1").err().expect("refused");
    assert!(
        e.contains("cpu backend option 'fast': unknown option (known: threads)"),
        "{e}"
    );
}

#[test]
fn a_good_value_reaches_the_stream_and_graphs_still_compute() {
    let reg = cpu_registry();
    let mut sched = scheduler(&reg, "cpu.threads=2").expect("scheduler");
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[4]).unwrap();
    let b = g.input("b", DType::F32, &[4]).unwrap();
    let c = g.add(a, b).unwrap();
    g.mark_output(c).unwrap();
    let mut host = HostTensors::new(&g);
    host.set_f32(&g, a, &[1.0, 2.0, 3.0, 4.0]).unwrap();
    host.set_f32(&g, b, &[10.0, 20.0, 30.0, 40.0]).unwrap();
    sched.compute(&g, &mut host).expect("compute");
    assert_eq!(host.get_f32(&g, c), [11.0, 22.0, 33.0, 44.0]);
}

#[test]
fn a_plugin_built_before_options_lists_none_and_still_loads() {
    // The fixture declares no options: built before the extension it lacks
    // the symbol, built after it exports an empty schema; either way the
    // registry lists none and the plugin loads.
    let file = fixture("picky");
    let dir = scratch_dir_with("options-fixture", &[(file, "picky")]);
    let reg = load_backend_from(&dir, "picky");
    assert!(reg.backend("picky").unwrap().options.is_empty());
}

#[test]
fn webgpu_refuses_bad_and_device_wide_options_in_stream_params() {
    let file = require(&plugin_dir(), "webgpu");
    let reg = load_backend_from(file.parent().unwrap(), "webgpu");
    let b = reg.backend("webgpu").unwrap();
    assert!(b.options.iter().any(|o| o.name == "matmul_path"));
    let Some(d) = b.devices.first() else {
        eprintln!("no WebGPU device here: {:?}", b.no_device_reason);
        return;
    };
    let e = d
        .init_backend("matmul_path=fastest")
        .err()
        .expect("refused");
    assert!(
        e.message
            .contains("webgpu backend option 'matmul_path': 'fastest' is not one of: matvec"),
        "{e}"
    );
    let e = d.init_backend("bind_cache=0").err().expect("refused");
    assert!(e.message.contains("set BACKPLANE_WEBGPU_BIND_CACHE"), "{e}");
    assert!(d.init_backend("matmul_path=tiled; matmul_trace=1").is_ok());
}

/// Runs the ignored test `name` of this binary in a child process with
/// `env` set (a variable read by a plugin cannot be set safely in this
/// process while other tests run); panics with its output if it fails.
fn run_child(name: &str, env: &[(&str, &str)]) -> String {
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--ignored",
            "--exact",
            name,
            "--test-threads=1",
            "--nocapture",
        ])
        .envs(env.iter().copied())
        .output()
        .expect("running the child test");
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success() && text.contains("1 passed"),
        "{name}: {text}{err}"
    );
    err
}

#[test]
fn the_webgpu_variables_ci_sets_still_reach_the_plugin() {
    // Each variable is read when a stream opens: a value the schema
    // refuses shows it was read, and the refusal names the variable.
    let child = "child_webgpu_stream_refuses_the_variables_value";
    run_child(
        child,
        &[
            (
                "BACKPLANE_WEBGPU_MATMUL",
                "coopmat-emulated,dequant,splitk=3,rows=99",
            ),
            (
                "BACKPLANE_TEST_EXPECT_REFUSAL",
                "webgpu backend option 'matmul_rows' (from BACKPLANE_WEBGPU_MATMUL): 99 is outside 1..=16",
            ),
        ],
    );
    run_child(
        child,
        &[
            ("BACKPLANE_WEBGPU_FLASH_ATTN", "fastest"),
            (
                "BACKPLANE_TEST_EXPECT_REFUSAL",
                "webgpu backend option 'flash_attn' (from BACKPLANE_WEBGPU_FLASH_ATTN): 'fastest' is not one of: plain, vector",
            ),
        ],
    );
}

#[test]
#[ignore = "run by the_webgpu_variables_ci_sets_still_reach_the_plugin with the variables set"]
fn child_webgpu_stream_refuses_the_variables_value() {
    let want = std::env::var("BACKPLANE_TEST_EXPECT_REFUSAL").expect("set by the parent test");
    let file = require(&plugin_dir(), "webgpu");
    let reg = load_backend_from(file.parent().unwrap(), "webgpu");
    let b = reg.backend("webgpu").unwrap();
    let Some(d) = b.devices.first() else {
        eprintln!("no WebGPU device here: {:?}", b.no_device_reason);
        return;
    };
    let e = d.init_backend("").err().expect("refused");
    assert!(e.message.contains(&want), "{e}");
}

#[test]
fn a_forced_matmul_path_from_the_host_changes_the_kernel_the_plugin_runs() {
    let child = "child_webgpu_matmul_runs_the_path_the_host_forced";
    for path in ["tiled", "matvec"] {
        let err = run_child(child, &[("BACKPLANE_TEST_MATMUL_PATH", path)]);
        if err.contains("no WebGPU device here") {
            return;
        }
        let want = format!("-> {path} ");
        assert!(
            err.lines()
                .any(|l| l.contains("backplane-webgpu: MUL_MAT f32 m=8 n=4 k=32")
                    && l.contains(&want)),
            "{path}: {err}"
        );
    }
}

#[test]
#[ignore = "run by a_forced_matmul_path_from_the_host_changes_the_kernel_the_plugin_runs"]
fn child_webgpu_matmul_runs_the_path_the_host_forced() {
    let path = std::env::var("BACKPLANE_TEST_MATMUL_PATH").expect("set by the parent test");
    let file = require(&plugin_dir(), "webgpu");
    let reg = load_backend_from(file.parent().unwrap(), "webgpu");
    let b = reg.backend("webgpu").unwrap();
    if b.devices.is_empty() {
        eprintln!("no WebGPU device here: {:?}", b.no_device_reason);
        return;
    }
    let mut g = Graph::new();
    let w = g.input("w", DType::F32, &[32, 8]).unwrap();
    let x = g.input("x", DType::F32, &[32, 4]).unwrap();
    let y = g.mul_mat(w, x).unwrap();
    g.mark_output(y).unwrap();
    let mut host = HostTensors::new(&g);
    let wv: Vec<f32> = (0..256).map(|i| (i % 7) as f32 - 3.0).collect();
    let xv: Vec<f32> = (0..128).map(|i| (i % 5) as f32 * 0.5).collect();
    host.set_f32(&g, w, &wv).unwrap();
    host.set_f32(&g, x, &xv).unwrap();
    let mut options = BackendOptions::new();
    options.set("webgpu", "matmul_path", &path).unwrap();
    options.set("webgpu", "matmul_trace", "on").unwrap();
    let sched_options = SchedOptions {
        strict: true,
        backend_options: options,
        ..SchedOptions::default()
    };
    let mut sched = Scheduler::new(b.devices.clone(), sched_options).expect("scheduler");
    // The WebGPU device alone, strict: the node runs there or fails.
    sched.compute(&g, &mut host).expect("compute");
    let got = host.get_f32(&g, y);
    for (j, col) in got.chunks(8).enumerate() {
        for (i, &v) in col.iter().enumerate() {
            let want: f32 = (0..32).map(|k| wv[i * 32 + k] * xv[j * 32 + k]).sum();
            assert!((v - want).abs() < 1e-3, "y[{i},{j}] = {v}, want {want}");
        }
    }
}
