//! The native kernel choice: devices, modes, types, columns, configurations.

use super::*;
use crate::native::test_devices::{lavapipe, nvidia};

fn shape(m: u64, n: u64, k: u64) -> Shape {
    Shape::unbatched(m, n, k)
}

fn ops(ta: DType, tb: DType) -> Operands {
    Operands {
        ta,
        tb,
        split: false,
    }
}

#[test]
fn the_mat_vec_needs_16_bit_storage_subgroups_and_integer_dot_products() {
    let f = lavapipe();
    assert_eq!(matvec_device(&f, DType::Q4_0), Ok(()));
    assert_eq!(matvec_device(&f, DType::Q8_0), Ok(()));
    let no16 = NativeFeatures {
        storage16: false,
        ..lavapipe()
    };
    assert!(
        matvec_device(&no16, DType::Q4_0)
            .unwrap_err()
            .contains("lacks storageBuffer16BitAccess")
    );
    let nosg = NativeFeatures {
        subgroup_arithmetic: false,
        ..lavapipe()
    };
    assert!(
        matvec_device(&nosg, DType::Q4_0)
            .unwrap_err()
            .contains("lacks subgroup arithmetic")
    );
    let narrow = NativeFeatures {
        subgroup_size: (4, 64),
        ..lavapipe()
    };
    assert_eq!(
        matvec_device(&narrow, DType::Q8_0).unwrap_err(),
        "native q8_0 mat-vec: subgroups of 4 invocations (needs 8 or more)"
    );
    let nodot = NativeFeatures {
        integer_dot_product: false,
        ..lavapipe()
    };
    assert!(
        matvec_device(&nodot, DType::Q4_0)
            .unwrap_err()
            .contains("lacks shaderIntegerDotProduct")
    );
    let metal = NativeFeatures::unavailable("the adapter runs on Metal, not Vulkan");
    assert_eq!(
        matvec_device(&metal, DType::Q4_0).unwrap_err(),
        "native q4_0 mat-vec: the adapter runs on Metal, not Vulkan"
    );
}

#[test]
fn the_description_names_the_kernels_the_device_can_run() {
    assert_eq!(description(&lavapipe()), "native=on: mat-vec q4_0/q8_0");
    let nothing = NativeFeatures {
        subgroup_arithmetic: false,
        ..lavapipe()
    };
    assert_eq!(
        description(&nothing),
        "no native kernels: native q4_0 mat-vec: device lacks subgroup arithmetic in compute shaders"
    );
    if kernels::built() {
        assert_eq!(
            description(&nvidia()),
            "native=on: mat-vec q4_0/q8_0, GEMM f16/q4_0/q8_0 16x16x16"
        );
    }
}

#[test]
fn configurations_are_found_by_name_or_refused_with_the_known_names() {
    assert_eq!(gemm_config(None), Ok(&GEMM_CONFIGS[0]));
    assert_eq!(gemm_config(Some("128x256k32")).map(|c| c.bn), Ok(256));
    let err = gemm_config(Some("64x64")).unwrap_err();
    assert!(err.starts_with("BACKPLANE_WEBGPU_NATIVE_GEMM=64x64 names no configuration"));
    assert!(err.contains("128x128k32db"), "{err}");
    assert_eq!(
        matvec_config(Some("r4w64")).map(|c| (c.rows, c.workgroup_size)),
        Ok((4, 64))
    );
    assert!(
        matvec_config(Some("r9"))
            .unwrap_err()
            .contains("known: r2w128u32, r2w128")
    );
    // Every configuration splits its tiles evenly over its subgroups.
    for c in GEMM_CONFIGS {
        assert_eq!(c.bm % c.wm, 0, "{}", c.name);
        assert_eq!(c.bn % c.wn, 0, "{}", c.name);
        assert_eq!((c.bm * c.bk / 8) % c.workgroup_size(), 0, "{}", c.name);
        assert_eq!((c.bn * c.bk / 4) % c.workgroup_size(), 0, "{}", c.name);
    }
}

