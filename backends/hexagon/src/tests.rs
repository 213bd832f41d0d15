//! Unit tests over the emulated transport: the wire layout, the failure
//! paths of a session, and what supports_op says.

use std::sync::Arc;

use backplane_abi::plugin::{Buffer, Device, PluginError, Reg, error_kind};
use backplane_abi::{DType, GluOp, Op, TensorDesc, rope_mode};
use backplane_hexagon_sys::HapPowerHmxV2;

use crate::msg::{HtpDspInfo, HtpReq, HtpRsp, kind};
use crate::transport::c_struct_sizes;
use crate::{
    EmulatedTransport, HexagonDevice, HexagonReg, RegOptions, Session, SessionConfig, Transport,
    TransportError, session_uri,
};

fn device(extra: &str) -> HexagonDevice {
    let t = EmulatedTransport::open(&session_uri(0, extra)).expect("open");
    HexagonDevice::new(
        0,
        Session::open(Box::new(t), SessionConfig::default()).expect("session"),
    )
}

pub(crate) fn node(op: Op, dt: DType, ne: [i64; 4], srcs: &[i32]) -> TensorDesc {
    let mut d = TensorDesc::new(dt, ne);
    d.op = op.code();
    d.src[..srcs.len()].copy_from_slice(srcs);
    d
}

/// A GET_ROWS graph: a f32 [4, 3], indices i32 [2], result f32 [4, 2].
pub(crate) fn get_rows_graph() -> Vec<TensorDesc> {
    vec![
        TensorDesc::new(DType::F32, [4, 3, 1, 1]),
        TensorDesc::new(DType::I32, [2, 1, 1, 1]),
        node(Op::GetRows, DType::F32, [4, 2, 1, 1], &[0, 1]),
    ]
}

/// Places every tensor of `graph` in `buf`, 256 bytes apart.
pub(crate) fn place(graph: &mut [TensorDesc], buf: &dyn Buffer) {
    for (i, d) in graph.iter_mut().enumerate() {
        d.buffer = buf.id();
        d.offset = 256 * i as u64;
    }
}

pub(crate) fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn c_and_rust_agree_on_the_message_layout() {
    let rust = [
        std::mem::size_of::<HtpReq>(),
        std::mem::size_of::<HtpRsp>(),
        std::mem::size_of::<HapPowerHmxV2>(),
        std::mem::size_of::<HtpDspInfo>(),
    ]
    .map(|s| s as u32);
    assert_eq!(c_struct_sizes(), rust);
}

#[test]
fn session_open_failure_is_an_error() {
    let e = EmulatedTransport::open(&session_uri(0, "emu_fault=open"))
        .err()
        .expect("must fail");
    assert!(matches!(e, TransportError::Open { .. }), "{e}");
    let e = EmulatedTransport::open("file:///x.so?f&_dom=adsp")
        .err()
        .expect("adsp is no compute DSP");
    assert!(e.to_string().contains("opening DSP session"), "{e}");
}

#[test]
fn hmx_clock_refusal_fails_the_open() {
    let t = EmulatedTransport::open(&session_uri(0, "emu_fault=hmx")).expect("open");
    let e = Session::open(Box::new(t), SessionConfig::default())
        .err()
        .expect("must fail");
    assert!(e.message.contains("HMX clock"), "{e}");
    // A malformed vote is refused by the DSP's HAP stand-in too.
    let t = EmulatedTransport::open(&session_uri(0, "")).expect("open");
    let bad = HapPowerHmxV2 {
        min_corner: 0xFFFF,
        target_corner: 1,
        ..HapPowerHmxV2::max_clock()
    };
    assert!(matches!(
        t.vote_hmx_clock(&bad),
        Err(TransportError::HmxClock { .. })
    ));
    assert!(t.vote_hmx_clock(&HapPowerHmxV2::max_clock()).is_ok());
}

