//! MUL_MAT and MUL_MAT_ID.

use backplane::{DType, Op};

use super::{Catalogue, NMSE_MATMUL, dims};
use crate::case::{Fill, Work};

/// Adds the family's cases.
pub(super) fn add(c: &mut Catalogue) {
    mul_mat(c);
    mul_mat_id(c);
    c.grid(mul_mat_id_ggml_grid);
    c.grid(mul_mat_id_ggml_grid_edges);
    c.grid(mul_mat_ggml_grid);
    mul_mat_strided_gemm(c);
    perf(c);
    decode_perf(c);
}

/// Every src0 type with a mat-mul kernel.
pub(crate) const MATMUL_TYPES: [DType; 13] = DType::WEIGHT_TYPES;

/// Rows of the later MUL_MAT grid's multi-column Q4_K / Q5_K cases (ggml:
/// 4,096 x 1,024 and 1,023 x 4,096 weights per case, 32 cases).
const GRID_MULTICOL_ROWS: i64 = 32;

/// Some of the later test-backend-ops' MUL_MAT loops (llama.cpp 0c1e5709):
/// mat-vec rows 16 blocks long for every type, Q4_K / Q5_K at 1-8 columns
/// ([`GRID_MULTICOL_ROWS`] rows), SYCL's row-pair boundary (6,271-6,273
/// rows; k 256 here, ggml 1,024), m = 1 around the mat-vec batch limit,
/// and k off multiples of 32. Its KV-cache view, 2,880-square and
/// batched-permutation additions are not mirrored yet.
fn mul_mat_ggml_grid(c: &mut Catalogue) {
    let id = [0, 1, 2, 3];
    let one = [1, 1];
    for ta in MATMUL_TYPES {
        for n in [1, 8] {
            push_mm(c, ta, DType::F32, 16, n, 16 * 256, one, one, id);
        }
    }
    for ta in [DType::Q4_K, DType::Q5_K] {
        for n in 1..=8 {
            push_mm(c, ta, DType::F32, GRID_MULTICOL_ROWS, n, 1024, one, one, id);
            push_mm(
                c,
                ta,
                DType::F32,
                GRID_MULTICOL_ROWS - 1,
                n,
                4096,
                one,
                one,
                id,
            );
        }
    }
    for m in [6271, 6272, 6273] {
        push_mm(c, DType::Q4_K, DType::F32, m, 2, 256, one, one, id);
    }
    for n in [1, 7, 8, 9, 16, 127, 128, 511, 512] {
        push_mm(c, DType::F32, DType::F32, 1, n, 2048, one, one, id);
    }
    push_mm(c, DType::F16, DType::F32, 1, 512, 2048, one, one, id);
    push_mm(c, DType::F16, DType::F16, 1, 512, 2048, one, one, id);
    push_mm(c, DType::F16, DType::F32, 1, 509, 2051, one, one, id);
    push_mm(c, DType::F16, DType::F16, 1, 509, 2051, one, one, id);
    push_mm(c, DType::F32, DType::F32, 31, 509, 2051, one, one, id);
    push_mm(c, DType::F32, DType::F32, 32, 509, 2112, one, one, id);
    push_mm(c, DType::Q8_0, DType::F32, 32, 509, 2112, one, one, id);
    push_mm(c, DType::F16, DType::F16, 64, 32, 65, one, one, id);
    push_mm(c, DType::F16, DType::F16, 64, 32, 80, one, one, id);
    push_mm(c, DType::F16, DType::F32, 64, 32, 80, one, one, id);
    push_mm(c, DType::F32, DType::F32, 64, 32, 80, one, one, id);
    push_mm(c, DType::F16, DType::F16, 64, 32, 588, one, one, id);
    push_mm(c, DType::F16, DType::F16, 64, 32, 80, [4, 1], one, id);

    // Batched mat-vec around a tile boundary, a and b permuted or a row-
    // strided view (ggml: m and k of 1,056 = 33 x 32; here 33).
    let big = GRID_MM_BATCH_DIM;
    for bs2 in [1, 3] {
        for bs in [1, 2, 4, 8] {
            for nr in [1, 4] {
                for m in 0..2 {
                    for k in 0..2 {
                        for ta in [DType::F16, DType::BF16, DType::F32] {
                            let mm = MmView {
                                per: [0, 2, 1, 3],
                                ..MmView::NONE
                            };
                            push_mm_view(c, ta, big + m, 1, 128 + k, [bs, bs2], [nr, 1], mm);
                            let mm = MmView {
                                k_v: 2 * big + k,
                                ..MmView::NONE
                            };
                            push_mm_view(c, ta, 128 + m, 1, big + k, [bs, bs2], [nr, 1], mm);
                        }
                    }
                }
            }
        }
    }
    let f32t = DType::F32;
    let mm = MmView {
        src_overlap: true,
        ..MmView::NONE
    };
    push_mm_view(c, f32t, 32, 4, 96, [3, 2], one, mm);
    let mm = MmView {
        m_v: 5120,
        ..MmView::NONE
    };
    push_mm_view(c, f32t, 8, 1, 64, [8, 1], one, mm);
    push_mm_view(c, DType::F16, 8, 16, 64, [8, 1], one, mm);
    let mm = MmView {
        m_v: 16,
        pad: 16,
        ..MmView::NONE
    };
    push_mm_view(c, f32t, 8, 1, 64, [8, 1], one, mm);
    push_mm_view(c, DType::F16, 8, 16, 64, [8, 1], one, mm);
}

