//! NORM, RMS_NORM and L2_NORM over each row, eps in op_params[0].

use backplane_abi::Op;

use super::Node;
use backplane_runtime::ComputeError;

/// Normalises each row: NORM to zero mean and unit variance
/// (`(x - mean) / sqrt(var + eps)`), RMS_NORM by `sqrt(mean(x²) + eps)`,
/// L2_NORM by `max(‖x‖, eps)`.
pub(crate) fn norm(n: &Node) -> Result<(), ComputeError> {
    let a = n.src(0)?;
    let eps = n.p_f32(0) as f64;
    let [ne0, ne1, ne2, ne3] = a.ne();
    let len = ne0 as f64;
    let mut out = Vec::with_capacity(a.nelements() as usize);
    for i3 in 0..ne3 {
        for i2 in 0..ne2 {
            for i1 in 0..ne1 {
                let x = a.row(i1, i2, i3);
                match n.op {
                    Op::Norm => {
                        let mean = x.iter().sum::<f64>() / len;
                        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / len;
                        let s = 1.0 / (var + eps).sqrt();
                        out.extend(x.iter().map(|v| (v - mean) * s));
                    }
                    Op::RmsNorm => {
                        let mean = x.iter().map(|v| v * v).sum::<f64>() / len;
                        let s = 1.0 / (mean + eps).sqrt();
                        out.extend(x.iter().map(|v| v * s));
                    }
                    _ => {
                        let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
                        let s = 1.0 / norm.max(eps);
                        out.extend(x.iter().map(|v| v * s));
                    }
                }
            }
        }
    }
    n.store(&out)
}
