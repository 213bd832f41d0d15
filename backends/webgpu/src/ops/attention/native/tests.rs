use super::*;
use crate::native::test_devices::nvidia;
use crate::ops::attention::plan::kv_splits;

fn f16_attention(dk: u32, dv: u32) -> Attention {
    Attention {
        kv: (DType::F16, DType::F16),
        mask: Some((DType::F16, true)),
        heads: (dk, dv),
        queries: 512,
    }
}

#[test]
fn the_configuration_follows_the_head_size_unless_one_is_named() {
    let f = nvidia();
    if !kernels::built() {
        // Without the feature every choice ends at the build.
        let why = choose(&f, NativeMode::On, &f16_attention(128, 128), None).unwrap_err();
        assert!(why.contains(kernels::NOT_BUILT), "{why}");
        return;
    }
    let c = choose(&f, NativeMode::On, &f16_attention(256, 256), None).unwrap();
    assert_eq!(c.name(), "flash_attn_cm2_128x64w256r_256x256");
    let c = choose(&f, NativeMode::On, &f16_attention(128, 128), None).unwrap();
    assert_eq!(c.name(), "flash_attn_cm2_64x64w128_128x128");
    // Head sizes round up to the 16 the matrices are built for.
    let c = choose(
        &f,
        NativeMode::On,
        &f16_attention(40, 40),
        Some("32x32w128"),
    )
    .unwrap();
    assert_eq!(c.name(), "flash_attn_cm2_32x32w128_48x48");
    let c = choose(&f, NativeMode::On, &f16_attention(192, 128), None).unwrap();
    assert_eq!(c.padded, (192, 128));
    let why = choose(&f, NativeMode::On, &f16_attention(128, 128), Some("9x9")).unwrap_err();
    assert!(
        why.contains("BACKPLANE_WEBGPU_NATIVE_FA=9x9 names no configuration"),
        "{why}"
    );
    assert!(why.contains("128x64w256"), "{why}");
    // A tile of more invocations than the device's workgroup-scope limit.
    let small = NativeFeatures {
        coopmat2_max_workgroup: 128,
        ..nvidia()
    };
    let why = choose(&small, NativeMode::On, &f16_attention(256, 256), None).unwrap_err();
    assert_eq!(
        why,
        "cm2 attention 128x64w256r: 256 invocations, past the device's \
         cooperativeMatrixWorkgroupScopeMaxWorkgroupSize of 128"
    );
}

#[test]
fn refusals_name_what_stops_the_kernel() {
    let f = nvidia();
    let on = NativeMode::On;
    let a = f16_attention(128, 128);
    assert_eq!(
        choose(&f, NativeMode::Off, &a, None).unwrap_err(),
        "native=off"
    );
    assert!(
        choose(&f, NativeMode::Emulated, &a, None)
            .unwrap_err()
            .contains("no emulated variant")
    );
    let bf16 = Attention {
        kv: (DType::BF16, DType::BF16),
        ..a
    };
    assert_eq!(
        choose(&f, on, &bf16, None).unwrap_err(),
        "the cm2 attention takes f16 K and V (or q4_0, q4_1, q5_0, q5_1, q8_0 converted to \
         f16 first), not bf16 and bf16"
    );
    let f32_mask = Attention {
        mask: Some((DType::F32, true)),
        ..a
    };
    assert!(
        choose(&f, on, &f32_mask, None)
            .unwrap_err()
            .contains("f16 mask, not f32")
    );
    let strided_mask = Attention {
        mask: Some((DType::F16, false)),
        ..a
    };
    assert!(
        choose(&f, on, &strided_mask, None)
            .unwrap_err()
            .contains("dense rows")
    );
    assert_eq!(
        choose(&f, on, &f16_attention(576, 512), None).unwrap_err(),
        "no cm2 attention built for head sizes 576 and 512"
    );
    let no_reductions = NativeFeatures {
        coopmat2_attention: false,
        ..nvidia()
    };
    assert!(
        choose(&no_reductions, on, &a, None)
            .unwrap_err()
            .contains("reductions or per-element operations")
    );
    let no_cm2 = NativeFeatures {
        coopmat2: false,
        ..nvidia()
    };
    assert!(
        choose(&no_cm2, on, &a, None)
            .unwrap_err()
            .contains("device lacks VK_NV_cooperative_matrix2")
    );
    let unavailable = NativeFeatures::unavailable("the adapter runs on Metal, not Vulkan");
    assert!(
        choose(&unavailable, on, &a, None)
            .unwrap_err()
            .contains("runs on Metal")
    );
    // No mask at all is fine.
    let no_mask = Attention { mask: None, ..a };
    match choose(&f, on, &no_mask, None) {
        Ok(c) => assert_eq!(c.padded, (128, 128)),
        Err(why) => assert!(why.contains(kernels::NOT_BUILT), "{why}"),
    }
}

