//! The WebGPU plugin, loaded from `target/plugins/` (built by `cargo xtask
//! plugins`), on whatever Vulkan device is present: lavapipe in CI (the
//! README commands install it). Without a device the plugin must still load
//! and say why it has none.

use backplane::registry::Registry;
use backplane::{DType, Graph};
use backplane_tests::{bytes_f32, f32_bytes, load_backend_from, place, plugin_dir, require};

fn webgpu() -> Registry {
    let file = require(&plugin_dir(), "webgpu");
    load_backend_from(file.parent().expect("plugin dir"), "webgpu")
}

/// The first WebGPU device, or None after checking the no-device reason.
fn device(reg: &Registry) -> Option<&backplane::registry::Device> {
    let b = reg.backend("webgpu").expect("loaded");
    if b.devices.is_empty() {
        let why = b.no_device_reason.as_deref().unwrap_or("");
        assert!(
            why.contains("adapter"),
            "no devices and no useful reason: {why:?}"
        );
        eprintln!("no WebGPU device here: {why}");
        return None;
    }
    b.devices.first()
}

#[test]
fn plugin_loads_and_describes_its_devices() {
    let reg = webgpu();
    let Some(d) = device(&reg) else { return };
    assert!(d.name().starts_with("gpu"), "{}", d.name());
    let desc = d.description();
    assert!(desc.contains("max binding"), "{desc}");
    let mem = d.memory();
    assert!(
        mem.total_bytes > 0 && mem.free_bytes <= mem.total_bytes,
        "{mem:?}"
    );
    assert!(d.buffer_type().alignment().is_power_of_two());
}

#[test]
fn unaligned_set_get_memset_and_copy_round_trip() {
    let reg = webgpu();
    let Some(d) = device(&reg) else { return };
    let buft = d.buffer_type();
    let buf = buft.alloc_buffer(1024).expect("alloc");
    let mut t = backplane::TensorDesc::new(DType::I8, [37, 1, 1, 1]);
    t.buffer = buf.id();
    t.offset = 3;
    let data: Vec<u8> = (0..37u8)
        .map(|i| i.wrapping_mul(7).wrapping_add(1))
        .collect();
    buf.clear(0xEE).unwrap();
    buf.set_tensor(&t, 0, &data).unwrap();
    let mut back = vec![0u8; 37];
    buf.get_tensor(&t, 0, &mut back).unwrap();
    assert_eq!(back, data);
    // Neighbours of an unaligned write are untouched.
    let mut whole = backplane::TensorDesc::new(DType::I8, [48, 1, 1, 1]);
    whole.buffer = buf.id();
    let mut all = vec![0u8; 48];
    buf.get_tensor(&whole, 0, &mut all).unwrap();
    assert_eq!(&all[0..3], &[0xEE; 3]);
    assert_eq!(&all[40..48], &[0xEE; 8]);
    buf.memset_tensor(&t, 0x11, 5, 9).unwrap();
    buf.get_tensor(&t, 0, &mut back).unwrap();
    assert_eq!(&back[5..14], &[0x11; 9]);
    assert_eq!(&back[..5], &data[..5]);
    // Device-side copy between buffers; within one buffer WebGPU has no
    // copy, so the plugin declines and the host copies.
    let other = buft.alloc_buffer(1024).expect("alloc");
    let mut a = backplane::TensorDesc::new(DType::F32, [16, 1, 1, 1]);
    a.buffer = buf.id();
    a.offset = 256;
    let mut b = a;
    b.buffer = other.id();
    b.offset = 512;
    buf.set_tensor(&a, 0, &f32_bytes(&[2.5; 16])).unwrap();
    let mut same = a;
    same.offset = 512;
    assert!(!buf.cpy_tensor(&a, &same).unwrap());
    assert!(other.cpy_tensor(&a, &b).unwrap());
    let mut out = vec![0u8; 64];
    other.get_tensor(&b, 0, &mut out).unwrap();
    assert_eq!(bytes_f32(&out), vec![2.5; 16]);
    // Out-of-range access is an error, not a crash.
    let mut far = a;
    far.offset = 1020;
    assert!(buf.set_tensor(&far, 0, &[0u8; 16]).is_err());
}

