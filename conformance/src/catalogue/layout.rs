//! Copies, gathers, scatters, concat, repeat and pad.

use backplane::{DType, Op};

use super::{Catalogue, PERMS, bound_for, dims, layout_later};
use crate::case::Fill;

const QUANTS: [DType; 11] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q2_K,
    DType::Q3_K,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
    DType::Q8_K,
];

pub(super) fn add(c: &mut Catalogue) {
    cpy(c);
    rows(c);
    concat_repeat_pad(c);
    c.grid(cpy_ggml_grid);
    c.grid(get_rows_ggml_grid);
    c.grid(set_rows_ggml_grid);
    c.grid(concat_repeat_ggml_grid);
    c.grid(layout_later::concat_cont_pad_ggml_grid_later);
    c.grid(layout_later::get_rows_ggml_grid_later);
    c.grid(layout_later::cpy_ggml_grid_later);
}

fn cpy(c: &mut Catalogue) {
    let floats = [DType::F32, DType::F16, DType::BF16];
    for src in floats {
        for dst in floats.into_iter().chain([DType::I32]) {
            for perm in PERMS {
                let ne = [256, 4, 4, 4];
                let name = format!(
                    "CPY(type_src={src},type_dst={dst},ne=[{}],perm=[{}])",
                    dims(&ne),
                    dims(&perm.map(|p| p as i64))
                );
                let fill = if dst == DType::I32 {
                    Fill::Uniform(-100.0, 100.0)
                } else {
                    Fill::Uniform(-1.0, 1.0)
                };
                c.push(Op::Cpy, name, bound_for(dst), move |b| {
                    let x = b.permuted(src, ne, perm, fill)?;
                    let y = b.input(dst, &ne)?;
                    b.g.cpy(x, y)
                });
            }
        }
    }
    let name = "CPY(type_src=i32,type_dst=f32,ne=[33,5,2,1])".to_string();
    c.push(Op::Cpy, name, 1e-7, |b| {
        let x = b.input_with(DType::I32, &[33, 5, 2, 1], Fill::Index(1000))?;
        let y = b.input(DType::F32, &[33, 5, 2, 1])?;
        b.g.cpy(x, y)
    });
    for q in QUANTS {
        if q == DType::Q8_K {
            continue;
        }
        let ne = [512, 3, 2, 1];
        let name = format!("CPY(type_src=f32,type_dst={q},ne=[{}])", dims(&ne));
        c.push(Op::Cpy, name, 1e-7, move |b| {
            let x = b.input(DType::F32, &ne)?;
            let y = b.input(q, &ne)?;
            b.g.cpy(x, y)
        });
        let name = format!("CPY(type_src={q},type_dst=f32,ne=[{}])", dims(&ne));
        c.push(Op::Cpy, name, 1e-7, move |b| {
            let x = b.input(q, &ne)?;
            let y = b.input(DType::F32, &ne)?;
            b.g.cpy(x, y)
        });
    }
    for dt in [DType::F32, DType::F16, DType::BF16, DType::I32] {
        for (perm, ne) in [
            ([1, 0, 2, 3], [7, 9, 3, 1]),
            ([0, 2, 1, 3], [32, 5, 6, 2]),
            ([2, 1, 0, 3], [3, 4, 5, 2]),
            ([0, 1, 2, 3], [1, 1, 1, 1]),
        ] {
            let name = format!(
                "CONT(type={dt},ne=[{}],perm=[{}])",
                dims(&ne),
                dims(&perm.map(|p| p as i64))
            );
            let fill = if dt == DType::I32 {
                Fill::Index(1000)
            } else {
                Fill::Uniform(-1.0, 1.0)
            };
            c.push(Op::Cont, name, 1e-7, move |b| {
                let x = b.permuted(dt, ne, perm, fill)?;
                b.g.cont(x)
            });
        }
    }
}

