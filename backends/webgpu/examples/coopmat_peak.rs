//! The cooperative-matrix multiply-add rate the first Vulkan adapter
//! reaches through this API, with no memory traffic (`glsl/coopmat_peak.comp`,
//! the configurations of `native::configs::PEAK_CONFIGS`): the ceiling any
//! GEMM or attention kernel written with these matrices works under.
//! `cargo run --release -p backplane-webgpu --features native-vulkan
//! --example coopmat_peak [-- WORKGROUPS]`. Prints one line per
//! configuration: the best of five dispatches of at least 30 ms each, in
//! TFLOP/s, or why it did not run.

use std::time::Instant;

use backplane_webgpu::PARAM_SLOT_BYTES;
use backplane_webgpu::native::configs::{PEAK_CONFIGS, PeakConfig};
use backplane_webgpu::native::pipelines::NativePipelines;
use backplane_webgpu::native::{NativeFeatures, cm2_workgroup_fits, open};
use backplane_webgpu::pipelines::{Pipeline, PipelineCache};

/// Bytes of the one buffer: the zero inputs and room for every store.
const BUFFER_BYTES: u64 = 1 << 20;

/// Shortest dispatch timed, seconds: submission costs stay below 1%.
const MIN_SECONDS: f64 = 0.03;

fn main() -> Result<(), String> {
    let workgroups: u32 = std::env::args()
        .nth(1)
        .map_or(Ok(132 * 16), |a| a.parse())
        .map_err(|e| format!("WORKGROUPS: {e}"))?;
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: wgpu::Backends::VULKAN,
        flags: wgpu::InstanceFlags::empty(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN));
    let adapter = adapters
        .into_iter()
        .find(|a| a.get_info().device_type != wgpu::DeviceType::Cpu)
        .ok_or("no Vulkan GPU adapter")?;
    let info = adapter.get_info();
    let wanted = wgpu::Features::SHADER_F16
        | wgpu::Features::SUBGROUP
        | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
    if !adapter.features().contains(wanted) {
        return Err(format!(
            "{}: lacks {:?}",
            info.name,
            wanted - adapter.features()
        ));
    }
    let desc = wgpu::DeviceDescriptor {
        label: Some("coopmat_peak"),
        required_features: wanted,
        required_limits: adapter.limits(),
        // SAFETY: the probe's modules passed SPIRV-Tools' validator at
        // build time and only run where the device lists the matrices.
        experimental_features: unsafe { wgpu::ExperimentalFeatures::enabled() },
        memory_hints: wgpu::MemoryHints::Performance,
        trace: wgpu::Trace::Off,
    };
    let (device, queue, features) = open::open_device(&adapter, &desc)?;
    let subgroup = info.subgroup_min_size.max(1);
    println!(
        "{} ({:?}, driver {} {}), subgroups of {subgroup}, {workgroups} workgroups: {}",
        info.name,
        info.device_type,
        info.driver,
        info.driver_info,
        features.summary()
    );
    // The backend's own pipeline path: the shared layout (storage buffer
    // 0, the parameters a uniform at 1 with a dynamic offset).
    let cache = PipelineCache::default();
    let pipelines = NativePipelines::default();
    let layout = cache.shared_layout(&device, 1);
    let buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("coopmat_peak"),
        size: BUFFER_BYTES,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let params = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("coopmat_peak.params"),
        size: PARAM_SLOT_BYTES,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("coopmat_peak"),
        layout: &layout,
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: buffer.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &params,
                    offset: 0,
                    size: wgpu::BufferSize::new(PARAM_SLOT_BYTES),
                }),
            },
        ],
    });
    let probe = Probe {
        device: &device,
        queue: &queue,
        cache: &cache,
        pipelines: &pipelines,
        bind: &bind,
        params: &params,
        workgroups,
    };
    for c in PEAK_CONFIGS {
        match probe.run(c, &features) {
            Ok((iters, seconds)) => {
                let flops = c.flops_per_step(subgroup) as f64 * iters as f64 * workgroups as f64;
                println!(
                    "{:<20} {:>8.1} TFLOP/s  ({iters} steps, {:.2} ms)",
                    c.name,
                    flops / seconds / 1e12,
                    seconds * 1e3
                );
            }
            Err(why) => println!("{:<20} not run: {why}", c.name),
        }
    }
    Ok(())
}

/// What every configuration's run shares.
struct Probe<'a> {
    device: &'a wgpu::Device,
    queue: &'a wgpu::Queue,
    cache: &'a PipelineCache,
    pipelines: &'a NativePipelines,
    bind: &'a wgpu::BindGroup,
    params: &'a wgpu::Buffer,
    workgroups: u32,
}

impl Probe<'_> {
    /// Loop steps per workgroup and the best seconds of five dispatches of
    /// configuration `c`, or why it cannot run.
    fn run(&self, c: &PeakConfig, features: &NativeFeatures) -> Result<(u64, f64), String> {
        if c.workgroup_scope && !features.coopmat2 {
            return Err("no VK_NV_cooperative_matrix2".into());
        }
        if c.workgroup_scope {
            cm2_workgroup_fits(features, "workgroup scope", c.workgroup_size)?;
        }
        if !c.workgroup_scope && !features.coopmat {
            return Err("no VK_KHR_cooperative_matrix".into());
        }
        let name = format!("coopmat_peak_{}", c.name);
        let pipeline =
            self.pipelines
                .get(self.device, self.cache, &name, (c.workgroup_size, 1, 1), 1)?;
        let mut iters: u64 = 64;
        let mut seconds = self.dispatch(&pipeline, iters)?;
        while seconds < MIN_SECONDS {
            let scale = (MIN_SECONDS * 1.5 / seconds.max(1e-6)).clamp(2.0, 64.0);
            iters = ((iters as f64 * scale) as u64).min(u32::MAX as u64);
            seconds = self.dispatch(&pipeline, iters)?;
        }
        let mut best = seconds;
        for _ in 0..5 {
            best = best.min(self.dispatch(&pipeline, iters)?);
        }
        Ok((iters, best))
    }

    /// Seconds from submission to completion of one dispatch of
    /// `iters` steps per workgroup.
    fn dispatch(&self, pipeline: &Pipeline, iters: u64) -> Result<f64, String> {
        let words = [iters as u32, 0, 0, 0];
        self.queue
            .write_buffer(self.params, 0, bytemuck::cast_slice(&words));
        self.queue.submit([]);
        self.wait()?;
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(&pipeline.pipeline);
            pass.set_bind_group(0, self.bind, &[0]);
            pass.dispatch_workgroups(self.workgroups, 1, 1);
        }
        let t = Instant::now();
        self.queue.submit([enc.finish()]);
        self.wait()?;
        Ok(t.elapsed().as_secs_f64())
    }

    fn wait(&self) -> Result<(), String> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| format!("waiting for the GPU: {e}"))
    }
}
