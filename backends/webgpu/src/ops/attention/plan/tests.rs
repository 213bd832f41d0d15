//! Tests of the attention kernel choice and tiling ([`super`]).

use super::*;

/// A CPU device like lavapipe (subgroups of 8 not used) with
/// `wg_bytes` of workgroup memory.
fn facts(wg_bytes: u32, f16: bool) -> Facts {
    Facts {
        is_cpu: true,
        max_binding_bytes: 1 << 30,
        max_buffer_bytes: 1 << 30,
        offset_alignment: 256,
        workgroup_storage_bytes: wg_bytes,
        f16,
        subgroups: false,
        subgroup_size: (8, 8),
        ..crate::facts::test_gpu()
    }
}

#[test]
fn plans_fit_the_device_and_grids_cover_the_tiles() {
    for (limit, f16) in [(32 << 10, true), (48 << 10, true), (16 << 10, false)] {
        let f = facts(limit, f16);
        for d in [40, 64, 128, 256, 576] {
            for n_q in [1, 7, 512] {
                for kv_f32 in [true, false] {
                    let Ok(p) = plan(&f, d, d, n_q, kv_f32) else {
                        continue;
                    };
                    assert!(workgroup_bytes(p.bq, p.bk, d, d, p.tile_elem) <= u64::from(limit));
                    assert_eq!(p.tqt * p.tkt, p.wg);
                    assert_eq!(p.oqt * p.odt, p.wg);
                    assert!(p.tqt <= p.bq && p.tkt <= p.bk && p.oqt <= p.bq);
                }
            }
        }
    }
}

#[test]
fn a_single_query_gets_a_workgroup_of_32_over_32_keys() {
    for f in [facts(32 << 10, true), facts(48 << 10, false)] {
        let p = plan(&f, 128, 128, 1, false).unwrap();
        assert_eq!((p.bq, p.bk, p.wg), (1, 32, 32));
        assert_eq!((p.tqt, p.tkt), (1, 32));
    }
    // Two or more queries keep their tilings.
    let p = plan(&facts(32 << 10, true), 128, 128, 2, false).unwrap();
    assert_eq!((p.bq, p.bk, p.wg), (2, 32, 64));
    let p = plan(&facts(32 << 10, true), 128, 128, 512, false).unwrap();
    assert_eq!((p.bq, p.bk, p.wg), (32, 32, 128));
}

#[test]
fn a_single_query_without_cooperative_matrices_runs_the_vector_kernel() {
    let lavapipe = facts(32 << 10, true);
    let pick = |f: &Facts, d, dv, n_q, forced| {
        choose_with(f, d, dv, n_q, DType::F16, DType::F16, forced).unwrap()
    };
    assert_eq!(pick(&lavapipe, 128, 128, 1, None), Kernel::Vector);
    assert_eq!(pick(&lavapipe, 576, 512, 1, None), Kernel::Vector);
    assert!(matches!(
        pick(&lavapipe, 128, 128, 2, None),
        Kernel::Plain(_)
    ));
    assert!(matches!(
        pick(&lavapipe, 128, 1024, 1, None),
        Kernel::Plain(_)
    ));
    assert!(matches!(
        pick(&lavapipe, 128, 128, 1, Some("plain")),
        Kernel::Plain(_)
    ));
    // A device with cooperative matrices keeps them; `vector` forces it.
    let g = gpu();
    assert!(matches!(
        pick(&g, 128, 128, 1, None),
        Kernel::CoopMat { .. }
    ));
    assert_eq!(pick(&g, 128, 128, 1, Some("vector")), Kernel::Vector);
    // Too few invocations or too little workgroup memory: the plain kernel.
    let small = Facts {
        max_invocations: 64,
        ..facts(32 << 10, true)
    };
    assert!(matches!(pick(&small, 128, 128, 1, None), Kernel::Plain(_)));
    assert!(vector_workgroup_bytes(576, 512) <= 8 << 10);
    let tiny = facts(2 << 10, false);
    assert!(!vector_fits(&tiny, 576, 512, 1));
}

