//! The q4_K packed GEMM of [`super::kgemm`] on 512-bit vectors, for CPUs
//! with AVX-512F, BW and VNNI.
//!
//! Groups are 16 rows: two of [`super::kgemm`]'s eight-row groups with
//! their 32-byte vectors interleaved ([`super::kgemm::pack_q4_k_x2`],
//! [`super::kgemm::pack_q4_kx8_x2`]), so one 64-byte load holds a vector
//! of all 16 rows, the low half rows 0-7 and the high half rows 8-15, and
//! every instruction of the 256-bit VNNI panel does twice the work. Same
//! integer sums and the same f32 operations per row, so the results are
//! bit-identical to [`super::kgemm::panel_q4_k_vnni`]'s.

use std::arch::x86_64::*;

use super::kgemm::{B_BYTES, B_QS, OFF_D, OFF_DMIN, OFF_MIN, OFF_Q, OFF_SC, SB};
use super::load_pair as load;

/// Rows per packed group.
pub const MR: usize = 16;
/// Packed bytes per K element of a group.
pub const GROUP_BYTES: usize = 2 * super::kgemm::GROUP_BYTES;

/// q8_K block offset of the 16 sub-block sums.
const K8_BSUMS: usize = 260;

/// Whether this CPU runs the kernels of this module.
pub fn available() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vnni")
}

/// Each row's `sum over sub-blocks of min * (sum of its 32 q8)` for the
/// q8_K block at `y`, as [`super::gemv::k4_min_sum`] for 16 rows.
///
/// # Safety
/// `y` must cover a q8_K block.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn min_sum(mn: &[__m512i; 4], y: *const u8) -> __m512i {
    // SAFETY: caller's contract.
    let bs = unsafe { _mm256_loadu_si256(y.add(K8_BSUMS).cast()) };
    let q8s = _mm_hadd_epi16(
        _mm256_castsi256_si128(bs),
        _mm256_extracti128_si256::<1>(bs),
    );
    let q8s = _mm512_castsi128_si512(q8s);
    let mut msum = _mm512_setzero_si512();
    for (p, w) in mn.iter().enumerate() {
        let bp = _mm512_permutexvar_epi32(_mm512_set1_epi32(p as i32), q8s);
        msum = _mm512_add_epi32(msum, _mm512_madd_epi16(*w, bp));
    }
    msum
}

/// [`crate::simd::PanelFn`] for q4_K weights packed 16 rows to a group.
///
/// # Safety
/// As [`crate::simd::PanelFn`] with at most 4 columns at a time; the CPU
/// must have AVX-512F, BW and VNNI.
pub unsafe fn panel_q4_k(
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

/// [`panel_q4_k`] for `N` columns.
///
/// # Safety
/// As [`panel_q4_k`], with `b.len() == c.len() == N`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn columns<const N: usize>(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: the caller passes N pointers of each kind.
    let (bp, cp): ([*const u8; N], [*mut f32; N]) = unsafe { (super::first(b), super::first(c)) };
    let mut sum = [_mm512_setzero_ps(); N];
    for i in 0..kc / 256 {
        let blk = a.wrapping_add(i * 2 * SB);
        // SAFETY: the group holds super-block i, every column covers it.
        unsafe {
            let mut isum = [_mm512_setzero_si512(); N];
            for ch in 0..4 {
                let q = OFF_Q + 32 * 16 * ch;
                let mut lo = [_mm512_setzero_si512(); N];
                let mut hi = [_mm512_setzero_si512(); N];
                for t in 0..8 {
                    let (wl, wh) = (load(blk, q + 32 * t), load(blk, q + 32 * (8 + t)));
                    for j in 0..N {
                        let bq = bp[j].add(i * B_BYTES + B_QS + 64 * ch).cast::<i32>();
                        let blo = _mm512_set1_epi32(bq.add(t).read_unaligned());
                        let bhi = _mm512_set1_epi32(bq.add(8 + t).read_unaligned());
                        lo[j] = _mm512_dpbusd_epi32(lo[j], wl, blo);
                        hi[j] = _mm512_dpbusd_epi32(hi[j], wh, bhi);
                    }
                }
                // The scales sit in both 16-bit halves of each lane.
                let sc = OFF_SC + 64 * ch;
                let sl = _mm512_srli_epi32::<16>(load(blk, sc));
                let sh = _mm512_srli_epi32::<16>(load(blk, sc + 32));
                for j in 0..N {
                    let x = _mm512_mullo_epi32(lo[j], sl);
                    let y = _mm512_mullo_epi32(hi[j], sh);
                    isum[j] = _mm512_add_epi32(isum[j], _mm512_add_epi32(x, y));
                }
            }
            let mn: [__m512i; 4] = std::array::from_fn(|p| load(blk, OFF_MIN + 32 * p));
            let d = _mm512_castsi512_ps(load(blk, OFF_D));
            let dmin = _mm512_castsi512_ps(load(blk, OFF_DMIN));
            for j in 0..N {
                let y = bp[j].add(i * B_BYTES);
                let db = _mm512_set1_ps(y.cast::<f32>().read_unaligned());
                let msum = min_sum(&mn, y);
                let dd = _mm512_mul_ps(d, db);
                sum[j] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(isum[j]), sum[j]);
                let dm = _mm512_mul_ps(dmin, db);
                sum[j] = _mm512_fnmadd_ps(dm, _mm512_cvtepi32_ps(msum), sum[j]);
            }
        }
    }
    for j in 0..N {
        // SAFETY: c[j] covers mr outputs.
        unsafe { super::store_lanes16(cp[j], sum[j], mr, acc) };
    }
}

