//! SUM, SUM_ROWS, CUMSUM and ARGMAX.

use super::Node;
use crate::ComputeError;
use crate::error::describe;

/// Sum of every element into the single element of the result.
pub(crate) fn sum(n: &Node) -> Result<(), ComputeError> {
    let a = n.src(0)?;
    n.ensure(n.dst.nelements() == 1, || {
        format!("result {} must have one element", describe(n.dst.d))
    })?;
    let [_, ne1, ne2, ne3] = a.ne();
    let mut s = 0.0;
    for i3 in 0..ne3 {
        for i2 in 0..ne2 {
            for i1 in 0..ne1 {
                s += a.row(i1, i2, i3).iter().sum::<f64>();
            }
        }
    }
    n.store(&[s])
}

/// Sum of each row (along dim 0) into `[1, ne1, ne2, ne3]`.
pub(crate) fn sum_rows(n: &Node) -> Result<(), ComputeError> {
    let a = n.src(0)?;
    let [_, ne1, ne2, ne3] = a.ne();
    n.ensure(n.dst.ne() == [1, ne1, ne2, ne3], || {
        format!(
            "result {} must be [1, {ne1}, {ne2}, {ne3}]",
            describe(n.dst.d)
        )
    })?;
    let mut out = Vec::with_capacity(a.d.nrows() as usize);
    for i3 in 0..ne3 {
        for i2 in 0..ne2 {
            for i1 in 0..ne1 {
                out.push(a.row(i1, i2, i3).iter().sum());
            }
        }
    }
    n.store(&out)
}

/// Inclusive prefix sum along dim 0.
pub(crate) fn cumsum(n: &Node) -> Result<(), ComputeError> {
    let a = n.src(0)?;
    n.same_shape("a and result", &a, &n.dst)?;
    let [_, ne1, ne2, ne3] = a.ne();
    let mut out = Vec::with_capacity(a.nelements() as usize);
    for i3 in 0..ne3 {
        for i2 in 0..ne2 {
            for i1 in 0..ne1 {
                let mut s = 0.0;
                for v in a.row(i1, i2, i3) {
                    s += v;
                    out.push(s);
                }
            }
        }
    }
    n.store(&out)
}

/// Index of the largest element of each row of a matrix. Follows ggml's
/// `ggml_vec_argmax_f32` exactly: among equal maxima the *last* index wins,
/// and NaNs compare as ggml's `MAX` macro makes them.
pub(crate) fn argmax(n: &Node) -> Result<(), ComputeError> {
    let a = n.src(0)?;
    let [_, ne1, ne2, ne3] = a.ne();
    n.ensure(ne2 == 1 && ne3 == 1 && n.dst.nelements() == ne1, || {
        format!(
            "a {} must be a matrix and the result {} hold one index per row",
            describe(a.d),
            describe(n.dst.d)
        )
    })?;
    let mut out = Vec::with_capacity(ne1 as usize);
    for i1 in 0..ne1 {
        let mut max = f64::NEG_INFINITY;
        let mut idx = 0usize;
        for (i, x) in a.row(i1, 0, 0).into_iter().enumerate() {
            max = if max > x { max } else { x };
            if max == x {
                idx = i;
            }
        }
        out.push(idx as f64);
    }
    n.store(&out)
}
