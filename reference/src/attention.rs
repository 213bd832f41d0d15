//! FLASH_ATTN_EXT (mask, sinks, logit softcap, ALiBi; any K/V type the
//! contract accepts).

use super::Node;
use super::softmax::{alibi_slope, sinks_for, softmax_with_sink};
use backplane_runtime::ComputeError;

/// `softmax(scale * q·k + slope * mask) v` per query row, head and batch;
/// with softcap `c != 0` the score is `c * tanh(scale * q·k / c)` before the
/// mask. K/V heads broadcast over Q heads by division. Keys whose mask is
/// -inf are skipped; a row with no key and no sink is zero. The result is
/// `[Dv, heads, n_q, batch]`.
pub(crate) fn flash_attn_ext(n: &Node) -> Result<(), ComputeError> {
    let (q, k, v) = (n.src(0)?, n.src(1)?, n.src(2)?);
    let mask = n.opt(3);
    let (scale, max_bias, softcap) = (n.p_f32(0) as f64, n.p_f32(1), n.p_f32(2) as f64);
    let (qn, kn, vn) = (q.ne(), k.ne(), v.ne());
    let [_, n_q, heads, batch] = qn;
    let (n_kv, dv) = (kn[1], vn[0]);
    let sinks = sinks_for(n.opt(4), heads);
    let (rk2, rk3) = (heads / kn[2], batch / kn[3]);
    let mut out = vec![0f64; n.dst.nelements() as usize];
    for i3 in 0..batch {
        for h in 0..heads {
            let slope = alibi_slope(max_bias, h as u32, heads as u32);
            let (ik2, ik3) = (h / rk2, i3 / rk3);
            let keys: Vec<Vec<f64>> = (0..n_kv).map(|j| k.row(j, ik2, ik3)).collect();
            let values: Vec<Vec<f64>> = (0..n_kv).map(|j| v.row(j, ik2, ik3)).collect();
            for iq in 0..n_q {
                let qrow = q.row(iq, h, i3);
                let mrow = mask
                    .as_ref()
                    .map(|m| m.row(iq, h % m.ne()[2], i3 % m.ne()[3]));
                let mut used = Vec::with_capacity(n_kv as usize);
                let mut logits = Vec::with_capacity(n_kv as usize);
                for j in 0..n_kv as usize {
                    let mv = mrow.as_ref().map_or(0.0, |m| slope * m[j]);
                    if mv == f64::NEG_INFINITY {
                        continue;
                    }
                    let mut s = scale * qrow.iter().zip(&keys[j]).map(|(a, b)| a * b).sum::<f64>();
                    if softcap != 0.0 {
                        s = softcap * (s / softcap).tanh();
                    }
                    used.push(j);
                    logits.push(s + mv);
                }
                let sink = sinks.as_ref().map(|s| s[h as usize]);
                let base = (((i3 * n_q + iq) * heads + h) * dv) as usize;
                if logits.is_empty() && sink.is_none() {
                    continue;
                }
                let p = softmax_with_sink(&logits, sink);
                for (&j, pj) in used.iter().zip(p) {
                    for (o, vv) in out[base..base + dv as usize].iter_mut().zip(&values[j]) {
                        *o += pj * vv;
                    }
                }
            }
        }
    }
    n.store(&out)
}
