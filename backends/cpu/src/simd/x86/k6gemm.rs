//! Packed GEMM for repacked q6_K weights against q8_K activations (AVX-512
//! VNNI), rows as lanes: the prefill form of [`super::repacked`]'s q6_K
//! tile.
//!
//! Packing rebuilds, per group of eight rows and super-block, what the
//! tile rebuilds for every four columns: `d` as f32, the sixteen 8-bit
//! sub-block scales as 32-bit lanes, and the 6-bit quants (0..63) as
//! bytes, vector `4s + t` holding weights `16s + 4t .. + 4` of every row.
//! The micro-kernel takes every column of a call per loaded weight vector:
//! `dpbusd` per 16-weight sub-block, `scale * (dot - 32 * bsum)` in 32-bit
//! lanes, one float step per super-block.

use std::arch::x86_64::*;

use super::repacked::{
    K8_BSUMS, K8_BYTES, K8_QS, Q6_GROUP_BLOCK, Q6_QUANTS, Q6_SCALES, lane_byte, q6_quants,
};
use super::{first, load_pair, load128, load256, store_lanes, store_lanes16};

/// Rows per packed group.
pub const MR: usize = 8;
/// Packed bytes per K element of a group (2,592 used of 2,816 per
/// super-block).
pub const GROUP_BYTES: usize = 11;

/// Packed bytes per super-block of a group and the offsets inside it.
const SB: usize = 256 * GROUP_BYTES;
const OFF_D: usize = 0;
const OFF_SC: usize = 32;
const OFF_Q: usize = OFF_SC + 16 * 32;

/// [`crate::simd::PackFn`] for q6_K weights in the repacked layout of
/// [`crate::repack`].
///
/// # Safety
/// As [`crate::simd::PackFn`], with `a` at a repacked group and `rows` a
/// multiple of eight; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_q6_kx8(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    dst: *mut u8,
) {
    // SAFETY: forwarded contract.
    unsafe { pack::<1>(a, lda, rows, k0, kc, dst) }
}

/// [`pack_q6_kx8`] for [`panel_q6_k_512`]: groups of 16 rows, two
/// eight-row groups with their 32-byte vectors interleaved (one 64-byte
/// load at twice a vector's offset holds all 16 rows), a missing second
/// eight rows zero.
///
/// # Safety
/// As [`pack_q6_kx8`].
pub unsafe fn pack_q6_kx8_x2(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    dst: *mut u8,
) {
    // SAFETY: forwarded contract.
    unsafe { pack::<2>(a, lda, rows, k0, kc, dst) }
}

/// Packs repacked q6_K groups in groups of `S` eight-row groups.
///
/// # Safety
/// As [`pack_q6_kx8`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack<const S: usize>(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    dst: *mut u8,
) {
    let (sb0, nsb) = (k0 / 256, kc / 256);
    for g in 0..rows.div_ceil(S * MR) * S {
        for i in 0..nsb {
            let src = a.wrapping_add(g * MR * lda + (sb0 + i) * Q6_GROUP_BLOCK);
            let base = dst.wrapping_add(((g / S * nsb + i) * S) * SB);
            let out = |off: usize| base.wrapping_add(off * S + 32 * (g % S));
            if g * MR >= rows {
                for v in (0..SB).step_by(32) {
                    // SAFETY: `base` has S * SB bytes for this super-block.
                    unsafe { _mm256_storeu_si256(out(v).cast(), _mm256_setzero_si256()) };
                }
                continue;
            }
            // SAFETY: the group covers super-block sb0 + i; `base` has
            // S * SB bytes for this group and super-block.
            unsafe {
                _mm256_storeu_ps(out(OFF_D).cast(), _mm256_cvtph_ps(load128(src)));
                for t in 0..4 {
                    let v = load256(src.add(Q6_SCALES + 32 * t));
                    let lanes = [
                        lane_byte::<0>(v),
                        lane_byte::<1>(v),
                        lane_byte::<2>(v),
                        lane_byte::<3>(v),
                    ];
                    for (b, l) in lanes.iter().enumerate() {
                        _mm256_storeu_si256(out(OFF_SC + 32 * (4 * t + b)).cast(), *l);
                    }
                }
                for half in 0..2 {
                    for c in 0..8 {
                        let at = src.add(Q6_QUANTS + 96 * (8 * half + c));
                        let q = q6_quants(load256(at), load256(at.add(32)), load256(at.add(64)));
                        for (kq, v) in q.iter().enumerate() {
                            // Weights 128 half + 32 kq + 4c: sub-block s, slice t.
                            let (s, t) = (8 * half + 2 * kq + c / 4, c % 4);
                            _mm256_storeu_si256(out(OFF_Q + 32 * (4 * s + t)).cast(), *v);
                        }
                    }
                }
            }
        }
    }
}

