//! Element-wise functions of one tensor (SQR, SQRT, LOG, SIN, COS, SCALE,
//! CLAMP, FILL, UNARY) and the gated linear units (GLU).

use super::{FLOATS, Operands, Shape, describe};
use crate::contract::Refusal;
use crate::{GluOp, Op, UnaryOp};

/// a f32/f16/bf16 with dense rows -> a's type and shape. UNARY's
/// op_params[0] is a [`UnaryOp`] code.
pub(crate) fn unary(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (a, dtype) = o.typed(0, "a", FLOATS)?;
    o.rows("a", a)?;
    if o.op == Op::Unary {
        let code = o.i32(0);
        o.need(
            UnaryOp::from_code(code as u32).is_ok(),
            "op_params[0] (function)",
            || "a unary op code".into(),
            || code.to_string(),
        )?;
    }
    Ok(Shape { dtype, ne: a.ne })
}

/// a f32/f16/bf16 with dense rows; with b (same shape and type, dense rows)
/// `f(a) * b` of a's shape, without b a's rows split in halves (ne0 even,
/// halved in the result); op_params[0] a [`GluOp`] code, [1] swapped (0 or
/// 1).
pub(crate) fn glu(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (a, dtype) = o.typed(0, "a", FLOATS)?;
    o.rows("a", a)?;
    let (code, swapped) = (o.i32(0), o.i32(1));
    o.need(
        GluOp::from_code(code as u32).is_ok(),
        "op_params[0] (function)",
        || "a glu op code".into(),
        || code.to_string(),
    )?;
    o.need(
        swapped == 0 || swapped == 1,
        "op_params[1] (swapped)",
        || "0 or 1".into(),
        || swapped.to_string(),
    )?;
    let mut ne = a.ne;
    match o.opt(1) {
        Some(b) => {
            o.need(
                b.ne == a.ne && b.dtype == a.dtype,
                "b",
                || format!("a's shape and type {}", describe(a)),
                || describe(b),
            )?;
            o.rows("b", b)?;
        }
        None => {
            o.need(
                a.ne[0] % 2 == 0,
                "a",
                || "an even ne0 to split in halves".into(),
                || describe(a),
            )?;
            ne[0] /= 2;
        }
    }
    Ok(Shape { dtype, ne })
}
