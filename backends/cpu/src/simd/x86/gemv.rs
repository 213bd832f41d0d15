//! Mat-vec kernels with weight rows as vector lanes, transposed on the fly.
//!
//! For one activation column, eight q4_0 weight rows go through each
//! block together: their sixteen quant bytes are loaded in pairs of rows
//! (row `r` in the low 128 bits, row `r + 4` in the high ones) and a 4 x 4
//! transpose of 32-bit groups per 128-bit lane leaves, in vector `g`, bytes
//! `4g..4g + 4` of every row (row `r` in 32-bit lane `r`): low nibbles are
//! quants `4g..4g + 4`, high nibbles `16 + 4g..`. Broadcasting the matching
//! four activation quants, `maddubs` then sums every row's own products in
//! its own lane, in 16 bits over the block (at most 8 * 2 * 15 * 127 <
//! 2^15), so a block costs one conversion and one scale multiply for all
//! eight rows instead of one per row, and no horizontal sums at the end.
//! The `- 8` offset of q4_0 is taken off per block as `8 * sum(q8)`,
//! computed once for the eight rows.
//!
//! q4_K does the same per 64-weight chunk with an 8 x 8 transpose of the
//! rows' 32 quant bytes, and applies each 32-weight sub-block's scale with
//! one `madd` for all eight rows ([`q4_k_rows8`]); a lone row uses ggml's
//! one-row AVX2 form ([`q4_k_rows`]).

use std::arch::x86_64::*;

use super::{PREFETCH_AHEAD, load128, load256, prefetch, put};

/// Rows per call.
pub const ROWS: usize = 8;

/// q4_0 block bytes and the q8_0 activation block bytes.
const A_BYTES: usize = 18;
const B_BYTES: usize = 34;

/// `8 * sum(q)` of the q8_0 block at `b`, in every lane.
///
/// # Safety
/// `b` must cover one q8_0 block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn offset_sum(b: *const u8) -> __m256i {
    // SAFETY: caller's contract.
    let q = unsafe { load256(b.add(2)) };
    let p = _mm256_maddubs_epi16(_mm256_set1_epi8(8), q);
    let s = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
    let s = _mm256_add_epi32(s, _mm256_shuffle_epi32::<0x4E>(s));
    let s = _mm256_add_epi32(s, _mm256_shuffle_epi32::<0xB1>(s));
    _mm256_add_epi32(s, _mm256_permute2x128_si256::<1>(s, s))
}

/// The 16 bytes at each of eight rows `p` as four vectors: vector `g`
/// holds bytes `4g..4g + 4` of row `r` in 32-bit lane `r`.
///
/// # Safety
/// Every `p[r]` must cover 16 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows16(p: [*const u8; ROWS]) -> [__m256i; 4] {
    // SAFETY: caller's contract.
    let x: [__m256i; 4] = std::array::from_fn(|r| unsafe {
        _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(load128(p[r])), load128(p[r + 4]))
    });
    let t0 = _mm256_unpacklo_epi32(x[0], x[1]);
    let t1 = _mm256_unpackhi_epi32(x[0], x[1]);
    let t2 = _mm256_unpacklo_epi32(x[2], x[3]);
    let t3 = _mm256_unpackhi_epi32(x[2], x[3]);
    [
        _mm256_unpacklo_epi64(t0, t2),
        _mm256_unpackhi_epi64(t0, t2),
        _mm256_unpacklo_epi64(t1, t3),
        _mm256_unpackhi_epi64(t1, t3),
    ]
}

/// The low (`HI = false`) or high 16 bits of each 32-bit lane of `v`, as
/// f16, converted to f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn halves_to_f32<const HI: bool>(v: __m256i) -> __m256 {
    let h = if HI {
        _mm256_srli_epi32::<16>(v)
    } else {
        _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF))
    };
    let h = _mm256_permute4x64_epi64::<0x08>(_mm256_packus_epi32(h, h));
    _mm256_cvtph_ps(_mm256_castsi256_si128(h))
}