/// [`crate::simd::PanelFn`] for packed q6_K groups (AVX-512 VNNI).
///
/// # Safety
/// As [`crate::simd::PanelFn`] with at most 4 columns; the CPU must have
/// AVX2, FMA, F16C and AVX-512 VNNI and VL.
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
pub unsafe fn panel_q6_k_vnni(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    _s: &[*const f32],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: forwarded contract, four columns at a time.
    unsafe { super::by_four_columns!(columns(kc, a, b, c, mr, acc)) }
}

/// [`panel_q6_k_vnni`] for `N` columns.
///
/// # Safety
/// As [`panel_q6_k_vnni`], with `b.len() == c.len() == N`.
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
unsafe fn columns<const N: usize>(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: the caller passes N pointers of each kind.
    let (bp, cp): ([*const u8; N], [*mut f32; N]) = unsafe { (first(b), first(c)) };
    let mut sum = [_mm256_setzero_ps(); N];
    for i in 0..kc / 256 {
        let blk = a.wrapping_add(i * SB);
        // SAFETY: the group holds super-block i, every column covers it.
        unsafe {
            let mut isum = [_mm256_setzero_si256(); N];
            for s in 0..16 {
                let mut dot = [_mm256_setzero_si256(); N];
                for t in 0..4 {
                    let w = load256(blk.add(OFF_Q + 32 * (4 * s + t)));
                    for j in 0..N {
                        let y = bp[j].add(i * K8_BYTES + K8_QS + 16 * s + 4 * t);
                        let yv = _mm256_set1_epi32(y.cast::<i32>().read_unaligned());
                        dot[j] = _mm256_dpbusd_epi32(dot[j], w, yv);
                    }
                }
                let scale = load256(blk.add(OFF_SC + 32 * s));
                for j in 0..N {
                    let bsum = bp[j]
                        .add(i * K8_BYTES + K8_BSUMS + 2 * s)
                        .cast::<i16>()
                        .read_unaligned();
                    let t = _mm256_sub_epi32(dot[j], _mm256_set1_epi32(32 * i32::from(bsum)));
                    isum[j] = _mm256_add_epi32(isum[j], _mm256_mullo_epi32(t, scale));
                }
            }
            let d = _mm256_loadu_ps(blk.add(OFF_D).cast());
            for j in 0..N {
                let db = bp[j].add(i * K8_BYTES).cast::<f32>().read_unaligned();
                let dd = _mm256_mul_ps(d, _mm256_set1_ps(db));
                sum[j] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(isum[j]), sum[j]);
            }
        }
    }
    for j in 0..N {
        // SAFETY: c[j] covers mr outputs.
        unsafe { store_lanes(cp[j], sum[j], mr, acc) };
    }
}

/// [`crate::simd::PanelFn`] for q6_K groups of 16 rows
/// ([`pack_q6_kx8_x2`]) on 512-bit vectors: the operations of
/// [`panel_q6_k_vnni`] on both eight-row halves at once, bit-identical.
///
/// # Safety
/// As [`crate::simd::PanelFn`] with at most 4 columns at a time; the CPU
/// must have AVX-512F, BW and VNNI.
pub unsafe fn panel_q6_k_512(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    _s: &[*const f32],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: forwarded contract, four columns at a time.
    unsafe { super::by_four_columns!(columns_512(kc, a, b, c, mr, acc)) }
}

/// [`panel_q6_k_512`] for `N` columns.
///
/// # Safety
/// As [`panel_q6_k_512`], with `b.len() == c.len() == N`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn columns_512<const N: usize>(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: the caller passes N pointers of each kind.
    let (bp, cp): ([*const u8; N], [*mut f32; N]) = unsafe { (first(b), first(c)) };
    let mut sum = [_mm512_setzero_ps(); N];
    for i in 0..kc / 256 {
        let blk = a.wrapping_add(i * 2 * SB);
        // SAFETY: the group holds super-block i, every column covers it.
        unsafe {
            let mut isum = [_mm512_setzero_si512(); N];
            for s in 0..16 {
                let mut dot = [_mm512_setzero_si512(); N];
                for t in 0..4 {
                    let w = load_pair(blk, OFF_Q + 32 * (4 * s + t));
                    for j in 0..N {
                        let y = bp[j].add(i * K8_BYTES + K8_QS + 16 * s + 4 * t);
                        let yv = _mm512_set1_epi32(y.cast::<i32>().read_unaligned());
                        dot[j] = _mm512_dpbusd_epi32(dot[j], w, yv);
                    }
                }
                let scale = load_pair(blk, OFF_SC + 32 * s);
                for j in 0..N {
                    let bsum = bp[j]
                        .add(i * K8_BYTES + K8_BSUMS + 2 * s)
                        .cast::<i16>()
                        .read_unaligned();
                    let t = _mm512_sub_epi32(dot[j], _mm512_set1_epi32(32 * i32::from(bsum)));
                    isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(t, scale));
                }
            }
            let d = _mm512_castsi512_ps(load_pair(blk, OFF_D));
            for j in 0..N {
                let db = bp[j].add(i * K8_BYTES).cast::<f32>().read_unaligned();
                let dd = _mm512_mul_ps(d, _mm512_set1_ps(db));
                sum[j] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(isum[j]), sum[j]);
            }
        }
    }
    for j in 0..N {
        // SAFETY: c[j] covers mr outputs.
        unsafe { store_lanes16(cp[j], sum[j], mr, acc) };
    }
}

