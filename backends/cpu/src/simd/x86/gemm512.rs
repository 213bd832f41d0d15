//! The packed float GEMM of [`super::gemm`] on 512-bit vectors, for CPUs
//! with AVX-512F.
//!
//! Same packed layouts (groups of 16 weight rows per K step, f32 or f16;
//! activations packed by [`crate::simd::pack_columns`]), but one call
//! takes two such groups, 32 rows in two vectors, and up to [`NR`]
//! columns: `2 x NR` accumulators of 16 outputs each, every loaded weight
//! vector used `NR` times and every broadcast activation twice. Each
//! output still sums its K products one at a time in K order, so the
//! results are bit-identical to the 256-bit kernel's.

use std::arch::x86_64::*;

use super::first;
use super::float::{BF16, F16, F32};
use super::gemm::{MR as GROUP_ROWS, pack};

/// Weight rows per micro-tile (two packed groups).
pub const MR: usize = 2 * GROUP_ROWS;
/// Most activation columns per micro-tile.
pub const NR: usize = 8;

/// Whether this CPU runs the kernels of this module.
pub fn available() -> bool {
    is_x86_feature_detected!("avx512f")
}

/// [`crate::simd::PackFn`] for f32 weights (two 16-row groups per call).
///
/// # Safety
/// As [`crate::simd::PackFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_f32(a: *const u8, lda: usize, rows: usize, k0: usize, kc: usize, d: *mut u8) {
    // SAFETY: forwarded contract.
    unsafe { pack::<F32, false, 2>(a, lda, rows, k0, kc, d) }
}

/// [`crate::simd::PackFn`] for f16 weights kept in f16 ([`panel_f16`]).
///
/// # Safety
/// As [`crate::simd::PackFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_f16_half(
    a: *const u8,
    lda: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    d: *mut u8,
) {
    // SAFETY: forwarded contract.
    unsafe { pack::<F16, true, 2>(a, lda, rows, k0, kc, d) }
}

/// [`crate::simd::PackFn`] for bf16 weights (packed as f32).
///
/// # Safety
/// As [`crate::simd::PackFn`]; the CPU must have AVX2, FMA and F16C.
pub unsafe fn pack_bf16(a: *const u8, lda: usize, rows: usize, k0: usize, kc: usize, d: *mut u8) {
    // SAFETY: forwarded contract.
    unsafe { pack::<BF16, false, 2>(a, lda, rows, k0, kc, d) }
}

/// Loads the 16 packed weights of step `k` of group `g` (0 or 1) of a
/// call's block `a` of `kc` steps, f16 (`H`) or f32.
///
/// # Safety
/// The block must hold two groups of `kc` steps.
#[inline(always)]
unsafe fn weights<const H: bool>(a: *const u8, kc: usize, g: usize, k: usize) -> __m512 {
    let at = (g * kc + k) * GROUP_ROWS;
    // SAFETY: caller's contract.
    unsafe {
        if H {
            _mm512_cvtph_ps(_mm256_loadu_si256(a.cast::<u16>().add(at).cast()))
        } else {
            _mm512_loadu_ps(a.cast::<f32>().add(at))
        }
    }
}

/// One `MR x N` micro-tile: `kc` steps of two packed groups `a` times the
/// packed f32 columns `b`, written (or added) to the `mr` first outputs
/// of each `c`.
///
/// # Safety
/// As [`crate::simd::PanelFn`], with `c.len() == N` and `b` holding
/// `kc * N` floats.
#[target_feature(enable = "avx512f")]
unsafe fn micro<const N: usize, const H: bool>(
    kc: usize,
    a: *const u8,
    b: *const f32,
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: the caller passes N pointers.
    let cp: [*mut f32; N] = unsafe { first(c) };
    let mut sum = [[_mm512_setzero_ps(); 2]; N];
    for k in 0..kc {
        // SAFETY: the packed block holds two groups of kc steps and the
        // columns kc steps of N values.
        unsafe {
            let a0 = weights::<H>(a, kc, 0, k);
            let a1 = weights::<H>(a, kc, 1, k);
            for j in 0..N {
                let bv = _mm512_set1_ps(*b.add(k * N + j));
                sum[j][0] = _mm512_fmadd_ps(a0, bv, sum[j][0]);
                sum[j][1] = _mm512_fmadd_ps(a1, bv, sum[j][1]);
            }
        }
    }
    for j in 0..N {
        for h in 0..2 {
            // SAFETY: c[j] covers mr outputs, those of this half from
            // h * GROUP_ROWS.
            unsafe {
                let live = mr.saturating_sub(h * GROUP_ROWS);
                if live > 0 {
                    super::store_lanes16(cp[j].add(h * GROUP_ROWS), sum[j][h], live, acc);
                }
            }
        }
    }
}

