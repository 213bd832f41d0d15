//! Index ops (argmax, argsort, top-k), convolution and state-space ops.

use backplane::{Conv2dParams, DType, Op, SortOrder};

use super::{Catalogue, NMSE_DEFAULT, bound_for, dims};
use crate::case::{Fill, Work};

/// Index outputs must match exactly.
const EXACT: f64 = 0.0;

pub(super) fn add(c: &mut Catalogue) {
    index_ops(c);
    conv(c);
    ssm(c);
    c.grid(ggml_grid);
    c.grid(index_ggml_grid_later);
    c.grid(ssm_ggml_grid_later);
}

/// Heads of the later SSM_SCAN cases with 80 or 128 heads over 256-512
/// tokens (ggml's Nemotron and Mamba-2 multi-chunk cases: up to 671 M
/// state updates, minutes of f64 reference).
const GRID_SSM_HEADS: i64 = 8;
/// Head size divisor of the later SSM_SCAN cases past 4 M state updates
/// (the multi-chunk ones): our f64 reference takes about 30 ns per update.
const GRID_SSM_HEAD_DIM_DIV: i64 = 8;

/// The later test-backend-ops' SSM_CONV and SSM_SCAN cases (llama.cpp
/// 0c1e5709). SSM_CONV: d_conv 3, 4 and 9 over 1,024-2,048 channels, one
/// window, two, 4 sequences and 64-token runs. SSM_SCAN: Mamba-1, Mamba-2
/// decode and SSD multi-chunk shapes, x/B/C as overlapping views of one
/// tensor, weak decay; [`GRID_SSM_HEADS`] heads where ggml has 80 or 128
/// at 256+ tokens and an eighth of the head size past 4 M state updates
/// ([`GRID_SSM_HEAD_DIM_DIV`]); its K > 1 (snapshot) cases are left out, as
/// backplane's SSM_SCAN keeps the final state only.
fn ssm_ggml_grid_later(c: &mut Catalogue) {
    for d_conv in [3i64, 4, 9] {
        for d_inner in [1024i64, 1536, 2048] {
            for (len, n_s) in [
                (d_conv, 1i64),
                (2 * d_conv, 1),
                (d_conv, 4),
                (d_conv - 1 + 64, 1),
                (d_conv - 1 + 64, 4),
            ] {
                let name = format!(
                    "SSM_CONV(type=f32,ne_a=[{len},{d_inner},{n_s},1],ne_b=[{d_conv},{d_inner},1,1])"
                );
                c.push(Op::SsmConv, name, NMSE_DEFAULT, move |b| {
                    let sx = b.input(DType::F32, &[len, d_inner, n_s])?;
                    let k = b.input(DType::F32, &[d_conv, d_inner])?;
                    b.g.ssm_conv(sx, k)
                });
            }
        }
    }
    let h = GRID_SSM_HEADS;
    // (d_state, head_dim, n_head, n_group, n_seq_tokens, n_seqs, xbc_overlap, weak_decay)
    for (d_state, head_dim, n_head, n_group, n_tok, n_seqs, overlap, weak) in [
        (16i64, 1i64, 1024i64, 1i64, 32i64, 4i64, false, false),
        (96, 64, 128, 8, 1, 1, false, false),
        (96, 64, 16, 8, 300, 2, false, true),
        (128, 64, 16, 2, 32, 4, false, false),
        (256, 64, 8, 2, 32, 4, false, false),
        (128, 128, 4, 4, 16, 2, true, false),
        (128, 80, h, 1, 256, 1, false, false),
        (128, 80, h, 1, 512, 1, false, false),
        (128, 64, h, 8, 300, 2, false, false),
        (128, 64, 16, 2, 64, 4, false, false),
        (128, 64, 16, 2, 65, 2, false, false),
        (128, 64, 16, 2, 128, 2, false, false),
        (128, 64, 16, 2, 128, 2, false, true),
    ] {
        let head_dim = if d_state * head_dim * n_head * n_tok * n_seqs > 4 << 20 {
            head_dim / GRID_SSM_HEAD_DIM_DIV
        } else {
            head_dim
        };
        let name = format!(
            "SSM_SCAN(type=f32,d_state={d_state},head_dim={head_dim},n_head={n_head},n_group={n_group},n_seq_tokens={n_tok},n_seqs={n_seqs},xbc_overlap={},K=1,weak_decay={})",
            overlap as i32, weak as i32
        );
        c.push(Op::SsmScan, name, NMSE_DEFAULT, move |b| {
            let s = b.input(DType::F32, &[d_state, head_dim, n_head, n_seqs])?;
            let (x, bm, cm) = if overlap {
                let xbc = b.input(DType::F32, &[d_state, n_head, n_tok, 2 * n_seqs])?;
                let nb = b.g.desc(xbc).nb;
                let st = [nb[1], nb[2], nb[3]];
                let x =
                    b.g.view(xbc, &[head_dim, n_head, n_tok, n_seqs], &st, nb[3])?;
                let bm = b.g.view(xbc, &[d_state, n_group, n_tok, n_seqs], &st, 0)?;
                let cm =
                    b.g.view(xbc, &[d_state, n_group, n_tok, n_seqs], &st, 2 * nb[3])?;
                (x, bm, cm)
            } else {
                let x = b.input(DType::F32, &[head_dim, n_head, n_tok, n_seqs])?;
                let bm = b.input(DType::F32, &[d_state, n_group, n_tok, n_seqs])?;
                let cm = b.input(DType::F32, &[d_state, n_group, n_tok, n_seqs])?;
                (x, bm, cm)
            };
            let dt = b.input(DType::F32, &[n_head, n_tok, n_seqs])?;
            let a_ne0 = if head_dim > 1 { 1 } else { d_state };
            let decay = if weak {
                Fill::Uniform(-0.02, -0.005)
            } else {
                Fill::Uniform(-1.0, -0.5)
            };
            let a = b.input_with(DType::F32, &[a_ne0, n_head], decay)?;
            let ids = b.input_with(DType::I32, &[n_seqs], Fill::DistinctIndex(n_seqs))?;
            b.g.ssm_scan(s, x, dt, a, bm, cm, ids)
        });
    }
}

