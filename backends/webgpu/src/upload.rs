//! Small host writes through one persistently kept staging buffer, copied
//! to their tensors by the device's next submission.
//!
//! `queue.write_buffer` makes a staging buffer of its own for every call
//! (a buffer and its memory created, mapped and later destroyed): about
//! 7 us on an H100's host, paid several times per decoded token (the
//! token's positions, KV indices and mask, its embedding row). Instead a
//! write of up to [`UPLOAD_BYTES`] goes into the mapped [`Uploads`]
//! buffer and a copy to its tensor is queued; the next submission (the
//! graph's own command buffer, or [`Uploads::flush`] before anything else
//! touches the device's memory) records the copies first, and the buffer
//! is mapped again behind it, ready by the time the graph's wait returns.
//! A write that finds the buffer busy or full takes `queue.write_buffer`
//! after the queued copies are submitted, so writes land in their order.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::lock;

/// Size of the staging buffer: the largest write it takes, and the most
/// bytes queued between two submissions.
pub const UPLOAD_BYTES: u64 = 1 << 20;

/// Writes must be whole 32-bit words (WebGPU's copy alignment).
const ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

/// Writes start at multiples of this in the staging buffer (a mapped
/// range must start at one).
const START_ALIGN: u64 = wgpu::MAP_ALIGNMENT;

/// Writes staged in this process.
static STAGED: AtomicU64 = AtomicU64::new(0);

/// How many writes of this process went through the staging buffer (for
/// tests and measurements).
pub fn staged_writes() -> u64 {
    STAGED.load(Ordering::Relaxed)
}

/// One queued copy: `len` bytes at `from` in the staging buffer to byte
/// `to` of `dst`.
struct Pending {
    dst: wgpu::Buffer,
    to: u64,
    from: u64,
    len: u64,
}

#[derive(Default)]
struct State {
    /// Created on the first write.
    staging: Option<wgpu::Buffer>,
    /// Set by the mapping's callback; the buffer may be written while set.
    mapped: Arc<AtomicBool>,
    /// Bytes of the staging buffer taken by queued copies.
    used: u64,
    pending: Vec<Pending>,
}

/// A device's staged small writes (see the module doc).
#[derive(Default)]
pub struct Uploads {
    state: Mutex<State>,
}

/// Copies recorded into a command encoder by [`Uploads::record`]; call
/// [`Recorded::submitted`] once that encoder is submitted. Dropped
/// without it (the encoder was never submitted), the copies stay queued.
/// Holds the uploads' lock meanwhile: no other thread stages a write or
/// records the same copies again in between.
#[must_use]
pub struct Recorded<'a> {
    state: MutexGuard<'a, State>,
}

impl Recorded<'_> {
    /// The encoder holding the copies was submitted: forget them and map
    /// the staging buffer again (ready once the submission is done).
    pub fn submitted(mut self) {
        let s = &mut *self.state;
        s.pending.clear();
        s.used = 0;
        if let Some(staging) = &s.staging {
            let flag = Arc::clone(&s.mapped);
            staging.slice(..).map_async(wgpu::MapMode::Write, move |r| {
                flag.store(r.is_ok(), Ordering::Release)
            });
        }
    }
}

impl Uploads {
    /// Queues a write of `data` at byte `at` of `dst` (both multiples of 4
    /// bytes) when the staging buffer is mapped and has room; false when
    /// the caller must write another way (after [`Uploads::flush`]).
    pub fn stage(&self, device: &wgpu::Device, dst: &wgpu::Buffer, at: u64, data: &[u8]) -> bool {
        let len = data.len() as u64;
        if len == 0 || len > UPLOAD_BYTES || !at.is_multiple_of(ALIGN) || !len.is_multiple_of(ALIGN)
        {
            return false;
        }
        let mut s = lock(&self.state);
        if s.staging.is_none() {
            s.staging = Some(device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("backplane uploads"),
                size: UPLOAD_BYTES,
                usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: true,
            }));
            s.mapped.store(true, Ordering::Release);
        }
        let from = s.used.next_multiple_of(START_ALIGN);
        if !s.mapped.load(Ordering::Acquire) || from + len > UPLOAD_BYTES {
            return false;
        }
        let staging = s.staging.as_ref().expect("created above");
        match staging.slice(from..from + len).get_mapped_range_mut() {
            Ok(mut view) => view.copy_from_slice(data),
            Err(_) => return false,
        }
        s.used = from + len;
        STAGED.fetch_add(1, Ordering::Relaxed);
        s.pending.push(Pending {
            dst: dst.clone(),
            to: at,
            from,
            len,
        });
        true
    }

    /// Records the queued copies at the start of `enc` (None: nothing
    /// queued). Submit `enc`, then call [`Recorded::submitted`].
    pub fn record(&self, enc: &mut wgpu::CommandEncoder) -> Option<Recorded<'_>> {
        let s = lock(&self.state);
        if s.pending.is_empty() {
            return None;
        }
        let staging = s.staging.clone().expect("copies were queued through it");
        if s.mapped.swap(false, Ordering::AcqRel) {
            staging.unmap();
        }
        for p in &s.pending {
            enc.copy_buffer_to_buffer(&staging, p.from, &p.dst, p.to, p.len);
        }
        Some(Recorded { state: s })
    }

    /// Submits the queued copies on their own (before anything else reads
    /// or writes the device's memory outside a graph).
    pub fn flush(&self, device: &wgpu::Device, queue: &wgpu::Queue) {
        if lock(&self.state).pending.is_empty() {
            return;
        }
        let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("backplane uploads"),
        });
        if let Some(recorded) = self.record(&mut enc) {
            queue.submit([enc.finish()]);
            recorded.submitted();
        }
    }
}
