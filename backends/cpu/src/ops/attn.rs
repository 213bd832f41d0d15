//! FLASH_ATTN_EXT: `softmax(scale * Q K^T + slope * mask) V` per query row
//! with an online (running max) softmax, as ggml's CPU kernel, plus logit
//! softcap, attention sinks and grouped-query broadcast of K/V heads.
//!
//! Q is f32; K and V may be any float or legacy quant type: each work item
//! converts the K/V rows of its head to f32 once, then every query of the
//! item runs on f32 with f32 accumulation, keys a block at a time (the
//! block's scores, then their exponentials in one vector pass). Except f16
//! K/V with fewer than 64 queries, where ggml's CPU kernel (and so the
//! reference logits of llama.cpp) rounds Q to f16 and keeps the V·softmax
//! sum in f16, one key at a time: that path is followed step for step.

use backplane_abi::{DType, MAX_SRC, TensorDesc};

use super::norm::alibi_slope;
use super::tensor::{Tensor, expect_type, par_range, src_type};
use crate::error::CpuError;
use crate::ops::NodeCtx;

/// K/V types the kernel decodes: all of FLASH_ATTN_EXT's.
const KV_TYPES: &[DType] = &DType::ATTENTION_KV_TYPES;

/// Queries per work item.
const Q_BLOCK: usize = 32;

/// Keys per block of the online softmax.
const KEY_BLOCK: usize = 64;

/// ggml's CPU flash-attention query tile: from this many queries on it
/// computes in f32 throughout.
const GGML_FA_TILE_Q: usize = 64;

/// One query row over every key of `keys` / `vals` (dense rows of
/// `qrow.len()` and `acc.len()` values) exactly as ggml's CPU kernel takes
/// f16 K/V with fewer than [`GGML_FA_TILE_Q`] queries: Q rounded to f16,
/// one key at a time (keys whose mask is -inf skipped), the running
/// V·softmax sum `acc` kept in f16 (rounded after every rescale and every
/// added value). Returns the running (max, sum) of the online softmax.
#[allow(clippy::too_many_arguments)]
fn attend_like_ggml_f16(
    ops: &crate::simd::vecmath::VecOps,
    qrow: &mut [f32],
    keys: &[f32],
    vals: &[f32],
    mask_row: Option<(&[f32], f32)>,
    scale: f32,
    softcap: f32,
    acc: &mut [f32],
) -> (f32, f32) {
    qrow.iter_mut()
        .for_each(|x| *x = crate::simd::vecmath::round_f16(*x));
    let mut max = f32::NEG_INFINITY;
    let mut sum = 0f32;
    // One dot product per key: the order of its sums is the one that
    // reproduces ggml's scores (a block-wise `dots` moves q4_K_M logits by
    // 2e-4 through the f16 roundings that follow).
    for (j, (key, val)) in keys
        .chunks_exact(qrow.len())
        .zip(vals.chunks_exact(acc.len()))
        .enumerate()
    {
        let mv = mask_row.map_or(0.0, |(m, slope)| slope * m[j]);
        if mv == f32::NEG_INFINITY {
            continue;
        }
        let mut s = (ops.dot)(qrow, key) * scale;
        if softcap != 0.0 {
            s = softcap * s.tanh();
        }
        s += mv;
        let (ms, vs) = if s > max {
            let ms = (max - s).exp();
            max = s;
            (ops.scale_f16)(acc, ms);
            (ms, 1.0)
        } else {
            (1.0, (s - max).exp())
        };
        (ops.mad_f16)(acc, vs, val);
        sum = sum * ms + vs;
    }
    (max, sum)
}

/// Whether the attention kernel accepts these operands: K/V in every type
/// of FLASH_ATTN_EXT's, with dense rows (the op contract has checked the
/// shapes, the mask and the sinks).
pub fn supports(src: &[Option<&TensorDesc>; MAX_SRC]) -> Result<(), String> {
    expect_type("k", src_type(src, 1)?, KV_TYPES)?;
    expect_type("v", src_type(src, 2)?, KV_TYPES)?;
    let (k, v) = (src[1].ok_or("missing k")?, src[2].ok_or("missing v")?);
    if !k.is_contiguous_rows() || !v.is_contiguous_rows() {
        return Err("k and v rows must be dense".into());
    }
    Ok(())
}

