//! Opening a Vulkan device with what the native kernels need beyond
//! wgpu's features, through wgpu-hal (`open_with_callback`, then
//! `create_device_from_hal`), and reading what the physical device offers.
//!
//! wgpu-hal already chains the feature structs of f16/int8, 16-bit
//! storage, subgroup size control, integer dot product and
//! `VK_KHR_cooperative_matrix` (when the matching wgpu features are
//! requested); a second copy of one of those structs would make the chain
//! invalid, so the callback adds only what wgpu never enables:
//! `storageBuffer8BitAccess` and `VK_NV_cooperative_matrix2`.

use std::ffi::{CStr, c_void};

use ash::vk;

use super::kernels;
use super::{CoopShape, NativeFeatures};

/// `VkPhysicalDeviceCooperativeMatrix2FeaturesNV`, which ash 0.38 (Vulkan
/// headers 1.3.281) predates: the fields in the registry's order.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CoopMat2FeaturesNv {
    s_type: vk::StructureType,
    p_next: *mut c_void,
    workgroup_scope: vk::Bool32,
    flexible_dimensions: vk::Bool32,
    reductions: vk::Bool32,
    conversions: vk::Bool32,
    per_element_operations: vk::Bool32,
    tensor_addressing: vk::Bool32,
    block_loads: vk::Bool32,
}

/// `VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV`
/// (extension 594, offset 0). A wrong value would only make the query
/// return nothing, and the extension would stay off.
const COOPMAT2_FEATURES_NV: vk::StructureType = vk::StructureType::from_raw(1_000_593_000);

/// `VkPhysicalDeviceCooperativeMatrix2PropertiesNV`: the fields in the
/// registry's order.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct CoopMat2PropertiesNv {
    s_type: vk::StructureType,
    p_next: *mut c_void,
    workgroup_scope_max_workgroup_size: u32,
    flexible_dimensions_max_dimension: u32,
    workgroup_scope_reserved_shared_memory: u32,
}

/// `VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV`
/// (extension 594, offset 2).
const COOPMAT2_PROPERTIES_NV: vk::StructureType = vk::StructureType::from_raw(1_000_593_002);

impl Default for CoopMat2PropertiesNv {
    fn default() -> Self {
        CoopMat2PropertiesNv {
            s_type: COOPMAT2_PROPERTIES_NV,
            p_next: std::ptr::null_mut(),
            workgroup_scope_max_workgroup_size: 0,
            flexible_dimensions_max_dimension: 0,
            workgroup_scope_reserved_shared_memory: 0,
        }
    }
}

// SAFETY: a Vulkan structure starting with sType and pNext, valid in the
// pNext chain of VkPhysicalDeviceProperties2.
unsafe impl vk::ExtendsPhysicalDeviceProperties2 for CoopMat2PropertiesNv {}

/// The extension's name.
pub const COOPMAT2_NV: &CStr = c"VK_NV_cooperative_matrix2";

impl Default for CoopMat2FeaturesNv {
    fn default() -> Self {
        CoopMat2FeaturesNv {
            s_type: COOPMAT2_FEATURES_NV,
            p_next: std::ptr::null_mut(),
            workgroup_scope: 0,
            flexible_dimensions: 0,
            reductions: 0,
            conversions: 0,
            per_element_operations: 0,
            tensor_addressing: 0,
            block_loads: 0,
        }
    }
}

impl CoopMat2FeaturesNv {
    /// Whether the device has what the cm2 GEMM uses: workgroup-scope
    /// matrices of flexible sizes, tensor addressing and conversions.
    fn gemm(&self) -> bool {
        [
            self.workgroup_scope,
            self.flexible_dimensions,
            self.tensor_addressing,
            self.conversions,
        ]
        .iter()
        .all(|&b| b != 0)
    }

    /// Whether the device also has what the cm2 attention uses: row
    /// reductions and per-element operations.
    fn attention(&self) -> bool {
        self.gemm() && self.reductions != 0 && self.per_element_operations != 0
    }

    /// Whether the device reported any of the extension's features.
    fn any(&self) -> bool {
        [
            self.workgroup_scope,
            self.flexible_dimensions,
            self.reductions,
            self.conversions,
            self.per_element_operations,
            self.tensor_addressing,
            self.block_loads,
        ]
        .iter()
        .any(|&b| b != 0)
    }
}

// SAFETY: a Vulkan structure starting with sType and pNext, valid in the
// pNext chains of VkPhysicalDeviceFeatures2 and VkDeviceCreateInfo.
unsafe impl vk::ExtendsPhysicalDeviceFeatures2 for CoopMat2FeaturesNv {}
// SAFETY: as above.
unsafe impl vk::ExtendsDeviceCreateInfo for CoopMat2FeaturesNv {}

