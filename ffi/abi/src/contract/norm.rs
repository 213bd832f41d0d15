//! NORM, RMS_NORM and L2_NORM: each row normalised, eps in op_params[0].

use super::{Operands, Shape};
use crate::DType;
use crate::contract::Refusal;

/// a f32 with dense rows, eps (op_params[0]) not negative -> f32 of a's
/// shape.
pub(crate) fn norm(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (a, _) = o.typed(0, "a", &[DType::F32])?;
    o.rows("a", a)?;
    let eps = o.f32(0);
    o.need(
        eps >= 0.0,
        "op_params[0] (eps)",
        || "a value not negative".into(),
        || eps.to_string(),
    )?;
    Ok(Shape {
        dtype: DType::F32,
        ne: a.ne,
    })
}