/// test-backend-ops' ARGMAX shapes and SSM_CONV loop (Mamba d_conv 3 and 4
/// over 1024 to 2048 channels, 1 or 5 tokens, 1 or 4 sequences).
fn ggml_grid(c: &mut Catalogue) {
    for ne in [
        [32i64, 1, 1, 1],
        [100, 10, 1, 1],
        [1024, 10, 1, 1],
        [1024, 12, 1, 1],
        [2000, 10, 1, 1],
        [5438, 3, 1, 1],
    ] {
        let name = format!("ARGMAX(type=f32,ne=[{}],distinct)", dims(&ne));
        c.push(Op::Argmax, name, EXACT, move |b| {
            let x = b.input_with(DType::F32, &ne, Fill::Distinct)?;
            b.g.argmax(x)
        });
    }
    for d_conv in [3i64, 4] {
        for d_inner in [1024i64, 1536, 2048] {
            for (len, n_s) in [(4i64, 1i64), (8, 1), (4, 4)] {
                let name = format!(
                    "SSM_CONV(type=f32,ne_a=[{len},{d_inner},{n_s},1],ne_b=[{d_conv},{d_inner},1,1])"
                );
                c.push(Op::SsmConv, name, NMSE_DEFAULT, move |b| {
                    let sx = b.input(DType::F32, &[len, d_inner, n_s])?;
                    let k = b.input(DType::F32, &[d_conv, d_inner])?;
                    b.g.ssm_conv(sx, k)
                });
            }
        }
    }
}

/// Longest power-of-two row of the later ARGSORT grid ([`capped_row`]);
/// ggml goes to 2^20.
const GRID_SORT_ROW_LOG2: u32 = 16;
/// Longest power-of-two row of the later TOP_K grid ([`capped_row`]);
/// ggml goes to 2^19.
const GRID_TOPK_ROW_LOG2: u32 = 14;
/// The later TOP_K grid's vocabulary-sized rows (ggml: 202,048 and
/// 151,936) are divided by this.
const GRID_TOPK_VOCAB_DIV: i64 = 8;

