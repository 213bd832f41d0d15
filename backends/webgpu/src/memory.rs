//! Free and total device memory. On Vulkan the driver is asked through
//! `VK_EXT_memory_budget` (ash, via wgpu's `as_hal`); elsewhere, or when the
//! extension is missing, the estimate is documented in [`estimate`].

use backplane_abi::plugin::Memory;

/// Free/total memory of `adapter`.
pub fn query(adapter: &wgpu::Adapter, facts_max_buffer: u64) -> Memory {
    // Only the Vulkan path reads the adapter.
    let _ = adapter;
    #[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
    if let Some(m) = vulkan_budget(adapter) {
        return m;
    }
    estimate(facts_max_buffer)
}

/// Without a budget query: total = the device-local heap size when known
/// (not exposed by wgpu), otherwise `max_buffer_size`; free = total. Callers
/// should treat it as an upper bound.
pub fn estimate(max_buffer: u64) -> Memory {
    Memory {
        free_bytes: max_buffer,
        total_bytes: max_buffer,
    }
}

/// Device-local heaps summed: budget - usage as free, heap size as total.
#[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
fn vulkan_budget(adapter: &wgpu::Adapter) -> Option<Memory> {
    use ash::vk;
    // SAFETY: the hal adapter is only read (physical-device queries) while
    // the guard lives; nothing is destroyed.
    let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
    let instance = hal.shared_instance().raw_instance();
    let pd = hal.raw_physical_device();
    // SAFETY: valid instance and physical device handles from wgpu-hal.
    let exts = unsafe { instance.enumerate_device_extension_properties(pd) }.ok()?;
    let has_budget = exts
        .iter()
        .any(|e| e.extension_name_as_c_str() == Ok(ash::ext::memory_budget::NAME));
    let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
    let mut props = vk::PhysicalDeviceMemoryProperties2::default();
    if has_budget {
        props = props.push_next(&mut budget);
    }
    // SAFETY: valid handles; the chained struct is allowed because the
    // physical device supports VK_EXT_memory_budget (checked above).
    unsafe { instance.get_physical_device_memory_properties2(pd, &mut props) };
    let mp = props.memory_properties;
    let mut total = 0u64;
    let mut free = 0u64;
    for (i, heap) in mp.memory_heaps[..mp.memory_heap_count as usize]
        .iter()
        .enumerate()
    {
        if heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL) {
            total += heap.size;
            free += if has_budget {
                budget.heap_budget[i].saturating_sub(budget.heap_usage[i])
            } else {
                heap.size
            };
        }
    }
    (total > 0).then_some(Memory {
        free_bytes: free,
        total_bytes: total,
    })
}
