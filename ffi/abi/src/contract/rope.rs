//! ROPE: rotary position embedding, as ggml_rope_ext.

use super::{Operands, Shape, describe};
use crate::contract::Refusal;
use crate::{DType, rope_mode};

/// a f32/f16 `[d, heads, tokens, b]` with dense rows, pos i32 `[tokens]`
/// (4 per token in the multi-section modes), optional f32 freq_factors of
/// at least n_dims / 2 values; op_params[1] n_dims (even, positive, at most
/// d), op_params[2] a [`rope_mode`] -> a's type and shape.
pub(crate) fn rope(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (a, dtype) = o.typed(0, "a", &[DType::F32, DType::F16])?;
    let (pos, _) = o.typed(1, "pos", &[DType::I32])?;
    let (n_dims, mode) = (o.i32(1), o.i32(2));
    o.need(
        matches!(
            mode,
            rope_mode::NORMAL
                | rope_mode::NEOX
                | rope_mode::MROPE
                | rope_mode::VISION
                | rope_mode::IMROPE
        ),
        "op_params[2] (mode)",
        || "a rope mode (0, 2, 8, 24 or 40)".into(),
        || mode.to_string(),
    )?;
    let per = if mode & rope_mode::MROPE != 0 { 4 } else { 1 };
    let want = a.ne[2].saturating_mul(per);
    o.need(
        pos.ne[0] == want && pos.nelements() == pos.ne[0],
        "pos",
        || format!("a vector of {want} positions ({per} per token of a)"),
        || describe(pos),
    )?;
    o.need(
        n_dims > 0 && n_dims % 2 == 0 && n_dims as i64 <= a.ne[0],
        "op_params[1] (n_dims)",
        || format!("an even count in 2..={}", a.ne[0]),
        || n_dims.to_string(),
    )?;
    o.rows("a", a)?;
    if let Some(f) = o.opt(2) {
        o.of_type("freq_factors", f, &[DType::F32])?;
        o.need(
            f.ne[0] >= n_dims as i64 / 2,
            "freq_factors",
            || format!("at least n_dims / 2 = {} values", n_dims / 2),
            || describe(f),
        )?;
    }
    Ok(Shape { dtype, ne: a.ne })
}
