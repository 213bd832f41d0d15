//! SOFT_MAX (scale, f16/f32 mask, ALiBi, sinks) and FLASH_ATTN_EXT (mask,
//! sinks, logit softcap, ALiBi; any K/V type the constructor accepts).

use backplane_abi::DType;

use super::{Node, Tensor};
use crate::ComputeError;
use crate::error::describe;

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
fn softmax_with_sink(logits: &[f64], sink: Option<f64>) -> Vec<f64> {
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

fn sinks_for(
    n: &Node,
    sinks: Option<Tensor>,
    heads: i64,
) -> Result<Option<Vec<f64>>, ComputeError> {
    let Some(s) = sinks else { return Ok(None) };
    n.ensure(s.nelements() >= heads && s.ne()[0] >= heads, || {
        format!("sinks {} need one value per head ({heads})", describe(s.d))
    })?;
    Ok(Some((0..heads).map(|h| s.get(h, 0, 0, 0)).collect()))
}

/// Row-wise `softmax(a * scale + slope * mask)` with sinks, over dim 0. The
/// mask row is a's row index; mask dims 2 and 3 broadcast by modulo.
pub(crate) fn soft_max(n: &Node) -> Result<(), ComputeError> {
    let a = n.src(0)?;
    let mask = n.opt(1);
    n.same_shape("a and result", &a, &n.dst)?;
    let (scale, max_bias) = (n.p_f32(0) as f64, n.p_f32(1));
    let [ne0, ne1, ne2, ne3] = a.ne();
    if let Some(m) = &mask {
        let mn = m.ne();
        n.ensure(
            mn[0] == ne0 && mn[1] >= ne1 && ne2 % mn[2] == 0 && ne3 % mn[3] == 0,
            || format!("mask {} does not cover a {}", describe(m.d), describe(a.d)),
        )?;
        n.expect_type("mask", m, &[DType::F32, DType::F16])?;
    }
    let sinks = sinks_for(n, n.opt(2), ne2)?;
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
    let [dk, n_q, heads, batch] = qn;
    let (n_kv, dv) = (kn[1], vn[0]);
    n.ensure(
        kn[0] == dk
            && vn[1] == n_kv
            && vn[2] == kn[2]
            && vn[3] == kn[3]
            && heads % kn[2] == 0
            && batch % kn[3] == 0,
        || {
            format!(
                "q {}, k {}, v {} do not fit",
                describe(q.d),
                describe(k.d),
                describe(v.d)
            )
        },
    )?;
    n.ensure(n.dst.ne() == [dv, heads, n_q, batch], || {
        format!(
            "result {} must be [{dv}, {heads}, {n_q}, {batch}]",
            describe(n.dst.d)
        )
    })?;
    if let Some(m) = &mask {
        let mn = m.ne();
        n.ensure(
            mn[0] >= n_kv && mn[1] >= n_q && heads % mn[2] == 0 && batch % mn[3] == 0,
            || {
                format!(
                    "mask {} does not cover q {} x k {}",
                    describe(m.d),
                    describe(q.d),
                    describe(k.d)
                )
            },
        )?;
    }
    let sinks = sinks_for(n, n.opt(4), heads)?;
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
