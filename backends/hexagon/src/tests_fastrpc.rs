//! The FastRPC transport against the test double of `libcdsprpc.so` (built
//! by build.rs from `emu/cdsprpc-double*.c`): real graphs through
//! `remote_handle64_invoke`, dspqueue and the DSP platform layer
//! `htp/htp-dsp.c`, and each failure the double can inject.

use std::sync::{Arc, OnceLock};

use backplane_abi::plugin::{Device, error_kind};
use backplane_abi::{DType, Op, TensorDesc};
use backplane_hexagon_sys::CdspRpc;

use crate::msg::{HtpReq, kind};
use crate::tests::{f32_bytes, get_rows_graph, node, place};
use crate::{
    FastRpcTransport, HexagonDevice, Session, SessionConfig, Transport, TransportError, session_uri,
};

/// The double, loaded once (dlopen would hand back the same library anyway).
fn api() -> Arc<CdspRpc> {
    static API: OnceLock<Arc<CdspRpc>> = OnceLock::new();
    API.get_or_init(|| {
        Arc::new(
            CdspRpc::load(Some(env!("BACKPLANE_HEXAGON_CDSPRPC_DOUBLE")))
                .expect("loading the libcdsprpc.so test double"),
        )
    })
    .clone()
}

fn open(extra: &str) -> Result<FastRpcTransport, TransportError> {
    FastRpcTransport::open(api(), &session_uri(0, extra))
}

/// Short waits, for the tests that expect a stalled DSP (the others keep the
/// default so a loaded machine cannot make them time out).
fn quick() -> SessionConfig {
    SessionConfig {
        timeout_us: 50_000,
        ..SessionConfig::default()
    }
}

fn device(extra: &str) -> HexagonDevice {
    let t = open(extra).expect("open");
    HexagonDevice::new(
        0,
        Session::open(Box::new(t), SessionConfig::default()).expect("session"),
    )
}

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn read_f32(buf: &dyn backplane_abi::plugin::Buffer, t: &TensorDesc) -> Vec<f32> {
    let mut out = vec![0u8; t.nbytes() as usize];
    buf.get_tensor(t, 0, &mut out).unwrap();
    out.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn fastrpc_session_runs_graphs_through_the_double() {
    let dev = device("emu_hvx=3");
    assert!(
        dev.description().contains("FastRPC") && dev.description().contains("3 HVX threads"),
        "{}",
        dev.description()
    );
    assert_eq!(dev.vtcm_budget(), 8 << 20);
    let buf = dev.buffer_type().alloc_buffer(4096).expect("alloc");
    let stream = dev.init_backend("").unwrap();

    let mut g = get_rows_graph();
    place(&mut g, buf.as_ref());
    let rows: Vec<f32> = (0..12).map(|i| i as f32).collect();
    buf.set_tensor(&g[0], 0, &f32_bytes(&rows)).unwrap();
    buf.set_tensor(&g[1], 0, &i32_bytes(&[2, 0])).unwrap();
    stream.graph_compute(&g).expect("get_rows");
    assert_eq!(
        read_f32(buf.as_ref(), &g[2]),
        [8.0, 9.0, 10.0, 11.0, 0.0, 1.0, 2.0, 3.0]
    );

    // A product split over the three HVX threads of the double's worker pool:
    // a [64 x 40] f32 weight against two columns.
    let (k, m, n) = (64usize, 40usize, 2usize);
    let mut mm = vec![
        TensorDesc::new(DType::F32, [k as i64, m as i64, 1, 1]),
        TensorDesc::new(DType::F32, [k as i64, n as i64, 1, 1]),
        node(Op::MulMat, DType::F32, [m as i64, n as i64, 1, 1], &[0, 1]),
    ];
    for (i, d) in mm.iter_mut().enumerate() {
        d.buffer = buf.id();
        d.offset = [0, 1024 * 11, 1024 * 12][i];
    }
    let a: Vec<f32> = (0..k * m).map(|i| ((i % 7) as f32 - 3.0) * 0.5).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i % 5) as f32 - 2.0) * 0.25).collect();
    let big = dev.buffer_type().alloc_buffer(16384).expect("alloc");
    for d in mm.iter_mut() {
        d.buffer = big.id();
    }
    big.set_tensor(&mm[0], 0, &f32_bytes(&a)).unwrap();
    big.set_tensor(&mm[1], 0, &f32_bytes(&b)).unwrap();
    stream.graph_compute(&mm).expect("mul_mat");
    let got = read_f32(big.as_ref(), &mm[2]);
    for j in 0..n {
        for i in 0..m {
            let want: f32 = (0..k).map(|t| a[i * k + t] * b[j * k + t]).sum();
            assert_eq!(got[j * m + i], want, "dst[{i}, {j}]");
        }
    }
    stream.synchronize().expect("sync");
}

