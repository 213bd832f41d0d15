//! Loopback figures for docs/remote.md: tensor upload and download bytes/s,
//! the round-trip overhead of a tiny graph, and of supports_op questions
//! (one, and a batch), against an in-process server over TCP (plain, TLS)
//! and a Unix socket.
//!
//! `cargo run --release -p backplane-remote --example loopback_bench`

use std::time::{Duration, Instant};

use backplane::registry::{Registry, RegistryOptions, SearchPath};
use backplane_abi::{DType, Op, TensorDesc};
use backplane_remote::auth::Identity;
use backplane_remote::{Client, ClientOptions, Limits, Listen, ServeOptions, Target, Tls};

const TOKEN: &str = "bench";

fn registry() -> Registry {
    let empty = std::env::temp_dir().join(format!("backplane-bench-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("temp dir");
    Registry::load(&RegistryOptions {
        search: SearchPath::only([empty]),
        builtin: Some(backplane::builtin_cpu()),
    })
}

fn measure(label: &str, client: &Client) {
    let n: usize = 64 << 20; // 64 MiB
    let t = TensorDesc::new(DType::I8, [n as i64, 1, 1, 1]);
    let buf = client.alloc(0, n as u64).expect("alloc");
    let t = TensorDesc {
        buffer: buf.handle,
        ..t
    };
    let data = vec![7u8; n];
    client.upload(&buf, &t, 0, &data).expect("warm-up upload");
    let reps = 4;
    let t0 = Instant::now();
    for _ in 0..reps {
        client.upload(&buf, &t, 0, &data).expect("upload");
    }
    let up = (reps * n) as f64 / t0.elapsed().as_secs_f64();
    let mut back = vec![0u8; n];
    let t0 = Instant::now();
    for _ in 0..reps {
        client.download(&buf, &t, 0, &mut back).expect("download");
    }
    let down = (reps * n) as f64 / t0.elapsed().as_secs_f64();
    assert_eq!(back, data);
    client.free(&buf).expect("free");

    // A one-node graph (ADD of 16 floats): the per-graph round trip.
    let small = client.alloc(0, 4096).expect("alloc");
    let mut g = vec![TensorDesc::new(DType::F32, [16, 1, 1, 1]); 3];
    g[2].op = Op::Add.code();
    g[2].src[0] = 0;
    g[2].src[1] = 1;
    for (i, d) in g.iter_mut().enumerate() {
        d.buffer = small.handle;
        d.offset = 256 * i as u64;
    }
    client
        .compute(0, &g, Some(small.session))
        .expect("first compute");
    let runs = 2000;
    let t0 = Instant::now();
    for _ in 0..runs {
        client.compute(0, &g, Some(small.session)).expect("compute");
    }
    let per_graph = t0.elapsed() / runs;
    // A decode-like step: a 64-byte input upload, then the graph. The
    // upload is queued and travels with the compute: still one round trip.
    let input = vec![1u8; 64];
    let t0 = Instant::now();
    for _ in 0..runs {
        client
            .upload(&small, &g[0], 0, &input)
            .expect("input upload");
        client.compute(0, &g, Some(small.session)).expect("compute");
    }
    let per_step = t0.elapsed() / runs;
    let (one, batch) = supports_op_round_trips(client);
    println!(
        "| {label} | {:.0} MB/s | {:.0} MB/s | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs |",
        up / 1e6,
        down / 1e6,
        per_graph.as_secs_f64() * 1e6,
        per_step.as_secs_f64() * 1e6,
        one.as_secs_f64() * 1e6,
        batch.as_secs_f64() * 1e6
    );
}

/// Signatures asked in one `SupportsOps` call by the bench.
const BATCH: usize = 64;

/// The time of one `SupportsOp` question, and of one `SupportsOps` call
/// carrying [`BATCH`] signatures (ADDs of different lengths).
fn supports_op_round_trips(client: &Client) -> (Duration, Duration) {
    let mut graph = Vec::new();
    let mut nodes = Vec::new();
    for k in 0..BATCH {
        let base = graph.len() as i32;
        let ne = [16 + k as i64, 1, 1, 1];
        let mut add = TensorDesc::new(DType::F32, ne);
        add.op = Op::Add.code();
        add.src[0] = base;
        add.src[1] = base + 1;
        graph.extend([
            TensorDesc::new(DType::F32, ne),
            TensorDesc::new(DType::F32, ne),
            add,
        ]);
        nodes.push(graph.len() as u32 - 1);
    }
    let runs = 500;
    let t0 = Instant::now();
    for _ in 0..runs {
        let v = client
            .supports_op(0, "", &graph[..3], 2)
            .expect("supports_op");
        assert!(v.is_ok(), "{v:?}");
    }
    let one = t0.elapsed() / runs;
    let t0 = Instant::now();
    for _ in 0..runs {
        let v = client
            .supports_ops(0, "", &graph, &nodes)
            .expect("supports_ops");
        assert!(v.iter().all(Result::is_ok), "{v:?}");
    }
    (one, t0.elapsed() / runs)
}

fn main() {
    let opts = ClientOptions {
        token: Some(TOKEN.into()),
        insecure: true,
        call_timeout: Duration::from_secs(120),
        ..ClientOptions::default()
    };
    println!(
        "| transport | upload | download | graph round trip | input upload + graph | supports_op, 1 signature | {BATCH} signatures in one call |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let plain = backplane_remote::start(
        registry(),
        ServeOptions {
            listen: Listen::Tcp("127.0.0.1:0".parse().expect("address")),
            tls: Tls::Insecure,
            token: Some(TOKEN.into()),
            limits: Limits::default(),
        },
    )
    .expect("server");
    measure(
        "TCP loopback, plain",
        &Client::new(Target::Tcp(plain.address.clone()), opts.clone()),
    );

    let identity = Identity::self_signed(&[]).expect("certificate");
    let ca = std::env::temp_dir().join(format!("backplane-bench-{}.pem", std::process::id()));
    std::fs::write(&ca, &identity.cert_pem).expect("writing the certificate");
    let tls = backplane_remote::start(
        registry(),
        ServeOptions {
            listen: Listen::Tcp("127.0.0.1:0".parse().expect("address")),
            tls: Tls::Identity {
                identity,
                client_ca: None,
            },
            token: Some(TOKEN.into()),
            limits: Limits::default(),
        },
    )
    .expect("server");
    let port = tls
        .address
        .rsplit_once(':')
        .map(|(_, p)| p.to_string())
        .unwrap_or_default();
    let tls_opts = ClientOptions {
        insecure: false,
        ca_file: Some(ca.clone()),
        ..opts.clone()
    };
    measure(
        "TCP loopback, TLS",
        &Client::new(Target::Tcp(format!("localhost:{port}")), tls_opts),
    );

    let sock = std::env::temp_dir().join(format!("backplane-bench-{}.sock", std::process::id()));
    let unix = backplane_remote::start(
        registry(),
        ServeOptions {
            listen: Listen::Unix(sock.clone()),
            tls: Tls::Insecure,
            token: None,
            limits: Limits::default(),
        },
    )
    .expect("server");
    measure(
        "Unix socket",
        &Client::new(Target::Unix(sock.clone()), opts),
    );
    drop((plain, tls, unix));
    let _ = std::fs::remove_file(ca);
    let _ = std::fs::remove_file(sock);
}
