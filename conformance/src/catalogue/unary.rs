//! SQR, SQRT, LOG, SIN, COS, SCALE, CLAMP, FILL, UNARY and GLU.

use backplane::{DType, GluOp, Op, UnaryOp};

use super::{Catalogue, bound_for, dims};
use crate::case::Fill;

/// Adds the family's cases.
pub(super) fn add(c: &mut Catalogue) {
    unary(c);
    glu(c);
    scalar_ops(c);
    c.grid(unary_glu_ggml_grid);
}

fn unary_range(f: UnaryOp) -> Fill {
    match f {
        UnaryOp::Exp | UnaryOp::Expm1 | UnaryOp::Softplus | UnaryOp::Elu => {
            Fill::Uniform(-5.0, 5.0)
        }
        UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Trunc => {
            Fill::Uniform(-10.0, 10.0)
        }
        _ => Fill::Uniform(-3.0, 3.0),
    }
}

fn unary(c: &mut Catalogue) {
    for &f in UnaryOp::ALL {
        for dt in [DType::F32, DType::F16] {
            for ne in [[128, 2, 2, 2], [5, 7, 11, 13], [1, 1, 1, 1]] {
                for inplace in [false, true] {
                    if inplace && ne[0] != 128 {
                        continue;
                    }
                    let name = format!(
                        "UNARY(op={f},type={dt},ne=[{}],inplace={inplace})",
                        dims(&ne)
                    );
                    c.push(Op::Unary, name, bound_for(dt), move |b| {
                        let x = b.input_with(dt, &ne, unary_range(f))?;
                        match (f, inplace) {
                            (UnaryOp::Xielu, _) => b.g.xielu(x, 0.8, 0.5, 0.5, 1e-6),
                            (_, false) => b.g.unary(x, f),
                            (_, true) => b.g.unary_inplace(x, f),
                        }
                    });
                }
            }
            // Non-contiguous rows (permuted dims 1 and 2).
            let ne = [16, 5, 3, 2];
            let name = format!("UNARY(op={f},type={dt},ne=[{}],perm=[0,2,1,3])", dims(&ne));
            c.push(Op::Unary, name, bound_for(dt), move |b| {
                let x = b.permuted(dt, ne, [0, 2, 1, 3], unary_range(f))?;
                match f {
                    UnaryOp::Xielu => b.g.xielu(x, 0.8, 0.5, 0.5, 1e-6),
                    _ => b.g.unary(x, f),
                }
            });
        }
    }
    for (op, fill) in [
        (Op::Sqr, Fill::Uniform(-2.0, 2.0)),
        (Op::Sqrt, Fill::Uniform(0.0, 4.0)),
        (Op::Log, Fill::Uniform(0.1, 4.0)),
        (Op::Sin, Fill::Uniform(-6.0, 6.0)),
        (Op::Cos, Fill::Uniform(-6.0, 6.0)),
    ] {
        for dt in [DType::F32, DType::F16] {
            for ne in [[10, 5, 4, 3], [1, 1, 1, 1], [1024, 3, 1, 1]] {
                let name = format!("{op}(type={dt},ne=[{}])", dims(&ne));
                c.push(op, name, bound_for(dt), move |b| {
                    let x = b.input_with(dt, &ne, fill)?;
                    match op {
                        Op::Sqr => b.g.sqr(x),
                        Op::Sqrt => b.g.sqrt(x),
                        Op::Log => b.g.log(x),
                        Op::Sin => b.g.sin(x),
                        _ => b.g.cos(x),
                    }
                });
            }
        }
    }
}

fn glu(c: &mut Catalogue) {
    for &f in GluOp::ALL {
        for dt in [DType::F32, DType::F16] {
            for ne in [[128, 4, 2, 1], [10, 3, 1, 1], [2, 1, 1, 1]] {
                for swapped in [false, true] {
                    let name = format!(
                        "GLU(op={f},type={dt},ne=[{}],split=1,swapped={swapped})",
                        dims(&ne)
                    );
                    c.push(Op::Glu, name, bound_for(dt), move |b| {
                        let x = b.input_with(dt, &ne, Fill::Uniform(-3.0, 3.0))?;
                        match f {
                            GluOp::SwigluOai => b.g.swiglu_oai(x, None, 1.702, 7.0),
                            _ => b.g.glu_split(x, f, swapped),
                        }
                    });
                }
                let name = format!("GLU(op={f},type={dt},ne=[{}],split=0)", dims(&ne));
                c.push(Op::Glu, name, bound_for(dt), move |b| {
                    let x = b.input_with(dt, &ne, Fill::Uniform(-3.0, 3.0))?;
                    let y = b.input_with(dt, &ne, Fill::Uniform(-3.0, 3.0))?;
                    match f {
                        GluOp::SwigluOai => b.g.swiglu_oai(x, Some(y), 1.702, 0.5),
                        _ => b.g.glu(x, y, f),
                    }
                });
            }
        }
    }
}

