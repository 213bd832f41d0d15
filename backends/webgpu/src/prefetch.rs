//! A graph's outputs copied for the host inside the graph's own wait.
//!
//! A host reads a graph's results (a model's logits, every token) right
//! after `graph_compute` returns. Read the plain way, that is a second
//! round trip: submit a copy, map, wait again. Instead the stream copies
//! the tensors the graph flags OUTPUT (of this device's plain buffers, up
//! to [`PREFETCH_MAX`] bytes) into a staging buffer after its kernels,
//! asks for it mapped, and its wait completes both. A read of those bytes
//! is then a copy from mapped memory.
//!
//! What is held is valid until anything writes the device's memory: every
//! writer ([`Prefetch::forget`]: a graph, a tensor write, fill, copy or
//! clear) drops it first, and a generation count rejects a copy that a
//! writer overtook (another stream's graph submitted while this one
//! waited).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};

use backplane_abi::{TensorDesc, flags};

use crate::lock;

/// Most bytes of outputs copied per graph (a model's logits are 0.5 MB).
pub const PREFETCH_MAX: u64 = 64 << 20;

/// Copies are made in units of this many bytes (WebGPU's copy alignment).
const ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

/// Reads served from prefetched outputs in this process.
static SERVED: AtomicU64 = AtomicU64::new(0);

/// How many reads of this process were served from prefetched outputs
/// (for tests and measurements).
pub fn prefetched_reads() -> u64 {
    SERVED.load(Ordering::Relaxed)
}

/// Bytes of a device buffer held in the staging buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Held {
    /// The device buffer's id.
    buffer: u64,
    /// Its bytes `[start, end)` (aligned).
    start: u64,
    end: u64,
    /// Where they start in the staging buffer.
    at: u64,
}

#[derive(Default)]
struct State {
    /// Bumped by every [`Prefetch::forget`].
    generation: u64,
    /// Grown to the largest set of outputs seen (to a power of two).
    staging: Option<wgpu::Buffer>,
    /// Whether `staging` is mapped (or a mapping is pending).
    mapped: bool,
    /// What it holds; empty unless a mapping completed and nothing wrote
    /// since.
    held: Vec<Held>,
}

/// One device's prefetched outputs.
#[derive(Default)]
pub struct Prefetch {
    state: Mutex<State>,
}

/// Copies recorded for one graph, before they are submitted.
pub struct Recorded {
    generation: u64,
    held: Vec<Held>,
}

/// Copies submitted for one graph, waiting for the graph's wait.
pub struct Pending {
    generation: u64,
    held: Vec<Held>,
    mapped: Receiver<Result<(), wgpu::BufferAsyncError>>,
}

/// The aligned byte ranges of `graph`'s OUTPUT tensors that `resolve`
/// finds (in a plain buffer of this device), each with what `resolve`
/// gave and its staging offset; none past [`PREFETCH_MAX`] bytes in all.
fn plan<B>(graph: &[TensorDesc], resolve: impl Fn(&TensorDesc) -> Option<B>) -> Vec<(Held, B)> {
    let mut held: Vec<(Held, B)> = Vec::new();
    let mut at = 0;
    for t in graph.iter().filter(|t| t.has_flag(flags::OUTPUT)) {
        if t.nbytes() == 0 {
            continue;
        }
        let start = t.offset - t.offset % ALIGN;
        let end = t.offset.saturating_add(t.nbytes()).next_multiple_of(ALIGN);
        let duplicate = held
            .iter()
            .any(|(h, _)| h.buffer == t.buffer && h.start <= start && end <= h.end);
        if duplicate || at + (end - start) > PREFETCH_MAX {
            continue;
        }
        let Some(b) = resolve(t) else {
            continue;
        };
        let h = Held {
            buffer: t.buffer,
            start,
            end,
            at,
        };
        held.push((h, b));
        // Each range starts where a mapped view may begin.
        at = (at + end - start).next_multiple_of(wgpu::MAP_ALIGNMENT);
    }
    held
}

impl Prefetch {
    /// Drops what is held: call before anything writes the device's
    /// memory. The staging buffer is unmapped so a graph may copy into it.
    pub fn forget(&self) {
        let mut s = lock(&self.state);
        s.generation += 1;
        s.held.clear();
        if s.mapped {
            if let Some(b) = &s.staging {
                b.unmap();
            }
            s.mapped = false;
        }
    }

