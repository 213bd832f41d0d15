//! A device from the registry (a loaded plugin, or the built-in CPU) as a
//! conformance [`Target`]: tensors live in one buffer of the device's
//! buffer type, with guard regions around each, and graphs run through the
//! plugin ABI exactly as the scheduler would run them.

use backplane::registry::{Buffer, Device, Stream};
use backplane::{DType, Graph, TensorDesc, TensorId};

use crate::guarded::{GUARD_BYTES, GUARD_FILL, UNWRITTEN_FILL};
use crate::target::Target;

struct Loaded {
    graph: Graph,
    descs: Vec<TensorDesc>,
    buffer: Buffer,
    /// (root, start of its bytes, len, guarded span end) per storage root.
    roots: Vec<(TensorId, u64, u64, u64)>,
}

/// A registry device under test.
pub struct DeviceTarget {
    name: String,
    device: Device,
    stream: Stream,
    loaded: Option<Loaded>,
}

impl DeviceTarget {
    /// Opens a stream on `device`; `name` is what reports call it.
    pub fn new(name: String, device: Device) -> Result<DeviceTarget, String> {
        let stream = device
            .init_backend("")
            .map_err(|e| format!("{name}: cannot open a stream: {e}"))?;
        Ok(DeviceTarget {
            name,
            device,
            stream,
            loaded: None,
        })
    }

    fn raw_desc(buffer: &Buffer, offset: u64, len: u64) -> TensorDesc {
        let mut d = TensorDesc::new(DType::I8, [len as i64, 1, 1, 1]);
        d.buffer = buffer.id();
        d.offset = offset;
        d
    }
}

fn round_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a.max(1)) * a.max(1)
}

impl Target for DeviceTarget {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn description(&self) -> String {
        self.device.description()
    }

    fn is_host_emulated(&self) -> bool {
        self.device.device_type().name() == "cpu" && self.device.backend() != "cpu"
    }

    fn supports(&self, graph: &Graph, node: TensorId) -> Result<(), String> {
        let v = self.device.supports_op(graph.tensors(), node.index());
        match v.reason() {
            None => Ok(()),
            Some(r) => Err(r.to_string()),
        }
    }

    fn load(&mut self, graph: &Graph, leaves: &[(TensorId, Vec<u8>)]) -> Result<(), String> {
        let buft = self.device.buffer_type();
        let align = buft.alignment().max(1);
        let guard = round_up(GUARD_BYTES as u64, align);
        let mut roots = Vec::new();
        let mut root_off = vec![u64::MAX; graph.len()];
        let mut total = 0u64;
        for t in graph.ids() {
            let d = graph.desc(t);
            if d.view_source().is_none() {
                let start = total + guard;
                let size = buft.alloc_size(d).max(d.nbytes());
                let end = round_up(start + size, align) + guard;
                root_off[t.index()] = start;
                roots.push((t, start, d.nbytes(), end));
                total = end;
            }
        }
        if total > buft.max_size() && buft.max_size() > 0 {
            return Err(format!(
                "case needs {total} bytes, over the buffer type's max size {}",
                buft.max_size()
            ));
        }
        let buffer = buft
            .alloc_buffer(total)
            .map_err(|e| format!("alloc {total} bytes: {e}"))?;
        buffer
            .clear(GUARD_FILL)
            .map_err(|e| format!("clear: {e}"))?;
        let mut descs = graph.tensors().to_vec();
        for t in graph.ids() {
            let d = &mut descs[t.index()];
            d.buffer = buffer.id();
            d.offset = root_off[graph.storage_root(t).index()] + graph.offset_in_root(t);
        }
        for &(t, _, len, _) in &roots {
            let d = &descs[t.index()];
            match leaves.iter().find(|(l, _)| *l == t) {
                Some((_, data)) => buffer
                    .set_tensor(d, 0, data)
                    .map_err(|e| format!("set {}: {e}", graph.name(t)))?,
                None => buffer
                    .memset_tensor(d, UNWRITTEN_FILL, 0, len)
                    .map_err(|e| format!("memset {}: {e}", graph.name(t)))?,
            }
        }
        self.loaded = Some(Loaded {
            graph: graph.clone(),
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

    fn compute_repeated(&mut self, reps: usize) -> Result<(), String> {
        let l = self.loaded.as_ref().ok_or("nothing loaded")?;
        // Copies of the compute nodes appended after the graph: each reads
        // the same sources (earlier in the array) and rewrites the same
        // output, so the array stays in topological order.
        let nodes: Vec<TensorDesc> = l
            .graph
            .compute_nodes()
            .map(|t| l.descs[t.index()])
            .collect();
        let mut descs = l.descs.clone();
        for _ in 1..reps {
            descs.extend_from_slice(&nodes);
        }
        self.stream
            .graph_compute(&descs)
            .map_err(|e| e.to_string())?;
        self.stream.synchronize().map_err(|e| e.to_string())
    }

    fn read_f32(&mut self, t: TensorId) -> Result<Vec<f32>, String> {
        let l = self.loaded.as_ref().ok_or("nothing loaded")?;
        let d = &l.descs[t.index()];
        let mut bytes = vec![0u8; d.nbytes() as usize];
        l.buffer
            .get_tensor(d, 0, &mut bytes)
            .map_err(|e| format!("get {}: {e}", l.graph.name(t)))?;
        Ok(backplane::host::read_f32(d, &bytes))
    }

    fn guard_violations(&mut self) -> Vec<String> {
        let Some(l) = self.loaded.as_ref() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut prev_end = 0u64;
        for &(t, start, len, end) in &l.roots {
            let mut bad = 0usize;
            for (from, to) in [(prev_end, start), (start + len, end)] {
                if to <= from {
                    continue;
                }
                let mut bytes = vec![0u8; (to - from) as usize];
                let raw = DeviceTarget::raw_desc(&l.buffer, from, to - from);
                if let Err(e) = l.buffer.get_tensor(&raw, 0, &mut bytes) {
                    out.push(format!("cannot read guards of '{}': {e}", l.graph.name(t)));
                    continue;
                }
                bad += bytes.iter().filter(|&&b| b != GUARD_FILL).count();
            }
            if bad > 0 {
                out.push(format!(
                    "tensor '{}': {bad} guard bytes around its {len} bytes were written",
                    l.graph.name(t)
                ));
            }
            prev_end = end;
        }
        out
    }
}