/// What the physical device offers, before opening.
#[derive(Clone, Debug, Default)]
pub struct Offered {
    /// Features as they would be enabled (see [`open_device`]).
    pub features: NativeFeatures,
    /// `VK_KHR_8bit_storage` is listed (added to the device's extensions).
    pub ext_8bit_storage: bool,
    /// The NV extension's features, chained as reported.
    coopmat2: Option<CoopMat2FeaturesNv>,
}

/// Reads what `adapter` offers the native kernels, as they would be
/// enabled by a device requesting `wanted` wgpu features; `Err` names why
/// it offers nothing.
pub fn offered(adapter: &wgpu::Adapter, wanted: wgpu::Features) -> Result<Offered, String> {
    if !kernels::built() {
        return Err(kernels::NOT_BUILT.into());
    }
    let backend = adapter.get_info().backend;
    if backend != wgpu::Backend::Vulkan {
        return Err(format!("the adapter runs on {backend:?}, not Vulkan"));
    }
    if !adapter
        .features()
        .contains(wgpu::Features::PASSTHROUGH_SHADERS)
    {
        return Err("wgpu offers no SPIR-V passthrough on this adapter".into());
    }
    let coopmat_shapes: Vec<CoopShape> = adapter
        .cooperative_matrix_properties()
        .iter()
        .filter(|p| {
            p.ab_type == wgpu::CooperativeScalarType::F16
                && p.cr_type == wgpu::CooperativeScalarType::F32
        })
        .map(|p| CoopShape {
            m: p.m_size,
            n: p.n_size,
            k: p.k_size,
        })
        .collect();
    crate::vulkan::query_physical_device(adapter, |instance, pd, ext| {
        // SAFETY: valid handles from wgpu-hal; only queries.
        let props = unsafe { instance.get_physical_device_properties(pd) };
        let api_12 = props.api_version >= vk::API_VERSION_1_2;
        let api_13 = props.api_version >= vk::API_VERSION_1_3;
        let has_8bit = api_12 || ext.has(ash::khr::_8bit_storage::NAME);
        let has_dot = api_13 || ext.has(ash::khr::shader_integer_dot_product::NAME);
        let has_ssc = api_13 || ext.has(ash::ext::subgroup_size_control::NAME);
        let has_coop = ext.has(ash::khr::cooperative_matrix::NAME);
        let has_coop2 = ext.has(COOPMAT2_NV);
        let mut s8 = vk::PhysicalDevice8BitStorageFeatures::default();
        let mut s16 = vk::PhysicalDevice16BitStorageFeatures::default();
        let mut f16i8 = vk::PhysicalDeviceShaderFloat16Int8Features::default();
        let mut dot = vk::PhysicalDeviceShaderIntegerDotProductFeatures::default();
        let mut ssc = vk::PhysicalDeviceSubgroupSizeControlFeatures::default();
        let mut coop = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default();
        let mut coop2 = CoopMat2FeaturesNv::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut s16)
            .push_next(&mut f16i8);
        if has_8bit {
            f2 = f2.push_next(&mut s8);
        }
        if has_dot {
            f2 = f2.push_next(&mut dot);
        }
        if has_ssc {
            f2 = f2.push_next(&mut ssc);
        }
        if has_coop {
            f2 = f2.push_next(&mut coop);
        }
        if has_coop2 {
            f2 = f2.push_next(&mut coop2);
        }
        // SAFETY: every chained struct belongs to a supported extension or
        // core version and outlives the call.
        unsafe { instance.get_physical_device_features2(pd, &mut f2) };
        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        let mut ssc_props = vk::PhysicalDeviceSubgroupSizeControlProperties::default();
        let mut coop2_props = CoopMat2PropertiesNv::default();
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut subgroup);
        if has_ssc {
            p2 = p2.push_next(&mut ssc_props);
        }
        if has_coop2 {
            p2 = p2.push_next(&mut coop2_props);
        }
        // SAFETY: as above.
        unsafe { instance.get_physical_device_properties2(pd, &mut p2) };
        let arithmetic = subgroup
            .supported_operations
            .contains(vk::SubgroupFeatureFlags::ARITHMETIC)
            && subgroup
                .supported_stages
                .contains(vk::ShaderStageFlags::COMPUTE);
        let subgroup_size = if has_ssc && ssc_props.min_subgroup_size > 0 {
            (ssc_props.min_subgroup_size, ssc_props.max_subgroup_size)
        } else {
            (subgroup.subgroup_size, subgroup.subgroup_size)
        };
        let f16_wanted = wanted.contains(wgpu::Features::SHADER_F16);
        let coop_wanted = wanted.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);
        let coopmat = has_coop && coop.cooperative_matrix != 0 && coop_wanted;
        // The NV extension builds on the KHR one, which wgpu enables only
        // with its cooperative-matrix feature.
        let coopmat2 = has_coop2 && coop2.any() && coopmat;
        Some(Offered {
            features: NativeFeatures {
                unavailable: None,
                passthrough: true,
                storage8: has_8bit && s8.storage_buffer8_bit_access != 0,
                // wgpu enables 16-bit storage and shaderFloat16 with SHADER_F16.
                storage16: f16_wanted && s16.storage_buffer16_bit_access != 0,
                float16: f16_wanted && f16i8.shader_float16 != 0,
                int8: f16i8.shader_int8 != 0,
                subgroup_arithmetic: arithmetic,
                subgroup_size,
                subgroup_size_control: has_ssc && ssc.subgroup_size_control != 0,
                integer_dot_product: has_dot && dot.shader_integer_dot_product != 0,
                coopmat,
                coopmat_shapes: if coopmat { coopmat_shapes } else { Vec::new() },
                coopmat2,
                coopmat2_gemm: coopmat2 && coop2.gemm(),
                coopmat2_attention: coopmat2 && coop2.attention(),
                coopmat2_max_workgroup: if coopmat2 {
                    coop2_props.workgroup_scope_max_workgroup_size
                } else {
                    0
                },
            },
            ext_8bit_storage: ext.has(ash::khr::_8bit_storage::NAME),
            coopmat2: coopmat2.then_some(coop2),
        })
    })
    .ok_or_else(|| "the Vulkan physical device could not be queried".to_string())
}

