//! MUL_MAT and MUL_MAT_ID.

use super::{FLOATS, Operands, Shape, describe};
use crate::DType;
use crate::contract::Refusal;

/// Weight types with a mat-mul: the floats and every block format but
/// q8_K (which only exists as an activation format).
const WEIGHT_TYPES: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q8_1,
    DType::Q2_K,
    DType::Q3_K,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
];

fn weight_type(o: &Operands<'_>, name: &str, t: &crate::TensorDesc) -> Result<DType, Refusal> {
    o.of_type(name, t, WEIGHT_TYPES)
}

/// `a^T b` as ggml_mul_mat: a `[K, M, a2, a3]` (float or block type, rows
/// dense, not transposed), b `[K, N, b2, b3]` f32/f16/bf16 with a2 | b2 and
/// a3 | b3 -> f32 `[M, N, b2, b3]`.
pub(crate) fn mul_mat(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let a = o.src(0, "a")?;
    weight_type(o, "a", a)?;
    let (b, _) = o.typed(1, "b", FLOATS)?;
    o.need(
        !a.is_transposed(),
        "a",
        || "rows not transposed".into(),
        || format!("{} with strides {:?}", describe(a), a.nb),
    )?;
    o.rows("a", a)?;
    o.need(
        a.ne[0] == b.ne[0] && b.ne[2] % a.ne[2] == 0 && b.ne[3] % a.ne[3] == 0,
        "b",
        || {
            format!(
                "ne0 = {} and ne2, ne3 multiples of {}, {} (a is {})",
                a.ne[0],
                a.ne[2],
                a.ne[3],
                describe(a)
            )
        },
        || describe(b),
    )?;
    Ok(Shape {
        dtype: DType::F32,
        ne: [a.ne[1], b.ne[1], b.ne[2], b.ne[3]],
    })
}

/// Mixture-of-experts mat-mul as ggml_mul_mat_id: experts `[K, M, E]`
/// (not transposed), b f32 `[K, e_b, T]` with e_b dividing n_used, ids i32
/// `[n_used, T]` -> f32 `[M, n_used, T]`.
pub(crate) fn mul_mat_id(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let w = o.src(0, "experts")?;
    weight_type(o, "experts", w)?;
    let (b, _) = o.typed(1, "b", &[DType::F32])?;
    let (ids, _) = o.typed(2, "ids", &[DType::I32])?;
    o.need(
        w.ne[3] == 1 && !w.is_transposed(),
        "experts",
        || "a 3-d tensor [K, M, E], rows not transposed".into(),
        || format!("{} with strides {:?}", describe(w), w.nb),
    )?;
    o.need(
        ids.ne[2] == 1 && ids.ne[3] == 1,
        "ids",
        || "a matrix [n_used, T]".into(),
        || describe(ids),
    )?;
    o.need(
        b.ne[3] == 1 && b.ne[0] == w.ne[0] && b.ne[2] == ids.ne[1] && ids.ne[0] % b.ne[1] == 0,
        "b",
        || {
            format!(
                "[{}, a divisor of {}, {}, 1] (experts' K, ids' n_used and T)",
                w.ne[0], ids.ne[0], ids.ne[1]
            )
        },
        || describe(b),
    )?;
    Ok(Shape {
        dtype: DType::F32,
        ne: [w.ne[1], ids.ne[0], b.ne[2], 1],
    })
}
