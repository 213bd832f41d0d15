//! Native feature sets of real devices, for the kernel-choice tests.

use super::{CoopShape, NativeFeatures};

/// lavapipe: 8/16-bit storage, f16, subgroups of 8, integer dot
/// products, no cooperative matrix.
pub fn lavapipe() -> NativeFeatures {
    NativeFeatures {
        passthrough: true,
        storage8: true,
        storage16: true,
        float16: true,
        int8: true,
        subgroup_arithmetic: true,
        subgroup_size: (8, 8),
        subgroup_size_control: true,
        integer_dot_product: true,
        ..NativeFeatures::default()
    }
}

/// An NVIDIA H100 or H200: lavapipe's features with subgroups of 32, KHR
/// cooperative matrices and `VK_NV_cooperative_matrix2` with every
/// feature the cm2 GEMM and attention need.
pub fn nvidia() -> NativeFeatures {
    NativeFeatures {
        subgroup_size: (32, 32),
        coopmat: true,
        coopmat_shapes: vec![
            CoopShape { m: 16, n: 8, k: 16 },
            CoopShape {
                m: 16,
                n: 16,
                k: 16,
            },
        ],
        coopmat2: true,
        coopmat2_gemm: true,
        coopmat2_attention: true,
        coopmat2_max_workgroup: 256,
        ..lavapipe()
    }
}
