//! Native twins of the WGSL pipelines: the same specialised WGSL, with the
//! same override constants, translated to SPIR-V by naga with the options
//! wgpu-hal's Vulkan backend would use for that pipeline, then built with
//! raw Vulkan calls on wgpu's device. Cached per (key, checks, storage
//! bindings) for the life of the device.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Mutex;

use ash::vk;
use backplane_shaders::PipelineKey;

use crate::lock;
use crate::pipelines::Checks;

/// What naga's SPIR-V writer needs to know about the device, read once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpirvTarget {
    /// SPIR-V version: the highest the device's Vulkan version accepts
    /// (as wgpu-hal picks it).
    pub lang_version: (u8, u8),
    /// Whether wgpu runs with robust buffer access 2: checked kernels then
    /// leave buffer accesses to the driver, as wgpu's do.
    pub robust_buffer_access2: bool,
}

impl SpirvTarget {
    /// The target of a device of Vulkan version `api_version`.
    pub fn new(api_version: u32, robust_buffer_access2: bool) -> SpirvTarget {
        let minor = vk::api_version_minor(api_version);
        let major = vk::api_version_major(api_version);
        let lang_version = match (major, minor) {
            (1, 0) => (1, 0),
            (1, 1) => (1, 3),
            (1, 2) => (1, 5),
            _ => (1, 6),
        };
        SpirvTarget {
            lang_version,
            robust_buffer_access2,
        }
    }

    /// naga's bounds-check policies for a pipeline built with `checks`:
    /// what wgpu-hal uses for `create_shader_module` (checked) and for
    /// `create_shader_module_trusted` with every runtime check off.
    pub fn bounds_checks(&self, checks: Checks) -> naga::proc::BoundsCheckPolicies {
        use naga::proc::BoundsCheckPolicy::{Restrict, Unchecked};
        match checks {
            Checks::On => naga::proc::BoundsCheckPolicies {
                index: Restrict,
                buffer: if self.robust_buffer_access2 {
                    Unchecked
                } else {
                    Restrict
                },
                image_load: Restrict,
                binding_array: Unchecked,
            },
            Checks::Trusted => naga::proc::BoundsCheckPolicies {
                index: Unchecked,
                buffer: Unchecked,
                image_load: Unchecked,
                binding_array: Unchecked,
            },
        }
    }

    /// The writer options for a pipeline built with `checks` (workgroup
    /// memory not zeroed: every pipeline of this backend is built with
    /// `zero_initialize_workgroup_memory: false`).
    pub fn options(&self, checks: Checks) -> naga::back::spv::Options<'static> {
        let checked = checks == Checks::On;
        naga::back::spv::Options {
            lang_version: self.lang_version,
            flags: naga::back::spv::WriterFlags::empty(),
            // Bindings keep their numbers, group 0 being set 0 (what
            // wgpu-hal's binding map says for these plain buffer layouts).
            fake_missing_bindings: true,
            capabilities: None,
            bounds_check_policies: self.bounds_checks(checks),
            zero_initialize_workgroup_memory:
                naga::back::spv::ZeroInitializeWorkgroupMemoryMode::None,
            force_loop_bounding: checked,
            use_storage_input_output_16: false,
            emit_int_div_checks: checked,
            task_dispatch_limits: None,
            ..Default::default()
        }
    }
}

/// A WGSL kernel translated to SPIR-V.
#[derive(Clone, Debug)]
pub struct Translated {
    /// The SPIR-V words.
    pub words: Vec<u32>,
    /// The entry point.
    pub entry: &'static str,
    /// Per storage binding of group 0 (by binding number), whether the
    /// kernel writes it; a number past the end is not accessed.
    pub written: Vec<bool>,
}

/// Which storage bindings of group 0 the entry point `entry` writes or
/// updates atomically, by binding number, from naga's analysis (calls
/// included); `None` when there is no such entry point.
fn written_bindings(
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    entry: &str,
) -> Option<Vec<bool>> {
    use naga::valid::GlobalUse;
    let index = module.entry_points.iter().position(|e| e.name == entry)?;
    let uses = info.get_entry_point(index);
    let mut written = Vec::new();
    for (handle, var) in module.global_variables.iter() {
        let (Some(binding), naga::AddressSpace::Storage { .. }) = (&var.binding, var.space) else {
            continue;
        };
        if binding.group != 0 {
            continue;
        }
        let at = binding.binding as usize;
        if written.len() <= at {
            written.resize(at + 1, false);
        }
        written[at] |= uses[handle].intersects(GlobalUse::WRITE | GlobalUse::ATOMIC);
    }
    Some(written)
}