#[test]
fn auto_takes_the_kernel_for_prefill_and_leaves_decode_to_wgsl() {
    let f = nvidia();
    let prefill = f16_attention(256, 256);
    let decode = Attention {
        queries: 1,
        ..prefill
    };
    if !kernels::built() {
        let why = choose(&f, NativeMode::Auto, &prefill, None).unwrap_err();
        assert!(why.contains(kernels::NOT_BUILT), "{why}");
        return;
    }
    assert!(choose(&f, NativeMode::Auto, &prefill, None).is_ok());
    assert_eq!(
        choose(&f, NativeMode::Auto, &decode, None).unwrap_err(),
        "native=auto takes the cm2 attention from 64 queries per head, not 1"
    );
    // native=on takes it for any count (measuring, tests).
    assert!(choose(&f, NativeMode::On, &decode, None).is_ok());
}

#[test]
fn the_description_names_the_attention_where_it_runs() {
    assert_eq!(runs(&nvidia()), kernels::built());
    let no_cm2 = NativeFeatures {
        coopmat2: false,
        ..nvidia()
    };
    assert!(!runs(&no_cm2));
}

#[test]
fn the_native_kernel_splits_into_the_counts_measured_best() {
    let gpu = Facts {
        compute_units: Some(132),
        ..crate::facts::test_gpu()
    };
    // Head 256, blocks of 128 queries, 256 invocations, 64 keys: 4
    // query blocks x 8 heads split 4 ways.
    let target = native_split_target(&gpu, 256);
    assert_eq!(kv_splits(None, 32, 20000, 64, target), (4, 5056));
    // Head 128, blocks of 64 queries, 128 invocations: 8 x 8 split 4.
    let target = native_split_target(&gpu, 128);
    assert_eq!(kv_splits(None, 64, 20000, 64, target), (4, 5056));
    assert_eq!(
        native_split_target(&crate::facts::test_gpu(), 128),
        TARGET_WORKGROUPS
    );
}

#[test]
fn block_typed_k_and_v_are_converted_first_and_f16_read_as_it_is() {
    let f = nvidia();
    if !kernels::built() {
        return;
    }
    let with = |k, v| Attention {
        kv: (k, v),
        ..f16_attention(128, 128)
    };
    let c = choose(&f, NativeMode::On, &with(DType::Q8_0, DType::Q8_0), None).unwrap();
    assert_eq!(c.converted, (true, true));
    assert_eq!(c.name(), "flash_attn_cm2_64x64w128_128x128");
    let c = choose(&f, NativeMode::On, &with(DType::F16, DType::Q4_0), None).unwrap();
    assert_eq!(c.converted, (false, true));
    let c = choose(&f, NativeMode::On, &with(DType::F16, DType::F16), None).unwrap();
    assert_eq!(c.converted, (false, false));
    for t in CONVERTED_KV {
        assert!(
            choose(&f, NativeMode::Auto, &with(t, t), None).is_ok(),
            "{t:?}"
        );
    }
    // The conversion pays off only with more queries than f16 K/V need.
    let short = Attention {
        queries: 64,
        ..with(DType::Q8_0, DType::Q8_0)
    };
    assert_eq!(
        choose(&f, NativeMode::Auto, &short, None).unwrap_err(),
        "native=auto takes the cm2 attention with K or V converted from 128 queries per head, \
         not 64"
    );
    assert!(choose(&f, NativeMode::On, &short, None).is_ok());
    let f16_short = Attention {
        queries: 64,
        ..with(DType::F16, DType::F16)
    };
    assert!(choose(&f, NativeMode::Auto, &f16_short, None).is_ok());
    assert!(choose(&f, NativeMode::On, &with(DType::Q4_K, DType::Q4_K), None).is_err());
}
