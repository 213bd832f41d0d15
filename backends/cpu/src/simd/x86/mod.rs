//! x86-64 kernels for AVX2 + FMA + F16C CPUs.
//!
//! Every function here carries `#[target_feature]` and is only reached
//! through [`kernel`], which [`super::Kernels`] calls after [`available`]
//! has confirmed the features at run time.
//!
//! Float weights use register-blocked tiles in the manner of llamafile's
//! tinyBLAS: `RM` weight rows x `RN` activation columns accumulate in
//! `RM * RN` vector registers along K, each loaded vector reused `RN` (or
//! `RM`) times. Block-quantized weights do the same per block: a weight
//! block is unpacked once and multiplied with the `RN` columns' int8 blocks
//! (`maddubs`/`madd`), see [`legacy`] and [`kquants`].
//!
//! Two further forms put weight rows in vector lanes instead of K: the
//! packed GEMMs used with many columns ([`gemm`] for float weights,
//! [`qgemm`] for q4_0 / q8_0, [`kgemm`] for q4_K, [`k6gemm`] for q6_K),
//! which pack a block of weight rows once and reuse it for every column,
//! and the eight-row mat-vec kernels of [`gemv`] (q4_0, q8_0, q4_K), which
//! transpose on the fly. Where the CPU has AVX-512 the packed GEMMs run on
//! 512-bit vectors over twice the rows ([`gemm512`], [`qgemm512`],
//! [`kgemm512`], [`k6gemm::panel_q6_k_512`]), bit-identical to their
//! 256-bit forms.

pub mod convert;
mod float;
mod gemm;
mod gemm512;
mod gemv;
mod k6gemm;
mod kgemm;
mod kgemm512;
mod kquants;
mod legacy;
mod qgemm;
mod qgemm512;
mod repacked;
pub mod vecmath;

use std::arch::x86_64::*;

use backplane_abi::DType;

use super::{Gemm, Isa, MatKernel, PackFn};

/// Whether this CPU runs the kernels of this module.
pub fn available() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

/// Whether this CPU has AVX-512 VNNI with 256-bit vectors (VL).
pub(super) fn vnni() -> bool {
    is_x86_feature_detected!("avx512vnni") && is_x86_feature_detected!("avx512vl")
}

