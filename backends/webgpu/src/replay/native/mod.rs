//! Native replay: a replayed graph ([`crate::replay`]) submitted as one
//! Vulkan command buffer recorded once, instead of recording its kernels
//! through wgpu again every time (wgpu's per-dispatch recording cost is
//! most of a decode step's host time; Vulkan can execute a command buffer
//! many times, which is what CUDA graphs do).
//!
//! The first replay of a recording builds its native twin: a pipeline per
//! kernel from the same WGSL (naga to SPIR-V, [`pipelines`]), a descriptor
//! set per kernel, its parameter words in a buffer of its own, and a
//! secondary command buffer dispatching them ([`commands`]). Every replay
//! then clears the error flag and submits one wgpu command buffer that
//! executes it (a native GLSL kernel's twin is its embedded SPIR-V).
//! Barriers go only between kernels where one depends on another's memory
//! ([`hazards`]), so independent kernels run side by side.
//! Anything that fails (not Vulkan, a kernel of unknown origin, a naga or
//! Vulkan error) leaves the graph to the wgpu replay, with the reason
//! printed once.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::lock;
use crate::replay::Recording;

/// Where a native replay runs: the device's name (for messages), its
/// wgpu device and queue, and its native-replay state.
pub struct Target<'a> {
    /// The device's name.
    pub name: &'a str,
    /// The wgpu device.
    pub device: &'a wgpu::Device,
    /// Its queue.
    pub queue: &'a wgpu::Queue,
    /// Its native-replay state.
    pub state: &'a DeviceReplay,
    /// A barrier between every two kernels (`native_replay=serial`), not
    /// only where one depends on another's memory.
    pub serial: bool,
    /// GPU timestamps between the steps (`profile=steps`).
    pub timed: bool,
    /// The host's staged writes, copied in the same submission first.
    pub uploads: &'a crate::upload::Uploads,
}

#[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
pub mod commands;
#[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
pub mod hazards;
#[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
pub mod pipelines;
#[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
pub mod timing;

/// Graphs submitted natively in this process (for tests and measurements).
static NATIVE_REPLAYED: AtomicU64 = AtomicU64::new(0);

/// How many graphs the streams of this process have replayed natively.
pub fn native_replayed_graphs() -> u64 {
    NATIVE_REPLAYED.load(Ordering::Relaxed)
}

/// Barriers recorded between kernels, and places where one could have
/// been (kernels after the first), over every native twin recorded.
static BARRIERS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// Counts a recorded twin's `barriers` between its `gaps` kernel pairs.
#[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
fn count_barriers(barriers: u64, gaps: u64) {
    BARRIERS[0].fetch_add(barriers, Ordering::Relaxed);
    BARRIERS[1].fetch_add(gaps, Ordering::Relaxed);
}

/// The barriers recorded between kernels by the native twins of this
/// process, and the kernel pairs they could have gone between.
pub fn native_barriers() -> (u64, u64) {
    (
        BARRIERS[0].load(Ordering::Relaxed),
        BARRIERS[1].load(Ordering::Relaxed),
    )
}

#[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
type Commands = commands::NativeCommands;
#[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
type Shared = commands::Shared;

/// Stand-ins where there is no Vulkan build.
#[cfg(not(any(target_os = "linux", target_os = "windows", target_os = "android")))]
type Commands = ();
#[cfg(not(any(target_os = "linux", target_os = "windows", target_os = "android")))]
type Shared = ();

/// A recording's native twin, built on its first native replay (or the
/// reason it has none).
#[derive(Default)]
pub struct NativeSlot(OnceLock<Result<Commands, String>>);

/// Per device: the shared native state (made on first use), and the
/// fallback reasons already printed.
#[derive(Default)]
pub struct DeviceReplay {
    shared: OnceLock<Result<Arc<Shared>, String>>,
    reported: Mutex<HashSet<String>>,
}

impl DeviceReplay {
    /// Prints `reason` for falling back, once per device and reason.
    fn report(&self, device: &str, reason: &str) {
        if lock(&self.reported).insert(reason.to_string()) {
            eprintln!(
                "backplane-webgpu: {device}: native replay off for this graph, replaying through \
                 wgpu: {reason}"
            );
        }
    }
}

/// Submits `recording`'s kernels natively, clearing the error flag first
/// as a wgpu replay would, and returns the nanoseconds spent building its
/// native twin (zero once built); `None` (the reason printed once) when
/// the graph must be replayed through wgpu instead. Nothing runs then.
pub fn try_submit(t: &Target, recording: &Recording, error_flag: &wgpu::Buffer) -> Option<u64> {
    match submit(t, recording, error_flag) {
        Ok(built_ns) => {
            NATIVE_REPLAYED.fetch_add(1, Ordering::Relaxed);
            Some(built_ns)
        }
        Err(reason) => {
            t.state.report(t.name, &reason);
            None
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
fn submit(t: &Target, recording: &Recording, error_flag: &wgpu::Buffer) -> Result<u64, String> {
    let t0 = std::time::Instant::now();
    let mut built = false;
    let shared = t
        .state
        .shared
        .get_or_init(|| Shared::new(t.device).map(Arc::new))
        .as_ref()
        .map_err(Clone::clone)?;
    let commands = recording
        .native
        .0
        .get_or_init(|| {
            built = true;
            Commands::record(
                shared,
                t.queue,
                &recording.steps,
                t.serial,
                t.timed,
                error_flag,
            )
        })
        .as_ref()
        .map_err(Clone::clone)?;
    let built_ns = if built {
        t0.elapsed().as_nanos() as u64
    } else {
        0
    };
    // The flag clear a wgpu replay does in its first batch and the host's
    // staged writes, in a command buffer of the same submission before the
    // kernels (the native one's first barrier makes them visible).
    let mut first = t
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("backplane native replay inputs"),
        });
    first.clear_buffer(error_flag, 0, None);
    let staged = t.uploads.record(&mut first);
    commands.submit(t.device, t.queue, first.finish())?;
    if let Some(staged) = staged {
        staged.submitted();
    }
    Ok(built_ns)
}

#[cfg(not(any(target_os = "linux", target_os = "windows", target_os = "android")))]
fn submit(_: &Target, _: &Recording, _: &wgpu::Buffer) -> Result<u64, String> {
    Err("this build has no Vulkan".into())
}
