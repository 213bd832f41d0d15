//! An opened device: the wgpu device and queue, the table of live buffers,
//! the pipeline cache, the pool of parameter buffers and the profiler.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use backplane_abi::TensorDesc;
use backplane_abi::support::memory::{LiveBuffers, MemoryError};

use crate::bind_cache::BindGroupCache;
use crate::facts::Facts;
use crate::options::DeviceSettings;
use crate::pipelines::PipelineCache;
use crate::profile::Profiler;
use crate::{KERNELS_PER_SUBMIT, PARAM_SLOT_BYTES, lock};

/// Shared state of one opened device.
pub struct Ctx {
    /// Device name (`gpu0`).
    pub name: String,
    /// The facts decisions are made from.
    pub facts: Facts,
    /// The wgpu device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// Compiled pipelines, one per key.
    pub pipelines: PipelineCache,
    /// Bind groups reused across dispatches.
    pub bind_groups: BindGroupCache,
    /// The streams' recorded graphs ([`crate::replay`]).
    pub recordings: crate::replay::Recordings,
    /// Per-pipeline timings (the `profile` option at `kernels`).
    pub profiler: Option<Profiler>,
    /// Host time per graph (the `profile` option at `graph`).
    pub graph_timing: bool,
    /// GPU time per step of natively replayed graphs (`profile=steps`).
    pub step_timing: bool,
    /// Live buffers by id, with their wgpu buffers.
    pub buffers: LiveBuffers<Arc<wgpu::Buffer>>,
    /// Ids of the live buffers whose tensors are in the split layout
    /// ([`crate::split`]).
    split_buffers: Mutex<HashSet<u64>>,
    next_id: AtomicU64,
    /// Parameter buffers (KERNELS_PER_SUBMIT slots each) free for reuse;
    /// a buffer comes back here when the submission that used it completes.
    param_pool: Arc<Mutex<Vec<wgpu::Buffer>>>,
    /// The staging buffer reads go through, kept between reads (see
    /// [`crate::buffer::read_buffer`]); its lock also orders the reads.
    pub readback: Mutex<Option<wgpu::Buffer>>,
    /// The last graph's outputs, copied for the host in its wait
    /// ([`crate::prefetch`]); every write to the device's memory forgets
    /// them first.
    pub prefetch: crate::prefetch::Prefetch,
    /// Small host writes staged for the next submission ([`crate::upload`]).
    pub uploads: crate::upload::Uploads,
    /// The native Vulkan kernels' features and pipelines ([`crate::native`]).
    pub native: crate::native::NativeState,
    /// Native replay's shared state ([`crate::replay::native`]).
    pub native_replay: crate::replay::native::DeviceReplay,
}

impl Ctx {
    /// Opens `adapter` with every wanted feature it offers, as the
    /// device-wide `settings` say.
    pub fn open(
        name: &str,
        adapter: &wgpu::Adapter,
        facts: Facts,
        settings: &DeviceSettings,
    ) -> Result<Ctx, String> {
        let mut features = wgpu::Features::empty();
        if facts.f16 {
            features |= wgpu::Features::SHADER_F16;
        }
        if facts.subgroups {
            features |= wgpu::Features::SUBGROUP | wgpu::Features::SUBGROUP_BARRIER;
        }
        if facts.timestamps {
            features |= wgpu::Features::TIMESTAMP_QUERY;
        }
        let experimental = if facts.coopmat_f16_16 {
            features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
            // SAFETY: the cooperative-matrix kernels are checked by
            // conformance on a device that offers them.
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        };
        let desc = wgpu::DeviceDescriptor {
            label: Some(name),
            required_features: features,
            required_limits: adapter.limits(),
            experimental_features: experimental,
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        // On Vulkan, with the native kernels' extras where offered.
        let (device, queue, native) = crate::native::open_device(adapter, &desc)?;
        if settings.tuning.matmul_trace {
            eprintln!("backplane-webgpu: {name}: {}", native.summary());
        }
        device.on_uncaptured_error(Arc::new(|e| {
            eprintln!("backplane-webgpu: uncaptured wgpu error: {e}");
        }));
        let profiler = Profiler::new(&settings.profile, &device, &facts, name);
        Ok(Ctx {
            name: name.to_string(),
            pipelines: PipelineCache::default(),
            bind_groups: BindGroupCache::new(settings.bind_cache),
            recordings: crate::replay::Recordings::default(),
            graph_timing: settings.profile == "graph",
            step_timing: settings.profile == "steps",
            facts,
            device,
            queue,
            profiler,
            buffers: LiveBuffers::new(name),
            split_buffers: Mutex::default(),
            next_id: AtomicU64::new(1),
            param_pool: Arc::default(),
            readback: Mutex::default(),
            prefetch: Default::default(),
            uploads: Default::default(),
            native: crate::native::NativeState::new(native),
            native_replay: Default::default(),
        })
    }

    /// Registers a new buffer of `size` bytes (the size asked for, before
    /// wgpu's padding) and returns its id; `split` when its tensors are in
    /// the split layout.
    pub fn register(&self, buffer: Arc<wgpu::Buffer>, size: u64, split: bool) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.buffers.insert(id, size, buffer);
        if split {
            lock(&self.split_buffers).insert(id);
        }
        id
    }

    /// Whether buffer `id` holds tensors in the split layout.
    pub fn is_split(&self, id: u64) -> bool {
        lock(&self.split_buffers).contains(&id)
    }

    /// Name of the device's split buffer type (`webgpu-gpu0-split`).
    pub fn split_name(&self) -> String {
        format!("webgpu-{}{}", self.name, crate::split::SPLIT_SUFFIX)
    }

    /// Forgets buffer `id`.
    pub fn unregister(&self, id: u64) {
        self.buffers.remove(id);
        lock(&self.split_buffers).remove(&id);
        self.bind_groups.clear();
        self.recordings.clear();
    }

    /// The wgpu buffer `tensor` (index `index` of a graph, if any) lies
    /// inside, checked to hold it whole.
    pub fn buffer_of(
        &self,
        index: Option<usize>,
        tensor: &TensorDesc,
    ) -> Result<Arc<wgpu::Buffer>, MemoryError> {
        self.buffers.locate(index, tensor).map(|live| live.data)
    }

    /// A parameter buffer with KERNELS_PER_SUBMIT slots.
    pub fn take_param_buffer(&self) -> wgpu::Buffer {
        lock(&self.param_pool).pop().unwrap_or_else(|| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("backplane params"),
                size: PARAM_SLOT_BYTES * KERNELS_PER_SUBMIT as u64,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })
    }

    /// Returns `buffers` to the pool once the work submitted so far is done.
    pub fn recycle_after_submission(&self, buffers: Vec<wgpu::Buffer>) {
        let pool = Arc::clone(&self.param_pool);
        self.queue.on_submitted_work_done(move || {
            lock(&pool).extend(buffers);
        });
    }

    /// Blocks until all submitted work is done.
    pub fn wait_idle(&self) -> Result<(), String> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| format!("{}: waiting for the GPU: {e}", self.name))
    }
}
