//! Native Vulkan kernels beside the WGSL ones: GLSL compiled to SPIR-V at
//! build time (`glsl/`, `build.rs`, the `native-vulkan` feature), run as
//! ordinary wgpu compute pipelines through SPIR-V passthrough, bound with
//! wgpu bind groups on wgpu buffers and ordered by wgpu's own barriers.
//!
//! On a Vulkan adapter the device is opened through wgpu-hal with what the
//! kernels need beyond wgpu's features ([`open`]): 8-bit storage,
//! `VK_NV_cooperative_matrix2` where offered; wgpu itself enables f16,
//! int8, 16-bit storage, subgroup size control, integer dot product and
//! `VK_KHR_cooperative_matrix` when asked for the matching features.
//! [`NativeFeatures`] records what was enabled; [`mul_mat`] decides from it
//! which native kernel a MUL_MAT gets, or says why none.

pub mod configs;
pub mod kernels;
#[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
pub mod open;
pub mod pipelines;
#[cfg(test)]
pub(crate) mod test_devices;

/// The `native` option: whether MUL_MAT and FLASH_ATTN_EXT may use the
/// native kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NativeMode {
    /// The backend decides: native where a kernel is built, the device
    /// has what it needs and the kernel measured faster than the WGSL
    /// path: the cm2 attention for prefill; no MUL_MAT kernel yet (see
    /// [`crate::ops::matmul::native::MATVEC_NOT_FASTER`]).
    #[default]
    Auto,
    /// Native wherever a kernel can run (measuring, tests).
    On,
    /// Never: the WGSL kernels only.
    Off,
    /// As `on`, with the GEMM's cooperative-matrix calls as plain code
    /// (its staging and stores checked on devices without cooperative
    /// matrices, such as lavapipe).
    Emulated,
}

impl NativeMode {
    /// The option's words, in schema order.
    pub const WORDS: &'static [&'static str] = &["auto", "on", "off", "emulated"];

    /// The mode a word of [`NativeMode::WORDS`] names (`auto` otherwise).
    pub fn from_word(word: Option<&str>) -> NativeMode {
        match word {
            Some("on") => NativeMode::On,
            Some("off") => NativeMode::Off,
            Some("emulated") => NativeMode::Emulated,
            _ => NativeMode::Auto,
        }
    }
}

/// One f16 x f16 -> f32 cooperative-matrix shape the device lists
/// (`vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR`, subgroup scope).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoopShape {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Columns of A, rows of B.
    pub k: u32,
}

/// What the native kernels may use on one device: the Vulkan features
/// enabled on it (or, before it is opened, offered by it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NativeFeatures {
    /// Why no native kernel can run on this device at all (built without
    /// the feature, not a Vulkan adapter, opened without the extras);
    /// `None` when the fields below say what it has.
    pub unavailable: Option<String>,
    /// wgpu's PASSTHROUGH_SHADERS (SPIR-V modules as they are).
    pub passthrough: bool,
    /// `storageBuffer8BitAccess`.
    pub storage8: bool,
    /// `storageBuffer16BitAccess`.
    pub storage16: bool,
    /// `shaderFloat16`.
    pub float16: bool,
    /// `shaderInt8`.
    pub int8: bool,
    /// Subgroup arithmetic operations in compute shaders.
    pub subgroup_arithmetic: bool,
    /// Smallest and largest subgroup size.
    pub subgroup_size: (u32, u32),
    /// `subgroupSizeControl` (`VK_EXT_subgroup_size_control` or 1.3).
    pub subgroup_size_control: bool,
    /// `shaderIntegerDotProduct` (`VK_KHR_shader_integer_dot_product`).
    pub integer_dot_product: bool,
    /// `VK_KHR_cooperative_matrix` enabled.
    pub coopmat: bool,
    /// Its f16 x f16 -> f32 shapes.
    pub coopmat_shapes: Vec<CoopShape>,
    /// `VK_NV_cooperative_matrix2` enabled.
    pub coopmat2: bool,
    /// The extension with the features the cm2 GEMM needs: workgroup
    /// scope, flexible dimensions, tensor addressing and conversions.
    pub coopmat2_gemm: bool,
    /// As `coopmat2_gemm`, with the row reductions and per-element
    /// operations the cm2 attention needs.
    pub coopmat2_attention: bool,
    /// The most invocations a workgroup using workgroup-scope matrices
    /// may have (`cooperativeMatrixWorkgroupScopeMaxWorkgroupSize`).
    pub coopmat2_max_workgroup: u32,
}

/// Whether a cm2 kernel of `invocations` fits the device's workgroup-scope
/// limit, or why not (`what` names the kernel).
pub fn cm2_workgroup_fits(f: &NativeFeatures, what: &str, invocations: u32) -> Result<(), String> {
    if invocations > f.coopmat2_max_workgroup {
        return Err(format!(
            "{what}: {invocations} invocations, past the device's \
             cooperativeMatrixWorkgroupScopeMaxWorkgroupSize of {}",
            f.coopmat2_max_workgroup
        ));
    }
    Ok(())
}

impl NativeFeatures {
    /// No native kernel, for `reason`.
    pub fn unavailable(reason: impl Into<String>) -> NativeFeatures {
        NativeFeatures {
            unavailable: Some(reason.into()),
            ..NativeFeatures::default()
        }
    }