#[test]
fn add_with_broadcast_runs_and_in_place_is_detected() {
    let reg = webgpu();
    let Some(d) = device(&reg) else { return };
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[5, 3]).unwrap();
    let b = g.input("b", DType::F32, &[5, 1]).unwrap();
    let c = g.add(a, b).unwrap();
    let e = g.mul(c, c).unwrap();
    g.mark_output(e).unwrap();
    for node in g.compute_nodes() {
        let v = d.supports_op(g.tensors(), node.index());
        assert!(v.is_supported(), "{:?}", v.reason());
    }
    let (mut descs, buf) = place(&g, &d.buffer_type());
    // Make the product in place on c, as ggml's inplace ops are.
    descs[e.index()].offset = descs[c.index()].offset;
    let av: Vec<f32> = (0..15).map(|i| i as f32).collect();
    let bv = [1.0f32, -1.0, 0.5, 2.0, 0.0];
    buf.set_tensor(&descs[a.index()], 0, &f32_bytes(&av))
        .unwrap();
    buf.set_tensor(&descs[b.index()], 0, &f32_bytes(&bv))
        .unwrap();
    let s = d.init_backend("").unwrap();
    s.graph_compute(&descs).unwrap();
    let mut out = vec![0u8; 60];
    buf.get_tensor(&descs[e.index()], 0, &mut out).unwrap();
    let got = bytes_f32(&out);
    for i in 0..15 {
        let want = (av[i] + bv[i % 5]).powi(2);
        assert_eq!(got[i], want, "element {i}");
    }
}