/// Weights big enough for matrix-matrix kernels (ours, not ggml's): rows
/// longer in memory than K, batches further apart than their rows, and an
/// odd number of 4-weight runs (129 rows of 132), at sizes where a GPU
/// backend may first rewrite the weights into dense rows (WebGPU: m >= 128,
/// n >= 128, k >= 64).
fn mul_mat_strided_gemm(c: &mut Catalogue) {
    let one = [1, 1];
    for ta in [DType::F32, DType::F16] {
        push_mm(c, ta, DType::F32, 129, 128, 132, one, one, [0, 1, 2, 3]);
    }
    // (k, layout): rows 160 long in memory; batches 136 rows apart.
    let views = [
        (
            128,
            MmView {
                k_v: 160,
                ..MmView::NONE
            },
        ),
        (
            64,
            MmView {
                m_v: 136,
                ..MmView::NONE
            },
        ),
    ];
    for ta in [DType::F32, DType::F16, DType::Q8_0] {
        for (k, v) in views {
            push_mm_view(c, ta, 128, 128, k, [2, 1], one, v);
        }
    }
}

/// m and k of the later batched mat-vec loop (ggml: 1,056, up to 3.2 M
/// weights a case over 384 cases).
const GRID_MM_BATCH_DIM: i64 = 33;

/// test_mul_mat's layout parameters: both operands permuted by `per`
/// (ggml's way, unlike `push_mm`'s per_b), rows `k_v` long in memory,
/// a and b overlapping views of one tensor, a's batches `m_v` rows (plus
/// `pad` bytes) apart.
#[derive(Clone, Copy)]
struct MmView {
    per: [usize; 4],
    k_v: i64,
    src_overlap: bool,
    m_v: i64,
    pad: u64,
}

impl MmView {
    const NONE: MmView = MmView {
        per: [0, 1, 2, 3],
        k_v: 0,
        src_overlap: false,
        m_v: 0,
        pad: 0,
    };
}

