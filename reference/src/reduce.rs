//! SUM, SUM_ROWS, CUMSUM, ARGMAX, and ARGSORT and TOP_K over each row
//! (dim 0). Sort ties keep ascending index order (ggml's std::sort leaves
//! them unspecified); values order by IEEE total order, so NaNs sort after
//! +inf (before -inf when negative).

use std::cmp::Ordering;

use backplane_abi::SortOrder;

use super::Node;
use backplane_runtime::ComputeError;

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

/// Indices of `row` ordered by value (stable: equal values by index).
fn order(row: &[f64], descending: bool) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.sort_by(|&i, &j| {
        let o: Ordering = row[i].total_cmp(&row[j]);
        if descending { o.reverse() } else { o }
    });
    idx
}

fn per_row(n: &Node, k: i64, descending: bool) -> Result<(), ComputeError> {
    let a = n.src(0)?;
    let [_, ne1, ne2, ne3] = a.ne();
    let mut out = Vec::with_capacity(n.dst.nelements() as usize);
    for i3 in 0..ne3 {
        for i2 in 0..ne2 {
            for i1 in 0..ne1 {
                let idx = order(&a.row(i1, i2, i3), descending);
                out.extend(idx.into_iter().take(k as usize).map(|i| i as f64));
            }
        }
    }
    n.store(&out)
}

/// Indices that sort each row, ascending or descending (op_params[0]).
pub(crate) fn argsort(n: &Node) -> Result<(), ComputeError> {
    let ord = n.p_i32(0);
    let descending = match ord {
        o if o == SortOrder::Asc as i32 => false,
        o if o == SortOrder::Desc as i32 => true,
        o => return Err(n.unsupported(format!("unknown sort order {o}"))),
    };
    per_row(n, n.src(0)?.ne()[0], descending)
}

/// Indices of the k largest elements of each row, largest first (ggml's CPU
/// leaves the order unspecified; conformance should compare them as sets).
pub(crate) fn top_k(n: &Node) -> Result<(), ComputeError> {
    per_row(n, n.dst.ne()[0], true)
}