/// Eight rows of q4_0 weights (`lda` bytes apart from `a`) times one q8_0
/// activation row `b` over `k` weights, written (or added) to `c[0..8]`.
///
/// # Safety
/// All eight rows and `b` must cover `k / 32` blocks, `c` eight floats;
/// the CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q4_0_rows8(k: usize, a: *const u8, lda: usize, b: *const u8, c: *mut f32, acc: bool) {
    let ap: [*const u8; ROWS] = std::array::from_fn(|r| a.wrapping_add(r * lda));
    let m4 = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    let mut sum = _mm256_setzero_ps();
    for i in 0..k / 32 {
        let off = i * A_BYTES;
        if i % 4 == 0 {
            for p in ap {
                prefetch(p.wrapping_add(off + PREFETCH_AHEAD));
            }
        }
        // SAFETY: block i lies within every row and the activation row.
        unsafe {
            let v = rows16(std::array::from_fn(|r| ap[r].add(off + 2)));
            let bq = b.add(i * B_BYTES + 2).cast::<i32>();
            let mut isum = _mm256_setzero_si256();
            for (g, vg) in v.iter().enumerate() {
                let lo = _mm256_and_si256(*vg, m4);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(*vg), m4);
                let blo = _mm256_set1_epi32(bq.add(g).read_unaligned());
                let bhi = _mm256_set1_epi32(bq.add(4 + g).read_unaligned());
                isum = _mm256_add_epi16(isum, _mm256_maddubs_epi16(lo, blo));
                isum = _mm256_add_epi16(isum, _mm256_maddubs_epi16(hi, bhi));
            }
            let bb = b.add(i * B_BYTES);
            let dot = _mm256_sub_epi32(_mm256_madd_epi16(isum, ones), offset_sum(bb));
            let dh: [u16; ROWS] =
                std::array::from_fn(|r| ap[r].add(off).cast::<u16>().read_unaligned());
            let da = _mm256_cvtph_ps(_mm_loadu_si128(dh.as_ptr().cast()));
            let db = _mm256_set1_ps(super::h2f(bb));
            sum = _mm256_fmadd_ps(_mm256_mul_ps(da, db), _mm256_cvtepi32_ps(dot), sum);
        }
    }
    let mut t = [0.0f32; ROWS];
    // SAFETY: t holds eight floats; c covers eight outputs.
    unsafe {
        _mm256_storeu_ps(t.as_mut_ptr(), sum);
        for (r, &v) in t.iter().enumerate() {
            put(c.add(r), v, acc);
        }
    }
}

/// [`crate::simd::TileFn`] for q4_0 weights: whole groups of eight rows
/// of a single column through [`q4_0_rows8`], everything else through the
/// register-tiled kernel (up to 2 rows x 4 columns, 4 rows x 1).
///
/// # Safety
/// As [`crate::simd::TileFn`] with `mr` at most 8 for one column; the CPU
/// must have AVX2, FMA and F16C.
pub unsafe fn tile_q4_0(
    k: usize,
    a: *const u8,
    lda: usize,
    mr: usize,
    b: &[*const u8],
    c: &[*mut f32],
    acc: bool,
) {
    // SAFETY: forwarded contract; the split keeps every call within it.
    unsafe {
        match (b.len(), mr) {
            (1, ROWS) => q4_0_rows8(k, a, lda, b[0], c[0], acc),
            (1, 5..) => {
                super::legacy::tile_q4_0(k, a, lda, 4, b, c, acc);
                let rest = a.wrapping_add(4 * lda);
                super::legacy::tile_q4_0(k, rest, lda, mr - 4, b, &[c[0].add(4)], acc);
            }
            _ => super::legacy::tile_q4_0(k, a, lda, mr, b, c, acc),
        }
    }
}