/// The AVX2 kernel for weights of type `dtype`. Only call when
/// [`available`] returned true.
pub fn kernel(dtype: DType) -> Option<MatKernel> {
    let k = |tile, mr, nr, kc| MatKernel {
        tile,
        mr,
        mr_vec: 4,
        nr,
        kc,
        isa: Isa::Avx2,
        gemm: None,
    };
    let with_gemm = |kern: MatKernel, pack: PackFn| MatKernel {
        gemm: Some(float_gemm(pack)),
        ..kern
    };
    let with_qgemm = |kern: MatKernel, (pack, panel, mr, group_bytes): QPanel, nr, mc| MatKernel {
        gemm: Some(Gemm {
            pack,
            panel,
            vt: DType::Q8_0,
            b_scales: true,
            b_packed: false,
            mr,
            nr,
            group_bytes,
            mc,
            nc: 16 * nr,
            kc: 1024,
            min_n: 16,
        }),
        ..kern
    };
    Some(match dtype {
        DType::F32 => with_gemm(
            k(float::tile_f32, 4, 3, 512),
            wide_or(gemm512::pack_f32, gemm::pack_f32),
        ),
        DType::F16 => MatKernel {
            gemm: Some(Gemm {
                pack: wide_or(gemm512::pack_f16_half, gemm::pack_f16_half),
                panel: wide_or(gemm512::panel_f16, gemm::panel_f16),
                group_bytes: 2 * wide_or(gemm512::MR, gemm::MR),
                // Longer calls (fewer output passes); the f16 block of
                // 256 x 1024 weights fills L2 as 128 x 256 f32 ones do not.
                mc: 256,
                kc: 1024,
                ..float_gemm(gemm::pack_f16)
            }),
            ..k(float::tile_f16, 4, 3, 1024)
        },
        DType::BF16 => with_gemm(
            k(float::tile_bf16, 4, 3, 1024),
            wide_or(gemm512::pack_bf16, gemm::pack_bf16),
        ),
        DType::Q4_0 => with_qgemm(
            MatKernel {
                mr_vec: gemv::ROWS,
                ..k(gemv::tile_q4_0, 2, 4, 4096)
            },
            if wide_q() {
                (
                    qgemm::pack_q4_0_x2,
                    qgemm512::panel_q4_0,
                    qgemm512::MR,
                    qgemm512::GROUP_BYTES_Q4_0,
                )
            } else if vnni() {
                (
                    qgemm::pack_q4_0,
                    qgemm::panel_q4_0_vnni,
                    qgemm::MR,
                    qgemm::GROUP_BYTES_Q4_0,
                )
            } else {
                (
                    qgemm::pack_q4_0,
                    qgemm::panel_q4_0,
                    qgemm::MR,
                    qgemm::GROUP_BYTES_Q4_0,
                )
            },
            6,
            128,
        ),
        DType::Q4_1 => k(legacy::tile_q4_1, 2, 4, 4096),
        DType::Q5_0 => k(legacy::tile_q5_0, 2, 4, 4096),
        DType::Q5_1 => k(legacy::tile_q5_1, 2, 4, 4096),
        DType::Q8_0 => with_qgemm(
            MatKernel {
                mr_vec: gemv::ROWS,
                ..k(gemv::tile_q8_0, 2, 4, 4096)
            },
            if wide_q() {
                (
                    qgemm::pack_q8_0_x2,
                    qgemm512::panel_q8_0,
                    qgemm512::MR,
                    qgemm512::GROUP_BYTES_Q8_0,
                )
            } else if vnni() {
                (
                    qgemm::pack_q8_0,
                    qgemm::panel_q8_0_vnni,
                    qgemm::MR,
                    qgemm::GROUP_BYTES_Q8_0,
                )
            } else {
                (
                    qgemm::pack_q8_0,
                    qgemm::panel_q8_0,
                    qgemm::MR,
                    qgemm::GROUP_BYTES_Q8_0,
                )
            },
            4,
            64,
        ),
        DType::Q2_K => k(kquants::tile_q2_k, 2, 4, 4096),
        DType::Q3_K => k(kquants::tile_q3_k, 2, 4, 4096),
        DType::Q4_K => MatKernel {
            mr_vec: gemv::ROWS,
            gemm: Some(k_gemm(if wide_q() {
                (
                    kgemm::pack_q4_k_x2,
                    kgemm512::panel_q4_k,
                    kgemm512::MR,
                    kgemm512::GROUP_BYTES,
                )
            } else {
                (
                    kgemm::pack_q4_k,
                    if vnni() {
                        kgemm::panel_q4_k_vnni
                    } else {
                        kgemm::panel_q4_k
                    },
                    kgemm::MR,
                    kgemm::GROUP_BYTES,
                )
            })),
            ..k(gemv::tile_q4_k, 2, 4, 4096)
        },
        DType::Q5_K => k(kquants::tile_q5_k, 2, 4, 4096),
        DType::Q6_K => k(kquants::tile_q6_k, 2, 4, 4096),
        _ => return None,
    })
}

