//! Unit tests: layout, hand-derived golden bytes, rounding rules, error
//! cases, round-trip error bounds and dot products.

use std::mem::offset_of;

use bytemuck::Zeroable;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

const QUANTIZED: [DType; 12] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q8_1,
    DType::Q2_K,
    DType::Q3_K,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
    DType::Q8_K,
];

fn quantize(dtype: DType, x: &[f32]) -> Vec<u8> {
    let mut q = vec![0u8; dtype.row_size(x.len()).unwrap()];
    quantize_row(dtype, x, &mut q).unwrap();
    q
}

fn dequantize(dtype: DType, q: &[u8], n: usize) -> Vec<f32> {
    let mut y = vec![0f32; n];
    dequantize_row(dtype, q, &mut y).unwrap();
    y
}

/// Gaussian samples (Box-Muller), deterministic per seed.
fn gaussian(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let u1: f64 = 1.0 - rng.random::<f64>();
            let u2: f64 = rng.random::<f64>();
            ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
        })
        .collect()
}

/// ggml test-quantize-fns' `generate_data`: `0.1 + amplitude * cos(i + offset)`.
fn ggml_test_data(offset: f32, n: usize, amplitude: f32) -> Vec<f32> {
    (0..n)
        .map(|i| (0.1 + (amplitude * (i as f32 + offset).cos()) as f64) as f32)
        .collect()
}

/// Normalised mean squared error `sum((x - y)^2) / sum(x^2)`.
fn nmse(x: &[f32], y: &[f32]) -> f64 {
    let err: f64 = x
        .iter()
        .zip(y)
        .map(|(&a, &b)| (a as f64 - b as f64).powi(2))
        .sum();
    let sig: f64 = x.iter().map(|&a| (a as f64).powi(2)).sum();
    err / sig
}

// ---------------------------------------------------------------- layout

#[test]
fn block_sizes_match_dtype() {
    fn check<B: QuantBlock>() {
        assert_eq!(size_of::<B>(), B::DTYPE.type_size(), "{}", B::DTYPE);
        assert_eq!(B::BLOCK_SIZE, B::DTYPE.block_size(), "{}", B::DTYPE);
    }
    check::<BlockQ4_0>();
    check::<BlockQ4_1>();
    check::<BlockQ5_0>();
    check::<BlockQ5_1>();
    check::<BlockQ8_0>();
    check::<BlockQ8_1>();
    check::<BlockQ2K>();
    check::<BlockQ3K>();
    check::<BlockQ4K>();
    check::<BlockQ5K>();
    check::<BlockQ6K>();
    check::<BlockQ8K>();
}

#[test]
fn field_offsets_match_ggml() {
    assert_eq!(offset_of!(BlockQ4_0, qs), 2);
    assert_eq!(offset_of!(BlockQ4_1, qs), 4);
    assert_eq!(offset_of!(BlockQ5_0, qh), 2);
    assert_eq!(offset_of!(BlockQ5_0, qs), 6);
    assert_eq!(offset_of!(BlockQ5_1, qh), 4);
    assert_eq!(offset_of!(BlockQ5_1, qs), 8);
    assert_eq!(offset_of!(BlockQ8_0, qs), 2);
    assert_eq!(offset_of!(BlockQ8_1, s), 2);
    assert_eq!(offset_of!(BlockQ8_1, qs), 4);
    assert_eq!(offset_of!(BlockQ2K, qs), 16);
    assert_eq!(offset_of!(BlockQ2K, d), 80);
    assert_eq!(offset_of!(BlockQ2K, dmin), 82);
    assert_eq!(offset_of!(BlockQ3K, qs), 32);
    assert_eq!(offset_of!(BlockQ3K, scales), 96);
    assert_eq!(offset_of!(BlockQ3K, d), 108);
    assert_eq!(offset_of!(BlockQ4K, scales), 4);
    assert_eq!(offset_of!(BlockQ4K, qs), 16);
    assert_eq!(offset_of!(BlockQ5K, qh), 16);
    assert_eq!(offset_of!(BlockQ5K, qs), 48);
    assert_eq!(offset_of!(BlockQ6K, qh), 128);
    assert_eq!(offset_of!(BlockQ6K, scales), 192);
    assert_eq!(offset_of!(BlockQ6K, d), 208);
    assert_eq!(offset_of!(BlockQ8K, qs), 4);
    assert_eq!(offset_of!(BlockQ8K, bsums), 260);
}

#[test]
fn vec_dot_types_match_ggml() {
    use DType::*;
    for (t, v) in [
        (Q4_0, Q8_0),
        (Q5_0, Q8_0),
        (Q8_0, Q8_0),
        (Q4_1, Q8_1),
        (Q5_1, Q8_1),
        (Q2_K, Q8_K),
        (Q3_K, Q8_K),
        (Q4_K, Q8_K),
        (Q5_K, Q8_K),
        (Q6_K, Q8_K),
        (F32, F32),
        (F16, F16),
        (BF16, BF16),
    ] {
        assert_eq!(vec_dot_type(t), v, "{t}");
    }
}