/// Eight rows of q8_0 weights times one q8_0 activation row over `k`
/// weights, rows as lanes: an 8 x 8 transpose of the rows' 32 quant bytes
/// per block, then the sign trick (`maddubs(|q|, sign(y, q))`) against
/// four broadcast activation quants and 32-bit sums; one conversion and
/// scale multiply per block for all eight rows.
///
/// # Safety
/// All eight rows and `b` must cover `k / 32` blocks, `c` eight floats;
/// the CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q8_0_rows8(k: usize, a: *const u8, lda: usize, b: *const u8, c: *mut f32, acc: bool) {
    const A8_BYTES: usize = 34;
    let ap: [*const u8; ROWS] = std::array::from_fn(|r| a.wrapping_add(r * lda));
    let ones = _mm256_set1_epi16(1);
    let mut sum = _mm256_setzero_ps();
    for i in 0..k / 32 {
        let off = i * A8_BYTES;
        if i % 2 == 0 {
            for p in ap {
                prefetch(p.wrapping_add(off + PREFETCH_AHEAD));
            }
        }
        // SAFETY: block i lies within every row and the activation row.
        unsafe {
            let mut q: [__m256; 8] =
                std::array::from_fn(|r| _mm256_castsi256_ps(load256(ap[r].add(off + 2))));
            super::gemm::transpose8(&mut q);
            let bq = b.add(i * B_BYTES + 2).cast::<i32>();
            let mut isum = _mm256_setzero_si256();
            for (t, qt) in q.iter().enumerate() {
                let v = _mm256_castps_si256(*qt);
                let y = _mm256_sign_epi8(_mm256_set1_epi32(bq.add(t).read_unaligned()), v);
                let p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), y);
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, ones));
            }
            let dh: [u16; ROWS] =
                std::array::from_fn(|r| ap[r].add(off).cast::<u16>().read_unaligned());
            let da = _mm256_cvtph_ps(_mm_loadu_si128(dh.as_ptr().cast()));
            let db = _mm256_set1_ps(super::h2f(b.add(i * B_BYTES)));
            sum = _mm256_fmadd_ps(_mm256_mul_ps(da, db), _mm256_cvtepi32_ps(isum), sum);
        }
    }
    let mut t = [0.0f32; ROWS];
    // SAFETY: t holds eight floats; c covers eight outputs.
    unsafe {
        _mm256_storeu_ps(t.as_mut_ptr(), sum);
        for (r, &v) in t.iter().enumerate() {
            put(c.add(r), v, acc);
        }
    }
}

/// [`crate::simd::TileFn`] for q8_0 weights: whole groups of eight rows
/// of a single column through [`q8_0_rows8`], everything else through the
/// register-tiled kernel (up to 2 rows x 4 columns, 4 rows x 1).
///
/// # Safety
/// As [`crate::simd::TileFn`] with `mr` at most 8 for one column; the CPU
/// must have AVX2, FMA and F16C.
pub unsafe fn tile_q8_0(
    k: usize,
    a: *const u8,
    lda: usize,
    mr: usize,
    b: &[*const u8],
    c: &[*mut f32],
    acc: bool,
) {
    // SAFETY: forwarded contract; the split keeps every call within it.
    unsafe {
        match (b.len(), mr) {
            (1, ROWS) => q8_0_rows8(k, a, lda, b[0], c[0], acc),
            (1, 5..) => {
                super::legacy::tile_q8_0(k, a, lda, 4, b, c, acc);
                let rest = a.wrapping_add(4 * lda);
                super::legacy::tile_q8_0(k, rest, lda, mr - 4, b, &[c[0].add(4)], acc);
            }
            _ => super::legacy::tile_q8_0(k, a, lda, mr, b, c, acc),
        }
    }
}

/// q4_K super-block bytes and the q8_K block bytes / field offsets.
const K4_BYTES: usize = 144;
const K8_BYTES: usize = 292;
const K8_QS: usize = 4;
const K8_BSUMS: usize = 260;

/// Shuffle masks that broadcast 16-bit scale `i` to every lane.
const K4_SHUF: [[u8; 32]; 8] = {
    let mut m = [[0u8; 32]; 8];
    let mut i = 0;
    while i < 8 {
        let mut l = 0;
        while l < 16 {
            m[i][2 * l] = 2 * i as u8;
            m[i][2 * l + 1] = 2 * i as u8 + 1;
            l += 1;
        }
        i += 1;
    }
    m
};

