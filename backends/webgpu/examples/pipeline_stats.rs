//! What the Vulkan driver made of the native kernels: each built kernel
//! compiled into a compute pipeline on the first Vulkan device, with the
//! statistics of `VK_KHR_pipeline_executable_properties` printed (on
//! NVIDIA: registers per invocation, shared memory, code size, local
//! memory; registers bound how many workgroups share a multiprocessor).
//!
//! `cargo build --release -p backplane-webgpu --features native-vulkan
//! --example pipeline_stats`, then `pipeline_stats [PATTERN...]`: the
//! kernels whose names contain any PATTERN (default: the f16 GEMMs, the
//! peak probe and the head-128 and head-256 attention kernels). One line
//! per kernel. The device is opened with every feature it offers of the
//! structs chained here (as wgpu enables robust buffer access, so does
//! this), so a kernel's code is the driver's for our pipelines up to the
//! pipeline layout (built here from the module's own bindings).

use std::ffi::CStr;

use ash::vk;
use backplane_webgpu::native::kernels::{self, BuiltKernel};
use backplane_webgpu::native::open::{COOPMAT2_NV, CoopMat2FeaturesNv};

/// Patterns used when none are given.
const DEFAULT_PATTERNS: &[&str] = &[
    "mul_mat_coopmat_f16_",
    "coopmat_peak_",
    "mul_mat_cm2_",
    "_128x128",
    "_256x256",
];

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let patterns: Vec<&str> = if args.is_empty() {
        DEFAULT_PATTERNS.to_vec()
    } else {
        args.iter().map(String::as_str).collect()
    };
    let chosen: Vec<&BuiltKernel> = kernels::KERNELS
        .iter()
        .filter(|k| patterns.iter().any(|p| k.name.contains(p)))
        .filter(|k| !k.name.ends_with("_emulated"))
        .collect();
    if chosen.is_empty() {
        return Err(format!("no built kernel matches {patterns:?}"));
    }
    // SAFETY: loads the system's Vulkan loader; every handle below is
    // created from it and destroyed before it is dropped.
    let entry = unsafe { ash::Entry::load() }.map_err(|e| format!("Vulkan loader: {e}"))?;
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
    // SAFETY: a valid create info.
    let instance = unsafe {
        entry.create_instance(
            &vk::InstanceCreateInfo::default().application_info(&app),
            None,
        )
    }
    .map_err(|e| format!("vkCreateInstance: {e}"))?;
    let result = Stats::open(&instance).map(|stats| {
        stats.print_all(&chosen);
        stats.destroy();
    });
    // SAFETY: every child object was destroyed.
    unsafe { instance.destroy_instance(None) };
    result
}

/// A device opened for pipeline statistics.
struct Stats {
    device: ash::Device,
    executables: ash::khr::pipeline_executable_properties::Device,
}

impl Stats {
    /// Opens the first physical device listing the statistics extension,
    /// with every feature it offers of the chained structs.
    fn open(instance: &ash::Instance) -> Result<Stats, String> {
        // SAFETY: queries on a valid instance.
        let devices = unsafe { instance.enumerate_physical_devices() }
            .map_err(|e| format!("vkEnumeratePhysicalDevices: {e}"))?;
        for pd in devices {
            // SAFETY: as above.
            let props = unsafe { instance.get_physical_device_properties(pd) };
            let name = props
                .device_name_as_c_str()
                .map_or("?".into(), |n| n.to_string_lossy());
            // SAFETY: as above.
            let exts = unsafe { instance.enumerate_device_extension_properties(pd) }
                .map_err(|e| format!("{name}: extensions: {e}"))?;
            let has = |wanted: &CStr| {
                exts.iter()
                    .any(|e| e.extension_name_as_c_str() == Ok(wanted))
            };
            if !has(ash::khr::pipeline_executable_properties::NAME) {
                eprintln!("{name}: no VK_KHR_pipeline_executable_properties, skipped");
                continue;
            }
            let mut names = vec![ash::khr::pipeline_executable_properties::NAME.as_ptr()];
            let mut v11 = vk::PhysicalDeviceVulkan11Features::default();
            let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
            let mut v13 = vk::PhysicalDeviceVulkan13Features::default();
            let mut stats = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default();
            let mut coop = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default();
            let mut coop2 = CoopMat2FeaturesNv::default();
            let mut f2 = vk::PhysicalDeviceFeatures2::default()
                .push_next(&mut v11)
                .push_next(&mut v12)
                .push_next(&mut v13)
                .push_next(&mut stats);
            if has(ash::khr::cooperative_matrix::NAME) {
                names.push(ash::khr::cooperative_matrix::NAME.as_ptr());
                f2 = f2.push_next(&mut coop);
                if has(COOPMAT2_NV) {
                    names.push(COOPMAT2_NV.as_ptr());
                    f2 = f2.push_next(&mut coop2);
                }
            }
            // SAFETY: every chained struct is core 1.3 or of a listed
            // extension, and outlives the call.
            unsafe { instance.get_physical_device_features2(pd, &mut f2) };
            let priorities = [1.0];
            let queue = [vk::DeviceQueueCreateInfo::default()
                .queue_family_index(0)
                .queue_priorities(&priorities)];
            let info = vk::DeviceCreateInfo::default()
                .queue_create_infos(&queue)
                .enabled_extension_names(&names)
                .push_next(&mut f2);
            // SAFETY: the features enabled are those just reported.
            let device = unsafe { instance.create_device(pd, &info, None) }
                .map_err(|e| format!("{name}: vkCreateDevice: {e}"))?;
            let executables =
                ash::khr::pipeline_executable_properties::Device::new(instance, &device);
            println!(
                "{name} (driver {}), pipeline statistics:",
                props.driver_version
            );
            return Ok(Stats {
                device,
                executables,
            });
        }
        Err("no Vulkan device lists VK_KHR_pipeline_executable_properties".into())
    }

