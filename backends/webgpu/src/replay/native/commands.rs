//! One recording's kernels as a Vulkan secondary command buffer, recorded
//! once and executed by every later replay from inside an ordinary wgpu
//! command buffer (`vkCmdExecuteCommands` on the raw encoder wgpu hands
//! out through `as_hal_mut`).
//!
//! Why a secondary command buffer inside wgpu's: wgpu stays the only one
//! submitting to the queue (no second thread calls `vkQueueSubmit`, so no
//! external synchronisation is needed), the graph's inputs written through
//! `queue.write_buffer` are copied in the same submission just before it,
//! and every wait of the backend (`wait_idle`, readbacks, `synchronize`)
//! covers it because it is wgpu's own submission.
//!
//! wgpu does not track what the secondary binds, so it orders itself with
//! global memory barriers: one first (everything before it in submission
//! order, writes made visible to compute shaders), one between two kernels
//! where the second depends on the first's memory ([`super::hazards`];
//! every pair of kernels with `native_replay=serial`, as wgpu orders
//! read-write storage dispatches), one last (its writes visible to
//! whatever wgpu records later, e.g. the logits copy).
//! Every range it binds was bound by the wgpu encoding the recording was
//! made from, so wgpu's lazy zero-initialisation never touches it later.

use std::sync::{Arc, Mutex};

use ash::vk;

use super::hazards::{Access, barriers_needed};
use super::pipelines::{PipelineTwins, SpirvTarget, Twin, TwinSource};
use super::timing::{StepTimer, starts_step};
use crate::PARAM_SLOT_BYTES;
use crate::lock;
use crate::replay::Step;

/// What every recording of one device shares: the raw device, its queue
/// family, the twins. Destroyed when the last recording is gone.
pub struct Shared {
    /// Keeps wgpu's device (and so the raw one) alive.
    device: wgpu::Device,
    /// The raw device.
    raw: ash::Device,
    /// The raw instance and physical device (for the step timer).
    instance: ash::Instance,
    physical: vk::PhysicalDevice,
    /// The queue family wgpu's queue belongs to.
    family: u32,
    /// naga's SPIR-V settings for this device.
    target: SpirvTarget,
    /// Whether pipelines allow varying subgroup sizes (as wgpu's do where
    /// the device has subgroups).
    varying_subgroups: bool,
    twins: PipelineTwins,
}

impl Shared {
    /// The shared state on `device`, or why there is none (not Vulkan).
    pub fn new(device: &wgpu::Device) -> Result<Shared, String> {
        // SAFETY: only read (handles and properties); nothing destroyed.
        let hal = unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }
            .ok_or("the device is not a Vulkan one")?;
        let raw = hal.raw_device().clone();
        let instance = hal.shared_instance().raw_instance();
        let pd = hal.raw_physical_device();
        // SAFETY: valid instance and physical device from wgpu-hal.
        let props = unsafe { instance.get_physical_device_properties(pd) };
        let robustness2 = hal
            .enabled_device_extensions()
            .contains(&ash::ext::robustness2::NAME);
        let robust_buffer_access2 = robustness2 && {
            let mut r2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default();
            let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut r2);
            // SAFETY: the chained structure belongs to an enabled extension.
            unsafe { instance.get_physical_device_features2(pd, &mut f2) };
            r2.robust_buffer_access2 == vk::TRUE
        };
        Ok(Shared {
            device: device.clone(),
            raw,
            instance: instance.clone(),
            physical: pd,
            family: hal.queue_family_index(),
            target: SpirvTarget::new(props.api_version, robust_buffer_access2),
            varying_subgroups: device.features().contains(wgpu::Features::SUBGROUP),
            twins: PipelineTwins::default(),
        })
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: every recording holds an Arc of this, so none is left
        // and no command buffer recorded with the twins is pending (each
        // waited for its last submission when it dropped).
        unsafe { self.twins.destroy(&self.raw) };
    }
}

/// Vulkan objects of one recording, destroyed in order on drop.
struct Objects {
    command_pool: vk::CommandPool,
    descriptor_pool: vk::DescriptorPool,
}