// ---------------------------------------------------------------- rounding

#[test]
fn nearest_int_rounds_half_to_even() {
    for (x, want) in [
        (0.5, 0),
        (1.5, 2),
        (2.5, 2),
        (-0.5, 0),
        (-1.5, -2),
        (-2.5, -2),
        (0.49999997, 0),
        (3.7, 4),
        (-3.7, -4),
        (4194303.0, 4194303),
        (-4194303.0, -4194303),
    ] {
        assert_eq!(nearest_int(x), want, "{x}");
    }
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..10_000 {
        let x: f32 = rng.random_range(-5000.0..5000.0);
        assert_eq!(nearest_int(x), x.round_ties_even() as i32, "{x}");
    }
}

#[test]
fn f16_conversion_rounds_to_nearest_even() {
    // Exactly halfway between two f16 values: ties go to the even mantissa.
    assert_eq!(f16::from_f32(1.0 + 2f32.powi(-11)).to_bits(), 0x3C00);
    assert_eq!(f16::from_f32(1.0 + 3.0 * 2f32.powi(-11)).to_bits(), 0x3C02);
    // Just above the tie rounds up.
    assert_eq!(
        f16::from_f32(1.0 + 2f32.powi(-11) + 2f32.powi(-20)).to_bits(),
        0x3C01
    );
    assert_eq!(f16::from_f32(65504.0).to_bits(), 0x7BFF);
    assert_eq!(f16::from_f32(65520.0).to_bits(), 0x7C00); // overflow -> inf
    assert_eq!(f16::from_f32(-0.0).to_bits(), 0x8000);
    assert_eq!(f16::from_f32(2f32.powi(-24)).to_bits(), 0x0001); // smallest subnormal

    let x = [1.0f32, -2.5, 65504.0, 1e-7, 3.3];
    let bytes = quantize(DType::F16, &x);
    assert_eq!(&bytes[..4], &[0x00, 0x3C, 0x00, 0xC1]);
    let y = dequantize(DType::F16, &bytes, x.len());
    for (&a, &b) in x.iter().zip(&y) {
        assert_eq!(f16::from_f32(a).to_f32(), b);
    }
}

#[test]
fn bf16_conversion_matches_ggml() {
    assert_eq!(f32_to_bf16(1.0).to_bits(), 0x3F80);
    // Ties to even.
    assert_eq!(f32_to_bf16(1.0 + 2f32.powi(-8)).to_bits(), 0x3F80);
    assert_eq!(f32_to_bf16(1.0 + 3.0 * 2f32.powi(-8)).to_bits(), 0x3F82);
    assert_eq!(f32_to_bf16(-2.0).to_bits(), 0xC000);
    // Rounds up into infinity like ggml.
    assert_eq!(f32_to_bf16(f32::MAX).to_bits(), 0x7F80);
    // NaN: the quiet bit is forced on, the sign and top payload bits kept.
    assert_eq!(f32_to_bf16(f32::from_bits(0x7F80_0001)).to_bits(), 0x7FC0);
    assert_eq!(f32_to_bf16(f32::from_bits(0xFFA0_0000)).to_bits(), 0xFFE0);
    // Subnormals are kept, not flushed.
    assert_eq!(f32_to_bf16(f32::from_bits(0x0001_8000)).to_bits(), 0x0002);

    // Agrees with `half`'s independent implementation on random non-NaN bits.
    let mut rng = StdRng::seed_from_u64(3);
    for _ in 0..100_000 {
        let x = f32::from_bits(rng.random());
        if x.is_nan() {
            assert!(bf16_to_f32(f32_to_bf16(x)).is_nan());
        } else {
            assert_eq!(
                f32_to_bf16(x).to_bits(),
                bf16::from_f32(x).to_bits(),
                "{x:e}"
            );
            assert_eq!(bf16_to_f32(f32_to_bf16(x)), bf16::from_f32(x).to_f32());
        }
    }

    let x = [1.0f32, -3.0, 0.1];
    let bytes = quantize(DType::BF16, &x);
    assert_eq!(&bytes[..4], &[0x80, 0x3F, 0x40, 0xC0]);
    let y = dequantize(DType::BF16, &bytes, 3);
    assert_eq!(y[..2], [1.0, -3.0]);
    assert_eq!(y[2], bf16::from_f32(0.1).to_f32());
}