#[test]
fn set_rows_out_of_range_index_is_an_error() {
    let reg = webgpu();
    let Some(d) = device(&reg) else { return };
    let mut g = Graph::new();
    let dst = g.input("dst", DType::F32, &[4, 3]).unwrap();
    let src = g.input("src", DType::F32, &[4, 2]).unwrap();
    let rows = g.input("rows", DType::I32, &[2]).unwrap();
    let out = g.set_rows(dst, src, rows).unwrap();
    g.mark_output(out).unwrap();
    let node = out.index();
    if !d.supports_op(g.tensors(), node).is_supported() {
        eprintln!(
            "SET_ROWS refused: {:?}",
            d.supports_op(g.tensors(), node).reason()
        );
        return;
    }
    let (descs, buf) = place(&g, &d.buffer_type());
    buf.set_tensor(&descs[dst.index()], 0, &f32_bytes(&[0.0; 12]))
        .unwrap();
    buf.set_tensor(&descs[src.index()], 0, &f32_bytes(&[1.0; 8]))
        .unwrap();
    let bad: Vec<u8> = [1i32, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
    buf.set_tensor(&descs[rows.index()], 0, &bad).unwrap();
    let s = d.init_backend("").unwrap();
    let err = s
        .graph_compute(&descs)
        .expect_err("index 7 of 3 rows must fail");
    let msg = err.to_string();
    assert!(msg.contains("SET_ROWS") && msg.contains('7'), "{msg}");
    // The stream still works: a good index succeeds afterwards.
    let good: Vec<u8> = [1i32, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
    buf.set_tensor(&descs[rows.index()], 0, &good).unwrap();
    s.graph_compute(&descs).unwrap();
    let mut back = vec![0u8; 48];
    buf.get_tensor(&descs[dst.index()], 0, &mut back).unwrap();
    assert_eq!(bytes_f32(&back), [[0.0f32; 4], [1.0; 4], [1.0; 4]].concat());
}

#[test]
fn tensor_over_the_binding_limit_is_refused_with_the_limit() {
    let reg = webgpu();
    let Some(d) = device(&reg) else { return };
    let mut g = Graph::new();
    // 4 GiB of f32: over every device's max storage binding.
    let a = g.input("a", DType::F32, &[1 << 20, 1024]).unwrap();
    let b = g.input("b", DType::F32, &[1 << 20, 1024]).unwrap();
    let c = g.add(a, b).unwrap();
    let v = d.supports_op(g.tensors(), c.index());
    let why = v.reason().unwrap_or_default();
    assert!(!v.is_supported(), "4 GiB tensor accepted");
    assert!(why.contains("max storage binding"), "{why}");
}

/// Env var telling the child test below that it runs without a driver.
const NO_DRIVER_CHILD: &str = "BACKPLANE_TEST_WEBGPU_NO_DRIVER";

#[test]
fn without_an_adapter_the_plugin_loads_with_zero_devices_and_a_reason() {
    if std::env::var_os(NO_DRIVER_CHILD).is_some() {
        let reg = webgpu();
        let b = reg.backend("webgpu").expect("loaded");
        assert!(b.devices.is_empty(), "a device without a driver?");
        let why = b.no_device_reason.as_deref().unwrap_or("");
        assert!(why.contains("no Vulkan, Metal or DX12 adapter"), "{why}");
        return;
    }
    // Run this same test in a child process whose Vulkan loader finds no
    // driver (the plugin enumerates adapters once per process).
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "without_an_adapter_the_plugin_loads_with_zero_devices_and_a_reason",
            "--nocapture",
        ])
        .env(NO_DRIVER_CHILD, "1")
        .env("VK_ICD_FILENAMES", "/nonexistent/backplane-no-driver.json")
        .env("VK_DRIVER_FILES", "/nonexistent/backplane-no-driver.json")
        .output()
        .expect("running the child test");
    assert!(
        out.status.success(),
        "child failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}

/// Env var telling the child test below that it runs with a shader
/// directory and `BACKPLANE_WEBGPU_CHECKS=off`.
const OUTSIDE_SHADER_CHILD: &str = "BACKPLANE_TEST_WEBGPU_OUTSIDE_SHADER";

/// A kernel whose WGSL comes from `BACKPLANE_SHADER_DIR` runs with runtime
/// checks even under `BACKPLANE_WEBGPU_CHECKS=off`, and the release plugin
/// (as `cargo xtask plugins` builds it) ignores `off` with a warning. The
/// replacement is the built-in `binary.wgsl` itself, so results stay exact.
#[test]
fn a_shader_dir_kernel_runs_checked_and_a_release_plugin_ignores_checks_off() {
    if std::env::var_os(OUTSIDE_SHADER_CHILD).is_some() {
        let reg = webgpu();
        let Some(d) = device(&reg) else { return };
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &[7]).unwrap();
        let b = g.input("b", DType::F32, &[7]).unwrap();
        let c = g.add(a, b).unwrap();
        g.mark_output(c).unwrap();
        let (descs, buf) = place(&g, &d.buffer_type());
        let av: Vec<f32> = (0..7).map(|i| i as f32).collect();
        let bv: Vec<f32> = (0..7).map(|i| 0.5 - i as f32 * 2.0).collect();
        buf.set_tensor(&descs[a.index()], 0, &f32_bytes(&av))
            .unwrap();
        buf.set_tensor(&descs[b.index()], 0, &f32_bytes(&bv))
            .unwrap();
        d.init_backend("").unwrap().graph_compute(&descs).unwrap();
        let mut out = vec![0u8; 28];
        buf.get_tensor(&descs[c.index()], 0, &mut out).unwrap();
        let want: Vec<f32> = av.iter().zip(&bv).map(|(x, y)| x + y).collect();
        assert_eq!(bytes_f32(&out), want);
        println!("child computed on {}", d.name());
        return;
    }
    let dir = backplane_tests::scratch_dir("webgpu-shader-dir");
    let built_in = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("shaders")
        .join("wgsl")
        .join("binary.wgsl");
    std::fs::copy(&built_in, dir.join("binary.wgsl")).expect("copying binary.wgsl");
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "a_shader_dir_kernel_runs_checked_and_a_release_plugin_ignores_checks_off",
            "--nocapture",
        ])
        .env(OUTSIDE_SHADER_CHILD, "1")
        .env("BACKPLANE_SHADER_DIR", &dir)
        .env("BACKPLANE_WEBGPU_CHECKS", "off")
        .output()
        .expect("running the child test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed:\n{stdout}\n{stderr}"
    );
    if !stdout.contains("child computed on") {
        eprintln!("no WebGPU device here; nothing compiled:\n{stderr}");
        return;
    }
    assert!(
        stderr.contains("BACKPLANE_WEBGPU_CHECKS=off ignored"),
        "the release plugin did not say it ignores off:\n{stderr}"
    );
    let line = stderr
        .lines()
        .find(|l| l.contains("binary.add") && l.contains("binary.wgsl from BACKPLANE_SHADER_DIR"))
        .unwrap_or_else(|| panic!("no report of the outside ADD kernel:\n{stderr}"));
    assert!(line.ends_with("runtime checks on"), "{line}");
    std::fs::remove_dir_all(&dir).expect("removing the scratch dir");
}

