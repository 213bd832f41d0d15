//! Mat-mul micro-kernels, chosen once at run time for the CPU at hand.
//!
//! Every kernel has the same shape, [`TileFn`]: it multiplies a small tile of
//! up to [`MatKernel::mr`] rows of the weight matrix `a` (stored in its own
//! type) with up to [`MatKernel::nr`] activation rows `b` (already converted
//! to the weight type's [`vec_dot_type`](backplane_quant::vec_dot_type)) and
//! writes, or adds, the `mr x nr` dot products. The mat-mul driver in
//! `ops/matmul` cuts the output into such tiles; a 1-column tile is the
//! mat-vec case.
//!
//! [`kernels`] builds the table once: AVX2+FMA(+F16C) kernels on x86-64 CPUs
//! that have them, otherwise the portable [`scalar`] ones (the quant crate's
//! reference dot products, which match ggml's generic C).

// Kernels index several same-sized register arrays with one loop counter.
#![allow(clippy::needless_range_loop)]

pub mod scalar;
pub mod vecmath;
#[cfg(target_arch = "x86_64")]
pub mod x86;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use backplane_abi::DType;

/// Most columns any kernel takes in one tile.
pub const MAX_NR: usize = 8;

/// Computes `c[j][r] = dot(a row r, b[j])` over `k` elements for
/// `r < mr`, `j < b.len()` (adding to `c[j][r]` when `acc`).
///
/// `a` points at the first row, rows are `lda` bytes apart; `b[j]` points at
/// a converted activation row and `c[j]` at `mr` consecutive f32 outputs.
///
/// # Safety
/// `k` must be a whole number of blocks of both types, `mr` at most the
/// kernel's `mr`, `b.len() == c.len()` at most its `nr`, and every pointer
/// must cover the bytes it is read or written at.
pub type TileFn = unsafe fn(
    k: usize,
    a: *const u8,
    lda: usize,
    mr: usize,
    b: &[*const u8],
    c: &[*mut f32],
    acc: bool,
);

/// Packs elements `k0..k0 + kc` of `rows` weight rows (starting at `a`,
/// `lda` bytes apart) into `dst` in groups of [`Gemm::mr`] rows, each group
/// [`Gemm::group_bytes`] bytes per K element, rows past `rows` (up to the
/// next whole group) zero. The layout inside a group is the kernel's own.
///
/// # Safety
/// `k0` and `kc` must be whole blocks, every row must cover `k0 + kc`
/// elements and `dst` must hold `rows.div_ceil(mr) * kc * group_bytes`
/// bytes.
pub type PackFn =
    unsafe fn(a: *const u8, lda: usize, rows: usize, k0: usize, kc: usize, dst: *mut u8);

/// Multiplies one packed group of rows `a` (`kc` elements as [`PackFn`]
/// laid them out) with the activation rows `b[j]` (in [`Gemm::vt`], each
/// at its `k0`; `s[j]` at their per-block scales when [`Gemm::b_scales`]),
/// writing (or adding, when `acc`) the first `mr` outputs of each column
/// `c[j]`.
///
/// # Safety
/// `mr` must be at most [`Gemm::mr`], `b`, `s` (when used) and `c` of the
/// same length at most [`Gemm::nr`], and every pointer must cover what is
/// read or written.
pub type PanelFn = unsafe fn(
    kc: usize,
    a: *const u8,
    b: &[*const u8],
    s: &[*const f32],
    c: &[*mut f32],
    mr: usize,
    acc: bool,
);