/// One test_mul_mat case with [`MmView`] layouts; b is f32.
#[allow(clippy::too_many_arguments)]
fn push_mm_view(
    c: &mut Catalogue,
    ta: DType,
    m: i64,
    n: i64,
    k: i64,
    bs: [i64; 2],
    nr: [i64; 2],
    v: MmView,
) {
    let name = format!(
        "MUL_MAT(type_a={ta},type_b=f32,m={m},n={n},k={k},bs=[{}],nr=[{}],per=[{}],k_v={},o=1,src_overlap={},m_v={},pad={})",
        dims(&bs),
        dims(&nr),
        dims(&v.per.map(|p| p as i64)),
        v.k_v,
        v.src_overlap as i32,
        v.m_v,
        v.pad
    );
    let flops = 2.0 * (m * n * k * bs[0] * nr[0] * bs[1] * nr[1]) as f64;
    c.push_work(
        Op::MulMat,
        name,
        NMSE_MATMUL,
        Work::Flops(flops),
        move |b| {
            let uni = Fill::Uniform(-1.0, 1.0);
            let tb = DType::F32;
            let ne_a = [k, m, bs[0], bs[1]];
            let ne_b = [k, n, bs[0] * nr[0], bs[1] * nr[1]];
            if v.per != [0, 1, 2, 3] {
                let p = v.per;
                let a = b.input(ta, &[ne_a[p[0]], ne_a[p[1]], ne_a[p[2]], ne_a[p[3]]])?;
                let x = b.input(tb, &[ne_b[p[0]], ne_b[p[1]], ne_b[p[2]], ne_b[p[3]]])?;
                let a = b.g.permute(a, p)?;
                let x = b.g.permute(x, p)?;
                return b.g.mul_mat(a, x);
            }
            if v.src_overlap {
                let base = b.input_with(ta, &[2 * k, m.max(n), ne_b[2], ne_b[3]], uni)?;
                let nb = b.g.desc(base).nb;
                let st = [nb[1], nb[2], nb[3]];
                let a = b.g.view(base, &ne_a, &st, 0)?;
                let x =
                    b.g.view(base, &ne_b, &st, k as u64 * ta.type_size() as u64)?;
                return b.g.mul_mat(a, x);
            }
            let k_phys = if v.k_v == 0 { k } else { v.k_v };
            let m_phys = if v.m_v == 0 {
                m
            } else {
                v.m_v + (v.pad != 0) as i64
            };
            let mut a = b.input(ta, &[k_phys, m_phys, bs[0], bs[1]])?;
            let mut x = b.input(tb, &[k_phys, n, ne_b[2], ne_b[3]])?;
            if v.k_v != 0 {
                let nb = b.g.desc(a).nb;
                a = b.g.view(a, &ne_a, &[nb[1], nb[2], nb[3]], 0)?;
                let nb = b.g.desc(x).nb;
                x = b.g.view(x, &ne_b, &[nb[1], nb[2], nb[3]], 0)?;
            }
            if v.m_v != 0 {
                let nb = b.g.desc(a).nb;
                a =
                    b.g.view(a, &ne_a, &[nb[1], v.m_v as u64 * nb[1] + v.pad, nb[3]], 0)?;
            }
            b.g.mul_mat(a, x)
        },
    );
}

#[allow(clippy::too_many_arguments)]
fn push_mm(
    c: &mut Catalogue,
    ta: DType,
    tb: DType,
    m: i64,
    n: i64,
    k: i64,
    bs: [i64; 2],
    nr: [i64; 2],
    perm_b: [usize; 4],
) {
    let name = format!(
        "MUL_MAT(type_a={ta},type_b={tb},m={m},n={n},k={k},bs=[{}],nr=[{}],per_b=[{}])",
        dims(&bs),
        dims(&nr),
        dims(&perm_b.map(|p| p as i64))
    );
    let flops = 2.0 * (m * n * k * bs[0] * nr[0] * bs[1] * nr[1]) as f64;
    c.push_work(
        Op::MulMat,
        name,
        NMSE_MATMUL,
        Work::Flops(flops),
        move |b| {
            let a = b.input(ta, &[k, m, bs[0], bs[1]])?;
            let x = b.permuted(
                tb,
                [k, n, bs[0] * nr[0], bs[1] * nr[1]],
                perm_b,
                Fill::Uniform(-1.0, 1.0),
            )?;
            b.g.mul_mat(a, x)
        },
    );
}

fn mul_mat(c: &mut Catalogue) {
    for ta in MATMUL_TYPES {
        let ks: &[i64] = if ta.block_size() == 256 {
            &[256, 512]
        } else if ta.is_quantized() {
            &[96, 256]
        } else {
            &[1, 33, 256]
        };
        for &k in ks {
            for m in [16, 67] {
                for n in (1..=16).chain([33, 64]) {
                    push_mm(c, ta, DType::F32, m, n, k, [1, 1], [1, 1], [0, 1, 2, 3]);
                }
            }
        }
        let k = if ta.block_size() == 256 { 256 } else { 64 };
        for tb in [DType::F32, DType::F16] {
            for (bs, nr) in [
                ([1, 1], [1, 1]),
                ([3, 1], [1, 1]),
                ([3, 2], [2, 2]),
                ([2, 3], [1, 2]),
            ] {
                for n in [1, 9] {
                    push_mm(c, ta, tb, 16, n, k, bs, nr, [0, 1, 2, 3]);
                }
            }
            // Non-contiguous activations: permuted batch dims and transposed rows.
            push_mm(c, ta, tb, 16, 8, k, [2, 3], [1, 1], [0, 2, 1, 3]);
            push_mm(c, ta, tb, 16, 8, k, [1, 1], [1, 1], [1, 0, 2, 3]);
        }
        // Odd m and large-ish n, off every tile size.
        push_mm(c, ta, DType::F32, 67, 37, k, [1, 1], [1, 1], [0, 1, 2, 3]);
    }
}

