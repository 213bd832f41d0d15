//! SUM, SUM_ROWS, CUMSUM and ARGMAX.

use super::Node;
use crate::ComputeError;

/// Sum of every element into the single element of the result.
pub(crate) fn sum(n: &Node) -> Result<(), ComputeError> {
    let a = n.src(0)?;
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
    let ne1 = a.ne()[1];
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
