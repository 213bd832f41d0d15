//! CONV_2D and IM2COL. op_params: s0, s1, p0, p1, d0, d1 (x then y), and
//! for IM2COL [6] = 1 when 2-D.

use super::{Operands, Shape, describe};
use crate::DType;
use crate::contract::Refusal;

/// Output size of a convolution along one dim, as
/// ggml_calc_conv_output_size (not positive when the kernel does not fit).
pub fn conv_output_size(input: i64, kernel: i64, stride: i32, pad: i32, dilation: i32) -> i64 {
    let span = input as i128 + 2 * pad as i128 - dilation as i128 * (kernel as i128 - 1) - 1;
    let out = span / stride.max(1) as i128 + 1;
    out.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Strides and dilations positive, paddings not negative.
fn geometry(o: &Operands<'_>) -> Result<[i32; 6], Refusal> {
    let p = [0, 1, 2, 3, 4, 5].map(|i| o.i32(i));
    let [s0, s1, p0, p1, d0, d1] = p;
    o.need(
        s0 > 0 && s1 > 0 && d0 > 0 && d1 > 0 && p0 >= 0 && p1 >= 0,
        "op_params[0..6] (s0, s1, p0, p1, d0, d1)",
        || "positive strides and dilations, paddings not negative".into(),
        || format!("{p:?}"),
    )?;
    Ok(p)
}

/// Direct 2-D convolution as ggml_conv_2d_direct: kernel f32/f16 `[KW, KH,
/// Cin, Cout]`, input f32 `[W, H, Cin, N]` -> f32 `[OW, OH, Cout, N]`.
pub(crate) fn conv_2d(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (k, _) = o.typed(0, "kernel", &[DType::F32, DType::F16])?;
    let (x, dtype) = o.typed(1, "input", &[DType::F32])?;
    let [s0, s1, p0, p1, d0, d1] = geometry(o)?;
    o.need(
        k.ne[2] == x.ne[2],
        "input",
        || format!("{} channels (the kernel's ne2)", k.ne[2]),
        || describe(x),
    )?;
    let ow = conv_output_size(x.ne[0], k.ne[0], s0, p0, d0);
    let oh = conv_output_size(x.ne[1], k.ne[1], s1, p1, d1);
    o.need(
        ow > 0 && oh > 0,
        "kernel",
        || {
            format!(
                "a kernel that fits input {} with its strides, paddings and dilations",
                describe(x)
            )
        },
        || describe(k),
    )?;
    Ok(Shape {
        dtype,
        ne: [ow, oh, k.ne[3], x.ne[3]],
    })
}

/// Image to columns as ggml_im2col, the result type f32 or f16 chosen by
/// the caller. 2-D: kernel `[KW, KH, C, *]`, input f32 `[W, H, C, N]` ->
/// `[C*KH*KW, OW, OH, N]`; 1-D: kernel `[KW, C, *]`, input `[W, C, N]` ->
/// `[C*KW, OW, N]`.
pub(crate) fn im2col(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let k = o.src(0, "kernel")?;
    let (x, _) = o.typed(1, "input", &[DType::F32])?;
    let dtype = o.chosen_type(&[DType::F32, DType::F16])?;
    let [s0, s1, p0, p1, d0, d1] = geometry(o)?;
    let is_2d = o.i32(6);
    o.need(
        is_2d == 0 || is_2d == 1,
        "op_params[6] (is_2d)",
        || "0 or 1".into(),
        || is_2d.to_string(),
    )?;
    let c = if is_2d == 1 { 2 } else { 1 };
    o.need(
        k.ne[c] == x.ne[c],
        "input",
        || format!("{} channels in dim {c} (the kernel's)", k.ne[c]),
        || describe(x),
    )?;
    let ow = conv_output_size(x.ne[0], k.ne[0], s0, p0, d0);
    let oh = if is_2d == 1 {
        conv_output_size(x.ne[1], k.ne[1], s1, p1, d1)
    } else {
        1
    };
    o.need(
        ow > 0 && oh > 0,
        "kernel",
        || {
            format!(
                "a kernel that fits input {} with its strides, paddings and dilations",
                describe(x)
            )
        },
        || describe(k),
    )?;
    let ne = if is_2d == 1 {
        [
            k.ne[2].saturating_mul(k.ne[1]).saturating_mul(k.ne[0]),
            ow,
            oh,
            x.ne[3],
        ]
    } else {
        [k.ne[1].saturating_mul(k.ne[0]), ow, x.ne[2], 1]
    };
    Ok(Shape { dtype, ne })
}