fn rows(c: &mut Catalogue) {
    let sources = [DType::F32, DType::F16, DType::BF16, DType::I32]
        .into_iter()
        .chain(QUANTS.into_iter().filter(|&q| q != DType::Q8_K));
    for dt in sources {
        let ne0 = if dt.block_size() == 256 {
            256
        } else if dt.is_quantized() {
            96
        } else {
            33
        };
        for (n_rows, n_idx, b2, b3) in
            [(10, 5, 1, 1), (16, 16, 3, 2), (1, 1, 1, 1), (700, 20, 1, 1)]
        {
            let name =
                format!("GET_ROWS(type={dt},n={ne0},rows={n_rows},idx={n_idx},b=[{b2},{b3}])");
            let fill = if dt == DType::I32 {
                Fill::Index(1 << 20)
            } else {
                Fill::Uniform(-1.0, 1.0)
            };
            c.push(Op::GetRows, name, 1e-7, move |b| {
                let a = b.input_with(dt, &[ne0, n_rows, b2, b3], fill)?;
                let idx = b.input_with(DType::I32, &[n_idx, b2, b3], Fill::Index(n_rows))?;
                b.g.get_rows(a, idx)
            });
        }
    }
    let dsts = [DType::F32, DType::F16, DType::BF16]
        .into_iter()
        .chain(QUANTS.into_iter().filter(|&q| q != DType::Q8_K));
    for dt in dsts {
        let ne0 = if dt.block_size() == 256 {
            256
        } else if dt.is_quantized() {
            64
        } else {
            40
        };
        for it in [DType::I32, DType::I64] {
            for (n_dst, n_src, ne2, ne3, b1, b2) in [
                (16, 5, 1, 1, 1, 1),
                (32, 7, 4, 2, 2, 1),
                (1, 1, 1, 1, 1, 1),
                (64, 64, 3, 1, 3, 1),
            ] {
                let name = format!(
                    "SET_ROWS(type={dt},type_idx={it},n={ne0},rows={n_dst},src_rows={n_src},ne=[{ne2},{ne3}],idx_b=[{b1},{b2}])"
                );
                c.push(Op::SetRows, name, bound_for(dt), move |b| {
                    let dst = b.input(dt, &[ne0, n_dst, ne2, ne3])?;
                    let src = b.input(DType::F32, &[ne0, n_src, ne2, ne3])?;
                    let idx = b.input_with(it, &[n_src, b1, b2], Fill::DistinctIndex(n_dst))?;
                    b.g.set_rows(dst, src, idx)
                });
            }
        }
    }
}

fn concat_repeat_pad(c: &mut Catalogue) {
    for dt in [DType::F32, DType::F16, DType::I32] {
        for dim in 0..4 {
            for perm in [[0, 1, 2, 3], [0, 2, 1, 3]] {
                let ne = [10, 5, 5, 5];
                let mut ne_b = ne;
                ne_b[dim] = 3;
                let name = format!(
                    "CONCAT(type={dt},ne_a=[{}],ne_b=[{}],dim={dim},perm_b=[{}])",
                    dims(&ne),
                    dims(&ne_b),
                    dims(&perm.map(|p| p as i64))
                );
                let fill = if dt == DType::I32 {
                    Fill::Index(1000)
                } else {
                    Fill::Uniform(-1.0, 1.0)
                };
                c.push(Op::Concat, name, 1e-7, move |b| {
                    let x = b.input_with(dt, &ne, fill)?;
                    let y = b.permuted(dt, ne_b, perm, fill)?;
                    b.g.concat(x, y, dim)
                });
            }
        }
    }
    for dt in [DType::F32, DType::F16, DType::I32] {
        for (ne, r) in [
            ([10, 5, 4, 3], [2, 2, 2, 2]),
            ([1, 1, 1, 1], [7, 1, 3, 1]),
            ([64, 1, 2, 1], [1, 5, 1, 2]),
        ] {
            let out = [ne[0] * r[0], ne[1] * r[1], ne[2] * r[2], ne[3] * r[3]];
            let name = format!("REPEAT(type={dt},ne=[{}],nr=[{}])", dims(&ne), dims(&r));
            let fill = if dt == DType::I32 {
                Fill::Index(1000)
            } else {
                Fill::Uniform(-1.0, 1.0)
            };
            c.push(Op::Repeat, name, 1e-7, move |b| {
                let x = b.input_with(dt, &ne, fill)?;
                let shape = b.input(DType::F32, &out)?;
                b.g.repeat(x, shape)
            });
        }
    }
    for pads in [
        [0, 1, 0, 1, 0, 0, 0, 0],
        [1, 2, 3, 4, 1, 0, 0, 1],
        [0, 0, 0, 0, 0, 0, 0, 0],
        [5, 0, 0, 5, 0, 0, 2, 2],
    ] {
        let ne = [33, 5, 3, 2];
        let name = format!(
            "PAD(type=f32,ne=[{}],pads=[{}])",
            dims(&ne),
            dims(&pads.map(|p| p as i64))
        );
        c.push(Op::Pad, name, 1e-7, move |b| {
            let x = b.input(DType::F32, &ne)?;
            b.g.pad(x, pads)
        });
    }
}

