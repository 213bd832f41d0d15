//! SOFT_MAX: `softmax(a * scale + slope * mask)` over dim 0, with ALiBi
//! slopes and per-head sinks.

use super::{Operands, Shape, describe};
use crate::DType;
use crate::contract::Refusal;

/// a f32 contiguous, optional mask f32/f16 `[a.ne0, >= a.ne1, *, *]` (rows
/// dense, dims 2 and 3 dividing a's), optional f32 sinks (one per head,
/// a.ne2); op_params: scale, max_bias (needs a mask when not 0) -> f32 of
/// a's shape.
pub(crate) fn soft_max(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (a, _) = o.typed(0, "a", &[DType::F32])?;
    o.contiguous("a", a)?;
    match o.opt(1) {
        Some(m) => {
            o.of_type("mask", m, &[DType::F32, DType::F16])?;
            o.rows("mask", m)?;
            o.need(
                m.ne[0] == a.ne[0]
                    && m.ne[1] >= a.ne[1]
                    && a.ne[2] % m.ne[2] == 0
                    && a.ne[3] % m.ne[3] == 0,
                "mask",
                || {
                    format!(
                        "[{}, >= {}, a divisor of {}, a divisor of {}] (covering a)",
                        a.ne[0], a.ne[1], a.ne[2], a.ne[3]
                    )
                },
                || describe(m),
            )?;
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
    if let Some(s) = o.opt(2) {
        o.of_type("sinks", s, &[DType::F32])?;
        o.need(
            s.nelements() == a.ne[2],
            "sinks",
            || format!("one value per head ({})", a.ne[2]),
            || describe(s),
        )?;
    }
    Ok(Shape {
        dtype: DType::F32,
        ne: a.ne,
    })
}
