//! FLASH_ATTN_EXT: a sweep of head sizes, K/V types and op params on odd
//! shapes, then test-backend-ops' own grids (kv lengths scaled down).

use backplane::{DType, GraphError, Op, TensorId};

use super::{Catalogue, NMSE_ATTN};
use crate::case::{CaseBuilder, Fill, Work};

/// Adds the family's cases.
pub(super) fn add(c: &mut Catalogue) {
    flash_attn(c);
    flash_attn_sharp(c);
    c.grid(flash_attn_ggml_grid);
    c.grid(flash_attn_ggml_grid_wide_heads);
    c.grid(flash_attn_mixed_kv);
    c.grid(flash_attn_ggml_explicit_cases);
}

/// KV lengths standing in for test-backend-ops' {512, 1024}: at those the
/// grid is 370 GFLOP, minutes of our f64 reference; at {32, 64} it is 23
/// GFLOP (about 20 s). Both stay multiples of the backends' KV tiles, and
/// the second length is still used only without GQA, as there.
pub const GRID_KV: [i64; 2] = [32, 64];

/// K/V types of test-backend-ops' grid.
const GRID_KV_TYPES: [DType; 4] = [DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0];

/// Stand-in for test-backend-ops' second precision pass (GGML_PREC_DEFAULT,
/// run only for hsk = 128): backplane has no precision param (every backend
/// accumulates in f32), so that pass runs the K/V types the first leaves out.
const GRID_KV_TYPES_PREC: [DType; 4] = [DType::F32, DType::Q4_1, DType::Q5_0, DType::Q5_1];

/// One case of the grid, built as test-backend-ops' test_flash_attn_ext:
/// K and V are views of a cache twice as long, head sizes are padded to
/// the K/V block size, the mask is [kv, pad(nb, 64), 1, nr3].
#[derive(Clone, Copy)]
struct Grid {
    hsk: i64,
    hsv: i64,
    nh: i64,
    nr2: i64,
    nr3: i64,
    kv: i64,
    nb: i64,
    mask: bool,
    sinks: bool,
    max_bias: f32,
    softcap: f32,
    type_kv: DType,
    perm: [usize; 4],
}

fn push_grid(c: &mut Catalogue, g: Grid) {
    let name = format!(
        "FLASH_ATTN_EXT(hsk={},hsv={},nh={},nr23=[{},{}],kv={},nb={},mask={},sinks={},max_bias={},logit_softcap={},type_KV={},permute=[{},{},{},{}])",
        g.hsk,
        g.hsv,
        g.nh,
        g.nr2,
        g.nr3,
        g.kv,
        g.nb,
        g.mask,
        g.sinks,
        g.max_bias,
        g.softcap,
        g.type_kv,
        g.perm[0],
        g.perm[1],
        g.perm[2],
        g.perm[3]
    );
    let flops = 2.0 * (g.nh * g.nr2 * g.nb * (g.hsk + g.hsv) * g.kv * g.nr3) as f64;
    c.push_work(
        Op::FlashAttnExt,
        name,
        NMSE_ATTN,
        Work::Flops(flops),
        move |b| {
            let blk = g.type_kv.block_size() as i64;
            let (hsk, hsv) = (pad(g.hsk, blk), pad(g.hsv, blk));
            let uni = Fill::Uniform(-1.0, 1.0);
            let q = b.strided(
                DType::F32,
                [hsk, g.nb, g.nh * g.nr2, g.nr3],
                [1; 4],
                g.perm,
                uni,
            )?;
            // ggml doubles the stored dim 1 (kv, or heads when permuted).
            let k = b.strided(
                g.type_kv,
                [hsk, g.kv, g.nh, g.nr3],
                [1, 2, 1, 1],
                g.perm,
                uni,
            )?;
            let v = b.strided(
                g.type_kv,
                [hsv, g.kv, g.nh, g.nr3],
                [1, 2, 1, 1],
                g.perm,
                uni,
            )?;
            let m = if g.mask {
                let rows = pad(g.nb, 64);
                Some(b.input_with(DType::F16, &[g.kv, rows, 1, g.nr3], Fill::Mask)?)
            } else {
                None
            };
            let s = if g.sinks {
                Some(b.input_with(DType::F32, &[g.nh * g.nr2], Fill::Uniform(-10.0, 10.0))?)
            } else {
                None
            };
            let scale = 1.0 / (g.hsk as f32).sqrt();
            b.g.flash_attn_ext(q, k, v, m, s, scale, g.max_bias, g.softcap)
        },
    );
}

