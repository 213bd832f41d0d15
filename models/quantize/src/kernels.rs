//! Row quantizers for q4_K, q5_K and q6_K that give exactly the bytes of
//! ggml's reference quantizers (`backplane_quant::quantize_row`), faster.
//!
//! The reference spends nearly all its time in the per-group scale searches
//! (`make_qkx2_quants` for the 8 groups of 32 of q4_K/q5_K,
//! `make_qx_quants` for the 16 groups of 16 of q6_K), each a chain of
//! sequential f32 sums that cannot be reordered without changing the
//! result. The groups are independent, though: here every group of a
//! super-block runs in its own SIMD lane, each lane doing the reference's
//! operations in the reference's order (no fused multiply-adds, no
//! reassociation), so each lane's result is the scalar result bit for bit.
//! The searches' branches become per-lane selects. What follows the search
//! (6-bit scales, final rounding, packing) is scalar, as in the reference.
//!
//! The code is written on fixed-size lane arrays that the compiler
//! vectorizes; on x86-64 it is compiled a second time with AVX2 and picked
//! at run time. The tests compare every path with the reference on random
//! and degenerate blocks.

use backplane_abi::DType;
use backplane_quant::{QuantError, f16};

/// Values per super-block.
const QK_K: usize = 256;
/// ggml's `GROUP_MAX_EPS`.
const GROUP_MAX_EPS: f32 = 1e-15;

/// Quantizes `src` into `dst` as `dtype`: the fast path for q4_K, q5_K and
/// q6_K, the reference for every other type (and for any length mismatch,
/// which the reference reports).
pub(crate) fn quantize_rows(dtype: DType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    let fast = matches!(dtype, DType::Q4_K | DType::Q5_K | DType::Q6_K)
        && dtype.row_size(src.len()) == Some(dst.len());
    if !fast {
        return backplane_quant::quantize_row(dtype, src, dst);
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        unsafe { super_blocks_avx2(dtype, src, dst) };
        return Ok(());
    }
    super_blocks(dtype, src, dst);
    Ok(())
}

/// [`super_blocks`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn super_blocks_avx2(dtype: DType, src: &[f32], dst: &mut [u8]) {
    super_blocks(dtype, src, dst);
}

/// Quantizes whole super-blocks; lengths are checked by the caller.
#[inline(always)]
fn super_blocks(dtype: DType, src: &[f32], dst: &mut [u8]) {
    let blocks = src
        .chunks_exact(QK_K)
        .zip(dst.chunks_exact_mut(dtype.type_size()));
    match dtype {
        DType::Q4_K => blocks.for_each(|(x, out)| q4_k_block(x, out)),
        DType::Q5_K => blocks.for_each(|(x, out)| q5_k_block(x, out)),
        DType::Q6_K => blocks.for_each(|(x, out)| q6_k_block(x, out)),
        _ => {}
    }
}

