//! Remote devices over gRPC: the wire protocol ([`pb`], [`codec`]), the
//! server behind `backplane serve` ([`server`], [`listen`]), its bounds
//! ([`limits`]), credentials ([`auth`]), the buffer operations a client
//! queues ([`queue`] on the client, [`ops`] on the server), weights the
//! server holds in its own GGUF files ([`store`]) and the blocking client
//! the `remote` plugin uses ([`client`]).

pub mod auth;
pub mod client;
pub mod codec;
pub mod limits;
pub mod listen;
pub mod ops;
pub mod queue;
pub mod server;
pub mod session;
pub mod store;

/// Generated protocol messages and services (`proto/backplane.proto`).
#[allow(missing_docs, clippy::all)]
pub mod pb {
    tonic::include_proto!("backplane.remote.v1");
}

pub use client::{Client, ClientOptions, RemoteBuffer, RemoteError, Target};
pub use limits::Limits;
pub use listen::{Listen, RunningServer, ServeOptions, Tls, index_models, start, start_with_store};

/// An error and its sources, joined with ": ".
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}
