//! NORM, RMS_NORM and L2_NORM.

use backplane::{DType, Op};

use super::{Catalogue, dims};
use crate::case::Fill;

/// Adds the family's cases.
pub(super) fn add(c: &mut Catalogue) {
    norms(c);
    c.grid(norms_ggml_grid);
}

fn norms(c: &mut Catalogue) {
    for op in [Op::Norm, Op::RmsNorm, Op::L2Norm] {
        for ne in [[64, 5, 4, 3], [1, 1, 1, 1], [4096, 2, 1, 1], [33, 7, 1, 1]] {
            for eps in [1e-6f32, 1e-12, 0.1] {
                let name = format!("{op}(type=f32,ne=[{}],eps={eps:e})", dims(&ne));
                c.push(op, name, 1e-7, move |b| {
                    let x = b.input_with(DType::F32, &ne, Fill::Uniform(-10.0, 10.0))?;
                    match op {
                        Op::Norm => b.g.norm(x, eps),
                        Op::RmsNorm => b.g.rms_norm(x, eps),
                        _ => b.g.l2_norm(x, eps),
                    }
                });
            }
        }
        // Strided rows: a view over every other row.
        let name = format!("{op}(type=f32,ne=[32,5,3,1],perm=[0,2,1,3])");
        c.push(op, name, 1e-7, move |b| {
            let x = b.permuted(
                DType::F32,
                [32, 5, 3, 1],
                [0, 2, 1, 3],
                Fill::Uniform(-1.0, 1.0),
            )?;
            match op {
                Op::Norm => b.g.norm(x, 1e-5),
                Op::RmsNorm => b.g.rms_norm(x, 1e-5),
                _ => b.g.l2_norm(x, 1e-5),
            }
        });
    }
}

/// The later test-backend-ops' NORM, RMS_NORM and L2_NORM loops (llama.cpp
/// 0c1e5709): eps from 0 to 10 over rows of 64 and 1,025 (and 33, 132,
/// 260 for NORM / RMS_NORM), each contiguous, a view of every dim's first
/// half. Its rows with a stride (noncontig_rows, a transposed source) are
/// left out, as backplane's norms want contiguous rows, and so is its
/// single in-place RMS_NORM (no in-place form here).
fn norms_ggml_grid(c: &mut Catalogue) {
    fn push(c: &mut Catalogue, op: Op, ne: [i64; 4], v: bool, eps: f32) {
        let name = format!("{op}(type=f32,ne=[{}],v={},eps={eps})", dims(&ne), v as i32);
        c.push(op, name, 1e-7, move |b| {
            let fill = if op == Op::RmsNorm {
                Fill::Uniform(-10.0, 10.0)
            } else {
                Fill::Uniform(-1.0, 1.0)
            };
            let mut x = b.input_with(DType::F32, &ne, fill)?;
            if v {
                let d = b.g.desc(x);
                let (vne, nb) = (d.ne.map(|n| n / 2), d.nb);
                x = b.g.view(x, &vne, &[nb[1], nb[2], nb[3]], 0)?;
            }
            match op {
                Op::Norm => b.g.norm(x, eps),
                Op::RmsNorm => b.g.rms_norm(x, eps),
                _ => b.g.l2_norm(x, eps),
            }
        });
    }
    for eps in [0.0f32, 1e-6, 1e-4, 1e-1, 10.0] {
        for n in [64i64, 1025] {
            let ne = [n, 5, 4, 3];
            for v in [false, true] {
                push(c, Op::Norm, ne, v, eps);
                push(c, Op::RmsNorm, ne, v, eps);
            }
            push(c, Op::L2Norm, ne, false, eps);
            push(c, Op::L2Norm, ne, true, eps);
        }
        for n in [33i64, 132, 260] {
            for v in [false, true] {
                push(c, Op::Norm, [n, 5, 4, 3], v, eps);
                push(c, Op::RmsNorm, [n, 5, 4, 3], v, eps);
            }
        }
    }
}
