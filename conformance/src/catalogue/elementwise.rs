//! Binary, unary, GLU, scale/clamp/fill and reductions.

use backplane::{DType, GluOp, Op, UnaryOp};

use super::{Catalogue, PERMS, bound_for, dims};
use crate::case::Fill;

const SHAPES: [[i64; 4]; 5] = [
    [1, 1, 1, 1],
    [10, 5, 4, 3],
    [16, 10, 10, 10],
    [4096, 3, 1, 1],
    [33, 7, 3, 2],
];

pub(super) fn add(c: &mut Catalogue) {
    binary(c);
    c.grid(binary_ggml_grid_later);
    unary(c);
    glu(c);
    scalar_ops(c);
    c.grid(unary_glu_ggml_grid);
    reductions(c);
    c.grid(reductions_ggml_grid_later);
}

/// The later grid's two 16 M-element binary cases ([1, 1, 65536, 1] x
/// [256, 1, 1, 1] and [64, 262144, 1, 1]) keep 1/32 of their rows.
const GRID_BINARY_BIG_DIV: i64 = 32;
/// Channel counts of the later grid's Stable Diffusion shapes (640 to
/// 5,120, up to 2 M elements per case, 12 cases per shape) are divided by
/// this.
const GRID_BINARY_SD_DIV: i64 = 8;

