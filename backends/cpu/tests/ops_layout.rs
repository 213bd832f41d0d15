//! REPEAT, CONCAT, PAD, GET_ROWS, SET_ROWS, CPY and CONT on the CPU backend
//! against the reference kernels.

mod common;

use backplane::{DType, Graph};
use backplane_cpu::CpuError;
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

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

fn indices(seed: u64, n: usize, below: i64) -> Vec<i64> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(0..below)).collect()
}

#[test]
fn repeat_and_concat_match_reference() {
    for (i, dt) in [DType::F32, DType::F16, DType::BF16, DType::I32]
        .into_iter()
        .enumerate()
    {
        let mut g = Graph::new();
        let a = g.input("a", dt, &[5, 3, 2, 1]).unwrap();
        let like = g.input("like", dt, &[15, 6, 2, 3]).unwrap();
        let r = g.repeat(a, like).unwrap();
        let p = permuted_input(&mut g, "p", dt, [3, 5, 2, 1], [1, 0, 2, 3]);
        let rp = g.repeat(p, like).unwrap();
        let run1 = run(&g, 10 + i as u64, &[]);
        assert_same(&g, &run1, r, "repeat");
        assert_same(&g, &run1, rp, "repeat permuted");
        for dim in 0..4 {
            let mut g = Graph::new();
            let mut sb = [7i64, 4, 3, 2];
            sb[dim] = 5;
            let a = g.input("a", dt, &[7, 4, 3, 2]).unwrap();
            let b = g.input("b", dt, &sb).unwrap();
            let c = g.concat(a, b, dim).unwrap();
            let run2 = run(&g, 20 + (i * 4 + dim) as u64, &[]);
            assert_same(&g, &run2, c, &format!("concat dim {dim} {dt}"));
        }
        let mut g = Graph::new();
        let a = permuted_input(&mut g, "a", dt, [6, 9, 2, 1], [1, 0, 2, 3]);
        let b = g.input("b", dt, &[9, 6, 2, 1]).unwrap();
        let c = g.concat(a, b, 1).unwrap();
        let run3 = run(&g, 40 + i as u64, &[]);
        assert_same(&g, &run3, c, "concat permuted");
    }
}

#[test]
fn repeat_i16_matches_reference() {
    let mut g = Graph::new();
    let a = g.input("a", DType::I16, &[3, 2, 1, 1]).unwrap();
    let like = g.input("like", DType::I16, &[9, 4, 2, 1]).unwrap();
    let r = g.repeat(a, like).unwrap();
    let run = run(&g, 50, &[]);
    assert_same(&g, &run, r, "repeat i16");
}

#[test]
fn pad_matches_reference() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[13, 5, 3, 2]).unwrap();
    let r = g.pad(a, [1, 2, 0, 3, 2, 0, 1, 1]).unwrap();
    let p = permuted_input(&mut g, "p", DType::F32, [5, 13, 3, 2], [1, 0, 2, 3]);
    let rp = g.pad(p, [0, 3, 1, 0, 0, 0, 0, 2]).unwrap();
    let run = run(&g, 60, &[]);
    assert_same(&g, &run, r, "pad");
    assert_same(&g, &run, rp, "pad permuted");
}

#[test]
fn get_rows_for_every_type() {
    let types = [DType::F32, DType::F16, DType::BF16, DType::I32]
        .into_iter()
        .chain(QUANTS);
    for (i, dt) in types.enumerate() {
        let ne0 = if dt.block_size() > 1 {
            2 * dt.block_size() as i64
        } else {
            37
        };
        let mut g = Graph::new();
        let a = g.input("a", dt, &[ne0, 11, 3, 1]).unwrap();
        let rows = g.input("rows", DType::I32, &[6, 3, 1]).unwrap();
        let r = g.get_rows(a, rows).unwrap();
        let idx = indices(i as u64, 18, 11);
        let run = run(&g, 70 + i as u64, &[(rows, Data::Ints(idx))]);
        assert_close(&g, &run, r, 0.0, &format!("get_rows {dt}"));
    }
}

#[test]
fn get_rows_out_of_range_index_is_an_error() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[8, 16, 1, 1]).unwrap();
    let rows = g.input("rows", DType::I32, &[3, 1, 1]).unwrap();
    g.get_rows(a, rows).unwrap();
    match cpu_error(&g, &[(rows, Data::Ints(vec![1, 17, 2]))]) {
        CpuError::BadInput { reason, .. } => assert!(
            reason.contains("row index 17 out of range 0..16 in src1"),
            "{reason}"
        ),
        e => panic!("unexpected error {e}"),
    }
}