#[cfg(test)]
mod tests {
    use backplane_abi::{DType, TensorDesc};

    use super::*;
    use crate::repack::Repack;

    use crate::simd::test_values as values;

    /// Packed and run as a GEMM, two repacked groups give the q6_K tile's
    /// results on the same layout bit for bit, for every column count.
    #[test]
    fn panel_equals_the_repacked_tile() {
        if !super::super::available() || !super::super::vnni() {
            return;
        }
        let (k, rows) = (512usize, 16usize);
        let t = TensorDesc::new(DType::Q6_K, [k as i64, rows as i64, 1, 1]);
        let r = Repack::for_tensor(&t).unwrap();
        let mut ggml = vec![0u8; t.nbytes() as usize];
        for (row, out) in ggml.chunks_exact_mut(r.row_bytes()).enumerate() {
            backplane_quant::quantize_row(DType::Q6_K, &values(k, row as u32 + 3), out).unwrap();
        }
        let mut repacked = vec![0u8; ggml.len()];
        r.write(&mut repacked, 0, &ggml);
        let mut packed = vec![0u8; rows * k * GROUP_BYTES];
        // SAFETY: two repacked groups of k weights into two packed groups.
        unsafe {
            pack_q6_kx8(
                repacked.as_ptr(),
                r.row_bytes(),
                rows,
                0,
                k,
                packed.as_mut_ptr(),
            )
        };
        let cols: Vec<Vec<u8>> = (0..5)
            .map(|j| {
                let mut q = vec![0u8; DType::Q8_K.row_size(k).unwrap()];
                backplane_quant::quantize_row(DType::Q8_K, &values(k, 70 + j), &mut q).unwrap();
                q
            })
            .collect();
        for n in 1..=5 {
            let b: Vec<*const u8> = cols[..n].iter().map(|c| c.as_ptr()).collect();
            for g in 0..rows / MR {
                let mut want = vec![[0f32; MR]; n];
                let mut got = vec![[0f32; MR]; n];
                let cw: Vec<*mut f32> = want.iter_mut().map(|w| w.as_mut_ptr()).collect();
                let cg: Vec<*mut f32> = got.iter_mut().map(|w| w.as_mut_ptr()).collect();
                // SAFETY: one group of k weights in each layout, n columns.
                unsafe {
                    let group = repacked[g * MR * r.row_bytes()..].as_ptr();
                    for (bj, cj) in b.chunks(4).zip(cw.chunks(4)) {
                        super::super::repacked::tile_q6_kx8_vnni(k, group, 0, MR, bj, cj, false);
                    }
                    let panel = packed[g * k * GROUP_BYTES..].as_ptr();
                    panel_q6_k_vnni(k, panel, &b, &[], &cg, MR, false);
                }
                assert_eq!(got, want, "group {g}, {n} columns");
                assert!(want[0].iter().any(|&x| x != 0.0));
            }
        }
        if !super::super::kgemm512::available() {
            return;
        }
        // The 512-bit panel over 16-row groups (the last one half empty).
        for live in [16, 8] {
            let mut wide = vec![0u8; 2 * MR * k * GROUP_BYTES];
            // SAFETY: `live` repacked rows of k weights into one group.
            unsafe {
                let a = repacked.as_ptr();
                pack_q6_kx8_x2(a, r.row_bytes(), live, 0, k, wide.as_mut_ptr());
            }
            for n in 1..=5 {
                let b: Vec<*const u8> = cols[..n].iter().map(|c| c.as_ptr()).collect();
                let mut want = vec![[0f32; 2 * MR]; n];
                let mut got = vec![[0f32; 2 * MR]; n];
                let cg: Vec<*mut f32> = got.iter_mut().map(|w| w.as_mut_ptr()).collect();
                // SAFETY: packed groups of k weights, n columns.
                unsafe {
                    for g in 0..live / MR {
                        let cw: Vec<*mut f32> = want
                            .iter_mut()
                            .map(|w| w.as_mut_ptr().add(MR * g))
                            .collect();
                        let panel = packed[g * k * GROUP_BYTES..].as_ptr();
                        panel_q6_k_vnni(k, panel, &b, &[], &cw, MR, false);
                    }
                    panel_q6_k_512(k, wide.as_ptr(), &b, &[], &cg, live, false);
                }
                assert_eq!(got, want, "512-bit, {live} rows, {n} columns");
            }
        }
    }
}
