//! Packed GEMM for q4_K weights against q8_K activations, rows as lanes
//! (the many-column form of [`super::gemv`]'s eight-row q4_K mat-vec).
//!
//! Packing unpacks, per group of eight rows and super-block, everything
//! the eight-row kernel would compute per column: `d` and `dmin` as f32,
//! each 32-weight sub-block's scales as 16-bit pairs (one madd applies it
//! to all eight rows), the mins as 16-bit pairs against pairs of q8_K
//! sub-block sums, and the quants as low / high nibble vectors, transposed
//! so that vector `t` of a 64-weight chunk holds quants `4t..4t + 4` of
//! every row. The micro-kernel then runs one column at a time over the
//! group (which stays in L1): broadcast four activation quants, `maddubs`,
//! 16-bit sums per sub-block, one `madd` with the scales.

use std::arch::x86_64::*;

use super::load256;

/// Rows per packed group.
pub const MR: usize = 8;
/// Packed bytes per K element of a group (2,496 used of 2,560 per
/// super-block).
pub const GROUP_BYTES: usize = 10;

/// Packed bytes per super-block of a group, and the offsets inside it.
pub(super) const SB: usize = 256 * GROUP_BYTES;
pub(super) const OFF_D: usize = 0;
pub(super) const OFF_DMIN: usize = 32;
pub(super) const OFF_SC: usize = 64;
pub(super) const OFF_MIN: usize = 320;
pub(super) const OFF_Q: usize = 448;

/// q4_K super-block bytes; q8_K block bytes and field offsets.
const A_BYTES: usize = 144;
pub(super) const B_BYTES: usize = 292;
pub(super) const B_QS: usize = 4;

/// A zero q4_K super-block, read for the missing rows of a last group.
static ZERO: [u8; A_BYTES] = [0; A_BYTES];

/// [`crate::simd::PackFn`] for q4_K weights.
///
/// # Safety
/// As [`crate::simd::PackFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_q4_k(a: *const u8, lda: usize, rows: usize, k0: usize, kc: usize, dst: *mut u8) {
    // SAFETY: forwarded contract.
    unsafe { pack_ggml::<1>(a, lda, rows, k0, kc, dst) }
}

/// [`crate::simd::PackFn`] for q4_K weights and the 512-bit panel of
/// [`super::kgemm512`]: groups of 16 rows, two eight-row groups
/// interleaved vector by vector ([`write_group`]).
///
/// # Safety
/// As [`crate::simd::PackFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_q4_k_x2(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    dst: *mut u8,
) {
    // SAFETY: forwarded contract.
    unsafe { pack_ggml::<2>(a, lda, rows, k0, kc, dst) }
}

/// Packs ggml-layout q4_K rows in groups of `S` eight-row groups.
///
/// # Safety
/// As [`crate::simd::PackFn`]; the CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_ggml<const S: usize>(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    dst: *mut u8,
) {
    let (sb0, nsb) = (k0 / 256, kc / 256);
    for g in 0..rows.div_ceil(S * MR) * S {
        let live = rows.saturating_sub(g * MR).min(MR);
        for i in 0..nsb {
            let row: [*const u8; MR] = std::array::from_fn(|r| {
                if r < live {
                    a.wrapping_add((g * MR + r) * lda + (sb0 + i) * A_BYTES)
                } else {
                    ZERO.as_ptr()
                }
            });
            let out = dst.wrapping_add(((g / S * nsb + i) * S) * SB);
            // SAFETY: every row pointer covers a super-block; `out` has
            // S * SB bytes for this group and super-block.
            unsafe {
                let q: [[__m256i; 8]; 4] = std::array::from_fn(|ch| {
                    let mut q: [__m256; 8] = std::array::from_fn(|r| {
                        _mm256_castsi256_ps(load256(row[r].add(16 + 32 * ch)))
                    });
                    super::gemm::transpose8(&mut q);
                    q.map(|x| _mm256_castps_si256(x))
                });
                write_group::<S>(out, g % S, &super::gemv::k4_lanes(row), &q);
            }
        }
    }
}

