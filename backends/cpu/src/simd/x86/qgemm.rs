//! Packed GEMM for q4_0 and q8_0 weights against q8_0 activations, with
//! weight rows as vector lanes.
//!
//! Packing turns eight weight rows' blocks into eight vectors per block,
//! vector `t` holding quants `4t..4t + 4` of each row (row `r` in 32-bit
//! lane `r`), after the rows' eight scales as f32. One step broadcasts
//! four activation quants to every lane and `maddubs` multiplies them with
//! all eight rows at once, so each lane sums its own row's dot product: no
//! horizontal sums, and one int-to-float conversion and scale multiply per
//! eight rows, column and block.
//!
//! q4_0 keeps its quants unsigned (0..15) and adds the `maddubs` pair sums
//! of a whole block in 16 bits (at most 8 * 2 * 15 * 127 < 2^15); the `- 8`
//! offset comes back through the activation block's scale pair
//! `(d, 8 * d * sum(q))` ([`crate::simd::block_scales`]):
//! `row += d_a * (d * isum - 8 * d * sum(q))`. q8_0 packs `|q|` and `q`
//! and uses the sign trick, summing in 32 bits.

use std::arch::x86_64::*;

use super::repacked::{Q4_GROUP_BLOCK, Q8_GROUP_BLOCK, ROWS, SCALES};
use super::{dot_vnni, dot16, dot32, first, h2f, load128, load256};

/// Rows per packed group.
pub const MR: usize = 8;

pub(super) const Q4_0: u8 = 0;
pub(super) const Q8_0: u8 = 1;

/// Bytes of a weight block.
const fn a_bytes(t: u8) -> usize {
    if t == Q4_0 { 18 } else { 34 }
}

/// Packed bytes per block of a group: eight f32 scales, then eight
/// vectors (q4_0) or eight pairs of vectors `|q|`, `q` (q8_0).
pub const fn group_block_bytes(t: u8) -> usize {
    if t == Q4_0 { 32 + 256 } else { 32 + 512 }
}

/// Bytes of a q8_0 activation block and the offset of its quants.
pub(super) const B_BYTES: usize = 34;
pub(super) const B_QS: usize = 2;

/// Transposes eight rows of eight 32-bit groups.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn transpose8(v: &mut [__m256i; 8]) {
    let mut f = v.map(|x| _mm256_castsi256_ps(x));
    super::gemm::transpose8(&mut f);
    *v = f.map(|x| _mm256_castps_si256(x));
}

/// Packs blocks `k0 / 32 .. (k0 + kc) / 32` of `rows` rows of type `T`,
/// in blocks of `S` groups: with `S == 2` (for [`super::qgemm512`]) 16
/// rows whose two groups' 32-byte vectors alternate.
///
/// # Safety
/// As [`crate::simd::PackFn`] with `group_bytes = S * group_block_bytes(T) / 32`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack<const T: u8, const S: usize>(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    dst: *mut u8,
) {
    let (blk0, nblk) = (k0 / 32, kc / 32);
    let gb = group_block_bytes(T);
    let m4 = _mm256_set1_epi8(0x0F);
    for g in 0..rows.div_ceil(S * MR) * S {
        let live = rows.saturating_sub(g * MR).min(MR);
        let row = |r: usize, blk: usize| a.wrapping_add((g * MR + r) * lda + blk * a_bytes(T));
        for i in 0..nblk {
            let base = dst.wrapping_add(((g / S * nblk + i) * S) * gb);
            let out = |off: usize| base.wrapping_add(off * S + 32 * (g % S));
            let mut d = [0.0f32; MR];
            let mut v = [_mm256_setzero_si256(); 8];
            for r in 0..live {
                let p = row(r, blk0 + i);
                // SAFETY: row r < rows covers block blk0 + i.
                unsafe {
                    d[r] = h2f(p);
                    v[r] = if T == Q4_0 {
                        let x = load128(p.add(2));
                        let both = _mm256_set_m128i(_mm_srli_epi16::<4>(x), x);
                        _mm256_and_si256(both, m4)
                    } else {
                        load256(p.add(2))
                    };
                }
            }
            transpose8(&mut v);
            // SAFETY: `base` has S * gb bytes for this group and block.
            unsafe {
                std::ptr::copy_nonoverlapping(d.as_ptr().cast::<u8>(), out(0), 32);
                for (t, vt) in v.iter().enumerate() {
                    if T == Q4_0 {
                        _mm256_storeu_si256(out(32 + 32 * t).cast(), *vt);
                    } else {
                        let q = 32 + 64 * t;
                        _mm256_storeu_si256(out(q).cast(), _mm256_sign_epi8(*vt, *vt));
                        _mm256_storeu_si256(out(q + 32).cast(), *vt);
                    }
                }
            }
        }
    }
}