    /// Prints one line per kernel; a kernel that fails prints why.
    fn print_all(&self, chosen: &[&BuiltKernel]) {
        for k in chosen {
            match self.statistics(k.name) {
                Ok(line) => println!("{} {line}", k.name),
                Err(e) => println!("{} FAILED: {e}", k.name),
            }
        }
    }

    /// The statistics of kernel `name`'s executables, as one line.
    fn statistics(&self, name: &str) -> Result<String, String> {
        let words = kernels::spirv(name)?;
        let bindings = descriptor_bindings(&words)?;
        let d = &self.device;
        let layout_bindings: Vec<vk::DescriptorSetLayoutBinding<'_>> = bindings
            .iter()
            .map(|&(binding, ty)| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(binding)
                    .descriptor_type(ty)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        // SAFETY: valid create infos on a live device; each object is
        // destroyed before returning.
        unsafe {
            let set = d
                .create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&layout_bindings),
                    None,
                )
                .map_err(|e| format!("descriptor set layout: {e}"))?;
            let line = self.with_set_layout(set, &words);
            d.destroy_descriptor_set_layout(set, None);
            line
        }
    }

    /// The statistics line of the module `words` with set layout `set`;
    /// the objects it makes are destroyed before it returns.
    ///
    /// # Safety
    /// `set` is a live descriptor set layout of this device.
    unsafe fn with_set_layout(
        &self,
        set: vk::DescriptorSetLayout,
        words: &[u32],
    ) -> Result<String, String> {
        let d = &self.device;
        let sets = [set];
        // SAFETY: valid create infos on a live device; each object is
        // destroyed before returning.
        unsafe {
            let layout = d
                .create_pipeline_layout(
                    &vk::PipelineLayoutCreateInfo::default().set_layouts(&sets),
                    None,
                )
                .map_err(|e| format!("pipeline layout: {e}"))?;
            let line = match d
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(words), None)
            {
                Ok(module) => {
                    let line = self.pipeline_line(layout, module);
                    d.destroy_shader_module(module, None);
                    line
                }
                Err(e) => Err(format!("shader module: {e}")),
            };
            d.destroy_pipeline_layout(layout, None);
            line
        }
    }

    /// Builds the pipeline with statistics captured and formats them.
    ///
    /// # Safety
    /// `layout` and `module` are live objects of this device.
    unsafe fn pipeline_line(
        &self,
        layout: vk::PipelineLayout,
        module: vk::ShaderModule,
    ) -> Result<String, String> {
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        let info = vk::ComputePipelineCreateInfo::default()
            .flags(vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR)
            .stage(stage)
            .layout(layout);
        // SAFETY: the caller's objects are live; the pipeline is destroyed
        // below.
        let pipeline = unsafe {
            self.device
                .create_compute_pipelines(vk::PipelineCache::null(), &[info], None)
        }
        .map_err(|(_, e)| format!("vkCreateComputePipelines: {e}"))?[0];
        let mut line = String::new();
        // SAFETY: queries on a pipeline created with CAPTURE_STATISTICS.
        let result = unsafe {
            self.executables.get_pipeline_executable_properties(
                &vk::PipelineInfoKHR::default().pipeline(pipeline),
            )
        }
        .map_err(|e| format!("executable properties: {e}"))
        .and_then(|execs| {
            for index in 0..execs.len() as u32 {
                let info = vk::PipelineExecutableInfoKHR::default()
                    .pipeline(pipeline)
                    .executable_index(index);
                // SAFETY: as above; `index` is below the count reported.
                let stats = unsafe { self.executables.get_pipeline_executable_statistics(&info) }
                    .map_err(|e| format!("statistics: {e}"))?;
                for s in stats {
                    let name = s
                        .name_as_c_str()
                        .map_or("?".into(), |n| n.to_string_lossy());
                    line.push_str(&format!(" | {name}={}", value(&s)));
                }
            }
            Ok(())
        });
        // SAFETY: no command uses the pipeline.
        unsafe { self.device.destroy_pipeline(pipeline, None) };
        result.map(|()| line)
    }

    fn destroy(self) {
        // SAFETY: every object of the device was destroyed.
        unsafe { self.device.destroy_device(None) };
    }
}

