//! Data movement: CONCAT, REPEAT, PAD and CONT here, CPY in [`copy`],
//! GET_ROWS and SET_ROWS in [`rows`].

mod copy;
mod rows;

use backplane::{DType, Op};

use super::{Catalogue, bound_for, dims};
use crate::case::Fill;

/// Adds the family's cases.
pub(super) fn add(c: &mut Catalogue) {
    copy::cpy(c);
    rows::rows(c);
    concat_repeat_pad(c);
    c.grid(copy::cpy_ggml_grid);
    c.grid(rows::get_rows_ggml_grid);
    c.grid(rows::set_rows_ggml_grid);
    c.grid(concat_repeat_ggml_grid);
    c.grid(concat_cont_pad_ggml_grid);
    c.grid(rows::get_rows_ggml_grid_long);
    c.grid(copy::cpy_ggml_grid_reshapes);
}

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

/// Every type test-backend-ops' `all_types` has that backplane has too:
/// the same set as the mat-mul weight types.
pub(super) const ALL_TYPES: [DType; 13] = DType::WEIGHT_TYPES;

/// `perm` as `a,b,c,d`.
pub(super) fn pdims(perm: [usize; 4]) -> String {
    dims(&perm.map(|p| p as i64))
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

/// ne3 of the later CONCAT grid's quantized-loop shape (ggml: [128, 12,
/// 13, 14], 2.2 M elements behind its views).
const GRID_CONCAT_NE3: i64 = 4;

/// The later CONT grid's 64 x 64-plane shapes keep a sixteenth of their
/// planes (ggml: up to 2304 x 64 x 64).
const GRID_CONT_PLANE_DIV: i64 = 16;

/// The later test-backend-ops' CONCAT, CONT and PAD cases (llama.cpp
/// 0c1e5709). CONCAT: views of a and b over their first three or last two
/// dims, for f32, f16, bf16 and i32 (its i8, i16 and i64 are left out:
/// backplane's CONCAT lacks them); its quantized loop (q4_0-q8_0, [128,
/// 12, 13, 14] with ne3 4 here, 256 more columns along dim 0) runs those
/// four types, as
/// backplane's CONCAT takes no block types. CONT: transposes, one-row
/// slices at an element offset and 0<->2 / 3-cycle / 1<->2 permutations.
/// PAD: its zero pads incl. pad_ext over views and permutations; the
/// circular ones are left out (backplane's PAD pads with zeros only).
fn concat_cont_pad_ggml_grid(c: &mut Catalogue) {
    fn concat(c: &mut Catalogue, t: DType, ne_a: [i64; 4], ne_b_d: i64, dim: usize, v: i32) {
        let mut ne_b = ne_a;
        ne_b[dim] = ne_b_d;
        let name = format!(
            "CONCAT(type={t},ne_a=[{}],ne_b_d={ne_b_d},dim={dim},v={v})",
            dims(&ne_a)
        );
        let fill = if t == DType::I32 {
            Fill::Index(1000)
        } else {
            Fill::Uniform(-1.0, 1.0)
        };
        c.push(Op::Concat, name, 1e-7, move |b| {
            let id = [0, 1, 2, 3];
            let ga = match v {
                _ if v & 1 != 0 => [2, 4, 3, 1],
                _ if v & 4 != 0 => [1, 1, 2, 4],
                _ => [1; 4],
            };
            let gb = match v {
                _ if v & 2 != 0 => [3, 2, 4, 1],
                _ if v & 8 != 0 => [1, 1, 3, 2],
                _ => [1; 4],
            };
            let x = b.strided(t, ne_a, ga, id, fill)?;
            let y = b.strided(t, ne_b, gb, id, fill)?;
            b.g.concat(x, y, dim)
        });
    }
    let types = [DType::F32, DType::F16, DType::BF16, DType::I32];
    for v in 0..4 {
        for dim in 0..4 {
            for t in types {
                concat(c, t, [11, 12, 13, 14], 7, dim, v);
            }
        }
    }
    for t in types {
        for v in [0, 4, 8, 12] {
            for dim in 0..4 {
                concat(
                    c,
                    t,
                    [128, 12, 13, GRID_CONCAT_NE3],
                    if dim == 0 { 256 } else { 7 },
                    dim,
                    v,
                );
            }
        }
    }

    fn cont(c: &mut Catalogue, t: DType, ne: [i64; 4], use_view_slice: bool, perm: [usize; 4]) {
        let name = format!(
            "CONT(type={t},ne=[{}],use_view_slice={},permute=[{}])",
            dims(&ne),
            use_view_slice as i32,
            pdims(perm)
        );
        let fill = if t == DType::I32 {
            Fill::Index(1000)
        } else {
            Fill::Uniform(-1.0, 1.0)
        };
        c.push(Op::Cont, name, bound_for(t), move |b| {
            let src = b.input_with(t, &ne, fill)?;
            let x = if perm != [0; 4] {
                b.g.permute(src, perm)?
            } else if use_view_slice {
                let nb = b.g.desc(src).nb;
                let off = nb[0] * (ne[1] - 1) as u64;
                b.g.view(src, &[ne[0], 1, ne[2], ne[3]], &[nb[1], nb[2], nb[3]], off)?
            } else {
                b.g.transpose(src)?
            };
            b.g.cont(x)
        });
    }
    for t in [DType::F32, DType::I32, DType::F16, DType::BF16] {
        for use_view_slice in [true, false] {
            for ne in [
                [2i64, 1, 1, 1],
                [2, 1, 3, 5],
                [2, 3, 5, 7],
                [1, 4, 4, 1],
                [1, 8, 17, 1],
                [10, 10, 10, 1],
            ] {
                if use_view_slice && matches!(t, DType::F16 | DType::BF16) {
                    continue;
                }
                cont(c, t, ne, use_view_slice, [0; 4]);
            }
        }
    }
    let div = GRID_CONT_PLANE_DIV;
    for t in [DType::F32, DType::F16] {
        for ne in [
            [10i64, 10, 10, 1],
            [33, 5, 7, 1],
            [64, 3, 65, 1],
            [2, 3, 5, 7],
            [1024, 64, 64 / div, 1],
            [2304, 64, 64 / div, 1],
            [1000, 33, 65 / div, 1],
        ] {
            for perm in [[2, 1, 0, 3], [1, 2, 0, 3], [0, 2, 1, 3]] {
                cont(c, t, ne, false, perm);
            }
        }
    }

    fn pad(c: &mut Catalogue, ne: [i64; 4], pads: [i32; 8], tfrm: i32) {
        let name = format!(
            "PAD(type=f32,ne_a=[{}],pads=[{}],tfrm={tfrm})",
            dims(&ne),
            dims(&pads.map(|p| p as i64))
        );
        c.push(Op::Pad, name, 1e-7, move |b| {
            let mut x = b.input(DType::F32, &ne)?;
            if tfrm == 1 {
                let nb = b.g.desc(x).nb;
                let vne = ne.map(|n| (n + 1) / 2);
                x = b.g.view(x, &vne, &[nb[1], nb[2], nb[3]], 0)?;
            } else if tfrm == 2 {
                x = b.g.permute(x, [2, 1, 0, 3])?;
            }
            b.g.pad(x, pads)
        });
    }
    let p01 = |p0: i32, p1: i32| [0, p0, 0, p1, 0, 0, 0, 0];
    pad(c, [512, 512, 1, 1], p01(1, 1), 0);
    pad(c, [512, 512, 3, 1], [1; 8], 0);
    for (ne, p0, p1) in [
        ([1024i64, 1, 1, 1], 1, 0),
        ([1024, 2, 1, 1], 1, 0),
        ([1024, 16, 1, 1], 0, 1),
        ([1023, 1, 1, 1], 1, 0),
        ([1023, 8, 1, 1], 1, 0),
        ([1025, 1, 1, 1], 1, 0),
        ([1025, 8, 1, 1], 1, 0),
        ([2048, 1, 1, 1], 1, 0),
        ([2048, 4, 1, 1], 1, 0),
        ([2049, 1, 1, 1], 1, 0),
        ([100, 1, 1, 1], 100, 0),
        ([100, 1, 1, 1], 0, 100),
        ([100, 100, 1, 1], 50, 50),
    ] {
        pad(c, ne, p01(p0, p1), 0);
    }
    for tfrm in [0, 1, 2] {
        pad(c, [512, 512, 1, 1], [0, 1, 0, 1, 0, 0, 0, 0], tfrm);
        pad(c, [11, 22, 33, 44], [1, 2, 3, 4, 5, 6, 7, 8], tfrm);
        pad(c, [11, 22, 33, 44], [0, 2, 0, 4, 0, 6, 0, 8], tfrm);
    }
}
