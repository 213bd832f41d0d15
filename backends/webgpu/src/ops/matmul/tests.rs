//! Shader checks that need no GPU (see [`crate::ops::shader_check`]) for
//! every MUL_MAT / GET_ROWS kernel variant.

use backplane_shaders::{PipelineKey, specialise};

use crate::ops::shader_check::check;

use super::{plan, quant_flag};
use crate::ops::type_name;
use backplane_abi::DType;

const BLOCK_TYPES: [DType; 10] = DType::WEIGHT_BLOCKS;

/// A kernel key with the weight type and layout defines the encoder adds.
fn weights(key: PipelineKey, t: DType, vec4: bool) -> PipelineKey {
    let key = key.ty("SRC0", type_name(t));
    match quant_flag(t) {
        Some(flag) => key.define("W_QUANT", "").define(flag, ""),
        None if vec4 => key.define("W_VEC4", ""),
        None => key,
    }
}

fn every_weight_layout() -> Vec<(DType, bool)> {
    let mut v: Vec<(DType, bool)> = BLOCK_TYPES.iter().map(|&t| (t, false)).collect();
    v.extend([
        (DType::F32, true),
        (DType::F32, false),
        (DType::F16, true),
        (DType::F16, false),
        (DType::BF16, false),
    ]);
    v
}

#[test]
fn matvec_variants_validate() {
    for (t, vec4) in every_weight_layout() {
        for (subgroup, id, cols) in [
            (true, false, 1),
            (false, false, 8),
            (true, true, 1),
            (false, true, 1),
        ] {
            let mut key = weights(PipelineKey::new("mul_mat_vec", ""), t, vec4)
                .wg(if subgroup { 128 } else { 64 })
                .define("NROWS", "4")
                .define("NCOLS", cols.to_string());
            if subgroup {
                key.path = "subgroup";
                key = key.define("MAX_SUBGROUPS", "16");
            }
            if id {
                key = key.define("MUL_MAT_ID", "");
            }
            if plan::matvec_int8(&Default::default(), t) {
                check(&key.clone().define("X_Q8", ""));
                if t == DType::Q4_K {
                    check(&key.clone().define("X_Q8", "").define("QUANT_BUF_VEC4", ""));
                    check(&key.clone().define("QUANT_BUF_VEC4", ""));
                }
            }
            if t == DType::F16 && !vec4 {
                let mut half8 = key.clone();
                half8.defines.retain(|(n, _)| *n != "W_VEC4");
                check(&half8.define("W_HALF8", ""));
            }
            check(&key);
        }
    }
}

#[test]
fn activation_quantizer_validates() {
    for src1 in ["f32", "f16"] {
        check(
            &PipelineKey::new("mul_mat_quantize", "")
                .ty("SRC1", src1)
                .wg(256),
        );
    }
}

#[test]
fn tiled_variants_validate() {
    for (t, vec4) in every_weight_layout() {
        for (side, tile_k) in [("4u", "32u"), ("8u", "16u")] {
            let key = weights(PipelineKey::new("mul_mat_tiled", ""), t, vec4)
                .wg(256)
                .define("THREAD_TILE", side)
                .define("TILE_K", tile_k);
            check(&key.clone().define("X_F16", ""));
            check(&key.clone().define("K_TAIL", ""));
            check(&key);
        }
    }
}

#[test]
fn coopmat_variants_validate() {
    for (t, vec4) in every_weight_layout() {
        if t == DType::F32 || t == DType::BF16 {
            continue;
        }
        for half_x in [true, false] {
            let mut key = weights(PipelineKey::new("mul_mat_coopmat", ""), t, vec4);
            if half_x {
                key = key.define("X_F16", "");
            }
            let mut hardware = key.clone().wg(512);
            hardware.path = "coopmat";
            check(&hardware.clone().define("SPLIT_K", ""));
            check(&hardware.clone().define("K_TAIL", ""));
            check(&hardware);
            check(&key.clone().wg(256).define("EMULATE_COOPMAT", ""));
            check(
                &key.clone()
                    .wg(256)
                    .define("EMULATE_COOPMAT", "")
                    .define("K_TAIL", ""),
            );
            check(
                &key.wg(256)
                    .define("EMULATE_COOPMAT", "")
                    .define("SPLIT_K", ""),
            );
        }
    }
}

#[test]
fn weight_dequantizer_validates() {
    for (t, vec4) in every_weight_layout() {
        if t == DType::F16 || t == DType::BF16 {
            continue;
        }
        let key = weights(PipelineKey::new("mul_mat_dequant", ""), t, vec4).wg(256);
        if vec4 {
            for runs in ["1u", "4u"] {
                check(&key.clone().define("W_DENSE", "").define("DENSE_RUNS", runs));
            }
        } else if t.is_quantized() {
            check(&key.clone().define("W_DENSE", ""));
        }
        check(&key);
    }
}

#[test]
fn convert_and_get_rows_validate() {
    for t in [DType::F32, DType::F16] {
        for d in ["f32", "f16"] {
            let key = PipelineKey::new("mul_mat_convert", "").ty("SRC1", type_name(t));
            check(&key.clone().ty("DST", d).wg(256));
            check(&key.ty("DST", d).wg(256).define("VEC4", ""));
        }
    }
    for t in [DType::F32, DType::F16, DType::BF16, DType::I32]
        .into_iter()
        .chain(BLOCK_TYPES)
    {
        let dst = if t == DType::I32 { "i32" } else { "f32" };
        let mut key = PipelineKey::new("get_rows", "")
            .ty("SRC0", type_name(t))
            .ty("DST", dst)
            .wg(256);
        if let Some(flag) = quant_flag(t) {
            key = key.define("SRC0_QUANT", "").define(flag, "");
        }
        check(&key);
    }
}

