//! SSM_CONV and SSM_SCAN: Mamba's causal depthwise convolution and
//! selective scan.

use super::{Operands, Shape, describe};
use crate::DType;
use crate::contract::Refusal;

/// SSM_CONV: sx f32 `[d_conv - 1 + n_t, d_inner, n_s]`, c f32 `[d_conv,
/// d_inner]` -> f32 `[d_inner, n_t, n_s]`.
pub(crate) fn ssm_conv(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (sx, _) = o.typed(0, "sx", &[DType::F32])?;
    let (c, _) = o.typed(1, "c", &[DType::F32])?;
    o.need(
        sx.ne[3] == 1,
        "sx",
        || "a 3-d tensor [d_conv - 1 + n_t, d_inner, n_s]".into(),
        || describe(sx),
    )?;
    o.need(
        c.ne[2] == 1 && c.ne[3] == 1,
        "c",
        || "a matrix [d_conv, d_inner]".into(),
        || describe(c),
    )?;
    let n_t = sx.ne[0] - c.ne[0] + 1;
    o.need(
        n_t >= 1 && sx.ne[1] == c.ne[1],
        "sx",
        || {
            format!(
                "ne0 >= {} (c's d_conv) and ne1 = {} (c's d_inner)",
                c.ne[0], c.ne[1]
            )
        },
        || describe(sx),
    )?;
    Ok(Shape {
        dtype: DType::F32,
        ne: [c.ne[1], n_t, sx.ne[2], 1],
    })
}

/// SSM_SCAN as ggml_ssm_scan: states s `[d_state, head_dim, n_head,
/// n_seqs_total]`, x `[head_dim, n_head, n_tok, n_seqs]`, dt `[n_head,
/// n_tok, n_seqs]`, A `[1 or d_state, n_head]`, B and C `[d_state, n_group,
/// n_tok, n_seqs]`, ids i32 `[n_seqs]` -> f32 vector: every y, then the
/// final states.
pub(crate) fn ssm_scan(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let names = ["s", "x", "dt", "A", "B", "C"];
    let mut t = [None; 6];
    for (i, name) in names.iter().enumerate() {
        t[i] = Some(o.typed(i, name, &[DType::F32])?.0);
    }
    let [Some(s), Some(x), Some(dt), Some(a), Some(b), Some(c)] = t else {
        unreachable!("all six were just set")
    };
    let (ids, _) = o.typed(6, "ids", &[DType::I32])?;
    o.contiguous("s", s)?;
    o.contiguous("dt", dt)?;
    o.contiguous("A", a)?;
    let (d_state, head_dim, n_head, n_tok, n_seqs) = (s.ne[0], x.ne[0], x.ne[1], x.ne[2], x.ne[3]);
    o.need(
        s.ne[1] == head_dim && s.ne[2] == n_head,
        "s",
        || format!("[d_state, {head_dim}, {n_head}, n_seqs_total] (x's head_dim, n_head)"),
        || describe(s),
    )?;
    o.need(
        x.nb[0] == 4 && x.nb[1] == x.ne[0] as u64 * 4,
        "x",
        || "packed heads (nb0 = 4, nb1 = 4 * ne0)".into(),
        || format!("{} with strides {:?}", describe(x), x.nb),
    )?;
    o.need(
        dt.ne == [n_head, n_tok, n_seqs, 1],
        "dt",
        || format!("[{n_head}, {n_tok}, {n_seqs}, 1] (x's n_head, n_tok, n_seqs)"),
        || describe(dt),
    )?;
    o.need(
        a.ne[1] == n_head && a.ne[2] == 1 && a.ne[3] == 1 && (a.ne[0] == 1 || a.ne[0] == d_state),
        "A",
        || format!("[1 or {d_state}, {n_head}, 1, 1]"),
        || describe(a),
    )?;
    o.need(
        b.ne[0] == d_state && b.ne[2] == n_tok && b.ne[3] == n_seqs && n_head % b.ne[1] == 0,
        "B",
        || format!("[{d_state}, n_group dividing {n_head}, {n_tok}, {n_seqs}]"),
        || describe(b),
    )?;
    o.need(
        b.nb[0] == 4 && b.nb[1] == b.ne[0] as u64 * 4,
        "B",
        || "packed groups (nb0 = 4, nb1 = 4 * ne0)".into(),
        || format!("{} with strides {:?}", describe(b), b.nb),
    )?;
    o.need(
        c.ne == b.ne,
        "C",
        || format!("B's shape {:?}", b.ne),
        || describe(c),
    )?;
    o.need(
        ids.ne[0] == n_seqs && ids.nelements() == n_seqs,
        "ids",
        || format!("a vector of {n_seqs} sequence ids"),
        || describe(ids),
    )?;
    let n = d_state
        .checked_mul(head_dim)
        .and_then(|v| v.checked_mul(n_head))
        .and_then(|v| v.checked_mul(n_seqs))
        .and_then(|v| v.checked_add(x.nelements()));
    let n = n.ok_or_else(|| {
        o.refuse(
            "result",
            "an element count that fits i64",
            "y and states overflow",
        )
    })?;
    Ok(Shape {
        dtype: DType::F32,
        ne: [n, 1, 1, 1],
    })
}
