// CPY from f32 to a legacy quantized type (DST_Q8_0, DST_Q4_0, DST_Q4_1,
// DST_Q5_0, DST_Q5_1) with ggml's reference quantizers, bit for bit.
// Element k of src0 in logical order goes to element k of the contiguous
// destination. Blocks of 18, 22 or 34 bytes straddle u32 words, so each
// invocation builds a group of blocks that ends on a word boundary in a
// private word array and stores whole words; a group cut short by the end
// of the tensor merges its last half word with the bytes that follow.

#include "common/index"

struct Params {
    n_blocks: u32,
    ne00: u32, ne01: u32, ne02: u32,
    off0: u32, s00: u32, s01: u32, s02: u32, s03: u32,
    offd_words: u32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

const QK: u32 = 32u;
#ifdef DST_Q8_0
const BLOCK_BYTES: u32 = 34u;
const BLOCKS_PER_GROUP: u32 = 2u;
#elif defined(DST_Q4_0)
const BLOCK_BYTES: u32 = 18u;
const BLOCKS_PER_GROUP: u32 = 2u;
#elif defined(DST_Q4_1)
const BLOCK_BYTES: u32 = 20u;
const BLOCKS_PER_GROUP: u32 = 1u;
#elif defined(DST_Q5_0)
const BLOCK_BYTES: u32 = 22u;
const BLOCKS_PER_GROUP: u32 = 2u;
#elif defined(DST_Q5_1)
const BLOCK_BYTES: u32 = 24u;
const BLOCKS_PER_GROUP: u32 = 1u;
#else
#error cpy_quant.wgsl: unknown destination type
#endif
const GROUP_WORDS: u32 = BLOCK_BYTES * BLOCKS_PER_GROUP / 4u;

var<private> words: array<u32, GROUP_WORDS>;
var<private> x: array<f32, QK>;

fn put_byte(pos: u32, v: u32) {
    words[pos / 4u] |= (v & 0xffu) << ((pos % 4u) * 8u);
}

fn put_u16(pos: u32, v: u32) {
    put_byte(pos, v);
    put_byte(pos + 1u, v >> 8u);
}

fn put_u32(pos: u32, v: u32) {
    put_u16(pos, v);
    put_u16(pos + 2u, v >> 16u);
}

// f32 -> f16 bits, round to nearest even (as half::f16::from_f32).
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

fn inv(d: f32) -> f32 {
    return select(0.0, 1.0 / d, d != 0.0);
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

// Quantizes x into the block starting at byte `at` of `words`.
fn quantize_block(at: u32) {
#ifdef DST_Q8_0
    var amax = 0.0;
    for (var j = 0u; j < QK; j++) {
        amax = max(amax, abs(x[j]));
    }
    let d = amax / 127.0;
    let id = inv(d);
    put_u16(at, f16_bits(d));
    for (var j = 0u; j < QK; j++) {
        put_byte(at + 2u + j, u32(i32(round_away(x[j] * id))));
    }
#elif defined(DST_Q4_0)
    let d = signed_absmax() / -8.0;
    let id = inv(d);
    put_u16(at, f16_bits(d));
    for (var j = 0u; j < QK / 2u; j++) {
        let q0 = u32(min(i32(x[j] * id + 8.5), 15));
        let q1 = u32(min(i32(x[j + QK / 2u] * id + 8.5), 15));
        put_byte(at + 2u + j, q0 | (q1 << 4u));
    }
#elif defined(DST_Q4_1)
    let mm = min_max();
    let d = (mm.y - mm.x) / 15.0;
    let id = inv(d);
    put_u16(at, f16_bits(d));
    put_u16(at + 2u, f16_bits(mm.x));
    for (var j = 0u; j < QK / 2u; j++) {
        let q0 = u32(min(i32((x[j] - mm.x) * id + 0.5), 15));
        let q1 = u32(min(i32((x[j + QK / 2u] - mm.x) * id + 0.5), 15));
        put_byte(at + 4u + j, q0 | (q1 << 4u));
    }
#elif defined(DST_Q5_0)
    let d = signed_absmax() / -16.0;
    let id = inv(d);
    put_u16(at, f16_bits(d));
    var qh = 0u;
    for (var j = 0u; j < QK / 2u; j++) {
        let q0 = u32(min(i32(x[j] * id + 16.5), 31));
        let q1 = u32(min(i32(x[j + QK / 2u] * id + 16.5), 31));
        put_byte(at + 6u + j, (q0 & 0x0fu) | ((q1 & 0x0fu) << 4u));
        qh |= ((q0 & 0x10u) >> 4u) << j;
        qh |= ((q1 & 0x10u) >> 4u) << (j + QK / 2u);
    }
    put_u32(at + 2u, qh);
#elif defined(DST_Q5_1)
    let mm = min_max();
    let d = (mm.y - mm.x) / 31.0;
    let id = inv(d);
    put_u16(at, f16_bits(d));
    put_u16(at + 2u, f16_bits(mm.x));
    var qh = 0u;
    for (var j = 0u; j < QK / 2u; j++) {
        // ggml does not clamp here: the top value rounds to exactly 31.
        let q0 = u32((x[j] - mm.x) * id + 0.5);
        let q1 = u32((x[j + QK / 2u] - mm.x) * id + 0.5);
        put_byte(at + 8u + j, (q0 & 0x0fu) | ((q1 & 0x0fu) << 4u));
        qh |= ((q0 & 0x10u) >> 4u) << j;
        qh |= ((q1 & 0x10u) >> 4u) << (j + QK / 2u);
    }
    put_u32(at + 4u, qh);
#endif
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let group = linear_index(wid, nwg, lid, WG_SIZE);
    let first = group * BLOCKS_PER_GROUP;
    if (first >= p.n_blocks) {
        return;
    }
    let n = min(BLOCKS_PER_GROUP, p.n_blocks - first);
    for (var w = 0u; w < GROUP_WORDS; w++) {
        words[w] = 0u;
    }
    for (var bi = 0u; bi < n; bi++) {
        for (var j = 0u; j < QK; j++) {
            let c = unravel((first + bi) * QK + j, p.ne00, p.ne01, p.ne02);
            x[j] = src0[p.off0 + c.x * p.s00 + c.y * p.s01 + c.z * p.s02 + c.w * p.s03];
        }
        quantize_block(bi * BLOCK_BYTES);
    }
    let bytes = n * BLOCK_BYTES;
    let base = p.offd_words + group * GROUP_WORDS;
    for (var w = 0u; w < bytes / 4u; w++) {
        dst[base + w] = words[w];
    }
    if (bytes % 4u != 0u) {
        // Only the low half word is ours; keep what follows the tensor.
        let w = bytes / 4u;
        dst[base + w] = (dst[base + w] & 0xffff0000u) | (words[w] & 0xffffu);
    }
}