/// Up to `RM` rows of q4_K weights times one q8_K activation row, the
/// way ggml's AVX2 `vec_dot_q4_K_q8_K` does one row (8-bit scales widened
/// once per super-block, `maddubs` then `madd` with the broadcast scale,
/// mins through the pairwise sums of `bsums`), rows interleaved per
/// super-block so they share the activation loads in L1.
///
/// # Safety
/// `mr <= RM` rows (`lda` bytes apart) and `b` must cover `k / 256`
/// super-blocks, `c` `mr` floats; the CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_k_rows<const RM: usize>(
    k: usize,
    a: *const u8,
    lda: usize,
    b: *const u8,
    c: *mut f32,
    acc: bool,
) {
    const KMASK1: i32 = 0x3f3f3f3f;
    const KMASK2: i32 = 0x0f0f0f0f;
    const KMASK3: i32 = 0x03030303;
    let kmask_lo = _mm_setr_epi32(KMASK1, KMASK2, KMASK1, KMASK2);
    // (u >> 6 & m3) << 4 == u >> 2 & (m3 << 4) byte by byte.
    let kmask_hi = _mm_setr_epi32(0, KMASK3 << 4, 0, KMASK3 << 4);
    let shift = _mm_setr_epi32(0, 0, 0, 4);
    let m4 = _mm256_set1_epi8(0x0F);
    let mut sum = [_mm256_setzero_ps(); RM];
    let mut summ = [_mm_setzero_ps(); RM];
    for i in 0..k / 256 {
        // SAFETY: super-block i lies within every row and the activations.
        unsafe {
            let y = b.add(i * K8_BYTES);
            let db = y.cast::<f32>().read_unaligned();
            let bs = load256(y.add(K8_BSUMS));
            let q8s = _mm_hadd_epi16(
                _mm256_castsi256_si128(bs),
                _mm256_extracti128_si256::<1>(bs),
            );
            for r in 0..RM {
                let x = a.add(r * lda + i * K4_BYTES);
                for l in (0..K4_BYTES).step_by(64) {
                    prefetch(x.wrapping_add(l + PREFETCH_AHEAD));
                }
                // d and dmin (two f16) times the activations' scale.
                let dd = _mm_cvtph_ps(_mm_cvtsi32_si128(x.cast::<i32>().read_unaligned()));
                let dd = _mm_mul_ps(dd, _mm_set1_ps(db));
                let d = _mm256_broadcastss_ps(dd);
                // ggml's 6-bit scale / min unpacking, on four 32-bit lanes
                // at once: [u0 & m1, (u2 & m2) | (u0 >> 6 & m3) << 4,
                // u1 & m1, (u2 >> 4 & m2) | (u1 >> 6 & m3) << 4].
                let u = load128(x.add(4));
                let lo = _mm_srlv_epi32(_mm_shuffle_epi32::<0b10_01_10_00>(u), shift);
                let lo = _mm_and_si128(lo, kmask_lo);
                let hi = _mm_srli_epi32::<2>(_mm_shuffle_epi32::<0b01_01_00_00>(u));
                let ms = _mm256_cvtepu8_epi16(_mm_or_si128(lo, _mm_and_si128(hi, kmask_hi)));
                let prod = _mm_madd_epi16(_mm256_extracti128_si256::<1>(ms), q8s);
                let dmin = _mm_permute_ps::<0b01_01_01_01>(dd);
                summ[r] = _mm_fnmadd_ps(dmin, _mm_cvtepi32_ps(prod), summ[r]);
                let sc = _mm256_permute2x128_si256::<0x00>(ms, ms);
                let mut sumi = _mm256_setzero_si256();
                for j in 0..4 {
                    let sl = _mm256_shuffle_epi8(sc, load256(K4_SHUF[2 * j].as_ptr()));
                    let sh = _mm256_shuffle_epi8(sc, load256(K4_SHUF[2 * j + 1].as_ptr()));
                    let q4 = load256(x.add(16 + 32 * j));
                    let q4l = _mm256_and_si256(q4, m4);
                    let q4h = _mm256_and_si256(_mm256_srli_epi16::<4>(q4), m4);
                    let q8l = load256(y.add(K8_QS + 64 * j));
                    let q8h = load256(y.add(K8_QS + 64 * j + 32));
                    let pl = _mm256_madd_epi16(sl, _mm256_maddubs_epi16(q4l, q8l));
                    let ph = _mm256_madd_epi16(sh, _mm256_maddubs_epi16(q4h, q8h));
                    sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
                }
                sum[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), sum[r]);
            }
        }
    }
    for r in 0..RM {
        let m = summ[r];
        let m = _mm_add_ps(m, _mm_movehl_ps(m, m));
        let m = _mm_add_ss(m, _mm_movehdup_ps(m));
        // SAFETY: c covers RM outputs.
        unsafe { put(c.add(r), super::hsum(sum[r]) + _mm_cvtss_f32(m), acc) };
    }
}

