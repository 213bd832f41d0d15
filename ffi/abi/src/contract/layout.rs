//! Views (RESHAPE, VIEW, PERMUTE, TRANSPOSE), copies (CONT, CPY), gathers
//! and scatters (GET_ROWS, SET_ROWS) and the ops that move data around
//! (REPEAT, CONCAT, PAD); leaves too.

use super::{Operands, Shape, can_repeat, describe};
use crate::contract::Refusal;
use crate::{DType, MAX_DIMS, Op};

/// A leaf: the tensor is what it is.
pub(crate) fn leaf(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let t = o.chosen_result()?;
    let dtype = o.of_type("result", t, &DType::ALL)?;
    Ok(Shape { dtype, ne: t.ne })
}

/// The view's shape, chosen by the caller, with ne0 whole blocks of a's type.
fn view_shape(o: &Operands<'_>, dtype: DType) -> Result<[i64; MAX_DIMS], Refusal> {
    let t = o.chosen_result()?;
    let bs = dtype.block_size() as i64;
    o.need(
        t.ne[0] % bs == 0,
        "result",
        || format!("ne0 a multiple of {dtype}'s block size {bs}"),
        || format!("{:?}", t.ne),
    )?;
    Ok(t.ne)
}

/// RESHAPE: a contiguous, the chosen shape of a's element count -> a's type.
pub(crate) fn reshape(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let a = o.src(0, "a")?;
    let dtype = o.of_type("a", a, &DType::ALL)?;
    o.contiguous("a", a)?;
    let ne = view_shape(o, dtype)?;
    let count: i64 = ne.iter().product();
    o.need(
        count == a.nelements(),
        "result",
        || format!("a shape of {} elements (a's)", a.nelements()),
        || format!("{ne:?} ({count} elements)"),
    )?;
    Ok(Shape { dtype, ne })
}

/// VIEW: the chosen shape over a's memory -> a's type. (That the view lies
/// inside a's memory is the graph builder's to check: it knows the root.)
pub(crate) fn view(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let a = o.src(0, "a")?;
    let dtype = o.of_type("a", a, &DType::ALL)?;
    let ne = view_shape(o, dtype)?;
    Ok(Shape { dtype, ne })
}

/// PERMUTE: op_params[0..4] a permutation (source dim i goes to position
/// `params[i]`); TRANSPOSE: dims 0 and 1 swapped -> a's type.
pub(crate) fn permute(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let a = o.src(0, "a")?;
    let dtype = o.of_type("a", a, &DType::ALL)?;
    let axes = if o.op == Op::Transpose {
        [1, 0, 2, 3]
    } else {
        [0, 1, 2, 3].map(|i| o.i32(i))
    };
    let mut seen = [false; MAX_DIMS];
    for &x in &axes {
        let fresh =
            (0..MAX_DIMS as i32).contains(&x) && !std::mem::replace(&mut seen[x as usize], true);
        o.need(
            fresh,
            "op_params[0..4] (axes)",
            || "a permutation of 0..4".into(),
            || format!("{axes:?}"),
        )?;
    }
    let mut ne = a.ne;
    for (i, &to) in axes.iter().enumerate() {
        ne[to as usize] = a.ne[i];
    }
    Ok(Shape { dtype, ne })
}

/// CONT: a dense copy of a, same type and shape.
pub(crate) fn cont(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let a = o.src(0, "a")?;
    let dtype = o.of_type("a", a, &DType::ALL)?;
    Ok(Shape { dtype, ne: a.ne })
}

/// CPY: a into b (same element count), converting float to float, block
/// or i32, i32 to f32, block to f32 (or any type to itself); block-typed
/// operands contiguous -> b's type and shape.
pub(crate) fn cpy(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let a = o.src(0, "a")?;
    let b = o.src(1, "b")?;
    let ta = o.of_type("a", a, &DType::ALL)?;
    let tb = o.of_type("b", b, &DType::ALL)?;
    o.need(
        a.nelements() == b.nelements(),
        "b",
        || format!("{} elements (a's)", a.nelements()),
        || describe(b),
    )?;
    let converts = ta == tb
        || (ta.is_float() && (tb.is_float() || tb.is_quantized() || tb == DType::I32))
        || (ta == DType::I32 && tb == DType::F32)
        || (ta.is_quantized() && tb == DType::F32);
    o.need(
        converts,
        "b",
        || format!("a type {ta} converts to"),
        || tb.name().to_string(),
    )?;
    if tb.is_quantized() {
        o.contiguous("b", b)?;
        o.need(
            b.ne[0] % tb.block_size() as i64 == 0,
            "b",
            || format!("ne0 whole {tb} blocks"),
            || describe(b),
        )?;
    }
    if ta.is_quantized() {
        o.contiguous("a", a)?;
    }
    Ok(Shape {
        dtype: tb,
        ne: b.ne,
    })
}

