//! ADD SUB MUL DIV, UNARY, the simple maps (SQR .. FILL, SCALE) and GLU;
//! kernels in `kernels/elementwise.cpp`.

use backplane_abi::{MAX_SRC, Op, TensorDesc, UnaryOp};

use super::{Exec, FLOATS, want_type};
use crate::kernels::Source;

type Srcs<'a> = [Option<&'a TensorDesc>; MAX_SRC];

fn need<'a>(src: &Srcs<'a>, k: usize, op: &str) -> Result<&'a TensorDesc, String> {
    src[k].ok_or_else(|| format!("{op} needs source {k}"))
}

pub(super) fn supports_binary(d: &TensorDesc, src: &Srcs<'_>) -> Result<(), String> {
    let (a, b) = (need(src, 0, "binary op")?, need(src, 1, "binary op")?);
    want_type("a", a, &FLOATS)?;
    want_type("b", b, &FLOATS)?;
    want_type("result", d, &FLOATS)?;
    Ok(())
}

/// Code of the `apply` function in elementwise.cpp.
fn unary_code(op: Op, d: &TensorDesc) -> Result<i64, String> {
    Ok(match op {
        Op::Unary => {
            let f = UnaryOp::from_code(d.op_params[0] as u32).map_err(|e| e.to_string())?;
            f.code() as i64
        }
        Op::Sqr => 100,
        Op::Sqrt => 101,
        Op::Log => 102,
        Op::Sin => 103,
        Op::Cos => 104,
        Op::Scale => 105,
        Op::Clamp => 106,
        Op::Fill => 107,
        other => return Err(format!("{other} is not an element-wise map")),
    })
}

pub(super) fn supports_unary(op: Op, d: &TensorDesc, src: &Srcs<'_>) -> Result<(), String> {
    unary_code(op, d)?;
    let a = need(src, 0, op.name())?;
    want_type("a", a, &FLOATS)?;
    want_type("result", d, &FLOATS)?;
    Ok(())
}

pub(super) fn supports_glu(d: &TensorDesc, src: &Srcs<'_>) -> Result<(), String> {
    let a = need(src, 0, "GLU")?;
    want_type("a", a, &FLOATS)?;
    want_type("result", d, &FLOATS)?;
    if let Some(b) = src[1] {
        want_type("b", b, &FLOATS)?;
    }
    Ok(())
}

pub(super) fn binary(x: &Exec<'_>, i: usize, op: Op) -> Result<(), String> {
    let mut args = x.args(i);
    args.x[0] = match op {
        Op::Add => 0,
        Op::Sub => 1,
        Op::Mul => 2,
        _ => 3,
    };
    x.launch_1d(
        Source::Elementwise,
        "k_binary",
        i,
        x.graph[i].nelements() as usize,
        &args,
    )
}

pub(super) fn unary(x: &Exec<'_>, i: usize, op: Op) -> Result<(), String> {
    let mut args = x.args(i);
    args.x[0] = unary_code(op, &x.graph[i])?;
    x.launch_1d(
        Source::Elementwise,
        "k_unary",
        i,
        x.graph[i].nelements() as usize,
        &args,
    )
}

pub(super) fn glu(x: &Exec<'_>, i: usize) -> Result<(), String> {
    let mut args = x.args(i);
    args.x[1] = i64::from(x.src(i, 1).is_none());
    x.launch_1d(
        Source::Elementwise,
        "k_glu",
        i,
        x.graph[i].nelements() as usize,
        &args,
    )
}
