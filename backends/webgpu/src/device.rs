//! Registration and devices: one wgpu instance (Vulkan, Metal, DX12), every
//! usable adapter a device, high-performance (discrete) first.

use std::sync::{Arc, OnceLock};

use backplane_abi::TensorDesc;
use backplane_abi::plugin::{
    Backend, BufferType, Device, DeviceCaps, DeviceType, Memory, PluginError, Reg, Verdict,
};

use crate::buffer::WebGpuBufferType;
use crate::context::Ctx;
use crate::facts::{Facts, human_bytes};
use crate::ops;
use crate::options::{DeviceSettings, stream_tuning};
use crate::stream::WebGpuStream;

/// Features requested when the adapter offers them.
fn wanted_features() -> wgpu::Features {
    wgpu::Features::SHADER_F16
        | wgpu::Features::SUBGROUP
        | wgpu::Features::SUBGROUP_BARRIER
        | wgpu::Features::TIMESTAMP_QUERY
        | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
}

fn adapter_rank(info: &wgpu::AdapterInfo) -> u8 {
    match info.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

/// The WebGPU backend's registration.
pub struct WebGpuReg {
    devices: Vec<Arc<WebGpuDevice>>,
    reason: Option<String>,
}

impl WebGpuReg {
    /// Enumerates adapters; opens none of them until first used.
    pub fn new() -> WebGpuReg {
        let desc = wgpu::InstanceDescriptor {
            backends: wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12,
            flags: wgpu::InstanceFlags::empty(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        };
        let instance = wgpu::Instance::new(desc);
        let mut adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
        adapters.sort_by_key(|a| adapter_rank(&a.get_info()));
        let mut devices = Vec::new();
        let mut skipped = Vec::new();
        let settings = DeviceSettings::from_env();
        for adapter in adapters {
            let info = adapter.get_info();
            let dl = adapter.get_downlevel_capabilities();
            if !dl.flags.contains(wgpu::DownlevelFlags::COMPUTE_SHADERS) {
                skipped.push(format!("{} has no compute shaders", info.name));
                continue;
            }
            let name = format!("gpu{}", devices.len());
            devices.push(Arc::new(WebGpuDevice::new(name, adapter, settings.clone())));
        }
        let reason = devices.is_empty().then(|| {
            if skipped.is_empty() {
                "no Vulkan, Metal or DX12 adapter found (on Linux without a GPU: apt-get install mesa-vulkan-drivers libvulkan1 for lavapipe)".to_string()
            } else {
                format!("no usable adapter: {}", skipped.join("; "))
            }
        });
        WebGpuReg { devices, reason }
    }
}

impl Default for WebGpuReg {
    fn default() -> Self {
        WebGpuReg::new()
    }
}

impl Reg for WebGpuReg {
    fn name(&self) -> String {
        "webgpu".into()
    }

    fn devices(&self) -> Vec<Arc<dyn Device>> {
        self.devices
            .iter()
            .map(|d| d.clone() as Arc<dyn Device>)
            .collect()
    }

    fn no_device_reason(&self) -> Option<String> {
        self.reason.clone()
    }
}

/// Reads the facts of `adapter` given the features it will be granted.
fn read_facts(adapter: &wgpu::Adapter, features: wgpu::Features) -> Facts {
    let info = adapter.get_info();
    let limits = adapter.limits();
    let coopmat_f16_16 = features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
        && adapter.cooperative_matrix_properties().iter().any(|p| {
            p.m_size == 16
                && p.n_size == 16
                && p.k_size == 16
                && p.ab_type == wgpu::CooperativeScalarType::F16
                && p.cr_type == wgpu::CooperativeScalarType::F32
        });
    Facts {
        adapter: info.name.clone(),
        api: format!("{:?}", info.backend),
        driver: format!("{} {}", info.driver, info.driver_info)
            .trim()
            .to_string(),
        vendor: info.vendor,
        is_cpu: info.device_type == wgpu::DeviceType::Cpu,
        is_integrated: info.device_type == wgpu::DeviceType::IntegratedGpu,
        max_binding_bytes: limits.max_storage_buffer_binding_size,
        max_buffer_bytes: limits.max_buffer_size,
        offset_alignment: u64::from(limits.min_storage_buffer_offset_alignment),
        max_groups_per_dim: limits.max_compute_workgroups_per_dimension,
        max_invocations: limits.max_compute_invocations_per_workgroup,
        workgroup_storage_bytes: limits.max_compute_workgroup_storage_size,
        max_storage_buffers: limits.max_storage_buffers_per_shader_stage,
        f16: features.contains(wgpu::Features::SHADER_F16),
        subgroups: features.contains(wgpu::Features::SUBGROUP | wgpu::Features::SUBGROUP_BARRIER),
        subgroup_size: (info.subgroup_min_size, info.subgroup_max_size),
        timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY),
        coopmat_f16_16,
        compute_units: crate::compute_units::query(adapter),
        tuning: Default::default(),
    }
}

/// One adapter.
pub struct WebGpuDevice {
    name: String,
    adapter: wgpu::Adapter,
    /// The device's facts, with the environment's tuning (what
    /// `supports_op` decides by).
    facts: Facts,
    /// Device-wide options, read when the plugin loaded.
    settings: DeviceSettings,
    /// What the adapter offers the native Vulkan kernels (the opened
    /// device's own record replaces it in the description).
    native: crate::native::NativeFeatures,
    ctx: OnceLock<Result<Arc<Ctx>, String>>,
}

impl WebGpuDevice {
    fn new(name: String, adapter: wgpu::Adapter, settings: DeviceSettings) -> WebGpuDevice {
        let mut features = adapter.features() & wanted_features();
        if settings.no_coopmat {
            features.remove(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);
        }
        let mut facts = read_facts(&adapter, features);
        facts.tuning = settings.tuning.clone();
        let native = crate::native::offered(&adapter, features);
        WebGpuDevice {
            name,
            adapter,
            facts,
            settings,
            native,
            ctx: OnceLock::new(),
        }
    }

    /// The opened device, created on first use.
    fn ctx(&self) -> Result<Arc<Ctx>, PluginError> {
        self.ctx
            .get_or_init(|| {
                Ctx::open(
                    &self.name,
                    &self.adapter,
                    self.facts.clone(),
                    &self.settings,
                )
                .map(Arc::new)
            })
            .clone()
            .map_err(|e| PluginError::other(format!("{}: {e}", self.name)))
    }

    /// The device facts.
    pub fn facts(&self) -> &Facts {
        &self.facts
    }
}

impl Device for WebGpuDevice {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn description(&self) -> String {
        let f = &self.facts;
        let mut extras = Vec::new();
        if f.f16 {
            extras.push("f16".to_string());
        }
        if f.subgroups {
            extras.push(format!(
                "subgroups {}-{}",
                f.subgroup_size.0, f.subgroup_size.1
            ));
        }
        if f.coopmat_f16_16 {
            extras.push("coopmat f16 16x16".to_string());
        }
        if f.timestamps {
            extras.push("timestamps".to_string());
        }
        if let Some(n) = f.compute_units {
            extras.push(format!("{n} multiprocessors"));
        }
        let native = match self.ctx.get() {
            Some(Ok(ctx)) => &ctx.native.features,
            _ => &self.native,
        };
        let mut kernels = crate::ops::matmul::native::description(native);
        if kernels.starts_with("native=on") && crate::ops::native_attention_runs(native) {
            kernels.push_str(", attention f16 cm2");
        }
        extras.push(kernels);
        format!(
            "{} ({}, {}; max binding {}, workgroup storage {}; {})",
            f.adapter,
            f.api,
            f.driver,
            human_bytes(f.max_binding_bytes),
            human_bytes(u64::from(f.workgroup_storage_bytes)),
            extras.join(", ")
        )
    }

    fn device_type(&self) -> DeviceType {
        if self.facts.is_cpu {
            DeviceType::Cpu
        } else if self.facts.is_integrated {
            DeviceType::IGpu
        } else {
            DeviceType::Gpu
        }
    }

    fn memory(&self) -> Memory {
        crate::memory::query(&self.adapter, self.facts.max_buffer_bytes)
    }

    fn caps(&self) -> DeviceCaps {
        DeviceCaps::default()
    }

    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> Verdict {
        ops::supports(&self.facts, graph, node).into()
    }

    fn supports_buft(&self, name: &str, is_host: bool) -> bool {
        let _ = is_host;
        let plain = format!("webgpu-{}", self.name);
        name == plain
            || (self.settings.split_weights
                && name == format!("{plain}{}", crate::split::SPLIT_SUFFIX))
    }

    fn buffer_type(&self) -> Arc<dyn BufferType> {
        Arc::new(WebGpuBufferType::new(
            format!("webgpu-{}", self.name),
            self.ctx(),
            &self.facts,
        ))
    }

    fn extra_buffer_types(&self) -> Vec<Arc<dyn BufferType>> {
        // Off unless asked for: measured slower than ggml's layout for
        // prefill and no faster for decode (`split_weights`).
        if !self.settings.split_weights {
            return Vec::new();
        }
        vec![Arc::new(WebGpuBufferType::split(
            format!("webgpu-{}{}", self.name, crate::split::SPLIT_SUFFIX),
            self.ctx(),
            &self.facts,
        ))]
    }

    fn init_backend(&self, params: &str) -> Result<Box<dyn Backend>, PluginError> {
        let mut facts = self.facts.clone();
        facts.tuning = stream_tuning(params)?;
        Ok(Box::new(WebGpuStream::new(
            self.name.clone(),
            self.ctx()?,
            facts,
        )))
    }
}