/// Dispatches a panel call to the micro-tile of its width.
///
/// # Safety
/// As [`crate::simd::PanelFn`]; the CPU must have AVX-512F.
#[inline(always)]
unsafe fn panel_of<const H: bool>(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    let Some(&bp) = b.first() else {
        return;
    };
    let bp = bp.cast::<f32>();
    // SAFETY: forwarded contract; features checked by the caller.
    unsafe {
        match b.len() {
            8 => micro::<8, H>(kc, a, bp, c, mr, acc),
            7 => micro::<7, H>(kc, a, bp, c, mr, acc),
            6 => micro::<6, H>(kc, a, bp, c, mr, acc),
            5 => micro::<5, H>(kc, a, bp, c, mr, acc),
            4 => micro::<4, H>(kc, a, bp, c, mr, acc),
            3 => micro::<3, H>(kc, a, bp, c, mr, acc),
            2 => micro::<2, H>(kc, a, bp, c, mr, acc),
            1 => micro::<1, H>(kc, a, bp, c, mr, acc),
            _ => debug_assert!(false, "panel width outside the kernel's contract"),
        }
    }
}

/// [`crate::simd::PanelFn`]: up to [`MR`] rows packed as f32 x [`NR`]
/// packed columns (`b[0]` at their panel, [`crate::simd::Gemm::b_packed`]).
///
/// # Safety
/// As [`crate::simd::PanelFn`]; the CPU must have AVX-512F.
pub unsafe fn panel(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    _s: &[*const f32],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: forwarded contract.
    unsafe { panel_of::<false>(kc, a, b, c, mr, acc) }
}

/// [`crate::simd::PanelFn`]: up to [`MR`] rows packed as f16
/// ([`pack_f16_half`]) x [`NR`] packed columns.
///
/// # Safety
/// As [`crate::simd::PanelFn`]; the CPU must have AVX-512F.
pub unsafe fn panel_f16(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    _s: &[*const f32],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
) {
    // SAFETY: forwarded contract.
    unsafe { panel_of::<true>(kc, a, b, c, mr, acc) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::x86::gemm;

    /// Runs one panel call of `panel` over `rows` packed by `pack`, for
    /// `n` columns, returning the outputs column by column.
    fn run(
        (pack, panel, mr): (crate::simd::PackFn, crate::simd::PanelFn, usize),
        w: &[u8],
        es: usize,
        rows: usize,
        kc: usize,
        cols: &[Vec<f32>],
    ) -> Vec<f32> {
        let n = cols.len();
        let mut packed = vec![0u8; rows.div_ceil(mr) * mr * kc * 4];
        let mut b = vec![0f32; kc * n];
        let ptrs: Vec<*const f32> = cols.iter().map(|c| c.as_ptr()).collect();
        let mut out = vec![0f32; rows * n];
        // SAFETY: sizes as the kernels' contracts ask.
        unsafe {
            pack(w.as_ptr(), kc * es, rows, 0, kc, packed.as_mut_ptr());
            crate::simd::pack_columns(&ptrs, 0, kc, b.as_mut_ptr());
            for r0 in (0..rows).step_by(mr) {
                let bp = vec![b.as_ptr().cast::<u8>(); n];
                let cp: Vec<*mut f32> = (0..n)
                    .map(|j| out.as_mut_ptr().add(j * rows + r0))
                    .collect();
                let blk = packed.as_ptr().add(r0 / mr * kc * mr * es.min(4));
                panel(kc, blk, &bp, &[], &cp, mr.min(rows - r0), false);
            }
        }
        out
    }

    #[test]
    fn matches_the_256_bit_kernel_bit_for_bit() {
        if !(available() && crate::simd::x86::available()) {
            return;
        }
        let (rows, kc) = (45, 37);
        let mut seed = 7u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        let w32: Vec<f32> = (0..rows * kc).map(|_| next()).collect();
        let w16: Vec<u8> = w32
            .iter()
            .flat_map(|&x| half::f16::from_f32(x).to_bits().to_le_bytes())
            .collect();
        let w32b: Vec<u8> = w32.iter().flat_map(|x| x.to_le_bytes()).collect();
        for n in 1..=NR {
            let cols: Vec<Vec<f32>> = (0..n).map(|_| (0..kc).map(|_| next()).collect()).collect();
            let narrow = n.min(gemm::NR);
            let cols_narrow = &cols[..narrow];
            let want16 = run(
                (gemm::pack_f16_half, gemm::panel_f16, gemm::MR),
                &w16,
                2,
                rows,
                kc,
                cols_narrow,
            );
            let got16 = run(
                (pack_f16_half, panel_f16, MR),
                &w16,
                2,
                rows,
                kc,
                cols_narrow,
            );
            assert_eq!(want16, got16, "f16, {narrow} columns");
            let want32 = run(
                (gemm::pack_f32, gemm::panel, gemm::MR),
                &w32b,
                4,
                rows,
                kc,
                cols_narrow,
            );
            let got32 = run((pack_f32, panel, MR), &w32b, 4, rows, kc, cols_narrow);
            assert_eq!(want32, got32, "f32, {narrow} columns");
            // The widths the 256-bit kernel has no tile for, against f64.
            let all = run((pack_f16_half, panel_f16, MR), &w16, 2, rows, kc, &cols);
            for j in 0..n {
                for r in 0..rows {
                    let want: f64 = (0..kc)
                        .map(|k| {
                            let w = half::f16::from_f32(w32[r * kc + k]).to_f32();
                            w as f64 * cols[j][k] as f64
                        })
                        .sum();
                    let got = all[j * rows + r] as f64;
                    assert!(
                        (got - want).abs() < 1e-4,
                        "row {r} column {j}: {got} vs {want}"
                    );
                }
            }
        }
    }
}