/// [`crate::simd::PackFn`] for q4_K weights in the repacked layout of
/// [`crate::repack`] (headers and quants already in lanes).
///
/// # Safety
/// As [`crate::simd::PackFn`], with `a` at a repacked group and `rows` a
/// multiple of eight; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_q4_kx8(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    dst: *mut u8,
) {
    // SAFETY: forwarded contract.
    unsafe { pack_repacked::<1>(a, lda, rows, k0, kc, dst) }
}

/// [`pack_q4_kx8`] for the 512-bit panel of [`super::kgemm512`] (as
/// [`pack_q4_k_x2`] lays groups out; a missing second eight rows zero).
///
/// # Safety
/// As [`pack_q4_kx8`].
pub unsafe fn pack_q4_kx8_x2(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    dst: *mut u8,
) {
    // SAFETY: forwarded contract.
    unsafe { pack_repacked::<2>(a, lda, rows, k0, kc, dst) }
}

/// Packs repacked q4_K groups in groups of `S` eight-row groups.
///
/// # Safety
/// As [`pack_q4_kx8`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_repacked<const S: usize>(
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
            let src = a.wrapping_add(g * MR * lda + (sb0 + i) * MR * A_BYTES);
            let out = dst.wrapping_add(((g / S * nsb + i) * S) * SB);
            // SAFETY: the group covers super-block sb0 + i when it holds
            // rows; `out` has S * SB bytes for this group and super-block.
            unsafe {
                if g * MR >= rows {
                    let zero = _mm256_setzero_si256();
                    let q = [[zero; 8]; 4];
                    let s = super::gemv::K4Lanes {
                        d: _mm256_setzero_ps(),
                        dmin: _mm256_setzero_ps(),
                        sc: [zero; 8],
                        mn: [zero; 4],
                    };
                    write_group::<S>(out, g % S, &s, &q);
                    continue;
                }
                let hdr: [__m256i; 4] = std::array::from_fn(|t| load256(src.add(32 * t)));
                let q: [[__m256i; 8]; 4] = std::array::from_fn(|ch| {
                    std::array::from_fn(|t| load256(src.add(128 + 32 * (8 * ch + t))))
                });
                write_group::<S>(out, g % S, &super::gemv::k4_lanes_of(hdr), &q);
            }
        }
    }
}

/// Writes one packed super-block of eight rows: headers `s` and, per
/// 64-weight chunk, the eight 4-byte slices of quants in lanes. With
/// `S == 2` the block is half `part` of a 16-row block whose 32-byte
/// vectors alternate between the two halves, so that one 64-byte load at
/// twice a vector's offset holds the vector of all 16 rows.
///
/// # Safety
/// `out` must have `S * SB` bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn write_group<const S: usize>(
    out: *mut u8,
    part: usize,
    s: &super::gemv::K4Lanes,
    q: &[[__m256i; 8]; 4],
) {
    let m4 = _mm256_set1_epi8(0x0F);
    let at = |off: usize| out.wrapping_add(off * S + 32 * part);
    // SAFETY: caller's contract.
    unsafe {
        _mm256_storeu_ps(at(OFF_D).cast(), s.d);
        _mm256_storeu_ps(at(OFF_DMIN).cast(), s.dmin);
        for (sb, v) in s.sc.iter().enumerate() {
            _mm256_storeu_si256(at(OFF_SC + 32 * sb).cast(), *v);
        }
        for (p, v) in s.mn.iter().enumerate() {
            _mm256_storeu_si256(at(OFF_MIN + 32 * p).cast(), *v);
        }
        for (ch, qc) in q.iter().enumerate() {
            let base = OFF_Q + 32 * 16 * ch;
            for (t, v) in qc.iter().enumerate() {
                let lo = _mm256_and_si256(*v, m4);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(*v), m4);
                _mm256_storeu_si256(at(base + 32 * t).cast(), lo);
                _mm256_storeu_si256(at(base + 32 * (8 + t)).cast(), hi);
            }
        }
    }
}

