//! The client's queue of small buffer operations: applied in order before
//! the call that needs them, checked on the client where it can, and a
//! refusal by the server fails the call that carried them, naming the
//! operation.

mod common;

use backplane_abi::{DType, TensorDesc};
use backplane_remote::Limits;
use common::*;

fn f32_tensor(n: i64, buffer: u64, offset: u64) -> TensorDesc {
    TensorDesc {
        buffer,
        offset,
        ..TensorDesc::new(DType::F32, [n, 1, 1, 1])
    }
}

#[test]
fn queued_uploads_memsets_and_clears_apply_in_order_before_a_download() {
    let server = loopback_server(Limits::default());
    let client = client(&server);
    let buf = client.alloc(0, 1024).unwrap();
    let t = f32_tensor(64, buf.handle, 0);
    client.clear(&buf, 0xEE).unwrap();
    client.upload(&buf, &t, 0, &bytes(&values(64, 3))).unwrap();
    client.memset(&buf, &t, 0, 16, 32).unwrap();
    client.upload(&buf, &t, 40, &bytes(&[7.0, 8.0])).unwrap();
    let mut back = vec![0u8; 256];
    client.download(&buf, &t, 0, &mut back).unwrap();
    let mut want = bytes(&values(64, 3));
    want[16..48].fill(0);
    want[40..48].copy_from_slice(&bytes(&[7.0, 8.0]));
    assert_eq!(back, want);
    // Bytes of the buffer outside the tensor kept the clear's value.
    let rest = f32_tensor(64, buf.handle, 256);
    client.download(&buf, &rest, 0, &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 0xEE));
}

#[test]
fn a_range_outside_its_tensor_or_buffer_is_refused_at_once_by_the_client() {
    let server = loopback_server(Limits::default());
    let client = client(&server);
    let buf = client.alloc(0, 256).unwrap();
    let t = f32_tensor(64, buf.handle, 0);
    let err = client.upload(&buf, &t, 250, &[0u8; 8]).unwrap_err();
    assert!(err.is_bad_input(), "{err}");
    assert!(
        err.to_string().contains("outside the tensor's 256 bytes"),
        "{err}"
    );
    let past_end = f32_tensor(64, buf.handle, 128);
    let err = client.memset(&buf, &past_end, 0, 0, 4).unwrap_err();
    assert!(
        err.to_string().contains("outside its buffer of 256 bytes"),
        "{err}"
    );
}

#[test]
fn a_queued_operation_the_server_refuses_fails_the_carrying_call_and_names_it() {
    let server = loopback_server(Limits::default());
    let client = client(&server);
    let gone = client.alloc(0, 256).unwrap();
    let kept = client.alloc(0, 256).unwrap();
    let t_gone = f32_tensor(64, gone.handle, 0);
    let t_kept = f32_tensor(64, kept.handle, 0);
    // Both queued: the free, then a memset of the freed buffer (the client
    // cannot know it is freed by then; the server does).
    client.free(&gone).unwrap();
    client.memset(&gone, &t_gone, 1, 0, 16).unwrap();
    let mut back = vec![0u8; 16];
    let err = client.download(&kept, &t_kept, 0, &mut back).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("queued operation 1 of 2"), "{text}");
    assert!(text.contains("memset of 16 bytes in buffer"), "{text}");
    assert!(err.is_bad_input(), "{text}");
    // The connection goes on: the next call works.
    client.memset(&kept, &t_kept, 9, 0, 16).unwrap();
    client.download(&kept, &t_kept, 0, &mut back).unwrap();
    assert_eq!(back, vec![9u8; 16]);
}
