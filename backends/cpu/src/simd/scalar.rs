//! Portable kernels: the quant crate's reference dot products (ggml's
//! `*_generic` C) for block types, and plain loops the compiler can
//! vectorize for the float types.

use std::ptr;

use backplane_abi::DType;
use backplane_quant as q;
use backplane_quant::{QuantBlock, bf16, f16};

use super::{Isa, MatKernel, TileFn};

/// The portable kernel for weights of type `dtype`, if it is a mat-mul type.
pub fn kernel(dtype: DType) -> Option<MatKernel> {
    let (tile, kc): (TileFn, usize) = match dtype {
        DType::F32 => (float_tile::<f32>, 1024),
        DType::F16 => (float_tile::<f16>, 1024),
        DType::BF16 => (float_tile::<bf16>, 1024),
        DType::Q4_0 => (quant_tile::<q::BlockQ4_0, q::BlockQ8_0>, 1024),
        DType::Q4_1 => (quant_tile::<q::BlockQ4_1, q::BlockQ8_1>, 1024),
        DType::Q5_0 => (quant_tile::<q::BlockQ5_0, q::BlockQ8_0>, 1024),
        DType::Q5_1 => (quant_tile::<q::BlockQ5_1, q::BlockQ8_1>, 1024),
        DType::Q8_0 => (quant_tile::<q::BlockQ8_0, q::BlockQ8_0>, 1024),
        DType::Q2_K => (quant_tile::<q::BlockQ2K, q::BlockQ8K>, 2048),
        DType::Q3_K => (quant_tile::<q::BlockQ3K, q::BlockQ8K>, 2048),
        DType::Q4_K => (quant_tile::<q::BlockQ4K, q::BlockQ8K>, 2048),
        DType::Q5_K => (quant_tile::<q::BlockQ5K, q::BlockQ8K>, 2048),
        DType::Q6_K => (quant_tile::<q::BlockQ6K, q::BlockQ8K>, 2048),
        _ => return None,
    };
    Some(MatKernel {
        tile,
        mr: 4,
        mr_vec: 4,
        nr: 4,
        kc,
        isa: Isa::Scalar,
        gemm: None,
    })
}

/// A weight block with its reference dot product against activation blocks `B`.
pub trait RefDot<B: QuantBlock>: QuantBlock {
    /// The quant crate's scalar dot product of `n` values.
    fn dot(n: usize, x: &[Self], y: &[B]) -> f32;
}

macro_rules! ref_dot {
    ($a:ty, $b:ty, $f:path) => {
        impl RefDot<$b> for $a {
            fn dot(n: usize, x: &[Self], y: &[$b]) -> f32 {
                $f(n, x, y)
            }
        }
    };
}

ref_dot!(q::BlockQ4_0, q::BlockQ8_0, q::vec_dot_q4_0_q8_0);
ref_dot!(q::BlockQ4_1, q::BlockQ8_1, q::vec_dot_q4_1_q8_1);
ref_dot!(q::BlockQ5_0, q::BlockQ8_0, q::vec_dot_q5_0_q8_0);
ref_dot!(q::BlockQ5_1, q::BlockQ8_1, q::vec_dot_q5_1_q8_1);
ref_dot!(q::BlockQ8_0, q::BlockQ8_0, q::vec_dot_q8_0_q8_0);
ref_dot!(q::BlockQ2K, q::BlockQ8K, q::vec_dot_q2_k_q8_k);
ref_dot!(q::BlockQ3K, q::BlockQ8K, q::vec_dot_q3_k_q8_k);
ref_dot!(q::BlockQ4K, q::BlockQ8K, q::vec_dot_q4_k_q8_k);
ref_dot!(q::BlockQ5K, q::BlockQ8K, q::vec_dot_q5_k_q8_k);
ref_dot!(q::BlockQ6K, q::BlockQ8K, q::vec_dot_q6_k_q8_k);

