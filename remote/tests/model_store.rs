//! Weights by content hash: a server indexing its own GGUF files fills a
//! tensor whose bytes it holds without the client sending them; bytes it
//! does not hold are sent as usual.

mod common;

use backplane_abi::{DType, TensorDesc};
use backplane_gguf::GgufWriter;
use backplane_remote::store::{MIN_STORED_BYTES, ModelStore};
use backplane_remote::{Client, Limits, Listen, ServeOptions, Target, Tls};
use common::*;

/// A GGUF with one f32 tensor of `n` values (`values(n, 5)`) and one small
/// tensor below the indexing threshold.
fn write_model(path: &std::path::Path, n: usize) -> Vec<u8> {
    let big = bytes(&values(n, 5));
    let small = bytes(&values(16, 6));
    let mut w = GgufWriter::new();
    w.set("general.architecture", "test");
    w.add_tensor("big.weight", DType::F32, &[n as i64]).unwrap();
    w.add_tensor("small.weight", DType::F32, &[16]).unwrap();
    let mut s = w
        .begin(std::io::BufWriter::new(
            std::fs::File::create(path).unwrap(),
        ))
        .unwrap();
    s.write_tensor("big.weight", &big).unwrap();
    s.write_tensor("small.weight", &small).unwrap();
    s.finish().unwrap();
    big
}

#[test]
fn server_fills_a_tensor_it_holds_by_hash_and_takes_other_bytes_over_the_wire() {
    let dir = std::env::temp_dir().join(format!("backplane-remote-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n = 64 * 1024; // 256 KiB of f32
    let big = write_model(&dir.join("model.gguf"), n);
    std::fs::write(dir.join("notes.txt"), "not a model").unwrap();
    std::fs::write(dir.join("broken.gguf"), "GGUF but not really").unwrap();

    let (store, summary) = ModelStore::index(std::slice::from_ref(&dir)).unwrap();
    assert_eq!(summary.files, 1, "{summary:?}");
    assert_eq!(
        summary.tensors, 1,
        "only the tensor of at least {MIN_STORED_BYTES} bytes"
    );
    assert_eq!(summary.bytes, big.len() as u64);
    assert_eq!(summary.skipped.len(), 1, "{summary:?}");
    assert!(summary.skipped[0].contains("broken.gguf"), "{summary:?}");

    let server = backplane_remote::start_with_store(
        cpu_registry(),
        ServeOptions {
            listen: Listen::Tcp("127.0.0.1:0".parse().unwrap()),
            tls: Tls::Insecure,
            token: Some(TOKEN.into()),
            limits: Limits::default(),
        },
        Some((store, summary)),
    )
    .unwrap();
    let client = Client::new(Target::Tcp(server.address.clone()), insecure(Some(TOKEN)));
    let (_, hello) = client.hello().unwrap();
    assert_eq!(hello.stored_tensors, 1);

    let t = TensorDesc::new(DType::F32, [n as i64, 1, 1, 1]);
    let buf = client.alloc(0, 2 * t.nbytes()).unwrap();
    let first = TensorDesc {
        buffer: buf.handle,
        ..t
    };
    let second = TensorDesc {
        offset: t.nbytes(),
        ..first
    };
    // The bytes the server holds: filled there, nothing sent.
    client.upload(&buf, &first, 0, &big).unwrap();
    let stats = client.transfer_stats();
    assert_eq!(stats.stored_bytes, big.len() as u64);
    assert_eq!(stats.sent_bytes, 0);
    // Other bytes of the same size: a miss, sent over the connection.
    let other = bytes(&values(n, 9));
    client.upload(&buf, &second, 0, &other).unwrap();
    let stats = client.transfer_stats();
    assert_eq!(stats.stored_bytes, big.len() as u64);
    assert_eq!(stats.sent_bytes, other.len() as u64);
    // Both read back byte for byte.
    let mut back = vec![0u8; big.len()];
    client.download(&buf, &first, 0, &mut back).unwrap();
    assert!(back == big, "stored tensor differs after the fill");
    client.download(&buf, &second, 0, &mut back).unwrap();
    assert!(back == other, "sent tensor differs");
    // A place that missed once is taken for activations, rewritten at
    // every step: later uploads there are sent without asking, even bytes
    // the store holds.
    client.upload(&buf, &second, 0, &big).unwrap();
    let stats = client.transfer_stats();
    assert_eq!(stats.stored_bytes, big.len() as u64);
    assert_eq!(stats.sent_bytes, (other.len() + big.len()) as u64);
    client.download(&buf, &second, 0, &mut back).unwrap();
    assert!(back == big, "resent tensor differs");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_model_directory_that_cannot_be_read_is_an_error_naming_it() {
    let missing = std::env::temp_dir().join("backplane-remote-store-no-such-dir");
    let err = ModelStore::index(std::slice::from_ref(&missing))
        .err()
        .unwrap();
    assert!(err.contains(&missing.display().to_string()), "{err}");
}
