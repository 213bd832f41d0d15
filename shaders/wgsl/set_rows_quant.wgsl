// SET_ROWS into the 32-weight block formats (DST_Q4_0, DST_Q4_1, DST_Q5_0,
// DST_Q5_1, DST_Q8_0): one invocation quantizes one block of a source row
// exactly as ggml's quantize_row_*_ref (same operation order, half-precision scales
// rounded to nearest even) and writes its bytes. Blocks are not word
// aligned, so the destination is bound as atomic words: whole words are
// stored, shared ones have their bytes cleared and set with atomicAnd and
// atomicOr (neighbours only touch their own bytes). Destination offset and
// strides (off_d, sd1..sd3) are in bytes; indices as in set_rows.wgsl.

#include "common/index"
#include "common/set_rows_index"

@group(0) @binding(0) var<storage, read_write> src0: array<f32>;
@group(0) @binding(1) var<storage, read_write> idx: array<SRC1_TYPE>;
@group(0) @binding(2) var<storage, read_write> dst: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> flag: array<atomic<u32>>;
@group(0) @binding(4) var<uniform> p: Params;

const QK: u32 = 32u;

#ifdef DST_Q4_0
const BLOCK_BYTES: u32 = 18u;
#elif defined(DST_Q4_1)
const BLOCK_BYTES: u32 = 20u;
#elif defined(DST_Q5_0)
const BLOCK_BYTES: u32 = 22u;
#elif defined(DST_Q5_1)
const BLOCK_BYTES: u32 = 24u;
#else
const BLOCK_BYTES: u32 = 34u;
#endif

// The block being built, little-endian bytes packed in words.
var<private> blk: array<u32, 9>;
// The source block.
var<private> x: array<f32, 32>;

fn put_byte(k: u32, v: u32) {
    blk[k / 4u] = blk[k / 4u] | ((v & 0xffu) << ((k % 4u) * 8u));
}

fn put_u16(k: u32, v: u32) {
    put_byte(k, v);
    put_byte(k + 1u, v >> 8u);
}

// f32 -> IEEE half bits, round to nearest even (as the half crate).
fn half_bits(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    let sign = (b >> 16u) & 0x8000u;
    let a = b & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return sign | 0x7e00u | ((a >> 13u) & 0x3ffu);
    }
    if (a >= 0x477ff000u) {
        return sign | 0x7c00u;
    }
    if (a >= 0x38800000u) {
        let m = a - 0x38000000u;
        return sign | ((m + 0xfffu + ((m >> 13u) & 1u)) >> 13u);
    }
    let e = a >> 23u;
    if (e < 102u) {
        return sign;
    }
    let mant = (a & 0x7fffffu) | 0x800000u;
    let shift = 126u - e;
    let q = mant >> shift;
    let rest = mant & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    var r = q;
    if (rest > half || (rest == half && (q & 1u) == 1u)) {
        r = r + 1u;
    }
    return sign | r;
}

// `d ? 1/d : 0`.
fn inv(d: f32) -> f32 {
    if (d != 0.0) {
        return 1.0 / d;
    }
    return 0.0;
}

// C roundf: halfway cases away from zero.
fn round_away(v: f32) -> f32 {
    let t = trunc(v);
    if (abs(v - t) >= 0.5) {
        return t + sign(v);
    }
    return t;
}

// The signed value of largest magnitude, the first one on ties.
fn signed_absmax() -> f32 {
    var amax = 0.0;
    var m = 0.0;
    for (var j = 0u; j < QK; j++) {
        if (amax < abs(x[j])) {
            amax = abs(x[j]);
            m = x[j];
        }
    }
    return m;
}

// (min, max) of the block as ggml's loops compute them.
fn min_max() -> vec2<f32> {
    var lo = 3.4028235e38;
    var hi = -3.4028235e38;
    for (var j = 0u; j < QK; j++) {
        if (x[j] < lo) {
            lo = x[j];
        }
        if (x[j] > hi) {
            hi = x[j];
        }
    }
    return vec2<f32>(lo, hi);
}