/// Every type test-backend-ops' `all_types` has that backplane has too.
pub(super) const ALL_TYPES: [DType; 13] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q2_K,
    DType::Q3_K,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
];

/// `perm` as `a,b,c,d`.
pub(super) fn pdims(perm: [usize; 4]) -> String {
    dims(&perm.map(|p| p as i64))
}

/// One CPY case as test-backend-ops' test_cpy: `src` of logical shape `ne`
/// permuted by `perm_src`, copied into a fresh `dst` of the permuted shape,
/// itself permuted by `perm_dst`.
fn push_cpy(
    c: &mut Catalogue,
    src: DType,
    dst: DType,
    ne: [i64; 4],
    perm_src: [usize; 4],
    perm_dst: [usize; 4],
) {
    let name = format!(
        "CPY(type_src={src},type_dst={dst},ne=[{}],permute_src=[{}],permute_dst=[{}])",
        dims(&ne),
        pdims(perm_src),
        pdims(perm_dst)
    );
    // Quantized leaves and destinations must be contiguous in backplane
    // (ggml's CPU also copies permuted rows of blocks); those combinations
    // are left out rather than reported as failures.
    let ident = [0, 1, 2, 3];
    if (src.is_quantized() && perm_src != ident) || (dst.is_quantized() && perm_dst != ident) {
        return;
    }
    let bound = if dst.is_quantized() {
        1e-7
    } else {
        bound_for(dst)
    };
    c.push(Op::Cpy, name, bound, move |b| {
        let x = b.permuted(src, ne, perm_src, Fill::Uniform(-1.0, 1.0))?;
        // A fresh dst of x's shape, permuted (perm_dst is an involution).
        let xne = b.g.ne(x);
        let dne = perm_dst.map(|p| xne[p]);
        let y = b.permuted(dst, dne, perm_dst, Fill::Uniform(-1.0, 1.0))?;
        b.g.cpy(x, y)
    });
}

