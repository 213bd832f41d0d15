//! The copy, gather, concat, contiguous-copy and pad grids that
//! test-backend-ops gained after llama.cpp 4227c9be (mirrored from
//! 0c1e5709); the older grids are in `layout`.

use backplane::{DType, Op};

use super::layout::{ALL_TYPES, pdims};
use super::{Catalogue, bound_for, dims};
use crate::case::Fill;

/// One test_cpy case of the later grid: src of `ne_src`, optionally
/// permuted (ggml's permute) and transposed, copied into a dst of
/// `ne_dst` (src's shape when `None`), itself optionally a view into a
/// larger `dst_alloc` buffer.
#[allow(clippy::too_many_arguments)]
fn push_cpy_later(
    c: &mut Catalogue,
    src: DType,
    dst: DType,
    ne_src: [i64; 4],
    ne_dst: Option<[i64; 4]>,
    perm_src: Option<[usize; 4]>,
    transpose: bool,
    dst_alloc: Option<[i64; 4]>,
) {
    let mut name = format!(
        "CPY(type_src={src},type_dst={dst},ne_src=[{}]",
        dims(&ne_src)
    );
    if let Some(n) = ne_dst {
        name += &format!(",ne_dst=[{}]", dims(&n));
    }
    if let Some(p) = perm_src {
        name += &format!(",permute_src=[{}]", pdims(p));
    }
    name += &format!(",_src_transpose={}", transpose as i32);
    if let Some(a) = dst_alloc {
        name += &format!(",dst_alloc=[{}]", dims(&a));
    }
    name += ")";
    let bound = if src == dst || dst.is_quantized() {
        1e-7
    } else {
        bound_for(dst)
    };
    c.push(Op::Cpy, name, bound, move |b| {
        let fill = Fill::Uniform(-150.0, 150.0);
        let mut x = b.input_with(src, &ne_src, fill)?;
        if let Some(p) = perm_src {
            x = b.g.permute(x, p)?;
        }
        if transpose {
            x = b.g.transpose(x)?;
        }
        let dne = ne_dst.unwrap_or(b.g.ne(x));
        let y = match dst_alloc {
            Some(a) => {
                let buf = b.input_with(dst, &a, fill)?;
                let nb = b.g.desc(buf).nb;
                b.g.view(buf, &dne, &[nb[1], nb[2], nb[3]], 0)?
            }
            None => b.input_with(dst, &dne, fill)?,
        };
        b.g.cpy(x, y)
    });
}

/// The later test-backend-ops' CPY cases beyond the first grid (llama.cpp
/// 0c1e5709): q4_0 rows of 3 blocks, f32 <-> i32 (plain and transposed
/// rows), transposed sources, a 3-cycle permutation of 1-row planes, 2 x
/// 262 K and 2 x 2 x 65 K transposes (ggml: 2 M and 524 K), strided destinations, and copies
/// that reshape: every permutation of [3, 5, 7, 32] into the sorted and
/// the reversed shape (f32, f16; q4_0 where rows stay 32 long).
pub(super) fn cpy_ggml_grid_later(c: &mut Catalogue) {
    let (f32t, f16t, i32t) = (DType::F32, DType::F16, DType::I32);
    let t10 = Some([1, 0, 2, 3]);
    push_cpy_later(c, f32t, DType::Q4_0, [96, 1, 1, 1], None, None, false, None);
    push_cpy_later(c, DType::Q4_0, f32t, [96, 1, 1, 1], None, None, false, None);
    push_cpy_later(c, f32t, i32t, [256, 2, 3, 4], None, None, false, None);
    push_cpy_later(c, f32t, i32t, [256, 2, 3, 4], None, t10, false, None);
    push_cpy_later(c, i32t, f32t, [256, 2, 3, 4], None, None, false, None);
    push_cpy_later(c, i32t, f32t, [256, 2, 3, 4], None, t10, false, None);
    for (t, ne) in [
        (f16t, [256i64, 4, 3, 1]),
        (f32t, [256, 4, 3, 1]),
        (f32t, [256, 4, 3, 3]),
        (DType::BF16, [256, 4, 3, 1]),
        (f16t, [256, 4, 1, 1]),
        (f32t, [256, 4, 1, 1]),
        (DType::BF16, [256, 4, 1, 1]),
        (i32t, [256, 4, 1, 1]),
    ] {
        push_cpy_later(c, t, t, ne, None, None, true, None);
    }
    for t in [i32t, f32t] {
        push_cpy_later(
            c,
            t,
            t,
            [256, 1, 4, 1],
            None,
            Some([1, 2, 0, 3]),
            false,
            None,
        );
    }
    // ggml: [2, 2097121] and [2, 2, 524281] (past CUDA's grid limits).
    push_cpy_later(c, f32t, f32t, [2, 262139, 1, 1], None, t10, false, None);
    push_cpy_later(c, f32t, f32t, [2, 2, 65521, 1], None, t10, false, None);
    for t in [f32t, f16t] {
        let ne = [128, 2, 3, 1];
        push_cpy_later(c, t, t, ne, Some(ne), None, false, Some([128, 4, 3, 1]));
    }
    let canonical = [3i64, 5, 7, 32];
    let reversed = [32i64, 7, 5, 3];
    let mut perms = Vec::new();
    for a in 0..4 {
        for b in 0..4 {
            for c in 0..4 {
                for d in 0..4 {
                    if a != b && a != c && a != d && b != c && b != d && c != d {
                        perms.push([canonical[a], canonical[b], canonical[c], canonical[d]]);
                    }
                }
            }
        }
    }
    for t in [f32t, f16t] {
        for &cur in &perms {
            if cur != canonical {
                push_cpy_later(c, t, t, cur, Some(canonical), None, false, None);
            }
            if cur != reversed {
                push_cpy_later(c, t, t, cur, Some(reversed), None, false, None);
            }
            if cur[0] == 32 && t == f32t {
                let q = DType::Q4_0;
                push_cpy_later(c, q, q, cur, Some(reversed), None, false, None);
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
pub(super) fn get_rows_ggml_grid_later(c: &mut Catalogue) {
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
pub(super) fn concat_cont_pad_ggml_grid_later(c: &mut Catalogue) {
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
