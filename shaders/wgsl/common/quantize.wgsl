// f32 -> ggml's 32-weight block formats (q8_0, q4_0, q4_1, q5_0, q5_1) with
// ggml's reference quantizers (quantize_row_*_ref), bit for bit: same
// operation order, half-precision scales rounded to nearest even.
//
// The includer defines, before `#include "common/quantize"`:
// - exactly one type flag: DST_Q8_0, DST_Q4_0, DST_Q4_1, DST_Q5_0 or
//   DST_Q5_1 (a key's `.ty("DST", ..)` defines it);
// - QUANT_OUT: the name of its `var<private>` array<u32> that blocks are
//   built in, little-endian bytes packed in words. Bytes are OR-ed in, so
//   the includer zeroes the words first, and stores them as it needs to.
//
// It then gets:
// - QK (32, weights per block) and BLOCK_BYTES;
// - `var<private> x: array<f32, QK>`: the weights to quantize;
// - quantize_block(at, one): quantizes x into the BLOCK_BYTES bytes that
//   start at byte `at` of QUANT_OUT; `one` must be 1.0 computed from a
//   run-time value (it keeps products from being fused, see `unfused`);
// - put_byte, put_u16, put_u32 (OR a value's low bytes in at a byte
//   position of QUANT_OUT) and f16_bits (f32 -> f16 bits).

const QK: u32 = 32u;
#ifdef DST_Q8_0
const BLOCK_BYTES: u32 = 34u;
#elif defined(DST_Q4_0)
const BLOCK_BYTES: u32 = 18u;
#elif defined(DST_Q4_1)
const BLOCK_BYTES: u32 = 20u;
#elif defined(DST_Q5_0)
const BLOCK_BYTES: u32 = 22u;
#elif defined(DST_Q5_1)
const BLOCK_BYTES: u32 = 24u;
#else
#error common/quantize.wgsl: unknown destination type
#endif

var<private> x: array<f32, QK>;

fn put_byte(pos: u32, v: u32) {
    QUANT_OUT[pos / 4u] |= (v & 0xffu) << ((pos % 4u) * 8u);
}

fn put_u16(pos: u32, v: u32) {
    put_byte(pos, v);
    put_byte(pos + 1u, v >> 8u);
}

fn put_u32(pos: u32, v: u32) {
    put_u16(pos, v);
    put_u16(pos + 2u, v >> 16u);
}

// f32 -> f16 bits, round to nearest even (as half::f16::from_f32 for every
// value but NaN, which becomes the quiet NaN 0x7e00 with the input's sign,
// as Python's struct 'e' and ggml's scalar fallback give).
fn f16_bits(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    let sign = (b >> 16u) & 0x8000u;
    let abs_bits = b & 0x7fffffffu;
    if (abs_bits > 0x7f800000u) {
        return sign | 0x7e00u;
    }
    let e = i32(abs_bits >> 23u) - 112; // rebias 127 -> 15
    if (e >= 31) {
        return sign | 0x7c00u;
    }
    var m = b & 0x7fffffu;
    var shift = 13u;
    var h = 0u;
    if (e <= 0) {
        if (e < -10) {
            return sign;
        }
        m = m | 0x800000u;
        shift = u32(14 - e);
    } else {
        h = u32(e) << 10u;
    }
    h = h | (m >> shift);
    let rem = m & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u) == 1u)) {
        h = h + 1u; // a carry into the exponent is the right rounding
    }
    return sign | h;
}

// a / b rounded to nearest as C computes it, also where the driver's
// division is approximate (Vulkan allows 2.5 ulp): the exact remainder of
// the quotient (one FMA) corrects it.
fn div_rn(a: f32, b: f32) -> f32 {
    let q = a / b;
    return fma(fma(-q, b, a), 1.0 / b, q);
}

// `d ? 1/d : 0`.
fn inv(d: f32) -> f32 {
    return select(0.0, div_rn(1.0, d), d != 0.0);
}

// 1.0 that the shader compiler cannot know (set by quantize_block from a
// value the caller computes from its parameters).
var<private> q_one: f32;

// `v`, kept from being fused with a following add into an FMA: a
// product rounded on its own is what ggml's C computes, and a fused one
// moves values sitting on a rounding boundary (NVIDIA's drivers contract
// mul + add). A product by an unknown 1.0 may itself be fused with the
// add, but its other factor is then the already rounded `v`.
fn unfused(v: f32) -> f32 {
    return v * q_one;
}

