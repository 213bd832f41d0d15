//! ROPE: rotary position embedding, as ggml_rope_ext.

use super::{Operands, Shape, describe};
use crate::contract::Refusal;
use crate::{DType, rope_mode};

/// a f32/f16 `[d, heads, tokens, b]` with dense rows, pos i32 `[tokens]`
/// (4 per token in the multi-section modes), optional f32 freq_factors of
/// one value per rotated pair; op_params[1] n_dims (even, positive, at most
/// d; d / 2 in vision mode), op_params[2] a [`rope_mode`], op_params[11..15]
/// the sections of the multi-section modes -> a's type and shape.
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
    if per == 4 {
        let sections = [11, 12, 13, 14].map(|i| o.i32(i));
        let sum: i64 = sections.iter().map(|&s| s as i64).sum();
        o.need(
            sections.iter().all(|&s| s >= 0) && sum > 0 && sum <= a.ne[0],
            "op_params[11..15] (sections)",
            || format!("dims not negative with a sum in 1..={} (a's ne0)", a.ne[0]),
            || format!("{sections:?}"),
        )?;
    }
    let vision = mode == rope_mode::VISION;
    if vision {
        o.need(
            n_dims as i64 * 2 == a.ne[0],
            "op_params[1] (n_dims)",
            || format!("{} (half of a's ne0, vision mode)", a.ne[0] / 2),
            || n_dims.to_string(),
        )?;
    }
    if let Some(f) = o.opt(2) {
        o.of_type("freq_factors", f, &[DType::F32])?;
        // Vision mode rotates every pair of the row; the others n_dims / 2.
        let needed = if vision {
            a.ne[0] / 2
        } else {
            n_dims as i64 / 2
        };
        o.need(
            f.ne[0] >= needed,
            "freq_factors",
            || format!("at least {needed} values (one per rotated pair)"),
            || describe(f),
        )?;
    }
    Ok(Shape { dtype, ne: a.ne })
}