/// One recording's kernels, recorded once into a secondary command buffer.
pub struct NativeCommands {
    shared: Arc<Shared>,
    objects: Objects,
    commands: vk::CommandBuffer,
    /// The recording's parameter slots (one per kernel, written once).
    _params: wgpu::Buffer,
    /// Every buffer the kernels bind, kept alive while this lives.
    _bound: Vec<Arc<wgpu::Buffer>>,
    /// The last submission that executed this, waited for before the
    /// next (the command buffer is not simultaneous-use) and on drop.
    last_submission: Mutex<Option<wgpu::SubmissionIndex>>,
    /// Timestamps between its steps (`profile=steps`).
    timer: Option<StepTimer>,
}

impl NativeCommands {
    /// Records `steps` (kernels whose pipelines came from WGSL keys or are
    /// native kernels), with a barrier between kernels only where one
    /// depends on another's memory, or between every two when `serial`.
    /// The stream's `error_flag` makes no hazard: kernels only report into
    /// it atomically (`common/error_flag.wgsl`) and only the host reads it.
    /// With `timed`, timestamps go between the steps ([`StepTimer`]; left
    /// out, with the reason printed, where the queue has none).
    pub fn record(
        shared: &Arc<Shared>,
        queue: &wgpu::Queue,
        steps: &[Step],
        serial: bool,
        timed: bool,
        error_flag: &wgpu::Buffer,
    ) -> Result<NativeCommands, String> {
        let dev = &shared.raw;
        let mut pipelines = Vec::with_capacity(steps.len());
        for step in steps {
            let source = match &step.key {
                Some(key) => TwinSource::Wgsl(key, step.pipeline.checks),
                None => TwinSource::Native(native_kernel_name(&step.pipeline.label)?),
            };
            let n = step.bindings.len();
            let p =
                shared
                    .twins
                    .pipeline(dev, &shared.target, shared.varying_subgroups, source, n)?;
            pipelines.push((p, shared.twins.layout(dev, n)?));
        }
        let params = shared.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("backplane native replay params"),
            size: PARAM_SLOT_BYTES * steps.len().max(1) as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut words = vec![0u8; PARAM_SLOT_BYTES as usize * steps.len()];
        for (i, step) in steps.iter().enumerate() {
            let at = i * PARAM_SLOT_BYTES as usize;
            let bytes: &[u8] = bytemuck::cast_slice(&step.params);
            words[at..at + bytes.len()].copy_from_slice(bytes);
        }
        queue.write_buffer(&params, 0, &words);
        let objects = create_pools(dev, shared.family, steps)?;
        // From here `objects` is destroyed by the returned value's drop, or
        // by this guard on an error.
        let mut guard = ObjectsGuard {
            dev,
            objects: Some(objects),
        };
        let objects = guard.objects.as_ref().expect("just set");
        let sets = write_sets(dev, objects.descriptor_pool, steps, &pipelines, &params)?;
        let barriers = if serial {
            (0..steps.len()).map(|i| i > 0).collect()
        } else {
            barriers_needed(&accesses(steps, &pipelines, raw_buffer(error_flag)?)?)
        };
        let timer = timed
            .then(|| {
                StepTimer::new(
                    &shared.instance,
                    shared.physical,
                    dev,
                    shared.family,
                    steps,
                    &barriers,
                )
                .inspect_err(|e| eprintln!("backplane-webgpu: no step profile: {e}"))
                .ok()
            })
            .flatten();
        let commands = record_commands(
            dev,
            objects.command_pool,
            steps,
            &pipelines,
            &sets,
            &barriers,
            timer.as_ref(),
        );
        let commands = match commands {
            Ok(c) => c,
            Err(e) => {
                if let Some(t) = &timer {
                    // SAFETY: never submitted.
                    unsafe { t.destroy(dev) };
                }
                return Err(e);
            }
        };
        let between = barriers.iter().filter(|&&b| b).count();
        super::count_barriers(between as u64, steps.len().saturating_sub(1) as u64);
        let objects = guard.objects.take().expect("still held");
        let mut bound: Vec<Arc<wgpu::Buffer>> = Vec::new();
        for b in steps.iter().flat_map(|s| &s.bindings) {
            if !bound.iter().any(|k| Arc::ptr_eq(k, &b.buffer)) {
                bound.push(Arc::clone(&b.buffer));
            }
        }
        Ok(NativeCommands {
            shared: Arc::clone(shared),
            objects,
            commands,
            _params: params,
            _bound: bound,
            last_submission: Mutex::default(),
            timer,
        })
    }

