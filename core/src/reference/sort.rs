//! ARGSORT and TOP_K over each row (dim 0). Ties keep ascending index order
//! (ggml's std::sort leaves them unspecified); values order by IEEE total
//! order, so NaNs sort after +inf (before -inf when negative).

use std::cmp::Ordering;

use backplane_abi::SortOrder;

use super::Node;
use crate::ComputeError;

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
