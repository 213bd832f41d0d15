//! A server device's extra buffer types (the CPU's `cpu_repack` weight
//! layout) over the wire: reported at `Open`, allocated by name, written
//! and read in ggml's layout through the server plugin's own conversion
//! (also when the model store fills them), asked which ops read them, and
//! refused when a client names a type or size the device does not have.

mod common;

use backplane_abi::{DType, Op, TensorDesc};
use backplane_gguf::GgufWriter;
use backplane_remote::store::ModelStore;
use backplane_remote::{Client, Limits, Listen, ServeOptions, Target, Tls};
use common::*;
use tonic::Code;

/// The CPU's repacked weight layout.
const REPACK: &str = "cpu_repack";

/// q4_0 weights of `rows` rows of `k` values: each block a small f16
/// scale and pseudo-random nibbles (finite results when computed).
fn q4_0(k: usize, rows: usize, seed: u32) -> Vec<u8> {
    let blocks = k / 32 * rows;
    let mut state = seed.wrapping_mul(2654435761) | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state
    };
    let mut out = Vec::with_capacity(blocks * 18);
    for _ in 0..blocks {
        // f16 scales 0.0156 .. 0.0625.
        let scale: u16 = 0x2400 + (next() % 0x0800) as u16;
        out.extend_from_slice(&scale.to_le_bytes());
        out.extend((0..16).map(|_| next() as u8));
    }
    out
}

/// Whether the server's CPU offers the repacked layout (only where its
/// repacked kernels exist); says so when it does not.
fn offers_repack(client: &Client) -> bool {
    let (_, hello) = client.hello().unwrap();
    let names: Vec<&str> = hello.devices[0]
        .extra_buffer_types
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    if names.contains(&REPACK) {
        true
    } else {
        eprintln!("the server's CPU has no repacked kernels (extra types {names:?}); skipped");
        false
    }
}

/// `[w q4_0 (k x m), x f32 (k x 1), y = mul_mat(w, x)]`: `w` at offset 0
/// of `weights`, `x` and `y` in `io`.
fn mat_vec(k: i64, m: i64, weights: u64, io: u64) -> Vec<TensorDesc> {
    let mut w = TensorDesc::new(DType::Q4_0, [k, m, 1, 1]);
    w.buffer = weights;
    let mut x = TensorDesc::new(DType::F32, [k, 1, 1, 1]);
    x.buffer = io;
    let mut y = TensorDesc::new(DType::F32, [m, 1, 1, 1]);
    y.op = Op::MulMat.code();
    y.src[0] = 0;
    y.src[1] = 1;
    y.buffer = io;
    y.offset = x.nbytes().next_multiple_of(256);
    vec![w, x, y]
}

/// `y` of [`mat_vec`] computed on the server with `w`'s bytes in a
/// buffer of `buffer_type` ("" for the device's own).
fn compute_mat_vec(
    client: &Client,
    buffer_type: &str,
    w: &[u8],
    x: &[f32],
    k: i64,
    m: i64,
) -> Vec<f32> {
    let probe = mat_vec(k, m, 0, 0);
    let wb = client.alloc_in(0, buffer_type, probe[0].nbytes()).unwrap();
    let io = client
        .alloc(0, probe[2].offset + probe[2].nbytes())
        .unwrap();
    let g = mat_vec(k, m, wb.handle, io.handle);
    client.upload(&wb, &g[0], 0, w).unwrap();
    client.upload(&io, &g[1], 0, &bytes(x)).unwrap();
    client.compute(0, &g, Some(wb.session)).unwrap();
    let mut out = vec![0u8; g[2].nbytes() as usize];
    client.download(&io, &g[2], 0, &mut out).unwrap();
    client.free(&wb).unwrap();
    client.free(&io).unwrap();
    floats(&out)
}

#[test]
fn the_server_reports_its_cpu_weight_layout_with_alignment_and_size() {
    let server = loopback_server(Limits::default());
    let client = client(&server);
    if !offers_repack(&client) {
        return;
    }
    let (_, hello) = client.hello().unwrap();
    let e = &hello.devices[0].extra_buffer_types[0];
    assert_eq!(e.name, REPACK);
    assert!(e.alignment.is_power_of_two(), "{e:?}");
    assert!(e.max_size > 0, "{e:?}");
}