/// `x` rounded up to a multiple of `m` (GGML_PAD).
fn pad(x: i64, m: i64) -> i64 {
    (x + m - 1) / m * m
}

/// test-backend-ops' FLASH_ATTN_EXT loops, in its order, with
/// [`GRID_KV`] for the kv lengths and [`GRID_KV_TYPES_PREC`] for the
/// second precision pass.
fn flash_attn_ggml_grid(c: &mut Catalogue) {
    for hsk in [64i64, 80, 128, 192, 256, 576] {
        for hsv in [64i64, 80, 128, 192, 256, 512] {
            if hsk != 192 && hsk != 576 && hsk != hsv {
                continue;
            }
            if hsk == 192 && hsv != 128 && hsv != 192 {
                continue;
            }
            if hsk == 576 && hsv != 512 {
                continue; // DeepSeek MLA
            }
            for mask in [true, false] {
                for sinks in [true, false] {
                    for max_bias in [0.0f32, 8.0] {
                        if !mask && max_bias > 0.0 {
                            continue;
                        }
                        for softcap in [0.0f32, 10.0] {
                            if hsk != 128 && softcap != 0.0 {
                                continue;
                            }
                            grid_heads(c, hsk, hsv, mask, sinks, max_bias, softcap);
                        }
                    }
                }
            }
        }
    }
}

