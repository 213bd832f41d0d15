//! Pipelines of the native kernels: the embedded SPIR-V through wgpu's
//! passthrough (`create_shader_module_passthrough`), with the explicit
//! layout every backend kernel uses (storage buffers `0..n`, the
//! parameters a uniform at `n` with a dynamic offset: passthrough modules
//! are not reflected, so wgpu needs the layout given), cached per device.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use crate::lock;
use crate::pipelines::{Checks, Pipeline, PipelineCache};

/// Names of the native kernels whose pipelines any device of this process
/// built (they are built on first dispatch).
static BUILT_IN_PROCESS: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Whether any device of this process built (so dispatched) native kernel
/// `name`: tests' proof that a product ran natively.
pub fn built_in_process(name: &str) -> bool {
    lock(&BUILT_IN_PROCESS).contains(name)
}

/// Compiled native pipelines of one device, by kernel name.
#[derive(Default)]
pub struct NativePipelines {
    map: Mutex<HashMap<String, Arc<Pipeline>>>,
}

impl NativePipelines {
    /// The pipeline of kernel `name` (workgroup size `wg`, `n_storage`
    /// storage bindings), built on first use. Errors name the kernel.
    pub fn get(
        &self,
        device: &wgpu::Device,
        shared: &PipelineCache,
        name: &str,
        wg: (u32, u32, u32),
        n_storage: usize,
    ) -> Result<Arc<Pipeline>, String> {
        if let Some(p) = lock(&self.map).get(name) {
            return Ok(Arc::clone(p));
        }
        let words = super::kernels::spirv(name)?;
        let layout = shared.shared_layout(device, n_storage);
        let label = format!("native.{name}");
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let entry = wgpu::PassthroughShaderEntryPoint {
            name: "main".into(),
            workgroup_size: wg,
        };
        let desc = wgpu::ShaderModuleDescriptorPassthrough {
            label: Some(&label),
            entry_points: vec![entry].into(),
            spirv: Some(words.into()),
            ..Default::default()
        };
        // SAFETY: the SPIR-V was compiled from this crate's GLSL and passed
        // SPIRV-Tools' validator at build time; the kernels are only chosen
        // on devices with every feature their modules declare
        // (`super::mul_mat`), and conformance cases with guard regions
        // around every output check their indexing.
        let module = unsafe { device.create_shader_module_passthrough(desc) };
        let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(&label),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&label),
            layout: Some(&pl),
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &[],
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(format!("native pipeline {label} failed to build: {e}"));
        }
        let p = Arc::new(Pipeline {
            pipeline,
            layout,
            label,
            checks: Checks::Trusted,
        });
        lock(&self.map).insert(name.to_string(), Arc::clone(&p));
        lock(&BUILT_IN_PROCESS).insert(name.to_string());
        Ok(p)
    }
}
