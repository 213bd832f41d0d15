//! A server and a client in one process over loopback TCP: a graph runs on
//! the server's CPU and matches the result computed here; tokens, TLS and
//! Unix sockets.

mod common;

use std::time::Duration;

use backplane_remote::auth::Identity;
use backplane_remote::{Client, ClientOptions, Limits, Listen, ServeOptions, Target, Tls};
use common::*;

/// Runs the 4-tensor matmul graph through `client` on device 0; returns
/// the result and the reference.
fn run_matmul(client: &Client, k: usize, m: usize, n: usize) -> (Vec<f32>, Vec<f32>) {
    let probe = matmul_graph(k as i64, m as i64, n as i64, 1);
    let buf = client.alloc(0, graph_bytes(&probe)).unwrap();
    let g = matmul_graph(k as i64, m as i64, n as i64, buf.handle);
    let a = values(k * m, 1);
    let b = values(k * n, 2);
    client.upload(&buf, &g[0], 0, &bytes(&a)).unwrap();
    client.upload(&buf, &g[1], 0, &bytes(&b)).unwrap();
    client.compute(0, &g, Some(buf.session)).unwrap();
    let mut out = vec![0u8; m * n * 4];
    client.download(&buf, &g[3], 0, &mut out).unwrap();
    (floats(&out), expected(&a, &b, k, m, n))
}

#[test]
fn matmul_graph_on_the_remote_cpu_equals_the_local_reference() {
    let server = loopback_server(Limits::default());
    let client = client(&server);
    let (_, hello) = client.hello().unwrap();
    assert_eq!(hello.devices.len(), 1);
    assert_eq!(hello.devices[0].backend, "cpu");
    let (got, want) = run_matmul(&client, 64, 24, 8);
    assert!(max_rel_err(&got, &want) < 1e-5, "{got:?} vs {want:?}");
    // The same graph again is named by hash only, and still right.
    let (got2, want2) = run_matmul(&client, 64, 24, 8);
    assert_eq!(want, want2);
    assert!(max_rel_err(&got2, &want2) < 1e-5);
}

#[test]
fn upload_larger_than_a_chunk_round_trips_byte_for_byte() {
    let limits = Limits {
        max_chunk_bytes: 4096,
        ..Limits::default()
    };
    let server = loopback_server(limits);
    let client = client(&server);
    let n = 40_000usize; // 160 kB: 40 chunks of 4 KiB
    let t = backplane_abi::TensorDesc::new(backplane_abi::DType::F32, [n as i64, 1, 1, 1]);
    let buf = client.alloc(0, t.nbytes()).unwrap();
    let t = backplane_abi::TensorDesc {
        buffer: buf.handle,
        ..t
    };
    let data = bytes(&values(n, 7));
    client.upload(&buf, &t, 0, &data).unwrap();
    let mut back = vec![0u8; data.len()];
    client.download(&buf, &t, 0, &mut back).unwrap();
    assert_eq!(back, data);
    // A part in the middle.
    let mut part = vec![0u8; 1000];
    client.download(&buf, &t, 5000, &mut part).unwrap();
    assert_eq!(part, data[5000..6000]);
}

#[test]
fn missing_or_wrong_token_is_refused_and_nothing_is_served() {
    let server = loopback_server(Limits::default());
    let none = Client::new(Target::Tcp(server.address.clone()), insecure(None));
    let err = none.hello().unwrap_err();
    assert!(err.to_string().contains("no token"), "{err}");
    assert!(err.to_string().contains(&server.address), "{err}");
    let wrong = Client::new(Target::Tcp(server.address.clone()), insecure(Some("guess")));
    let err = wrong.alloc(0, 16).unwrap_err();
    assert!(err.to_string().contains("wrong token"), "{err}");
}

#[test]
fn tcp_without_credentials_and_insecure_off_loopback_do_not_start() {
    let err = backplane_remote::start(
        cpu_registry(),
        ServeOptions {
            listen: Listen::Tcp("127.0.0.1:0".parse().unwrap()),
            tls: Tls::Insecure,
            token: None,
            limits: Limits::default(),
        },
    )
    .err()
    .unwrap();
    assert!(err.contains("needs credentials"), "{err}");
    let err = backplane_remote::start(
        cpu_registry(),
        ServeOptions {
            listen: Listen::Tcp("0.0.0.0:0".parse().unwrap()),
            tls: Tls::Insecure,
            token: Some(TOKEN.into()),
            limits: Limits::default(),
        },
    )
    .err()
    .unwrap();
    assert!(err.contains("only on loopback"), "{err}");
}