/// [`crate::simd::PackFn`] for q4_0 weights.
///
/// # Safety
/// As [`crate::simd::PackFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_q4_0(a: *const u8, lda: usize, rows: usize, k0: usize, kc: usize, d: *mut u8) {
    // SAFETY: forwarded contract.
    unsafe { pack::<Q4_0, 1>(a, lda, rows, k0, kc, d) }
}

/// [`crate::simd::PackFn`] for q8_0 weights.
///
/// # Safety
/// As [`crate::simd::PackFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_q8_0(a: *const u8, lda: usize, rows: usize, k0: usize, kc: usize, d: *mut u8) {
    // SAFETY: forwarded contract.
    unsafe { pack::<Q8_0, 1>(a, lda, rows, k0, kc, d) }
}

/// [`pack_q4_0`] for the 512-bit panels (16-row blocks).
///
/// # Safety
/// As [`crate::simd::PackFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_q4_0_x2(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    d: *mut u8,
) {
    // SAFETY: forwarded contract.
    unsafe { pack::<Q4_0, 2>(a, lda, rows, k0, kc, d) }
}

/// [`pack_q8_0`] for the 512-bit panels (16-row blocks).
///
/// # Safety
/// As [`crate::simd::PackFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_q8_0_x2(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    d: *mut u8,
) {
    // SAFETY: forwarded contract.
    unsafe { pack::<Q8_0, 2>(a, lda, rows, k0, kc, d) }
}

/// Broadcasts quants `4t..4t + 4` of activation block `i` of column `b`.
///
/// # Safety
/// `b` must cover block `i`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bcast(b: *const u8, i: usize, t: usize) -> __m256i {
    // SAFETY: caller's contract.
    let x = unsafe {
        b.add(i * B_BYTES + B_QS + 4 * t)
            .cast::<i32>()
            .read_unaligned()
    };
    _mm256_set1_epi32(x)
}

/// One group of [`MR`] packed rows x `N` columns over `kc` weights:
/// `$dot(acc, u8 weights, i8 activations)` adds the 4-product sums of
/// each 32-bit lane, in 16 bits (`$wide = false`; q4_0 only, summed to 32
/// bits by one `madd` per block) or 32 bits.
macro_rules! micro_body {
    ($t:ident, $n:ident, $kc:ident, $a:ident, $b:ident, $s:ident, $c:ident, $mr:ident, $acc:ident,
     $dot:expr, $wide:expr) => {{
        let (bp, sp, cp): ([*const u8; $n], [*const f32; $n], [*mut f32; $n]) =
            // SAFETY: the caller passes N pointers of each kind.
            unsafe { (first($b), first($s), first($c)) };
        let gb = group_block_bytes($t);
        let ones = _mm256_set1_epi16(1);
        let mut sum = [_mm256_setzero_ps(); $n];
        for i in 0..$kc / 32 {
            let blk = $a.wrapping_add(i * gb);
            let mut isum = [_mm256_setzero_si256(); $n];
            for t in 0..8 {
                // SAFETY: the group holds this block; every column covers it.
                unsafe {
                    if $t == Q4_0 {
                        let av = load256(blk.add(32 + 32 * t));
                        for j in 0..$n {
                            isum[j] = $dot(isum[j], av, bcast(bp[j], i, t));
                        }
                    } else {
                        let ax = load256(blk.add(32 + 64 * t));
                        let av = load256(blk.add(64 + 64 * t));
                        for j in 0..$n {
                            let y = _mm256_sign_epi8(bcast(bp[j], i, t), av);
                            isum[j] = $dot(isum[j], ax, y);
                        }
                    }
                }
            }
            // SAFETY: the group's block starts with eight f32 scales; every
            // column has a scale pair per block.
            unsafe {
                let da = _mm256_loadu_ps(blk.cast::<f32>());
                for j in 0..$n {
                    let d = _mm256_set1_ps(*sp[j].add(2 * i));
                    let x = if $t == Q4_0 {
                        let s32 = if $wide {
                            isum[j]
                        } else {
                            _mm256_madd_epi16(isum[j], ones)
                        };
                        let x = _mm256_cvtepi32_ps(s32);
                        _mm256_fmsub_ps(x, d, _mm256_set1_ps(*sp[j].add(2 * i + 1)))
                    } else {
                        _mm256_mul_ps(_mm256_cvtepi32_ps(isum[j]), d)
                    };
                    sum[j] = _mm256_fmadd_ps(da, x, sum[j]);
                }
            }
        }
        for j in 0..$n {
            // SAFETY: c[j] covers mr outputs.
            unsafe { super::store_lanes(cp[j], sum[j], $mr, $acc) };
        }
    }};
}