/// The later test-backend-ops' ADD / SUB / MUL / DIV loops (llama.cpp
/// 0c1e5709): every broadcast factor over [10, 5, 4, 3] with src1 as is or
/// permuted, src1 a view overlapping src0, the CUDA unravel case and the
/// Stable Diffusion shapes, for f16, f32 and bf16; bf16 activations with
/// f32 weights. Its permuted src1 with rows longer than one element is
/// left out (backplane's binary ops want src1's rows contiguous).
fn binary_ggml_grid_later(c: &mut Catalogue) {
    #[allow(clippy::too_many_arguments)]
    fn push(
        c: &mut Catalogue,
        op: Op,
        dt: DType,
        ne: [i64; 4],
        nr: [i64; 4],
        perm1: bool,
        src_overlap: bool,
        type_b: Option<DType>,
    ) {
        let tb = type_b.map(|t| format!(",type_b={t}")).unwrap_or_default();
        let name = format!(
            "{op}(type={dt},ne=[{}],nr=[{}],nf=1,perm1={},src_overlap={}{tb})",
            dims(&ne),
            dims(&nr),
            perm1 as i32,
            src_overlap as i32
        );
        c.push(op, name, bound_for(dt), move |b| {
            let fill = if matches!(op, Op::Mul | Op::Div) {
                Fill::Uniform(0.9, 1.1)
            } else {
                Fill::Uniform(-1.0, 1.0)
            };
            let big = [ne[0] * nr[0], ne[1] * nr[1], ne[2] * nr[2], ne[3] * nr[3]];
            let a = b.input_with(dt, &big, fill)?;
            let tb = type_b.unwrap_or(dt);
            let (x, y) = if perm1 {
                (a, b.permuted(tb, ne, [1, 2, 0, 3], fill)?)
            } else if src_overlap {
                // src1 is planes ne3/3.. of src0 and the op reads planes
                // 0.. of it: two views of one buffer that overlap.
                let nb = b.g.desc(a).nb;
                let vne = [ne[0], ne[1], ne[2], 2 * (ne[3] / 3)];
                let strides = [nb[1], nb[2], nb[3]];
                let y = b.g.view(a, &vne, &strides, (ne[3] / 3) as u64 * nb[3])?;
                (b.g.view(a, &vne, &strides, 0)?, y)
            } else {
                (a, b.input_with(tb, &ne, fill)?)
            };
            match op {
                Op::Add => b.g.add(x, y),
                Op::Sub => b.g.sub(x, y),
                Op::Mul => b.g.mul(x, y),
                _ => b.g.div(x, y),
            }
        });
    }
    let ops = [Op::Add, Op::Sub, Op::Mul, Op::Div];
    let one = [1i64, 1, 1, 1];
    let big = GRID_BINARY_BIG_DIV;
    for dt in [DType::F16, DType::F32, DType::BF16] {
        for perm1 in [false, true] {
            for (ne, nr) in [
                ([1i64, 1, 8, 1], one),
                ([1, 1, 1, 1], [32, 1, 1, 1]),
                ([1, 1, 320, 320], one),
                ([10, 5, 1, 1], one),
                ([10, 5, 4, 1], one),
                ([10, 5, 4, 3], one),
                ([10, 5, 4, 3], [2, 1, 1, 1]),
                ([10, 5, 4, 3], [1, 2, 1, 1]),
                ([10, 5, 4, 3], [1, 1, 2, 1]),
                ([10, 5, 4, 3], [1, 1, 1, 2]),
                ([10, 5, 4, 3], [1, 1, 2, 2]),
                ([10, 5, 4, 3], [1, 2, 2, 2]),
                ([10, 5, 4, 3], [2, 2, 2, 2]),
            ] {
                // Backplane's binary ops want src1's rows contiguous: a
                // permuted src1 runs only where its rows are one element.
                if perm1 && ne[0] > 1 {
                    continue;
                }
                for op in ops {
                    push(c, op, dt, ne, nr, perm1, false, None);
                }
            }
        }
        for ne in [
            [10i64, 5, 4, 6],
            [10, 5, 4, 5],
            [1, 1, 120, 120],
            [1, 1, 4, 320],
        ] {
            for op in ops {
                push(c, op, dt, ne, one, false, true, None);
            }
        }
        let sd = GRID_BINARY_SD_DIV;
        for (ne, nr) in [
            ([1i64, 1, 65536 / big, 1], [256, 1, 1, 1]),
            ([1280 / sd, 1, 1, 1], one),
            ([1280 / sd, 1, 1, 1], [1, 16, 16, 1]),
            ([1280 / sd, 16, 16, 1], one),
            ([1280 / sd, 1, 1, 1], [1, 256, 1, 1]),
            ([1, 1, 1280 / sd, 1], [16, 16, 1, 1]),
            ([16, 16, 1280 / sd, 1], one),
            ([1, 1, 1920 / sd, 1], [16, 16, 1, 1]),
            ([1, 1, 2560 / sd, 1], [16, 16, 1, 1]),
            ([1, 1, 1280 / sd, 1], [32, 32, 1, 1]),
            ([1, 1, 1920 / sd, 1], [32, 32, 1, 1]),
            ([1, 1, 640 / sd, 1], [32, 32, 1, 1]),
            ([5120 / sd, 1, 1, 1], [1, 256, 1, 1]),
            ([640 / sd, 1, 1, 1], one),
            ([64, 262144 / big, 1, 1], one),
            ([128, 1, 8, 1], [1, 4, 1, 1]),
        ] {
            for op in ops {
                push(c, op, dt, ne, nr, false, false, None);
            }
        }
    }
    for op in ops {
        for (ne, nr) in [
            ([10i64, 5, 4, 3], one),
            ([10, 5, 4, 3], [2, 2, 2, 2]),
            ([5120, 1, 1, 1], [1, 32, 1, 1]),
        ] {
            push(c, op, DType::BF16, ne, nr, false, false, Some(DType::F32));
        }
    }
}