/// A packed-panel GEMM, used instead of the tiles when there are enough
/// columns to amortize packing the weights.
#[derive(Clone, Copy, Debug)]
pub struct Gemm {
    /// Packs a block of weight rows.
    pub pack: PackFn,
    /// The micro-kernel.
    pub panel: PanelFn,
    /// The activations' type (f32 for float weights, q8_0 for 32-blocks).
    pub vt: DType,
    /// Whether the kernel wants each q8_0 activation block's scale pair
    /// `(d, 8 * d * sum(q))` as f32 (see [`block_scales`]).
    pub b_scales: bool,
    /// Whether the kernel reads f32 activations packed by
    /// [`pack_columns`] (one sequential stream per call instead of one per
    /// column): every `b[j]` then points at the group's packed panel.
    pub b_packed: bool,
    /// Rows per packed group (and per micro-kernel call).
    pub mr: usize,
    /// Most columns per micro-kernel call.
    pub nr: usize,
    /// Packed bytes per K element of one group.
    pub group_bytes: usize,
    /// Rows per block (a multiple of `mr`).
    pub mc: usize,
    /// Columns per block (a multiple of `nr`).
    pub nc: usize,
    /// K elements per packed panel (whole blocks).
    pub kc: usize,
    /// Fewest columns for which the driver uses this path.
    pub min_n: usize,
}

/// Packs values `k0..k0 + kc` of the f32 columns `cols` for a
/// [`Gemm::b_packed`] kernel: value `k0 + k` of column `j` at float
/// `k * cols.len() + j` of `dst`.
///
/// # Safety
/// Every column must cover `k0 + kc` floats and `dst` must hold
/// `kc * cols.len()` floats.
pub unsafe fn pack_columns(cols: &[*const f32], k0: usize, kc: usize, dst: *mut f32) {
    let nj = cols.len();
    for (j, &c) in cols.iter().enumerate() {
        for k in 0..kc {
            // SAFETY: caller's contract.
            unsafe { dst.add(k * nj + j).write(c.add(k0 + k).read_unaligned()) };
        }
    }
}

/// Writes the scale pair `(d, 8 * d * sum(q))` of every q8_0 block of
/// `row` to `out` (two f32 per block).
pub fn block_scales(row: &[u8], out: &mut [f32]) {
    for (blk, o) in row.chunks_exact(34).zip(out.chunks_exact_mut(2)) {
        let d = backplane_quant::f16::from_bits(u16::from_le_bytes([blk[0], blk[1]])).to_f32();
        let sum: i32 = blk[2..].iter().map(|&q| q as i8 as i32).sum();
        o[0] = d;
        o[1] = 8.0 * d * sum as f32;
    }
}

/// Instruction set a kernel was written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// Portable Rust (auto-vectorized where the compiler manages).
    Scalar,
    /// x86-64 AVX2 + FMA + F16C.
    Avx2,
}

impl Isa {
    /// Short lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
        }
    }
}

/// A mat-mul kernel for one weight type and its tiling preferences.
#[derive(Clone, Copy, Debug)]
pub struct MatKernel {
    /// The tile function.
    pub tile: TileFn,
    /// Most weight rows per tile when several columns are computed.
    pub mr: usize,
    /// Most weight rows per tile for a single column (mat-vec).
    pub mr_vec: usize,
    /// Most activation columns per tile.
    pub nr: usize,
    /// Preferred K block in elements (a multiple of the block size) when
    /// many columns are computed, so panels of both operands stay in cache.
    pub kc: usize,
    /// The instruction set.
    pub isa: Isa,
    /// A packed GEMM for many columns (activations then stay f32), if the
    /// weight type has one.
    pub gemm: Option<Gemm>,
}

/// The weight types MUL_MAT and MUL_MAT_ID run on the CPU.
pub const MAT_TYPES: [DType; 13] = DType::WEIGHT_TYPES;

/// The kernel table for this CPU.
#[derive(Debug)]
pub struct Kernels {
    table: [Option<MatKernel>; MAT_TYPES.len()],
    repacked: [Option<MatKernel>; crate::repack::REPACK_TYPES.len()],
    isa: Isa,
    /// The row helpers of attention and softmax.
    pub vec: vecmath::VecOps,
}

impl Kernels {
    /// The best kernel for weights of type `dtype`, if there is one.
    pub fn mat(&self, dtype: DType) -> Option<&MatKernel> {
        let i = MAT_TYPES.iter().position(|&t| t == dtype)?;
        self.table[i].as_ref()
    }

