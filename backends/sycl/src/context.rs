//! What a device's buffers, streams and kernels share: the device context
//! ([`Ctx`]), and a stream's scratch memory ([`Scratch`]).

use std::sync::{Mutex, MutexGuard};

use backplane_abi::TensorDesc;
use backplane_abi::plugin::PluginError;
use backplane_abi::support::memory::LiveBuffers;

use crate::kernels::Library;
use crate::options::Settings;
use crate::reorder::REORDER_SUFFIX;
use crate::runtime::{DeviceInfo, Queue};

/// Alignment of buffers and tensor offsets (a cache line, enough for every
/// vector load the kernels do).
pub const ALIGNMENT: u64 = 128;

/// Locks `m`, going on with the data of a thread that panicked holding it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a device's buffers and streams share: its queue, kernels and the
/// table of live buffers.
pub struct Ctx {
    /// Runtime facts.
    pub info: DeviceInfo,
    /// Options read from the environment at load (what `supports_op`
    /// decides by; each stream has its own).
    pub settings: Settings,
    /// The device's in-order queue.
    pub queue: Queue,
    /// Built kernels.
    pub library: Library,
    /// Live buffers of the device by id (their device address), each
    /// with whether its tensors are in the reordered layout.
    pub(crate) buffers: LiveBuffers<bool>,
}

impl Ctx {
    /// The device address of `t` (index `index` of a graph, if any),
    /// checked to lie inside a live buffer.
    pub fn address(&self, index: Option<usize>, t: &TensorDesc) -> Result<*mut u8, PluginError> {
        self.buffers.locate(index, t)?;
        Ok((t.buffer as usize + t.offset as usize) as *mut u8)
    }

    /// Name of the device's reordered buffer type (`sycl0_reorder`).
    pub fn reorder_name(&self) -> String {
        format!("{}{REORDER_SUFFIX}", self.buffers.kind())
    }

    /// Whether `t` lies in a live buffer of the reordered layout.
    pub fn is_reordered(&self, t: &TensorDesc) -> bool {
        self.buffers.locate(None, t).is_ok_and(|live| live.data)
    }
}

/// Temporary device memory of a stream (q8_1 activations, reordered weights).
#[derive(Default)]
pub struct Scratch(Mutex<Block>);

/// The block a [`Scratch`] holds (null and 0 before the first use).
#[derive(Default)]
struct Block {
    ptr: usize,
    size: usize,
}

impl Scratch {
    /// Memory of at least `bytes` bytes on `queue`'s device, valid until
    /// the next call (growing waits for queued users of the old block).
    pub fn get(&self, queue: &Queue, bytes: usize) -> Result<*mut u8, String> {
        let mut s = lock(&self.0);
        if s.size < bytes {
            queue.wait()?;
            if s.ptr != 0 {
                queue.free(s.ptr as *mut u8)?;
                s.ptr = 0;
                s.size = 0;
            }
            let size = bytes.next_power_of_two().max(1 << 16);
            s.ptr = queue.malloc(size, ALIGNMENT as usize)? as usize;
            s.size = size;
        }
        Ok(s.ptr as *mut u8)
    }

    /// Frees the block once `queue` has finished with it.
    pub fn release(&self, queue: &Queue) {
        let mut s = lock(&self.0);
        if s.ptr != 0 {
            let _ = queue.wait();
            let _ = queue.free(s.ptr as *mut u8);
            s.ptr = 0;
            s.size = 0;
        }
    }
}