#[test]
fn integer_rows_round_half_away_and_saturate() {
    let x = [1.5f32, -1.5, 2.5, 300.0, -300.0, f32::NAN, 0.49];
    let q = quantize(DType::I8, &x);
    let q: Vec<i8> = q.iter().map(|&b| b as i8).collect();
    assert_eq!(q, [2, -2, 3, 127, -128, 0, 0]);
    assert_eq!(dequantize(DType::I8, &[0x80, 0x7F], 2), [-128.0, 127.0]);

    let q = quantize(DType::I16, &[-40000.0, 1234.5]);
    assert_eq!(q, [0x00, 0x80, 0xD3, 0x04]); // -32768, 1235
    assert_eq!(dequantize(DType::I16, &q, 2), [-32768.0, 1235.0]);

    let q = quantize(DType::I32, &[-7.0, 16777217.0]);
    assert_eq!(dequantize(DType::I32, &q, 2), [-7.0, 16777216.0]);

    let q = quantize(DType::I64, &[-2.5, 1e30]);
    assert_eq!(&q[..8], &(-3i64).to_le_bytes());
    assert_eq!(&q[8..], &i64::MAX.to_le_bytes());
    assert_eq!(dequantize(DType::I64, &q, 2), [-3.0, i64::MAX as f32]);

    let x = [0.25f32, -1e30, 5.0];
    assert_eq!(dequantize(DType::F32, &quantize(DType::F32, &x), 3), x);
}

// ---------------------------------------------------------------- golden bytes

fn f16_bytes(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_bits().to_le_bytes()
}

#[test]
fn golden_q4_0() {
    // x[j] = j - 8 then 7 - j: the first value of largest magnitude is -8, so
    // d = -8 / -8 = 1, 1/d = 1 and q = trunc(x + 8.5) gives q[j] = j for the
    // first half and 15 - j for the second; byte j = q[j] | q[j + 16] << 4.
    let mut x = [0f32; 32];
    for j in 0..16 {
        x[j] = j as f32 - 8.0;
        x[16 + j] = 7.0 - j as f32;
    }
    let q = quantize(DType::Q4_0, &x);
    let mut want = vec![0x00, 0x3C];
    want.extend((0..16).map(|j| (j | ((15 - j) << 4)) as u8));
    assert_eq!(q, want);
    assert_eq!(dequantize(DType::Q4_0, &q, 32), x);

    // A positive maximum: d = 8 / -8 = -1, so 8 -> q 0 and 0 -> q 8;
    // q = trunc(x * -1 + 8.5): 0.5 -> 8 (not 7: truncation of 8.0),
    // -0.5 -> 9, 2.5 -> 6 (trunc(6.0)), 1.49 -> trunc(7.01) = 7.
    let mut x = [0f32; 32];
    x[0] = 8.0;
    x[1] = 0.5;
    x[2] = -0.5;
    x[3] = 2.5;
    x[16] = 1.49;
    x[17] = -8.0; // ties with x[0] in magnitude; the first one wins
    let q = quantize(DType::Q4_0, &x);
    assert_eq!(&q[..2], &[0x00, 0xBC]); // f16 -1.0
    assert_eq!(q[2], 0x70); // q0 = 0, q16 = 7
    assert_eq!(q[3], 0xF8); // q1 = 8, q17 = trunc(16.5) = 16 -> min 15
    assert_eq!(q[4], 0x89); // q2 = 9, q18 = 8
    assert_eq!(q[5], 0x86); // q3 = 6, q19 = 8
    assert!(q[6..].iter().all(|&b| b == 0x88));

    // All zeros: d = 0 / -8 = -0.0, stored as f16 0x8000; every q is 8.
    let q = quantize(DType::Q4_0, &[0.0; 32]);
    assert_eq!(&q[..2], &[0x00, 0x80]);
    assert!(q[2..].iter().all(|&b| b == 0x88));
}

#[test]
fn golden_q8_0() {
    // amax = 127 -> d = 1: q = roundf(x), halves away from zero.
    let mut x = [0f32; 32];
    x[0] = 127.0;
    x[1] = -127.0;
    x[2] = 2.5;
    x[3] = -2.5;
    x[4] = 0.5;
    x[5] = -0.5;
    x[6] = 0.49;
    x[7] = 1.5;
    for (j, v) in x.iter_mut().enumerate().skip(8) {
        *v = j as f32 - 20.0;
    }
    let q = quantize(DType::Q8_0, &x);
    let mut want = vec![0x00, 0x3C, 127, 0x81, 3, 0xFD, 1, 0xFF, 0, 2];
    want.extend((8..32).map(|j| (j - 20) as i8 as u8));
    assert_eq!(q, want);

    // f16 rounding of the scale: amax = 127 * (1 + 3 * 2^-11) gives
    // d = 1 + 3 * 2^-11 exactly, halfway between f16 0x3C01 and 0x3C02;
    // round-to-nearest-even picks 0x3C02 (truncation would give 0x3C01).
    let amax = 127.0 * (1.0 + 3.0 * 2f32.powi(-11));
    let mut x = [0f32; 32];
    x[0] = amax;
    x[1] = -amax;
    let q = quantize(DType::Q8_0, &x);
    assert_eq!(&q[..4], &[0x02, 0x3C, 127, 0x81]);
    assert!(q[4..].iter().all(|&b| b == 0));

    // All zeros: d = 0, quants 0.
    assert_eq!(quantize(DType::Q8_0, &[0.0; 32]), vec![0u8; 34]);
}

