//! The emulated device (or a FastRPC session on the libcdsprpc.so test
//! double) as a conformance target, in process: every tensor in one shared
//! buffer with guard bytes around each storage root, graphs run through the
//! backend contract exactly as a host would.

use backplane::{Graph, TensorId};
use backplane_abi::TensorDesc;
use backplane_abi::plugin::{Backend, Buffer, Device};
use backplane_conformance::Target;
use backplane_hexagon::{EmulatedTransport, HexagonDevice, Session, SessionConfig, session_uri};

const GUARD: u64 = 256;
const GUARD_FILL: u8 = 0xA5;
const UNWRITTEN_FILL: u8 = 0xFF;

/// An emulated DSP session with `extra` URI options.
pub fn emulated_device(extra: &str) -> HexagonDevice {
    let t = EmulatedTransport::open(&session_uri(0, extra)).expect("open the emulated DSP");
    HexagonDevice::new(
        0,
        Session::open(Box::new(t), SessionConfig::default()).expect("start the session"),
    )
}

struct Loaded {
    descs: Vec<TensorDesc>,
    buffer: Box<dyn Buffer>,
    /// (start, len, guarded end) per storage root.
    roots: Vec<(u64, u64, u64)>,
}

/// A FastRPC session on the libcdsprpc.so test double (see build.rs), which
/// runs the DSP platform layer htp/htp-dsp.c with a worker thread per HVX
/// context (the emulation runs an op's thread shares one after another).
#[cfg(target_os = "linux")]
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn fastrpc_device(extra: &str) -> HexagonDevice {
    use std::sync::Arc;
    let api = backplane_hexagon_sys::CdspRpc::load(Some(env!("BACKPLANE_HEXAGON_CDSPRPC_DOUBLE")))
        .expect("loading the libcdsprpc.so test double");
    let t = backplane_hexagon::FastRpcTransport::open(Arc::new(api), &session_uri(0, extra))
        .expect("open a FastRPC session");
    HexagonDevice::new(
        0,
        Session::open(Box::new(t), SessionConfig::default()).expect("start the session"),
    )
}

/// The HTP under test.
pub struct HexagonTarget {
    device: HexagonDevice,
    stream: Box<dyn Backend>,
    loaded: Option<Loaded>,
}

impl HexagonTarget {
    /// A target over a fresh emulated session.
    pub fn new() -> HexagonTarget {
        HexagonTarget::over(emulated_device(""))
    }

    /// A target over `device`.
    pub fn over(device: HexagonDevice) -> HexagonTarget {
        let stream = device.init_backend("").expect("stream");
        HexagonTarget {
            device,
            stream,
            loaded: None,
        }
    }
}

fn round_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

impl Target for HexagonTarget {
    fn name(&self) -> String {
        "hexagon-emulated".into()
    }

    fn supports(&self, graph: &Graph, node: TensorId) -> Result<(), String> {
        match self
            .device
            .supports_op(graph.tensors(), node.index())
            .reason()
        {
            None => Ok(()),
            Some(r) => Err(r.to_string()),
        }
    }

    fn load(&mut self, graph: &Graph, leaves: &[(TensorId, Vec<u8>)]) -> Result<(), String> {
        let buft = self.device.buffer_type();
        let align = buft.alignment();
        let mut root_off = vec![0u64; graph.len()];
        let mut roots = Vec::new();
        let mut total = 0u64;
        for t in graph.ids() {
            let d = graph.desc(t);
            if d.view_source().is_none() {
                let start = total + round_up(GUARD, align);
                let end = round_up(start + d.nbytes(), align) + GUARD;
                root_off[t.index()] = start;
                roots.push((start, d.nbytes(), end));
                total = end;
            }
        }
        let buffer = buft.alloc_buffer(total).map_err(|e| e.to_string())?;
        buffer.clear(GUARD_FILL).map_err(|e| e.to_string())?;
        let mut descs = graph.tensors().to_vec();
        for t in graph.ids() {
            let d = &mut descs[t.index()];
            d.buffer = buffer.id();
            d.offset = root_off[graph.storage_root(t).index()] + graph.offset_in_root(t);
        }
        for t in graph
            .ids()
            .filter(|&t| graph.desc(t).view_source().is_none())
        {
            let d = &descs[t.index()];
            match leaves.iter().find(|(l, _)| *l == t) {
                Some((_, data)) => buffer.set_tensor(d, 0, data),
                None => buffer.memset_tensor(d, UNWRITTEN_FILL, 0, d.nbytes()),
            }
            .map_err(|e| e.to_string())?;
        }
        self.loaded = Some(Loaded {
            descs,
            buffer,
            roots,
        });
        Ok(())
    }

    fn compute(&mut self) -> Result<(), String> {
        let l = self.loaded.as_ref().ok_or("nothing loaded")?;
        self.stream
            .graph_compute(&l.descs)
            .map_err(|e| e.to_string())?;
        self.stream.synchronize().map_err(|e| e.to_string())
    }

    fn read_f32(&mut self, t: TensorId) -> Result<Vec<f32>, String> {
        let l = self.loaded.as_ref().ok_or("nothing loaded")?;
        let d = &l.descs[t.index()];
        let mut bytes = vec![0u8; d.nbytes() as usize];
        l.buffer
            .get_tensor(d, 0, &mut bytes)
            .map_err(|e| e.to_string())?;
        Ok(backplane::host::read_f32(d, &bytes))
    }

    fn guard_violations(&mut self) -> Vec<String> {
        let Some(l) = self.loaded.as_ref() else {
            return Vec::new();
        };
        // SAFETY: the buffer is host memory of `size()` bytes (is_host).
        let all = unsafe {
            std::slice::from_raw_parts(l.buffer.base() as *const u8, l.buffer.size() as usize)
        };
        let mut out = Vec::new();
        let mut prev_end = 0u64;
        for (i, &(start, len, end)) in l.roots.iter().enumerate() {
            let bad = all[prev_end as usize..start as usize]
                .iter()
                .chain(&all[(start + len) as usize..end as usize])
                .filter(|&&b| b != GUARD_FILL)
                .count();
            if bad > 0 {
                out.push(format!("root {i}: {bad} guard bytes written"));
            }
            prev_end = end;
        }
        out
    }
}