/// Row length standing in for 2^p in a grid whose rows stop at 2^max:
/// past it, 2^max + 2 (p - max), so every step stays a distinct case.
fn capped_row(p: u32, max: u32) -> i64 {
    if p <= max {
        1 << p
    } else {
        (1 << max) + 2 * (p - max) as i64
    }
}

/// The later test-backend-ops' ARGMAX, ARGSORT and TOP_K loops (llama.cpp
/// 0c1e5709): argsort rows of every power of two from 4 to 2^20 (here
/// to 2^16, [`GRID_SORT_ROW_LOG2`]) and one less, rows around 1024 and 2048, 2 x 8 x 8192 (group selection) and
/// 2048 x 512; top-k for every k in {1, 2, 3, 7, 15, 100, 500, 1023, 9999}
/// that fits rows of 2^i and 2^i + 11 (i < 20; rows here stop near 2^14,
/// [`GRID_TOPK_ROW_LOG2`]), vocabulary-sized rows (151,936, 202,048, an
/// eighth of them here) and large k. Its ties cases are left out, as its
/// support listing leaves them out.
fn index_ggml_grid_later(c: &mut Catalogue) {
    fn argmax(c: &mut Catalogue, ne: [i64; 4]) {
        let name = format!("ARGMAX(type=f32,ne=[{}],distinct)", dims(&ne));
        c.push(Op::Argmax, name, EXACT, move |b| {
            let x = b.input_with(DType::F32, &ne, Fill::Distinct)?;
            b.g.argmax(x)
        });
    }
    fn argsort(c: &mut Catalogue, ne: [i64; 4], order: SortOrder) {
        let name = format!(
            "ARGSORT(type=f32,ne=[{}],order={})",
            dims(&ne),
            order as i32
        );
        c.push(Op::Argsort, name, EXACT, move |b| {
            let x = b.input_with(DType::F32, &ne, Fill::Distinct)?;
            b.g.argsort(x, order)
        });
    }
    fn top_k(c: &mut Catalogue, ne: [i64; 4], k: i64) {
        let name = format!("TOP_K(type=f32,ne=[{}],k={k},ties=0)", dims(&ne));
        c.push(Op::TopK, name, EXACT, move |b| {
            let x = b.input_with(DType::F32, &ne, Fill::Distinct)?;
            b.g.top_k(x, k)
        });
    }
    for ne in [
        [32i64, 1, 1, 1],
        [32, 513, 1, 1],
        [100, 10, 1, 1],
        [1024, 10, 1, 1],
        [1024, 12, 1, 1],
        [2000, 10, 1, 1],
        [5438, 3, 1, 1],
    ] {
        argmax(c, ne);
    }
    for order in [SortOrder::Asc, SortOrder::Desc] {
        // ggml's power-of-two loop passes no order (both passes sort
        // ascending, half its cases repeat); here it sorts both ways.
        for p in 2..=20 {
            let i = capped_row(p, GRID_SORT_ROW_LOG2);
            argsort(c, [i - 1, 1, 1, 1], order);
            argsort(c, [i, 1, 1, 1], order);
        }
        for ne in [
            [16i64, 10, 10, 10],
            [60, 10, 10, 10],
            [1023, 2, 1, 3],
            [1024, 2, 1, 3],
            [1025, 2, 1, 3],
            [1025, 256, 1, 1],
            [2047, 2, 1, 3],
            [2048, 2, 1, 3],
            [2049, 2, 1, 3],
            [2, 8, 8192, 1],
            [2048, 512, 1, 1],
        ] {
            argsort(c, ne, order);
        }
    }
    for n in 1..5i64 {
        for k in 1..=n {
            top_k(c, [n, 2, 1, 3], k);
        }
    }
    for p in 0..20 {
        let i = capped_row(p, GRID_TOPK_ROW_LOG2);
        for k in [1i64, 2, 3, 7, 15, 100, 500, 1023, 9999] {
            if k <= 1 << p {
                top_k(c, [i, 1, 1, 1], k);
                top_k(c, [i + 11, 1, 2, 1], k);
            }
        }
    }
    for k in [4i64, 8, 16, 32] {
        for nrows in [1i64, 8, 16] {
            top_k(c, [202048 / GRID_TOPK_VOCAB_DIV, nrows, 1, 1], k);
            top_k(c, [151936 / GRID_TOPK_VOCAB_DIV, nrows, 1, 1], k);
            top_k(c, [8192, nrows, 1, 1], k);
            top_k(c, [8193, nrows, 1, 1], k);
        }
    }
    for k in [1i64, 2, 3, 7, 15] {
        for ne in [
            [16i64, 10, 10, 10],
            [60, 10, 10, 10],
            [1023, 2, 1, 3],
            [1024, 2, 1, 3],
            [1025, 2, 1, 3],
            [16384, 1, 1, 1],
            [2047, 2, 1, 3],
            [2048, 2, 1, 3],
            [2049, 2, 1, 3],
        ] {
            top_k(c, ne, k);
        }
    }
    for (ne, k) in [
        ([1024i64, 1, 1, 1], 1024i64),
        ([2048, 2, 1, 1], 1024),
        ([4096, 1, 1, 1], 2048),
        ([8192, 2, 1, 1], 2051),
        ([33024, 1, 1, 1], 2051),
        ([33024, 4, 1, 1], 2051),
    ] {
        top_k(c, ne, k);
    }
}