#[test]
fn golden_q5_0_high_bits() {
    // x[0] = -16 sets d = 1; x[j] = j - 16, x[16 + j] = j.
    // q = trunc(x + 16.5): q[j] = j (no fifth bit), q[16 + j] = 16 + j (fifth
    // bit set), so qh = 0xFFFF0000 and qs[j] = j | j << 4.
    let mut x = [0f32; 32];
    for j in 0..16 {
        x[j] = j as f32 - 16.0;
        x[16 + j] = j as f32;
    }
    let q = quantize(DType::Q5_0, &x);
    let mut want = f16_bytes(1.0).to_vec();
    want.extend(0xFFFF_0000u32.to_le_bytes());
    want.extend((0..16).map(|j| (j | (j << 4)) as u8));
    assert_eq!(q, want);
    assert_eq!(dequantize(DType::Q5_0, &q, 32), x);
}

#[test]
fn golden_q4_1_and_q5_1() {
    // min = 0, max = 15: d = 1, m = 0, q = trunc(x + 0.5).
    let x: Vec<f32> = (0..32).map(|j| (j % 16) as f32).collect();
    let q = quantize(DType::Q4_1, &x);
    let mut want = [f16_bytes(1.0), f16_bytes(0.0)].concat();
    want.extend((0..16).map(|j| (j | (j << 4)) as u8));
    assert_eq!(q, want);
    assert_eq!(dequantize(DType::Q4_1, &q, 32), x);

    // min = -1, max = 30: d = 1, m = -1, q = x + 1 in 0..=31.
    let x: Vec<f32> = (0..32).map(|j| j as f32 - 1.0).collect();
    let q = quantize(DType::Q5_1, &x);
    let mut want = [f16_bytes(1.0), f16_bytes(-1.0)].concat();
    want.extend(0xFFFF_0000u32.to_le_bytes());
    want.extend((0..16).map(|j| (j | (j << 4)) as u8));
    assert_eq!(q, want);
    assert_eq!(dequantize(DType::Q5_1, &q, 32), x);
}

#[test]
fn q8_1_sum_field() {
    let x = gaussian(64, 11);
    let mut y = [BlockQ8_1::zeroed(); 2];
    quantize_row_q8_1(&x, &mut y);
    for b in &y {
        let sum: i32 = b.qs.iter().map(|&q| q as i32).sum();
        let d = b.d.to_f32();
        assert_eq!(b.s, f16::from_f32(sum as f32 * d));
    }
    // Same quants and scale as q8_0.
    let mut z = [BlockQ8_0::zeroed(); 2];
    quantize_row_q8_0(&x, &mut z);
    for (a, b) in y.iter().zip(&z) {
        assert_eq!((a.d, a.qs), (b.d, b.qs));
    }
}

#[test]
fn q8_k_scale_and_bsums() {
    let mut x = gaussian(256, 5);
    x[17] = -4.0; // unique largest magnitude
    let mut y = [BlockQ8K::zeroed()];
    quantize_row_q8_k(&x, &mut y);
    let b = &y[0];
    assert_eq!(b.d, 1.0 / (-127.0 / -4.0));
    assert_eq!(b.qs[17], -127); // the extreme maps to -127 whatever its sign
    for (j, &s) in b.bsums.iter().enumerate() {
        let want: i16 = b.qs[16 * j..16 * j + 16].iter().map(|&q| q as i16).sum();
        assert_eq!(s, want);
    }
    quantize_row_q8_k(&[0.0; 256], &mut y);
    assert_eq!(y[0], BlockQ8K::zeroed());
}

#[test]
fn k_quant_zero_blocks_dequantize_to_zero() {
    for t in QUANTIZED {
        let n = t.block_size() * 2;
        let y = dequantize(t, &quantize(t, &vec![0.0; n]), n);
        assert!(y.iter().all(|&v| v == 0.0), "{t}: {y:?}");
    }
}

#[test]
fn get_scale_min_k4_round_trips() {
    let mut rng = StdRng::seed_from_u64(9);
    for _ in 0..100 {
        let ls: [u8; 8] = std::array::from_fn(|_| rng.random_range(0..64));
        let lm: [u8; 8] = std::array::from_fn(|_| rng.random_range(0..64));
        let mut s = [0u8; 12];
        for j in 0..8 {
            kquants_pack(&mut s, j, ls[j], lm[j]);
        }
        for j in 0..8 {
            assert_eq!(get_scale_min_k4(j, &s), (ls[j], lm[j]));
        }
    }
}

