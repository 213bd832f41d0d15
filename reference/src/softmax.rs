//! SOFT_MAX (scale, f16/f32 mask, ALiBi, sinks), and the softmax with a
//! sink logit and the ALiBi slopes FLASH_ATTN_EXT shares.

use super::{Node, Tensor};
use backplane_runtime::ComputeError;

/// ALiBi slope of head `h` of `n_head` for `max_bias` (1 when it is 0), as
/// ggml: `m0^(h+1)` for the first `n_head_log2` heads, then odd powers of m1.
pub(crate) fn alibi_slope(max_bias: f32, h: u32, n_head: u32) -> f64 {
    if max_bias <= 0.0 {
        return 1.0;
    }
    let n_head_log2 = 1u32 << (n_head as f64).log2().floor() as u32;
    let max_bias = max_bias as f64;
    let m0 = 2f64.powf(-max_bias / n_head_log2 as f64);
    let m1 = 2f64.powf(-(max_bias / 2.0) / n_head_log2 as f64);
    if h < n_head_log2 {
        m0.powi(h as i32 + 1)
    } else {
        m1.powi(2 * (h - n_head_log2) as i32 + 1)
    }
}

/// `softmax(x)` of `logits` with an optional sink logit that joins the
/// denominator only. A row with no finite maximum yields zeros when nothing
/// is left (all masked, no sink), as ggml's flash attention does.
pub(crate) fn softmax_with_sink(logits: &[f64], sink: Option<f64>) -> Vec<f64> {
    let mut max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if let Some(s) = sink {
        max = max.max(s);
    }
    let e: Vec<f64> = logits.iter().map(|&x| (x - max).exp()).collect();
    let mut sum: f64 = e.iter().sum();
    if let Some(s) = sink {
        sum += (s - max).exp();
    }
    e.into_iter().map(|v| v / sum).collect()
}

/// One sink logit per head, when the node has sinks.
pub(crate) fn sinks_for(sinks: Option<Tensor>, heads: i64) -> Option<Vec<f64>> {
    sinks.map(|s| (0..heads).map(|h| s.get(h, 0, 0, 0)).collect())
}

/// Row-wise `softmax(a * scale + slope * mask)` with sinks, over dim 0. The
/// mask row is a's row index; mask dims 2 and 3 broadcast by modulo.
pub(crate) fn soft_max(n: &Node) -> Result<(), ComputeError> {
    let a = n.src(0)?;
    let mask = n.opt(1);
    let (scale, max_bias) = (n.p_f32(0) as f64, n.p_f32(1));
    let [_, ne1, ne2, ne3] = a.ne();
    let sinks = sinks_for(n.opt(2), ne2);
    let mut out = Vec::with_capacity(a.nelements() as usize);
    for i3 in 0..ne3 {
        for i2 in 0..ne2 {
            let slope = alibi_slope(max_bias, i2 as u32, ne2 as u32);
            for i1 in 0..ne1 {
                let mut w: Vec<f64> = a.row(i1, i2, i3).iter().map(|x| x * scale).collect();
                if let Some(m) = &mask {
                    let mr = m.row(i1, i2 % m.ne()[2], i3 % m.ne()[3]);
                    for (x, mv) in w.iter_mut().zip(mr) {
                        *x += slope * mv;
                    }
                }
                out.extend(softmax_with_sink(
                    &w,
                    sinks.as_ref().map(|s| s[i2 as usize]),
                ));
            }
        }
    }
    n.store(&out)
}
