//! A client sending garbage: every bad shape, offset, size, handle and
//! graph gets an error status naming the problem, and the server keeps
//! serving well-formed requests afterwards.

mod common;

use backplane_abi::{DType, Op, TensorDesc};
use backplane_remote::Limits;
use backplane_remote::auth::{SESSION_HEADER, TOKEN_HEADER};
use backplane_remote::codec::{encode_desc, encode_graph, graph_hash};
use backplane_remote::pb::{self, remote_client::RemoteClient};
use common::*;
use tonic::Code;
use tonic::transport::Channel;

struct Raw {
    grpc: RemoteClient<Channel>,
    session: u64,
}

impl Raw {
    fn req<T>(&self, msg: T) -> tonic::Request<T> {
        req_for(self.session, msg)
    }
}

/// A request with the token and `session`.
fn req_for<T>(session: u64, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut()
        .insert(TOKEN_HEADER, format!("Bearer {TOKEN}").parse().unwrap());
    r.metadata_mut().insert(SESSION_HEADER, session.into());
    r
}

async fn connect(address: &str) -> Raw {
    let ch = Channel::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut raw = Raw {
        grpc: RemoteClient::new(ch),
        session: 0,
    };
    let open = raw.req(pb::OpenRequest {
        client: "hostile".into(),
    });
    raw.session = raw.grpc.open(open).await.unwrap().into_inner().session;
    raw
}

fn expect_err<T: std::fmt::Debug>(r: Result<T, tonic::Status>, code: Code, words: &str) {
    let s = r.expect_err("the server accepted garbage");
    assert_eq!(s.code(), code, "{s:?}");
    assert!(
        s.message().contains(words),
        "message {:?} lacks {words:?}",
        s.message()
    );
}

fn f32_tensor(n: i64, buffer: u64) -> TensorDesc {
    TensorDesc {
        buffer,
        ..TensorDesc::new(DType::F32, [n, 1, 1, 1])
    }
}