fn mul_mat_id(c: &mut Catalogue) {
    for ta in MATMUL_TYPES {
        let k = if ta.block_size() == 256 { 256 } else { 64 };
        for (n_mats, n_used, shared_b, n_tok) in [
            (4, 2, false, 1),
            (4, 2, true, 7),
            (8, 4, false, 32),
            (4, 1, true, 3),
        ] {
            let e_b = if shared_b { 1 } else { n_used };
            let m = 16;
            let name = format!(
                "MUL_MAT_ID(type_a={ta},type_b=f32,n_mats={n_mats},n_used={n_used},b={shared_b},m={m},n={n_tok},k={k})"
            );
            let flops = 2.0 * (m * n_used * n_tok * k) as f64;
            c.push_work(
                Op::MulMatId,
                name,
                NMSE_MATMUL,
                Work::Flops(flops),
                move |b| {
                    let a = b.input(ta, &[k, m, n_mats])?;
                    let x = b.input(DType::F32, &[k, e_b, n_tok])?;
                    let ids =
                        b.input_with(DType::I32, &[n_used, n_tok], Fill::DistinctIndex(n_mats))?;
                    b.g.mul_mat_id(a, x, ids)
                },
            );
        }
    }
}

/// The benchmark shapes of the core issue: src0 4096 x 14336, n = 1 and 512,
/// and n = 128 and 256 (prompt chunks too narrow to fill a large GPU with
/// 128 x 128 output tiles).
fn perf(c: &mut Catalogue) {
    for ta in [
        DType::F32,
        DType::F16,
        DType::Q4_0,
        DType::Q8_0,
        DType::Q4_K,
    ] {
        for n in [1i64, 128, 256, 512] {
            let (m, k) = (4096i64, 14336i64);
            let name = format!(
                "MUL_MAT(type_a={ta},type_b=f32,m={m},n={n},k={k},bs=[1,1],nr=[1,1],per_b=[0,1,2,3])"
            );
            let flops = 2.0 * (m * n * k) as f64;
            c.push_perf(Op::MulMat, name, Work::Flops(flops), move |b| {
                let a = b.input(ta, &[k, m])?;
                let x = b.input(DType::F32, &[k, n])?;
                b.g.mul_mat(a, x)
            });
        }
    }
}

/// The mat-vecs of one decoded token of a 1b Llama (hidden 2048, feed
/// forward 8192, 8 KV heads of 64, vocabulary 128256) as a q4_0 file
/// holds them: q4_0 attention and feed-forward weights, and the q6_K
/// output matrix (215 MB, the largest single read of a token).
fn decode_perf(c: &mut Catalogue) {
    let shapes = [
        (DType::Q4_0, 2048i64, 2048i64),
        (DType::Q4_0, 512, 2048),
        (DType::Q4_0, 8192, 2048),
        (DType::Q4_0, 2048, 8192),
        (DType::Q6_K, 128256, 2048),
    ];
    for (ta, m, k) in shapes {
        let name = format!(
            "MUL_MAT(type_a={ta},type_b=f32,m={m},n=1,k={k},bs=[1,1],nr=[1,1],per_b=[0,1,2,3])"
        );
        // Bandwidth bound: reported as GB/s.
        c.push_perf(Op::MulMat, name, Work::Bytes, move |b| {
            let a = b.input(ta, &[k, m])?;
            let x = b.input(DType::F32, &[k, 1])?;
            b.g.mul_mat(a, x)
        });
    }
}

/// Rows per expert in the grids: test-backend-ops uses 512, which costs our
/// reference 27 s on the first grid alone; 64 keeps every other parameter.
const GRID_EXPERT_ROWS: i64 = 64;

/// Rows per expert for the later grid's cases with hundreds of experts or
/// 2,048-4,096-long rows (ggml: 128 to 4,096 rows, up to 268 M weights).
const GRID_MANY_EXPERT_ROWS: i64 = 8;

/// The later grid's rows of 2,048 and 4,096 (its many-expert and 1e5
/// cases) are divided by this (its 512-long Q3_K stand-in rows are 256): quantizing 128 experts' k-quant weights
/// dominates otherwise.
const GRID_LONG_ROW_DIV: i64 = 4;

