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

/// The device-local heaps' budget and size, through `VK_EXT_memory_budget`
/// where the device has it.
#[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
fn vulkan_budget(adapter: &wgpu::Adapter) -> Option<Memory> {
    use ash::vk;
    crate::vulkan::query_physical_device(adapter, |instance, pd, exts| {
        let has_budget = exts.has(ash::ext::memory_budget::NAME);
        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        let mut props = vk::PhysicalDeviceMemoryProperties2::default();
        if has_budget {
            props = props.push_next(&mut budget);
        }
        // SAFETY: valid handles; the chained struct is allowed because the
        // physical device supports VK_EXT_memory_budget (checked above).
        unsafe { instance.get_physical_device_memory_properties2(pd, &mut props) };
        let mp = props.memory_properties;
        device_local(&mp, has_budget.then_some(&budget))
    })
}

/// Device-local heaps of `mp` summed: total size, and free memory as
/// budget - usage where `budget` is known, else the heap size.
#[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
fn device_local(
    mp: &ash::vk::PhysicalDeviceMemoryProperties,
    budget: Option<&ash::vk::PhysicalDeviceMemoryBudgetPropertiesEXT>,
) -> Option<Memory> {
    use ash::vk;
    let mut total = 0u64;
    let mut free = 0u64;
    for (i, heap) in mp.memory_heaps[..mp.memory_heap_count as usize]
        .iter()
        .enumerate()
    {
        if heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL) {
            total += heap.size;
            free += budget.map_or(heap.size, |b| {
                b.heap_budget[i].saturating_sub(b.heap_usage[i])
            });
        }
    }
    (total > 0).then_some(Memory {
        free_bytes: free,
        total_bytes: total,
    })
}
