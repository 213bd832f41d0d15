//! A device from the registry (a loaded plugin, or the built-in CPU) as a
//! conformance [`Target`]: tensors live in one buffer of the device's
//! buffer type, with guard regions around each, and graphs run through the
//! plugin ABI exactly as the scheduler would run them. With weight layouts
//! on, leaves whose every reader an extra buffer type of the device runs
//! (the CPU's repacked weights) go into a buffer of that type instead, as
//! the model loader places them. [`discover`] makes one for every device
//! the registry finds.

use backplane::registry::{Buffer, Device, Stream};
use backplane::{DType, Graph, TensorDesc, TensorId};

use crate::guarded::{GUARD_BYTES, GUARD_FILL, UNWRITTEN_FILL};
use crate::target::Target;

struct Loaded {
    graph: Graph,
    descs: Vec<TensorDesc>,
    buffer: Buffer,
    /// Buffers of extra buffer types holding leaves in the device's own
    /// layout (kept alive with the case).
    _extra: Vec<Buffer>,
    /// (root, start of its bytes, len, guarded span end) per storage root.
    roots: Vec<(TensorId, u64, u64, u64)>,
    /// Bytes of the buffer the case uses.
    total: u64,
    /// Those bytes as read back after the last compute, for cases of at
    /// most [`SNAPSHOT_MAX`] bytes: the output and every guard come from
    /// one read instead of one per tensor and guard.
    snapshot: Option<Vec<u8>>,
}

impl Loaded {
    /// The whole case as read back once (small cases only).
    fn snapshot(&mut self) -> Result<Option<&[u8]>, String> {
        if self.total > SNAPSHOT_MAX {
            return Ok(None);
        }
        if self.snapshot.is_none() {
            let mut bytes = vec![0u8; self.total as usize];
            let raw = DeviceTarget::raw_desc(&self.buffer, 0, self.total);
            self.buffer
                .get_tensor(&raw, 0, &mut bytes)
                .map_err(|e| format!("reading back the case's {} bytes: {e}", self.total))?;
            self.snapshot = Some(bytes);
        }
        Ok(self.snapshot.as_deref())
    }
}

/// A registry device under test.
pub struct DeviceTarget {
    name: String,
    device: Device,
    stream: Stream,
    loaded: Option<Loaded>,
    weight_layouts: bool,
}

impl DeviceTarget {
    /// Opens a stream on `device` with its backend's default options;
    /// `name` is what reports call it.
    pub fn new(name: String, device: Device) -> Result<DeviceTarget, String> {
        DeviceTarget::with_params(name, device, "")
    }

    /// Opens a stream on `device` with `params` (its backend's options,
    /// `key=value;...`); `name` is what reports call it.
    pub fn with_params(name: String, device: Device, params: &str) -> Result<DeviceTarget, String> {
        let stream = device
            .init_backend(params)
            .map_err(|e| format!("{name}: cannot open a stream: {e}"))?;
        Ok(DeviceTarget {
            name,
            device,
            stream,
            loaded: None,
            weight_layouts: false,
        })
    }

    /// Whether leaves go into the device's extra buffer types where one
    /// runs every op reading them (off by default).
    pub fn use_weight_layouts(&mut self, on: bool) {
        self.weight_layouts = on;
    }

    /// The extra buffer type (index) of the device each tensor of `graph`
    /// goes into: the scheduler's choice for leaves
    /// ([`backplane::sched::by_preferred_type`]), none when off.
    fn in_extra_types(&self, graph: &Graph) -> Vec<Option<usize>> {
        let mut slot = vec![None; graph.len()];
        let extra = self.device.extra_buffer_types();
        if !self.weight_layouts || extra.is_empty() {
            return slot;
        }
        let leaves: Vec<TensorId> = graph
            .ids()
            .filter(|&t| {
                let d = graph.desc(t);
                d.op().is_ok_and(|op| op == backplane::Op::None) && d.view_source().is_none()
            })
            .collect();
        let groups = backplane::sched::by_preferred_type(graph, extra, &leaves);
        for (i, group) in groups.iter().enumerate().skip(1) {
            for t in group {
                slot[t.index()] = Some(i - 1);
            }
        }
        slot
    }

    fn raw_desc(buffer: &Buffer, offset: u64, len: u64) -> TensorDesc {
        let mut d = TensorDesc::new(DType::I8, [len as i64, 1, 1, 1]);
        d.buffer = buffer.id();
        d.offset = offset;
        d
    }
}

/// Cases using at most this many bytes are read back in one call.
const SNAPSHOT_MAX: u64 = 1 << 20;
/// A buffer from the previous case is kept for the next when it is large
/// enough and no larger than 4 times the need (or this).
const REUSE_MAX_SLACK: u64 = 1 << 20;

