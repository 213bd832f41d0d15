//! Shader checks that need no GPU: a kernel variant is specialised,
//! parsed and validated by naga (with the capabilities the variant asks
//! for) and written as SPIR-V, the way wgpu's Vulkan backend would. This
//! is the only check cooperative-matrix kernels get on a machine without
//! cooperative matrices.

use backplane_shaders::{PipelineKey, specialise};
use wgpu::naga;

/// Specialises `key`, then parses, validates and writes SPIR-V; panics
/// with the error and the source.
pub(crate) fn check(key: &PipelineKey) {
    let shader = specialise(key).unwrap_or_else(|e| panic!("{key}: {e}"));
    let module = naga::front::wgsl::parse_str(&shader.source).unwrap_or_else(|e| {
        panic!(
            "{key}: {}\n{}",
            e.emit_to_string(&shader.source),
            shader.source
        )
    });
    let caps = naga::valid::Capabilities::SHADER_FLOAT16
        | naga::valid::Capabilities::SUBGROUP
        | naga::valid::Capabilities::SUBGROUP_BARRIER
        | naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32
        | naga::valid::Capabilities::COOPERATIVE_MATRIX;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .unwrap_or_else(|e| {
            panic!(
                "{key}: {}\n{}",
                e.emit_to_string(&shader.source),
                shader.source
            )
        });
    let options = naga::back::spv::Options {
        lang_version: (1, 5),
        ..Default::default()
    };
    naga::back::spv::write_vec(&module, &info, &options, None)
        .unwrap_or_else(|e| panic!("{key}: SPIR-V: {e}"));
}
