//! The q4_0 / q8_0 packed GEMM of [`super::qgemm`] on 512-bit vectors,
//! for CPUs with AVX-512F, BW and VNNI.
//!
//! Blocks of 16 rows: two of [`super::qgemm`]'s eight-row groups with
//! their 32-byte vectors alternating ([`super::qgemm::pack_q4_0_x2`],
//! [`super::qgemm::pack_q4_0x8_x2`] and their q8_0 twins), so one 64-byte
//! load holds a vector of all 16 rows and every instruction of the
//! 256-bit VNNI panel does twice the work. q8_0's sign trick has no 512-bit `sign` instruction:
//! the activation bytes are negated under the mask of negative weights,
//! which gives the same bytes wherever the weight is not zero (and a zero
//! weight's `|q|` makes the product zero either way). Same integer sums and
//! float steps per row, so the results are bit-identical to the 256-bit
//! VNNI panels'.

use std::arch::x86_64::*;

use super::qgemm::{B_BYTES, B_QS, Q4_0, Q8_0, group_block_bytes};
use super::{first, load_pair as load};

/// Rows per packed block.
pub const MR: usize = 16;
/// Packed bytes per K element of a q4_0 block of 16 rows.
pub const GROUP_BYTES_Q4_0: usize = 2 * super::qgemm::GROUP_BYTES_Q4_0;
/// Packed bytes per K element of a q8_0 block of 16 rows.
pub const GROUP_BYTES_Q8_0: usize = 2 * super::qgemm::GROUP_BYTES_Q8_0;

/// Broadcasts quants `4t..4t + 4` of activation block `i` of column `b`.
///
/// # Safety
/// `b` must cover block `i`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn bcast(b: *const u8, i: usize, t: usize) -> __m512i {
    // SAFETY: caller's contract.
    let x = unsafe {
        b.add(i * B_BYTES + B_QS + 4 * t)
            .cast::<i32>()
            .read_unaligned()
    };
    _mm512_set1_epi32(x)
}

/// One block of [`MR`] packed rows x `N` columns over `kc` weights.
///
/// # Safety
/// As [`crate::simd::PanelFn`], with `b.len() == s.len() == c.len() == N`;
/// the CPU must have AVX-512F, BW and VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn micro<const T: u8, const N: usize>(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    s: &[*const f32],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: the caller passes N pointers of each kind.
    let (bp, sp, cp): ([*const u8; N], [*const f32; N], [*mut f32; N]) =
        unsafe { (first(b), first(s), first(c)) };
    let gb = 2 * group_block_bytes(T);
    let zero = _mm512_setzero_si512();
    let mut sum = [_mm512_setzero_ps(); N];
    for i in 0..kc / 32 {
        let blk = a.wrapping_add(i * gb);
        let mut isum = [zero; N];
        for t in 0..8 {
            // SAFETY: the block holds block i of the rows; every column
            // covers it.
            unsafe {
                if T == Q4_0 {
                    let av = load(blk, 32 + 32 * t);
                    for j in 0..N {
                        isum[j] = _mm512_dpbusd_epi32(isum[j], av, bcast(bp[j], i, t));
                    }
                } else {
                    let ax = load(blk, 32 + 64 * t);
                    let negative = _mm512_movepi8_mask(load(blk, 64 + 64 * t));
                    for j in 0..N {
                        let y = bcast(bp[j], i, t);
                        let y = _mm512_mask_sub_epi8(y, negative, zero, y);
                        isum[j] = _mm512_dpbusd_epi32(isum[j], ax, y);
                    }
                }
            }
        }
        // SAFETY: the block starts with the 16 rows' f32 scales; every
        // column has a scale pair per block.
        unsafe {
            let da = _mm512_castsi512_ps(load(blk, 0));
            for j in 0..N {
                let d = _mm512_set1_ps(*sp[j].add(2 * i));
                let x = _mm512_cvtepi32_ps(isum[j]);
                let x = if T == Q4_0 {
                    _mm512_fmsub_ps(x, d, _mm512_set1_ps(*sp[j].add(2 * i + 1)))
                } else {
                    _mm512_mul_ps(x, d)
                };
                sum[j] = _mm512_fmadd_ps(da, x, sum[j]);
            }
        }
    }
    for j in 0..N {
        // SAFETY: c[j] covers mr outputs.
        unsafe { super::store_lanes16(cp[j], sum[j], mr, acc) };
    }
}

/// [`crate::simd::PanelFn`] for q4_0 blocks of 16 rows, up to 6 columns.
///
/// # Safety
/// As [`crate::simd::PanelFn`]; the CPU must have AVX-512F, BW and VNNI.
pub unsafe fn panel_q4_0(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    s: &[*const f32],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: forwarded contract; features checked by the caller.
    unsafe {
        match b.len() {
            1 => micro::<Q4_0, 1>(kc, a, b, s, c, mr, acc),
            2 => micro::<Q4_0, 2>(kc, a, b, s, c, mr, acc),
            3 => micro::<Q4_0, 3>(kc, a, b, s, c, mr, acc),
            4 => micro::<Q4_0, 4>(kc, a, b, s, c, mr, acc),
            5 => micro::<Q4_0, 5>(kc, a, b, s, c, mr, acc),
            6 => micro::<Q4_0, 6>(kc, a, b, s, c, mr, acc),
            _ => debug_assert!(false, "panel width outside the kernel's contract"),
        }
    }
}