fn scalar_ops(c: &mut Catalogue) {
    for dt in [DType::F32, DType::F16] {
        for ne in [[10, 10, 10, 10], [1, 1, 1, 1], [4097, 3, 1, 1]] {
            for (s, bias, inplace) in [
                (2.0f32, 0.0f32, false),
                (0.5, 1.25, false),
                (-3.0, 0.0, true),
            ] {
                let name = format!(
                    "SCALE(type={dt},ne=[{}],s={s},b={bias},inplace={inplace})",
                    dims(&ne)
                );
                c.push(Op::Scale, name, bound_for(dt), move |b| {
                    let x = b.input(dt, &ne)?;
                    b.g.scale_bias(x, s, bias, inplace)
                });
            }
            for (lo, hi) in [(-0.5f32, 0.5f32), (0.0, 1.0)] {
                let name = format!("CLAMP(type={dt},ne=[{}],min={lo},max={hi})", dims(&ne));
                c.push(Op::Clamp, name, bound_for(dt), move |b| {
                    let x = b.input(dt, &ne)?;
                    b.g.clamp(x, lo, hi)
                });
            }
            for v in [0.0f32, -2.5] {
                let name = format!("FILL(type={dt},ne=[{}],c={v})", dims(&ne));
                c.push(Op::Fill, name, bound_for(dt), move |b| {
                    let x = b.input(dt, &ne)?;
                    b.g.fill(x, v)
                });
            }
        }
    }
}

/// Input range of test-backend-ops' unary and GLU grids ([-150, 150], to
/// catch NaNs from saturating functions), narrowed where the function
/// overflows f32 (exp and friends).
fn wide_range(f: UnaryOp) -> Fill {
    match f {
        UnaryOp::Exp | UnaryOp::Expm1 | UnaryOp::Xielu => Fill::Uniform(-5.0, 5.0),
        _ => Fill::Uniform(-150.0, 150.0),
    }
}

/// test-backend-ops' UNARY and GLU loops: [128, 2, 2, 2] and [5, 7, 11,
/// 13], contiguous or a view of a 3x wider tensor, for every function, in
/// f16, f32 and (as the later version has it) bf16.
fn unary_glu_ggml_grid(c: &mut Catalogue) {
    let uni = Fill::Uniform(-150.0, 150.0);
    // bf16 is the later test-backend-ops' (llama.cpp 0c1e5709) addition.
    for dt in [DType::F16, DType::F32, DType::BF16] {
        for v in [false, true] {
            let grow = if v { [3, 1, 1, 1] } else { [1; 4] };
            let id = [0, 1, 2, 3];
            for ne in [[128i64, 2, 2, 2], [5, 7, 11, 13]] {
                for &f in UnaryOp::ALL {
                    let name = format!(
                        "UNARY(op={f},type={dt},ne_a=[{}],v={})",
                        dims(&ne),
                        v as i32
                    );
                    c.push(Op::Unary, name, bound_for(dt), move |b| {
                        let x = b.strided(dt, ne, grow, id, wide_range(f))?;
                        match f {
                            UnaryOp::Xielu => b.g.xielu(x, 0.8, 0.5, 0.5, 1e-6),
                            _ => b.g.unary(x, f),
                        }
                    });
                }
                for &f in GluOp::ALL {
                    if f == GluOp::SwigluOai {
                        continue;
                    }
                    // ggml halves an odd ne0 (dropping the last value);
                    // backplane's GLU needs an even one: 5 becomes 10.
                    let ne_h = [
                        if ne[0] % 2 == 1 { ne[0] * 2 } else { ne[0] },
                        ne[1],
                        ne[2],
                        ne[3],
                    ];
                    for swapped in [false, true] {
                        let name = format!(
                            "GLU(op={f},type={dt},ne_a=[{}],v={},swapped={swapped})",
                            dims(&ne_h),
                            v as i32
                        );
                        c.push(Op::Glu, name, bound_for(dt), move |b| {
                            let x = b.strided(dt, ne_h, grow, id, uni)?;
                            b.g.glu_split(x, f, swapped)
                        });
                    }
                    let name = format!(
                        "GLU(op={f},type={dt},ne_a=[{}],v={},two_tensors=true)",
                        dims(&ne),
                        v as i32
                    );
                    c.push(Op::Glu, name, bound_for(dt), move |b| {
                        let x = b.strided(dt, ne, grow, id, uni)?;
                        let y = b.strided(dt, ne, grow, id, uni)?;
                        b.g.glu(x, y, f)
                    });
                }
            }
        }
    }
    for v in [false, true] {
        for alpha in [0.5f32, 1.702] {
            for limit in [2.0f32, 7.0] {
                let ne = [128i64, 2, 2, 2];
                let name = format!(
                    "GLU(op=SWIGLU_OAI,type=f32,ne_a=[{}],v={},alpha={alpha},limit={limit})",
                    dims(&ne),
                    v as i32
                );
                c.push(Op::Glu, name, 1e-7, move |b| {
                    let grow = if v { [3, 1, 1, 1] } else { [1; 4] };
                    let x = b.strided(DType::F32, ne, grow, [0, 1, 2, 3], uni)?;
                    let y = b.strided(DType::F32, ne, grow, [0, 1, 2, 3], uni)?;
                    b.g.swiglu_oai(x, Some(y), alpha, limit)
                });
            }
        }
    }
}
