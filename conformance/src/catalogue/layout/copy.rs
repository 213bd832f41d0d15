//! CPY: hand-picked conversions and layouts, then test-backend-ops'
//! grids.

use backplane::{DType, Op};

use super::super::{Catalogue, PERMS, bound_for, dims};
use super::{ALL_TYPES, QUANTS, pdims};
use crate::case::Fill;

pub(super) fn cpy(c: &mut Catalogue) {
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
pub(super) fn cpy_ggml_grid(c: &mut Catalogue) {
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

/// One test_cpy case of the later grid: src of `ne_src`, optionally
/// permuted (ggml's permute) and transposed, copied into a dst of
/// `ne_dst` (src's shape when `None`), itself optionally a view into a
/// larger `dst_alloc` buffer.
#[allow(clippy::too_many_arguments)]
fn push_cpy_view(
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
pub(super) fn cpy_ggml_grid_reshapes(c: &mut Catalogue) {
    let (f32t, f16t, i32t) = (DType::F32, DType::F16, DType::I32);
    let t10 = Some([1, 0, 2, 3]);
    push_cpy_view(c, f32t, DType::Q4_0, [96, 1, 1, 1], None, None, false, None);
    push_cpy_view(c, DType::Q4_0, f32t, [96, 1, 1, 1], None, None, false, None);
    push_cpy_view(c, f32t, i32t, [256, 2, 3, 4], None, None, false, None);
    push_cpy_view(c, f32t, i32t, [256, 2, 3, 4], None, t10, false, None);
    push_cpy_view(c, i32t, f32t, [256, 2, 3, 4], None, None, false, None);
    push_cpy_view(c, i32t, f32t, [256, 2, 3, 4], None, t10, false, None);
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
        push_cpy_view(c, t, t, ne, None, None, true, None);
    }
    for t in [i32t, f32t] {
        push_cpy_view(
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
    push_cpy_view(c, f32t, f32t, [2, 262139, 1, 1], None, t10, false, None);
    push_cpy_view(c, f32t, f32t, [2, 2, 65521, 1], None, t10, false, None);
    for t in [f32t, f16t] {
        let ne = [128, 2, 3, 1];
        push_cpy_view(c, t, t, ne, Some(ne), None, false, Some([128, 4, 3, 1]));
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
                push_cpy_view(c, t, t, cur, Some(canonical), None, false, None);
            }
            if cur != reversed {
                push_cpy_view(c, t, t, cur, Some(reversed), None, false, None);
            }
            if cur[0] == 32 && t == f32t {
                let q = DType::Q4_0;
                push_cpy_view(c, q, q, cur, Some(reversed), None, false, None);
            }
        }
    }
}