fn index_ops(c: &mut Catalogue) {
    for ne in [
        [32, 10, 1, 1],
        [1, 1, 1, 1],
        [4096, 3, 1, 1],
        [1000, 7, 1, 1],
    ] {
        let name = format!("ARGMAX(type=f32,ne=[{}])", dims(&ne));
        c.push(Op::Argmax, name, EXACT, move |b| {
            let x = b.input_with(DType::F32, &ne, Fill::Distinct)?;
            b.g.argmax(x)
        });
    }
    for ne in [
        [16, 10, 10, 10],
        [1, 1, 1, 1],
        [60, 10, 1, 1],
        [1025, 2, 1, 1],
        [2048, 2, 1, 1],
    ] {
        for order in [SortOrder::Asc, SortOrder::Desc] {
            let name = format!(
                "ARGSORT(type=f32,ne=[{}],order={})",
                dims(&ne),
                order as i32
            );
            c.push(Op::Argsort, name, EXACT, move |b| {
                let x = b.input_with(DType::F32, &ne, Fill::Distinct)?;
                b.g.argsort(x, order)
            });
        }
        for k in [1i64, 4, 40, 1000] {
            if k > ne[0] {
                continue;
            }
            let name = format!("TOP_K(type=f32,ne=[{}],k={k})", dims(&ne));
            c.push(Op::TopK, name, EXACT, move |b| {
                let x = b.input_with(DType::F32, &ne, Fill::Distinct)?;
                b.g.top_k(x, k)
            });
        }
    }
}

