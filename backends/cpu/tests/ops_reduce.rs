//! SUM, SUM_ROWS, CUMSUM, ARGMAX, ARGSORT, TOP_K on the CPU backend against
//! the reference kernels.

mod common;

use backplane::{DType, Graph, SortOrder};
use common::*;

#[test]
fn sums_match_reference() {
    let mut seed = 0;
    for ta in [DType::F32, DType::F16, DType::BF16] {
        for ne in [[37i64, 5, 3, 2], [1000, 70, 1, 1], [1, 9, 1, 1]] {
            let mut g = Graph::new();
            let a = g.input("a", ta, &ne).unwrap();
            let s = g.sum(a).unwrap();
            let sr = g.sum_rows(a).unwrap();
            seed += 1;
            let run = run(&g, seed, &[]);
            assert_close(&g, &run, s, bound_for(ta), &format!("sum {ta} {ne:?}"));
            assert_close(
                &g,
                &run,
                sr,
                bound_for(ta),
                &format!("sum_rows {ta} {ne:?}"),
            );
        }
        // Permuted source.
        let mut g = Graph::new();
        let a = permuted_input(&mut g, "a", ta, [13, 17, 3, 1], [1, 2, 0, 3]);
        let s = g.sum(a).unwrap();
        let sr = g.sum_rows(a).unwrap();
        let run = run(&g, 50, &[]);
        assert_close(&g, &run, s, bound_for(ta), "sum permuted");
        assert_close(&g, &run, sr, bound_for(ta), "sum_rows permuted");
    }
}

#[test]
fn cumsum_matches_reference() {
    for (i, ne) in [[37i64, 5, 3, 2], [600, 100, 1, 1]].into_iter().enumerate() {
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &ne).unwrap();
        let c = g.cumsum(a).unwrap();
        let run = run(&g, 60 + i as u64, &[]);
        assert_close(&g, &run, c, NMSE, "cumsum");
    }
}

#[test]
fn argmax_argsort_top_k_are_exact() {
    for (i, ne) in [[37i64, 5, 1, 1], [301, 120, 1, 1], [1, 4, 1, 1]]
        .into_iter()
        .enumerate()
    {
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &ne).unwrap();
        let am = g.argmax(a).unwrap();
        let asc = g.argsort(a, SortOrder::Asc).unwrap();
        let desc = g.argsort(a, SortOrder::Desc).unwrap();
        let k = (ne[0] / 3).max(1);
        let top = g.top_k(a, k).unwrap();
        let all = g.top_k(a, ne[0]).unwrap();
        let run = run(&g, 70 + i as u64, &[]);
        assert_same(&g, &run, am, "argmax");
        assert_same(&g, &run, asc, "argsort asc");
        assert_same(&g, &run, desc, "argsort desc");
        assert_same(&g, &run, top, "top_k");
        assert_same(&g, &run, all, "top_k all");
    }
    // Rows of a 4-d tensor and ties (sorted by index).
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[10, 3, 2, 2]).unwrap();
    let asc = g.argsort(a, SortOrder::Asc).unwrap();
    let top = g.top_k(a, 4).unwrap();
    let ties: Vec<f32> = (0..120).map(|i| ((i * 7) % 5) as f32).collect();
    let run = run(&g, 80, &[(a, Data::F32(ties))]);
    assert_same(&g, &run, asc, "argsort ties");
    assert_same(&g, &run, top, "top_k ties");
}