fn quantize() {
#ifdef DST_Q8_0
    var amax = 0.0;
    for (var j = 0u; j < QK; j++) {
        amax = max(amax, abs(x[j]));
    }
    let d = amax / 127.0;
    let id = inv(d);
    put_u16(0u, half_bits(d));
    for (var j = 0u; j < QK; j++) {
        put_byte(2u + j, bitcast<u32>(i32(round_away(x[j] * id))));
    }
#elif defined(DST_Q4_0)
    let d = signed_absmax() / -8.0;
    let id = inv(d);
    put_u16(0u, half_bits(d));
    for (var j = 0u; j < QK / 2u; j++) {
        let q0 = min(u32(x[j] * id + 8.5), 15u);
        let q1 = min(u32(x[j + QK / 2u] * id + 8.5), 15u);
        put_byte(2u + j, q0 | (q1 << 4u));
    }
#elif defined(DST_Q4_1)
    let mm = min_max();
    let d = (mm.y - mm.x) / 15.0;
    let id = inv(d);
    put_u16(0u, half_bits(d));
    put_u16(2u, half_bits(mm.x));
    for (var j = 0u; j < QK / 2u; j++) {
        let q0 = min(u32((x[j] - mm.x) * id + 0.5), 15u);
        let q1 = min(u32((x[j + QK / 2u] - mm.x) * id + 0.5), 15u);
        put_byte(4u + j, q0 | (q1 << 4u));
    }
#elif defined(DST_Q5_0)
    let d = signed_absmax() / -16.0;
    let id = inv(d);
    put_u16(0u, half_bits(d));
    var qh = 0u;
    for (var j = 0u; j < QK / 2u; j++) {
        let q0 = min(u32(x[j] * id + 16.5), 31u);
        let q1 = min(u32(x[j + QK / 2u] * id + 16.5), 31u);
        put_byte(6u + j, (q0 & 0x0fu) | ((q1 & 0x0fu) << 4u));
        qh = qh | (((q0 & 0x10u) >> 4u) << j);
        qh = qh | (((q1 & 0x10u) >> 4u) << (j + QK / 2u));
    }
    put_u16(2u, qh);
    put_u16(4u, qh >> 16u);
#else
    let mm = min_max();
    let d = (mm.y - mm.x) / 31.0;
    let id = inv(d);
    put_u16(0u, half_bits(d));
    put_u16(2u, half_bits(mm.x));
    var qh = 0u;
    for (var j = 0u; j < QK / 2u; j++) {
        // ggml does not clamp here; the u8 conversion keeps the low bits.
        let q0 = u32((x[j] - mm.x) * id + 0.5) & 0xffu;
        let q1 = u32((x[j + QK / 2u] - mm.x) * id + 0.5) & 0xffu;
        put_byte(8u + j, (q0 & 0x0fu) | ((q1 & 0x0fu) << 4u));
        qh = qh | (((q0 & 0x10u) >> 4u) << j);
        qh = qh | (((q1 & 0x10u) >> 4u) << (j + QK / 2u));
    }
    put_u16(4u, qh);
    put_u16(6u, qh >> 16u);
#endif
}

// Writes the block's bytes at byte address `at` of dst.
fn store_block(at: u32) {
    let first = at / 4u;
    let last = (at + BLOCK_BYTES - 1u) / 4u;
    for (var w = first; w <= last; w++) {
        var mask = 0u;
        var bits = 0u;
        for (var lane = 0u; lane < 4u; lane++) {
            let g = w * 4u + lane;
            if (g >= at && g < at + BLOCK_BYTES) {
                let k = g - at;
                let b = (blk[k / 4u] >> ((k % 4u) * 8u)) & 0xffu;
                mask = mask | (0xffu << (lane * 8u));
                bits = bits | (b << (lane * 8u));
            }
        }
        if (mask == 0xffffffffu) {
            atomicStore(&dst[w], bits);
        } else {
            atomicAnd(&dst[w], ~mask);
            atomicOr(&dst[w], bits);
        }
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let blocks = p.ne0 / QK;
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= blocks * p.n_rows * p.ne2 * p.ne3) {
        return;
    }
    let c = unravel(i, blocks, p.n_rows, p.ne2);
    let r = dst_row(c.y, c.z, c.w);
    if (r.y == 0u) {
        report(r.x);
        return;
    }
    let s = p.off_s + c.y * p.ss1 + c.z * p.ss2 + c.w * p.ss3 + c.x * QK * p.ss0;
    for (var j = 0u; j < QK; j++) {
        x[j] = src0[s + j * p.ss0];
    }
    for (var k = 0u; k < 9u; k++) {
        blk[k] = 0u;
    }
    quantize();
    store_block(p.off_d + r.x * p.sd1 + c.z * p.sd2 + c.w * p.sd3 + c.x * BLOCK_BYTES);
}