#[test]
fn tls_with_a_self_signed_certificate_serves_clients_that_trust_it() {
    let identity = Identity::self_signed(&[]).unwrap();
    let server = backplane_remote::start(
        cpu_registry(),
        ServeOptions {
            listen: Listen::Tcp("127.0.0.1:0".parse().unwrap()),
            tls: Tls::Identity {
                identity: identity.clone(),
                client_ca: None,
            },
            token: Some(TOKEN.into()),
            limits: Limits::default(),
        },
    )
    .unwrap();
    assert_eq!(
        server.fingerprint.as_deref(),
        Some(identity.fingerprint().as_str())
    );
    let ca = std::env::temp_dir().join(format!(
        "backplane-remote-test-ca-{}.pem",
        std::process::id()
    ));
    std::fs::write(&ca, &identity.cert_pem).unwrap();
    let port = server.address.rsplit_once(':').unwrap().1;
    let trusting = Client::new(
        Target::Tcp(format!("localhost:{port}")),
        ClientOptions {
            token: Some(TOKEN.into()),
            ca_file: Some(ca.clone()),
            call_timeout: Duration::from_secs(20),
            ..ClientOptions::default()
        },
    );
    let (got, want) = run_matmul(&trusting, 32, 8, 4);
    assert!(max_rel_err(&got, &want) < 1e-5);
    // Plain TCP to a TLS server fails, and names the server.
    let plain = Client::new(Target::Tcp(server.address.clone()), insecure(Some(TOKEN)));
    let err = plain.hello().unwrap_err();
    assert!(err.to_string().contains(&server.address), "{err}");
    // A client that does not trust the certificate is refused.
    let untrusting = Client::new(
        Target::Tcp(format!("localhost:{port}")),
        ClientOptions {
            token: Some(TOKEN.into()),
            connect_timeout: Duration::from_secs(2),
            ..ClientOptions::default()
        },
    );
    assert!(untrusting.hello().is_err());
    let _ = std::fs::remove_file(ca);
}

#[test]
fn unix_socket_is_private_and_serves_without_a_token() {
    use std::os::unix::fs::PermissionsExt;
    let path =
        std::env::temp_dir().join(format!("backplane-remote-test-{}.sock", std::process::id()));
    let server = backplane_remote::start(
        cpu_registry(),
        ServeOptions {
            listen: Listen::Unix(path.clone()),
            tls: Tls::Insecure,
            token: None,
            limits: Limits::default(),
        },
    )
    .unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let client = Client::new(Target::Unix(path.clone()), insecure(None));
    let (got, want) = run_matmul(&client, 16, 4, 3);
    assert!(max_rel_err(&got, &want) < 1e-5);
    drop(server);
    let _ = std::fs::remove_file(path);
}

#[test]
fn after_a_server_restart_the_client_reconnects_and_old_buffers_report_they_were_lost() {
    let path = std::env::temp_dir().join(format!(
        "backplane-remote-restart-{}.sock",
        std::process::id()
    ));
    let serve = || {
        backplane_remote::start(
            cpu_registry(),
            ServeOptions {
                listen: Listen::Unix(path.clone()),
                tls: Tls::Insecure,
                token: None,
                limits: Limits::default(),
            },
        )
        .unwrap()
    };
    let first = serve();
    let client = Client::new(Target::Unix(path.clone()), insecure(None));
    let old = client.alloc(0, 64).unwrap();
    drop(first);
    // The server is gone: an error naming it.
    let err = client.alloc(0, 64).unwrap_err();
    assert!(err.is_unreachable(), "{err}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    let _second = serve();
    // Reconnects once the backoff allows (bounded wait).
    let t0 = std::time::Instant::now();
    let fresh = loop {
        match client.alloc(0, 64) {
            Ok(b) => break b,
            Err(e) if t0.elapsed() > Duration::from_secs(10) => panic!("no reconnect: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    assert_ne!(fresh.session, old.session);
    let t = backplane_abi::TensorDesc {
        buffer: old.handle,
        ..backplane_abi::TensorDesc::new(backplane_abi::DType::F32, [4, 1, 1, 1])
    };
    let err = client.upload(&old, &t, 0, &[0u8; 16]).unwrap_err();
    assert!(err.to_string().contains("was lost"), "{err}");
    // The stale buffer did not cost the new connection.
    assert_eq!(client.session(), Some(fresh.session));
    let _ = std::fs::remove_file(&path);
}