/// `W x` for `w` of `m` rows of `k` and `x` of `n` columns of `k`, as ggml
/// lays MUL_MAT out (dst[j][i] = row i of w . column j of x).
fn mul_mat_ref(w: &[f32], x: &[f32], k: usize, m: usize, n: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; m * n];
    for j in 0..n {
        for i in 0..m {
            let dot: f64 = (0..k)
                .map(|t| f64::from(w[i * k + t]) * f64::from(x[j * k + t]))
                .sum();
            out[j * m + i] = dot as f32;
        }
    }
    out
}

/// MUL_MATs that share src1 convert it once (the copy is kept for the
/// later nodes of the graph); a node that overwrites src1's bytes in
/// between makes the next MUL_MAT convert it again. K = 62 is not a
/// multiple of 4, so those MUL_MATs convert their activations, for the
/// mat-vec (n = 1) and the tiled kernel (n = 20); 128 x 64 x 64 takes the
/// cooperative-matrix kernel where the device has one, which converts
/// them to half (elsewhere the tiled kernel reads them in place).
#[test]
fn shared_activations_are_converted_once_and_again_after_a_write() {
    let reg = webgpu();
    let Some(d) = device(&reg) else { return };
    for (k, m1, m2, n) in [
        (62usize, 5usize, 3usize, 1usize),
        (62, 5, 3, 20),
        (64, 128, 144, 64),
    ] {
        let mut g = Graph::new();
        let w1 = g.input("w1", DType::F32, &[k as i64, m1 as i64]).unwrap();
        let w2 = g.input("w2", DType::F32, &[k as i64, m2 as i64]).unwrap();
        let x = g.input("x", DType::F32, &[k as i64, n as i64]).unwrap();
        let y1 = g.mul_mat(w1, x).unwrap();
        let y2 = g.mul_mat(w2, x).unwrap();
        let doubled = g.scale(x, 2.0).unwrap();
        let y3 = g.mul_mat(w1, x).unwrap();
        for t in [y1, y2, doubled, y3] {
            g.mark_output(t).unwrap();
            let v = d.supports_op(g.tensors(), t.index());
            assert!(v.is_supported(), "{:?}", v.reason());
        }
        let (mut descs, buf) = place(&g, &d.buffer_type());
        // SCALE writes over x in place, after y1 and y2 have read it and
        // before y3 does.
        descs[doubled.index()].offset = descs[x.index()].offset;
        let w1v: Vec<f32> = (0..k * m1).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
        let w2v: Vec<f32> = (0..k * m2).map(|i| ((i * 3) % 13) as f32 * 0.5).collect();
        let xv: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 9) as f32 - 4.0).collect();
        for (t, v) in [(w1, &w1v), (w2, &w2v), (x, &xv)] {
            buf.set_tensor(&descs[t.index()], 0, &f32_bytes(v)).unwrap();
        }
        let s = d.init_backend("").unwrap();
        s.graph_compute(&descs).unwrap();
        let read = |t: backplane::TensorId| {
            let mut out = vec![0u8; descs[t.index()].nbytes() as usize];
            buf.get_tensor(&descs[t.index()], 0, &mut out).unwrap();
            bytes_f32(&out)
        };
        let x2: Vec<f32> = xv.iter().map(|v| v * 2.0).collect();
        for (t, want, what) in [
            (y1, mul_mat_ref(&w1v, &xv, k, m1, n), "y1 = w1 x"),
            (y2, mul_mat_ref(&w2v, &xv, k, m2, n), "y2 = w2 x (x reused)"),
            (
                y3,
                mul_mat_ref(&w1v, &x2, k, m1, n),
                "y3 = w1 (2x) after SCALE",
            ),
        ] {
            let got = read(t);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-3 * w.abs().max(1.0),
                    "k = {k}, n = {n}, {what}: element {i} is {g}, want {w}"
                );
            }
        }
    }
}