    /// The features in a few words (`backplane devices`), or why there
    /// are none.
    pub fn summary(&self) -> String {
        if let Some(why) = &self.unavailable {
            return format!("no native kernels: {why}");
        }
        let flags = [
            (self.storage8, "8-bit storage"),
            (self.storage16, "16-bit storage"),
            (self.float16, "f16"),
            (self.int8, "int8"),
            (self.subgroup_arithmetic, "subgroup arithmetic"),
            (self.subgroup_size_control, "subgroup size control"),
            (self.integer_dot_product, "integer dot product"),
        ];
        let mut parts: Vec<String> = flags
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, what)| what.to_string())
            .collect();
        if self.coopmat {
            let shapes: Vec<String> = self
                .coopmat_shapes
                .iter()
                .map(|s| format!("{}x{}x{}", s.m, s.n, s.k))
                .collect();
            parts.push(format!("KHR cooperative matrix {}", shapes.join("/")));
        }
        if self.coopmat2 {
            parts.push(format!(
                "NV cooperative matrix 2 (workgroup scope up to {} invocations)",
                self.coopmat2_max_workgroup
            ));
        }
        format!("native Vulkan: {}", parts.join(", "))
    }
}

/// The native kernels of one opened device: what it enabled, and the
/// pipelines built so far.
pub struct NativeState {
    /// The features enabled when the device was opened.
    pub features: NativeFeatures,
    /// Pipelines by kernel name.
    pub pipelines: pipelines::NativePipelines,
}

impl NativeState {
    /// The state of a device opened with `features`.
    pub fn new(features: NativeFeatures) -> NativeState {
        NativeState {
            features,
            pipelines: pipelines::NativePipelines::default(),
        }
    }
}

/// Opens `adapter` as `desc` asks; on Vulkan with the native kernels'
/// extras where the build has them and the device offers them, else the
/// plain wgpu device (the features then say why no native kernel runs).
pub fn open_device(
    adapter: &wgpu::Adapter,
    desc: &wgpu::DeviceDescriptor<'_>,
) -> Result<(wgpu::Device, wgpu::Queue, NativeFeatures), String> {
    #[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
    {
        open::open_device(adapter, desc)
    }
    #[cfg(not(any(target_os = "linux", target_os = "windows", target_os = "android")))]
    {
        let (device, queue) = pollster::block_on(adapter.request_device(desc))
            .map_err(|e| format!("opening {}: {e}", adapter.get_info().name))?;
        Ok((
            device,
            queue,
            NativeFeatures::unavailable("not a Vulkan platform"),
        ))
    }
}

/// What `adapter` offers the native kernels before a device is opened
/// with `wanted` features (for the device's description).
pub fn offered(adapter: &wgpu::Adapter, wanted: wgpu::Features) -> NativeFeatures {
    #[cfg(any(target_os = "linux", target_os = "windows", target_os = "android"))]
    {
        open::offered(adapter, wanted)
            .map(|o| o.features)
            .unwrap_or_else(NativeFeatures::unavailable)
    }
    #[cfg(not(any(target_os = "linux", target_os = "windows", target_os = "android")))]
    {
        let _ = (adapter, wanted);
        NativeFeatures::unavailable("not a Vulkan platform")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_reads_its_words() {
        assert_eq!(NativeMode::from_word(Some("on")), NativeMode::On);
        assert_eq!(NativeMode::from_word(Some("off")), NativeMode::Off);
        assert_eq!(
            NativeMode::from_word(Some("emulated")),
            NativeMode::Emulated
        );
        assert_eq!(NativeMode::from_word(Some("auto")), NativeMode::Auto);
        assert_eq!(NativeMode::from_word(None), NativeMode::Auto);
    }

    #[test]
    fn every_cm2_gemm_name_says_what_its_configuration_is() {
        for c in configs::CM2_CONFIGS {
            let unclamped = match c.unclamped_unroll {
                0 => String::new(),
                8 => "u".into(),
                n => format!("u{n}"),
            };
            let name = format!(
                "cm2_{}x{}k{}{}{}{unclamped}",
                c.bm,
                c.bn,
                c.bk,
                if c.b_half { "h" } else { "" },
                if c.prefetch { "p" } else { "" },
            );
            assert_eq!(c.workgroup_size, 256, "{}", c.name);
            assert_eq!(c.name, name);
            assert!(
                c.unclamped_unroll == 0 || c.b_half,
                "{}: UNCLAMPED needs B_F16",
                c.name
            );
        }
    }

    #[test]
    fn every_cm2_attention_name_says_what_its_configuration_is() {
        for c in configs::FA_CM2_CONFIGS {
            let letters: String = [
                (c.rowsum_reduce, 'r'),
                (c.pv_half, 'h'),
                (c.v_early, 'v'),
                (c.o_half, 'o'),
            ]
            .iter()
            .filter_map(|&(on, letter)| on.then_some(letter))
            .collect();
            let name = format!("{}x{}w{}{letters}", c.br, c.bc, c.workgroup_size);
            assert_eq!(c.name, name);
        }
    }

    #[test]
    fn the_summary_names_what_is_enabled_or_why_nothing_is() {
        let none = NativeFeatures::unavailable("not a Vulkan adapter");
        assert_eq!(none.summary(), "no native kernels: not a Vulkan adapter");
        let f = NativeFeatures {
            storage8: true,
            storage16: true,
            coopmat: true,
            coopmat_shapes: vec![CoopShape {
                m: 16,
                n: 16,
                k: 16,
            }],
            ..NativeFeatures::default()
        };
        assert_eq!(
            f.summary(),
            "native Vulkan: 8-bit storage, 16-bit storage, KHR cooperative matrix 16x16x16"
        );
    }
}