    /// Submits the kernels through wgpu's queue: one wgpu command buffer
    /// that executes the recorded one, after `first` (recorded with wgpu's
    /// own commands, which may not share an encoder with raw ones) in the
    /// same submission. Waits first for this recording's previous
    /// submission (normally long done: `graph_compute` waits for the GPU
    /// before it returns).
    pub fn submit(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        first: wgpu::CommandBuffer,
    ) -> Result<(), String> {
        let mut last = lock(&self.last_submission);
        if let Some(index) = last.take() {
            device
                .poll(wgpu::PollType::Wait {
                    submission_index: Some(index),
                    timeout: None,
                })
                .map_err(|e| format!("waiting for the previous native replay: {e}"))?;
            if let Some(t) = &self.timer {
                t.collect(&self.shared.raw);
            }
        }
        let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("backplane native replay"),
        });
        // SAFETY: the raw command buffer is only given one command (no
        // begin/end, nothing destroyed) and the wgpu encoder is not touched
        // meanwhile; the secondary command buffer is executable (recorded
        // once, never reset) and not pending (waited for above).
        let executed = unsafe {
            enc.as_hal_mut::<wgpu::hal::api::Vulkan, _, _>(|raw| {
                raw.map(|raw| {
                    self.shared
                        .raw
                        .cmd_execute_commands(raw.raw_handle(), &[self.commands]);
                })
            })
        };
        if executed.is_none() {
            return Err("wgpu gave no raw Vulkan command encoder".into());
        }
        *last = Some(queue.submit([first, enc.finish()]));
        Ok(())
    }
}

impl Drop for NativeCommands {
    fn drop(&mut self) {
        if let Some(index) = lock(&self.last_submission).take() {
            // Nothing to do on failure but go on: the device is lost then.
            let done = self.shared.device.poll(wgpu::PollType::Wait {
                submission_index: Some(index),
                timeout: None,
            });
            if let (Ok(_), Some(t)) = (done, &self.timer) {
                t.collect(&self.shared.raw);
            }
        }
        // SAFETY: the last submission that executed the command buffer is
        // done; the sets and the command buffer go with their pools, the
        // queries with theirs.
        unsafe {
            destroy_objects(&self.shared.raw, &self.objects);
            if let Some(t) = &self.timer {
                t.destroy(&self.shared.raw);
            }
        }
    }
}

/// The native kernel a pipeline without a WGSL key was built from: its
/// label is `native.<kernel name>` ([`crate::native::pipelines`]). A label
/// of another form keeps the graph on the wgpu replay.
fn native_kernel_name(label: &str) -> Result<&str, String> {
    label
        .strip_prefix("native.")
        .ok_or_else(|| format!("kernel {label} has no WGSL key and is not a native kernel"))
}

/// Destroys `objects` unless taken (the error paths of recording).
struct ObjectsGuard<'a> {
    dev: &'a ash::Device,
    objects: Option<Objects>,
}

impl Drop for ObjectsGuard<'_> {
    fn drop(&mut self) {
        if let Some(o) = self.objects.take() {
            // SAFETY: never submitted.
            unsafe { destroy_objects(self.dev, &o) };
        }
    }
}

/// # Safety
/// Nothing allocated from the pools may be pending or used again.
unsafe fn destroy_objects(dev: &ash::Device, o: &Objects) {
    // SAFETY: by the caller's guarantee.
    unsafe {
        dev.destroy_command_pool(o.command_pool, None);
        dev.destroy_descriptor_pool(o.descriptor_pool, None);
    }
}