#[test]
fn garbage_from_a_client_gets_errors_and_the_server_keeps_serving() {
    let limits = Limits {
        max_session_bytes: 1 << 20,
        max_graph_nodes: 8,
        ..Limits::default()
    };
    let server = loopback_server(limits);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = connect(&server.address).await;
        // Huge and over-budget allocations.
        let r = c.req(pb::AllocRequest {
            device: 0,
            size: u64::MAX,
            ..Default::default()
        });
        expect_err(c.grpc.alloc(r).await, Code::ResourceExhausted, "may hold");
        let r = c.req(pb::AllocRequest {
            device: 7,
            size: 16,
            ..Default::default()
        });
        expect_err(c.grpc.alloc(r).await, Code::InvalidArgument, "no device 7");
        let r = c.req(pb::AllocRequest {
            device: 0,
            size: 1024,
            ..Default::default()
        });
        let h = c.grpc.alloc(r).await.unwrap().into_inner().handle;
        // Out-of-range offsets, bad shapes, unknown handles, ragged records.
        let t = f32_tensor(256, h);
        let session = c.session;
        let up = move |offset: u64, data: Vec<u8>, tensor: Vec<u8>, handle: u64| {
            req_for(
                session,
                tokio_stream::iter(vec![pb::UploadChunk {
                    handle,
                    tensor,
                    offset,
                    data,
                }]),
            )
        };
        let r = up(1020, vec![0; 8], encode_desc(&t), h);
        expect_err(
            c.grpc.upload(r).await,
            Code::InvalidArgument,
            "outside the tensor",
        );
        let r = up(0, vec![0; 8], encode_desc(&f32_tensor(257, h)), h);
        expect_err(
            c.grpc.upload(r).await,
            Code::InvalidArgument,
            "outside buffer",
        );
        let r = up(0, vec![0; 8], encode_desc(&f32_tensor(-5, h)), h);
        expect_err(c.grpc.upload(r).await, Code::InvalidArgument, "ne[0] = -5");
        let r = up(0, vec![0; 8], encode_desc(&f32_tensor(4, 99)), 99);
        expect_err(
            c.grpc.upload(r).await,
            Code::InvalidArgument,
            "unknown buffer handle 99",
        );
        let r = up(0, vec![0; 8], vec![1, 2, 3], h);
        expect_err(
            c.grpc.upload(r).await,
            Code::InvalidArgument,
            "tensor record of 3 bytes",
        );
        let mut odd = t;
        odd.dtype = 9999;
        let r = up(0, vec![0; 8], encode_desc(&odd), h);
        expect_err(
            c.grpc.upload(r).await,
            Code::InvalidArgument,
            "unknown dtype code 9999",
        );
        let r = c.req(pb::DownloadRequest {
            handle: h,
            tensor: encode_desc(&t),
            offset: u64::MAX - 2,
            size: 8,
            ..Default::default()
        });
        expect_err(
            c.grpc.download(r).await,
            Code::InvalidArgument,
            "outside the tensor",
        );
        let r = c.req(pb::MemsetRequest {
            handle: h,
            tensor: encode_desc(&t),
            value: 300,
            offset: 0,
            size: 4,
        });
        expect_err(c.grpc.memset(r).await, Code::InvalidArgument, "not a byte");
        let r = c.req(pb::BufferRequest { handle: 12345 });
        expect_err(
            c.grpc.free(r).await,
            Code::InvalidArgument,
            "unknown buffer handle 12345",
        );
        // Malformed graphs.
        let ragged = vec![0u8; 100];
        let r = c.req(pb::PutGraphRequest {
            hash: graph_hash(&ragged).to_vec(),
            graph: ragged,
        });
        expect_err(
            c.grpc.put_graph(r).await,
            Code::InvalidArgument,
            "not a whole number",
        );
        let mut fwd = vec![f32_tensor(4, h), f32_tensor(4, h)];
        fwd[0].op = Op::Add.code();
        fwd[0].src[0] = 1;
        let g = encode_graph(&fwd);
        let r = c.req(pb::PutGraphRequest {
            hash: graph_hash(&g).to_vec(),
            graph: g.clone(),
        });
        expect_err(
            c.grpc.put_graph(r).await,
            Code::InvalidArgument,
            "src[0] = 1",
        );
        let r = c.req(pb::PutGraphRequest {
            hash: vec![0; 32],
            graph: g,
        });
        expect_err(
            c.grpc.put_graph(r).await,
            Code::InvalidArgument,
            "does not match",
        );
        let big = encode_graph(&vec![f32_tensor(1, h); 9]);
        let r = c.req(pb::PutGraphRequest {
            hash: graph_hash(&big).to_vec(),
            graph: big,
        });
        expect_err(
            c.grpc.put_graph(r).await,
            Code::InvalidArgument,
            "more than the server's limit 8",
        );
        let r = c.req(pb::ComputeRequest {
            device: 0,
            hash: vec![7; 32],
            ..Default::default()
        });
        expect_err(c.grpc.compute(r).await, Code::NotFound, "not cached");
        let r = c.req(pb::SupportsOpRequest {
            device: 0,
            graph: encode_graph(&[t]),
            node: 5,
            buffer_type: String::new(),
        });
        expect_err(c.grpc.supports_op(r).await, Code::InvalidArgument, "node 5");
        let r = c.req(pb::SupportsOpsRequest {
            device: 0,
            graph: encode_graph(&[t, t]),
            nodes: vec![0, 9],
            buffer_type: String::new(),
        });
        expect_err(
            c.grpc.supports_ops(r).await,
            Code::InvalidArgument,
            "question 1",
        );
        let r = c.req(pb::SupportsOpsRequest {
            device: 0,
            graph: encode_graph(&[t]),
            nodes: vec![0; 2],
            buffer_type: String::new(),
        });
        expect_err(
            c.grpc.supports_ops(r).await,
            Code::InvalidArgument,
            "2 nodes asked",
        );
        let r = c.req(pb::SupportsOpsRequest {
            device: 3,
            graph: encode_graph(&[t]),
            nodes: vec![0],
            buffer_type: String::new(),
        });
        assert!(c.grpc.supports_ops(r).await.is_err(), "unknown device");
        // No session, unknown session.
        let mut r = tonic::Request::new(pb::AllocRequest {
            device: 0,
            size: 16,
            ..Default::default()
        });
        r.metadata_mut()
            .insert(TOKEN_HEADER, format!("Bearer {TOKEN}").parse().unwrap());
        expect_err(
            c.grpc.alloc(r).await,
            Code::FailedPrecondition,
            "call Open first",
        );
        let mut other = c.req(pb::AllocRequest {
            device: 0,
            size: 16,
            ..Default::default()
        });
        other
            .metadata_mut()
            .insert(SESSION_HEADER, 999_999u64.into());
        expect_err(
            c.grpc.alloc(other).await,
            Code::FailedPrecondition,
            "unknown session 999999",
        );
        // Another session cannot name this session's buffer.
        let mut d = connect(&server.address).await;
        let r = d.req(pb::ClearRequest {
            handle: h,
            value: 0,
        });
        expect_err(
            d.grpc.clear(r).await,
            Code::InvalidArgument,
            "unknown buffer handle",
        );
        // And well-formed work still runs.
        let r = c.req(pb::ClearRequest {
            handle: h,
            value: 3,
        });
        c.grpc.clear(r).await.unwrap();
        let r = c.req(pb::DownloadRequest {
            handle: h,
            tensor: encode_desc(&t),
            offset: 0,
            size: 8,
            ..Default::default()
        });
        let mut s = c.grpc.download(r).await.unwrap().into_inner();
        let chunk = s.message().await.unwrap().unwrap();
        assert_eq!(chunk.data, vec![3u8; 8]);
    });
}