/// The packing ggml's q4_K/q5_K quantizers use (restated here so the test
/// does not depend on the private helper).
fn kquants_pack(s: &mut [u8; 12], j: usize, ls: u8, lm: u8) {
    if j < 4 {
        s[j] = ls;
        s[j + 4] = lm;
    } else {
        s[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
        s[j - 4] |= (ls >> 4) << 6;
        s[j] |= (lm >> 4) << 6;
    }
}

#[test]
fn hand_built_k_blocks_dequantize_by_formula() {
    // q4_K: group g has scale g + 1 and min g; every quant is 3 (low) / 5 (high).
    let mut b = BlockQ4K::zeroed();
    b.d = f16::from_f32(0.5);
    b.dmin = f16::from_f32(0.25);
    for j in 0..8 {
        kquants_pack(&mut b.scales, j, j as u8 + 1, j as u8);
    }
    b.qs = [0x53; 128];
    let mut y = [0f32; 256];
    dequantize_row_q4_k(&[b], &mut y);
    for (i, &v) in y.iter().enumerate() {
        let g = i / 32;
        let q = if g % 2 == 0 { 3.0 } else { 5.0 };
        assert_eq!(v, 0.5 * (g as f32 + 1.0) * q - 0.25 * g as f32, "{i}");
    }

    // q6_K: all quants 32 + 5, scale of group j = j - 8.
    let mut b = BlockQ6K::zeroed();
    b.d = f16::from_f32(0.125);
    b.scales = std::array::from_fn(|j| j as i8 - 8);
    // q = 37 = 0b10_0101: low nibble 5, high bits 2.
    b.ql = [0x55; 128];
    b.qh = [0xAA; 64];
    dequantize_row_q6_k(&[b], &mut y);
    for (i, &v) in y.iter().enumerate() {
        assert_eq!(v, 0.125 * ((i / 16) as f32 - 8.0) * 5.0, "{i}");
    }

    // q3_K: all scales 32 + 2 (i.e. 2), all high bits set -> q - 0, low bits 1.
    let mut b = BlockQ3K::zeroed();
    b.d = f16::from_f32(1.0);
    // 34 = 0b10_0010: low nibble 2 in every nibble, top bits 2 in every pair.
    b.scales = [
        0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0xAA, 0xAA, 0xAA, 0xAA,
    ];
    b.hmask = [0xFF; 32];
    b.qs = [0x55; 64];
    let mut y = [0f32; 256];
    dequantize_row_q3_k(&[b], &mut y);
    assert!(y.iter().all(|&v| v == 2.0));
    b.hmask = [0; 32]; // no high bits: q - 4 = -3
    dequantize_row_q3_k(&[b], &mut y);
    assert!(y.iter().all(|&v| v == -6.0));
}

// ---------------------------------------------------------------- errors

#[test]
fn length_errors() {
    let x = [0f32; 33];
    let mut q = [0u8; 18];
    let e = quantize_row(DType::Q4_0, &x, &mut q).unwrap_err();
    assert_eq!(
        e.kind,
        QuantErrorKind::NotWholeBlocks {
            len: 33,
            block_size: 32
        }
    );
    let msg = e.to_string();
    assert!(
        msg.contains("q4_0") && msg.contains("33") && msg.contains("32"),
        "{msg}"
    );

    let e = quantize_row(DType::Q4_0, &x[..32], &mut q[..17]).unwrap_err();
    assert_eq!(
        e.kind,
        QuantErrorKind::ByteLen {
            values: 32,
            expected: 18,
            actual: 17
        }
    );
    let msg = e.to_string();
    assert!(
        msg.contains("q4_0") && msg.contains("18") && msg.contains("17"),
        "{msg}"
    );

    let mut y = [0f32; 255];
    let e = dequantize_row(DType::Q6_K, &[0u8; 210], &mut y).unwrap_err();
    assert_eq!(e.dtype, DType::Q6_K);
    assert!(matches!(
        e.kind,
        QuantErrorKind::NotWholeBlocks {
            len: 255,
            block_size: 256
        }
    ));
    let mut y = [0f32; 256];
    let e = dequantize_row(DType::Q6_K, &[0u8; 211], &mut y).unwrap_err();
    assert!(matches!(
        e.kind,
        QuantErrorKind::ByteLen {
            expected: 210,
            actual: 211,
            ..
        }
    ));
    let e = dequantize_row(DType::F16, &[0u8; 3], &mut y[..2]).unwrap_err();
    assert!(matches!(
        e.kind,
        QuantErrorKind::ByteLen {
            expected: 4,
            actual: 3,
            ..
        }
    ));

    // Empty rows are fine.
    quantize_row(DType::Q4_K, &[], &mut []).unwrap();
    dequantize_row(DType::Q4_K, &[], &mut []).unwrap();
}

#[test]
#[should_panic(expected = "do not fill")]
fn typed_functions_panic_on_mismatch() {
    let mut q = [BlockQ4_0::zeroed(); 2];
    quantize_row_q4_0(&[0.0; 32], &mut q);
}

#[test]
fn unaligned_byte_rows_give_identical_bytes() {
    let x = gaussian(512, 21);
    for t in DType::ALL {
        let n = 512;
        let size = t.row_size(n).unwrap();
        let aligned = quantize(t, &x);
        let mut buf = vec![0u8; size + 1];
        quantize_row(t, &x, &mut buf[1..]).unwrap();
        assert_eq!(&buf[1..], &aligned[..], "{t}");
        let mut y = vec![0f32; n];
        dequantize_row(t, &buf[1..], &mut y).unwrap();
        assert_eq!(y, dequantize(t, &aligned, n), "{t}");
    }
}

// ---------------------------------------------------------------- round trips

/// NMSE bounds for standard-normal data, with the value measured at the time
/// of writing (seeded data, 64 Ki values) in the comment. Each bound is about
/// 1.3x the measurement: tight enough to catch a broken scale search or bit
/// layout (which costs far more than 30%), loose enough for any correct
/// implementation on other seeds.
fn nmse_bound(t: DType) -> f64 {
    match t {
        DType::Q4_0 => 9.5e-3, // 7.38e-3
        DType::Q4_1 => 8.0e-3, // 6.11e-3
        DType::Q5_0 => 2.4e-3, // 1.82e-3
        DType::Q5_1 => 1.9e-3, // 1.43e-3
        DType::Q8_0 => 3.8e-5, // 2.87e-5 (theory: step (amax/127)^2 / 12 ~ 2.3e-5)
        DType::Q8_1 => 3.8e-5, // 2.87e-5 (same quants as q8_0)
        DType::Q2_K => 0.11,   // 8.73e-2
        DType::Q3_K => 2.9e-2, // 2.25e-2
        DType::Q4_K => 6.6e-3, // 5.05e-3
        DType::Q5_K => 1.7e-3, // 1.30e-3
        DType::Q6_K => 4.1e-4, // 3.11e-4
        DType::Q8_K => 6.3e-5, // 4.81e-5
        DType::F16 => 1e-7,    // 4.34e-8 (2^-11 relative rounding: <= 2^-22/3 ~ 8e-8)
        DType::BF16 => 6e-6,   // 2.77e-6 (2^-8 relative rounding: <= 2^-16/3 ~ 5e-6)
        _ => 0.0,
    }
}

#[test]
fn round_trip_nmse_on_gaussian_data() {
    let x = gaussian(64 * 1024, 1);
    for t in QUANTIZED.into_iter().chain([DType::F16, DType::BF16]) {
        let y = dequantize(t, &quantize(t, &x), x.len());
        let e = nmse(&x, &y);
        assert!(
            e < nmse_bound(t),
            "{t}: nmse {e:.3e} >= {:.3e}",
            nmse_bound(t)
        );
    }
    // More bits must mean less error, and a K-quant must beat the legacy
    // format of the same width.
    let e = |t| nmse(&x, &dequantize(t, &quantize(t, &x), x.len()));
    use DType::*;
    for pair in [
        [Q2_K, Q3_K],
        [Q3_K, Q4_K],
        [Q4_K, Q5_K],
        [Q5_K, Q6_K],
        [Q6_K, Q8_K],
        [Q4_0, Q5_0],
        [Q5_0, Q8_0],
        [Q4_1, Q5_1],
        [Q4_0, Q4_K],
        [Q5_0, Q5_K],
    ] {
        assert!(e(pair[0]) > e(pair[1]), "{pair:?}");
    }
}

/// ggml's own check (tests/test-quantize-fns.cpp): on `0.1 + 2 cos(i)` data of
/// 4096 values, `sqrt(sum (x - y)^2) / n` must stay below 0.002, or 0.0075
/// for q2_K and 0.004 for q3_K.
#[test]
fn round_trip_matches_ggml_test_quantize_fns() {
    let n = 32 * 128;
    let x = ggml_test_data(0.0, n, 2.0);
    for t in QUANTIZED {
        let y = dequantize(t, &quantize(t, &x), n);
        let sum: f64 = x
            .iter()
            .zip(&y)
            .map(|(&a, &b)| (a as f64 - b as f64).powi(2))
            .sum();
        let err = (sum.sqrt() as f32) / n as f32;
        let bound = match t {
            DType::Q2_K => 0.0075,
            DType::Q3_K => 0.0040,
            _ => 0.002,
        };
        assert!(err < bound, "{t}: {err} >= {bound}");
    }
}

// ---------------------------------------------------------------- dot products

/// Reads a byte row as a vector of `B` (any alignment).
fn pod_vec<B: Pod>(b: &[u8]) -> Vec<B> {
    b.chunks_exact(size_of::<B>())
        .map(bytemuck::pod_read_unaligned)
        .collect()
}

/// Dispatches to the typed dot product for `t` with `y` in `vec_dot_type(t)`.
fn vec_dot(t: DType, n: usize, x: &[u8], y: &[u8]) -> f32 {
    fn c<B: Pod>(b: &[u8]) -> Vec<B> {
        pod_vec(b)
    }
    match t {
        DType::Q4_0 => vec_dot_q4_0_q8_0(n, &c(x), &c(y)),
        DType::Q4_1 => vec_dot_q4_1_q8_1(n, &c(x), &c(y)),
        DType::Q5_0 => vec_dot_q5_0_q8_0(n, &c(x), &c(y)),
        DType::Q5_1 => vec_dot_q5_1_q8_1(n, &c(x), &c(y)),
        DType::Q8_0 => vec_dot_q8_0_q8_0(n, &c(x), &c(y)),
        DType::Q2_K => vec_dot_q2_k_q8_k(n, &c(x), &c(y)),
        DType::Q3_K => vec_dot_q3_k_q8_k(n, &c(x), &c(y)),
        DType::Q4_K => vec_dot_q4_k_q8_k(n, &c(x), &c(y)),
        DType::Q5_K => vec_dot_q5_k_q8_k(n, &c(x), &c(y)),
        DType::Q6_K => vec_dot_q6_k_q8_k(n, &c(x), &c(y)),
        DType::F32 => vec_dot_f32(n, &c(x), &c(y)),
        DType::F16 => vec_dot_f16(n, &c(x), &c(y)),
        DType::BF16 => vec_dot_bf16(n, &c(x), &c(y)),
        _ => unreachable!("{t} has no dot product"),
    }
}

const DOT_TYPES: [DType; 13] = [
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
    DType::F32,
    DType::F16,
    DType::BF16,
];

/// The dot product of the quantized operands must equal the f64 dot product
/// of their dequantized values up to f32 rounding: relative 1e-5 of
/// `sum |x_i y_i|` (the kernels sum exact integers per block and do a few f32
/// operations per block). For the `_1` pairs ggml uses the f16-rounded
/// `s = d * sum(q)` of q8_1 instead of the exact sum, which adds up to
/// `2^-11 |m s|` per block; that is added to the tolerance.
#[test]
fn dot_products_match_dequantized_f64_dot() {
    for seed in 0..4u64 {
        let n = 1024;
        let mut x = gaussian(n, 100 + seed);
        let y = gaussian(n, 200 + seed);
        if seed == 3 {
            // Shifted data exercises the min terms.
            x.iter_mut().for_each(|v| *v += 1.5);
        }
        for t in DOT_TYPES {
            let vt = vec_dot_type(t);
            let xq = quantize(t, &x);
            let yq = quantize(vt, &y);
            let xd = dequantize(t, &xq, n);
            let yd = dequantize(vt, &yq, n);
            let exact: f64 = xd.iter().zip(&yd).map(|(&a, &b)| a as f64 * b as f64).sum();
            let mag: f64 = xd
                .iter()
                .zip(&yd)
                .map(|(&a, &b)| (a as f64 * b as f64).abs())
                .sum();
            let mut tol = 1e-5 * mag;
            if vt == DType::Q8_1 {
                // q4_1 and q5_1 both keep `m` at byte offset 2 of the block.
                let ts = t.type_size();
                let ys: Vec<BlockQ8_1> = pod_vec(&yq);
                tol += ys
                    .iter()
                    .enumerate()
                    .map(|(b, yb)| {
                        let m = f16::from_le_bytes([xq[b * ts + 2], xq[b * ts + 3]]).to_f32();
                        2f64.powi(-10) * (m as f64 * yb.s.to_f32() as f64).abs()
                    })
                    .sum::<f64>();
            }
            let got = vec_dot(t, n, &xq, &yq) as f64;
            assert!(
                (got - exact).abs() <= tol,
                "{t} seed {seed}: got {got}, exact {exact}, tol {tol:e}"
            );
        }
    }
}

/// ggml's own check: `|vec_dot(q(x), q8(y)) - dot(x, y)| / n` below 0.02
/// (0.04 for q2_K) on its synthetic data.
#[test]
fn dot_products_match_ggml_test_quantize_fns() {
    let n = 32 * 128;
    let x = ggml_test_data(0.0, n, 2.0);
    let y = ggml_test_data(1.0, n, 2.0);
    let exact: f64 = x.iter().zip(&y).map(|(&a, &b)| (a * b) as f64).sum();
    for t in DOT_TYPES {
        let got = vec_dot(t, n, &quantize(t, &x), &quantize(vec_dot_type(t), &y));
        let err = (got - exact as f32).abs() / n as f32;
        let bound = if t == DType::Q2_K { 0.04 } else { 0.02 };
        assert!(err < bound, "{t}: {err} >= {bound}");
    }
}

#[test]
#[should_panic(expected = "not a multiple")]
fn dot_rejects_partial_blocks() {
    let x = [BlockQ8_0::zeroed(); 2];
    vec_dot_q8_0_q8_0(48, &x, &x);
}

// ---------------------------------------------------------------- ggml cross-check

/// Compares against real ggml, bit for bit, when `BACKPLANE_GGML_HARNESS`
/// names a build of `tests/ggml_harness.c` (see that file). Ignored by
/// default since it needs ggml's C sources.
#[test]
#[ignore = "needs BACKPLANE_GGML_HARNESS (a build of tests/ggml_harness.c)"]
fn matches_ggml_bit_for_bit() {
    let harness = std::env::var("BACKPLANE_GGML_HARNESS").expect("BACKPLANE_GGML_HARNESS");
    let n = 1024;
    let mut x = Vec::new();
    let mut rng = StdRng::seed_from_u64(42);
    for pair in 0..12u64 {
        let mut rows = gaussian(2 * n, 1000 + pair);
        match pair {
            0 => rows = ggml_test_data(0.0, 2 * n, 2.0),
            1 => rows.iter_mut().for_each(|v| *v *= 1e-4), // tiny: subnormal f16 scales
            2 => rows.iter_mut().for_each(|v| *v *= 3e3),  // large
            3 => rows.iter_mut().for_each(|v| *v = v.abs() + 0.5), // positive: min terms
            4 => rows.iter_mut().for_each(|v| *v -= 2.0),  // negative offset
            5 => {
                // sparse: zero blocks, constant blocks, single spikes
                for (i, v) in rows.iter_mut().enumerate() {
                    let b = i / 32;
                    if b % 3 == 0 {
                        *v = 0.0;
                    } else if b % 5 == 0 {
                        *v = 0.75;
                    } else if i % 17 != 0 {
                        *v *= 0.01;
                    }
                }
            }
            6 => rows.iter_mut().for_each(|v| *v = (*v * 4.0).round() / 4.0), // many ties
            7 => rows.iter_mut().for_each(|v| *v = v.powi(3)),                // heavy tails
            8 => rows
                .iter_mut()
                .for_each(|v| *v = rng.random_range(-1.0..1.0)),
            9 => rows.iter_mut().for_each(|v| *v = (*v * 8.0).round()), // small integers
            _ => {}
        }
        x.extend(rows);
    }
    let dir = std::env::temp_dir().join(format!("bp-xcheck-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.f32");
    std::fs::write(&input, bytemuck::cast_slice::<f32, u8>(&x)).unwrap();
    let status = std::process::Command::new(harness)
        .arg(&input)
        .arg(n.to_string())
        .arg(&dir)
        .status()
        .unwrap();
    assert!(status.success());
    let read = |pre: &str, t: DType| std::fs::read(dir.join(format!("{pre}_{t}.bin"))).unwrap();

    for t in QUANTIZED {
        let q = quantize(t, &x);
        let want = read("q", t);
        let ts = t.type_size();
        let bad: Vec<usize> = (0..q.len() / ts)
            .filter(|&b| q[b * ts..(b + 1) * ts] != want[b * ts..(b + 1) * ts])
            .collect();
        assert!(
            bad.is_empty(),
            "{t}: {} blocks differ, first {:?}",
            bad.len(),
            &bad[..bad.len().min(8)]
        );
        if t != DType::Q8_1 {
            let y = dequantize(t, &want, x.len());
            let want_y: Vec<f32> = pod_vec(&read("dq", t));
            assert!(
                y.iter()
                    .zip(&want_y)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{t} dequant"
            );
        }
    }
    for t in DOT_TYPES.into_iter().filter(|t| t.is_quantized()) {
        let want: Vec<f32> = pod_vec(&read("dot", t));
        let q = quantize(t, &x);
        let rb = t.row_size(n).unwrap();
        let vt = vec_dot_type(t);
        for (r, w) in want.iter().enumerate() {
            let yq = quantize(vt, &x[(2 * r + 1) * n..(2 * r + 2) * n]);
            let got = vec_dot(t, n, &q[2 * r * rb..(2 * r + 1) * rb], &yq);
            assert_eq!(
                got.to_bits(),
                w.to_bits(),
                "{t} dot row pair {r}: {got} vs {w}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