#[test]
fn the_choice_follows_mode_types_and_columns() {
    let f = lavapipe();
    let one = shape(4096, 1, 4096);
    let none = Configs::default();
    let pick = |f: &NativeFeatures, mode, ta, tb, s: &Shape| choose(f, mode, ops(ta, tb), s, &none);
    if kernels::built() {
        assert_eq!(
            pick(&f, NativeMode::Auto, DType::Q4_0, DType::F32, &one),
            Err(MATVEC_NOT_FASTER.to_string())
        );
        assert_eq!(
            pick(&f, NativeMode::On, DType::Q4_0, DType::F32, &one),
            Ok(NativeKernel::MatVec {
                weights: DType::Q4_0,
                cols: 1,
                config: &MATVEC_CONFIGS[0],
                split: false,
            })
        );
        // The quantized copy takes f16 activations as well.
        assert_eq!(
            pick(
                &f,
                NativeMode::On,
                DType::Q8_0,
                DType::F16,
                &shape(64, 7, 256)
            )
            .map(|k| k.name()),
            Ok("mul_mat_vec_q8_0_n7_r2w128u32".to_string())
        );
        let r4 = Configs {
            matvec: Some("r4w64".into()),
            ..Configs::default()
        };
        assert_eq!(
            choose(&f, NativeMode::On, ops(DType::Q4_0, DType::F32), &one, &r4).map(|k| k.name()),
            Ok("mul_mat_vec_q4_0_n1_r4w64".to_string())
        );
        let bad = Configs {
            matvec: Some("r3".into()),
            ..Configs::default()
        };
        assert!(
            choose(&f, NativeMode::On, ops(DType::Q4_0, DType::F32), &one, &bad)
                .unwrap_err()
                .contains("names no configuration")
        );
    } else {
        assert_eq!(
            pick(&f, NativeMode::Auto, DType::Q4_0, DType::F32, &one),
            Err(kernels::NOT_BUILT.to_string())
        );
    }
    assert_eq!(
        pick(&f, NativeMode::Off, DType::Q4_0, DType::F32, &one),
        Err("native=off".into())
    );
    assert_eq!(
        pick(
            &f,
            NativeMode::On,
            DType::F16,
            DType::F16,
            &shape(4096, 512, 4096)
        ),
        Err("src1 is f16 (the native GEMM reads f32)".into())
    );
    assert_eq!(
        pick(&f, NativeMode::On, DType::Q4_K, DType::F32, &one),
        Err("no native mat-vec for q4_K weights".into())
    );
    assert_eq!(
        pick(&f, NativeMode::On, DType::Q8_0, DType::BF16, &one),
        Err("src1 is bf16 (the native mat-vec quantizes f32 or f16)".into())
    );
    assert_eq!(
        pick(
            &f,
            NativeMode::On,
            DType::Q4_0,
            DType::F32,
            &shape(4096, 16, 4096)
        ),
        Err("no native kernel for 16 columns".into())
    );
    let split = |mode, ta, s: &Shape| {
        let o = Operands {
            split: true,
            ..ops(ta, DType::F32)
        };
        choose(&f, mode, o, s, &none).map(|k| k.name())
    };
    // Split q4_0 has its own mat-vec and GEMM variants.
    if kernels::built() {
        assert_eq!(
            split(NativeMode::On, DType::Q4_0, &one),
            Ok("mul_mat_vec_q4_0_split_n1_r2w128u32".to_string())
        );
        assert_eq!(
            split(NativeMode::Emulated, DType::Q4_0, &shape(4096, 512, 4096)),
            Ok("mul_mat_coopmat_q4_0_split_128x128k32_emulated".to_string())
        );
    }
    // lavapipe has no cooperative matrices.
    if kernels::built() {
        assert_eq!(
            pick(
                &f,
                NativeMode::Emulated,
                DType::Q8_0,
                DType::F32,
                &shape(4096, 512, 4096)
            )
            .map(|k| k.name()),
            Ok("mul_mat_coopmat_q8_0_128x128k32_emulated".to_string())
        );
    }
    assert_eq!(
        pick(&f, NativeMode::On, DType::F16, DType::F32, &shape(4096, 512, 4096)),
        Err(
            "native f16 cooperative-matrix GEMM: device lacks VK_KHR_cooperative_matrix (or no_coopmat is on)"
                .into()
        )
    );
}