/// [`micro_body`] with AVX2's `maddubs` (16-bit sums for q4_0).
///
/// # Safety
/// As [`crate::simd::PanelFn`], with `b.len() == s.len() == c.len() == N`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn micro<const T: u8, const N: usize>(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    s: &[*const f32],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    if T == Q4_0 {
        micro_body!(T, N, kc, a, b, s, c, mr, acc, dot16, false)
    } else {
        micro_body!(T, N, kc, a, b, s, c, mr, acc, dot32, true)
    }
}

/// [`micro_body`] with AVX-512 VNNI's `dpbusd` (32-bit sums).
///
/// # Safety
/// As [`micro`]; the CPU must also have AVX-512 VNNI and VL.
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
unsafe fn micro_vnni<const T: u8, const N: usize>(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    s: &[*const f32],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    micro_body!(T, N, kc, a, b, s, c, mr, acc, dot_vnni, true)
}

macro_rules! q_panel {
    ($name:ident, $micro:ident, $t:ident, $isa:literal, $($n:literal),*) => {
        #[doc = concat!("[`crate::simd::PanelFn`] for ", stringify!($t), " weights (", $isa, ").")]
        ///
        /// # Safety
        #[doc = concat!("As [`crate::simd::PanelFn`]; the CPU must have ", $isa, ".")]
        pub unsafe fn $name(
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
                    $($n => $micro::<$t, $n>(kc, a, b, s, c, mr, acc),)*
                    _ => debug_assert!(false, "panel width outside the kernel's contract"),
                }
            }
        }
    };
}

q_panel!(
    panel_q4_0,
    micro,
    Q4_0,
    "AVX2, FMA and F16C",
    1,
    2,
    3,
    4,
    5,
    6
);
q_panel!(panel_q8_0, micro, Q8_0, "AVX2, FMA and F16C", 1, 2, 3, 4);
q_panel!(
    panel_q4_0_vnni,
    micro_vnni,
    Q4_0,
    "AVX2 and AVX-512 VNNI",
    1,
    2,
    3,
    4,
    5,
    6
);
q_panel!(
    panel_q8_0_vnni,
    micro_vnni,
    Q8_0,
    "AVX2 and AVX-512 VNNI",
    1,
    2,
    3,
    4
);

/// Packed bytes per K element of a q4_0 group.
pub const GROUP_BYTES_Q4_0: usize = group_block_bytes(Q4_0) / 32;
/// Packed bytes per K element of a q8_0 group.
pub const GROUP_BYTES_Q8_0: usize = group_block_bytes(Q8_0) / 32;

/// Packs repacked groups for the packed GEMM of this module's panels: its
/// group block is eight f32 scales, then per 4-quant slice `t` one vector
/// (q4_0: nibbles widened to bytes) or the pair `|q|`, `q` (q8_0). With
/// `S == 2`, for [`super::qgemm512`]: blocks of 16 rows, two such groups'
/// 32-byte vectors alternating (a missing second eight rows zero).
///
/// # Safety
/// As [`crate::simd::PackFn`], with `a` at the start of a repacked group
/// and `rows` a multiple of eight.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_repacked<const Q4: bool, const S: usize>(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    dst: *mut u8,
) {
    let (src_block, out_block) = if Q4 {
        (Q4_GROUP_BLOCK, 32 + 256)
    } else {
        (Q8_GROUP_BLOCK, 32 + 512)
    };
    let (blk0, nblk) = (k0 / 32, kc / 32);
    let m4 = _mm256_set1_epi8(0x0F);
    for g in 0..rows.div_ceil(S * ROWS) * S {
        let group = a.wrapping_add(g * ROWS * lda);
        for i in 0..nblk {
            let src = group.wrapping_add((blk0 + i) * src_block);
            let base = dst.wrapping_add(((g / S * nblk + i) * S) * out_block);
            let out = |off: usize| base.wrapping_add(off * S + 32 * (g % S));
            if g * ROWS >= rows {
                for off in (0..out_block).step_by(32) {
                    // SAFETY: `base` has S * out_block bytes for this block.
                    unsafe { _mm256_storeu_si256(out(off).cast(), _mm256_setzero_si256()) };
                }
                continue;
            }
            // SAFETY: the group covers block blk0 + i; `base` has
            // S * out_block bytes for this group and block.
            unsafe {
                _mm256_storeu_ps(out(0).cast(), _mm256_cvtph_ps(load128(src)));
                if Q4 {
                    for s in 0..4 {
                        let v = load256(src.add(SCALES + 32 * s));
                        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), m4);
                        _mm256_storeu_si256(out(32 + 32 * s).cast(), _mm256_and_si256(v, m4));
                        _mm256_storeu_si256(out(32 + 32 * (4 + s)).cast(), hi);
                    }
                } else {
                    for t in 0..8 {
                        let v = load256(src.add(SCALES + 32 * t));
                        let q = 32 + 64 * t;
                        _mm256_storeu_si256(out(q).cast(), _mm256_sign_epi8(v, v));
                        _mm256_storeu_si256(out(q + 32).cast(), v);
                    }
                }
            }
        }
    }
}