#[test]
fn full_queue_is_an_error_not_a_hang() {
    let t = EmulatedTransport::open(&session_uri(0, "emu_fault=stall")).expect("open");
    t.start(0, 1, 2).expect("start");
    let sync = HtpReq {
        kind: kind::SYNC,
        ..HtpReq::default()
    };
    t.write(&sync, 0).expect("room for 1");
    t.write(&sync, 0).expect("room for 2");
    assert_eq!(
        t.write(&sync, 1000),
        Err(TransportError::QueueFull { waited_us: 1000 })
    );
    assert!(matches!(t.read(1000), Err(TransportError::Timeout { .. })));
    drop(t); // stopping a stalled DSP must not hang
}

#[test]
fn stalled_dsp_breaks_the_session_with_an_error() {
    let t = EmulatedTransport::open(&session_uri(0, "emu_fault=stall")).expect("open");
    let config = SessionConfig {
        queue_depth: 2,
        max_in_flight: 8,
        timeout_us: 20_000,
        ..SessionConfig::default()
    };
    let s = Session::open(Box::new(t), config).expect("session");
    let mut reqs = [HtpReq {
        kind: kind::SYNC,
        ..HtpReq::default()
    }; 3];
    let e = s.run(&mut reqs, "three syncs").expect_err("must fail");
    assert!(e.message.contains("queue full"), "{e}");
    let e = s.sync().expect_err("broken");
    assert!(e.message.contains("broken"), "{e}");
}