#[cfg(test)]
mod tests {
    use backplane_abi::DType;

    use super::*;
    use crate::simd::test_values as values;
    use crate::simd::x86::kgemm;

    /// The 512-bit panel gives the 256-bit VNNI panel's results bit for
    /// bit, for every column count of a call, 16 rows and partial groups.
    #[test]
    fn equals_the_256_bit_panel() {
        if !(available() && super::super::available() && super::super::vnni()) {
            return;
        }
        let k = 512;
        let lda = DType::Q4_K.row_size(k).unwrap();
        let cols: Vec<Vec<u8>> = (0..5)
            .map(|j| {
                let mut q = vec![0u8; DType::Q8_K.row_size(k).unwrap()];
                backplane_quant::quantize_row(DType::Q8_K, &values(k, 50 + j), &mut q).unwrap();
                q
            })
            .collect();
        for rows in [5usize, 8, 13, 16] {
            let mut a = vec![0u8; rows * lda];
            for (r, row) in a.chunks_exact_mut(lda).enumerate() {
                backplane_quant::quantize_row(DType::Q4_K, &values(k, r as u32 + 1), row).unwrap();
            }
            let groups8 = rows.div_ceil(8);
            let mut narrow = vec![0u8; groups8 * k * kgemm::GROUP_BYTES * kgemm::MR];
            let mut wide = vec![0u8; k * GROUP_BYTES * MR];
            // SAFETY: `rows` rows of k weights into the packed groups.
            unsafe {
                kgemm::pack_q4_k(a.as_ptr(), lda, rows, 0, k, narrow.as_mut_ptr());
                kgemm::pack_q4_k_x2(a.as_ptr(), lda, rows, 0, k, wide.as_mut_ptr());
            }
            for n in 1..=5 {
                let b: Vec<*const u8> = cols[..n].iter().map(|c| c.as_ptr()).collect();
                let mut want = vec![[0f32; MR]; n];
                let mut got = vec![[0f32; MR]; n];
                let cg: Vec<*mut f32> = got.iter_mut().map(|g| g.as_mut_ptr()).collect();
                // SAFETY: packed groups of k weights, n columns of k.
                unsafe {
                    for g in 0..groups8 {
                        let cw: Vec<*mut f32> =
                            want.iter_mut().map(|w| w.as_mut_ptr().add(8 * g)).collect();
                        let blk = narrow.as_ptr().add(g * k * kgemm::GROUP_BYTES);
                        let live = (rows - 8 * g).min(8);
                        kgemm::panel_q4_k_vnni(k, blk, &b, &[], &cw, live, false);
                    }
                    panel_q4_k(k, wide.as_ptr(), &b, &[], &cg, rows, false);
                }
                assert_eq!(got, want, "{rows} rows, {n} columns");
                assert!(want[0][..rows].iter().all(|&x| x != 0.0));
            }
        }
    }

    /// Packing the repacked layout gives the bytes packing ggml's gives.
    #[test]
    fn repacked_pack_equals_the_ggml_pack() {
        if !(available() && super::super::available()) {
            return;
        }
        let k = 512;
        for rows in [8usize, 16, 24] {
            let t = backplane_abi::TensorDesc::new(DType::Q4_K, [k as i64, rows as i64, 1, 1]);
            let r = crate::repack::Repack::for_tensor(&t).unwrap();
            let mut ggml = vec![0u8; t.nbytes() as usize];
            for (row, out) in ggml.chunks_exact_mut(r.row_bytes()).enumerate() {
                backplane_quant::quantize_row(DType::Q4_K, &values(k, row as u32 + 3), out)
                    .unwrap();
            }
            let mut repacked = vec![0u8; ggml.len()];
            r.write(&mut repacked, 0, &ggml);
            let len = rows.div_ceil(MR) * k * GROUP_BYTES;
            let (mut want, mut got) = (vec![0u8; len], vec![0u8; len]);
            // SAFETY: `rows` rows of k weights into the packed groups.
            unsafe {
                kgemm::pack_q4_k_x2(ggml.as_ptr(), r.row_bytes(), rows, 0, k, want.as_mut_ptr());
                kgemm::pack_q4_kx8_x2(
                    repacked.as_ptr(),
                    r.row_bytes(),
                    rows,
                    0,
                    k,
                    got.as_mut_ptr(),
                );
            }
            assert!(got == want, "{rows} rows");
        }
    }
}
