//! Compiled pipelines, one per (key, checks), cached per device.
//!
//! Every kernel binds its tensors as `read_write` storage buffers at
//! bindings `0..n` and its parameters as a uniform at binding `n`. wgpu
//! treats a buffer used read-only and read-write in one dispatch as a
//! conflict, and the scheduler places a graph's tensors in one buffer, so
//! all storage bindings are `read_write` (their ranges never overlap except
//! for in-place kernels, which bind the shared tensor once). The uniform
//! has a dynamic offset: one bind group serves every parameter slot of a
//! parameter buffer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use backplane_shaders::PipelineKey;

use crate::context::{PARAM_SLOT_BYTES, lock};

/// Whether naga's runtime checks (bounds clamping, loop bounding) stay on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Checks {
    /// Checked: the default for every kernel.
    On,
    /// Unchecked (`create_shader_module_trusted`): only for kernels whose
    /// indexing is proven by conformance cases with guard regions.
    Trusted,
}

/// One compiled kernel.
pub struct Pipeline {
    /// The wgpu pipeline.
    pub pipeline: wgpu::ComputePipeline,
    /// Its bind group layout (n storage buffers, then the uniform with a
    /// dynamic offset), shared by every pipeline with n storage buffers.
    pub layout: wgpu::BindGroupLayout,
    /// Label for profiles and errors.
    pub label: String,
}

/// The cache.
#[derive(Default)]
pub struct PipelineCache {
    /// Per key, the variants by (checks, storage bindings); looked up by
    /// reference so a hit allocates nothing.
    map: Mutex<HashMap<PipelineKey, Vec<Variant>>>,
    /// One bind group layout per number of storage bindings, shared by
    /// every pipeline with that many, so bind groups are interchangeable
    /// between them (see `encode::BindGroupCache`).
    layouts: Mutex<HashMap<usize, wgpu::BindGroupLayout>>,
}

/// A compiled variant of a key: (checks, storage bindings, pipeline).
type Variant = (Checks, usize, Arc<Pipeline>);

impl PipelineCache {
    /// The pipeline for `key` with `n_storage` storage bindings, compiled on
    /// first use. Shader and pipeline errors name the key.
    pub fn get(
        &self,
        device: &wgpu::Device,
        key: &PipelineKey,
        checks: Checks,
        n_storage: usize,
    ) -> Result<Arc<Pipeline>, String> {
        let find = |v: &Vec<Variant>| {
            v.iter()
                .find(|(c, n, _)| *c == checks && *n == n_storage)
                .map(|(_, _, p)| Arc::clone(p))
        };
        if let Some(p) = lock(&self.map).get(key).and_then(find) {
            return Ok(p);
        }
        let bgl = lock(&self.layouts)
            .entry(n_storage)
            .or_insert_with(|| layout(device, n_storage))
            .clone();
        let p = Arc::new(compile(device, key, checks, bgl)?);
        lock(&self.map)
            .entry(key.clone())
            .or_default()
            .push((checks, n_storage, Arc::clone(&p)));
        Ok(p)
    }
}

/// `BACKPLANE_WEBGPU_CHECKS=on|off` overrides every kernel's choice (for
/// measuring what the checks cost; `off` is only safe for kernels whose
/// indexing conformance proves in bounds).
fn forced_checks() -> Option<Checks> {
    static FORCED: std::sync::OnceLock<Option<Checks>> = std::sync::OnceLock::new();
    *FORCED.get_or_init(
        || match std::env::var("BACKPLANE_WEBGPU_CHECKS").as_deref() {
            Ok("on") => Some(Checks::On),
            Ok("off") => Some(Checks::Trusted),
            _ => None,
        },
    )
}

fn layout(device: &wgpu::Device, n_storage: usize) -> wgpu::BindGroupLayout {
    let mut entries: Vec<wgpu::BindGroupLayoutEntry> = (0..n_storage)
        .map(|i| wgpu::BindGroupLayoutEntry {
            binding: i as u32,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: false },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        })
        .collect();
    entries.push(wgpu::BindGroupLayoutEntry {
        binding: n_storage as u32,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: true,
            min_binding_size: wgpu::BufferSize::new(PARAM_SLOT_BYTES),
        },
        count: None,
    });
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("backplane kernel"),
        entries: &entries,
    })
}

fn compile(
    device: &wgpu::Device,
    key: &PipelineKey,
    checks: Checks,
    bgl: wgpu::BindGroupLayout,
) -> Result<Pipeline, String> {
    let checks = forced_checks().unwrap_or(checks);
    let label = key.label();
    let shader = backplane_shaders::specialise(key).map_err(|e| format!("{label}: {e}"))?;
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let desc = wgpu::ShaderModuleDescriptor {
        label: Some(&label),
        source: wgpu::ShaderSource::Wgsl(shader.source.as_str().into()),
    };
    let module = match checks {
        Checks::On => device.create_shader_module(desc),
        // SAFETY: only kernels whose indexing conformance proves in bounds
        // (guard regions around every output) ask for Trusted.
        Checks::Trusted => unsafe {
            device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked())
        },
    };
    let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(&label),
        bind_group_layouts: &[Some(&bgl)],
        immediate_size: 0,
    });
    let constants: Vec<(&str, f64)> = shader
        .constants
        .iter()
        .map(|(n, v)| (n.as_str(), *v))
        .collect();
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(&label),
        layout: Some(&pl),
        module: &module,
        entry_point: Some(shader.entry),
        compilation_options: wgpu::PipelineCompilationOptions {
            constants: &constants,
            zero_initialize_workgroup_memory: false,
        },
        cache: None,
    });
    if let Some(e) = pollster::block_on(scope.pop()) {
        if std::env::var_os("BACKPLANE_WEBGPU_DUMP_SHADERS").is_some() {
            eprintln!("--- {label} ---\n{}", shader.source);
        }
        return Err(format!("pipeline {label} failed to build: {e}"));
    }
    Ok(Pipeline {
        pipeline,
        layout: bgl,
        label,
    })
}