    /// Records into `enc` copies of `graph`'s OUTPUT tensors for which
    /// `resolve` finds the wgpu buffer (a plain buffer of this device),
    /// after the graph's kernels. Call [`Prefetch::map`] after submitting
    /// `enc`, then [`Prefetch::finish`] after the wait.
    pub fn copy_outputs(
        &self,
        device: &wgpu::Device,
        enc: &mut wgpu::CommandEncoder,
        graph: &[TensorDesc],
        resolve: impl Fn(&TensorDesc) -> Option<Arc<wgpu::Buffer>>,
    ) -> Option<Recorded> {
        let held = plan(graph, resolve);
        let bytes = held.last().map(|(h, _)| h.at + (h.end - h.start))?;
        let mut s = lock(&self.state);
        if s.mapped {
            // Nothing forgot it since the last graph (a graph always does):
            // leave the outputs to a plain read.
            return None;
        }
        if s.staging.as_ref().is_none_or(|b| b.size() < bytes) {
            s.staging = Some(device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("backplane output prefetch"),
                size: bytes.next_power_of_two(),
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }));
        }
        let staging = s.staging.as_ref().expect("just made");
        let mut copied = Vec::with_capacity(held.len());
        for (h, buffer) in held {
            let end = h.end.min(buffer.size());
            if h.start < end {
                enc.copy_buffer_to_buffer(&buffer, h.start, staging, h.at, end - h.start);
                copied.push(Held { end, ..h });
            }
        }
        Some(Recorded {
            generation: s.generation,
            held: copied,
        })
    }

    /// Asks for the staging buffer mapped once the copies `recorded` by
    /// [`Prefetch::copy_outputs`] are submitted.
    pub fn map(&self, recorded: Recorded) -> Option<Pending> {
        let Recorded { generation, held } = recorded;
        let bytes = held.last().map(|h| h.at + (h.end - h.start))?;
        let mut s = lock(&self.state);
        if s.generation != generation || s.mapped {
            return None;
        }
        let staging = s.staging.as_ref()?;
        let (tx, rx) = std::sync::mpsc::channel();
        staging
            .slice(..bytes)
            .map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
        s.mapped = true;
        Some(Pending {
            generation,
            held,
            mapped: rx,
        })
    }

    /// After the graph's wait: holds the copies if the mapping completed
    /// and nothing wrote the device's memory since they were recorded.
    pub fn finish(&self, pending: Pending) {
        let ok = matches!(pending.mapped.try_recv(), Ok(Ok(())));
        let mut s = lock(&self.state);
        if ok && s.generation == pending.generation {
            s.held = pending.held;
        } else if s.mapped {
            // Failed or overtaken: unmap (cancelling a pending mapping) so
            // the next graph can copy into it.
            if let Some(b) = &s.staging {
                b.unmap();
            }
            s.mapped = false;
            s.held.clear();
        }
    }

    /// Copies `out.len()` bytes at byte `start` of buffer `buffer` from
    /// what is held; false (nothing copied) when they are not all held.
    pub fn read(&self, buffer: u64, start: u64, out: &mut [u8]) -> bool {
        let s = lock(&self.state);
        let end = start.saturating_add(out.len() as u64);
        let Some(h) = s
            .held
            .iter()
            .find(|h| h.buffer == buffer && h.start <= start && end <= h.end)
        else {
            return false;
        };
        let Some(staging) = &s.staging else {
            return false;
        };
        let from = h.at + (start - h.start);
        // Mapped views start at multiples of MAP_ALIGNMENT and span whole
        // copy units; the held range's own units bound this one.
        let first = from - from % wgpu::MAP_ALIGNMENT;
        let last = (from + out.len() as u64).next_multiple_of(ALIGN);
        let Ok(view) = staging.slice(first..last).get_mapped_range() else {
            return false;
        };
        let skip = (from - first) as usize;
        out.copy_from_slice(&view[skip..skip + out.len()]);
        SERVED.fetch_add(1, Ordering::Relaxed);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backplane_abi::DType;

    fn output(buffer: u64, offset: u64, n: i64) -> TensorDesc {
        let mut t = TensorDesc::new(DType::F32, [n, 1, 1, 1]);
        t.buffer = buffer;
        t.offset = offset;
        t.flags = flags::OUTPUT;
        t
    }

    #[test]
    fn outputs_of_plain_buffers_are_planned_aligned_and_packed() {
        let mut not_output = output(1, 0, 8);
        not_output.flags = 0;
        let graph = vec![
            not_output,
            output(1, 6, 3),  // bytes 6..18: aligned 4..20
            output(2, 0, 4),  // another buffer, split: skipped
            output(1, 64, 1), // 64..68
            output(1, 8, 2),  // inside the first: not copied twice
        ];
        let held: Vec<Held> = plan(&graph, |t| (t.buffer == 1).then_some(()))
            .into_iter()
            .map(|(h, ())| h)
            .collect();
        assert_eq!(
            held,
            vec![
                Held {
                    buffer: 1,
                    start: 4,
                    end: 20,
                    at: 0
                },
                Held {
                    buffer: 1,
                    start: 64,
                    end: 68,
                    at: 16
                },
            ]
        );
    }

    #[test]
    fn outputs_past_the_limit_are_left_to_plain_reads() {
        let n = (PREFETCH_MAX / 4) as i64;
        let graph = vec![output(1, 0, n), output(1, PREFETCH_MAX, 1)];
        let held = plan(&graph, |_| Some(()));
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].0.end, PREFETCH_MAX);
    }
}