/// Guard regions at most this far apart are read in one call.
const GUARD_READ_GAP: u64 = 64 << 10;

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
        // The previous case's buffer serves again when it fits (it is
        // cleared below like a new one): one allocation less per case, which
        // is a round trip on a remote device.
        let kept = self.loaded.take().map(|l| l.buffer).filter(|b| {
            b.size() >= total && b.size() <= total.saturating_mul(4).max(REUSE_MAX_SLACK)
        });
        let buffer = match kept {
            Some(b) => b,
            None => buft
                .alloc_buffer(total)
                .map_err(|e| format!("alloc {total} bytes: {e}"))?,
        };
        buffer
            .clear(GUARD_FILL)
            .map_err(|e| format!("clear: {e}"))?;
        let mut descs = graph.tensors().to_vec();
        for t in graph.ids() {
            let d = &mut descs[t.index()];
            d.buffer = buffer.id();
            d.offset = root_off[graph.storage_root(t).index()] + graph.offset_in_root(t);
        }
        // Leaves in the device's own layouts: one buffer per extra type.
        let slots = self.in_extra_types(graph);
        let mut extra_buffers = Vec::new();
        for (i, buft) in self.device.extra_buffer_types().iter().enumerate() {
            let mine: Vec<TensorId> = graph
                .ids()
                .filter(|t| slots[t.index()] == Some(i))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let align = buft.alignment().max(1);
            let mut offsets = Vec::new();
            let mut end = 0u64;
            for &t in &mine {
                let off = round_up(end, align);
                end = off + buft.alloc_size(graph.desc(t)).max(graph.desc(t).nbytes());
                offsets.push(off);
            }
            let extra = buft
                .alloc_buffer(end.max(1))
                .map_err(|e| format!("alloc {end} bytes of {}: {e}", buft.name()))?;
            for (&t, off) in mine.iter().zip(offsets) {
                let d = &mut descs[t.index()];
                d.buffer = extra.id();
                d.offset = off;
            }
            extra_buffers.push(extra);
        }
        for &(t, _, len, _) in &roots {
            let d = &descs[t.index()];
            let buf = match slots[t.index()] {
                Some(_) => extra_buffers
                    .iter()
                    .find(|b| b.id() == d.buffer)
                    .ok_or("extra buffer lost")?,
                None => &buffer,
            };
            match leaves.iter().find(|(l, _)| *l == t) {
                Some((_, data)) => buf
                    .set_tensor(d, 0, data)
                    .map_err(|e| format!("set {}: {e}", graph.name(t)))?,
                None => buf
                    .memset_tensor(d, UNWRITTEN_FILL, 0, len)
                    .map_err(|e| format!("memset {}: {e}", graph.name(t)))?,
            }
        }
        self.loaded = Some(Loaded {
            graph: graph.clone(),
            descs,
            buffer,
            _extra: extra_buffers,
            roots,
            total,
            snapshot: None,
        });
        Ok(())
    }

    fn compute(&mut self) -> Result<(), String> {
        let l = self.loaded.as_mut().ok_or("nothing loaded")?;
        l.snapshot = None;
        self.stream
            .graph_compute(&l.descs)
            .map_err(|e| e.to_string())?;
        self.stream.synchronize().map_err(|e| e.to_string())
    }

    fn compute_repeated(&mut self, reps: usize) -> Result<(), String> {
        let l = self.loaded.as_mut().ok_or("nothing loaded")?;
        l.snapshot = None;
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
        let l = self.loaded.as_mut().ok_or("nothing loaded")?;
        let d = l.descs[t.index()];
        if let Some(all) = l.snapshot()? {
            let start = d.offset as usize;
            let bytes = all
                .get(start..start + d.nbytes() as usize)
                .ok_or_else(|| format!("tensor {} lies outside the case's bytes", t.index()))?;
            return Ok(backplane::host::read_f32(&d, bytes));
        }
        let d = &d;
        let mut bytes = vec![0u8; d.nbytes() as usize];
        l.buffer
            .get_tensor(d, 0, &mut bytes)
            .map_err(|e| format!("get {}: {e}", l.graph.name(t)))?;
        Ok(backplane::host::read_f32(d, &bytes))
    }

    fn guard_violations(&mut self) -> Vec<String> {
        let Some(l) = self.loaded.as_mut() else {
            return Vec::new();
        };
        if let Err(e) = l.snapshot() {
            return vec![format!("cannot read guards: {e}")];
        }
        let l = &*l;
        let snapshot = l.snapshot.as_deref();
        // The guard regions of every root in buffer order, read in as few
        // get_tensor calls as reasonable: regions closer than
        // GUARD_READ_GAP bytes are read in one span (tensor bytes between
        // them come along and are skipped), since each call can be a round
        // trip (a remote device) or a queue submission (a GPU).
        let mut regions: Vec<(usize, u64, u64)> = Vec::new();
        let mut prev_end = 0u64;
        for (k, &(_, start, len, end)) in l.roots.iter().enumerate() {
            for (from, to) in [(prev_end, start), (start + len, end)] {
                if to > from {
                    regions.push((k, from, to));
                }
            }
            prev_end = end;
        }
        let mut bad = vec![0usize; l.roots.len()];
        let mut unreadable: Vec<String> = Vec::new();
        let mut i = 0;
        while i < regions.len() {
            let span_start = regions[i].1;
            let mut j = i;
            while j + 1 < regions.len() && regions[j + 1].1 - regions[j].2 <= GUARD_READ_GAP {
                j += 1;
            }
            let span_end = regions[j].2;
            let read = match snapshot {
                Some(all) => Ok(all[span_start as usize..span_end as usize].to_vec()),
                None => {
                    let mut bytes = vec![0u8; (span_end - span_start) as usize];
                    let raw = DeviceTarget::raw_desc(&l.buffer, span_start, span_end - span_start);
                    l.buffer.get_tensor(&raw, 0, &mut bytes).map(|()| bytes)
                }
            };
            match read {
                Ok(bytes) => {
                    for &(k, from, to) in &regions[i..=j] {
                        let part = &bytes[(from - span_start) as usize..(to - span_start) as usize];
                        bad[k] += part.iter().filter(|&&b| b != GUARD_FILL).count();
                    }
                }
                Err(e) => {
                    for &(k, _, _) in &regions[i..=j] {
                        let name = l.graph.name(l.roots[k].0);
                        let line = format!("cannot read guards of '{name}': {e}");
                        if !unreadable.contains(&line) {
                            unreadable.push(line);
                        }
                    }
                }
            }
            i = j + 1;
        }
        let mut out = unreadable;
        for (k, &(t, _, len, _)) in l.roots.iter().enumerate() {
            if bad[k] > 0 {
                out.push(format!(
                    "tensor '{}': {} guard bytes around its {len} bytes were written",
                    l.graph.name(t),
                    bad[k]
                ));
            }
        }
        out
    }
}

