//! ADD, SUB, MUL and DIV: element-wise with b broadcast over a.

use super::{FLOATS, Operands, Shape, can_repeat, describe};
use crate::contract::Refusal;

/// a and b f32/f16/bf16, b's dims each dividing a's, b's rows dense -> a's
/// type and shape.
pub(crate) fn binary(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (a, dtype) = o.typed(0, "a", FLOATS)?;
    let (b, _) = o.typed(1, "b", FLOATS)?;
    o.need(
        can_repeat(b, a),
        "b",
        || format!("dims dividing a's {:?} (b broadcasts over a)", a.ne),
        || describe(b),
    )?;
    o.rows("b", b)?;
    Ok(Shape { dtype, ne: a.ne })
}