/// Opens `adapter` as `desc` asks; in builds with native kernels, on
/// Vulkan through wgpu-hal with their extras (SPIR-V passthrough, 8-bit storage, NV
/// cooperative matrix 2 where offered). Where that is not possible or
/// fails, opens the plain wgpu device and says why in the returned
/// features (a failure of the hal path is also logged on stderr).
pub fn open_device(
    adapter: &wgpu::Adapter,
    desc: &wgpu::DeviceDescriptor<'_>,
) -> Result<(wgpu::Device, wgpu::Queue, NativeFeatures), String> {
    let plain = |why: String| {
        let (device, queue) = pollster::block_on(adapter.request_device(desc))
            .map_err(|e| format!("opening {}: {e}", adapter.get_info().name))?;
        Ok((device, queue, NativeFeatures::unavailable(why)))
    };
    // Without native kernels nothing needs the extras: the device is
    // opened exactly as wgpu opens it.
    if !super::kernels::built() {
        return plain(super::kernels::NOT_BUILT.to_string());
    }
    let offered = match offered(adapter, desc.required_features) {
        Ok(o) => o,
        Err(why) => return plain(why),
    };
    match open_hal(adapter, desc, &offered) {
        Ok((device, queue)) => Ok((device, queue, offered.features)),
        Err(e) => {
            let why =
                format!("opening the device through wgpu-hal failed ({e}); plain wgpu device");
            eprintln!("backplane-webgpu: {}: {why}", adapter.get_info().name);
            plain(why)
        }
    }
}

fn open_hal(
    adapter: &wgpu::Adapter,
    desc: &wgpu::DeviceDescriptor<'_>,
    offered: &Offered,
) -> Result<(wgpu::Device, wgpu::Queue), String> {
    let features = desc.required_features | wgpu::Features::PASSTHROUGH_SHADERS;
    let mut s8 = vk::PhysicalDevice8BitStorageFeatures::default()
        .storage_buffer8_bit_access(offered.features.storage8);
    let mut coop2 = offered.coopmat2;
    let add_8bit_ext = offered.features.storage8 && offered.ext_8bit_storage;
    // The structs outlive vkCreateDevice, which runs after the callback.
    let s8_next = offered.features.storage8.then_some(&mut s8);
    let coop2_next = coop2.as_mut();
    let callback: Box<wgpu::hal::vulkan::CreateDeviceCallback<'_>> = Box::new(move |args| {
        if add_8bit_ext && !args.extensions.contains(&ash::khr::_8bit_storage::NAME) {
            args.extensions.push(ash::khr::_8bit_storage::NAME);
        }
        let mut info = std::mem::take(args.create_info);
        if let Some(next) = s8_next {
            info = info.push_next(next);
        }
        if let Some(next) = coop2_next {
            if !args.extensions.contains(&COOPMAT2_NV) {
                args.extensions.push(COOPMAT2_NV);
            }
            info = info.push_next(next);
        }
        *args.create_info = info;
    });
    let open = {
        // SAFETY: the hal adapter is only used to open a device from it.
        let hal =
            unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }.ok_or("not a Vulkan adapter")?;
        // SAFETY: the features and limits are the adapter's own (as
        // `request_device` would pass them); the callback adds extensions
        // and features the physical device lists (read by `offered`),
        // chains only structs wgpu-hal does not, and removes nothing.
        unsafe {
            hal.open_with_callback(
                features,
                &desc.required_limits,
                &desc.memory_hints,
                Some(callback),
            )
        }
        .map_err(|e| format!("vkCreateDevice: {e}"))?
    };
    let desc = wgpu::DeviceDescriptor {
        required_features: features,
        ..desc.clone()
    };
    // SAFETY: `open` was created from this adapter's hal adapter, with
    // every feature `desc` asks for.
    unsafe { adapter.create_device_from_hal(open, &desc) }.map_err(|e| e.to_string())
}