/// Every device the registry finds (plugins from the standard search
/// path, and the built-in CPU backend when no CPU plugin loads), as targets
/// named `<backend>` (or `<backend>:<device>` for a backend with several
/// devices), keeping those whose backend or full name matches `filter`
/// (all when empty), each stream opened with its backend's params from
/// `options`. Backends that load with no devices are reported on stderr
/// with their reason.
pub fn discover(
    filter: &[String],
    weight_layouts: bool,
    options: &backplane::sched::BackendOptions,
) -> Result<Vec<Box<dyn Target>>, String> {
    let registry = backplane::registry::Registry::discover(Some(backplane::builtin_cpu()));
    let mut out: Vec<Box<dyn Target>> = Vec::new();
    let mut names = Vec::new();
    for backend in registry.backends() {
        if backend.devices.is_empty() {
            let why = backend
                .no_device_reason
                .as_deref()
                .unwrap_or("no reason given");
            eprintln!("note: backend {} has no devices: {why}", backend.name);
        }
        let several = backend.devices.len() > 1;
        for device in &backend.devices {
            let name = if several {
                format!("{}:{}", backend.name, device.name())
            } else {
                backend.name.clone()
            };
            names.push(name.clone());
            let wanted = filter.is_empty()
                || filter.iter().any(|f| {
                    f.eq_ignore_ascii_case(&name) || f.eq_ignore_ascii_case(&backend.name)
                });
            if wanted {
                let params = options.params(&backend.name);
                let mut target = DeviceTarget::with_params(name, device.clone(), params)?;
                target.use_weight_layouts(weight_layouts);
                out.push(Box::new(target));
            }
        }
    }
    for r in registry.refused() {
        eprintln!(
            "note: refused {}: {}",
            r.path.display(),
            r.reason.lines().next().unwrap_or("")
        );
    }
    for f in filter {
        let known = names.iter().any(|n| {
            n.eq_ignore_ascii_case(f)
                || n.split(':')
                    .next()
                    .is_some_and(|b| b.eq_ignore_ascii_case(f))
        });
        if !known {
            return Err(format!(
                "backend '{f}' not found (available: {})",
                names.join(", ")
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use backplane::registry::{Registry, RegistryOptions, SearchPath};

    fn cpu_device() -> Device {
        let empty = std::env::temp_dir().join(format!(
            "backplane-conformance-empty-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&empty).unwrap();
        let reg = Registry::load(&RegistryOptions {
            search: SearchPath::only([empty]),
            builtin: Some(backplane::builtin_cpu()),
        });
        reg.backend("cpu").unwrap().devices[0].clone()
    }

    /// `a + b` of `n` f32 each, loaded on a built-in CPU target and computed.
    fn add_case(target: &mut DeviceTarget, n: i64) -> (Graph, TensorId) {
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &[n]).unwrap();
        let b = g.input("b", DType::F32, &[n]).unwrap();
        let c = g.add(a, b).unwrap();
        g.mark_output(c).unwrap();
        let ones: Vec<u8> = (0..n).flat_map(|_| 1f32.to_le_bytes()).collect();
        let twos: Vec<u8> = (0..n).flat_map(|_| 2f32.to_le_bytes()).collect();
        target.load(&g, &[(a, ones), (b, twos)]).unwrap();
        target.compute().unwrap();
        (g, c)
    }

    /// Writes one byte just past the end of `t`'s bytes, as a kernel
    /// overrunning its output would.
    fn overrun(target: &DeviceTarget, t: TensorId) {
        let l = target.loaded.as_ref().unwrap();
        let d = &l.descs[t.index()];
        let raw = DeviceTarget::raw_desc(&l.buffer, d.offset + d.nbytes(), 1);
        l.buffer.set_tensor(&raw, 0, &[0]).unwrap();
    }

    #[test]
    fn overrun_is_caught_in_a_small_case_read_back_in_one_call() {
        let mut target = DeviceTarget::new("cpu".into(), cpu_device()).unwrap();
        let (_, c) = add_case(&mut target, 64);
        assert!(target.loaded.as_ref().unwrap().total <= SNAPSHOT_MAX);
        assert_eq!(target.read_f32(c).unwrap(), vec![3.0; 64]);
        assert!(target.guard_violations().is_empty());
        overrun(&target, c);
        // The snapshot read before the overrun is dropped by the next compute.
        target.compute().unwrap();
        let v = target.guard_violations();
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("1 guard bytes"), "{v:?}");
    }

    #[test]
    fn overrun_is_caught_in_a_large_case_read_in_spans() {
        let mut target = DeviceTarget::new("cpu".into(), cpu_device()).unwrap();
        let n = 200_000; // 800 kB per tensor: over the one-read size
        let (_, c) = add_case(&mut target, n);
        assert!(target.loaded.as_ref().unwrap().total > SNAPSHOT_MAX);
        assert!(target.read_f32(c).unwrap().iter().all(|&v| v == 3.0));
        assert!(target.guard_violations().is_empty());
        overrun(&target, c);
        let v = target.guard_violations();
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("1 guard bytes"), "{v:?}");
    }

    #[test]
    fn a_smaller_case_reuses_the_buffer_and_starts_from_clean_guards() {
        let mut target = DeviceTarget::new("cpu".into(), cpu_device()).unwrap();
        let (_, c) = add_case(&mut target, 256);
        overrun(&target, c);
        let first = target.loaded.as_ref().unwrap().buffer.id();
        let (_, c) = add_case(&mut target, 64);
        assert_eq!(target.loaded.as_ref().unwrap().buffer.id(), first);
        assert_eq!(target.read_f32(c).unwrap(), vec![3.0; 64]);
        assert!(target.guard_violations().is_empty());
    }

    #[test]
    fn weight_layouts_put_mat_mul_weights_in_the_devices_own_layout() {
        let cpu = cpu_device();
        if cpu.extra_buffer_types().is_empty() {
            return; // no repacked kernels on this CPU
        }
        let mut g = Graph::new();
        let w = g.weight("w", DType::Q8_0, &[64, 16]).unwrap();
        let x = g.input("x", DType::F32, &[64, 1]).unwrap();
        let y = g.mul_mat(w, x).unwrap();
        g.mark_output(y).unwrap();
        let mut q = vec![0u8; DType::Q8_0.row_size(64).unwrap() * 16];
        for (r, row) in q
            .chunks_exact_mut(DType::Q8_0.row_size(64).unwrap())
            .enumerate()
        {
            let v: Vec<f32> = (0..64).map(|k| ((r * 64 + k) % 7) as f32 - 3.0).collect();
            backplane_quant::quantize_row(DType::Q8_0, &v, row).unwrap();
        }
        let ones: Vec<u8> = (0..64).flat_map(|_| 1f32.to_le_bytes()).collect();
        let mut out = Vec::new();
        for on in [false, true] {
            let mut target = DeviceTarget::new("cpu".into(), cpu.clone()).unwrap();
            target.use_weight_layouts(on);
            target
                .load(&g, &[(w, q.clone()), (x, ones.clone())])
                .unwrap();
            let l = target.loaded.as_ref().unwrap();
            assert_eq!(l.descs[w.index()].buffer != l.buffer.id(), on);
            assert_eq!(l.descs[x.index()].buffer, l.buffer.id());
            target.compute().unwrap();
            out.push(target.read_f32(y).unwrap());
            assert!(target.guard_violations().is_empty());
        }
        assert_eq!(out[0], out[1]);
    }
}