#[test]
fn random_bytes_as_graphs_and_tensors_never_crash_the_server() {
    let server = loopback_server(Limits::default());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = connect(&server.address).await;
        let r = c.req(pb::AllocRequest {
            device: 0,
            size: 4096,
            ..Default::default()
        });
        let h = c.grpc.alloc(r).await.unwrap().into_inner().handle;
        let mut state = 0x9e3779b97f4a7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let rec = backplane_remote::codec::DESC_BYTES;
        let mut refused = 0;
        for round in 0..200 {
            let n = 1 + (next() % 4) as usize;
            let mut bytes: Vec<u8> = (0..n * rec).map(|_| next() as u8).collect();
            if round % 2 == 0 {
                // Keep the dtype and op codes plausible so the deeper checks run.
                for k in 0..n {
                    bytes[k * rec..k * rec + 4]
                        .copy_from_slice(&((next() % 3) as u32).to_le_bytes());
                    bytes[k * rec + 4..k * rec + 8]
                        .copy_from_slice(&((next() % 40) as u32).to_le_bytes());
                }
            }
            let r = c.req(pb::PutGraphRequest {
                hash: graph_hash(&bytes).to_vec(),
                graph: bytes.clone(),
            });
            if c.grpc.put_graph(r).await.is_err() {
                refused += 1;
            }
            let r = c.req(pb::SupportsOpRequest {
                device: 0,
                graph: bytes.clone(),
                node: 0,
                buffer_type: if round % 2 == 1 {
                    "cpu_repack".into()
                } else {
                    String::new()
                },
            });
            let _ = c.grpc.supports_op(r).await;
            let r = c.req(pb::SupportsOpsRequest {
                device: 0,
                graph: bytes.clone(),
                nodes: (0..n as u32).collect(),
                // The CPU's weight layout on random graphs, or a random name.
                buffer_type: match round % 3 {
                    0 => String::new(),
                    1 => "cpu_repack".into(),
                    _ => String::from_utf8_lossy(&bytes[..(next() % 300) as usize % bytes.len()])
                        .into_owned(),
                },
            });
            let _ = c.grpc.supports_ops(r).await;
            let r = c.req(pb::DownloadRequest {
                handle: h,
                tensor: bytes[..rec].to_vec(),
                offset: next() % 64,
                size: next() % 64,
                ..Default::default()
            });
            if let Ok(s) = c.grpc.download(r).await {
                let mut s = s.into_inner();
                while let Ok(Some(_)) = s.message().await {}
            }
        }
        assert!(refused > 150, "only {refused} of 200 random graphs refused");
        // Still serving.
        let t = f32_tensor(4, h);
        let r = c.req(pb::DownloadRequest {
            handle: h,
            tensor: encode_desc(&t),
            offset: 0,
            size: 16,
            ..Default::default()
        });
        assert!(c.grpc.download(r).await.is_ok());
    });
}