fn binary(c: &mut Catalogue) {
    for op in [Op::Add, Op::Sub, Op::Mul, Op::Div] {
        for dt in [DType::F32, DType::F16, DType::BF16] {
            for ne in SHAPES {
                // b broadcast patterns: same shape, row vector, per-channel, scalar.
                let repeats = [
                    [1, 1, 1, 1],
                    [1, ne[1], ne[2], ne[3]],
                    [ne[0], 1, ne[2], 1],
                    ne,
                ];
                for rep in repeats {
                    let bne = [
                        ne[0] / rep[0].max(1),
                        ne[1] / rep[1].max(1),
                        ne[2] / rep[2].max(1),
                        ne[3] / rep[3].max(1),
                    ];
                    for inplace in [false, true] {
                        if inplace && dt != DType::F32 {
                            continue;
                        }
                        let name = format!(
                            "{op}(type={dt},ne=[{}],ne_b=[{}],inplace={inplace})",
                            dims(&ne),
                            dims(&bne)
                        );
                        c.push(op, name, bound_for(dt), move |b| {
                            let fill = if op == Op::Div {
                                Fill::Uniform(0.5, 2.0)
                            } else {
                                Fill::Uniform(-1.0, 1.0)
                            };
                            let x = b.input(dt, &ne)?;
                            let y = b.input_with(dt, &bne, fill)?;
                            match (op, inplace) {
                                (Op::Add, false) => b.g.add(x, y),
                                (Op::Add, true) => b.g.add_inplace(x, y),
                                (Op::Sub, false) => b.g.sub(x, y),
                                (Op::Sub, true) => b.g.sub_inplace(x, y),
                                (Op::Mul, false) => b.g.mul(x, y),
                                (Op::Mul, true) => b.g.mul_inplace(x, y),
                                (_, false) => b.g.div(x, y),
                                (_, true) => b.g.div_inplace(x, y),
                            }
                        });
                    }
                }
            }
            // Mixed types and a permuted (non-contiguous) first operand.
            for perm in PERMS {
                let ne = [10, 5, 4, 3];
                let name = format!(
                    "{op}(type={dt},type_b=f32,ne=[{}],perm_a=[{}])",
                    dims(&ne),
                    dims(&perm.map(|p| p as i64))
                );
                c.push(op, name, bound_for(dt), move |b| {
                    let fill = if op == Op::Div {
                        Fill::Uniform(0.5, 2.0)
                    } else {
                        Fill::Uniform(-1.0, 1.0)
                    };
                    let x = b.permuted(dt, ne, perm, Fill::Uniform(-1.0, 1.0))?;
                    let y = b.input_with(DType::F32, &[ne[0], 1, ne[2], 1], fill)?;
                    match op {
                        Op::Add => b.g.add(x, y),
                        Op::Sub => b.g.sub(x, y),
                        Op::Mul => b.g.mul(x, y),
                        _ => b.g.div(x, y),
                    }
                });
            }
        }
    }
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

fn reductions(c: &mut Catalogue) {
    for ne in [
        [10, 5, 4, 3],
        [1, 1, 1, 1],
        [33, 1, 1, 1],
        [4096, 2, 1, 1],
        [1025, 3, 2, 1],
    ] {
        let name = format!("SUM(type=f32,ne=[{}])", dims(&ne));
        c.push(Op::Sum, name, 1e-7, move |b| {
            let x = b.input(DType::F32, &ne)?;
            b.g.sum(x)
        });
        let name = format!("SUM_ROWS(type=f32,ne=[{}])", dims(&ne));
        c.push(Op::SumRows, name, 1e-7, move |b| {
            let x = b.input(DType::F32, &ne)?;
            b.g.sum_rows(x)
        });
        let name = format!("CUMSUM(type=f32,ne=[{}])", dims(&ne));
        c.push(Op::Cumsum, name, 1e-7, move |b| {
            let x = b.input(DType::F32, &ne)?;
            b.g.cumsum(x)
        });
    }
    let ne = [12, 5, 4, 3];
    let name = format!("SUM_ROWS(type=f32,ne=[{}],perm=[0,2,1,3])", dims(&ne));
    c.push(Op::SumRows, name, 1e-7, move |b| {
        let x = b.permuted(DType::F32, ne, [0, 2, 1, 3], Fill::Uniform(-1.0, 1.0))?;
        b.g.sum_rows(x)
    });
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

/// The later test-backend-ops' SUM, SUM_ROWS, CUMSUM and FILL cases
/// (llama.cpp 0c1e5709): sums over permuted sources and sliced views,
/// row lengths around 32 and 1024, prefix sums across every power of two
/// to 2048 and over long rows, fills of up to 2048 x 512 x 2 x 2.
fn reductions_ggml_grid_later(c: &mut Catalogue) {
    let sum_in = Fill::Uniform(-0.9, 1.1);
    let id = [0usize, 1, 2, 3];
    for (ne, perm) in [
        ([10i64, 5, 4, 3], id),
        ([11, 5, 6, 3], [0, 2, 1, 3]),
        ([11, 5, 6, 3], [0, 3, 2, 1]),
        ([11, 5, 6, 3], [0, 1, 3, 2]),
        ([33, 1, 1, 1], id),
        ([33, 1024, 1, 1], id),
        ([33, 256, 1, 1], id),
        ([33, 256, 1, 1], [1, 0, 2, 3]),
    ] {
        let name = format!(
            "SUM(type=f32,ne=[{}],permute=[{}])",
            dims(&ne),
            dims(&perm.map(|p| p as i64))
        );
        c.push(Op::Sum, name, 1e-7, move |b| {
            let x = b.input_with(DType::F32, &ne, sum_in)?;
            let x = if perm == id { x } else { b.g.permute(x, perm)? };
            b.g.sum(x)
        });
    }
    for (ne, permute, slice) in [
        ([10i64, 5, 4, 3], false, false),
        ([11, 5, 6, 3], true, false),
        ([11, 5, 6, 3], false, true),
        ([11, 5, 6, 3], true, true),
        ([16, 5, 6, 3], true, false),
        ([16, 5, 6, 3], false, true),
        ([16, 5, 6, 3], true, true),
        ([33, 1, 1, 1], false, false),
        ([33, 1024, 1, 1], false, false),
        ([33, 256, 1, 1], false, false),
    ] {
        let name = format!(
            "SUM_ROWS(type=f32,ne=[{}],permute={permute},slice={slice})",
            dims(&ne)
        );
        c.push(Op::SumRows, name, 1e-7, move |b| {
            let mut x = b.input(DType::F32, &ne)?;
            if slice {
                // ne2 halved at twice the stride, ne3 less one, from the
                // second dim-3 plane, as test_sum_rows views it.
                let nb = b.g.desc(x).nb;
                x = b.g.view(
                    x,
                    &[ne[0], ne[1], ne[2] / 2, ne[3] - 1],
                    &[nb[1], nb[2] * 2, nb[3]],
                    nb[3],
                )?;
            }
            if permute {
                x = b.g.permute(x, [0, 2, 3, 1])?;
            }
            b.g.sum_rows(x)
        });
    }
    for ne in [
        [10i64, 5, 4, 3],
        [127, 5, 4, 3],
        [128, 5, 4, 3],
        [128, 128, 4, 4],
        [255, 5, 4, 3],
        [256, 5, 4, 3],
        [511, 5, 4, 3],
        [512, 5, 4, 3],
        [1023, 5, 4, 3],
        [1024, 5, 4, 3],
        [2047, 5, 4, 3],
        [2048, 5, 4, 3],
        [201 * 1204, 1, 1, 1],
        [312 * 1205, 1, 1, 1],
        [20481, 4, 1, 1],
    ] {
        let name = format!("CUMSUM(type=f32,ne=[{}])", dims(&ne));
        c.push(Op::Cumsum, name, 1e-7, move |b| {
            let x = b.input(DType::F32, &ne)?;
            b.g.cumsum(x)
        });
    }
    // ggml's [800, 600, 4, 4] and [2048, 512, 2, 2] fills are one plane
    // here (7.7 M and 4.2 M elements there).
    for (v, ne) in [
        (0.0f32, [10i64, 10, 4, 3]),
        (2.0, [303, 207, 11, 3]),
        (-152.0, [800, 600, 1, 1]),
        (3.5, [2048, 512, 1, 1]),
    ] {
        let name = format!("FILL(type=f32,ne=[{}],c={v})", dims(&ne));
        c.push(Op::Fill, name, 1e-7, move |b| {
            let x = b.input(DType::F32, &ne)?;
            b.g.fill(x, v)
        });
    }
}
