//! Copies, gathers, scatters, concat, repeat and pad.

use backplane::{DType, Op};

use super::{Catalogue, PERMS, bound_for, dims};
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
