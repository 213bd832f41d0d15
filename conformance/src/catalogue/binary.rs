//! ADD, SUB, MUL and DIV: hand-picked broadcasts, then test-backend-ops'
//! grid.

use backplane::{DType, Op};

use super::{Catalogue, PERMS, bound_for, dims};
use crate::case::Fill;

/// Adds the family's cases.
pub(super) fn add(c: &mut Catalogue) {
    binary(c);
    c.grid(binary_ggml_grid);
}

const SHAPES: [[i64; 4]; 5] = [
    [1, 1, 1, 1],
    [10, 5, 4, 3],
    [16, 10, 10, 10],
    [4096, 3, 1, 1],
    [33, 7, 3, 2],
];

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
fn binary_ggml_grid(c: &mut Catalogue) {
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