#[test]
fn fastrpc_open_failure_is_an_error_naming_the_session() {
    let e = open("emu_fault=open").err().expect("must fail");
    assert!(matches!(e, TransportError::Open { code: 72, .. }), "{e}");
    assert!(e.to_string().contains("_session=0"), "{e}");
    // A URI naming another skel is refused by FastRPC itself.
    let e = FastRpcTransport::open(
        api(),
        "file:///libother_skel.so?other_skel_handle_invoke&_dom=cdsp",
    )
    .err()
    .expect("no such skel");
    assert!(e.to_string().contains("opening DSP session"), "{e}");
}

#[test]
fn fastrpc_hmx_clock_refusal_fails_the_open() {
    let t = open("emu_fault=hmx").expect("open");
    let e = Session::open(Box::new(t), quick())
        .err()
        .expect("must fail");
    assert!(
        e.message
            .contains("HMX clock at its max corner failed with error 0x1"),
        "{e}"
    );
    // The vote itself goes through invoke, the skel and HAP_power_set.
    let t = open("").expect("open");
    assert!(
        t.vote_hmx_clock(&backplane_hexagon_sys::HapPowerHmxV2::max_clock())
            .is_ok()
    );
    let bad = backplane_hexagon_sys::HapPowerHmxV2 {
        set_clock: 0,
        ..backplane_hexagon_sys::HapPowerHmxV2::max_clock()
    };
    assert!(matches!(
        t.vote_hmx_clock(&bad),
        Err(TransportError::HmxClock { code: 14 })
    ));
}

#[test]
fn fastrpc_full_queue_is_an_error_and_the_session_says_it_is_broken() {
    let t = open("emu_fault=queue_full").expect("open");
    let s = Session::open(Box::new(t), quick()).expect("session");
    let mut reqs = [HtpReq {
        kind: kind::SYNC,
        ..HtpReq::default()
    }; 3];
    let e = s.run(&mut reqs, "three syncs").expect_err("queue full");
    assert!(e.message.contains("DSP request queue full"), "{e}");
    let e = s.sync().expect_err("broken");
    assert!(e.message.contains("broken"), "{e}");
}

#[test]
fn fastrpc_stalled_dsp_is_a_timeout_not_a_hang() {
    let t = open("emu_fault=stall").expect("open");
    let s = Session::open(Box::new(t), quick()).expect("session");
    let e = s.sync().expect_err("no answer");
    assert!(e.message.contains("DSP did not answer within 50 ms"), "{e}");
    drop(s); // stopping the DSP must not hang on the stalled loop
}

#[test]
fn fastrpc_dsp_error_codes_name_the_node_and_the_session_goes_on() {
    // Injected: every op request arrives damaged and the DSP says so.
    let dev = device("emu_fault=dsp_error");
    let buf = dev.buffer_type().alloc_buffer(1024).expect("alloc");
    let mut g = get_rows_graph();
    place(&mut g, buf.as_ref());
    let stream = dev.init_backend("").unwrap();
    let e = stream.graph_compute(&g).expect_err("damaged");
    assert_eq!(e.kind, error_kind::BAD_INPUT, "{e}");
    assert!(
        e.message.contains("node 2 (GET_ROWS)")
            && e.message
                .contains("DSP error 3 (invalid parameters): op 32767"),
        "{e}"
    );
    stream.synchronize().expect("the session survives");

    // Real: an index out of range, found by the DSP's GET_ROWS kernel.
    let dev = device("");
    let buf = dev.buffer_type().alloc_buffer(1024).expect("alloc");
    let mut g = get_rows_graph();
    place(&mut g, buf.as_ref());
    buf.set_tensor(&g[1], 0, &i32_bytes(&[2, 7])).unwrap();
    let stream = dev.init_backend("").unwrap();
    let e = stream.graph_compute(&g).expect_err("index 7 of 3 rows");
    assert!(
        e.message.contains("index 7") && e.message.contains("GET_ROWS"),
        "{e}"
    );
    buf.set_tensor(&g[1], 0, &i32_bytes(&[1, 1])).unwrap();
    stream
        .graph_compute(&g)
        .expect("valid indices after the error");
}

#[test]
fn fastrpc_sessions_release_handles_queues_and_vtcm() {
    // More sessions than the double has handles, VTCM contexts or queues
    // at once: each must be given back when its session drops.
    for i in 0..80u32 {
        let dev = device(if i.is_multiple_of(2) {
            "emu_vtcm_kib=64"
        } else {
            ""
        });
        let buf = dev.buffer_type().alloc_buffer(256).expect("alloc");
        drop(buf);
        drop(dev);
    }
    let dev = device("emu_vtcm_kib=64");
    assert_eq!(dev.vtcm_budget(), 64 << 10);
}