#[test]
fn the_gemm_takes_a_listed_shape_this_build_has_and_waits_for_native_on() {
    let f = nvidia();
    let wide = shape(4096, 512, 14336);
    let default = &GEMM_CONFIGS[0];
    let none = Configs::default();
    if !kernels::built() {
        assert!(
            coopmat_device(&f, DType::F16, default)
                .unwrap_err()
                .contains(kernels::NOT_BUILT)
        );
        return;
    }
    // The largest listed shape with a kernel in this build.
    assert_eq!(
        coopmat_device(&f, DType::F16, default),
        Ok(CoopShape {
            m: 16,
            n: 16,
            k: 16
        })
    );
    let small = NativeFeatures {
        coopmat_shapes: vec![CoopShape { m: 16, n: 8, k: 16 }],
        ..nvidia()
    };
    assert_eq!(
        coopmat_device(&small, DType::F16, default),
        Ok(CoopShape { m: 16, n: 8, k: 16 })
    );
    // Other configurations are built for 16x16x16 only.
    let db = gemm_config(Some("128x128k32db")).unwrap();
    assert!(
        coopmat_device(&small, DType::F16, db)
            .unwrap_err()
            .contains("no native kernel mul_mat_coopmat_f16_128x128k32db_16x8x16")
    );
    assert_eq!(
        choose(
            &f,
            NativeMode::On,
            ops(DType::Q4_0, DType::F32),
            &wide,
            &none
        )
        .map(|k| k.name()),
        Ok("mul_mat_coopmat_q4_0_128x128k32_16x16x16".to_string())
    );
    let wide_tiles = Configs {
        gemm: Some("128x256k32".into()),
        ..Configs::default()
    };
    assert_eq!(
        choose(
            &f,
            NativeMode::On,
            ops(DType::F16, DType::F32),
            &wide,
            &wide_tiles
        )
        .map(|k| k.name()),
        Ok("mul_mat_coopmat_f16_128x256k32_16x16x16".to_string())
    );
    assert_eq!(
        choose(
            &f,
            NativeMode::Auto,
            ops(DType::F16, DType::F32),
            &wide,
            &none
        )
        .unwrap_err(),
        GEMM_SLOWER
    );
    let odd = NativeFeatures {
        coopmat_shapes: vec![CoopShape { m: 8, n: 8, k: 32 }],
        ..nvidia()
    };
    assert!(
        coopmat_device(&odd, DType::F16, default)
            .unwrap_err()
            .contains("no native kernel mul_mat_coopmat_f16_128x128k32_8x8x32")
    );
    let wide_subgroups = NativeFeatures {
        subgroup_size: (32, 256),
        ..nvidia()
    };
    assert!(
        coopmat_device(&wide_subgroups, DType::F16, default)
            .unwrap_err()
            .contains("needs subgroups of exactly 32 invocations (device: 32..256)")
    );
}

#[test]
fn the_cm2_gemm_runs_f16_and_converted_block_weights_when_named_on_a_device_with_its_features() {
    let wide = shape(4096, 512, 14336);
    let cm2 = Configs {
        gemm: Some("cm2_128x256k32".into()),
        ..Configs::default()
    };
    let f16 = ops(DType::F16, DType::F32);
    if kernels::built() {
        assert_eq!(
            choose(&nvidia(), NativeMode::On, f16, &wide, &cm2).map(|k| k.name()),
            Ok("mul_mat_cm2_128x256k32_f16".to_string())
        );
        assert_eq!(
            choose(&nvidia(), NativeMode::Auto, f16, &wide, &cm2).unwrap_err(),
            GEMM_SLOWER
        );
    }
    // Block types are converted to f16 rows first; other types refused.
    if kernels::built() {
        for t in [DType::Q4_0, DType::Q8_0, DType::Q4_K] {
            assert_eq!(
                choose(&nvidia(), NativeMode::On, ops(t, DType::F32), &wide, &cm2),
                Ok(NativeKernel::Cm2 {
                    config: &CM2_CONFIGS[1],
                    converted: Some(t)
                })
            );
        }
    }
    assert_eq!(
        choose(
            &nvidia(),
            NativeMode::On,
            ops(DType::BF16, DType::F32),
            &wide,
            &cm2
        )
        .unwrap_err(),
        "BACKPLANE_WEBGPU_NATIVE_GEMM=cm2_128x256k32: the cm2 GEMM takes f16 weights or block \
         types converted to f16 rows, not bf16"
    );
    let no_tensors = NativeFeatures {
        coopmat2_gemm: false,
        ..nvidia()
    };
    assert!(
        choose(&no_tensors, NativeMode::On, f16, &wide, &cm2)
            .unwrap_err()
            .contains("without workgroup scope, flexible dimensions, tensor addressing")
    );
    assert_eq!(
        choose(&lavapipe(), NativeMode::On, f16, &wide, &cm2).unwrap_err(),
        "native f16 cm2 GEMM: device lacks VK_NV_cooperative_matrix2"
    );
    assert_eq!(
        choose(&lavapipe(), NativeMode::Emulated, f16, &wide, &cm2).unwrap_err(),
        "the cm2 GEMM has no emulated variant"
    );
    // A tile of more invocations than the device's workgroup-scope limit.
    let small = NativeFeatures {
        coopmat2_max_workgroup: 128,
        ..nvidia()
    };
    assert_eq!(
        choose(&small, NativeMode::On, f16, &wide, &cm2).unwrap_err(),
        "cm2 GEMM cm2_128x256k32: 256 invocations, past the device's \
         cooperativeMatrixWorkgroupScopeMaxWorkgroupSize of 128"
    );
    // A name of neither table lists both.
    let err = gemm_config(Some("cm3")).unwrap_err();
    assert!(err.contains("cm2: cm2_128x128k32"), "{err}");
}