#[test]
fn few_workgroups_split_the_keys() {
    let t = TARGET_WORKGROUPS;
    assert_eq!(kv_splits(None, 16, 512, 32, t), (8, 64));
    assert_eq!(kv_splits(None, 128, 20000, 32, t), (8, 2528));
    assert_eq!(kv_splits(None, 2048, 20000, 32, t), (1, 20000));
    assert_eq!(kv_splits(None, 4, 113, 32, t), (2, 64));
    assert_eq!(kv_splits(None, 4, 63, 32, t), (1, 63));
    let (splits, chunk) = kv_splits(None, 1, 1000, 16, t);
    assert!(splits * chunk >= 1000 && (splits - 1) * chunk < 1000);
    // One wave and no more: 128 workgroups on 264 slots split in 2,
    // not 3 (384 would leave a second wave nearly empty).
    assert_eq!(kv_splits(None, 128, 20000, 32, 264), (2, 10016));
    assert_eq!(kv_splits(None, 300, 20000, 32, 264), (1, 20000));
    // A decode's 8 workgroups on 396 slots: 47 splits of 11 tiles.
    assert_eq!(kv_splits(None, 8, 16384, 32, 396), (47, 352));
}

#[test]
fn splits_fill_one_wave_of_the_reported_multiprocessors() {
    let coop = Kernel::CoopMat {
        emulated: false,
        rows: 32,
    };
    let h200 = Facts {
        compute_units: Some(132),
        ..gpu()
    };
    assert_eq!(split_target(&h200, &coop, 256, 256), 264);
    assert_eq!(split_target(&h200, &coop, 128, 128), 396);
    assert_eq!(split_target(&h200, &coop, 128, 256), 264);
    // Not reported, or the plain kernel: the fixed target.
    assert_eq!(split_target(&gpu(), &coop, 128, 128), TARGET_WORKGROUPS);
    let plain = choose_with(&h200, 128, 128, 1, DType::F16, DType::F16, Some("plain"));
    assert_eq!(
        split_target(&h200, &plain.unwrap(), 128, 128),
        TARGET_WORKGROUPS
    );
}

#[test]
fn refusal_names_both_sizes() {
    let e = plan(&facts(16 << 10, false), 576, 576, 512, true).unwrap_err();
    assert!(
        e.starts_with("head size 576 needs ") && e.ends_with("> device's 16 KiB"),
        "{e}"
    );
    assert!(plan(&facts(32 << 10, true), 256, 256, 512, false).is_ok_and(|p| p.bq >= 16));
}

/// An H200-like device: 48 KiB of workgroup memory, subgroups of 32,
/// cooperative matrices.
fn gpu() -> Facts {
    Facts {
        subgroups: true,
        subgroup_size: (32, 32),
        coopmat_f16_16: true,
        is_cpu: false,
        ..facts(48 << 10, true)
    }
}

#[test]
fn cooperative_matrices_where_offered_large_heads_plain() {
    let g = gpu();
    let coop = Kernel::CoopMat {
        emulated: false,
        rows: 32,
    };
    let pick = |d, n_q, t| choose_with(&g, d, d, n_q, t, t, None).unwrap();
    let pick_on = |f: &Facts, d| choose_with(f, d, d, 512, DType::F16, DType::F16, None).unwrap();
    assert_eq!(pick(256, 512, DType::F16), coop);
    assert_eq!(pick(40, 16, DType::Q4_0), coop);
    assert!(matches!(pick(576, 512, DType::F16), Kernel::Plain(_)));
    assert!(matches!(pick(128, 512, DType::BF16), Kernel::Plain(_)));
    assert!(coop_workgroup_bytes(256, 256, true) <= 48 << 10);
    assert!(coop_workgroup_bytes(256, 256, false) <= 25 << 10);
    // Forcing: emulation anywhere with f16 and subgroups, never
    // without them.
    let lavapipe = Facts {
        subgroups: true,
        ..facts(32 << 10, true)
    };
    let emulated = Kernel::CoopMat {
        emulated: true,
        rows: 32,
    };
    let forced =
        |f: &Facts, d| choose_with(f, d, d, 3, DType::F16, DType::F16, Some("coopmat-emulated"));
    assert_eq!(forced(&lavapipe, 128).unwrap(), emulated);
    assert!(matches!(forced(&lavapipe, 256).unwrap(), Kernel::Plain(_)));
    assert!(matches!(
        forced(&facts(32 << 10, true), 64).unwrap(),
        Kernel::Plain(_)
    ));
    let plain = choose_with(&g, 256, 256, 512, DType::F16, DType::F16, Some("plain"));
    assert!(matches!(plain.unwrap(), Kernel::Plain(_)));
    // Subgroups of another fixed size would give the softmax too few
    // or too many invocations per row: the real kernel is not chosen,
    // the emulated one still can be.
    for size in [16, 64] {
        let other = Facts {
            subgroup_size: (size, size),
            ..g.clone()
        };
        assert!(matches!(pick_on(&other, 256), Kernel::Plain(_)), "{size}");
    }
    let sixteen = Facts {
        subgroup_size: (16, 16),
        ..g.clone()
    };
    assert_eq!(forced(&sixteen, 128).unwrap(), emulated);
    // One query: the cooperative-matrix kernel all the same.
    assert_eq!(pick(128, 1, DType::F16), coop);
    assert_eq!(pick(256, 1, DType::F16), coop);
}