#[test]
fn set_rows_for_every_destination_type() {
    let types = [DType::F32, DType::F16, DType::BF16]
        .into_iter()
        .chain(QUANTS);
    for (i, dt) in types.enumerate() {
        for idx_t in [DType::I32, DType::I64] {
            let ne0 = if dt.block_size() > 1 {
                dt.block_size() as i64
            } else {
                19
            };
            let mut g = Graph::new();
            let dst = g.input("dst", dt, &[ne0, 12, 2, 3]).unwrap();
            let src = g.input("src", DType::F32, &[ne0, 4, 2, 3]).unwrap();
            let rows = g.input("rows", idx_t, &[4, 1, 3]).unwrap();
            let r = g.set_rows(dst, src, rows).unwrap();
            // Distinct indices per plane keep the result order-independent.
            let mut idx = Vec::new();
            for p in 0..3 {
                idx.extend([
                    (p * 5) % 12,
                    (p * 5 + 3) % 12,
                    (p * 5 + 7) % 12,
                    (p * 5 + 10) % 12,
                ]);
            }
            let run = run(&g, 90 + i as u64, &[(rows, Data::Ints(idx))]);
            assert_close(&g, &run, r, 0.0, &format!("set_rows {dt} {idx_t}"));
        }
    }
}

#[test]
fn set_rows_out_of_range_index_is_an_error() {
    let mut g = Graph::new();
    let dst = g.input("dst", DType::F16, &[8, 16, 1, 1]).unwrap();
    let src = g.input("src", DType::F32, &[8, 2, 1, 1]).unwrap();
    let rows = g.input("rows", DType::I64, &[2, 1, 1]).unwrap();
    g.set_rows(dst, src, rows).unwrap();
    match cpu_error(&g, &[(rows, Data::Ints(vec![3, -1]))]) {
        CpuError::BadInput { reason, .. } => assert!(
            reason.contains("row index -1 out of range 0..16"),
            "{reason}"
        ),
        e => panic!("unexpected error {e}"),
    }
}

#[test]
fn cpy_between_float_types_and_shapes() {
    let floats = [DType::F32, DType::F16, DType::BF16];
    let mut seed = 200;
    for ta in floats {
        for tb in floats {
            // Same shape, permuted source, reshaped destination.
            let mut g = Graph::new();
            let a = g.input("a", ta, &[24, 10, 3, 1]).unwrap();
            let b = g.input("b", tb, &[24, 10, 3, 1]).unwrap();
            let c1 = g.cpy(a, b).unwrap();
            let p = permuted_input(&mut g, "p", ta, [10, 24, 3, 1], [1, 0, 2, 3]);
            let b2 = g.input("b2", tb, &[24, 10, 3, 1]).unwrap();
            let c2 = g.cpy(p, b2).unwrap();
            let b3 = g.input("b3", tb, &[40, 18, 1, 1]).unwrap();
            let c3 = g.cpy(p, b3).unwrap();
            seed += 1;
            let run = run(&g, seed, &[]);
            let bound = if ta == tb { 0.0 } else { bound_for(tb) };
            assert_close(&g, &run, c1, bound, &format!("cpy {ta}->{tb}"));
            assert_close(&g, &run, c2, bound, &format!("cpy permuted {ta}->{tb}"));
            assert_close(&g, &run, c3, bound, &format!("cpy reshaped {ta}->{tb}"));
        }
    }
}

#[test]
fn cpy_large_threaded_and_cont() {
    let mut g = Graph::new();
    let a = permuted_input(&mut g, "a", DType::F32, [300, 200, 2, 1], [1, 0, 2, 3]);
    let c = g.cont(a).unwrap();
    let b = g.input("b", DType::F16, &[200, 300, 2, 1]).unwrap();
    let h = g.cpy(a, b).unwrap();
    let d = g.input("d", DType::F32, &[200, 300, 2, 1]).unwrap();
    let e = g.input("e", DType::F32, &[200, 300, 2, 1]).unwrap();
    let same = g.cpy(d, e).unwrap();
    let run = run(&g, 300, &[]);
    assert_close(&g, &run, c, 0.0, "cont permuted");
    assert_close(&g, &run, h, bound_for(DType::F16), "cpy f32->f16 permuted");
    assert_close(&g, &run, same, 0.0, "cpy contiguous");
}