fn create_pools(dev: &ash::Device, family: u32, steps: &[Step]) -> Result<Objects, String> {
    let storage: usize = steps.iter().map(|s| s.bindings.len()).sum();
    let mut sizes = vec![
        vk::DescriptorPoolSize::default()
            .ty(vk::DescriptorType::UNIFORM_BUFFER)
            .descriptor_count(steps.len() as u32),
    ];
    if storage > 0 {
        sizes.push(
            vk::DescriptorPoolSize::default()
                .ty(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(storage as u32),
        );
    }
    let info = vk::DescriptorPoolCreateInfo::default()
        .max_sets(steps.len().max(1) as u32)
        .pool_sizes(&sizes);
    // SAFETY: valid device; the create info lives across the call.
    let descriptor_pool = unsafe { dev.create_descriptor_pool(&info, None) }
        .map_err(|e| format!("descriptor pool for {} kernels: {e}", steps.len()))?;
    let info = vk::CommandPoolCreateInfo::default().queue_family_index(family);
    // SAFETY: as above.
    let command_pool = match unsafe { dev.create_command_pool(&info, None) } {
        Ok(p) => p,
        Err(e) => {
            // SAFETY: created above, unused.
            unsafe { dev.destroy_descriptor_pool(descriptor_pool, None) };
            return Err(format!("command pool: {e}"));
        }
    };
    Ok(Objects {
        command_pool,
        descriptor_pool,
    })
}

/// A kernel's twin and its layout.
type Bound = (Twin, super::pipelines::Layout);

/// Each kernel's storage bindings as the bytes it reads and writes.
/// Each kernel's storage bindings as hazard analysis sees them, but for
/// the error flag `flag` (see [`NativeCommands::record`]).
fn accesses(
    steps: &[Step],
    pipelines: &[Bound],
    flag: vk::Buffer,
) -> Result<Vec<Vec<Access<vk::Buffer>>>, String> {
    steps
        .iter()
        .zip(pipelines)
        .map(|(step, (twin, _))| {
            let mut out = Vec::with_capacity(step.bindings.len());
            for (j, b) in step.bindings.iter().enumerate() {
                let buffer = raw_buffer(&b.buffer)?;
                if buffer != flag {
                    out.push(Access {
                        buffer,
                        start: b.offset,
                        end: b.offset + b.size,
                        write: twin.writes(j),
                    });
                }
            }
            Ok(out)
        })
        .collect()
}

/// One descriptor set per kernel: its storage bindings, and its parameter
/// slot of `params`.
fn write_sets(
    dev: &ash::Device,
    pool: vk::DescriptorPool,
    steps: &[Step],
    pipelines: &[Bound],
    params: &wgpu::Buffer,
) -> Result<Vec<vk::DescriptorSet>, String> {
    if steps.is_empty() {
        return Ok(Vec::new());
    }
    let layouts: Vec<vk::DescriptorSetLayout> = pipelines.iter().map(|(_, l)| l.set).collect();
    let info = vk::DescriptorSetAllocateInfo::default()
        .descriptor_pool(pool)
        .set_layouts(&layouts);
    // SAFETY: the pool was sized for one set per kernel.
    let sets = unsafe { dev.allocate_descriptor_sets(&info) }
        .map_err(|e| format!("descriptor sets for {} kernels: {e}", steps.len()))?;
    let params_raw = raw_buffer(params)?;
    for (i, (step, set)) in steps.iter().zip(&sets).enumerate() {
        let mut infos: Vec<vk::DescriptorBufferInfo> = Vec::with_capacity(step.bindings.len());
        for b in &step.bindings {
            infos.push(
                vk::DescriptorBufferInfo::default()
                    .buffer(raw_buffer(&b.buffer)?)
                    .offset(b.offset)
                    .range(b.size),
            );
        }
        let param_info = [vk::DescriptorBufferInfo::default()
            .buffer(params_raw)
            .offset(i as u64 * PARAM_SLOT_BYTES)
            .range(PARAM_SLOT_BYTES)];
        let mut writes: Vec<vk::WriteDescriptorSet> = infos
            .iter()
            .enumerate()
            .map(|(j, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_set(*set)
                    .dst_binding(j as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(std::slice::from_ref(info))
            })
            .collect();
        writes.push(
            vk::WriteDescriptorSet::default()
                .dst_set(*set)
                .dst_binding(step.bindings.len() as u32)
                .descriptor_type(vk::DescriptorType::UNIFORM_BUFFER)
                .buffer_info(&param_info),
        );
        // SAFETY: live sets and buffers (kept alive by the recording).
        unsafe { dev.update_descriptor_sets(&writes, &[]) };
    }
    Ok(sets)
}

/// The raw handle of a wgpu buffer.
fn raw_buffer(buffer: &wgpu::Buffer) -> Result<vk::Buffer, String> {
    // SAFETY: the handle is only written into descriptor sets; the buffer
    // is kept alive by the recording.
    let hal = unsafe { buffer.as_hal::<wgpu::hal::api::Vulkan>() }
        .ok_or("a buffer has no raw Vulkan buffer (destroyed?)")?;
    // SAFETY: as above.
    Ok(unsafe { hal.raw_handle() })
}

/// A global memory barrier from `src` to `dst`.
fn barrier(
    dev: &ash::Device,
    cb: vk::CommandBuffer,
    src: (vk::PipelineStageFlags, vk::AccessFlags),
    dst: (vk::PipelineStageFlags, vk::AccessFlags),
) {
    let b = [vk::MemoryBarrier::default()
        .src_access_mask(src.1)
        .dst_access_mask(dst.1)];
    // SAFETY: `cb` is in the recording state.
    unsafe {
        dev.cmd_pipeline_barrier(cb, src.0, dst.0, vk::DependencyFlags::empty(), &b, &[], &[]);
    }
}

fn record_commands(
    dev: &ash::Device,
    pool: vk::CommandPool,
    steps: &[Step],
    pipelines: &[Bound],
    sets: &[vk::DescriptorSet],
    barrier_before: &[bool],
    timer: Option<&StepTimer>,
) -> Result<vk::CommandBuffer, String> {
    let info = vk::CommandBufferAllocateInfo::default()
        .command_pool(pool)
        .level(vk::CommandBufferLevel::SECONDARY)
        .command_buffer_count(1);
    // SAFETY: valid pool of this device.
    let cb = unsafe { dev.allocate_command_buffers(&info) }
        .map_err(|e| format!("command buffer: {e}"))?[0];
    let inheritance = vk::CommandBufferInheritanceInfo::default();
    let begin = vk::CommandBufferBeginInfo::default().inheritance_info(&inheritance);
    // SAFETY: a fresh secondary command buffer, outside any render pass.
    unsafe { dev.begin_command_buffer(cb, &begin) }
        .map_err(|e| format!("begin command buffer: {e}"))?;
    let compute = vk::PipelineStageFlags::COMPUTE_SHADER;
    let shader_rw = vk::AccessFlags::SHADER_READ
        | vk::AccessFlags::SHADER_WRITE
        | vk::AccessFlags::UNIFORM_READ;
    let all = vk::PipelineStageFlags::ALL_COMMANDS;
    let memory_rw = vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE;
    if let Some(t) = timer {
        t.reset(dev, cb);
    }
    barrier(
        dev,
        cb,
        (all, vk::AccessFlags::MEMORY_WRITE),
        (compute, shader_rw),
    );
    // Timestamp k ends step k - 1 and starts step k.
    let mut mark = 0;
    let mut stamp = |cb| {
        if let Some(t) = timer {
            t.mark(dev, cb, mark);
            mark += 1;
        }
    };
    for (i, (((step, (twin, layout)), set), &needs_barrier)) in steps
        .iter()
        .zip(pipelines)
        .zip(sets)
        .zip(barrier_before)
        .enumerate()
    {
        if starts_step(i, barrier_before) {
            stamp(cb);
        }
        if needs_barrier {
            barrier(
                dev,
                cb,
                (compute, vk::AccessFlags::SHADER_WRITE),
                (compute, shader_rw),
            );
        }
        let [x, y, z] = step.groups;
        // SAFETY: recording; pipeline, layout and set are live and match.
        unsafe {
            dev.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, twin.pipeline);
            dev.cmd_bind_descriptor_sets(
                cb,
                vk::PipelineBindPoint::COMPUTE,
                layout.pipeline,
                0,
                &[*set],
                &[],
            );
            dev.cmd_dispatch(cb, x, y, z);
        }
    }
    stamp(cb);
    barrier(
        dev,
        cb,
        (compute, vk::AccessFlags::SHADER_WRITE),
        (all, memory_rw),
    );
    // SAFETY: recording began above.
    unsafe { dev.end_command_buffer(cb) }.map_err(|e| format!("end command buffer: {e}"))?;
    Ok(cb)
}