#[test]
fn garbage_in_queued_operations_inline_graphs_and_stored_uploads_gets_errors() {
    use pb::buffer_op::Op as BufOp;
    let server = loopback_server(Limits {
        max_chunk_bytes: 1024,
        ..Limits::default()
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = connect(&server.address).await;
        let r = c.req(pb::AllocRequest {
            device: 0,
            size: 1024,
            ..Default::default()
        });
        let h = c.grpc.alloc(r).await.unwrap().into_inner().handle;
        let t = f32_tensor(256, h);
        let op = |o: BufOp| pb::BufferOp { op: Some(o) };
        let memset = |handle: u64, offset: u64, size: u64| {
            op(BufOp::Memset(pb::MemsetRequest {
                handle,
                tensor: encode_desc(&f32_tensor(256, handle)),
                value: 1,
                offset,
                size,
            }))
        };
        // The second of three queued operations is out of range: the error
        // names it and its place; the first ran.
        let r = c.req(pb::ApplyRequest {
            ops: vec![memset(h, 0, 16), memset(h, 1020, 8), memset(h, 0, 4)],
        });
        expect_err(
            c.grpc.apply(r).await,
            Code::InvalidArgument,
            "queued operation 1 of 3 (memset of 8 bytes in buffer",
        );
        // Unknown handles, an empty operation, an oversized part, too many.
        let r = c.req(pb::ApplyRequest {
            ops: vec![op(BufOp::Free(pb::BufferRequest { handle: 999 }))],
        });
        expect_err(
            c.grpc.apply(r).await,
            Code::InvalidArgument,
            "unknown buffer handle 999",
        );
        let r = c.req(pb::ApplyRequest {
            ops: vec![pb::BufferOp { op: None }],
        });
        expect_err(
            c.grpc.apply(r).await,
            Code::InvalidArgument,
            "no operation given",
        );
        let r = c.req(pb::ApplyRequest {
            ops: vec![op(BufOp::Upload(pb::UploadChunk {
                handle: h,
                tensor: encode_desc(&t),
                offset: 0,
                data: vec![0; 2048],
            }))],
        });
        expect_err(
            c.grpc.apply(r).await,
            Code::InvalidArgument,
            "more than 1024",
        );
        let r = c.req(pb::ApplyRequest {
            ops: vec![memset(h, 0, 4); backplane_remote::ops::MAX_QUEUED_OPS + 1],
        });
        expect_err(
            c.grpc.apply(r).await,
            Code::InvalidArgument,
            "queued operations in one request",
        );
        // Queued operations in front of a download: run before it.
        let r = c.req(pb::DownloadRequest {
            handle: h,
            tensor: encode_desc(&t),
            offset: 0,
            size: 8,
            before: vec![memset(h, 0, 8)],
        });
        let mut s = c.grpc.download(r).await.unwrap().into_inner();
        let got = s.message().await.unwrap().unwrap().data;
        assert_eq!(got, vec![1u8; 8]);
        // An inline graph whose hash does not match, or that names a
        // buffer the session does not hold.
        let g = encode_graph(&[t]);
        let r = c.req(pb::ComputeRequest {
            device: 0,
            hash: vec![0; 32],
            graph: g.clone(),
            ..Default::default()
        });
        expect_err(
            c.grpc.compute(r).await,
            Code::InvalidArgument,
            "does not match",
        );
        let stranger = encode_graph(&[f32_tensor(4, 4242)]);
        let r = c.req(pb::ComputeRequest {
            device: 0,
            hash: graph_hash(&stranger).to_vec(),
            graph: stranger,
            ..Default::default()
        });
        expect_err(
            c.grpc.compute(r).await,
            Code::InvalidArgument,
            "unknown buffer handle 4242",
        );
        // Stored uploads: a short hash, a range outside the tensor, and a
        // hash the server (with no model store) does not hold.
        let session = c.session;
        let stored = move |hash: Vec<u8>, size: u64| {
            req_for(
                session,
                pb::UploadStoredRequest {
                    handle: h,
                    tensor: encode_desc(&t),
                    offset: 0,
                    size,
                    hash,
                    before: Vec::new(),
                },
            )
        };
        expect_err(
            c.grpc.upload_stored(stored(vec![1; 5], 16)).await,
            Code::InvalidArgument,
            "content hash of 5 bytes",
        );
        expect_err(
            c.grpc.upload_stored(stored(vec![1; 32], 4096)).await,
            Code::InvalidArgument,
            "outside the tensor",
        );
        let miss = c.grpc.upload_stored(stored(vec![1; 32], 16)).await.unwrap();
        assert!(!miss.into_inner().found);
        // Still serving.
        let r = c.req(pb::ClearRequest {
            handle: h,
            value: 0,
        });
        c.grpc.clear(r).await.unwrap();
    });
}