/// Eight q4_K rows' super-block header, one row per 32-bit lane.
pub(super) struct K4Lanes {
    /// `d` of each row.
    pub d: __m256,
    /// `dmin` of each row.
    pub dmin: __m256,
    /// Per 32-weight sub-block, each row's scale in both 16-bit halves.
    pub sc: [__m256i; 8],
    /// Per pair of sub-blocks `2p, 2p + 1`, each row's two mins.
    pub mn: [__m256i; 4],
}

/// Unpacks the headers (`d`, `dmin`, 6-bit scales and mins, as ggml's
/// `utmp` shuffle) of the q4_K super-blocks at `p`, rows as lanes.
///
/// # Safety
/// Every `p[r]` must cover a q4_K super-block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn k4_lanes(p: [*const u8; ROWS]) -> K4Lanes {
    // SAFETY: caller's contract.
    k4_lanes_of(unsafe { rows16(p) })
}

/// As [`k4_lanes`], from the headers' 4-byte slices already in lanes:
/// vector `g` holds bytes `4g..4g + 4` of every row's first 16 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn k4_lanes_of([dd, u0, u1, u2]: [__m256i; 4]) -> K4Lanes {
    let k1 = _mm256_set1_epi32(0x3f3f3f3f);
    let k2 = _mm256_set1_epi32(0x0f0f0f0f);
    // (u >> 6 & 0x03..) << 4 == u >> 2 & 0x30.. byte by byte.
    let k3 = _mm256_set1_epi32(0x30303030);
    // Shuffles: byte 4l (+ j) of every 32-bit lane l to both of its 16-bit
    // halves (`spread`), bytes 4l, 4l + 1 (+ j) to one half each (`pairs`);
    // 0x80 bytes (still negative after adding j < 4) clear.
    let m = |a: u32, b: u32, c: u32, d: u32| {
        let [a, b, c, d] = [a, b, c, d].map(|x| x as i32);
        _mm256_setr_epi32(a, b, c, d, a, b, c, d)
    };
    let spread = m(0x80008000, 0x80048004, 0x80088008, 0x800C800C);
    let pairs = m(0x80018000, 0x80058004, 0x80098008, 0x800D800C);
    // Bytes of scales 0..4, 4..8 and mins 0..4, 4..8 of every row.
    let s0 = _mm256_and_si256(u0, k1);
    let s1 = _mm256_or_si256(
        _mm256_and_si256(u2, k2),
        _mm256_and_si256(_mm256_srli_epi32::<2>(u0), k3),
    );
    let n0 = _mm256_and_si256(u1, k1);
    let n1 = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi32::<4>(u2), k2),
        _mm256_and_si256(_mm256_srli_epi32::<2>(u1), k3),
    );
    K4Lanes {
        d: halves_to_f32::<false>(dd),
        dmin: halves_to_f32::<true>(dd),
        sc: std::array::from_fn(|s| {
            let v = if s < 4 { s0 } else { s1 };
            _mm256_shuffle_epi8(v, _mm256_add_epi8(spread, _mm256_set1_epi8((s % 4) as i8)))
        }),
        mn: std::array::from_fn(|p| {
            let v = if p < 2 { n0 } else { n1 };
            let j = (2 * p % 4) as i8;
            _mm256_shuffle_epi8(v, _mm256_add_epi8(pairs, _mm256_set1_epi8(j)))
        }),
    }
}

/// Each row's `sum over sub-blocks of min * (sum of its 32 q8)` for the
/// q8_K block at `y`, two sub-blocks per `madd`.
///
/// # Safety
/// `y` must cover a q8_K block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn k4_min_sum(mn: &[__m256i; 4], y: *const u8) -> __m256i {
    // SAFETY: caller's contract.
    let bs = unsafe { load256(y.add(K8_BSUMS)) };
    let q8s = _mm_hadd_epi16(
        _mm256_castsi256_si128(bs),
        _mm256_extracti128_si256::<1>(bs),
    );
    let q8s = _mm256_castsi128_si256(q8s);
    let mut msum = _mm256_setzero_si256();
    for (p, w) in mn.iter().enumerate() {
        let bp = _mm256_permutevar8x32_epi32(q8s, _mm256_set1_epi32(p as i32));
        msum = _mm256_add_epi32(msum, _mm256_madd_epi16(*w, bp));
    }
    msum
}