#[test]
fn weights_read_back_from_a_repacked_buffer_equal_what_was_written() {
    // Chunks of 4 KiB: a streamed upload and download cross the layout's
    // row groups in the middle, each part converted on its own.
    let limits = Limits {
        max_chunk_bytes: 4096,
        ..Limits::default()
    };
    let server = loopback_server(limits);
    let client = client(&server);
    if !offers_repack(&client) {
        return;
    }
    let (k, m) = (1024usize, 64usize); // 36 KiB: streamed, not queued
    let w = q4_0(k, m, 3);
    let t = TensorDesc::new(DType::Q4_0, [k as i64, m as i64, 1, 1]);
    let buf = client.alloc_in(0, REPACK, t.nbytes()).unwrap();
    let t = TensorDesc {
        buffer: buf.handle,
        ..t
    };
    client.upload(&buf, &t, 0, &w).unwrap();
    let mut back = vec![0u8; w.len()];
    client.download(&buf, &t, 0, &mut back).unwrap();
    assert!(back == w, "whole tensor read back differs");
    // A range inside, not on group boundaries.
    let (lo, hi) = (1000usize, 20_000usize);
    let mut part = vec![0u8; hi - lo];
    client.download(&buf, &t, lo as u64, &mut part).unwrap();
    assert!(part == w[lo..hi], "range {lo}..{hi} read back differs");
    // A small write (queued) into the middle, read back with its
    // neighbours unchanged.
    let patch = vec![0x11u8; 100];
    client.upload(&buf, &t, 5000, &patch).unwrap();
    client.download(&buf, &t, 0, &mut back).unwrap();
    let mut want = w.clone();
    want[5000..5100].copy_from_slice(&patch);
    assert!(back == want, "patched tensor read back differs");
}

#[test]
fn a_mat_vec_on_repacked_weights_gives_the_result_of_ggml_layout() {
    let server = loopback_server(Limits::default());
    let client = client(&server);
    if !offers_repack(&client) {
        return;
    }
    let (k, m) = (256i64, 16i64);
    let w = q4_0(k as usize, m as usize, 9);
    let x = values(k as usize, 4);
    let plain = compute_mat_vec(&client, "", &w, &x, k, m);
    let packed = compute_mat_vec(&client, REPACK, &w, &x, k, m);
    assert!(plain.iter().all(|v| v.is_finite()) && plain.iter().any(|&v| v != 0.0));
    // One column: the repacked kernel sums in the ggml-layout order.
    assert_eq!(packed, plain);
}

#[test]
fn the_server_says_which_ops_read_weights_in_its_layout() {
    let server = loopback_server(Limits::default());
    let client = client(&server);
    if !offers_repack(&client) {
        return;
    }
    let g = mat_vec(256, 16, 0, 0);
    assert_eq!(client.supports_op(0, REPACK, &g, 2).unwrap(), Ok(()));
    // ADD of the same weights: the device runs it, not on repacked bytes.
    let mut add = g.clone();
    add[2] = TensorDesc::new(DType::F32, [256, 16, 1, 1]);
    add[1] = TensorDesc::new(DType::F32, [256, 16, 1, 1]);
    add[0] = TensorDesc::new(DType::F32, [256, 16, 1, 1]);
    add[2].op = Op::Add.code();
    add[2].src[0] = 0;
    add[2].src[1] = 1;
    assert_eq!(client.supports_op(0, "", &add, 2).unwrap(), Ok(()));
    let no = client.supports_op(0, REPACK, &add, 2).unwrap();
    assert!(no.as_ref().is_err_and(|r| r.contains(REPACK)), "{no:?}");
    // Both in one batch, in order.
    let mut both = g.clone();
    let base = both.len() as i32;
    both.extend(add.iter().map(|d| {
        let mut d = *d;
        d.src
            .iter_mut()
            .filter(|s| **s >= 0)
            .for_each(|s| *s += base);
        d
    }));
    let v = client.supports_ops(0, REPACK, &both, &[2, 5]).unwrap();
    assert!(v[0].is_ok() && v[1].is_err(), "{v:?}");
}