/// Tokens of the later grid's 8,192-token cases.
const GRID_MANY_TOKENS: i64 = 1024;

/// test-backend-ops' MUL_MAT_ID loops: 512 (here [`GRID_EXPERT_ROWS`]) x
/// 256 experts, 4 or 8 of them,
/// 1, 2 or 4 used per token, b shared or per expert, 1, 32 or 129 tokens,
/// for its base types (those backplane has, plus BF16 and Q6_K standing in
/// for its MXFP4 and IQ2_XXS), its other types at 4 experts / 2 used, and
/// its large experts x tokens case. The ids are views of a [n_mats, n]
/// tensor, as there.
fn mul_mat_id_ggml_grid(c: &mut Catalogue) {
    for b_shared in [false, true] {
        push_mm_id(c, DType::F16, 16, 16, b_shared, 32, 1024, 16);
    }
    let base = [
        DType::F32,
        DType::F16,
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q4_K,
        DType::BF16,
        DType::Q6_K,
    ];
    for ta in base {
        for n_mats in [4, 8] {
            for n_used in [1, 2, 4] {
                for b_shared in [false, true] {
                    for n in [1, 32, 129] {
                        push_mm_id(c, ta, n_mats, n_used, b_shared, GRID_EXPERT_ROWS, n, 256);
                    }
                }
            }
        }
    }
    for ta in [
        DType::Q5_0,
        DType::Q5_1,
        DType::Q2_K,
        DType::Q3_K,
        DType::Q5_K,
    ] {
        for n in [1, 32] {
            push_mm_id(c, ta, 4, 2, false, GRID_EXPERT_ROWS, n, 256);
        }
    }
}

