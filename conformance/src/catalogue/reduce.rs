//! SUM, SUM_ROWS, CUMSUM, ARGMAX, ARGSORT and TOP_K (with the FILL cases
//! of test-backend-ops' reduction grid, which it runs beside them).

use backplane::{DType, Op, SortOrder};

use super::{Catalogue, EXACT, dims};
use crate::case::Fill;

/// Adds the family's cases.
pub(super) fn add(c: &mut Catalogue) {
    reductions(c);
    c.grid(reductions_ggml_grid);
    rank_ops(c);
    c.grid(argmax_ggml_grid);
    c.grid(rank_ggml_grid);
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

/// The later test-backend-ops' SUM, SUM_ROWS, CUMSUM and FILL cases
/// (llama.cpp 0c1e5709): sums over permuted sources and sliced views,
/// row lengths around 32 and 1024, prefix sums across every power of two
/// to 2048 and over long rows, fills of up to 2048 x 512 x 2 x 2.
fn reductions_ggml_grid(c: &mut Catalogue) {
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

fn rank_ops(c: &mut Catalogue) {
    for ne in [
        [32, 10, 1, 1],
        [1, 1, 1, 1],
        [4096, 3, 1, 1],
        [1000, 7, 1, 1],
    ] {
        let name = format!("ARGMAX(type=f32,ne=[{}])", dims(&ne));
        c.push(Op::Argmax, name, EXACT, move |b| {
            let x = b.input_with(DType::F32, &ne, Fill::Distinct)?;
            b.g.argmax(x)
        });
    }
    for ne in [
        [16, 10, 10, 10],
        [1, 1, 1, 1],
        [60, 10, 1, 1],
        [1025, 2, 1, 1],
        [2048, 2, 1, 1],
    ] {
        for order in [SortOrder::Asc, SortOrder::Desc] {
            let name = format!(
                "ARGSORT(type=f32,ne=[{}],order={})",
                dims(&ne),
                order as i32
            );
            c.push(Op::Argsort, name, EXACT, move |b| {
                let x = b.input_with(DType::F32, &ne, Fill::Distinct)?;
                b.g.argsort(x, order)
            });
        }
        for k in [1i64, 4, 40, 1000] {
            if k > ne[0] {
                continue;
            }
            let name = format!("TOP_K(type=f32,ne=[{}],k={k})", dims(&ne));
            c.push(Op::TopK, name, EXACT, move |b| {
                let x = b.input_with(DType::F32, &ne, Fill::Distinct)?;
                b.g.top_k(x, k)
            });
        }
    }
}

/// test-backend-ops' ARGMAX shapes.
fn argmax_ggml_grid(c: &mut Catalogue) {
    for ne in [
        [32i64, 1, 1, 1],
        [100, 10, 1, 1],
        [1024, 10, 1, 1],
        [1024, 12, 1, 1],
        [2000, 10, 1, 1],
        [5438, 3, 1, 1],
    ] {
        let name = format!("ARGMAX(type=f32,ne=[{}],distinct)", dims(&ne));
        c.push(Op::Argmax, name, EXACT, move |b| {
            let x = b.input_with(DType::F32, &ne, Fill::Distinct)?;
            b.g.argmax(x)
        });
    }
}

/// Longest power-of-two row of the later ARGSORT grid ([`capped_row`]);
/// ggml goes to 2^20.
const GRID_SORT_ROW_LOG2: u32 = 16;

/// Longest power-of-two row of the later TOP_K grid ([`capped_row`]);
/// ggml goes to 2^19.
const GRID_TOPK_ROW_LOG2: u32 = 14;

/// The later TOP_K grid's vocabulary-sized rows (ggml: 202,048 and
/// 151,936) are divided by this.
const GRID_TOPK_VOCAB_DIV: i64 = 8;

/// Row length standing in for 2^p in a grid whose rows stop at 2^max:
/// past it, 2^max + 2 (p - max), so every step stays a distinct case.
fn capped_row(p: u32, max: u32) -> i64 {
    if p <= max {
        1 << p
    } else {
        (1 << max) + 2 * (p - max) as i64
    }
}

/// The later test-backend-ops' ARGMAX, ARGSORT and TOP_K loops (llama.cpp
/// 0c1e5709): argsort rows of every power of two from 4 to 2^20 (here
/// to 2^16, [`GRID_SORT_ROW_LOG2`]) and one less, rows around 1024 and 2048, 2 x 8 x 8192 (group selection) and
/// 2048 x 512; top-k for every k in {1, 2, 3, 7, 15, 100, 500, 1023, 9999}
/// that fits rows of 2^i and 2^i + 11 (i < 20; rows here stop near 2^14,
/// [`GRID_TOPK_ROW_LOG2`]), vocabulary-sized rows (151,936, 202,048, an
/// eighth of them here) and large k. Its ties cases are left out, as its
/// support listing leaves them out.
fn rank_ggml_grid(c: &mut Catalogue) {
    fn argmax(c: &mut Catalogue, ne: [i64; 4]) {
        let name = format!("ARGMAX(type=f32,ne=[{}],distinct)", dims(&ne));
        c.push(Op::Argmax, name, EXACT, move |b| {
            let x = b.input_with(DType::F32, &ne, Fill::Distinct)?;
            b.g.argmax(x)
        });
    }
    fn argsort(c: &mut Catalogue, ne: [i64; 4], order: SortOrder) {
        let name = format!(
            "ARGSORT(type=f32,ne=[{}],order={})",
            dims(&ne),
            order as i32
        );
        c.push(Op::Argsort, name, EXACT, move |b| {
            let x = b.input_with(DType::F32, &ne, Fill::Distinct)?;
            b.g.argsort(x, order)
        });
    }
    fn top_k(c: &mut Catalogue, ne: [i64; 4], k: i64) {
        let name = format!("TOP_K(type=f32,ne=[{}],k={k},ties=0)", dims(&ne));
        c.push(Op::TopK, name, EXACT, move |b| {
            let x = b.input_with(DType::F32, &ne, Fill::Distinct)?;
            b.g.top_k(x, k)
        });
    }
    for ne in [
        [32i64, 1, 1, 1],
        [32, 513, 1, 1],
        [100, 10, 1, 1],
        [1024, 10, 1, 1],
        [1024, 12, 1, 1],
        [2000, 10, 1, 1],
        [5438, 3, 1, 1],
    ] {
        argmax(c, ne);
    }
    for order in [SortOrder::Asc, SortOrder::Desc] {
        // ggml's power-of-two loop passes no order (both passes sort
        // ascending, half its cases repeat); here it sorts both ways.
        for p in 2..=20 {
            let i = capped_row(p, GRID_SORT_ROW_LOG2);
            argsort(c, [i - 1, 1, 1, 1], order);
            argsort(c, [i, 1, 1, 1], order);
        }
        for ne in [
            [16i64, 10, 10, 10],
            [60, 10, 10, 10],
            [1023, 2, 1, 3],
            [1024, 2, 1, 3],
            [1025, 2, 1, 3],
            [1025, 256, 1, 1],
            [2047, 2, 1, 3],
            [2048, 2, 1, 3],
            [2049, 2, 1, 3],
            [2, 8, 8192, 1],
            [2048, 512, 1, 1],
        ] {
            argsort(c, ne, order);
        }
    }
    for n in 1..5i64 {
        for k in 1..=n {
            top_k(c, [n, 2, 1, 3], k);
        }
    }
    for p in 0..20 {
        let i = capped_row(p, GRID_TOPK_ROW_LOG2);
        for k in [1i64, 2, 3, 7, 15, 100, 500, 1023, 9999] {
            if k <= 1 << p {
                top_k(c, [i, 1, 1, 1], k);
                top_k(c, [i + 11, 1, 2, 1], k);
            }
        }
    }
    for k in [4i64, 8, 16, 32] {
        for nrows in [1i64, 8, 16] {
            top_k(c, [202048 / GRID_TOPK_VOCAB_DIV, nrows, 1, 1], k);
            top_k(c, [151936 / GRID_TOPK_VOCAB_DIV, nrows, 1, 1], k);
            top_k(c, [8192, nrows, 1, 1], k);
            top_k(c, [8193, nrows, 1, 1], k);
        }
    }
    for k in [1i64, 2, 3, 7, 15] {
        for ne in [
            [16i64, 10, 10, 10],
            [60, 10, 10, 10],
            [1023, 2, 1, 3],
            [1024, 2, 1, 3],
            [1025, 2, 1, 3],
            [16384, 1, 1, 1],
            [2047, 2, 1, 3],
            [2048, 2, 1, 3],
            [2049, 2, 1, 3],
        ] {
            top_k(c, ne, k);
        }
    }
    for (ne, k) in [
        ([1024i64, 1, 1, 1], 1024i64),
        ([2048, 2, 1, 1], 1024),
        ([4096, 1, 1, 1], 2048),
        ([8192, 2, 1, 1], 2051),
        ([33024, 1, 1, 1], 2051),
        ([33024, 4, 1, 1], 2051),
    ] {
        top_k(c, ne, k);
    }
}