#[test]
fn unknown_buffer_types_wrong_devices_and_sizes_are_refused_and_the_server_goes_on() {
    let limits = Limits {
        max_session_bytes: 1 << 20,
        ..Limits::default()
    };
    let server = loopback_server(limits);
    let client = client(&server);
    let (_, hello) = client.hello().unwrap();
    let err = client.alloc_in(0, "gpu_tiles", 64).unwrap_err();
    assert!(err.is_bad_input(), "{err}");
    assert!(
        err.to_string().contains("no extra buffer type 'gpu_tiles'"),
        "{err}"
    );
    let long = "x".repeat(10_000);
    let err = client.alloc_in(0, &long, 64).unwrap_err();
    assert!(
        err.to_string().contains("buffer type name of 10000 bytes"),
        "{err}"
    );
    let wrong = hello.devices.len() as u32;
    let err = client.alloc_in(wrong, REPACK, 64).unwrap_err();
    assert!(
        err.to_string().contains(&format!("no device {wrong}")),
        "{err}"
    );
    let g = mat_vec(256, 16, 0, 0);
    let err = client.supports_op(0, "gpu_tiles", &g, 2).unwrap_err();
    assert!(err.to_string().contains("gpu_tiles"), "{err}");
    let err = client.supports_ops(0, "gpu_tiles", &g, &[2]).unwrap_err();
    assert!(err.is_bad_input(), "{err}");
    if offers_repack(&client) {
        let err = client.alloc_in(0, REPACK, 2 << 20).unwrap_err();
        assert_eq!(err.code, Code::ResourceExhausted as i32, "{err}");
        let err = client.alloc_in(0, REPACK, u64::MAX).unwrap_err();
        assert_eq!(err.code, Code::ResourceExhausted as i32, "{err}");
        // A tensor that is not whole row groups of the layout: the plugin's
        // own refusal comes back as an error, not a crash.
        let buf = client.alloc_in(0, REPACK, 4096).unwrap();
        let odd = TensorDesc {
            buffer: buf.handle,
            ..TensorDesc::new(DType::Q4_0, [32, 3, 1, 1])
        };
        let err = client
            .upload(&buf, &odd, 0, &[0u8; 54])
            .and_then(|()| client.flush());
        assert!(
            err.is_err(),
            "an upload of 3 rows into the repacked layout was taken"
        );
    }
    // Still serving.
    let b = client.alloc(0, 256).unwrap();
    client.clear(&b, 1).unwrap();
    client.flush().unwrap();
}

#[test]
fn the_model_store_fills_a_repacked_buffer_through_its_conversion() {
    let dir = std::env::temp_dir().join(format!(
        "backplane-remote-store-repack-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (k, m) = (2048usize, 64usize); // 72 KiB: at least the store's minimum
    let w = q4_0(k, m, 17);
    let mut gguf = GgufWriter::new();
    gguf.set("general.architecture", "test");
    gguf.add_tensor("blk.0.ffn_up.weight", DType::Q4_0, &[k as i64, m as i64])
        .unwrap();
    let mut s = gguf
        .begin(std::io::BufWriter::new(
            std::fs::File::create(dir.join("w.gguf")).unwrap(),
        ))
        .unwrap();
    s.write_tensor("blk.0.ffn_up.weight", &w).unwrap();
    s.finish().unwrap();
    let store = ModelStore::index(std::slice::from_ref(&dir)).unwrap();
    let server = backplane_remote::start_with_store(
        cpu_registry(),
        ServeOptions {
            listen: Listen::Tcp("127.0.0.1:0".parse().unwrap()),
            tls: Tls::Insecure,
            token: Some(TOKEN.into()),
            limits: Limits::default(),
        },
        Some(store),
    )
    .unwrap();
    let client = Client::new(Target::Tcp(server.address.clone()), insecure(Some(TOKEN)));
    if !offers_repack(&client) {
        return;
    }
    let t = TensorDesc::new(DType::Q4_0, [k as i64, m as i64, 1, 1]);
    let buf = client.alloc_in(0, REPACK, t.nbytes()).unwrap();
    let t = TensorDesc {
        buffer: buf.handle,
        ..t
    };
    client.upload(&buf, &t, 0, &w).unwrap();
    let stats = client.transfer_stats();
    assert_eq!(stats.stored_bytes, w.len() as u64, "{stats:?}");
    assert_eq!(stats.sent_bytes, 0, "{stats:?}");
    // Read back in ggml's layout: the fill went through the plugin's
    // set_tensor (a raw copy would read back scrambled).
    let mut back = vec![0u8; w.len()];
    client.download(&buf, &t, 0, &mut back).unwrap();
    assert!(
        back == w,
        "stored fill of a repacked buffer reads back differently"
    );
    // And it computes as the same weights in ggml's layout.
    let x = values(k, 2);
    let plain = compute_mat_vec(&client, "", &w, &x, k as i64, m as i64);
    let io = client.alloc(0, 64 * 1024).unwrap();
    let g = mat_vec(k as i64, m as i64, buf.handle, io.handle);
    client.upload(&io, &g[1], 0, &bytes(&x)).unwrap();
    client.compute(0, &g, Some(buf.session)).unwrap();
    let mut out = vec![0u8; g[2].nbytes() as usize];
    client.download(&io, &g[2], 0, &mut out).unwrap();
    assert_eq!(floats(&out), plain);
}