#[test]
fn query_heads_sharing_kv_are_packed_when_queries_leave_room() {
    // (queries, query heads per K/V head) -> rows per head.
    for ((n_q, gqa), rows) in [
        ((1, 1), 32),
        ((1, 4), 8),
        ((1, 6), 16),
        ((1, 64), 1),
        ((3, 4), 8),
        ((5, 4), 8),
        ((9, 4), 16),
        ((16, 8), 16),
        ((17, 8), 32),
        ((512, 8), 32),
    ] {
        assert_eq!(coop_query_rows(n_q, gqa), rows, "{n_q} queries, {gqa}");
    }
    let g = gpu();
    let k = choose(&g, (128, 128), 1, 4, DType::F16, DType::F16).unwrap();
    assert_eq!((k.queries(), k.heads()), (8, 4));
    let k = choose(&g, (128, 128), 1, 4, DType::BF16, DType::BF16).unwrap();
    assert_eq!((k.queries(), k.heads()), (1, 1));
}

#[test]
fn combining_pass_variants_validate() {
    use crate::ops::shader_check::check;
    for flags in [
        &[][..],
        &["HAS_SINKS"],
        &["QUANTIZE"],
        &["HAS_SINKS", "QUANTIZE"],
    ] {
        let mut key =
            PipelineKey::new("flash_attn_combine", "").wg(crate::ops::attention::COMBINE_WG);
        for f in flags {
            key = key.define(f, "");
        }
        check(&key);
    }
}

#[test]
fn kernel_variants_validate() {
    use crate::ops::shader_check::check;
    let g = gpu();
    let kernels = [
        Kernel::CoopMat {
            emulated: false,
            rows: 32,
        },
        Kernel::CoopMat {
            emulated: true,
            rows: 32,
        },
        Kernel::CoopMat {
            emulated: false,
            rows: 8,
        },
        Kernel::CoopMat {
            emulated: true,
            rows: 4,
        },
        choose_with(&g, 128, 128, 512, DType::F16, DType::F16, Some("plain")).unwrap(),
        Kernel::Vector,
    ];
    let flags: [&[&str]; 4] = [
        &[],
        &["HAS_MASK"],
        &["HAS_MASK", "HAS_SINKS"],
        &["SPLIT_KV", "HAS_MASK", "MASK_F32"],
    ];
    for kernel in kernels {
        for (i, &t) in KV_TYPES.iter().enumerate() {
            let (dk, dv) = [(64, 64), (40, 40), (256, 256), (192, 128)][i % 4];
            let mut key = kernel.key(dk, dv, t, KV_TYPES[(i + 3) % KV_TYPES.len()]);
            for f in flags[i % 4] {
                key = key.define(f, "");
            }
            check(&key);
        }
        // The vector kernel writing the quantized copy (unsplit), with
        // every optional binding before it.
        if matches!(kernel, Kernel::Vector) {
            for flags in [&[][..], &["HAS_MASK"], &["HAS_MASK", "HAS_SINKS"]] {
                let mut key = kernel.key(64, 64, DType::F16, DType::F16);
                for f in flags.iter().chain(&["QUANTIZE"]) {
                    key = key.define(f, "");
                }
                check(&key);
            }
        }
        // f16 K/V read as raw words (mod.rs defines it for aligned rows),
        // and q8_0 and q4_0.
        if matches!(kernel, Kernel::CoopMat { .. }) {
            for flags in [
                &["KV_RAW_F16", "HAS_MASK"][..],
                &["KV_RAW_F16", "KV_RAW_F16_X8", "HAS_MASK"],
                &["KV_RAW_F16", "KV_RAW_F16_X8", "SPLIT_KV"],
            ] {
                let mut key = kernel.key(256, 256, DType::F16, DType::F16);
                for f in flags {
                    key = key.define(f, "");
                }
                check(&key);
            }
            // q8_0 and q4_0 K/V read as raw words.
            for (t, raw) in [(DType::Q8_0, "KV_RAW_Q8_0"), (DType::Q4_0, "KV_RAW_Q4_0")] {
                for (d, flag) in [(128, "HAS_MASK"), (64, "SPLIT_KV")] {
                    let key = kernel.key(d, d, t, t).define(raw, "").define(flag, "");
                    check(&key);
                }
            }
        }
    }
}