// Round half away from zero (C roundf).
fn round_away(v: f32) -> f32 {
    let t = trunc(v);
    return select(t, t + sign(v), abs(v - t) >= 0.5);
}

// The value of largest magnitude, with its sign (first one on ties).
fn signed_absmax() -> f32 {
    var amax = 0.0;
    var mx = 0.0;
    for (var j = 0u; j < QK; j++) {
        if (amax < abs(x[j])) {
            amax = abs(x[j]);
            mx = x[j];
        }
    }
    return mx;
}

// (min, max) of the block as ggml's loops compute them.
fn min_max() -> vec2<f32> {
    var mn = 3.40282347e38;
    var mx = -3.40282347e38;
    for (var j = 0u; j < QK; j++) {
        if (x[j] < mn) {
            mn = x[j];
        }
        if (x[j] > mx) {
            mx = x[j];
        }
    }
    return vec2<f32>(mn, mx);
}

// Quantizes x into the block starting at byte `at` of QUANT_OUT.
fn quantize_block(at: u32, one: f32) {
    q_one = one;
#ifdef DST_Q8_0
    var amax = 0.0;
    for (var j = 0u; j < QK; j++) {
        amax = max(amax, abs(x[j]));
    }
    let d = div_rn(amax, 127.0);
    let id = inv(d);
    put_u16(at, f16_bits(d));
    for (var j = 0u; j < QK; j++) {
        put_byte(at + 2u + j, u32(i32(round_away(unfused(x[j] * id)))));
    }
#elif defined(DST_Q4_0)
    let d = div_rn(signed_absmax(), -8.0);
    let id = inv(d);
    put_u16(at, f16_bits(d));
    for (var j = 0u; j < QK / 2u; j++) {
        let q0 = u32(min(i32(unfused(x[j] * id) + 8.5), 15));
        let q1 = u32(min(i32(unfused(x[j + QK / 2u] * id) + 8.5), 15));
        put_byte(at + 2u + j, q0 | (q1 << 4u));
    }
#elif defined(DST_Q4_1)
    let mm = min_max();
    let d = div_rn(mm.y - mm.x, 15.0);
    let id = inv(d);
    put_u16(at, f16_bits(d));
    put_u16(at + 2u, f16_bits(mm.x));
    for (var j = 0u; j < QK / 2u; j++) {
        let q0 = u32(min(i32(unfused((x[j] - mm.x) * id) + 0.5), 15));
        let q1 = u32(min(i32(unfused((x[j + QK / 2u] - mm.x) * id) + 0.5), 15));
        put_byte(at + 4u + j, q0 | (q1 << 4u));
    }
#elif defined(DST_Q5_0)
    let d = div_rn(signed_absmax(), -16.0);
    let id = inv(d);
    put_u16(at, f16_bits(d));
    var qh = 0u;
    for (var j = 0u; j < QK / 2u; j++) {
        let q0 = u32(min(i32(unfused(x[j] * id) + 16.5), 31));
        let q1 = u32(min(i32(unfused(x[j + QK / 2u] * id) + 16.5), 31));
        put_byte(at + 6u + j, (q0 & 0x0fu) | ((q1 & 0x0fu) << 4u));
        qh |= ((q0 & 0x10u) >> 4u) << j;
        qh |= ((q1 & 0x10u) >> 4u) << (j + QK / 2u);
    }
    put_u32(at + 2u, qh);
#elif defined(DST_Q5_1)
    let mm = min_max();
    let d = div_rn(mm.y - mm.x, 31.0);
    let id = inv(d);
    put_u16(at, f16_bits(d));
    put_u16(at + 2u, f16_bits(mm.x));
    var qh = 0u;
    for (var j = 0u; j < QK / 2u; j++) {
        // ggml does not clamp here: the top value rounds to exactly 31 (and
        // only the low 5 bits are used).
        let q0 = u32(unfused((x[j] - mm.x) * id) + 0.5);
        let q1 = u32(unfused((x[j + QK / 2u] - mm.x) * id) + 0.5);
        put_byte(at + 8u + j, (q0 & 0x0fu) | ((q1 & 0x0fu) << 4u));
        qh |= ((q0 & 0x10u) >> 4u) << j;
        qh |= ((q1 & 0x10u) >> 4u) << (j + QK / 2u);
    }
    put_u32(at + 4u, qh);
#endif
}