/// [`crate::simd::PanelFn`] for q4_K weights: the packed group of eight
/// rows times each column in turn.
///
/// # Safety
/// As [`crate::simd::PanelFn`]; the CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn panel_q4_k(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    _s: &[*const f32],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    for (&bj, &cj) in b.iter().zip(c) {
        let mut sum = _mm256_setzero_ps();
        for i in 0..kc / 256 {
            let blk = a.wrapping_add(i * SB);
            let y = bj.wrapping_add(i * B_BYTES);
            // SAFETY: the group holds super-block i, the column covers it.
            unsafe {
                let db = _mm256_set1_ps(y.cast::<f32>().read_unaligned());
                let mut isum = _mm256_setzero_si256();
                for ch in 0..4 {
                    let q = blk.add(OFF_Q + 32 * 16 * ch);
                    let bq = y.add(B_QS + 64 * ch).cast::<i32>();
                    let mut lo16 = _mm256_setzero_si256();
                    let mut hi16 = _mm256_setzero_si256();
                    for t in 0..8 {
                        let blo = _mm256_set1_epi32(bq.add(t).read_unaligned());
                        let bhi = _mm256_set1_epi32(bq.add(8 + t).read_unaligned());
                        let plo = _mm256_maddubs_epi16(load256(q.add(32 * t)), blo);
                        let phi = _mm256_maddubs_epi16(load256(q.add(32 * (8 + t))), bhi);
                        lo16 = _mm256_add_epi16(lo16, plo);
                        hi16 = _mm256_add_epi16(hi16, phi);
                    }
                    let sc = blk.add(OFF_SC + 64 * ch);
                    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(lo16, load256(sc)));
                    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(hi16, load256(sc.add(32))));
                }
                let mn: [__m256i; 4] = std::array::from_fn(|p| load256(blk.add(OFF_MIN + 32 * p)));
                let msum = super::gemv::k4_min_sum(&mn, y);
                let d = _mm256_mul_ps(_mm256_loadu_ps(blk.add(OFF_D).cast()), db);
                let dmin = _mm256_mul_ps(_mm256_loadu_ps(blk.add(OFF_DMIN).cast()), db);
                sum = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), sum);
                sum = _mm256_fnmadd_ps(dmin, _mm256_cvtepi32_ps(msum), sum);
            }
        }
        // SAFETY: c[j] covers mr outputs.
        unsafe { super::store_lanes(cj, sum, mr, acc) };
    }
}

/// [`crate::simd::PanelFn`] for q4_K weights with AVX-512 VNNI: every
/// column of the call at once, so each packed weight vector loaded is
/// used by all of them; `dpbusd` sums each sub-block in 32 bits, then one
/// 32-bit multiply by its scale. Same integer sums as [`panel_q4_k`].
///
/// # Safety
/// As [`crate::simd::PanelFn`] with at most 4 columns; the CPU must have
/// AVX2, FMA, F16C and AVX-512 VNNI and VL.
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
pub unsafe fn panel_q4_k_vnni(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    _s: &[*const f32],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: forwarded contract, four columns at a time.
    unsafe { super::by_four_columns!(columns_vnni(kc, a, b, c, mr, acc)) }
}