#[test]
fn cpy_quantizes_and_dequantizes() {
    for (i, q) in QUANTS.into_iter().enumerate() {
        let bs = q.block_size() as i64;
        for ta in [DType::F32, DType::F16, DType::BF16] {
            let mut g = Graph::new();
            let a = g.input("a", ta, &[2 * bs, 3, 2, 1]).unwrap();
            let b = g.input("b", q, &[2 * bs, 3, 2, 1]).unwrap();
            let qz = g.cpy(a, b).unwrap();
            // Reshaped destination rows: one long row.
            let b2 = g.input("b2", q, &[12 * bs, 1, 1, 1]).unwrap();
            let qz2 = g.cpy(a, b2).unwrap();
            let run = run(&g, 400 + (i * 3) as u64, &[]);
            assert_close(&g, &run, qz, 0.0, &format!("quantize {ta}->{q}"));
            assert_close(&g, &run, qz2, 0.0, &format!("quantize reshaped {ta}->{q}"));
        }
        let mut g = Graph::new();
        let a = g.input("a", q, &[2 * bs, 3, 2, 1]).unwrap();
        let b = g.input("b", DType::F32, &[2 * bs, 3, 2, 1]).unwrap();
        let dq = g.cpy(a, b).unwrap();
        let b2 = g.input("b2", DType::F32, &[bs, 12, 1, 1]).unwrap();
        let dq2 = g.cpy(a, b2).unwrap();
        let c = g.cont(a).unwrap();
        let run = run(&g, 500 + i as u64, &[]);
        assert_close(&g, &run, dq, 0.0, &format!("dequantize {q}"));
        assert_close(&g, &run, dq2, 0.0, &format!("dequantize reshaped {q}"));
        assert_close(&g, &run, c, 0.0, &format!("cont {q}"));
    }
}

#[test]
fn cpy_between_f32_and_i32() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[17, 5, 1, 1]).unwrap();
    let b = g.input("b", DType::I32, &[17, 5, 1, 1]).unwrap();
    let to_int = g.cpy(a, b).unwrap();
    let c = g.input("c", DType::I32, &[5, 17, 1, 1]).unwrap();
    let d = g.input("d", DType::F32, &[5, 17, 1, 1]).unwrap();
    let to_float = g.cpy(c, d).unwrap();
    let values: Vec<f32> = (0..85).map(|i| (i as f32 - 40.0) * 1.37).collect();
    let run = run(&g, 600, &[(a, Data::F32(values))]);
    assert_same(&g, &run, to_int, "f32 -> i32 truncates");
    assert_same(&g, &run, to_float, "i32 -> f32");
}

#[test]
fn supports_names_the_reason_for_a_refusal() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[8, 4, 1, 1]).unwrap();
    let b = g.input("b", DType::Q4_0, &[32, 1, 1, 1]).unwrap();
    let c = g.cpy(a, b).unwrap();
    let mut descs = g.tensors().to_vec();
    assert_eq!(cpu().supports(&descs, c.index()), Ok(()));
    // A copy into i16 is no conversion of CPY's (the op contract says so).
    for t in [b, c] {
        descs[t.index()].dtype = DType::I16.code();
        descs[t.index()].nb = backplane_abi::contiguous_strides(DType::I16, [32, 1, 1, 1]);
    }
    let reason = cpu().supports(&descs, c.index()).unwrap_err();
    assert_eq!(reason, "CPY: b: expected a type f32 converts to, found i16");
}

#[test]
fn cont_and_cpy_of_integer_types_move_raw_values() {
    for (i, dt) in [DType::I8, DType::I16, DType::I32, DType::I64]
        .into_iter()
        .enumerate()
    {
        let mut g = Graph::new();
        let a = permuted_input(&mut g, "a", dt, [7, 5, 3, 1], [2, 0, 1, 3]);
        let c = g.cont(a).unwrap();
        let b = g.input("b", dt, &[15, 7, 1, 1]).unwrap();
        let r = g.cpy(a, b).unwrap();
        let run = run(&g, 700 + i as u64, &[]);
        assert_same(&g, &run, c, &format!("cont {dt}"));
        assert_same(&g, &run, r, &format!("cpy reshaped {dt}"));
    }
}