/// Runs one FLASH_ATTN_EXT node.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let q = Tensor::src(ctx, 0)?;
    let k = Tensor::src(ctx, 1)?;
    let v = Tensor::src(ctx, 2)?;
    let mask = Tensor::opt_src(ctx, 3)?;
    let sinks = Tensor::opt_src(ctx, 4)?;
    let d = Tensor::dst(ctx)?;
    let mut scale = ctx.dst.param_f32(0);
    let max_bias = ctx.dst.param_f32(1);
    let softcap = ctx.dst.param_f32(2);
    if softcap != 0.0 {
        scale /= softcap;
    }
    let (dk, dv, n_kv) = (k.ne(0), v.ne(0), k.ne(1));
    let (n_q, n_head, n_batch) = (q.ne(1), q.ne(2), q.ne(3));
    let (n_head_kv, n_batch_kv) = (k.ne(2), k.ne(3));
    let (rk2, rk3) = (n_head / n_head_kv, n_batch / n_batch_kv);
    let q_blocks = n_q.div_ceil(Q_BLOCK);
    // K and V can be used in place when they are dense f32 rows.
    let k_direct = k.dtype == DType::F32 && k.nb(1) == dk * 4;
    let v_direct = v.dtype == DType::F32 && v.nb(1) == dv * 4;
    // ggml's CPU kernel takes its f16 path (f16 Q, f16 V accumulator) for
    // f16 K/V when fewer than GGML_FA_TILE_Q (64) queries come at once.
    let f16_accumulator = k.dtype == DType::F16 && v.dtype == DType::F16 && n_q < GGML_FA_TILE_Q;
    // Work items: (query block, head, batch), heads sharing a K/V head adjacent.
    let items = q_blocks * n_head * n_batch;
    par_range(ctx, items, Q_BLOCK.min(n_q) * n_kv * (dk + dv), |range| {
        let mut kbuf: Vec<f32> = Vec::new();
        let mut vbuf: Vec<f32> = Vec::new();
        // The K/V head whose rows are in kbuf / vbuf, and how many rows.
        let mut loaded: Option<(usize, usize, usize)> = None;
        let ops = crate::simd::kernels().vec;
        let mut scores = [0f32; KEY_BLOCK];
        let per_item = Q_BLOCK.min(n_q);
        let mut qrows = vec![0f32; per_item * dk];
        let mut accs = vec![0f32; per_item * dv];
        let mut maxs = vec![0f32; per_item];
        let mut sums = vec![0f32; per_item];
        let mut mbuf = vec![
            0f32;
            if mask.is_some() {
                Q_BLOCK.min(n_q) * n_kv
            } else {
                0
            }
        ];
        for item in range {
            let qb = item % q_blocks;
            let iq2 = (item / q_blocks) % n_head;
            let iq3 = item / (q_blocks * n_head);
            let (ik2, ik3) = (iq2 / rk2, iq3 / rk3);
            let queries = qb * Q_BLOCK..((qb + 1) * Q_BLOCK).min(n_q);
            // SAFETY: every offset below indexes in-bounds rows of its
            // tensor (shapes checked in supports); dst rows (one per query
            // and head) belong to this item alone.
            unsafe {
                // The block's mask rows first: keys past the last one any
                // query can see (a padded KV cache) are never loaded.
                let mut live = n_kv;
                if let Some(m) = &mask {
                    live = 0;
                    for (row, iq1) in mbuf.chunks_exact_mut(n_kv).zip(queries.clone()) {
                        m.load_f32(
                            m.row_offset(iq1, iq2 % m.ne(2), iq3 % m.ne(3)),
                            m.nb(0),
                            row,
                        );
                        let seen = row.iter().rposition(|&x| x != f32::NEG_INFINITY);
                        live = live.max(seen.map_or(0, |j| j + 1));
                    }
                }
                let kbase = ik2 * k.nb(2) + ik3 * k.nb(3);
                let vbase = ik2 * v.nb(2) + ik3 * v.nb(3);
                let have = match loaded {
                    Some((h2, h3, n)) if (h2, h3) == (ik2, ik3) => n,
                    _ => 0,
                };
                if (!k_direct || !v_direct) && have < live {
                    if !k_direct {
                        kbuf.resize(n_kv * dk, 0.0);
                        for (j, row) in kbuf.chunks_exact_mut(dk).enumerate().take(live).skip(have)
                        {
                            k.load_f32(kbase + j * k.nb(1), k.nb(0), row);
                        }
                    }
                    if !v_direct {
                        vbuf.resize(n_kv * dv, 0.0);
                        for (j, row) in vbuf.chunks_exact_mut(dv).enumerate().take(live).skip(have)
                        {
                            v.load_f32(vbase + j * v.nb(1), v.nb(0), row);
                        }
                    }
                    loaded = Some((ik2, ik3, live));
                }
                let keys: &[f32] = if k_direct {
                    k.slice(kbase, live * dk)
                } else {
                    &kbuf[..live * dk]
                };
                let vals: &[f32] = if v_direct {
                    v.slice(vbase, live * dv)
                } else {
                    &vbuf[..live * dv]
                };
                let slope = alibi_slope(max_bias, iq2, n_head);
                let sink = sinks.as_ref().map(|s| s.get_f32(iq2 * s.nb(0)));
                let nq = queries.len();
                for (qi, iq1) in queries.clone().enumerate() {
                    let row = &mut qrows[qi * dk..(qi + 1) * dk];
                    q.load_f32(q.row_offset(iq1, iq2, iq3), q.nb(0), row);
                }
                accs[..nq * dv].fill(0.0);
                maxs[..nq].fill(f32::NEG_INFINITY);
                sums[..nq].fill(0.0);
                if f16_accumulator {
                    for qi in 0..nq {
                        let mask_row = mask
                            .is_some()
                            .then(|| (&mbuf[qi * n_kv..qi * n_kv + live], slope));
                        (maxs[qi], sums[qi]) = attend_like_ggml_f16(
                            &ops,
                            &mut qrows[qi * dk..(qi + 1) * dk],
                            keys,
                            vals,
                            mask_row,
                            scale,
                            softcap,
                            &mut accs[qi * dv..(qi + 1) * dv],
                        );
                    }
                } else {
                    // Key blocks outermost, so a block's K and V rows stay in
                    // L1 for every query of the item; per query and block: the
                    // scores, one rescale of its running sums, the softmax
                    // weights in one vector pass, then the weighted values.
                    for kb in (0..live).step_by(KEY_BLOCK) {
                        let nk = KEY_BLOCK.min(live - kb);
                        let kblock = &keys[kb * dk..(kb + nk) * dk];
                        let vblock = &vals[kb * dv..(kb + nk) * dv];
                        for qi in 0..nq {
                            let scores = &mut scores[..nk];
                            let mrow = mbuf.get(qi * n_kv + kb..qi * n_kv + kb + nk);
                            if mrow.is_some_and(|m| m.iter().all(|&x| x == f32::NEG_INFINITY)) {
                                continue;
                            }
                            (ops.dots)(&qrows[qi * dk..(qi + 1) * dk], kblock, scores);
                            let mut block_max = f32::NEG_INFINITY;
                            for (jj, sc) in scores.iter_mut().enumerate() {
                                let mv = mrow.map_or(0.0, |m| slope * m[jj]);
                                let mut x = *sc * scale;
                                if softcap != 0.0 {
                                    x = softcap * x.tanh();
                                }
                                *sc = if mv == f32::NEG_INFINITY {
                                    f32::NEG_INFINITY
                                } else {
                                    x + mv
                                };
                                block_max = block_max.max(*sc);
                            }
                            if block_max == f32::NEG_INFINITY {
                                continue;
                            }
                            let acc = &mut accs[qi * dv..(qi + 1) * dv];
                            if block_max > maxs[qi] {
                                let ms = (maxs[qi] - block_max).exp();
                                (ops.scale)(acc, ms);
                                sums[qi] *= ms;
                                maxs[qi] = block_max;
                            }
                            sums[qi] += (ops.exp_sum)(scores, maxs[qi]);
                            (ops.weighted_sum)(acc, scores, vblock);
                        }
                    }
                }
                for (qi, iq1) in queries.clone().enumerate() {
                    let acc = &mut accs[qi * dv..(qi + 1) * dv];
                    let (max, mut sum) = (maxs[qi], sums[qi]);
                    if let Some(s) = sink {
                        let (ms, vs) = if s > max {
                            ((max - s).exp(), 1.0)
                        } else {
                            (1.0, (s - max).exp())
                        };
                        (ops.scale)(acc, ms);
                        sum = sum * ms + vs;
                    }
                    let inv = if sum == 0.0 { 0.0 } else { 1.0 / sum };
                    (ops.scale)(acc, inv);
                    // dst is [Dv, H, n_q, B]: the row of (head iq2, query iq1).
                    d.store_f32(d.row_offset(iq2, iq1, iq3), d.nb(0), acc);
                }
            }
        }
        Ok(())
    })
}
