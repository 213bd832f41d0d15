//! Host storage with guard regions around every tensor, to catch kernels
//! that write outside their output.

use backplane::host::read_f32;
use backplane::{Graph, TensorId};

/// Bytes of guard before and after each tensor.
pub const GUARD_BYTES: usize = 256;
/// The byte guards are filled with.
pub const GUARD_FILL: u8 = 0xA5;
/// The byte outputs are filled with before compute: all-ones is NaN in
/// every float type, so an element a kernel forgets to write fails.
pub const UNWRITTEN_FILL: u8 = 0xFF;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// One region per storage root: guard, tensor bytes, guard.
pub struct GuardedHost {
    lines: Vec<Line>,
    /// Byte offset of each tensor's first element.
    offsets: Vec<usize>,
    /// (start, len) of each root's tensor bytes.
    roots: Vec<(TensorId, usize, usize)>,
}

impl GuardedHost {
    /// Lays out every root of `graph` with guards; leaves get `leaves`
    /// data, other roots the unwritten pattern.
    pub fn new(graph: &Graph, leaves: &[(TensorId, Vec<u8>)]) -> Result<GuardedHost, String> {
        let mut root_off = vec![usize::MAX; graph.len()];
        let mut roots = Vec::new();
        let mut total = 0usize;
        for t in graph.ids() {
            if graph.desc(t).view_source().is_none() {
                let n = graph.desc(t).nbytes() as usize;
                let start = total + GUARD_BYTES;
                root_off[t.0] = start;
                roots.push((t, start, n));
                total = start + n.div_ceil(64) * 64 + GUARD_BYTES;
            }
        }
        let offsets = graph
            .ids()
            .map(|t| root_off[graph.storage_root(t).0] + graph.offset_in_root(t) as usize)
            .collect();
        let mut h = GuardedHost {
            lines: vec![Line([GUARD_FILL; 64]); total / 64],
            offsets,
            roots,
        };
        let roots = h.roots.clone();
        for (t, start, n) in roots {
            h.bytes_mut()[start..start + n].fill(UNWRITTEN_FILL);
            if let Some((_, data)) = leaves.iter().find(|(l, _)| *l == t) {
                if data.len() != n {
                    return Err(format!(
                        "leaf {} needs {n} bytes, got {}",
                        graph.name(t),
                        data.len()
                    ));
                }
                h.bytes_mut()[start..start + n].copy_from_slice(data);
            }
        }
        Ok(h)
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: Line is 64 plain bytes; the slice covers the lines exactly.
        unsafe {
            std::slice::from_raw_parts(self.lines.as_ptr().cast::<u8>(), self.lines.len() * 64)
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, with unique access.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.lines.as_mut_ptr().cast::<u8>(),
                self.lines.len() * 64,
            )
        }
    }

    /// Pointers to each tensor's first element.
    pub fn pointers(&mut self) -> Vec<*mut u8> {
        let base = self.lines.as_mut_ptr().cast::<u8>();
        // SAFETY: every offset lies inside the allocation.
        self.offsets
            .iter()
            .map(|&o| unsafe { base.add(o) })
            .collect()
    }

    /// A tensor read as f32 in logical order.
    pub fn read(&self, graph: &Graph, t: TensorId) -> Vec<f32> {
        read_f32(graph.desc(t), &self.bytes()[self.offsets[t.0]..])
    }

    /// Guards that were overwritten, one line per tensor.
    pub fn violations(&self, graph: &Graph) -> Vec<String> {
        let b = self.bytes();
        let mut out = Vec::new();
        for &(t, start, n) in &self.roots {
            let before = &b[start - GUARD_BYTES..start];
            let after = &b[start + n..start + n.div_ceil(64) * 64 + GUARD_BYTES];
            let bad_before = before.iter().filter(|&&x| x != GUARD_FILL).count();
            let bad_after = after.iter().filter(|&&x| x != GUARD_FILL).count();
            if bad_before + bad_after > 0 {
                out.push(format!(
                    "tensor '{}': {bad_before} bytes written before and {bad_after} after its {n} bytes",
                    graph.name(t)
                ));
            }
        }
        out
    }
}
