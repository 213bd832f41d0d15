//! Reductions along rows and over all elements, and the ops that rank a
//! row's elements: SUM, SUM_ROWS, CUMSUM, ARGMAX, ARGSORT, TOP_K.

use super::{FLOATS, Operands, Shape, describe};
use crate::contract::Refusal;
use crate::{DType, Op, SortOrder};

/// SUM: a f32/f16/bf16 -> one element of a's type; SUM_ROWS: -> `[1, ne1,
/// ne2, ne3]`.
pub(crate) fn sum(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (a, dtype) = o.typed(0, "a", FLOATS)?;
    let ne = if o.op == Op::Sum {
        [1, 1, 1, 1]
    } else {
        [1, a.ne[1], a.ne[2], a.ne[3]]
    };
    Ok(Shape { dtype, ne })
}

/// CUMSUM: a f32 with dense rows -> f32 of a's shape.
pub(crate) fn cumsum(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (a, _) = o.typed(0, "a", &[DType::F32])?;
    o.rows("a", a)?;
    Ok(Shape {
        dtype: DType::F32,
        ne: a.ne,
    })
}

/// ARGMAX: a f32 matrix `[n, rows]` -> i32 `[rows]`.
pub(crate) fn argmax(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (a, _) = o.typed(0, "a", &[DType::F32])?;
    o.need(
        a.ne[2] == 1 && a.ne[3] == 1,
        "a",
        || "a matrix".into(),
        || describe(a),
    )?;
    Ok(Shape {
        dtype: DType::I32,
        ne: [a.ne[1], 1, 1, 1],
    })
}

/// Rows no longer than i32 indices reach.
fn indexable(o: &Operands<'_>, a: &crate::TensorDesc) -> Result<(), Refusal> {
    o.need(
        a.ne[0] <= i32::MAX as i64,
        "a",
        || "rows short enough for i32 indices".into(),
        || describe(a),
    )
}

/// ARGSORT: a f32 -> i32 of a's shape; op_params[0] a [`SortOrder`].
pub(crate) fn argsort(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (a, _) = o.typed(0, "a", &[DType::F32])?;
    indexable(o, a)?;
    let order = o.i32(0);
    o.need(
        order == SortOrder::Asc as i32 || order == SortOrder::Desc as i32,
        "op_params[0] (order)",
        || "0 (ascending) or 1 (descending)".into(),
        || order.to_string(),
    )?;
    Ok(Shape {
        dtype: DType::I32,
        ne: a.ne,
    })
}

/// TOP_K: a f32, k = op_params[0] in `1..=a.ne0` -> i32 `[k, ne1, ne2, ne3]`.
pub(crate) fn top_k(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (a, _) = o.typed(0, "a", &[DType::F32])?;
    indexable(o, a)?;
    let k = o.i32(0) as i64;
    o.need(
        k >= 1 && k <= a.ne[0],
        "op_params[0] (k)",
        || format!("a count in 1..={} (a's ne0)", a.ne[0]),
        || k.to_string(),
    )?;
    Ok(Shape {
        dtype: DType::I32,
        ne: [k, a.ne[1], a.ne[2], a.ne[3]],
    })
}