/// [`panel_q4_k_vnni`] for `N` columns.
///
/// # Safety
/// As [`panel_q4_k_vnni`], with `b.len() == c.len() == N`.
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
unsafe fn columns_vnni<const N: usize>(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: the caller passes N pointers of each kind.
    let (bp, cp): ([*const u8; N], [*mut f32; N]) = unsafe { (super::first(b), super::first(c)) };
    let mut sum = [_mm256_setzero_ps(); N];
    for i in 0..kc / 256 {
        let blk = a.wrapping_add(i * SB);
        // SAFETY: the group holds super-block i, every column covers it.
        unsafe {
            let mut isum = [_mm256_setzero_si256(); N];
            for ch in 0..4 {
                let q = blk.add(OFF_Q + 32 * 16 * ch);
                let mut lo = [_mm256_setzero_si256(); N];
                let mut hi = [_mm256_setzero_si256(); N];
                for t in 0..8 {
                    let (wl, wh) = (load256(q.add(32 * t)), load256(q.add(32 * (8 + t))));
                    for j in 0..N {
                        let bq = bp[j].add(i * B_BYTES + B_QS + 64 * ch).cast::<i32>();
                        let blo = _mm256_set1_epi32(bq.add(t).read_unaligned());
                        let bhi = _mm256_set1_epi32(bq.add(8 + t).read_unaligned());
                        lo[j] = _mm256_dpbusd_epi32(lo[j], wl, blo);
                        hi[j] = _mm256_dpbusd_epi32(hi[j], wh, bhi);
                    }
                }
                // The scales sit in both 16-bit halves of each lane.
                let sc = blk.add(OFF_SC + 64 * ch);
                let sl = _mm256_srli_epi32::<16>(load256(sc));
                let sh = _mm256_srli_epi32::<16>(load256(sc.add(32)));
                for j in 0..N {
                    let x = _mm256_mullo_epi32(lo[j], sl);
                    let y = _mm256_mullo_epi32(hi[j], sh);
                    isum[j] = _mm256_add_epi32(isum[j], _mm256_add_epi32(x, y));
                }
            }
            let mn: [__m256i; 4] = std::array::from_fn(|p| load256(blk.add(OFF_MIN + 32 * p)));
            let d = _mm256_loadu_ps(blk.add(OFF_D).cast());
            let dmin = _mm256_loadu_ps(blk.add(OFF_DMIN).cast());
            for j in 0..N {
                let y = bp[j].add(i * B_BYTES);
                let db = _mm256_set1_ps(y.cast::<f32>().read_unaligned());
                let msum = super::gemv::k4_min_sum(&mn, y);
                sum[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, db), _mm256_cvtepi32_ps(isum[j]), sum[j]);
                let dm = _mm256_mul_ps(dmin, db);
                sum[j] = _mm256_fnmadd_ps(dm, _mm256_cvtepi32_ps(msum), sum[j]);
            }
        }
    }
    for j in 0..N {
        // SAFETY: c[j] covers mr outputs.
        unsafe { super::store_lanes(cp[j], sum[j], mr, acc) };
    }
}

#[cfg(test)]
mod tests {
    use backplane_abi::DType;

    use super::*;

    use crate::simd::test_values as values;

    /// The VNNI panel gives the AVX2 panel's results bit for bit, for
    /// every column count of a call and a partial last group.
    #[test]
    fn vnni_panel_equals_the_avx2_panel() {
        if !super::super::available()
            || !is_x86_feature_detected!("avx512vnni")
            || !is_x86_feature_detected!("avx512vl")
        {
            return;
        }
        let (k, rows) = (512, 7);
        let lda = DType::Q4_K.row_size(k).unwrap();
        let mut a = vec![0u8; rows * lda];
        for (r, row) in a.chunks_exact_mut(lda).enumerate() {
            backplane_quant::quantize_row(DType::Q4_K, &values(k, r as u32 + 1), row).unwrap();
        }
        let mut packed = vec![0u8; k * GROUP_BYTES * MR];
        // SAFETY: `rows` rows of k weights into one packed group.
        unsafe { pack_q4_k(a.as_ptr(), lda, rows, 0, k, packed.as_mut_ptr()) };
        let cols: Vec<Vec<u8>> = (0..5)
            .map(|j| {
                let mut q = vec![0u8; DType::Q8_K.row_size(k).unwrap()];
                backplane_quant::quantize_row(DType::Q8_K, &values(k, 50 + j), &mut q).unwrap();
                q
            })
            .collect();
        for n in 1..=5 {
            let b: Vec<*const u8> = cols[..n].iter().map(|c| c.as_ptr()).collect();
            let mut want = vec![[0f32; MR]; n];
            let mut got = vec![[0f32; MR]; n];
            let cw: Vec<*mut f32> = want.iter_mut().map(|w| w.as_mut_ptr()).collect();
            let cg: Vec<*mut f32> = got.iter_mut().map(|g| g.as_mut_ptr()).collect();
            // SAFETY: one packed group of k weights, n columns of k.
            unsafe {
                panel_q4_k(k, packed.as_ptr(), &b, &[], &cw, rows, false);
                panel_q4_k_vnni(k, packed.as_ptr(), &b, &[], &cg, rows, false);
            }
            assert_eq!(got, want, "{n} columns");
            assert!(want[0][..rows].iter().any(|&x| x != 0.0));
        }
    }
}
