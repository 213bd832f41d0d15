//! How many multiprocessors (NVIDIA SMs, AMD compute units) the GPU has,
//! which wgpu does not expose: on Vulkan the driver is asked through
//! `VK_NV_shader_sm_builtins` or `VK_AMD_shader_core_properties` (ash, via
//! wgpu's `as_hal`). Kernels that split work to fill the GPU (flash
//! attention over few queries) size their grids from it.

/// The adapter's multiprocessor count, when the driver reports one.
pub fn query(adapter: &wgpu::Adapter) -> Option<u32> {
    // Only the Vulkan path reads the adapter.
    let _ = adapter;
    #[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
    if let Some(n) = vulkan(adapter) {
        return Some(n);
    }
    None
}

#[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
fn vulkan(adapter: &wgpu::Adapter) -> Option<u32> {
    use ash::vk;
    crate::vulkan::query_physical_device(adapter, |instance, pd, exts| {
        if exts.has(ash::nv::shader_sm_builtins::NAME) {
            let mut sm = vk::PhysicalDeviceShaderSMBuiltinsPropertiesNV::default();
            let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut sm);
            // SAFETY: valid handles; the chained struct is allowed because
            // the physical device supports the extension (checked above).
            unsafe { instance.get_physical_device_properties2(pd, &mut props) };
            return (sm.shader_sm_count > 0).then_some(sm.shader_sm_count);
        }
        if exts.has(ash::amd::shader_core_properties::NAME) {
            let mut core = vk::PhysicalDeviceShaderCorePropertiesAMD::default();
            let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut core);
            // SAFETY: as above.
            unsafe { instance.get_physical_device_properties2(pd, &mut props) };
            let units = core
                .shader_engine_count
                .saturating_mul(core.shader_arrays_per_engine_count)
                .saturating_mul(core.compute_units_per_shader_array);
            return (units > 0).then_some(units);
        }
        None
    })
}
