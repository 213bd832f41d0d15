//! Client certificates: a server started with a client CA serves a client
//! that presents a certificate that CA signed, and refuses one without a
//! certificate or with one another CA signed.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use backplane_remote::auth::Identity;
use backplane_remote::{Client, ClientOptions, Limits, Listen, ServeOptions, Target, Tls};
use common::*;

fn write(dir: &std::path::Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn client_ca_server_serves_a_signed_client_and_refuses_one_without_a_certificate() {
    let dir = std::env::temp_dir().join(format!("backplane-remote-mtls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let server_id = Identity::self_signed(&[]).unwrap();
    let (ca, clients) = Identity::client_ca("backplane test CA", 1).unwrap();
    let (_, strangers) = Identity::client_ca("another CA", 1).unwrap();
    // No token: the client certificate is the credential.
    let server = backplane_remote::start(
        cpu_registry(),
        ServeOptions {
            listen: Listen::Tcp("127.0.0.1:0".parse().unwrap()),
            tls: Tls::Identity {
                identity: server_id.clone(),
                client_ca: Some(ca.cert_pem.clone()),
            },
            token: None,
            limits: Limits::default(),
        },
    )
    .unwrap();
    let trust = write(&dir, "server.pem", &server_id.cert_pem);
    let port = server.address.rsplit_once(':').unwrap().1;
    let with = |identity: Option<&Identity>, tag: &str| {
        let client_identity = identity.map(|id| {
            (
                write(&dir, &format!("{tag}.pem"), &id.cert_pem),
                write(&dir, &format!("{tag}.key"), &id.key_pem),
            )
        });
        Client::new(
            Target::Tcp(format!("localhost:{port}")),
            ClientOptions {
                ca_file: Some(trust.clone()),
                client_identity,
                call_timeout: Duration::from_secs(20),
                connect_timeout: Duration::from_secs(3),
                max_backoff: Duration::from_millis(100),
                ..ClientOptions::default()
            },
        )
    };

    // Signed by the server's client CA: served, and computes.
    let signed = with(Some(&clients[0]), "signed");
    let (_, hello) = signed.hello().unwrap();
    assert_eq!(hello.devices.len(), 1);
    let probe = matmul_graph(16, 4, 2, 1);
    let buf = signed.alloc(0, graph_bytes(&probe)).unwrap();
    let g = matmul_graph(16, 4, 2, buf.handle);
    let (a, b) = (values(64, 1), values(32, 2));
    signed.upload(&buf, &g[0], 0, &bytes(&a)).unwrap();
    signed.upload(&buf, &g[1], 0, &bytes(&b)).unwrap();
    signed.compute(0, &g, Some(buf.session)).unwrap();
    let mut out = vec![0u8; 4 * 2 * 4];
    signed.download(&buf, &g[3], 0, &mut out).unwrap();
    assert!(max_rel_err(&floats(&out), &expected(&a, &b, 16, 4, 2)) < 1e-5);

    // No certificate: the TLS handshake is refused, and the error names
    // the server.
    let bare = with(None, "bare");
    let err = bare.hello().unwrap_err();
    assert!(
        err.to_string().contains(&format!("localhost:{port}")),
        "{err}"
    );
    assert!(err.is_unreachable(), "{err}");

    // A certificate from another CA: refused too.
    let stranger = with(Some(&strangers[0]), "stranger");
    let err = stranger.hello().unwrap_err();
    assert!(err.is_unreachable(), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn client_ca_alone_is_enough_to_serve_tcp_without_a_token() {
    let (ca, _) = Identity::client_ca("backplane test CA", 0).unwrap();
    let started = backplane_remote::start(
        cpu_registry(),
        ServeOptions {
            listen: Listen::Tcp("127.0.0.1:0".parse().unwrap()),
            tls: Tls::Identity {
                identity: Identity::self_signed(&[]).unwrap(),
                client_ca: Some(ca.cert_pem),
            },
            token: None,
            limits: Limits::default(),
        },
    );
    assert!(started.is_ok(), "{:?}", started.err());
}
