//! Helpers shared by the loopback tests: a server over the built-in CPU
//! backend and small graphs with known results.

#![allow(dead_code)]

use std::time::Duration;

use backplane::registry::{Registry, RegistryOptions, SearchPath};
use backplane_abi::{DType, Op, TensorDesc};
use backplane_remote::{
    Client, ClientOptions, Limits, Listen, RunningServer, ServeOptions, Target, Tls,
};

/// The token the test servers want.
pub const TOKEN: &str = "test-token-1234";

/// A registry with only the built-in CPU backend (no plugin files).
pub fn cpu_registry() -> Registry {
    let empty = std::env::temp_dir().join(format!(
        "backplane-remote-test-empty-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&empty).unwrap();
    Registry::load(&RegistryOptions {
        search: SearchPath::only([empty]),
        builtin: Some(backplane::builtin_cpu()),
    })
}

/// A plain-TCP loopback server with [`TOKEN`] and the given limits.
pub fn loopback_server(limits: Limits) -> RunningServer {
    backplane_remote::start(
        cpu_registry(),
        ServeOptions {
            listen: Listen::Tcp("127.0.0.1:0".parse().unwrap()),
            tls: Tls::Insecure,
            token: Some(TOKEN.into()),
            limits,
        },
    )
    .unwrap()
}

/// Client options for a loopback server.
pub fn insecure(token: Option<&str>) -> ClientOptions {
    ClientOptions {
        token: token.map(str::to_string),
        insecure: true,
        call_timeout: Duration::from_secs(20),
        connect_timeout: Duration::from_secs(2),
        max_backoff: Duration::from_millis(200),
        ..ClientOptions::default()
    }
}

/// A client of `server` with the right token.
pub fn client(server: &RunningServer) -> Client {
    Client::new(Target::Tcp(server.address.clone()), insecure(Some(TOKEN)))
}

/// Deterministic test values.
pub fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 16) % 2001) as f32 / 1000.0
                - 1.0
        })
        .collect()
}

/// `[a (k x m), b (k x n), c = mul_mat(a, b) (m x n), d = c + c]`, each in
/// `buffer` at consecutive 256-byte aligned offsets.
pub fn matmul_graph(k: i64, m: i64, n: i64, buffer: u64) -> Vec<TensorDesc> {
    let a = TensorDesc::new(DType::F32, [k, m, 1, 1]);
    let b = TensorDesc::new(DType::F32, [k, n, 1, 1]);
    let mut c = TensorDesc::new(DType::F32, [m, n, 1, 1]);
    c.op = Op::MulMat.code();
    c.src[0] = 0;
    c.src[1] = 1;
    let mut d = TensorDesc::new(DType::F32, [m, n, 1, 1]);
    d.op = Op::Add.code();
    d.src[0] = 2;
    d.src[1] = 2;
    let mut off = 0;
    let mut g = vec![a, b, c, d];
    for t in g.iter_mut() {
        t.buffer = buffer;
        t.offset = off;
        off += t.nbytes().next_multiple_of(256);
    }
    g
}

/// Bytes a [`matmul_graph`] needs.
pub fn graph_bytes(g: &[TensorDesc]) -> u64 {
    g.iter().map(|t| t.offset + t.nbytes()).max().unwrap_or(0)
}

/// `2 * a^T b` computed here: `out[j*m + i] = 2 * sum_p a[i*k + p] * b[j*k + p]`.
pub fn expected(a: &[f32], b: &[f32], k: usize, m: usize, n: usize) -> Vec<f32> {
    let mut out = vec![0f32; m * n];
    for j in 0..n {
        for i in 0..m {
            let s: f64 = (0..k)
                .map(|p| a[i * k + p] as f64 * b[j * k + p] as f64)
                .sum();
            out[j * m + i] = 2.0 * s as f32;
        }
    }
    out
}

/// f32 values from bytes.
pub fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Bytes of f32 values.
pub fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Largest |x - y| / max(1, |y|).
pub fn max_rel_err(x: &[f32], y: &[f32]) -> f32 {
    assert_eq!(x.len(), y.len());
    x.iter()
        .zip(y)
        .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
        .fold(0.0, f32::max)
}