#[test]
fn dsp_error_code_comes_back_as_an_error_and_the_session_survives() {
    let dev = device("");
    let buf = dev.buffer_type().alloc_buffer(1024).expect("alloc");
    let mut g = get_rows_graph();
    place(&mut g, buf.as_ref());
    let rows: Vec<f32> = (0..12).map(|i| i as f32).collect();
    buf.set_tensor(&g[0], 0, &f32_bytes(&rows)).unwrap();
    let stream = dev.init_backend("").unwrap();

    buf.set_tensor(
        &g[1],
        0,
        &[2i32, 7]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let e = stream.graph_compute(&g).expect_err("index 7 of 3 rows");
    assert_eq!(e.kind, error_kind::BAD_INPUT, "{e}");
    assert!(
        e.message.contains("index 7") && e.message.contains("GET_ROWS"),
        "{e}"
    );

    buf.set_tensor(
        &g[1],
        0,
        &[2i32, 0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    stream.graph_compute(&g).expect("valid indices");
    let mut out = [0u8; 32];
    buf.get_tensor(&g[2], 0, &mut out).unwrap();
    let got: Vec<f32> = out
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [8.0, 9.0, 10.0, 11.0, 0.0, 1.0, 2.0, 3.0]);
}

#[test]
fn tensors_outside_live_buffers_are_refused_on_the_host() {
    let dev = device("");
    let buf = dev.buffer_type().alloc_buffer(1024).expect("alloc");
    let mut g = get_rows_graph();
    place(&mut g, buf.as_ref());
    g[2].offset = 1000; // 32 bytes at 1000 overrun the 1024-byte buffer
    let e = dev
        .init_backend("")
        .unwrap()
        .graph_compute(&g)
        .expect_err("overrun");
    assert_eq!(e.kind, error_kind::BAD_INPUT);
    g[2].offset = 512;
    g[0].buffer = 999;
    let e: PluginError = dev
        .init_backend("")
        .unwrap()
        .graph_compute(&g)
        .expect_err("unknown buffer");
    assert!(e.message.contains("buffer 0x3e7"), "{e}");
}

#[test]
fn work_over_the_vtcm_budget_is_refused_with_the_sizes() {
    let dev = device("");
    let (k, m, n) = (32768, 64, 128);
    let g = [
        TensorDesc::new(DType::Q8_0, [k, m, 1, 1]),
        TensorDesc::new(DType::F32, [k, n, 1, 1]),
        node(Op::MulMat, DType::F32, [m, n, 1, 1], &[0, 1]),
    ];
    let v = dev.supports_op(&g, 2);
    let reason = v.reason().expect("over budget");
    assert!(
        reason.starts_with("needs 16.") && reason.ends_with("MiB of VTCM, budget 8 MiB"),
        "{reason}"
    );
    let small = [
        TensorDesc::new(DType::Q8_0, [4096, m, 1, 1]),
        TensorDesc::new(DType::F32, [4096, n, 1, 1]),
        node(Op::MulMat, DType::F32, [m, n, 1, 1], &[0, 1]),
    ];
    assert!(dev.supports_op(&small, 2).is_supported());
    // A smaller VTCM refuses long rows too.
    let dev = device("emu_vtcm_kib=64");
    let g = [
        TensorDesc::new(DType::F32, [8192, 2, 1, 1]),
        node(Op::RmsNorm, DType::F32, [8192, 2, 1, 1], &[0]),
    ];
    assert!(
        dev.supports_op(&g, 1)
            .reason()
            .is_some_and(|r| r.contains("budget 0.1 MiB"))
    );
}

#[test]
fn supports_op_names_what_is_missing() {
    let dev = device("");
    let mm = [
        TensorDesc::new(DType::Q4_1, [64, 4, 1, 1]),
        TensorDesc::new(DType::F32, [64, 2, 1, 1]),
        node(Op::MulMat, DType::F32, [4, 2, 1, 1], &[0, 1]),
    ];
    assert!(
        dev.supports_op(&mm, 2)
            .reason()
            .is_some_and(|r| r.contains("q4_1"))
    );
    let mut rope = [
        TensorDesc::new(DType::F32, [64, 2, 3, 1]),
        TensorDesc::new(DType::I32, [12, 1, 1, 1]),
        node(Op::Rope, DType::F32, [64, 2, 3, 1], &[0, 1]),
    ];
    rope[2].op_params[1] = 64;
    rope[2].op_params[2] = rope_mode::MROPE;
    // Sections the op contract accepts, so the refusal is the DSP's own.
    rope[2].op_params[11..13].copy_from_slice(&[16, 16]);
    assert_eq!(
        dev.supports_op(&rope, 2).reason(),
        Some("ROPE mode 8 is not implemented by the Hexagon backend (has normal, neox)")
    );
    let mut glu = [
        TensorDesc::new(DType::F32, [8, 2, 1, 1]),
        node(Op::Glu, DType::F32, [4, 2, 1, 1], &[0]),
    ];
    glu[1].op_params[0] = GluOp::Geglu.code() as i32;
    assert!(
        dev.supports_op(&glu, 1)
            .reason()
            .is_some_and(|r| r.contains("GEGLU"))
    );
    glu[1].op_params[0] = GluOp::Swiglu.code() as i32;
    assert!(dev.supports_op(&glu, 1).is_supported());
    let leaf = [TensorDesc::new(DType::F32, [8, 2, 1, 1])];
    assert!(dev.supports_op(&leaf, 0).is_supported());
}

#[test]
fn without_a_dsp_the_backend_has_zero_devices_and_says_why() {
    let reg = HexagonReg::with_options(&RegOptions {
        cdsprpc_path: Some("/nonexistent/libcdsprpc.so".into()),
        ..RegOptions::default()
    });
    assert!(reg.devices().is_empty());
    let why = reg.no_device_reason().expect("a reason");
    assert!(
        why.contains("libcdsprpc.so") && why.contains("BACKPLANE_HEXAGON_EMULATE=1"),
        "{why}"
    );
    // The loader's own words, not libloading's bare "dlopen failed".
    assert!(
        why.contains("cannot open shared object file: No such file or directory")
            && !why.contains("dlopen failed")
            && !why.contains('\n'),
        "{why}"
    );
    let reg = HexagonReg::with_options(&RegOptions {
        emulate: true,
        uri_options: "emu_fault=open".into(),
        ..RegOptions::default()
    });
    assert!(reg.devices().is_empty());
    assert!(
        reg.no_device_reason()
            .is_some_and(|r| r.contains("session 0"))
    );
}

#[test]
fn emulated_backend_offers_one_device_per_session() {
    let reg = HexagonReg::with_options(&RegOptions {
        emulate: true,
        sessions: Some(2),
        uri_options: "emu_hvx=2".into(),
        ..RegOptions::default()
    });
    let names: Vec<String> = reg.devices().iter().map(|d| d.name()).collect();
    assert_eq!(names, ["htp0", "htp1"]);
    let d: Arc<dyn Device> = reg.devices()[1].clone();
    assert_eq!(d.buffer_type().name(), "hexagon1");
    assert!(d.description().contains("emulated"), "{}", d.description());
    assert!(reg.no_device_reason().is_none());
}