/// Reference dot product of `k` values of one weight row and one activation
/// row given as raw pointers of any alignment.
///
/// # Safety
/// `a` and `b` must cover `k / A::BLOCK_SIZE` blocks each.
pub unsafe fn dot_blocks<A: RefDot<B>, B: QuantBlock>(k: usize, a: *const u8, b: *const u8) -> f32 {
    let nb = k / A::BLOCK_SIZE;
    if (a as usize).is_multiple_of(align_of::<A>()) && (b as usize).is_multiple_of(align_of::<B>())
    {
        // SAFETY: aligned, and the caller guarantees `nb` blocks.
        let (x, y) = unsafe {
            (
                std::slice::from_raw_parts(a.cast::<A>(), nb),
                std::slice::from_raw_parts(b.cast::<B>(), nb),
            )
        };
        return A::dot(k, x, y);
    }
    let mut sum = 0.0f32;
    for i in 0..nb {
        // SAFETY: block `i` lies within the `nb` blocks the caller guarantees.
        let (x, y) = unsafe {
            (
                ptr::read_unaligned(a.add(i * size_of::<A>()).cast::<A>()),
                ptr::read_unaligned(b.add(i * size_of::<B>()).cast::<B>()),
            )
        };
        sum += A::dot(
            A::BLOCK_SIZE,
            std::slice::from_ref(&x),
            std::slice::from_ref(&y),
        );
    }
    sum
}

/// [`TileFn`] over the reference dot products.
///
/// # Safety
/// As [`TileFn`].
unsafe fn quant_tile<A: RefDot<B>, B: QuantBlock>(
    k: usize,
    a: *const u8,
    lda: usize,
    mr: usize,
    b: &[*const u8],
    c: &[*mut f32],
    acc: bool,
) {
    for (&bj, &cj) in b.iter().zip(c) {
        for r in 0..mr {
            // SAFETY: forwarded contract of `TileFn`.
            unsafe {
                let v = dot_blocks::<A, B>(k, a.add(r * lda), bj);
                store(cj.add(r), v, acc);
            }
        }
    }
}

/// An element type of the float kernels.
pub trait FloatElem: Copy {
    /// Reads element `i` of the row at `p` (any alignment).
    ///
    /// # Safety
    /// `p` must cover `i + 1` elements.
    unsafe fn read(p: *const u8, i: usize) -> f32;
}

impl FloatElem for f32 {
    #[inline(always)]
    unsafe fn read(p: *const u8, i: usize) -> f32 {
        // SAFETY: caller's contract.
        unsafe { ptr::read_unaligned(p.cast::<f32>().add(i)) }
    }
}

impl FloatElem for f16 {
    #[inline(always)]
    unsafe fn read(p: *const u8, i: usize) -> f32 {
        // SAFETY: caller's contract.
        unsafe { ptr::read_unaligned(p.cast::<f16>().add(i)) }.to_f32()
    }
}

impl FloatElem for bf16 {
    #[inline(always)]
    unsafe fn read(p: *const u8, i: usize) -> f32 {
        // SAFETY: caller's contract.
        let bits = unsafe { ptr::read_unaligned(p.cast::<u16>().add(i)) };
        f32::from_bits((bits as u32) << 16)
    }
}

/// Dot product of two float rows in eight f32 lanes (vectorizable).
///
/// # Safety
/// Both rows must cover `k` elements.
pub unsafe fn dot_float<T: FloatElem>(k: usize, a: *const u8, b: *const u8) -> f32 {
    let mut lanes = [0.0f32; 8];
    let k8 = k / 8 * 8;
    let mut i = 0;
    while i < k8 {
        for (l, s) in lanes.iter_mut().enumerate() {
            // SAFETY: i + l < k.
            unsafe { *s += T::read(a, i + l) * T::read(b, i + l) };
        }
        i += 8;
    }
    let mut sum = lanes.iter().sum::<f32>();
    for t in k8..k {
        // SAFETY: t < k.
        unsafe { sum += T::read(a, t) * T::read(b, t) };
    }
    sum
}

/// [`TileFn`] for float weights with activations of the same type.
///
/// # Safety
/// As [`TileFn`].
unsafe fn float_tile<T: FloatElem>(
    k: usize,
    a: *const u8,
    lda: usize,
    mr: usize,
    b: &[*const u8],
    c: &[*mut f32],
    acc: bool,
) {
    for (&bj, &cj) in b.iter().zip(c) {
        for r in 0..mr {
            // SAFETY: forwarded contract of `TileFn`.
            unsafe {
                let v = dot_float::<T>(k, a.add(r * lda), bj);
                store(cj.add(r), v, acc);
            }
        }
    }
}

/// Writes or accumulates one output.
///
/// # Safety
/// `p` must be valid for a read and write of one f32.
#[inline(always)]
pub unsafe fn store(p: *mut f32, v: f32, acc: bool) {
    // SAFETY: caller's contract.
    unsafe {
        if acc {
            *p += v;
        } else {
            *p = v;
        }
    }
}