/// REPEAT: a f32/f16/bf16/i32/i16 tiled to b's shape -> a's type.
pub(crate) fn repeat(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let allowed = [DType::F32, DType::F16, DType::BF16, DType::I32, DType::I16];
    let (a, dtype) = o.typed(0, "a", &allowed)?;
    let b = o.src(1, "b")?;
    o.need(
        can_repeat(a, b),
        "b",
        || format!("dims that a's {:?} each divide", a.ne),
        || describe(b),
    )?;
    Ok(Shape { dtype, ne: b.ne })
}

/// CONCAT: a and b of one type (f32/f16/bf16/i32) joined along dim
/// op_params[0]; the other dims equal.
pub(crate) fn concat(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (a, dtype) = o.typed(0, "a", &[DType::F32, DType::F16, DType::BF16, DType::I32])?;
    let (b, _) = o.typed(1, "b", &[dtype])?;
    let dim = o.i32(0);
    o.need(
        (0..MAX_DIMS as i32).contains(&dim),
        "op_params[0] (dim)",
        || "a dim in 0..4".into(),
        || dim.to_string(),
    )?;
    let dim = dim as usize;
    o.need(
        (0..MAX_DIMS).all(|i| i == dim || a.ne[i] == b.ne[i]),
        "b",
        || format!("a's dims {:?} outside dim {dim}", a.ne),
        || describe(b),
    )?;
    let mut ne = a.ne;
    ne[dim] = ne[dim].saturating_add(b.ne[dim]);
    Ok(Shape { dtype, ne })
}

/// PAD: a f32, op_params[2i] zeros before and [2i + 1] after dim i (none
/// negative; [8], circular padding, 0) -> f32.
pub(crate) fn pad(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (a, _) = o.typed(0, "a", &[DType::F32])?;
    let pads: [i32; 8] = std::array::from_fn(|i| o.i32(i));
    o.need(
        pads.iter().all(|&p| p >= 0),
        "op_params[0..8] (pads)",
        || "no negative padding".into(),
        || format!("{pads:?}"),
    )?;
    let circular = o.i32(8);
    o.need(
        circular == 0,
        "op_params[8] (circular)",
        || "0 (zero padding)".into(),
        || circular.to_string(),
    )?;
    let mut ne = a.ne;
    for (i, n) in ne.iter_mut().enumerate() {
        *n = n.saturating_add(pads[2 * i] as i64 + pads[2 * i + 1] as i64);
    }
    Ok(Shape {
        dtype: DType::F32,
        ne,
    })
}

/// GET_ROWS: a `[n0, n1, n2, n3]`, rows i32 `[r, n2, n3]` -> `[n0, r, n2,
/// n3]`, i32 when a is i32, else f32.
pub(crate) fn get_rows(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let a = o.src(0, "a")?;
    let ta = o.of_type("a", a, &DType::ALL)?;
    let (rows, _) = o.typed(1, "rows", &[DType::I32])?;
    o.need(
        a.ne[2] == rows.ne[1] && a.ne[3] == rows.ne[2] && rows.ne[3] == 1,
        "rows",
        || format!("[r, {}, {}, 1] (a's ne2, ne3)", a.ne[2], a.ne[3]),
        || describe(rows),
    )?;
    let dtype = if ta == DType::I32 {
        DType::I32
    } else {
        DType::F32
    };
    Ok(Shape {
        dtype,
        ne: [a.ne[0], rows.ne[0], rows.ne[1], rows.ne[2]],
    })
}

/// SET_ROWS: f32 rows of src `[n0, r, n2, n3]` written into the chosen
/// destination `[n0, m, n2, n3]` (a float or block type, rows dense) at
/// i32/i64 rows `[r, b2, b3]` (b2 | n2, b3 | n3) -> the destination.
pub(crate) fn set_rows(o: &Operands<'_>) -> Result<Shape, Refusal> {
    let (src, _) = o.typed(0, "src", &[DType::F32])?;
    let (rows, _) = o.typed(1, "rows", &[DType::I32, DType::I64])?;
    let dst = o.chosen_result()?;
    let dtype = o.of_type("result", dst, &DType::ALL)?;
    o.need(
        dtype.is_float() || dtype.is_quantized(),
        "result",
        || "a float or block type".into(),
        || dtype.name().to_string(),
    )?;
    o.need(
        dst.ne[0] == src.ne[0] && dst.ne[2] == src.ne[2] && dst.ne[3] == src.ne[3],
        "src",
        || {
            format!(
                "[{}, r, {}, {}] (the destination's ne0, ne2, ne3)",
                dst.ne[0], dst.ne[2], dst.ne[3]
            )
        },
        || describe(src),
    )?;
    o.need(
        rows.ne[0] == src.ne[1]
            && src.ne[2] % rows.ne[1] == 0
            && src.ne[3] % rows.ne[2] == 0
            && rows.ne[3] == 1,
        "rows",
        || {
            format!(
                "[{}, a divisor of {}, a divisor of {}, 1] (src's rows, ne2, ne3)",
                src.ne[1], src.ne[2], src.ne[3]
            )
        },
        || describe(rows),
    )?;
    o.rows("result", dst)?;
    Ok(Shape { dtype, ne: dst.ne })
}
