//! GET_ROWS and SET_ROWS: hand-picked gathers and scatters, then
//! test-backend-ops' grids.

use backplane::{DType, Op};

use super::super::{Catalogue, bound_for, dims};
use super::{ALL_TYPES, QUANTS};
use crate::case::Fill;

pub(super) fn rows(c: &mut Catalogue) {
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

/// test-backend-ops' GET_ROWS loops: a [256, 5, b], 4 indices per batch
/// (or a view of the first 2), for every type.
pub(super) fn get_rows_ggml_grid(c: &mut Catalogue) {
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
pub(super) fn set_rows_ggml_grid(c: &mut Catalogue) {
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

/// The later GET_ROWS grid's 70,000-row gather keeps rows of 32 (ggml:
/// 256, 41 M source elements) ...
const GRID_GET_ROWS_LONG_N: i64 = 32;

/// ... and its 700 x 100 batches are 70 x 10 (ggml: 90 M source elements).
const GRID_GET_ROWS_BATCH_DIV: i64 = 10;

/// The later test-backend-ops' GET_ROWS loops (llama.cpp 0c1e5709): rows
/// of 76,800, 70,000 gathered rows (past 65,535), 2-D batches, and for
/// every type one or 7 batches with the indices a view at an element
/// offset and the source a view at an offset of 3 rows (and 3 columns).
pub(super) fn get_rows_ggml_grid_long(c: &mut Catalogue) {
    #[allow(clippy::too_many_arguments)]
    fn push(
        c: &mut Catalogue,
        t: DType,
        n: i64,
        m: i64,
        r: i64,
        be: [i64; 2],
        v: bool,
        vs0: bool,
        offset_cols: i64,
    ) {
        let name = format!(
            "GET_ROWS(type={t},n={n},m={m},r={r},be1={},be2={},v={},vs0={},offset_cols={offset_cols})",
            be[0], be[1], v as i32, vs0 as i32
        );
        let fill = if t == DType::I32 {
            Fill::Index(1 << 20)
        } else {
            Fill::Uniform(-1.0, 1.0)
        };
        c.push(Op::GetRows, name, 1e-7, move |b| {
            let a = if vs0 {
                let padded = [n + offset_cols, m + 3, be[0], be[1]];
                let a = b.input_with(t, &padded, fill)?;
                let nb = b.g.desc(a).nb;
                let off = offset_cols as u64 * nb[0] + 3 * nb[1];
                b.g.view(a, &[n, m, be[0], be[1]], &[nb[1], nb[2], nb[3]], off)?
            } else {
                b.input_with(t, &[n, m, be[0], be[1]], fill)?
            };
            let rows_ne = [if v { r + 1 } else { r }, be[0], be[1]];
            let mut rows = b.input_with(DType::I32, &rows_ne, Fill::Index(m))?;
            if v {
                let nb = b.g.desc(rows).nb;
                rows =
                    b.g.view(rows, &[r / 2, be[0], be[1]], &[nb[1], nb[2]], nb[0])?;
            }
            b.g.get_rows(a, rows)
        });
    }
    let div = GRID_GET_ROWS_BATCH_DIV;
    for t in [DType::F32, DType::Q4_0] {
        push(c, t, 300 * 256, 5, 4, [1, 2], false, false, 0);
        push(
            c,
            t,
            GRID_GET_ROWS_LONG_N,
            80000,
            70000,
            [2, 1],
            false,
            false,
            0,
        );
        push(c, t, 256, 5, 4, [700 / div, 100 / div], false, false, 0);
    }
    push(c, DType::F32, 1, 8, 2, [1, 1], false, false, 0);
    for t in ALL_TYPES.into_iter().chain([DType::I32]) {
        for be1 in [1, 7] {
            for v in [false, true] {
                for vs0 in [false, true] {
                    push(c, t, 256, 5, 4, [be1, 1], v, vs0, 0);
                }
            }
        }
    }
    push(c, DType::F32, 256, 8, 2, [1, 1], false, true, 3);
}