/// Eight rows of q4_K weights times one q8_K activation row, rows as
/// lanes as for q4_0: per 64-weight chunk an 8 x 8 transpose of the rows'
/// 32 quant bytes, `maddubs` with broadcast activation quants summed in 16
/// bits per 32-weight sub-block (at most 8 * 2 * 15 * 127 < 2^15), then one
/// `madd` with the eight rows' scales of that sub-block. Scales, mins, `d`
/// and `dmin` of the eight rows are unpacked together from one 4 x 4
/// transpose of each row's first 16 bytes.
///
/// # Safety
/// All eight rows (`lda` bytes apart) and `b` must cover `k / 256`
/// super-blocks, `c` eight floats; the CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_k_rows8(k: usize, a: *const u8, lda: usize, b: *const u8, c: *mut f32, acc: bool) {
    let ap: [*const u8; ROWS] = std::array::from_fn(|r| a.wrapping_add(r * lda));
    let m4 = _mm256_set1_epi8(0x0F);
    let mut sum = _mm256_setzero_ps();
    for i in 0..k / 256 {
        let off = i * K4_BYTES;
        for p in ap {
            for l in (0..K4_BYTES).step_by(64) {
                prefetch(p.wrapping_add(off + l + PREFETCH_AHEAD));
            }
        }
        // SAFETY: super-block i lies within every row and the activations.
        unsafe {
            let y = b.add(i * K8_BYTES);
            let db = _mm256_set1_ps(y.cast::<f32>().read_unaligned());
            let s = k4_lanes(std::array::from_fn(|r| ap[r].add(off)));
            let mut isum = _mm256_setzero_si256();
            for j in 0..4 {
                let mut q: [__m256; 8] = std::array::from_fn(|r| {
                    _mm256_castsi256_ps(load256(ap[r].add(off + 16 + 32 * j)))
                });
                super::gemm::transpose8(&mut q);
                let bq = y.add(K8_QS + 64 * j).cast::<i32>();
                let mut lo16 = _mm256_setzero_si256();
                let mut hi16 = _mm256_setzero_si256();
                for (t, qt) in q.iter().enumerate() {
                    let v = _mm256_castps_si256(*qt);
                    let lo = _mm256_and_si256(v, m4);
                    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), m4);
                    let blo = _mm256_set1_epi32(bq.add(t).read_unaligned());
                    let bhi = _mm256_set1_epi32(bq.add(8 + t).read_unaligned());
                    lo16 = _mm256_add_epi16(lo16, _mm256_maddubs_epi16(lo, blo));
                    hi16 = _mm256_add_epi16(hi16, _mm256_maddubs_epi16(hi, bhi));
                }
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(lo16, s.sc[2 * j]));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(hi16, s.sc[2 * j + 1]));
            }
            let msum = k4_min_sum(&s.mn, y);
            sum = _mm256_fmadd_ps(_mm256_mul_ps(s.d, db), _mm256_cvtepi32_ps(isum), sum);
            sum = _mm256_fnmadd_ps(_mm256_mul_ps(s.dmin, db), _mm256_cvtepi32_ps(msum), sum);
        }
    }
    let mut t = [0.0f32; ROWS];
    // SAFETY: t holds eight floats; c covers eight outputs.
    unsafe {
        _mm256_storeu_ps(t.as_mut_ptr(), sum);
        for (r, &v) in t.iter().enumerate() {
            put(c.add(r), v, acc);
        }
    }
}

/// [`crate::simd::TileFn`] for q4_K weights: one column through
/// [`q4_k_rows8`] for whole groups of eight rows, [`q4_k_rows`] a row at a
/// time for the rest, several through the register-tiled
/// kernel (up to 2 rows x 4 columns).
///
/// # Safety
/// As [`crate::simd::TileFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn tile_q4_k(
    k: usize,
    a: *const u8,
    lda: usize,
    mr: usize,
    b: &[*const u8],
    c: &[*mut f32],
    acc: bool,
) {
    // SAFETY: forwarded contract.
    unsafe {
        match (b.len(), mr) {
            (1, ROWS) => q4_k_rows8(k, a, lda, b[0], c[0], acc),
            (1, _) => {
                // One row at a time: the 4-row form runs out of registers.
                for r in 0..mr {
                    q4_k_rows::<1>(k, a.wrapping_add(r * lda), lda, b[0], c[0].add(r), acc);
                }
            }
            _ => super::kquants::tile_q4_k(k, a, lda, mr, b, c, acc),
        }
    }
}
