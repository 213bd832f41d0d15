//! SSM_CONV and SSM_SCAN: hand-picked Mamba shapes, then test-backend-ops'
//! grids.

use backplane::{DType, Op};

use super::{Catalogue, NMSE_DEFAULT};
use crate::case::Fill;

/// Adds the family's cases.
pub(super) fn add(c: &mut Catalogue) {
    ssm(c);
    c.grid(ssm_conv_ggml_grid);
    c.grid(ssm_ggml_grid);
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

/// test-backend-ops' SSM_CONV loop (Mamba d_conv 3 and 4 over 1024 to
/// 2048 channels, 1 or 5 tokens, 1 or 4 sequences).
fn ssm_conv_ggml_grid(c: &mut Catalogue) {
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
fn ssm_ggml_grid(c: &mut Catalogue) {
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