/// The kernel for weights of type `dtype` in the repacked layout of
/// [`crate::repack`] (AVX-512 VNNI tiles where the CPU has them), with
/// the packed GEMM reading the same layout. Only call when [`available`]
/// returned true.
pub fn repacked_kernel(dtype: DType) -> Option<MatKernel> {
    let vnni = vnni();
    let (tile, pack, base): (super::TileFn, PackFn, DType) = match dtype {
        DType::Q4_0 if wide_q() => (
            repacked::tile_q4_0x8_vnni,
            qgemm::pack_q4_0x8_x2,
            DType::Q4_0,
        ),
        DType::Q4_0 if vnni => (repacked::tile_q4_0x8_vnni, qgemm::pack_q4_0x8, DType::Q4_0),
        DType::Q4_0 => (repacked::tile_q4_0x8, qgemm::pack_q4_0x8, DType::Q4_0),
        DType::Q8_0 if wide_q() => (
            repacked::tile_q8_0x8_vnni,
            qgemm::pack_q8_0x8_x2,
            DType::Q8_0,
        ),
        DType::Q8_0 if vnni => (repacked::tile_q8_0x8_vnni, qgemm::pack_q8_0x8, DType::Q8_0),
        DType::Q8_0 => (repacked::tile_q8_0x8, qgemm::pack_q8_0x8, DType::Q8_0),
        DType::Q4_K if wide_q() => (
            repacked::tile_q4_kx8_vnni,
            kgemm::pack_q4_kx8_x2,
            DType::Q4_K,
        ),
        DType::Q4_K if vnni => (repacked::tile_q4_kx8_vnni, kgemm::pack_q4_kx8, DType::Q4_K),
        DType::Q4_K => (repacked::tile_q4_kx8, kgemm::pack_q4_kx8, DType::Q4_K),
        DType::Q6_K if vnni => (repacked::tile_q6_kx8_vnni, no_pack, DType::Q6_K),
        DType::Q6_K => (repacked::tile_q6_kx8, no_pack, DType::Q6_K),
        DType::F16 => (
            repacked::tile_f16x8,
            wide_or(gemm::pack_f16x8_half_x2, gemm::pack_f16x8_half),
            DType::F16,
        ),
        _ => return None,
    };
    let ggml = kernel(base)?;
    Some(MatKernel {
        tile,
        mr: gemv::ROWS,
        mr_vec: gemv::ROWS,
        nr: 4,
        // Whole K per tile call: a repacked group's blocks are not at the
        // byte offsets a K panel of ggml rows would start at.
        kc: usize::MAX,
        isa: Isa::Avx2,
        gemm: match ggml.gemm {
            Some(g) => Some(Gemm { pack, ..g }),
            // q6_K has a packed GEMM only from the repacked layout.
            None if dtype == DType::Q6_K && wide_q() => Some(k_gemm((
                k6gemm::pack_q6_kx8_x2,
                k6gemm::panel_q6_k_512,
                2 * k6gemm::MR,
                2 * k6gemm::GROUP_BYTES,
            ))),
            None if dtype == DType::Q6_K && vnni => Some(k_gemm((
                k6gemm::pack_q6_kx8,
                k6gemm::panel_q6_k_vnni,
                k6gemm::MR,
                k6gemm::GROUP_BYTES,
            ))),
            None => None,
        },
    })
}

/// The packed GEMM of a K-quant (q4_K, q6_K) against q8_K activations,
/// with the pack, panel, rows per group and packed bytes of `panel`.
fn k_gemm((pack, panel, mr, group_bytes): QPanel) -> Gemm {
    Gemm {
        pack,
        panel,
        vt: DType::Q8_K,
        b_scales: false,
        b_packed: false,
        mr,
        nr: 4,
        group_bytes,
        mc: 64,
        nc: 64,
        kc: 1024,
        min_n: 16,
    }
}

/// Stands in for a pack function where the weight type has no packed GEMM
/// (never called: `gemm` is then `None`).
unsafe fn no_pack(_: *const u8, _: usize, _: usize, _: usize, _: usize, _: *mut u8) {}

/// What this module's kernels run on here, for [`super::Kernels::describe`].
pub fn describe() -> String {
    let mut parts = vec!["avx2"];
    if vnni() {
        parts.push("avx512-vnni");
    }
    if gemm512::available() {
        parts.push(if wide_q() {
            "512-bit gemm"
        } else {
            "512-bit float gemm"
        });
    }
    parts.join(", ")
}

