//! What a device offers, read once from the adapter: limits, features and
//! cooperative-matrix shapes. Every decision of the backend (supports_op,
//! paths, workgroup sizes, dispatch splitting) reads these.

/// The device facts every op decision reads.
#[derive(Clone, Debug)]
pub struct Facts {
    /// Adapter name as the driver reports it.
    pub adapter: String,
    /// Graphics API in use (Vulkan, Metal, Dx12).
    pub api: String,
    /// Driver name and version.
    pub driver: String,
    /// PCI vendor id (0 when unknown).
    pub vendor: u32,
    /// Whether this is a CPU implementation (lavapipe, WARP).
    pub is_cpu: bool,
    /// Whether the adapter is integrated.
    pub is_integrated: bool,
    /// `max_storage_buffer_binding_size` in bytes.
    pub max_binding_bytes: u64,
    /// `max_buffer_size` in bytes.
    pub max_buffer_bytes: u64,
    /// `min_storage_buffer_offset_alignment` in bytes.
    pub offset_alignment: u64,
    /// `max_compute_workgroups_per_dimension`.
    pub max_groups_per_dim: u32,
    /// `max_compute_invocations_per_workgroup`.
    pub max_invocations: u32,
    /// `max_compute_workgroup_storage_size` in bytes.
    pub workgroup_storage_bytes: u32,
    /// `max_storage_buffers_per_shader_stage`.
    pub max_storage_buffers: u32,
    /// SHADER_F16 was granted.
    pub f16: bool,
    /// SUBGROUP and SUBGROUP_BARRIER were granted.
    pub subgroups: bool,
    /// Smallest and largest subgroup size the adapter reports.
    pub subgroup_size: (u32, u32),
    /// TIMESTAMP_QUERY was granted.
    pub timestamps: bool,
    /// EXPERIMENTAL_COOPERATIVE_MATRIX was granted with 16x16x16 f16 inputs
    /// and f32 accumulation.
    pub coopmat_f16_16: bool,
    /// Multiprocessors (NVIDIA SMs, AMD compute units) when the driver
    /// reports them (see [`crate::compute_units`]).
    pub compute_units: Option<u32>,
    /// Kernel forcing and tuning of the stream deciding (the device's
    /// defaults for `supports_op`; see [`crate::options`]).
    pub tuning: crate::options::Tuning,
}

impl Facts {
    /// Whether a binding of `bytes` fits the device's binding limit.
    pub fn fits_binding(&self, bytes: u64) -> bool {
        bytes <= self.max_binding_bytes
    }

    /// The refusal for a tensor over the binding limit.
    pub fn binding_refusal(&self, what: &str, bytes: u64) -> String {
        format!(
            "{what} is {} > max storage binding {}",
            human_bytes(bytes),
            human_bytes(self.max_binding_bytes)
        )
    }
}

/// `1.5 GiB`, `128 MiB`, `12 KiB`, `100 B`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A discrete Vulkan GPU with subgroups of 32 and no cooperative
/// matrices, for the unit tests of op decisions (each test changes what
/// it is about).
#[cfg(test)]
pub(crate) fn test_gpu() -> Facts {
    Facts {
        adapter: "test".into(),
        api: "Vulkan".into(),
        driver: String::new(),
        vendor: 0,
        is_cpu: false,
        is_integrated: false,
        max_binding_bytes: 2 << 30,
        max_buffer_bytes: 4 << 30,
        offset_alignment: 32,
        max_groups_per_dim: 65535,
        max_invocations: 1024,
        workgroup_storage_bytes: 48 << 10,
        max_storage_buffers: 8,
        f16: true,
        subgroups: true,
        subgroup_size: (32, 32),
        timestamps: false,
        coopmat_f16_16: false,
        compute_units: None,
        tuning: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_reads_well() {
        assert_eq!(human_bytes(100), "100 B");
        assert_eq!(human_bytes(128 << 20), "128 MiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }
}