fn grid_heads(
    c: &mut Catalogue,
    hsk: i64,
    hsv: i64,
    mask: bool,
    sinks: bool,
    max_bias: f32,
    softcap: f32,
) {
    let nh = 4;
    for nr3 in [1i64, 3] {
        if hsk > 64 && nr3 > 1 {
            continue; // broadcast only for small heads
        }
        for nr2 in [1i64, 4, 16] {
            if nr2 == 16 && hsk != 128 {
                continue;
            }
            for (ki, kv) in GRID_KV.into_iter().enumerate() {
                if nr2 != 1 && ki != 0 {
                    continue;
                }
                for nb in [1i64, 3, 32, 35] {
                    let passes: &[[DType; 4]] = if hsk == 128 {
                        &[GRID_KV_TYPES, GRID_KV_TYPES_PREC]
                    } else {
                        &[GRID_KV_TYPES]
                    };
                    for types in passes {
                        for &type_kv in types {
                            let g = Grid {
                                hsk,
                                hsv,
                                nh,
                                nr2,
                                nr3,
                                kv,
                                nb,
                                mask,
                                sinks,
                                max_bias,
                                softcap,
                                type_kv,
                                perm: [0, 1, 2, 3],
                            };
                            push_grid(c, g);
                            // Permuted Q/K/V for the plain-mask cases.
                            if mask && max_bias == 0.0 && softcap == 0.0 && ki == 0 {
                                push_grid(
                                    c,
                                    Grid {
                                        perm: [0, 2, 1, 3],
                                        ..g
                                    },
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

/// KV lengths of the later grid standing in for its {113, 512, 1024}: 29
/// is off every tile as 113 is, 32 and 64 as in [`GRID_KV`].
const GRID_KV_WIDE: [i64; 3] = [29, 32, 64];

/// K/V types of the later grid (its IQ4_NL left out), used only for head
/// sizes 64 and 72; other heads run f16 (and bf16 in the precision pass).
const GRID_KV_TYPES_WIDE: [DType; 8] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Q8_0,
    DType::Q5_1,
    DType::Q5_0,
    DType::Q4_1,
    DType::Q4_0,
];

/// The FLASH_ATTN_EXT grid of a later test-backend-ops (llama.cpp
/// 0054f928, the one behind the design's 19,726 cases): head sizes 40 to
/// 576 including Mistral's 320/256 with one KV head, GQA ratios up to 32,
/// 75-row batches. Cases it shares with the grid above have the same name
/// and are kept once.
fn flash_attn_ggml_grid_wide_heads(c: &mut Catalogue) {
    let heads = [40i64, 64, 72, 80, 96, 128, 192, 256, 320, 512, 576];
    for hsk in heads {
        for hsv in [40i64, 64, 72, 80, 96, 128, 192, 256, 512] {
            let pair_ok = match hsk {
                192 => hsv == 128 || hsv == 192,
                320 => hsv == 256, // Mistral 4 MLA
                576 => hsv == 512, // DeepSeek MLA
                _ => hsk == hsv,
            };
            if !pair_ok {
                continue;
            }
            for mask in [true, false] {
                for sinks in [true, false] {
                    for max_bias in [0.0f32, 8.0] {
                        if !mask && max_bias > 0.0 {
                            continue;
                        }
                        for softcap in [0.0f32, 10.0] {
                            if hsk != 128 && softcap != 0.0 {
                                continue;
                            }
                            let g = Grid {
                                hsk,
                                hsv,
                                nh: 4,
                                nr2: 1,
                                nr3: 1,
                                kv: 0,
                                nb: 0,
                                mask,
                                sinks,
                                max_bias,
                                softcap,
                                type_kv: DType::F16,
                                perm: [0, 1, 2, 3],
                            };
                            wide_heads(c, g);
                        }
                    }
                }
            }
        }
    }
}

fn wide_heads(c: &mut Catalogue, g: Grid) {
    let hsk = g.hsk;
    for nh in [1i64, 4] {
        if nh == 1 && hsk != 320 && hsk != 576 {
            continue;
        }
        for nr3 in [1i64, 3] {
            if hsk > 64 && nr3 > 1 {
                continue;
            }
            for nr2 in [1i64, 4, 8, 12, 16, 20, 32] {
                let ok = match nr2 {
                    8 | 16 => hsk == 192,
                    12 => hsk == 128,
                    20 => nh == 1 && hsk == 576,
                    32 => nh == 1 && hsk == 320,
                    _ => true,
                };
                if !ok {
                    continue;
                }
                for (ki, kv) in GRID_KV_WIDE.into_iter().enumerate() {
                    if nr2 != 1 && ki != 1 {
                        continue;
                    }
                    for nb in [1i64, 3, 32, 75] {
                        // The precision pass (hsk 128) runs bf16 here.
                        let passes: &[DType] = if hsk == 128 {
                            &[DType::F16, DType::BF16]
                        } else if hsk == 64 || hsk == 72 {
                            &GRID_KV_TYPES_WIDE
                        } else {
                            &[DType::F16]
                        };
                        for &type_kv in passes {
                            let g = Grid {
                                nh,
                                nr2,
                                nr3,
                                kv,
                                nb,
                                type_kv,
                                ..g
                            };
                            push_grid(c, g);
                            if g.mask && g.max_bias == 0.0 && g.softcap == 0.0 && ki == 1 {
                                push_grid(
                                    c,
                                    Grid {
                                        perm: [0, 2, 1, 3],
                                        ..g
                                    },
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

/// KV length of the llama.cpp 0c1e5709 cases below: ggml's 512-16,384
/// keys (up to 26 GFLOP a case with its 512-row batches) are divided by
/// 64, rounded up so 1,025 stays off the tiles; batches are capped at
/// [`GRID_EXPLICIT_NB`] rows.
fn explicit_kv(kv: i64) -> i64 {
    if kv > 256 { (kv + 63) / 64 } else { kv }
}

/// Most query rows of the llama.cpp 0c1e5709 cases (ggml: up to 512).
const GRID_EXPLICIT_NB: i64 = 16;

/// The explicit FLASH_ATTN_EXT cases test-backend-ops added after the
/// 0054f928 grid (llama.cpp 0c1e5709), without its sparse-mask hint
/// (n_kv_max) cases, which backplane's FLASH_ATTN_EXT has no parameter
/// for, and its Q1_0 / Q2_0 ones: asymmetric and unaligned head sizes,
/// q8_0 caches at decode and prefill, MLA V as a sub-view of K in several
/// head shapes, dense (non-view) quantized K/V, non-power-of-two MMA heads
/// and long f16 caches; kv by [`explicit_kv`], batches capped at
/// [`GRID_EXPLICIT_NB`].
fn flash_attn_ggml_explicit_cases(c: &mut Catalogue) {
    let (f16, q8) = (DType::F16, DType::Q8_0);
    let (id, p21) = ([0usize, 1, 2, 3], [0usize, 2, 1, 3]);
    // (hsk, hsv, nh, nr2, nr3, kv, nb, mask, sinks, max_bias, softcap, type_K, type_V, perm, kv_view, v_of_k)
    type ExplicitCase = (
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
        bool,
        bool,
        f32,
        f32,
        DType,
        DType,
        [usize; 4],
        bool,
        bool,
    );
    #[rustfmt::skip]
    let cases: &[ExplicitCase] = &[
        (72, 64, 4, 1, 1, 256, 2, true, false, 0.0, 0.0, f16, f16, id, true, false),
        (64, 72, 4, 1, 1, 256, 2, true, false, 0.0, 0.0, f16, f16, id, true, false),
        (65, 67, 4, 1, 1, 113, 75, true, true, 8.0, 0.0, f16, f16, id, true, false),
        (65, 67, 4, 1, 1, 17, 75, false, false, 0.0, 1.0, f16, f16, id, true, false),
        (65, 67, 4, 1, 1, 113, 75, false, false, 0.0, 1.0, f16, f16, id, true, false),
        (256, 256, 2, 16, 1, 113, 1, true, false, 0.0, 0.0, q8, q8, id, true, false),
        (256, 256, 2, 16, 1, 1024, 1, true, false, 0.0, 0.0, q8, q8, id, true, false),
        (256, 256, 2, 16, 1, 1024, 1, true, false, 0.0, 0.0, q8, q8, p21, true, false),
        (256, 256, 2, 16, 2, 1025, 1, true, true, 8.0, 30.0, q8, q8, id, true, false),
        (256, 256, 2, 16, 1, 1025, 64, true, false, 0.0, 0.0, q8, q8, p21, true, false),
        (256, 256, 2, 16, 1, 16384, 1, true, false, 0.0, 0.0, q8, q8, id, true, false),
        (576, 512, 1, 8, 1, 113, 1, true, false, 0.0, 0.0, q8, q8, id, true, true),
        (576, 512, 1, 8, 1, 1024, 1, true, false, 0.0, 0.0, q8, q8, id, true, true),
        (576, 512, 1, 8, 1, 1024, 64, true, false, 0.0, 0.0, q8, q8, id, true, true),
        (320, 256, 1, 32, 1, 512, 1, true, false, 0.0, 0.0, f16, f16, id, true, true),
        (192, 128, 4, 8, 1, 512, 1, true, false, 0.0, 0.0, f16, f16, id, true, true),
        (128, 128, 8, 4, 1, 512, 8, true, false, 0.0, 0.0, f16, f16, id, true, true),
        (64, 64, 4, 1, 1, 512, 1, true, false, 0.0, 0.0, q8, q8, id, true, true),
        (256, 256, 4, 6, 1, 4096, 512, true, false, 0.0, 0.0, f16, f16, id, true, false),
        (128, 128, 8, 4, 1, 4096, 512, true, false, 0.0, 0.0, f16, f16, id, true, false),
        (256, 256, 4, 6, 1, 16384, 512, true, false, 0.0, 0.0, f16, f16, id, true, false),
        (128, 128, 8, 4, 1, 16384, 512, true, false, 0.0, 0.0, f16, f16, id, true, false),
        (256, 256, 4, 6, 1, 512, 512, true, false, 0.0, 0.0, f16, f16, id, true, false),
        (256, 256, 4, 6, 1, 4096, 64, true, false, 0.0, 0.0, f16, f16, id, true, false),
        (256, 256, 4, 6, 1, 4096, 16, true, false, 0.0, 0.0, f16, f16, id, true, false),
        (256, 256, 4, 2, 1, 4096, 512, true, false, 0.0, 0.0, f16, f16, id, true, false),
        (256, 256, 4, 4, 1, 4096, 512, true, false, 0.0, 0.0, f16, f16, id, true, false),
        (256, 256, 2, 12, 1, 4096, 512, true, false, 0.0, 0.0, f16, f16, id, true, false),
        (64, 64, 4, 1, 1, 512, 75, true, false, 0.0, 0.0, q8, q8, p21, false, false),
        (64, 64, 4, 4, 1, 512, 75, true, false, 0.0, 0.0, q8, q8, p21, false, false),
        (64, 64, 4, 1, 1, 1024, 75, true, false, 0.0, 0.0, q8, q8, p21, false, false),
        (64, 64, 4, 1, 1, 512, 75, true, false, 0.0, 0.0, q8, q8, id, false, false),
        (192, 128, 8, 8, 1, 4096, 1, true, false, 0.0, 0.0, f16, f16, id, true, false),
        (576, 512, 1, 20, 1, 512, 1, true, false, 0.0, 0.0, f16, f16, id, true, true),
        (64, 64, 8, 8, 1, 4096, 4, true, false, 0.0, 0.0, f16, f16, id, true, false),
        (128, 128, 8, 4, 1, 4096, 8, true, true, 0.0, 0.0, f16, f16, id, true, false),
        (256, 256, 4, 2, 1, 1024, 32, true, false, 0.0, 0.0, f16, f16, id, true, false),
        (512, 512, 4, 2, 1, 1024, 4, true, false, 0.0, 0.0, f16, f16, id, true, false),
    ];
    for &(
        hsk,
        hsv,
        nh,
        nr2,
        nr3,
        kv,
        nb,
        mask,
        sinks,
        max_bias,
        softcap,
        tk,
        tv,
        perm,
        kv_view,
        v_of_k,
    ) in cases
    {
        let (kv, nb) = (explicit_kv(kv), nb.min(GRID_EXPLICIT_NB));
        let name = format!(
            "FLASH_ATTN_EXT(hsk={hsk},hsv={hsv},nh={nh},nr23=[{nr2},{nr3}],kv={kv},nb={nb},mask={mask},sinks={sinks},max_bias={max_bias},logit_softcap={softcap},type_K={tk},type_V={tv},permute=[{}],kv_view={kv_view},v_is_view_of_k={v_of_k})",
            perm.map(|p| p.to_string()).join(",")
        );
        let flops = 2.0 * (nh * nr2 * nb * (hsk + hsv) * kv * nr3) as f64;
        c.push_work(
            Op::FlashAttnExt,
            name,
            NMSE_ATTN,
            Work::Flops(flops),
            move |b| {
                let uni = Fill::Uniform(-1.0, 1.0);
                let blk = tk.block_size().max(tv.block_size()) as i64;
                let (hk, hv) = (pad(hsk, blk), pad(hsv, blk));
                let q = b.strided(DType::F32, [hk, nb, nh * nr2, nr3], [1; 4], perm, uni)?;
                let grow = if kv_view { [1, 2, 1, 1] } else { [1; 4] };
                let k = b.strided(tk, [hk, kv, nh, nr3], grow, perm, uni)?;
                let v = if v_of_k {
                    let d = b.g.desc(k);
                    let nb_k = d.nb;
                    b.g.view(k, &[hv, kv, nh, nr3], &[nb_k[1], nb_k[2], nb_k[3]], 0)?
                } else {
                    b.strided(tv, [hv, kv, nh, nr3], grow, perm, uni)?
                };
                let m = if mask {
                    Some(b.input_with(DType::F16, &[kv, pad(nb, 64), 1, nr3], Fill::Mask)?)
                } else {
                    None
                };
                let s = if sinks {
                    Some(b.input_with(DType::F32, &[nh * nr2], Fill::Uniform(-10.0, 10.0))?)
                } else {
                    None
                };
                let scale = 1.0 / (hsk as f32).sqrt();
                b.g.flash_attn_ext(q, k, v, m, s, scale, max_bias, softcap)
            },
        );
    }
}

/// The later grid's K and V of different types (its Q1_0 ones left out).
fn flash_attn_mixed_kv(c: &mut Catalogue) {
    for (d, tk, tv, kv, nb, mask) in [
        (64i64, DType::Q8_0, DType::Q4_0, 128i64, 2i64, true),
        (64, DType::Q4_0, DType::F16, 128, 2, true),
        (72, DType::Q4_0, DType::Q8_0, 96, 2, true),
        (64, DType::F16, DType::F32, 96, 2, true),
        (128, DType::F16, DType::Q4_0, 256, 1, false),
    ] {
        let name = format!(
            "FLASH_ATTN_EXT(hsk={d},hsv={d},nh=4,nr23=[1,1],kv={kv},nb={nb},mask={mask},type_K={tk},type_V={tv})"
        );
        let flops = 2.0 * (4 * nb * 2 * d * kv) as f64;
        c.push_work(
            Op::FlashAttnExt,
            name,
            NMSE_ATTN,
            Work::Flops(flops),
            move |b| {
                let uni = Fill::Uniform(-1.0, 1.0);
                let id = [0, 1, 2, 3];
                let dp = pad(d, 32);
                let q = b.input(DType::F32, &[dp, nb, 4, 1])?;
                let k = b.strided(tk, [dp, kv, 4, 1], [1, 2, 1, 1], id, uni)?;
                let v = b.strided(tv, [dp, kv, 4, 1], [1, 2, 1, 1], id, uni)?;
                let m = if mask {
                    Some(b.input_with(DType::F16, &[kv, pad(nb, 64), 1, 1], Fill::Mask)?)
                } else {
                    None
                };
                let scale = 1.0 / (d as f32).sqrt();
                b.g.flash_attn_ext(q, k, v, m, None, scale, 0.0, 0.0)
            },
        );
    }
}

/// Scores with a wide range (scale 2 instead of 1 / sqrt(64)), over keys
/// that span several tiles of every kernel: each tile's maximum moves the
/// running one far, so the online softmax's rescaling of the partial
/// outputs decides the result (with the usual 1 / sqrt(d), exp(m_old -
/// m_new) stays near 1 and a kernel that skipped it would still pass).
/// One query (decode kernels) and 40 (prefill kernels), grouped-query K/V.
fn flash_attn_sharp(c: &mut Catalogue) {
    let (d, n_kv, heads_kv, gqa) = (64i64, 600i64, 2i64, 2i64);
    for kv in [DType::F16, DType::Q8_0, DType::F32] {
        for nb in [1i64, 40] {
            for mask in [false, true] {
                let name = format!(
                    "FLASH_ATTN_EXT(hsk={d},hsv={d},nh={heads_kv},nr23=[{gqa},1],kv={n_kv},nb={nb},mask={mask},scale=2,type_KV={kv})"
                );
                let flops = 4.0 * (heads_kv * gqa * nb * n_kv * d) as f64;
                c.push_work(
                    Op::FlashAttnExt,
                    name,
                    NMSE_ATTN,
                    Work::Flops(flops),
                    move |b| {
                        let dims = [d, nb, heads_kv, gqa, n_kv];
                        grouped_attention(b, dims, kv, (mask, false), [2.0, 0.0, 0.0])
                    },
                );
            }
        }
    }
}

fn flash_attn(c: &mut Catalogue) {
    let kv_types = DType::ATTENTION_KV_TYPES;
    let shapes = [
        (64i64, 113i64, 1i64, 4i64, 1i64),
        (128, 512, 7, 4, 4),
        (64, 33, 32, 2, 2),
        (256, 64, 3, 2, 1),
        (40, 96, 4, 2, 1),
        (72, 50, 2, 2, 1),
        (80, 128, 1, 2, 2),
        (96, 70, 5, 1, 1),
        (112, 64, 1, 2, 1),
        (192, 40, 3, 1, 2),
        (576, 32, 2, 1, 1),
    ];
    for &kv in &kv_types {
        for (d, n_kv, n_q, h, gqa) in shapes {
            if kv.is_quantized() && d % 32 != 0 {
                continue;
            }
            for (mask, sinks, softcap, max_bias) in [
                (true, false, 0.0f32, 0.0f32),
                (false, false, 0.0, 0.0),
                (true, true, 0.0, 0.0),
                (true, false, 30.0, 0.0),
                (true, false, 0.0, 8.0),
            ] {
                let name = format!(
                    "FLASH_ATTN_EXT(hsk={d},hsv={d},nh={h},nr={gqa},kv={n_kv},nb={n_q},mask={mask},sinks={sinks},max_bias={max_bias},logit_softcap={softcap},type_KV={kv})"
                );
                let flops = 2.0 * (n_q * n_kv * h * gqa * 2 * d) as f64;
                c.push_work(
                    Op::FlashAttnExt,
                    name,
                    NMSE_ATTN,
                    Work::Flops(flops),
                    move |b| {
                        let scale = 1.0 / (d as f32).sqrt();
                        let dims = [d, n_q, h, gqa, n_kv];
                        grouped_attention(b, dims, kv, (mask, sinks), [scale, max_bias, softcap])
                    },
                );
            }
        }
    }
    // Prefill at the size the WebGPU issue benchmarks (head size 256), and
    // at the head size of most current models (128), f16 K/V; at head 128
    // also q8_0 and q4_0 K/V (quantized caches), and 64 queries: perf only.
    for (d, n_q, kv) in [
        (256i64, 512i64, DType::F16),
        (128, 512, DType::F16),
        (128, 512, DType::Q8_0),
        (128, 512, DType::Q4_0),
        (128, 64, DType::Q8_0),
    ] {
        let (n_kv, h) = (20000i64, 8i64);
        let name = format!(
            "FLASH_ATTN_EXT(hsk={d},hsv={d},nh={h},nr=1,kv={n_kv},nb={n_q},mask=true,type_KV={kv})"
        );
        let flops = 2.0 * (n_q * n_kv * h * 2 * d) as f64;
        c.push_perf(Op::FlashAttnExt, name, Work::Flops(flops), move |b| {
            masked_attention(b, [d, n_q, h, 1, n_kv], kv)
        });
    }
    // Decode (one query) over a 16,384-key cache, head size 128, 32 query
    // heads sharing 8 K/V heads: bandwidth-bound, reported as GB/s of the
    // tensors read and written (f16 K and V are 67.1 MB of the 67.2).
    for kv in [DType::F16, DType::Q8_0, DType::Q4_0] {
        let (d, n_kv, h, gqa) = (128i64, 16384i64, 8i64, 4i64);
        let name = format!(
            "FLASH_ATTN_EXT(hsk={d},hsv={d},nh={h},nr={gqa},kv={n_kv},nb=1,mask=true,type_KV={kv},decode)"
        );
        c.push_perf(Op::FlashAttnExt, name, Work::Bytes, move |b| {
            masked_attention(b, [d, 1, h, gqa, n_kv], kv)
        });
    }
}

/// A perf case's attention: `[d, n_q, h, gqa, n_kv]` is head size d, n_q
/// queries of h * gqa f32 heads over n_kv keys of h K/V heads of type
/// `kv`, an f16 mask, scale 1 / sqrt(d).
fn masked_attention(
    b: &mut CaseBuilder,
    [d, n_q, h, gqa, n_kv]: [i64; 5],
    kv: DType,
) -> Result<TensorId, GraphError> {
    let scale = 1.0 / (d as f32).sqrt();
    grouped_attention(
        b,
        [d, n_q, h, gqa, n_kv],
        kv,
        (true, false),
        [scale, 0.0, 0.0],
    )
}

/// Attention of `n_q` f32 queries of head size `d` in `h * gqa` heads over
/// `n_kv` keys and values of type `kv` in `h` heads, with (`mask`) an f16
/// mask and (`sinks`) sinks, and `[scale, max_bias, softcap]`.
fn grouped_attention(
    b: &mut CaseBuilder,
    [d, n_q, h, gqa, n_kv]: [i64; 5],
    kv: DType,
    (mask, sinks): (bool, bool),
    [scale, max_bias, softcap]: [f32; 3],
) -> Result<TensorId, GraphError> {
    let q = b.input(DType::F32, &[d, n_q, h * gqa, 1])?;
    let k = b.input(kv, &[d, n_kv, h, 1])?;
    let v = b.input(kv, &[d, n_kv, h, 1])?;
    let m = if mask {
        Some(b.input_with(DType::F16, &[n_kv, n_q, 1, 1], Fill::Mask)?)
    } else {
        None
    };
    let s = if sinks {
        Some(b.input_with(DType::F32, &[h * gqa], Fill::Uniform(-2.0, 2.0))?)
    } else {
        None
    };
    b.g.flash_attn_ext(q, k, v, m, s, scale, max_bias, softcap)
}