/// A quantized packed GEMM's pack, panel, rows per group and packed bytes
/// per K element of a group.
type QPanel = (PackFn, super::PanelFn, usize, usize);

/// Whether the CPU runs the 512-bit quantized GEMM panels
/// ([`qgemm512`], [`kgemm512`], [`k6gemm::panel_q6_k_512`]).
fn wide_q() -> bool {
    kgemm512::available()
}

/// `wide` where the CPU runs the 512-bit float GEMM of [`gemm512`],
/// else `narrow`: the packs, panels and shapes of the two go together.
fn wide_or<T>(wide: T, narrow: T) -> T {
    if gemm512::available() { wide } else { narrow }
}

/// The packed GEMM of float weights packed as f32 by `pack` (the 512-bit
/// kernel's pack where [`wide_or`] picks it): the whole of up to about
/// 1,000 columns per block (the weights are packed once per row block and
/// K panel, whatever the column count), activations packed.
fn float_gemm(pack: PackFn) -> Gemm {
    let (mr, nr) = wide_or((gemm512::MR, gemm512::NR), (gemm::MR, gemm::NR));
    Gemm {
        pack,
        panel: wide_or(gemm512::panel, gemm::panel),
        vt: DType::F32,
        b_scales: false,
        b_packed: true,
        mr,
        nr,
        group_bytes: 4 * mr,
        mc: 128,
        nc: 1024 / nr * nr,
        kc: 256,
        min_n: 16,
    }
}

/// Runs `$f::<N>(kc, a, b, c, mr, acc)` over the columns `b` / `c`, four
/// (or fewer, for the last) at a time.
macro_rules! by_four_columns {
    ($f:ident($kc:expr, $a:expr, $b:expr, $c:expr, $mr:expr, $acc:expr)) => {
        for (bj, cj) in $b.chunks(4).zip($c.chunks(4)) {
            match bj.len() {
                1 => $f::<1>($kc, $a, bj, cj, $mr, $acc),
                2 => $f::<2>($kc, $a, bj, cj, $mr, $acc),
                3 => $f::<3>($kc, $a, bj, cj, $mr, $acc),
                _ => $f::<4>($kc, $a, bj, cj, $mr, $acc),
            }
        }
    };
}
use by_four_columns;

/// Dispatches a runtime `(mr, nr)` to a const-generic tile instantiation.
macro_rules! dispatch_tile {
    ($f:ident [$g:tt] ($k:expr, $a:expr, $lda:expr, $mr:expr, $b:expr, $c:expr, $acc:expr)
     { $(($rm:literal, $rn:literal)),* $(,)? }) => {
        match ($mr, $b.len()) {
            $(($rm, $rn) => $f::<$g, $rm, $rn>($k, $a, $lda, $b, $c, $acc),)*
            _ => debug_assert!(false, "tile size outside the kernel's contract"),
        }
    };
}
pub(crate) use dispatch_tile;

/// Sum of the eight lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Reads an f16 at `p` (any alignment) as f32.
///
/// # Safety
/// `p` must cover two bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn h2f(p: *const u8) -> f32 {
    // SAFETY: caller's contract.
    let bits = unsafe { p.cast::<u16>().read_unaligned() };
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
}

/// How far ahead of the current position the mat-vec tiles prefetch:
/// each row of ggml's layout (one column, several weight rows, each its
/// own memory stream), or the one stream of repacked groups.
pub(crate) const PREFETCH_AHEAD: usize = 1024;

/// Prefetches the cache line holding `p` into L1. Never faults, so `p` may
/// lie past the end of a row.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn prefetch(p: *const u8) {
    // A prefetch reads nothing architecturally and never faults.
    _mm_prefetch::<_MM_HINT_T0>(p.cast())
}