/// The shader library enables `f16` whenever the text mentions it, which a
/// device without SHADER_F16 rejects: kernels of f32, bfloat16 and block
/// weights must not mention it.
#[test]
fn kernels_without_half_do_not_enable_it() {
    let no_half = |key: &PipelineKey| {
        let source = specialise(key).expect("specialises").source;
        assert!(!source.contains("f16"), "{key} mentions f16");
    };
    let mut types = vec![DType::F32, DType::BF16];
    types.extend(BLOCK_TYPES);
    for t in types {
        let vec = weights(PipelineKey::new("mul_mat_vec", ""), t, t == DType::F32)
            .define("NROWS", "4")
            .define("NCOLS", "1");
        no_half(&vec.clone().define("MUL_MAT_ID", ""));
        let mut sub = vec.define("MAX_SUBGROUPS", "16");
        sub.path = "subgroup";
        no_half(&sub);
        no_half(
            &weights(PipelineKey::new("mul_mat_tiled", ""), t, false)
                .define("THREAD_TILE", "4u")
                .define("TILE_K", "32u"),
        );
        if t != DType::F32 {
            let dst = "f32";
            let mut key = PipelineKey::new("get_rows", "")
                .ty("SRC0", type_name(t))
                .ty("DST", dst);
            if let Some(flag) = quant_flag(t) {
                key = key.define("SRC0_QUANT", "").define(flag, "");
            }
            no_half(&key);
        }
    }
    no_half(
        &PipelineKey::new("mul_mat_convert", "")
            .ty("SRC1", "f32")
            .ty("DST", "f32"),
    );
}

#[test]
fn split_sum_validates() {
    check(&PipelineKey::new("mul_mat_split_sum", "").wg(256));
}

#[test]
fn k_is_split_only_when_too_few_tiles_fill_the_gpu() {
    // On a device that does not report its multiprocessors.
    let split = |tiles, k| plan::coopmat_split(None, tiles, k, plan::COOPMAT_GROUPS_TARGET);
    // 4096 x 512 x 14336: 128 tiles, whole.
    assert_eq!(split(128, 14336), (1, 14336));
    // N = 256 and 128: 64 and 32 tiles, K in 2 and 4 chunks of whole steps.
    assert_eq!(split(64, 14336), (2, 7168));
    assert_eq!(split(32, 14336), (4, 3584));
    // Uneven K: the chunks are multiples of the 64-deep K step, the last
    // one shorter.
    assert_eq!(split(64, 4000), (2, 2048));
    // Never below 1,024 of K per split, never more than 8 splits.
    assert_eq!(split(1, 2048), (2, 1024));
    assert_eq!(split(1, 1 << 20), (8, 1 << 17));
    assert_eq!(split(100, 14336), (1, 14336));
    assert_eq!(split(16, 1000), (1, 1024));
    // A device that reports 46 multiprocessors: 32 tiles already fill it
    // (splitting in 4 would make nearly three waves).
    assert_eq!(plan::coopmat_split(None, 32, 14336, 46), (1, 14336));
    assert_eq!(plan::coopmat_split(None, 16, 14336, 46), (2, 7168));
}

/// The kernels of the split layout (`crate::split`), which every MUL_MAT
/// path reads in place: the mat-vec reading q4_0 and q4_K, integer (with
/// and without subgroups, one to eight columns) and float, none
/// mentioning half (the scales are unpacked from words); the conversion
/// to half rows, the tiled GEMM and the emulated cooperative-matrix GEMM.
#[test]
fn split_layout_kernels_validate() {
    for t in [DType::Q4_0, DType::Q4_K] {
        let split = |name| {
            PipelineKey::new(name, "")
                .ty("SRC0", type_name(t))
                .define("W_QUANT", "")
                .define(quant_flag(t).unwrap(), "")
                .define("QUANT_BUF_VEC4", "")
                .define("W_SPLIT", "")
        };
        check(&split("mul_mat_dequant").wg(256));
        check(
            &split("mul_mat_tiled")
                .wg(256)
                .define("THREAD_TILE", "4u")
                .define("TILE_K", "16u")
                .define("K_TAIL", ""),
        );
        check(
            &split("mul_mat_coopmat")
                .wg(256)
                .define("EMULATE_COOPMAT", "")
                .define("X_F16", ""),
        );
        for (subgroup, cols, q8) in [
            (true, 1, true),
            (false, 1, true),
            (true, 8, true),
            (true, 1, false),
        ] {
            let mut key = split("mul_mat_vec")
                .wg(if subgroup { 128 } else { 64 })
                .define("NROWS", "2")
                .define("NCOLS", cols.to_string());
            if q8 {
                key = key.define("X_Q8", "");
            }
            if subgroup {
                key.path = "subgroup";
                key = key.define("MAX_SUBGROUPS", "16");
            }
            check(&key);
            assert!(!specialise(&key).unwrap().source.contains("f16"), "{key}");
        }
    }
}