/// test-backend-ops' CPY loops over backplane's types, plus every
/// conversion at 1, 2 and 3 blocks per row (contiguous and row-permuted
/// sources).
fn cpy_ggml_grid(c: &mut Catalogue) {
    let id = [0, 1, 2, 3];
    for t in ALL_TYPES {
        let nk = t.block_size() as i64;
        for k in 1..4 {
            push_cpy(c, t, t, [k * nk, 2, 3, 4], id, id);
            push_cpy(c, t, t, [k * nk, 2, 3, 4], [0, 2, 1, 3], id);
            push_cpy(c, t, t, [k * nk, 2, 3, 4], [0, 3, 1, 2], [0, 2, 1, 3]);
        }
    }
    for src in [DType::F16, DType::BF16, DType::F32] {
        for dst in ALL_TYPES {
            push_cpy(c, src, dst, [256, 4, 4, 4], id, id);
            push_cpy(c, src, dst, [256, 2, 3, 4], [0, 2, 1, 3], id);
            let nk = dst.block_size() as i64;
            for k in 1..4 {
                push_cpy(c, src, dst, [k * nk, 3, 5, 1], id, id);
                push_cpy(c, src, dst, [k * nk, 3, 5, 2], [0, 2, 1, 3], id);
            }
        }
    }
    for src in ALL_TYPES {
        push_cpy(c, src, DType::F32, [256, 4, 4, 4], id, id);
        push_cpy(c, src, DType::F32, [256, 2, 3, 4], [0, 2, 1, 3], id);
        let nk = src.block_size() as i64;
        for k in 1..4 {
            push_cpy(c, src, DType::F32, [k * nk, 3, 5, 1], id, id);
        }
    }
    for src in [DType::F16, DType::F32] {
        for dst in [DType::F16, DType::F32] {
            push_cpy(c, src, dst, [256, 2, 3, 4], [1, 0, 2, 3], id);
        }
    }
    // Float <-> i32 conversions (ggml's newer grid has them).
    for f in [DType::F32, DType::F16, DType::BF16] {
        for ne in [[256, 4, 4, 4], [33, 3, 5, 1]] {
            let name = format!("CPY(type_src={f},type_dst=i32,ne=[{}],rounding)", dims(&ne));
            c.push(Op::Cpy, name, 1e-7, move |b| {
                let x = b.input_with(f, &ne, Fill::Uniform(-1000.0, 1000.0))?;
                let y = b.input(DType::I32, &ne)?;
                b.g.cpy(x, y)
            });
        }
    }
}

/// test-backend-ops' GET_ROWS loops: a [256, 5, b], 4 indices per batch
/// (or a view of the first 2), for every type.
fn get_rows_ggml_grid(c: &mut Catalogue) {
    let push = |c: &mut Catalogue, t: DType, n: i64, m: i64, r: i64, bs: i64, v: bool| {
        let name = format!("GET_ROWS(type={t},n={n},m={m},r={r},b={bs},v={v})");
        let fill = if t == DType::I32 {
            Fill::Index(1 << 20)
        } else {
            Fill::Uniform(-1.0, 1.0)
        };
        c.push(Op::GetRows, name, 1e-7, move |b| {
            let a = b.input_with(t, &[n, m, bs], fill)?;
            let mut rows = b.input_with(DType::I32, &[r, bs], Fill::Index(m))?;
            if v {
                let nb = b.g.desc(rows).nb;
                rows = b.g.view(rows, &[r / 2, bs], &[nb[1]], 0)?;
            }
            b.g.get_rows(a, rows)
        });
    };
    push(c, DType::F32, 1, 8, 2, 1, false);
    for t in ALL_TYPES.into_iter().chain([DType::I32]) {
        for bs in [1, 7] {
            for v in [false, true] {
                push(c, t, 256, 5, 4, bs, v);
            }
        }
    }
}