/// [`crate::simd::PackFn`] for repacked q4_0 groups.
///
/// # Safety
/// As [`pack_repacked`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_q4_0x8(a: *const u8, lda: usize, rows: usize, k0: usize, kc: usize, d: *mut u8) {
    // SAFETY: forwarded contract.
    unsafe { pack_repacked::<true, 1>(a, lda, rows, k0, kc, d) }
}

/// [`crate::simd::PackFn`] for repacked q8_0 groups.
///
/// # Safety
/// As [`pack_repacked`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_q8_0x8(a: *const u8, lda: usize, rows: usize, k0: usize, kc: usize, d: *mut u8) {
    // SAFETY: forwarded contract.
    unsafe { pack_repacked::<false, 1>(a, lda, rows, k0, kc, d) }
}

/// [`pack_q4_0x8`] for the 512-bit panels (16-row blocks).
///
/// # Safety
/// As [`pack_repacked`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_q4_0x8_x2(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    d: *mut u8,
) {
    // SAFETY: forwarded contract.
    unsafe { pack_repacked::<true, 2>(a, lda, rows, k0, kc, d) }
}

/// [`pack_q8_0x8`] for the 512-bit panels (16-row blocks).
///
/// # Safety
/// As [`pack_repacked`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_q8_0x8_x2(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    d: *mut u8,
) {
    // SAFETY: forwarded contract.
    unsafe { pack_repacked::<false, 2>(a, lda, rows, k0, kc, d) }
}

#[cfg(test)]
mod tests {
    use backplane_abi::DType;

    use super::*;

    use crate::simd::test_values as values;

    /// The VNNI panels give the AVX2 panels' results bit for bit (the same
    /// integer sums), for every column count and a partial last group.
    #[test]
    fn vnni_panels_equal_the_avx2_panels() {
        if !super::super::available() || !super::super::vnni() {
            return;
        }
        let (k, rows) = (256, 7);
        type Case = (
            DType,
            crate::simd::PackFn,
            crate::simd::PanelFn,
            crate::simd::PanelFn,
            usize,
        );
        let cases: [Case; 2] = [
            (DType::Q4_0, pack_q4_0, panel_q4_0, panel_q4_0_vnni, 6),
            (DType::Q8_0, pack_q8_0, panel_q8_0, panel_q8_0_vnni, 4),
        ];
        for (dtype, pack, avx2, vnni, widest) in cases {
            let lda = dtype.row_size(k).unwrap();
            let mut a = vec![0u8; rows * lda];
            for (r, row) in a.chunks_exact_mut(lda).enumerate() {
                backplane_quant::quantize_row(dtype, &values(k, r as u32 + 1), row).unwrap();
            }
            let gb = if dtype == DType::Q4_0 {
                GROUP_BYTES_Q4_0
            } else {
                GROUP_BYTES_Q8_0
            };
            let mut packed = vec![0u8; k * gb];
            // SAFETY: `rows` rows of k weights into one packed group.
            unsafe { pack(a.as_ptr(), lda, rows, 0, k, packed.as_mut_ptr()) };
            let cols: Vec<(Vec<u8>, Vec<f32>)> = (0..widest)
                .map(|j| {
                    let mut q = vec![0u8; DType::Q8_0.row_size(k).unwrap()];
                    backplane_quant::quantize_row(DType::Q8_0, &values(k, 50 + j as u32), &mut q)
                        .unwrap();
                    let mut s = vec![0f32; 2 * k / 32];
                    crate::simd::block_scales(&q, &mut s);
                    (q, s)
                })
                .collect();
            for n in 1..=widest {
                let b: Vec<*const u8> = cols[..n].iter().map(|c| c.0.as_ptr()).collect();
                let s: Vec<*const f32> = cols[..n].iter().map(|c| c.1.as_ptr()).collect();
                let mut want = vec![[0f32; MR]; n];
                let mut got = vec![[0f32; MR]; n];
                let cw: Vec<*mut f32> = want.iter_mut().map(|w| w.as_mut_ptr()).collect();
                let cg: Vec<*mut f32> = got.iter_mut().map(|g| g.as_mut_ptr()).collect();
                // SAFETY: one packed group of k weights, n columns of k.
                unsafe {
                    avx2(k, packed.as_ptr(), &b, &s, &cw, rows, false);
                    vnni(k, packed.as_ptr(), &b, &s, &cg, rows, false);
                }
                assert_eq!(got, want, "{dtype}, {n} columns");
                assert!(want[0][..rows].iter().any(|&x| x != 0.0));
            }
        }
    }
}