/// Loads 32 bytes at `p` (any alignment).
///
/// # Safety
/// `p` must cover 32 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load256(p: *const u8) -> __m256i {
    // SAFETY: caller's contract.
    unsafe { _mm256_loadu_si256(p.cast()) }
}

/// Loads 16 bytes at `p` (any alignment).
///
/// # Safety
/// `p` must cover 16 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load128(p: *const u8) -> __m128i {
    // SAFETY: caller's contract.
    unsafe { _mm_loadu_si128(p.cast()) }
}

/// `acc + maddubs(w, y)` in 16-bit lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot16(acc: __m256i, w: __m256i, y: __m256i) -> __m256i {
    _mm256_add_epi16(acc, _mm256_maddubs_epi16(w, y))
}

/// `acc + madd(maddubs(w, y), 1)` in 32-bit lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot32(acc: __m256i, w: __m256i, y: __m256i) -> __m256i {
    let p = _mm256_madd_epi16(_mm256_maddubs_epi16(w, y), _mm256_set1_epi16(1));
    _mm256_add_epi32(acc, p)
}

/// `acc + dpbusd(w, y)` (AVX-512 VNNI on 256 bits).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
pub(super) fn dot_vnni(acc: __m256i, w: __m256i, y: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(acc, w, y)
}

/// Writes or adds `v` at `p`.
///
/// # Safety
/// `p` must be valid for reading and writing one f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn put(p: *mut f32, v: f32, acc: bool) {
    // SAFETY: caller's contract.
    unsafe { super::scalar::store(p, v, acc) }
}

/// Writes (or adds) the first `mr` lanes of `v` at `c`.
///
/// # Safety
/// `c` must cover `mr` floats, `mr <= 8`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn store_lanes(c: *mut f32, v: __m256, mr: usize, acc: bool) {
    if mr == 8 {
        // SAFETY: c covers eight floats.
        unsafe {
            let v = if acc {
                _mm256_add_ps(v, _mm256_loadu_ps(c))
            } else {
                v
            };
            _mm256_storeu_ps(c, v);
        }
    } else {
        let mut t = [0.0f32; 8];
        // SAFETY: t holds eight floats; c covers mr.
        unsafe {
            _mm256_storeu_ps(t.as_mut_ptr(), v);
            for (r, &x) in t.iter().enumerate().take(mr) {
                put(c.add(r), x, acc);
            }
        }
    }
}

/// Writes (or adds) the first `mr` of the 16 lanes of `v` at `c` (all 16
/// when `mr >= 16`); lanes past `mr` are neither read nor written.
///
/// # Safety
/// `c` must cover `mr.min(16)` floats; the CPU must have AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn store_lanes16(c: *mut f32, v: __m512, mr: usize, acc: bool) {
    let mask: __mmask16 = if mr >= 16 { u16::MAX } else { (1u16 << mr) - 1 };
    // SAFETY: caller's contract; masked lanes are not touched.
    unsafe {
        let v = if acc {
            _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, c))
        } else {
            v
        };
        _mm512_mask_storeu_ps(c, mask, v);
    }
}

/// The vector at byte offset `off` of an eight-row group's packed layout,
/// for all 16 rows of a block of two such groups whose 32-byte vectors
/// alternate (the `_x2` packs): the 64 bytes at `2 * off`.
///
/// # Safety
/// `blk` must cover the block's bytes at `2 * off .. 2 * off + 64`; the
/// CPU must have AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn load_pair(blk: *const u8, off: usize) -> __m512i {
    // SAFETY: caller's contract.
    unsafe { _mm512_loadu_si512(blk.add(2 * off).cast()) }
}

/// Copies the first `N` pointers of `s` into an array.
///
/// # Safety
/// `s` must hold at least `N` pointers.
#[inline(always)]
unsafe fn first<T: Copy, const N: usize>(s: &[T]) -> [T; N] {
    // SAFETY: caller's contract.
    std::array::from_fn(|j| unsafe { *s.get_unchecked(j) })
}