/// test-backend-ops' SET_ROWS loops for every destination type, with i64
/// (as there) and i32 indices. ggml's views of zero rows (r = 1 halved)
/// are left out: backplane has no empty tensors.
fn set_rows_ggml_grid(c: &mut Catalogue) {
    #[allow(clippy::too_many_arguments)]
    fn push(c: &mut Catalogue, t: DType, it: DType, ne: [i64; 4], nr23: [i64; 2], r: i64, v: bool) {
        let rv = if v { r / 2 } else { r };
        if rv == 0 {
            return;
        }
        let name = format!(
            "SET_ROWS(type={t},type_idx={it},ne=[{}],nr23=[{}],r={r},v={v})",
            dims(&ne),
            dims(&nr23)
        );
        c.push(Op::SetRows, name, bound_for(t), move |b| {
            let (n2, n3) = (ne[2] * nr23[0], ne[3] * nr23[1]);
            let dst = b.input(t, &[ne[0], ne[1], n2, n3])?;
            let mut src = b.input(DType::F32, &[ne[0], r, n2, n3])?;
            let mut idx = b.input_with(it, &[r, ne[2], ne[3]], Fill::DistinctIndex(ne[1]))?;
            if v {
                let nb = b.g.desc(src).nb;
                src =
                    b.g.view(src, &[ne[0], rv, n2, n3], &[nb[1], nb[2], nb[3]], 0)?;
                let nb = b.g.desc(idx).nb;
                idx = b.g.view(idx, &[rv, ne[2], ne[3]], &[nb[1], nb[2]], 0)?;
            }
            b.g.set_rows(dst, src, idx)
        });
    }
    for it in [DType::I64, DType::I32] {
        push(c, DType::F32, it, [1, 8, 1, 3], [1, 1], 2, false);
        for t in ALL_TYPES {
            let blk = t.block_size() as i64;
            for bs in [1, 7] {
                for v in [false, true] {
                    push(c, t, it, [256, 5, bs, 3], [1, 1], 1, v);
                    push(c, t, it, [256, 11, 1, bs], [2, 3], 7, v);
                    push(c, t, it, [3 * blk, 3, bs, 1], [2, 3], 2, v);
                    if blk == 1 {
                        push(c, t, it, [31, 3, bs, 1], [2, 3], 2, v);
                        push(c, t, it, [33, 5, 1, bs], [2, 3], 1, v);
                    }
                }
            }
        }
    }
}

/// test-backend-ops' CONCAT and REPEAT loops: concat of [11, 12, 13, 14]
/// and a 7-wide b along each dim, a and/or b views of larger tensors;
/// repeat of [10, 5, 4, ne3] once along each dim.
fn concat_repeat_ggml_grid(c: &mut Catalogue) {
    for v in 0..4 {
        for dim in 0..4 {
            for t in [DType::F32, DType::I32] {
                let ne_a = [11i64, 12, 13, 14];
                let mut ne_b = ne_a;
                ne_b[dim] = 7;
                let name = format!(
                    "CONCAT(type={t},ne_a=[{}],ne_b_d=7,dim={dim},v={v})",
                    dims(&ne_a)
                );
                let fill = if t == DType::I32 {
                    Fill::Index(1000)
                } else {
                    Fill::Uniform(-1.0, 1.0)
                };
                c.push(Op::Concat, name, 1e-7, move |b| {
                    let id = [0, 1, 2, 3];
                    let ga = if v & 1 != 0 { [2, 4, 3, 1] } else { [1; 4] };
                    let gb = if v & 2 != 0 { [3, 2, 4, 1] } else { [1; 4] };
                    let x = b.strided(t, ne_a, ga, id, fill)?;
                    let y = b.strided(t, ne_b, gb, id, fill)?;
                    b.g.concat(x, y, dim)
                });
            }
        }
    }
    for ne3 in [1i64, 3] {
        for (t, nr) in [
            (DType::F32, [1, 1, 1, 1]),
            (DType::F32, [2, 1, 1, 1]),
            (DType::F32, [1, 2, 1, 1]),
            (DType::F32, [1, 1, 2, 1]),
            (DType::F32, [1, 1, 1, 2]),
            (DType::I32, [2, 1, 1, 1]),
            (DType::I16, [1, 1, 1, 2]),
        ] {
            let ne = [10i64, 5, 4, ne3];
            let out = [ne[0] * nr[0], ne[1] * nr[1], ne[2] * nr[2], ne[3] * nr[3]];
            let name = format!("REPEAT(type={t},ne=[{}],nr=[{}])", dims(&ne), dims(&nr));
            let fill = if t.is_integer() {
                Fill::Index(1000)
            } else {
                Fill::Uniform(-1.0, 1.0)
            };
            c.push(Op::Repeat, name, 1e-7, move |b| {
                let x = b.input_with(t, &ne, fill)?;
                let shape = b.input(t, &out)?;
                b.g.repeat(x, shape)
            });
        }
    }
}