/// ggml's `nearest_int`: round half to even via the 1.5·2²³ trick.
#[inline(always)]
fn nearest_int(x: f32) -> i32 {
    ((x + 12_582_912.0).to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// The result of `make_qkx2_quants` for the 8 groups of a super-block.
struct GroupScales {
    /// Quant of value `i` of group `j` at `[i][j]` (0..=nmax, as f32).
    l: [[f32; 8]; 32],
    /// Each group's scale.
    scale: [f32; 8],
    /// Each group's min (the amount subtracted, >= 0).
    min: [f32; 8],
}

/// `make_qkx2_quants(32, nmax, ..., rmin, 0.1, nstep, use_mad = false)` on
/// the 8 groups of 32 of one super-block, one group per lane, with ggml's
/// q4_K/q5_K weights `sqrt(mean(x²)) + |x|`.
#[inline(always)]
fn qkx2_groups(x: &[f32], nmax: i32, rmin: f32, nstep: i32) -> GroupScales {
    const RDELTA: f32 = 0.1;
    let mut xt = [[0f32; 8]; 32];
    let mut wt = [[0f32; 8]; 32];
    let mut sum_x2 = [0f32; 8];
    for (j, group) in x.chunks_exact(32).enumerate() {
        for (i, &v) in group.iter().enumerate() {
            xt[i][j] = v;
        }
    }
    for row in &xt {
        for j in 0..8 {
            sum_x2[j] += row[j] * row[j];
        }
    }
    let mut av_x = [0f32; 8];
    for j in 0..8 {
        av_x[j] = (sum_x2[j] / 32.0).sqrt();
    }
    for (w, row) in wt.iter_mut().zip(&xt) {
        for j in 0..8 {
            w[j] = av_x[j] + row[j].abs();
        }
    }

    let mut min = xt[0];
    let mut max = xt[0];
    let mut sum_w = wt[0];
    let mut sum_x = [0f32; 8];
    for j in 0..8 {
        sum_x[j] = sum_w[j] * xt[0][j];
    }
    for i in 1..32 {
        for j in 0..8 {
            let v = xt[i][j];
            if v < min[j] {
                min[j] = v;
            }
            if v > max[j] {
                max[j] = v;
            }
            sum_w[j] += wt[i][j];
            sum_x[j] += wt[i][j] * v;
        }
    }
    for m in &mut min {
        if *m > 0.0 {
            *m = 0.0;
        }
    }
    let flat_min = min;
    let mut flat = [false; 8];
    for j in 0..8 {
        flat[j] = max[j] == min[j];
    }

    let nmax_f = nmax as f32;
    let mut iscale = [0f32; 8];
    let mut scale = [0f32; 8];
    for j in 0..8 {
        iscale[j] = nmax_f / (max[j] - min[j]);
        scale[j] = 1.0 / iscale[j];
    }
    let mut l = [[0f32; 8]; 32];
    let mut best_error = [0f32; 8];
    for i in 0..32 {
        for j in 0..8 {
            let q = nearest_int(iscale[j] * (xt[i][j] - min[j])).clamp(0, nmax) as f32;
            l[i][j] = q;
            let diff = scale[j] * q + min[j] - xt[i][j];
            best_error[j] += wt[i][j] * (diff * diff);
        }
    }

    let mut laux = [[0f32; 8]; 32];
    for step in 0..=nstep {
        let numerator = rmin + RDELTA * step as f32 + nmax_f;
        for j in 0..8 {
            iscale[j] = numerator / (max[j] - min[j]);
        }
        let mut sum_l = [0f32; 8];
        let mut sum_l2 = [0f32; 8];
        let mut sum_xl = [0f32; 8];
        for i in 0..32 {
            for j in 0..8 {
                let q = nearest_int(iscale[j] * (xt[i][j] - min[j])).clamp(0, nmax) as f32;
                laux[i][j] = q;
                let w = wt[i][j];
                sum_l[j] += w * q;
                sum_l2[j] += w * q * q;
                sum_xl[j] += w * q * xt[i][j];
            }
        }
        let mut this_scale = [0f32; 8];
        let mut this_min = [0f32; 8];
        let mut solvable = [false; 8];
        for j in 0..8 {
            let det = sum_w[j] * sum_l2[j] - sum_l[j] * sum_l[j];
            solvable[j] = det > 0.0;
            let mut s = (sum_w[j] * sum_xl[j] - sum_x[j] * sum_l[j]) / det;
            let mut m = (sum_l2[j] * sum_x[j] - sum_l[j] * sum_xl[j]) / det;
            if m > 0.0 {
                m = 0.0;
                s = sum_xl[j] / sum_l2[j];
            }
            this_scale[j] = s;
            this_min[j] = m;
        }
        if !solvable.contains(&true) {
            continue;
        }
        let mut cur_error = [0f32; 8];
        for i in 0..32 {
            for j in 0..8 {
                let diff = this_scale[j] * laux[i][j] + this_min[j] - xt[i][j];
                cur_error[j] += wt[i][j] * (diff * diff);
            }
        }
        let mut better = [false; 8];
        for j in 0..8 {
            better[j] = solvable[j] && cur_error[j] < best_error[j];
            if better[j] {
                best_error[j] = cur_error[j];
                scale[j] = this_scale[j];
                min[j] = this_min[j];
            }
        }
        if better.contains(&true) {
            for (li, ai) in l.iter_mut().zip(&laux) {
                for j in 0..8 {
                    if better[j] {
                        li[j] = ai[j];
                    }
                }
            }
        }
    }

    let mut out_min = [0f32; 8];
    for j in 0..8 {
        if flat[j] {
            scale[j] = 0.0;
            out_min[j] = -flat_min[j];
        } else {
            out_min[j] = -min[j];
        }
    }
    if flat.contains(&true) {
        for li in &mut l {
            for j in 0..8 {
                if flat[j] {
                    li[j] = 0.0;
                }
            }
        }
    }
    GroupScales {
        l,
        scale,
        min: out_min,
    }
}

/// ggml's packing of 6-bit scale `ls` and min `lm` of group `j` (q4_K/q5_K).
#[inline(always)]
fn set_scale_min_k4(scales: &mut [u8], j: usize, ls: u8, lm: u8) {
    if j < 4 {
        scales[j] = ls;
        scales[j + 4] = lm;
    } else {
        scales[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
        scales[j - 4] |= (ls >> 4) << 6;
        scales[j] |= (lm >> 4) << 6;
    }
}

/// ggml's unpacking of group `j`'s 6-bit scale and min.
#[inline(always)]
fn get_scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// The shared q4_K/q5_K super-block: searches the group scales, writes
/// `d`, `dmin` and the 12 scale bytes into `head` (16 bytes), and returns
/// the final quants (0..=nmax) against the rounded scales.
#[inline(always)]
fn qkx_super_block(x: &[f32], nmax: i32, rmin: f32, nstep: i32, head: &mut [u8]) -> [u8; QK_K] {
    let groups = qkx2_groups(x, nmax, rmin, nstep);
    let mut max_scale = 0f32;
    let mut max_min = 0f32;
    for j in 0..8 {
        if groups.scale[j] > max_scale {
            max_scale = groups.scale[j];
        }
        if groups.min[j] > max_min {
            max_min = groups.min[j];
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let (dm, scales) = head.split_at_mut(4);
    scales.fill(0);
    for j in 0..8 {
        // As in C: nearest_int's result is stored in a byte, then clamped.
        let ls = (nearest_int(inv_scale * groups.scale[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * groups.min[j]) as u8).min(63);
        set_scale_min_k4(scales, j, ls, lm);
    }
    let d = f16::from_f32(max_scale / 63.0);
    let dmin = f16::from_f32(max_min / 63.0);
    dm[0..2].copy_from_slice(&d.to_bits().to_le_bytes());
    dm[2..4].copy_from_slice(&dmin.to_bits().to_le_bytes());

    let mut l = [0u8; QK_K];
    for j in 0..8 {
        for i in 0..32 {
            l[32 * j + i] = groups.l[i][j] as u8;
        }
    }
    for j in 0..8 {
        let (sc, m) = get_scale_min_k4(j, scales);
        let dj = d.to_f32() * sc as f32;
        if dj == 0.0 {
            continue;
        }
        let dmj = dmin.to_f32() * m as f32;
        for i in 0..32 {
            l[32 * j + i] = nearest_int((x[32 * j + i] + dmj) / dj).clamp(0, nmax) as u8;
        }
    }
    l
}

/// One q4_K block (144 bytes: d, dmin, scales[12], qs[128]).
#[inline(always)]
fn q4_k_block(x: &[f32], out: &mut [u8]) {
    let (head, qs) = out.split_at_mut(16);
    let l = qkx_super_block(x, 15, -1.0, 20, head);
    for (n, q) in (0..QK_K).step_by(64).zip(qs.chunks_exact_mut(32)) {
        for (i, b) in q.iter_mut().enumerate() {
            *b = l[n + i] | (l[n + i + 32] << 4);
        }
    }
}

/// One q5_K block (176 bytes: d, dmin, scales[12], qh[32], qs[128]).
#[inline(always)]
fn q5_k_block(x: &[f32], out: &mut [u8]) {
    let (head, rest) = out.split_at_mut(16);
    let l = qkx_super_block(x, 31, -0.5, 15, head);
    let (qh, qs) = rest.split_at_mut(32);
    qh.fill(0);
    let (mut m1, mut m2) = (1u8, 2u8);
    for (n, ql) in (0..QK_K).step_by(64).zip(qs.chunks_exact_mut(32)) {
        for j in 0..32 {
            let mut l1 = l[n + j];
            if l1 > 15 {
                l1 -= 16;
                qh[j] |= m1;
            }
            let mut l2 = l[n + j + 32];
            if l2 > 15 {
                l2 -= 16;
                qh[j] |= m2;
            }
            ql[j] = l1 | (l2 << 4);
        }
        m1 <<= 2;
        m2 <<= 2;
    }
}

/// `make_qx_quants(16, 32, x, L, rmse_type = 1, NULL)` on the 16 groups of
/// 16 of a q6_K super-block, one group per lane: returns each group's scale
/// and its quants (0..64, offset by 32) at `[i][j]`.
#[inline(always)]
fn qx_groups(x: &[f32]) -> ([f32; 16], [[f32; 16]; 16]) {
    const NMAX: i32 = 32;
    let mut xt = [[0f32; 16]; 16];
    for (j, group) in x.chunks_exact(16).enumerate() {
        for (i, &v) in group.iter().enumerate() {
            xt[i][j] = v;
        }
    }
    let mut max = [0f32; 16];
    let mut amax = [0f32; 16];
    for row in &xt {
        for j in 0..16 {
            let a = row[j].abs();
            if a > amax[j] {
                amax[j] = a;
                max[j] = row[j];
            }
        }
    }
    let mut iscale = [0f32; 16];
    for j in 0..16 {
        iscale[j] = -(NMAX as f32) / max[j];
    }
    let mut l = [[0f32; 16]; 16];
    let mut sumlx = [0f32; 16];
    let mut suml2 = [0f32; 16];
    for (li, row) in l.iter_mut().zip(&xt) {
        for j in 0..16 {
            let v = row[j];
            let q = nearest_int(iscale[j] * v).clamp(-NMAX, NMAX - 1) as f32;
            li[j] = q;
            let w = v * v;
            sumlx[j] += w * v * q;
            suml2[j] += w * q * q;
        }
    }
    let mut scale = [0f32; 16];
    let mut best = [0f32; 16];
    for j in 0..16 {
        scale[j] = if suml2[j] != 0.0 {
            sumlx[j] / suml2[j]
        } else {
            0.0
        };
        best[j] = scale[j] * sumlx[j];
    }
    let mut laux = [[0f32; 16]; 16];
    for step in -9..=9 {
        if step == 0 {
            continue;
        }
        let numerator = -(NMAX as f32 + 0.1 * step as f32);
        for j in 0..16 {
            iscale[j] = numerator / max[j];
        }
        let mut slx = [0f32; 16];
        let mut sl2 = [0f32; 16];
        for (ai, row) in laux.iter_mut().zip(&xt) {
            for j in 0..16 {
                let v = row[j];
                let q = nearest_int(iscale[j] * v).clamp(-NMAX, NMAX - 1) as f32;
                ai[j] = q;
                let w = v * v;
                slx[j] += w * v * q;
                sl2[j] += w * q * q;
            }
        }
        let mut better = [false; 16];
        for j in 0..16 {
            better[j] = sl2[j] > 0.0 && slx[j] * slx[j] > best[j] * sl2[j];
            if better[j] {
                scale[j] = slx[j] / sl2[j];
                best[j] = scale[j] * slx[j];
            }
        }
        if better.contains(&true) {
            for (li, ai) in l.iter_mut().zip(&laux) {
                for j in 0..16 {
                    if better[j] {
                        li[j] = ai[j];
                    }
                }
            }
        }
    }
    for j in 0..16 {
        let zero = amax[j] < GROUP_MAX_EPS;
        if zero {
            scale[j] = 0.0;
        }
        for li in &mut l {
            // Quants are stored offset by nmax; an all-zero group stores 0.
            li[j] = if zero { 0.0 } else { li[j] + NMAX as f32 };
        }
    }
    (scale, l)
}

/// One q6_K block (210 bytes: ql[128], qh[64], scales[16], d).
#[inline(always)]
fn q6_k_block(x: &[f32], out: &mut [u8]) {
    let (scales, lt) = qx_groups(x);
    let mut max_scale = 0f32;
    let mut max_abs_scale = 0f32;
    for &s in &scales {
        if s.abs() > max_abs_scale {
            max_abs_scale = s.abs();
            max_scale = s;
        }
    }
    if max_abs_scale < GROUP_MAX_EPS {
        out.fill(0);
        return;
    }
    let (ql, rest) = out.split_at_mut(128);
    let (qh, rest) = rest.split_at_mut(64);
    let (block_scales, d_bytes) = rest.split_at_mut(16);
    let iscale = -128.0 / max_scale;
    let d = f16::from_f32(1.0 / iscale);
    d_bytes.copy_from_slice(&d.to_bits().to_le_bytes());
    for (s, &sc) in block_scales.iter_mut().zip(&scales) {
        *s = nearest_int(iscale * sc).min(127) as i8 as u8;
    }
    let mut l = [0u8; QK_K];
    for j in 0..16 {
        for i in 0..16 {
            l[16 * j + i] = lt[i][j] as u8;
        }
    }
    for j in 0..16 {
        let dj = d.to_f32() * f32::from(block_scales[j] as i8);
        if dj == 0.0 {
            continue;
        }
        for i in 0..16 {
            l[16 * j + i] = (nearest_int(x[16 * j + i] / dj).clamp(-32, 31) + 32) as u8;
        }
    }
    for (n, (ql, qh)) in (0..QK_K)
        .step_by(128)
        .zip(ql.chunks_exact_mut(64).zip(qh.chunks_exact_mut(32)))
    {
        for i in 0..32 {
            let q1 = l[n + i];
            let q2 = l[n + i + 32];
            let q3 = l[n + i + 64];
            let q4 = l[n + i + 96];
            ql[i] = (q1 & 0xF) | ((q3 & 0xF) << 4);
            ql[i + 32] = (q2 & 0xF) | ((q4 & 0xF) << 4);
            qh[i] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic test values: SplitMix64 bits mapped to (-1, 1).
    fn values(seed: u64, n: usize) -> Vec<f32> {
        (0..n as u64)
            .map(|i| {
                let mut z = (seed << 32 ^ i).wrapping_add(0x9e37_79b9_7f4a_7c15);
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^= z >> 31;
                ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    /// Rows that exercise the searches' corners: zero, constant positive
    /// and negative groups, tiny and huge magnitudes, outliers, sparse.
    fn test_rows() -> Vec<Vec<f32>> {
        let mut rows = Vec::new();
        for seed in 0..40u64 {
            let scale = [1.0, 0.02, 1e-3, 300.0, 1e-20][seed as usize % 5];
            let mut row: Vec<f32> = values(seed, 4 * QK_K).iter().map(|v| v * scale).collect();
            match seed % 8 {
                1 => row[..32].fill(0.0),
                2 => row[32..64].fill(0.5),
                3 => row[64..96].fill(-0.25),
                4 => row.iter_mut().step_by(37).for_each(|v| *v *= 50.0),
                5 => row.iter_mut().enumerate().for_each(|(i, v)| {
                    if i % 5 != 0 {
                        *v = 0.0
                    }
                }),
                6 => row.iter_mut().for_each(|v| *v = v.abs()),
                7 => row[..QK_K].fill(0.0),
                _ => {}
            }
            rows.push(row);
        }
        rows.push(vec![0.0; QK_K]);
        rows.push(vec![-0.0; QK_K]);
        rows.push(vec![1.0; QK_K]);
        rows.push(vec![-3.0; QK_K]);
        rows
    }

    fn check_matches_reference(dtype: DType) {
        for (n, row) in test_rows().iter().enumerate() {
            let size = dtype.row_size(row.len()).expect("whole blocks");
            let mut reference = vec![0u8; size];
            backplane_quant::quantize_row(dtype, row, &mut reference).expect("reference");
            let mut fast = vec![0u8; size];
            quantize_rows(dtype, row, &mut fast).expect("fast");
            assert_eq!(fast, reference, "{dtype} row {n} (dispatched path)");
            let mut portable = vec![0u8; size];
            super_blocks(dtype, row, &mut portable);
            assert_eq!(portable, reference, "{dtype} row {n} (portable path)");
        }
    }

    #[test]
    fn q4_k_matches_the_reference_quantizer_byte_for_byte() {
        check_matches_reference(DType::Q4_K);
    }

    #[test]
    fn q5_k_matches_the_reference_quantizer_byte_for_byte() {
        check_matches_reference(DType::Q5_K);
    }

    #[test]
    fn q6_k_matches_the_reference_quantizer_byte_for_byte() {
        check_matches_reference(DType::Q6_K);
    }

    #[test]
    fn other_types_and_bad_lengths_go_to_the_reference() {
        let row = values(7, 64);
        let mut out = vec![0u8; DType::Q8_0.row_size(64).expect("size")];
        quantize_rows(DType::Q8_0, &row, &mut out).expect("q8_0");
        let mut reference = vec![0u8; out.len()];
        backplane_quant::quantize_row(DType::Q8_0, &row, &mut reference).expect("reference");
        assert_eq!(out, reference);
        let mut short = vec![0u8; 10];
        assert!(quantize_rows(DType::Q4_K, &values(1, 256), &mut short).is_err());
    }
}