/// A statistic's value in its format.
fn value(s: &vk::PipelineExecutableStatisticKHR<'_>) -> String {
    // SAFETY: the union member read is the one `format` names.
    unsafe {
        match s.format {
            vk::PipelineExecutableStatisticFormatKHR::BOOL32 => (s.value.b32 != 0).to_string(),
            vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
            vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
            vk::PipelineExecutableStatisticFormatKHR::FLOAT64 => format!("{:.2}", s.value.f64),
            f => format!("(format {f:?})"),
        }
    }
}

/// The descriptor bindings of set 0 a SPIR-V module declares: storage
/// buffers (variables of storage class StorageBuffer, or Uniform blocks
/// decorated BufferBlock) and uniform buffers, each binding once (several
/// variables may alias one binding).
fn descriptor_bindings(words: &[u32]) -> Result<Vec<(u32, vk::DescriptorType)>, String> {
    use std::collections::{BTreeMap, HashMap, HashSet};
    const OP_DECORATE: u32 = 71;
    const OP_TYPE_POINTER: u32 = 32;
    const OP_VARIABLE: u32 = 59;
    const DECORATION_BUFFER_BLOCK: u32 = 3;
    const DECORATION_BINDING: u32 = 33;
    const STORAGE_UNIFORM: u32 = 2;
    const STORAGE_BUFFER: u32 = 12;
    let mut binding_of: HashMap<u32, u32> = HashMap::new();
    let mut buffer_blocks: HashSet<u32> = HashSet::new();
    let mut pointee: HashMap<u32, u32> = HashMap::new();
    let mut variables: Vec<(u32, u32, u32)> = Vec::new();
    let mut at = 5;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        let op = words[at] & 0xFFFF;
        if count == 0 || at + count > words.len() {
            return Err(format!("malformed SPIR-V at word {at}"));
        }
        let w = &words[at..at + count];
        match op {
            OP_DECORATE if count >= 4 && w[2] == DECORATION_BINDING => {
                binding_of.insert(w[1], w[3]);
            }
            OP_DECORATE if count >= 3 && w[2] == DECORATION_BUFFER_BLOCK => {
                buffer_blocks.insert(w[1]);
            }
            OP_TYPE_POINTER if count >= 4 => {
                pointee.insert(w[1], w[3]);
            }
            OP_VARIABLE if count >= 4 => variables.push((w[1], w[2], w[3])),
            _ => {}
        }
        at += count;
    }
    let mut out: BTreeMap<u32, vk::DescriptorType> = BTreeMap::new();
    for (ty, id, class) in variables {
        let Some(&binding) = binding_of.get(&id) else {
            continue;
        };
        let storage = class == STORAGE_BUFFER
            || (class == STORAGE_UNIFORM
                && pointee.get(&ty).is_some_and(|t| buffer_blocks.contains(t)));
        let kind = if storage {
            vk::DescriptorType::STORAGE_BUFFER
        } else if class == STORAGE_UNIFORM {
            vk::DescriptorType::UNIFORM_BUFFER_DYNAMIC
        } else {
            continue;
        };
        out.insert(binding, kind);
    }
    Ok(out.into_iter().collect())
}