/// The later test-backend-ops' MUL_MAT_ID loops (llama.cpp 0c1e5709): the
/// base loop at 1, 4, 5, 17, 32 and 129 tokens over its 11 base types,
/// token counts around the mat-mat tile (15-17, 31-33, 47-49) with every
/// expert used, experts that get no rows, experts strided by more rows
/// than they use, many tokens over 2 or 16 experts, 1-65-long rows, rows
/// of 2,880, 512 and 1,024 experts, src1 magnitudes of 1e5 (past f16),
/// each type at 3 blocks per row and the other types at 4 experts / 2
/// used. Types backplane lacks have stand-ins (docs/conformance.md):
/// Q1_0 -> Q5_0, Q2_0 -> Q5_1, MXFP4 -> BF16, NVFP4 -> Q2_K, IQ2_XXS ->
/// Q6_K, IQ2_XS -> Q5_K, IQ3_S -> Q3_K, TQ1_0 -> Q2_K, and the IQ panel
/// types -> the K-quants and Q4_0/Q5_0/Q8_0.
fn mul_mat_id_ggml_grid_edges(c: &mut Catalogue) {
    let rows = GRID_EXPERT_ROWS;
    let many = GRID_MANY_EXPERT_ROWS;
    for ta in [DType::Q4_K, DType::Q5_K, DType::F16] {
        for n in [1, 15, 16, 17, 31, 32, 33, 47, 48, 49] {
            push_mm_id(c, ta, 4, 4, false, rows, n, 256);
        }
        push_mm_id(c, ta, 8, 1, false, rows, 1, 256);
    }
    push_mm_id_ext(c, DType::F32, 4, 2, false, 8, 1, 64, 1.0, 64);
    push_mm_id_ext(c, DType::F16, 4, 2, false, 8, 16, 64, 1.0, 64);
    for b_shared in [false, true] {
        push_mm_id(c, DType::F16, 16, 16, b_shared, 32, 1024, 16);
        push_mm_id(c, DType::F16, 2, 2, b_shared, 32, GRID_MANY_TOKENS, 64);
        push_mm_id(c, DType::F16, 16, 16, b_shared, 50, 200, 64);
        push_mm_id(c, DType::BF16, 16, 16, b_shared, 32, 1024, 16);
        push_mm_id(c, DType::BF16, 16, 16, b_shared, 50, 200, 64);
    }
    push_mm_id(c, DType::Q6_K, 1, 1, false, 1, GRID_MANY_TOKENS, 4096);
    for k in [1, 63, 65] {
        push_mm_id(c, DType::F16, 1, 1, false, 8, 16, k);
    }
    let div = GRID_LONG_ROW_DIV;
    push_mm_id(c, DType::BF16, 32, 2, false, many, 32, 2880);
    for n in [1, 5, 64, 300] {
        push_mm_id(c, DType::Q3_K, 512, 10, false, many, n, 256);
        push_mm_id(c, DType::Q4_0, 512, 10, false, many, n, 128);
        push_mm_id(c, DType::Q3_K, 1024, 10, false, many, n, 256);
        push_mm_id(c, DType::Q4_0, 1024, 10, false, many, n, 128);
    }
    push_mm_id(c, DType::Q4_0, 32, 2, false, many, 32, 2880);
    push_mm_id(c, DType::Q2_K, 28, 10, false, many, 1, 4096 / div);
    push_mm_id(c, DType::Q2_K, 128, 8, false, many, 1, 2048 / div);
    for ta in MATMUL_TYPES {
        push_mm_id(c, ta, 4, 2, false, 64, 16, 3 * ta.block_size() as i64);
    }
    for ta in [
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
        DType::Q4_0,
        DType::Q5_0,
        DType::Q8_0,
    ] {
        push_mm_id(c, ta, 4, 4, false, 16, 10, 256);
    }
    for n in [16, 32, 64] {
        push_mm_id_ext(c, DType::Q4_K, 128, 4, false, many, n, 2048 / div, 1e5, 0);
        push_mm_id_ext(c, DType::Q8_0, 8, 2, false, rows, n, 256, 1e5, 0);
    }
    let base = [
        DType::F32,
        DType::F16,
        DType::Q8_0,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q4_K,
        DType::BF16,
        DType::Q2_K,
        DType::Q6_K,
    ];
    for ta in base {
        for n_mats in [4, 8] {
            for n_used in [1, 2, 4] {
                for b_shared in [false, true] {
                    for n in [1, 4, 5, 17, 32, 129] {
                        push_mm_id(c, ta, n_mats, n_used, b_shared, rows, n, 256);
                    }
                }
            }
        }
    }
    for ta in [
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
        DType::Q2_K,
        DType::Q3_K,
        DType::Q5_K,
        DType::Q6_K,
        DType::BF16,
    ] {
        for n in [1, 32] {
            push_mm_id(c, ta, 4, 2, false, rows, n, 256);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn push_mm_id(
    c: &mut Catalogue,
    ta: DType,
    n_mats: i64,
    n_used: i64,
    b_shared: bool,
    m: i64,
    n: i64,
    k: i64,
) {
    push_mm_id_ext(c, ta, n_mats, n_used, b_shared, m, n, k, 1.0, 0);
}

/// One test_mul_mat_id case: src1 uniform in [-amax, amax); for m_v > 0
/// the experts are a view of a tensor with m_v rows per expert.
#[allow(clippy::too_many_arguments)]
fn push_mm_id_ext(
    c: &mut Catalogue,
    ta: DType,
    n_mats: i64,
    n_used: i64,
    b_shared: bool,
    m: i64,
    n: i64,
    k: i64,
    amax: f32,
    m_v: i64,
) {
    let extra = if amax != 1.0 || m_v != 0 {
        format!(",amax={amax},m_v={m_v}")
    } else {
        String::new()
    };
    let name = format!(
        "MUL_MAT_ID(type_a={ta},type_b=f32,n_mats={n_mats},n_used={n_used},b={b_shared},m={m},n={n},k={k},ids=view{extra})"
    );
    let flops = 2.0 * (m * n_used * n * k) as f64;
    c.push_work(
        Op::MulMatId,
        name,
        NMSE_MATMUL,
        Work::Flops(flops),
        move |b| {
            let a = if m_v == 0 {
                b.input(ta, &[k, m, n_mats])?
            } else {
                let a = b.input(ta, &[k, m_v, n_mats])?;
                let nb = b.g.desc(a).nb;
                b.g.view(a, &[k, m, n_mats], &[nb[1], nb[2]], 0)?
            };
            let mut ids = b.input_with(DType::I32, &[n_mats, n], Fill::DistinctIndex(n_mats))?;
            if n_used != n_mats {
                let nb = b.g.desc(ids).nb;
                ids = b.g.view(ids, &[n_used, n], &[nb[1]], 0)?;
            }
            let e_b = if b_shared { 1 } else { n_used };
            let x = b.input_with(DType::F32, &[k, e_b, n], Fill::Uniform(-amax, amax))?;
            b.g.mul_mat_id(a, x, ids)
        },
    );
}