/// The SPIR-V of `key`'s kernel built with `checks`, its entry point and
/// the bindings it writes.
pub fn spirv(
    key: &PipelineKey,
    checks: Checks,
    target: &SpirvTarget,
) -> Result<Translated, String> {
    let label = key.label();
    let shader = backplane_shaders::specialise(key).map_err(|e| format!("{label}: {e}"))?;
    let mut parse = naga::front::wgsl::Options::new();
    parse.capabilities = naga::valid::Capabilities::all();
    let module = naga::front::wgsl::Frontend::new_with_options(parse)
        .parse(&shader.source)
        .map_err(|e| format!("{label}: WGSL: {}", e.emit_to_string(&shader.source)))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| format!("{label}: validation: {}", e.emit_to_string(&shader.source)))?;
    let mut constants = naga::back::PipelineConstants::default();
    for (name, value) in &shader.constants {
        constants.insert(name.clone(), *value);
    }
    let stage = naga::ShaderStage::Compute;
    let (module, info) = naga::back::pipeline_constants::process_overrides(
        &module,
        &info,
        Some((stage, shader.entry)),
        &constants,
    )
    .map_err(|e| format!("{label}: override constants: {e}"))?;
    let pipeline_options = naga::back::spv::PipelineOptions {
        shader_stage: stage,
        entry_point: shader.entry.to_string(),
    };
    let words = naga::back::spv::write_vec(
        &module,
        &info,
        &target.options(checks),
        Some(&pipeline_options),
    )
    .map_err(|e| format!("{label}: SPIR-V: {e}"))?;
    let written = written_bindings(&module, &info, shader.entry)
        .ok_or_else(|| format!("{label}: no entry point {}", shader.entry))?;
    Ok(Translated {
        words,
        entry: shader.entry,
        written,
    })
}

/// The descriptor set layout and pipeline layout of every twin with a
/// given number of storage bindings: storage buffers at `0..n`, the
/// parameter uniform at `n` (its slot's offset written in the set).
#[derive(Clone, Copy)]
pub struct Layout {
    /// Set 0's layout.
    pub set: vk::DescriptorSetLayout,
    /// The pipeline layout (set 0 only).
    pub pipeline: vk::PipelineLayout,
}

/// What a twin is built from.
#[derive(Clone, Copy, Debug)]
pub enum TwinSource<'a> {
    /// A WGSL kernel: its key and the checks its wgpu pipeline has.
    Wgsl(&'a PipelineKey, Checks),
    /// A native kernel's embedded SPIR-V, by name ([`crate::native`]).
    Native(&'a str),
}

/// A twin's cache key: its source, owned, and its storage bindings.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum TwinId {
    Wgsl(PipelineKey, Checks, usize),
    Native(String, usize),
}

impl TwinSource<'_> {
    fn id(&self, n_storage: usize) -> TwinId {
        match *self {
            TwinSource::Wgsl(key, checks) => TwinId::Wgsl(key.clone(), checks, n_storage),
            TwinSource::Native(name) => TwinId::Native(name.to_string(), n_storage),
        }
    }

    /// The module's SPIR-V, its entry point, a label for errors and the
    /// storage bindings it writes (`None`: unknown, a native kernel).
    fn spirv(&self, target: &SpirvTarget) -> Result<TwinModule, String> {
        match *self {
            TwinSource::Wgsl(key, checks) => {
                let t = spirv(key, checks, target)?;
                Ok((t.words, t.entry, key.label(), Some(t.written)))
            }
            // Native kernels are GLSL: their entry point is `main`.
            TwinSource::Native(name) => Ok((
                crate::native::kernels::spirv(name)?,
                "main",
                format!("native kernel {name}"),
                None,
            )),
        }
    }
}

