//! Read-only queries of the Vulkan physical device behind a wgpu adapter
//! (ash, via wgpu's `as_hal`), for what wgpu does not expose: the memory
//! budget, the multiprocessor count.

use ash::vk;

/// Runs `query` with the adapter's Vulkan instance, physical device and
/// the extensions that device supports; `None` when the adapter is not a
/// Vulkan one or its extensions cannot be listed.
pub fn query_physical_device<T>(
    adapter: &wgpu::Adapter,
    query: impl FnOnce(&ash::Instance, vk::PhysicalDevice, &Extensions) -> Option<T>,
) -> Option<T> {
    // SAFETY: the hal adapter is only read (physical-device queries) while
    // the guard lives; nothing is destroyed.
    let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
    let instance = hal.shared_instance().raw_instance();
    let pd = hal.raw_physical_device();
    // SAFETY: valid instance and physical device handles from wgpu-hal.
    let list = unsafe { instance.enumerate_device_extension_properties(pd) }.ok()?;
    query(instance, pd, &Extensions(list))
}

/// The device extensions a physical device supports.
pub struct Extensions(Vec<vk::ExtensionProperties>);

impl Extensions {
    /// Whether the device supports extension `name` (structures of a
    /// supported extension may be chained into property queries).
    pub fn has(&self, name: &std::ffi::CStr) -> bool {
        self.0
            .iter()
            .any(|e| e.extension_name_as_c_str() == Ok(name))
    }
}