/// [`crate::simd::PanelFn`] for q8_0 blocks of 16 rows, up to 4 columns.
///
/// # Safety
/// As [`crate::simd::PanelFn`]; the CPU must have AVX-512F, BW and VNNI.
pub unsafe fn panel_q8_0(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    s: &[*const f32],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: forwarded contract; features checked by the caller.
    unsafe {
        match b.len() {
            1 => micro::<Q8_0, 1>(kc, a, b, s, c, mr, acc),
            2 => micro::<Q8_0, 2>(kc, a, b, s, c, mr, acc),
            3 => micro::<Q8_0, 3>(kc, a, b, s, c, mr, acc),
            4 => micro::<Q8_0, 4>(kc, a, b, s, c, mr, acc),
            _ => debug_assert!(false, "panel width outside the kernel's contract"),
        }
    }
}

#[cfg(test)]
mod tests {
    use backplane_abi::{DType, TensorDesc};

    use super::*;
    use crate::repack::Repack;
    use crate::simd::test_values as values;
    use crate::simd::x86::qgemm;

    type Case = (
        DType,
        crate::simd::PackFn,
        crate::simd::PackFn,
        crate::simd::PackFn,
        crate::simd::PanelFn,
        crate::simd::PanelFn,
        usize,
    );

    /// The 512-bit panels give the 256-bit VNNI panels' results bit for
    /// bit (every column count, partial blocks), and packing the repacked
    /// layout gives the bytes packing ggml's gives.
    #[test]
    fn equal_the_256_bit_panels() {
        if !(crate::simd::x86::kgemm512::available() && super::super::available()) {
            return;
        }
        let k = 256;
        let cases: [Case; 2] = [
            (
                DType::Q4_0,
                qgemm::pack_q4_0,
                qgemm::pack_q4_0_x2,
                qgemm::pack_q4_0x8_x2,
                qgemm::panel_q4_0_vnni,
                panel_q4_0,
                6,
            ),
            (
                DType::Q8_0,
                qgemm::pack_q8_0,
                qgemm::pack_q8_0_x2,
                qgemm::pack_q8_0x8_x2,
                qgemm::panel_q8_0_vnni,
                panel_q8_0,
                4,
            ),
        ];
        for (dtype, pack8, pack16, pack16r, narrow, wide, widest) in cases {
            let gb8 = group_block_bytes(if dtype == DType::Q4_0 { Q4_0 } else { Q8_0 }) / 32;
            for rows in [5usize, 8, 13, 16, 24] {
                let t = TensorDesc::new(dtype, [k as i64, rows as i64, 1, 1]);
                let lda = dtype.row_size(k).unwrap();
                let mut a = vec![0u8; rows * lda];
                for (r, row) in a.chunks_exact_mut(lda).enumerate() {
                    backplane_quant::quantize_row(dtype, &values(k, r as u32 + 1), row).unwrap();
                }
                let groups8 = rows.div_ceil(8);
                let mut p8 = vec![0u8; groups8 * k * gb8];
                let mut p16 = vec![0u8; rows.div_ceil(MR) * k * 2 * gb8];
                // SAFETY: `rows` rows of k weights into the packed groups.
                unsafe {
                    pack8(a.as_ptr(), lda, rows, 0, k, p8.as_mut_ptr());
                    pack16(a.as_ptr(), lda, rows, 0, k, p16.as_mut_ptr());
                }
                if rows % 8 == 0 {
                    let r = Repack::for_tensor(&t).unwrap();
                    let mut repacked = vec![0u8; a.len()];
                    r.write(&mut repacked, 0, &a);
                    let mut p16r = vec![0u8; p16.len()];
                    // SAFETY: as above, from the repacked layout.
                    unsafe { pack16r(repacked.as_ptr(), lda, rows, 0, k, p16r.as_mut_ptr()) };
                    assert!(p16r == p16, "{dtype}: repacked pack, {rows} rows");
                }
                let cols: Vec<(Vec<u8>, Vec<f32>)> = (0..widest)
                    .map(|j| {
                        let mut q = vec![0u8; DType::Q8_0.row_size(k).unwrap()];
                        let x = values(k, 50 + j as u32);
                        backplane_quant::quantize_row(DType::Q8_0, &x, &mut q).unwrap();
                        let mut s = vec![0f32; 2 * k / 32];
                        crate::simd::block_scales(&q, &mut s);
                        (q, s)
                    })
                    .collect();
                for n in 1..=widest {
                    let b: Vec<*const u8> = cols[..n].iter().map(|c| c.0.as_ptr()).collect();
                    let s: Vec<*const f32> = cols[..n].iter().map(|c| c.1.as_ptr()).collect();
                    let mut want = vec![[0f32; 24]; n];
                    let mut got = vec![[0f32; 24]; n];
                    // SAFETY: packed groups of k weights, n columns of k.
                    unsafe {
                        for g in 0..groups8 {
                            let cw: Vec<*mut f32> =
                                want.iter_mut().map(|w| w.as_mut_ptr().add(8 * g)).collect();
                            let live = (rows - 8 * g).min(8);
                            narrow(k, p8.as_ptr().add(g * k * gb8), &b, &s, &cw, live, false);
                        }
                        for blk in 0..rows.div_ceil(MR) {
                            let cg: Vec<*mut f32> = got
                                .iter_mut()
                                .map(|g| g.as_mut_ptr().add(MR * blk))
                                .collect();
                            let live = (rows - MR * blk).min(MR);
                            let p = p16.as_ptr().add(blk * k * 2 * gb8);
                            wide(k, p, &b, &s, &cg, live, false);
                        }
                    }
                    assert_eq!(got, want, "{dtype}, {rows} rows, {n} columns");
                    assert!(want[0][..rows].iter().all(|&x| x != 0.0));
                }
            }
        }
    }
}