/// A twin's SPIR-V, entry point, label and written bindings.
type TwinModule = (Vec<u32>, &'static str, String, Option<Vec<bool>>);

/// A twin pipeline and the storage bindings it writes, by binding number
/// (`None`: unknown, so every binding counts as written).
#[derive(Clone, Debug)]
pub struct Twin {
    /// The pipeline.
    pub pipeline: vk::Pipeline,
    /// Whether it writes each storage binding.
    pub written: Option<Vec<bool>>,
}

impl Twin {
    /// Whether the kernel may write its storage binding `binding`.
    pub fn writes(&self, binding: usize) -> bool {
        self.written
            .as_ref()
            .is_none_or(|w| w.get(binding).copied().unwrap_or(false))
    }
}

/// Twins per source and storage bindings, and layouts per storage
/// bindings; destroyed by [`PipelineTwins::destroy`].
#[derive(Default)]
pub struct PipelineTwins {
    layouts: Mutex<HashMap<usize, Layout>>,
    pipelines: Mutex<HashMap<TwinId, Twin>>,
}

impl PipelineTwins {
    /// The layout for `n_storage` storage bindings, created on first use.
    pub fn layout(&self, device: &ash::Device, n_storage: usize) -> Result<Layout, String> {
        let mut layouts = lock(&self.layouts);
        if let Some(l) = layouts.get(&n_storage) {
            return Ok(*l);
        }
        let mut bindings: Vec<vk::DescriptorSetLayoutBinding> = (0..n_storage)
            .map(|i| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        bindings.push(
            vk::DescriptorSetLayoutBinding::default()
                .binding(n_storage as u32)
                .descriptor_type(vk::DescriptorType::UNIFORM_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE),
        );
        let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
        // SAFETY: a valid device; the create info lives across the call.
        let set = unsafe { device.create_descriptor_set_layout(&info, None) }
            .map_err(|e| format!("descriptor set layout ({n_storage} storage buffers): {e}"))?;
        let sets = [set];
        let info = vk::PipelineLayoutCreateInfo::default().set_layouts(&sets);
        // SAFETY: as above; `set` was just created on this device.
        let pipeline = match unsafe { device.create_pipeline_layout(&info, None) } {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: unused, created above.
                unsafe { device.destroy_descriptor_set_layout(set, None) };
                return Err(format!(
                    "pipeline layout ({n_storage} storage buffers): {e}"
                ));
            }
        };
        let l = Layout { set, pipeline };
        layouts.insert(n_storage, l);
        Ok(l)
    }

    /// The twin of `source`'s pipeline with `n_storage` storage bindings,
    /// compiled on first use; `varying_subgroups` as wgpu sets it (the
    /// device has subgroups).
    pub fn pipeline(
        &self,
        device: &ash::Device,
        target: &SpirvTarget,
        varying_subgroups: bool,
        source: TwinSource,
        n_storage: usize,
    ) -> Result<Twin, String> {
        let id = source.id(n_storage);
        if let Some(p) = lock(&self.pipelines).get(&id) {
            return Ok(p.clone());
        }
        let layout = self.layout(device, n_storage)?;
        let (words, entry, label, written) = source.spirv(target)?;
        let entry = CString::new(entry).map_err(|e| format!("{label}: entry point: {e}"))?;
        let info = vk::ShaderModuleCreateInfo::default().code(&words);
        // SAFETY: valid device; `words` is naga's validated SPIR-V, or a
        // native kernel's, validated when the build made it.
        let module = unsafe { device.create_shader_module(&info, None) }
            .map_err(|e| format!("{label}: shader module: {e}"))?;
        let mut flags = vk::PipelineShaderStageCreateFlags::empty();
        if varying_subgroups {
            flags |= vk::PipelineShaderStageCreateFlags::ALLOW_VARYING_SUBGROUP_SIZE;
        }
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .flags(flags)
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(&entry);
        let info = vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(layout.pipeline);
        // SAFETY: module and layout are live objects of this device.
        let made =
            unsafe { device.create_compute_pipelines(vk::PipelineCache::null(), &[info], None) };
        // SAFETY: the module is only needed while the pipeline is created.
        unsafe { device.destroy_shader_module(module, None) };
        let pipeline = match made {
            Ok(p) => p.into_iter().next(),
            Err((p, e)) => {
                for q in p.into_iter().filter(|q| *q != vk::Pipeline::null()) {
                    // SAFETY: a failed creation's leftovers, never used.
                    unsafe { device.destroy_pipeline(q, None) };
                }
                return Err(format!("{label}: compute pipeline: {e}"));
            }
        }
        .ok_or_else(|| format!("{label}: compute pipeline: none returned"))?;
        let twin = Twin { pipeline, written };
        lock(&self.pipelines).insert(id, twin.clone());
        Ok(twin)
    }

    /// Destroys every twin and layout (nothing may use them any more).
    ///
    /// # Safety
    /// No command buffer recorded with them may be pending or used again.
    pub unsafe fn destroy(&self, device: &ash::Device) {
        for (_, p) in lock(&self.pipelines).drain() {
            // SAFETY: the caller guarantees nothing uses it.
            unsafe { device.destroy_pipeline(p.pipeline, None) };
        }
        for (_, l) in lock(&self.layouts).drain() {
            // SAFETY: as above.
            unsafe {
                device.destroy_pipeline_layout(l.pipeline, None);
                device.destroy_descriptor_set_layout(l.set, None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spirv_version_follows_the_device_vulkan_version() {
        let at = |minor| SpirvTarget::new(vk::make_api_version(0, 1, minor, 0), false);
        assert_eq!(at(0).lang_version, (1, 0));
        assert_eq!(at(1).lang_version, (1, 3));
        assert_eq!(at(2).lang_version, (1, 5));
        assert_eq!(at(3).lang_version, (1, 6));
        assert_eq!(at(4).lang_version, (1, 6));
    }

    #[test]
    fn a_kernel_translates_to_spirv_of_the_device_version_with_its_checks() {
        let key = PipelineKey::new("unary", "scale")
            .ty("SRC0", "f32")
            .ty("DST", "f32")
            .wg(256);
        let target = SpirvTarget::new(vk::API_VERSION_1_2, false);
        let checked = spirv(&key, Checks::On, &target).expect("checked");
        let trusted = spirv(&key, Checks::Trusted, &target).expect("trusted");
        assert_eq!(checked.words[0], 0x0723_0203, "SPIR-V magic");
        assert_eq!(checked.words[1], 0x0001_0500, "SPIR-V 1.5 for Vulkan 1.2");
        assert!(!checked.entry.is_empty());
        // Bounds and loop checks are code: the trusted module differs.
        assert_ne!(checked.words, trusted.words);
        // The source is read, the result written (both declared
        // read_write: the analysis tells them apart).
        assert_eq!(checked.written, vec![false, true]);
        let unknown = PipelineKey::new("no_such_shader", "");
        let err = spirv(&unknown, Checks::On, &target).expect_err("no shader");
        assert!(err.contains("no_such_shader"), "{err}");
    }

    #[test]
    fn trusted_kernels_drop_every_check_and_checked_ones_restrict_indices() {
        use naga::proc::BoundsCheckPolicy::{Restrict, Unchecked};
        let plain = SpirvTarget::new(vk::API_VERSION_1_3, false);
        let robust = SpirvTarget::new(vk::API_VERSION_1_3, true);
        assert_eq!(plain.bounds_checks(Checks::On).index, Restrict);
        assert_eq!(plain.bounds_checks(Checks::On).buffer, Restrict);
        assert_eq!(robust.bounds_checks(Checks::On).buffer, Unchecked);
        let trusted = plain.options(Checks::Trusted);
        assert_eq!(trusted.bounds_check_policies.index, Unchecked);
        assert_eq!(trusted.bounds_check_policies.buffer, Unchecked);
        assert!(!trusted.force_loop_bounding && !trusted.emit_int_div_checks);
        let checked = plain.options(Checks::On);
        assert!(checked.force_loop_bounding && checked.emit_int_div_checks);
        assert_eq!(
            checked.zero_initialize_workgroup_memory,
            naga::back::spv::ZeroInitializeWorkgroupMemoryMode::None
        );
    }
}
