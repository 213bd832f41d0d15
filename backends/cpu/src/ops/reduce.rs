//! Reductions along rows: SUM, SUM_ROWS, CUMSUM, ARGMAX, ARGSORT, TOP_K.

use std::cmp::Ordering;

use backplane_abi::{DType, MAX_SRC, Op, TensorDesc};
use std::sync::{Mutex, PoisonError};

use super::tensor::{PAR_MIN_WORK, Tensor, expect_type, par_range, src_type, sum_f64};
use crate::error::CpuError;
use crate::ops::NodeCtx;

const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::BF16];

/// Whether the reduction kernels accept these operands: the types the op
/// contract allows, into a contiguous result (the contract has checked the
/// shapes and parameters).
pub fn supports(
    op: Op,
    dst: &TensorDesc,
    src: &[Option<&TensorDesc>; MAX_SRC],
) -> Result<(), String> {
    let ta = src_type(src, 0)?;
    let td = dst.dtype().map_err(|e| e.to_string())?;
    match op {
        Op::Sum | Op::SumRows => {
            expect_type("src0", ta, FLOATS)?;
            expect_type("dst", td, FLOATS)?;
        }
        _ => expect_type("src0", ta, &[DType::F32])?,
    }
    if !dst.is_contiguous() {
        return Err("dst must be contiguous".into());
    }
    Ok(())
}

/// Runs one reduction node.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let a = Tensor::src(ctx, 0)?;
    let d = Tensor::dst(ctx)?;
    let ne0 = a.ne(0);
    let nr = a.nrows();
    match ctx.op {
        Op::Sum => {
            let row_sum = |r: usize| {
                let mut buf = Vec::new();
                sum_f64(load(&a, r, &mut buf))
            };
            let total: f64 = if nr * ne0 < PAR_MIN_WORK || ctx.n_threads <= 1 {
                (0..nr).map(row_sum).sum()
            } else {
                // Each thread sums its own contiguous rows; the partial
                // sums are added in thread order (the same total every run).
                let parts: Vec<Mutex<f64>> = (0..ctx.n_threads).map(|_| Mutex::new(0.0)).collect();
                let per = nr.div_ceil(ctx.n_threads);
                ctx.pool.broadcast(&|t| {
                    let rows = (t * per).min(nr)..((t + 1) * per).min(nr);
                    let s: f64 = rows.map(row_sum).sum();
                    *parts[t].lock().unwrap_or_else(PoisonError::into_inner) = s;
                });
                parts
                    .into_iter()
                    .map(|p| p.into_inner().unwrap_or_else(PoisonError::into_inner))
                    .sum()
            };
            // SAFETY: dst holds one element.
            unsafe { d.store_f32(0, d.type_size(), &[total as f32]) };
            Ok(())
        }
        Op::SumRows => par_range(ctx, nr, ne0, |rows| {
            let mut buf = Vec::new();
            for r in rows {
                let s = sum_f64(load(&a, r, &mut buf)) as f32;
                // SAFETY: element r of the contiguous dst.
                unsafe { d.store_f32(r * d.type_size(), d.type_size(), &[s]) };
            }
            Ok(())
        }),
        Op::Cumsum => par_range(ctx, nr, ne0, |rows| {
            let mut buf = Vec::new();
            for r in rows {
                let x = load(&a, r, &mut buf);
                // SAFETY: dst row r, written only by this worker.
                let out = unsafe { d.slice_mut::<f32>(r * ne0 * 4, ne0) };
                let mut acc = 0f64;
                for (o, &v) in out.iter_mut().zip(x) {
                    acc += v as f64;
                    *o = acc as f32;
                }
            }
            Ok(())
        }),
        Op::Argmax => par_range(ctx, nr, ne0, |rows| {
            let mut buf = Vec::new();
            for r in rows {
                let x = load(&a, r, &mut buf);
                let mut best = 0usize;
                let mut max = f32::NEG_INFINITY;
                for (i, &v) in x.iter().enumerate() {
                    if v > max {
                        max = v;
                        best = i;
                    }
                }
                // SAFETY: element r of the contiguous dst.
                unsafe { d.write::<i32>(r * 4, best as i32) };
            }
            Ok(())
        }),
        Op::Argsort => {
            let desc = ctx.dst.param_i32(0) == 1;
            par_range(ctx, nr, ne0 * 8, |rows| {
                let mut buf = Vec::new();
                for r in rows {
                    let x = load(&a, r, &mut buf);
                    // SAFETY: dst row r, written only by this worker.
                    let idx = unsafe { d.slice_mut::<i32>(r * ne0 * 4, ne0) };
                    for (i, o) in idx.iter_mut().enumerate() {
                        *o = i as i32;
                    }
                    idx.sort_unstable_by(|&i, &j| order(x, i, j, desc));
                }
                Ok(())
            })
        }
        Op::TopK => {
            let k = d.ne(0);
            par_range(ctx, nr, ne0 * 4, |rows| {
                let mut buf = Vec::new();
                let mut idx: Vec<i32> = Vec::with_capacity(ne0);
                for r in rows {
                    let x = load(&a, r, &mut buf);
                    idx.clear();
                    idx.extend(0..ne0 as i32);
                    let cmp = |&i: &i32, &j: &i32| order(x, i, j, true);
                    if k < ne0 {
                        idx.select_nth_unstable_by(k - 1, cmp);
                    }
                    idx[..k].sort_unstable_by(cmp);
                    // SAFETY: dst row r, written only by this worker.
                    unsafe { d.slice_mut::<i32>(r * k * 4, k) }.copy_from_slice(&idx[..k]);
                }
                Ok(())
            })
        }
        op => Err(ctx.unsupported(format!("{op} is not a reduction"))),
    }
}

/// Orders indices by value (descending if `desc`), ties by index so the
/// result equals a stable sort.
#[inline]
fn order(x: &[f32], i: i32, j: i32, desc: bool) -> Ordering {
    let (a, b) = (x[i as usize], x[j as usize]);
    let by_value = if desc {
        b.partial_cmp(&a)
    } else {
        a.partial_cmp(&b)
    };
    by_value.unwrap_or(Ordering::Equal).then(i.cmp(&j))
}

/// Row `r` of src0 as f32 (see [`Tensor::row_f32`]). Only called with
/// `r < a.nrows()` on a source whose pointer covers it.
fn load<'b>(a: &Tensor<'_>, r: usize, buf: &'b mut Vec<f32>) -> &'b [f32] {
    // SAFETY: r is a row of src0 (callers iterate 0..nrows), and no node
    // writes a source while this node runs.
    unsafe { a.row_f32(a.row_offset_of(r), buf) }
}
