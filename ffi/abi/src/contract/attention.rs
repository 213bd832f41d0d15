//! FLASH_ATTN_EXT: fused `softmax(scale * Q K^T + slope * mask) V`.

use super::{Operands, Shape, describe};
use crate::DType;
use crate::contract::Refusal;

/// q f32 `[D, n_q, H, B]`, k `[D, n_kv, H_kv, B_kv]` and v `[Dv, n_kv,
/// H_kv, B_kv]` of [`DType::ATTENTION_KV_TYPES`] (H_kv divides H, B_kv
/// divides B), optional f16 mask `[n_kv, >= n_q, *, *]` (rows dense, its
/// dims 2 and 3 dividing q's), optional f32 sinks (one per head);
/// op_params: scale, max_bias (needs a mask when not 0), logit_softcap
/// -> f32 `[Dv, H, n_q, B]`.
pub(crate) fn flash_attn_ext(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (q, _) = o.typed(0, "q", &[DType::F32])?;
    let (k, _) = o.typed(1, "k", &DType::ATTENTION_KV_TYPES)?;
    let (v, _) = o.typed(2, "v", &DType::ATTENTION_KV_TYPES)?;
    o.need(
        k.ne[0] == q.ne[0] && q.ne[2] % k.ne[2] == 0 && q.ne[3] % k.ne[3] == 0,
        "k",
        || {
            format!(
                "[{}, n_kv, H_kv, B_kv] with H_kv | {} and B_kv | {} (q's head size, heads, batch)",
                q.ne[0], q.ne[2], q.ne[3]
            )
        },
        || describe(k),
    )?;
    o.need(
        v.ne[1] == k.ne[1] && v.ne[2] == k.ne[2] && v.ne[3] == k.ne[3],
        "v",
        || {
            format!(
                "[Dv, {}, {}, {}] (k's n_kv, H_kv, B_kv)",
                k.ne[1], k.ne[2], k.ne[3]
            )
        },
        || describe(v),
    )?;
    for (name, t) in [("k", k), ("v", v)] {
        o.need(
            !t.is_transposed(),
            name,
            || "rows not transposed".into(),
            || format!("{} with strides {:?}", describe(t), t.nb),
        )?;
    }
    match o.opt(3) {
        Some(m) => {
            o.of_type("mask", m, &[DType::F16])?;
            o.need(
                m.ne[0] == k.ne[1]
                    && m.ne[1] >= q.ne[1]
                    && q.ne[2] % m.ne[2] == 0
                    && q.ne[3] % m.ne[3] == 0,
                "mask",
                || {
                    format!(
                        "[{}, >= {}, a divisor of {}, a divisor of {}] (k's n_kv, q's n_q, heads, batch)",
                        k.ne[1], q.ne[1], q.ne[2], q.ne[3]
                    )
                },
                || describe(m),
            )?;
            o.rows("mask", m)?;
        }
        None => {
            let max_bias = o.f32(1);
            o.need(
                max_bias == 0.0,
                "op_params[1] (max_bias)",
                || "0 without a mask".into(),
                || max_bias.to_string(),
            )?;
        }
    }
    if let Some(s) = o.opt(4) {
        o.of_type("sinks", s, &[DType::F32])?;
        o.need(
            s.nelements() == q.ne[2],
            "sinks",
            || format!("one value per head ({})", q.ne[2]),
            || describe(s),
        )?;
    }
    Ok(Shape {
        dtype: DType::F32,
        ne: [v.ne[0], q.ne[2], q.ne[1], q.ne[3]],
    })
}
