//! MUL_MAT and MUL_MAT_ID: exact f64 dot products of dequantized weight rows
//! with f32/f16/bf16 activations (ggml's CPU rounds the activations to the
//! weight's `vec_dot_type` first; the reference does not).

use super::Node;
use backplane_runtime::ComputeError;

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `dst[m, n, i2, i3] = Σ_k a[k, m, i2 / r2, i3 / r3] * b[k, n, i2, i3]` with
/// `r2 = b.ne2 / a.ne2`, `r3 = b.ne3 / a.ne3` (ggml broadcasts by division).
pub(crate) fn mul_mat(n: &Node) -> Result<(), ComputeError> {
    let (a, b) = (n.src(0)?, n.src(1)?);
    let (an, bn) = (a.ne(), b.ne());
    let (r2, r3) = (bn[2] / an[2], bn[3] / an[3]);
    let mut out = Vec::with_capacity(n.dst.nelements() as usize);
    for i3 in 0..bn[3] {
        for i2 in 0..bn[2] {
            let a_rows: Vec<Vec<f64>> = (0..an[1]).map(|m| a.row(m, i2 / r2, i3 / r3)).collect();
            for i1 in 0..bn[1] {
                let brow = b.row(i1, i2, i3);
                out.extend(a_rows.iter().map(|ar| dot(ar, &brow)));
            }
        }
    }
    n.store(&out)
}

/// Expert-routed mat-mul: `dst[:, e, t] = as[:, :, ids[e, t]]^T b[:, e % b.ne1, t]`.
/// An expert id outside `0..as.ne2` is a [`ComputeError::BadInput`].
pub(crate) fn mul_mat_id(n: &Node) -> Result<(), ComputeError> {
    let (w, b, ids) = (n.src(0)?, n.src(1)?, n.src(2)?);
    let (wn, bn, idn) = (w.ne(), b.ne(), ids.ne());
    let mut out = Vec::with_capacity(n.dst.nelements() as usize);
    for t in 0..idn[1] {
        for e in 0..idn[0] {
            let expert = ids.int_at([e, t, 0, 0]);
            if expert < 0 || expert >= wn[2] {
                return Err(n.bad_input(format!(
                    "ids[{e}, {t}] = {expert} is not an expert index (0..{})",
                    wn[2]
                )));
            }
            let brow = b.row(e % bn[1], t, 0);
            out.extend((0..wn[1]).map(|m| dot(&w.row(m, expert, 0), &brow)));
        }
    }
    n.store(&out)
}
