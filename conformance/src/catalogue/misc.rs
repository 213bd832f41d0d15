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