    /// The kernel for weights of type `dtype` stored in the repacked
    /// layout of [`crate::repack`], if this CPU has one.
    pub fn repacked(&self, dtype: DType) -> Option<&MatKernel> {
        let i = crate::repack::REPACK_TYPES
            .iter()
            .position(|&t| t == dtype)?;
        self.repacked[i].as_ref()
    }

    /// Whether this CPU has any repacked-layout kernel.
    pub fn has_repacked(&self) -> bool {
        self.repacked.iter().any(Option::is_some)
    }

    /// The best instruction set found on this CPU.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// What the mat-mul kernels run on, for people: the instruction set,
    /// and on x86 whether the VNNI dot products and the 512-bit GEMM
    /// panels are in use (e.g. `avx2, avx512-vnni, 512-bit gemm`).
    pub fn describe(&self) -> String {
        #[cfg(target_arch = "x86_64")]
        if self.isa == Isa::Avx2 {
            return x86::describe();
        }
        self.isa.name().to_string()
    }

    fn detect() -> Kernels {
        let mut k = Kernels {
            table: MAT_TYPES.map(scalar::kernel),
            repacked: [None; crate::repack::REPACK_TYPES.len()],
            isa: Isa::Scalar,
            vec: vecmath::PORTABLE,
        };
        #[cfg(target_arch = "x86_64")]
        if x86::available() && !SCALAR_ONLY.load(Ordering::Relaxed) {
            k.isa = Isa::Avx2;
            k.vec = x86::vecmath::OPS;
            for (slot, t) in k.table.iter_mut().zip(MAT_TYPES) {
                if let Some(kern) = x86::kernel(t) {
                    *slot = Some(kern);
                }
            }
            for (slot, t) in k.repacked.iter_mut().zip(crate::repack::REPACK_TYPES) {
                *slot = x86::repacked_kernel(t);
            }
        }
        k
    }
}

/// Converts a row of f32 activations to `vt` (q8_0 and f16 with SIMD where
/// the CPU allows, everything else with the quant crate's reference
/// quantizers). Returns false when the lengths do not fit.
pub fn convert_row(vt: DType, src: &[f32], dst: &mut [u8]) -> bool {
    if vt.row_size(src.len()) != Some(dst.len()) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    if kernels().isa == Isa::Avx2 {
        match vt {
            DType::Q8_0 => {
                // SAFETY: lengths checked above; AVX2 confirmed at detection.
                unsafe { x86::convert::quantize_q8_0(src, dst) };
                return true;
            }
            DType::F16 => {
                // SAFETY: as above.
                unsafe { x86::convert::to_f16(src, dst) };
                return true;
            }
            DType::Q8_K => {
                // SAFETY: as above.
                unsafe { x86::convert::quantize_q8_k(src, dst) };
                return true;
            }
            _ => {}
        }
    }
    backplane_quant::quantize_row(vt, src, dst).is_ok()
}

/// Set by [`limit_to_scalar`]: detection then ignores SIMD kernels.
static SCALAR_ONLY: AtomicBool = AtomicBool::new(false);

/// Caps the kernel table at the portable kernels, for a plugin variant built
/// for the baseline ISA. Takes effect only before the first [`kernels`]
/// call (the table is fixed once detected); returns whether it did.
pub fn limit_to_scalar() -> bool {
    SCALAR_ONLY.store(true, Ordering::Relaxed);
    KERNELS.get().is_none_or(|k| k.isa == Isa::Scalar)
}

static KERNELS: OnceLock<Kernels> = OnceLock::new();

/// The kernel table, detected on first use and then fixed.
pub fn kernels() -> &'static Kernels {
    KERNELS.get_or_init(Kernels::detect)
}

/// Deterministic test values in [-1, 1] (xorshift from `seed`).
#[cfg(test)]
pub(crate) fn test_values(n: usize, seed: u32) -> Vec<f32> {
    let mut x = seed.max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_limit_after_detection_reports_whether_it_held() {
        let detected = kernels().isa();
        assert_eq!(limit_to_scalar(), detected == Isa::Scalar);
        assert_eq!(
            kernels().isa(),
            detected,
            "the table never changes once detected"
        );
        SCALAR_ONLY.store(false, Ordering::Relaxed);
    }
}