fn conv(c: &mut Catalogue) {
    let params = [
        Conv2dParams {
            s0: 1,
            s1: 1,
            p0: 0,
            p1: 0,
            d0: 1,
            d1: 1,
        },
        Conv2dParams {
            s0: 1,
            s1: 1,
            p0: 1,
            p1: 1,
            d0: 1,
            d1: 1,
        },
        Conv2dParams {
            s0: 2,
            s1: 3,
            p0: 1,
            p1: 0,
            d0: 1,
            d1: 2,
        },
    ];
    for kt in [DType::F32, DType::F16] {
        for p in params {
            for (w, h, cin, n, kw, kh, cout) in [
                (10i64, 8i64, 3i64, 2i64, 3i64, 3i64, 4i64),
                (19, 17, 5, 1, 5, 2, 3),
                (4, 4, 1, 1, 1, 1, 1),
            ] {
                let name = format!(
                    "CONV_2D(type_kernel={kt},input=[{w},{h},{cin},{n}],kernel=[{kw},{kh},{cin},{cout}],s=[{},{}],p=[{},{}],d=[{},{}])",
                    p.s0, p.s1, p.p0, p.p1, p.d0, p.d1
                );
                let ow = backplane::conv_output_size(w, kw, p.s0, p.p0, p.d0);
                let oh = backplane::conv_output_size(h, kh, p.s1, p.p1, p.d1);
                if ow <= 0 || oh <= 0 {
                    continue;
                }
                let flops = 2.0 * (ow * oh * cout * n * kw * kh * cin) as f64;
                let bound = if kt == DType::F16 { 1e-6 } else { NMSE_DEFAULT };
                c.push_work(Op::Conv2d, name, bound, Work::Flops(flops), move |b| {
                    let k = b.input(kt, &[kw, kh, cin, cout])?;
                    let x = b.input(DType::F32, &[w, h, cin, n])?;
                    b.g.conv_2d(k, x, p)
                });
            }
            for out in [DType::F32, DType::F16] {
                let (w, h, cin, n, kw, kh) = (12i64, 9i64, 3i64, 2i64, 3i64, 3i64);
                let name = format!(
                    "IM2COL(type_kernel={kt},dst={out},input=[{w},{h},{cin},{n}],kernel=[{kw},{kh},{cin}],s=[{},{}],p=[{},{}],d=[{},{}],2d=1)",
                    p.s0, p.s1, p.p0, p.p1, p.d0, p.d1
                );
                c.push(Op::Im2col, name, bound_for(out), move |b| {
                    let k = b.input(kt, &[kw, kh, cin, 4])?;
                    let x = b.input(DType::F32, &[w, h, cin, n])?;
                    b.g.im2col(k, x, p, true, out)
                });
                let name = format!(
                    "IM2COL(type_kernel={kt},dst={out},input=[{w},{cin},{n}],kernel=[{kw},{cin}],s0={},p0={},d0={},2d=0)",
                    p.s0, p.p0, p.d0
                );
                c.push(Op::Im2col, name, bound_for(out), move |b| {
                    let k = b.input(kt, &[kw, cin, 4])?;
                    let x = b.input(DType::F32, &[w, cin, n])?;
                    b.g.im2col(k, x, p, false, out)
                });
            }
        }
    }
}

fn ssm(c: &mut Catalogue) {
    for (d_conv, d_inner, n_t, n_s) in [(4i64, 64i64, 1i64, 1i64), (4, 96, 7, 2), (3, 16, 33, 3)] {
        let name =
            format!("SSM_CONV(type=f32,d_conv={d_conv},d_inner={d_inner},n_t={n_t},n_s={n_s})");
        c.push(Op::SsmConv, name, NMSE_DEFAULT, move |b| {
            let sx = b.input(DType::F32, &[d_conv - 1 + n_t, d_inner, n_s])?;
            let k = b.input(DType::F32, &[d_conv, d_inner])?;
            b.g.ssm_conv(sx, k)
        });
    }
    // (d_state, head_dim, n_head, n_group, n_tok, n_seqs, mamba1)
    for (d_state, head_dim, n_head, n_group, n_tok, n_seqs, mamba1) in [
        (16i64, 1i64, 64i64, 1i64, 4i64, 2i64, true),
        (16, 1, 32, 1, 1, 1, true),
        (32, 8, 4, 1, 5, 2, false),
        (64, 16, 8, 2, 3, 3, false),
    ] {
        let name = format!(
            "SSM_SCAN(type=f32,d_state={d_state},head_dim={head_dim},n_head={n_head},n_group={n_group},n_seq_tokens={n_tok},n_seqs={n_seqs})"
        );
        c.push(Op::SsmScan, name, NMSE_DEFAULT, move |b| {
            let s = b.input(DType::F32, &[d_state, head_dim, n_head, n_seqs])?;
            let x = b.input(DType::F32, &[head_dim, n_head, n_tok, n_seqs])?;
            let dt = b.input(DType::F32, &[n_head, n_tok, n_seqs])?;
            let a_ne0 = if mamba1 { d_state } else { 1 };
            let a = b.input_with(DType::F32, &[a_ne0, n_head], Fill::Uniform(-1.0, -0.1))?;
            let bm = b.input(DType::F32, &[d_state, n_group, n_tok, n_seqs])?;
            let cm = b.input(DType::F32, &[d_state, n_group, n_tok, n_seqs])?;
            let ids = b.input_with(DType::I32, &[n_seqs], Fill::DistinctIndex(n_seqs))?;
            b.g.ssm_scan(s, x, dt, a, bm, cm, ids)
        });
    }
}
