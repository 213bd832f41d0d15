// Dequantization of ggml's block formats, read from a storage binding of
// u32 words with byte offsets (blocks are 2-byte aligned at best: q4_0 is
// 18 bytes, q6_K 210).
//
// The includer defines, before `#include "common/quant"`:
// - QUANT_BUF: the name of the `array<u32>` binding to read, or of an
//   `array<vec4<u32>>` one when QUANT_BUF_VEC4 is defined too (the host
//   then guarantees 16-byte aligned blocks; see quant_dot's q4_K);
// - exactly one type flag: QUANT_Q4_0, QUANT_Q4_1, QUANT_Q5_0, QUANT_Q5_1,
//   QUANT_Q8_0, QUANT_Q2_K, QUANT_Q3_K, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K.
//
// It then gets, for the chosen type (all offsets in bytes, every read stays
// inside the block it is asked about, so a kernel whose block offsets are
// in bounds never reads past its tensor):
// - QUANT_BLOCK_K (weights per block), QUANT_BLOCK_BYTES, QUANT_UNITS;
// - q_run(block, j): the 4 weights j..j+3 of a block (j % 4 == 0);
// - q_unit(block, u): the 16 weights of unit u (0..QUANT_UNITS) of a block
//   as 4 runs of 4, the grouping that reads each byte once, and
//   q_unit_k(u, r): the offset in the block of run r of unit u;
// - for q4_0 and q4_K, which the split layout stores as two regions
//   (backends/webgpu/src/split.rs): QUANT_HEAD_BYTES, QUANT_QS_BYTES, and
//   q_run_at(qs, head, j) / q_unit_at(qs, head, u), the same reads of the
//   block whose quants start at byte `qs` and whose head at byte `head`;
//   q_split_head(quants): where in the heads the head of the block
//   `quants` bytes into the quants lies.
// Scales are decoded with unpack2x16float, so none of this needs the
// SHADER_F16 feature.

// ---- byte-addressed reads ------------------------------------------------

// Word `w` of the binding.
fn q_word(w: u32) -> u32 {
#ifdef QUANT_BUF_VEC4
    return QUANT_BUF[w >> 2u][w & 3u];
#else
    return QUANT_BUF[w];
#endif
}

// 4 bytes at `byte` (any alignment; reads the second word only when the
// bytes straddle two).
fn qbuf_u32(byte: u32) -> u32 {
    let w = byte >> 2u;
    let s = (byte & 3u) * 8u;
    let lo = q_word(w);
    if (s == 0u) {
        return lo;
    }
    return (lo >> s) | (q_word(w + 1u) << (32u - s));
}

// 8 bytes at `byte` (any alignment).
fn qbuf_u32x2(byte: u32) -> vec2<u32> {
    let w = byte >> 2u;
    let s = (byte & 3u) * 8u;
    let a = q_word(w);
    let b = q_word(w + 1u);
    if (s == 0u) {
        return vec2<u32>(a, b);
    }
    let c = q_word(w + 2u);
    return vec2<u32>((a >> s) | (b << (32u - s)), (b >> s) | (c << (32u - s)));
}

// 16 bytes at `byte` (any alignment).
fn qbuf_u32x4(byte: u32) -> vec4<u32> {
    let w = byte >> 2u;
    let s = (byte & 3u) * 8u;
    let a = q_word(w);
    let b = q_word(w + 1u);
    let c = q_word(w + 2u);
    let d = q_word(w + 3u);
    if (s == 0u) {
        return vec4<u32>(a, b, c, d);
    }
    let e = q_word(w + 4u);
    let t = 32u - s;
    return vec4<u32>((a >> s) | (b << t), (b >> s) | (c << t), (c >> s) | (d << t), (d >> s) | (e << t));
}

// The byte at `byte`.
fn qbuf_u8(byte: u32) -> u32 {
    return (q_word(byte >> 2u) >> ((byte & 3u) * 8u)) & 0xFFu;
}

// The IEEE half at `byte` (even), as f32.
fn qbuf_half(byte: u32) -> f32 {
    return unpack2x16float(q_word(byte >> 2u) >> ((byte & 2u) * 8u)).x;
}

// ---- bit helpers -----------------------------------------------------------

// The four bytes of `w` as f32.
fn q_bytes(w: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8(w));
}

// The four signed bytes of `w` as f32.
fn q_sbytes(w: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xI8(w));
}

// Low nibbles of the four bytes of `w`, one per byte.
fn q_lo4(w: u32) -> u32 {
    return w & 0x0F0F0F0Fu;
}

// High nibbles of the four bytes of `w`, one per byte.
fn q_hi4(w: u32) -> u32 {
    return (w >> 4u) & 0x0F0F0F0Fu;
}

// Bits 0..3 of `h` moved to bit 0 of bytes 0..3.
fn q_spread4(h: u32) -> u32 {
    return ((h & 0xFu) * 0x00204081u) & 0x01010101u;
}

// Byte `i` (0..11) of a 12-byte K-quant scale array held in 3 words.
fn q_scale_byte(s: vec3<u32>, i: u32) -> u32 {
    return (s[i >> 2u] >> ((i & 3u) * 8u)) & 0xFFu;
}

// The 12 scale bytes at `byte`.
fn q_scales12(byte: u32) -> vec3<u32> {
    let a = qbuf_u32x2(byte);
    return vec3<u32>(a.x, a.y, qbuf_u32(byte + 8u));
}

// q4_K / q5_K: 6-bit scale (x) and min (y) of group `j` (0..7)
// (ggml get_scale_min_k4).
// Without a branch, so invocations with groups on either side of 4 do not
// diverge: b0, b4, b8 are bytes j % 4, + 4, + 8.
fn q_scale_min_k4(s: vec3<u32>, j: u32) -> vec2<f32> {
    let i = j & 3u;
    let b0 = q_scale_byte(s, i);
    let b4 = q_scale_byte(s, i + 4u);
    let b8 = q_scale_byte(s, i + 8u);
    let low = vec2<u32>(b0, b4) & vec2<u32>(63u);
    let high = vec2<u32>(b8 & 0xFu, b8 >> 4u) | ((vec2<u32>(b0, b4) >> vec2<u32>(6u)) << vec2<u32>(4u));
    return vec2<f32>(select(high, low, j < 4u));
}

// q3_K: signed 6-bit scale of group `j` (0..15), minus 32.
fn q3k_scale(s: vec3<u32>, j: u32) -> f32 {
    var low: u32;
    if (j < 8u) {
        low = q_scale_byte(s, j) & 0xFu;
    } else {
        low = q_scale_byte(s, j - 8u) >> 4u;
    }
    let high = (q_scale_byte(s, 8u + (j & 3u)) >> (2u * (j >> 2u))) & 3u;
    return f32(i32(low | (high << 4u)) - 32);
}

// A signed byte as f32.
fn q_i8(b: u32) -> f32 {
    return f32((i32(b) << 24u) >> 24u);
}

// ---- legacy formats: 32 weights per block, units of 16 -------------------
// A unit h (0, 1) holds qs bytes 8h..8h+7: runs at 8h, 8h+4 (low nibbles)
// and 16+8h, 20+8h (high nibbles). q8_0 units are 16 contiguous weights.

#if defined(QUANT_Q4_0) || defined(QUANT_Q4_1) || defined(QUANT_Q5_0) || defined(QUANT_Q5_1)
const QUANT_BLOCK_K: u32 = 32u;
const QUANT_UNITS: u32 = 2u;

fn q_unit_k(u: u32, r: u32) -> u32 {
    return 8u * u + 4u * (r & 1u) + 16u * (r >> 1u);
}
#endif

#ifdef QUANT_Q4_0
const QUANT_BLOCK_BYTES: u32 = 18u;

// Bytes of a block's head (its scale) and quants, which ggml stores in
// that order and the split layout in two regions.
const QUANT_HEAD_BYTES: u32 = 2u;
const QUANT_QS_BYTES: u32 = 16u;

fn q_run(block: u32, j: u32) -> vec4<f32> {
    return q_run_at(block + QUANT_HEAD_BYTES, block, j);
}

// Run j of the block whose quants start at byte `qs` and whose head at
// byte `head` (ggml's blocks, or the split layout).
fn q_run_at(qs: u32, head: u32, j: u32) -> vec4<f32> {
    let d = qbuf_half(head);
    let w = qbuf_u32(qs + (j & 15u));
    let q = select(q_lo4(w), q_hi4(w), j >= 16u);
    return (q_bytes(q) - 8.0) * d;
}

fn q_unit(block: u32, u: u32) -> array<vec4<f32>, 4> {
    return q_unit_at(block + QUANT_HEAD_BYTES, block, u);
}

// Unit u of the block whose quants start at byte `qs` and whose head at
// byte `head` (ggml's blocks, or the split layout).
fn q_unit_at(qs: u32, head: u32, u: u32) -> array<vec4<f32>, 4> {
    let q = qbuf_u32x2(qs + 8u * u);
    let d = qbuf_half(head);
    return array<vec4<f32>, 4>(
        (q_bytes(q_lo4(q.x)) - 8.0) * d,
        (q_bytes(q_lo4(q.y)) - 8.0) * d,
        (q_bytes(q_hi4(q.x)) - 8.0) * d,
        (q_bytes(q_hi4(q.y)) - 8.0) * d);
}
#endif

#ifdef QUANT_Q4_1
const QUANT_BLOCK_BYTES: u32 = 20u;

fn q_run(block: u32, j: u32) -> vec4<f32> {
    let d = qbuf_half(block);
    let m = qbuf_half(block + 2u);
    let w = qbuf_u32(block + 4u + (j & 15u));
    let q = select(q_lo4(w), q_hi4(w), j >= 16u);
    return q_bytes(q) * d + m;
}

fn q_unit(block: u32, u: u32) -> array<vec4<f32>, 4> {
    let d = qbuf_half(block);
    let m = qbuf_half(block + 2u);
    let q = qbuf_u32x2(block + 4u + 8u * u);
    return array<vec4<f32>, 4>(
        q_bytes(q_lo4(q.x)) * d + m,
        q_bytes(q_lo4(q.y)) * d + m,
        q_bytes(q_hi4(q.x)) * d + m,
        q_bytes(q_hi4(q.y)) * d + m);
}
#endif

#if defined(QUANT_Q5_0) || defined(QUANT_Q5_1)
// The 5-bit quants of weights j..j+3 (j % 4 == 0): nibbles from `w` (low
// nibbles for j < 16), fifth bits from `qh`.
fn q5_quants(w: u32, qh: u32, j: u32) -> vec4<f32> {
    let nib = select(q_lo4(w), q_hi4(w), j >= 16u);
    return q_bytes(nib | (q_spread4(qh >> j) << 4u));
}
#endif

#ifdef QUANT_Q5_0
const QUANT_BLOCK_BYTES: u32 = 22u;

fn q_run(block: u32, j: u32) -> vec4<f32> {
    let d = qbuf_half(block);
    let qh = qbuf_u32(block + 2u);
    let w = qbuf_u32(block + 6u + (j & 15u));
    return (q5_quants(w, qh, j) - 16.0) * d;
}

fn q_unit(block: u32, u: u32) -> array<vec4<f32>, 4> {
    let d = qbuf_half(block);
    let qh = qbuf_u32(block + 2u);
    let q = qbuf_u32x2(block + 6u + 8u * u);
    return array<vec4<f32>, 4>(
        (q5_quants(q.x, qh, 8u * u) - 16.0) * d,
        (q5_quants(q.y, qh, 8u * u + 4u) - 16.0) * d,
        (q5_quants(q.x, qh, 16u + 8u * u) - 16.0) * d,
        (q5_quants(q.y, qh, 20u + 8u * u) - 16.0) * d);
}
#endif

#ifdef QUANT_Q5_1
const QUANT_BLOCK_BYTES: u32 = 24u;

fn q_run(block: u32, j: u32) -> vec4<f32> {
    let d = qbuf_half(block);
    let m = qbuf_half(block + 2u);
    let qh = qbuf_u32(block + 4u);
    let w = qbuf_u32(block + 8u + (j & 15u));
    return q5_quants(w, qh, j) * d + m;
}

fn q_unit(block: u32, u: u32) -> array<vec4<f32>, 4> {
    let d = qbuf_half(block);
    let m = qbuf_half(block + 2u);
    let qh = qbuf_u32(block + 4u);
    let q = qbuf_u32x2(block + 8u + 8u * u);
    return array<vec4<f32>, 4>(
        q5_quants(q.x, qh, 8u * u) * d + m,
        q5_quants(q.y, qh, 8u * u + 4u) * d + m,
        q5_quants(q.x, qh, 16u + 8u * u) * d + m,
        q5_quants(q.y, qh, 20u + 8u * u) * d + m);
}
#endif

#ifdef QUANT_Q8_0
const QUANT_BLOCK_K: u32 = 32u;
const QUANT_BLOCK_BYTES: u32 = 34u;
const QUANT_UNITS: u32 = 2u;

fn q_unit_k(u: u32, r: u32) -> u32 {
    return 16u * u + 4u * r;
}

fn q_run(block: u32, j: u32) -> vec4<f32> {
    return q_sbytes(qbuf_u32(block + 2u + j)) * qbuf_half(block);
}

fn q_unit(block: u32, u: u32) -> array<vec4<f32>, 4> {
    let d = qbuf_half(block);
    let q = qbuf_u32x4(block + 2u + 16u * u);
    return array<vec4<f32>, 4>(q_sbytes(q.x) * d, q_sbytes(q.y) * d, q_sbytes(q.z) * d, q_sbytes(q.w) * d);
}
#endif

// ---- K-quants: 256 weights per super-block, 16 units of 16 ---------------

#if defined(QUANT_Q2_K) || defined(QUANT_Q3_K) || defined(QUANT_Q4_K) || defined(QUANT_Q5_K) || defined(QUANT_Q6_K)
const QUANT_BLOCK_K: u32 = 256u;
const QUANT_UNITS: u32 = 16u;
#endif

#if defined(QUANT_Q2_K) || defined(QUANT_Q3_K)
// q2_K / q3_K: weight k of a block lives in byte 32 * (k / 128) + k % 32
// of qs, at bit shift 2 * ((k % 128) / 32). Unit u = (n = u / 8, h, g)
// takes qs bytes 32n + 16h + 4g ..+3 at the four shifts: run r is at
// 128n + 32r + 16h + 4g, with group scale 8n + 2r + h.
fn q_unit_k(u: u32, r: u32) -> u32 {
    return 128u * (u >> 3u) + 32u * r + 4u * (u & 7u);
}
#endif

#ifdef QUANT_Q2_K
const QUANT_BLOCK_BYTES: u32 = 84u;

fn q_run(block: u32, j: u32) -> vec4<f32> {
    let n = j >> 7u;
    let s = (j >> 5u) & 3u;
    let i = j & 31u;
    let q = (qbuf_u32(block + 16u + 32u * n + i) >> (2u * s)) & 0x03030303u;
    let sc = qbuf_u8(block + 8u * n + 2u * s + (i >> 4u));
    let d = qbuf_half(block + 80u) * f32(sc & 0xFu);
    let m = qbuf_half(block + 82u) * f32(sc >> 4u);
    return q_bytes(q) * d - m;
}

fn q_unit(block: u32, u: u32) -> array<vec4<f32>, 4> {
    let n = u >> 3u;
    let h = (u >> 2u) & 1u;
    let w = qbuf_u32(block + 16u + 32u * n + 4u * (u & 7u));
    let sc = qbuf_u32x2(block + 8u * n);
    let dm = unpack2x16float(qbuf_u32(block + 80u));
    var out: array<vec4<f32>, 4>;
    for (var r = 0u; r < 4u; r++) {
        let b = 2u * r + h;
        let s = (select(sc.x, sc.y, b >= 4u) >> ((b & 3u) * 8u)) & 0xFFu;
        out[r] = q_bytes((w >> (2u * r)) & 0x03030303u) * (dm.x * f32(s & 0xFu)) - dm.y * f32(s >> 4u);
    }
    return out;
}
#endif

#ifdef QUANT_Q3_K
const QUANT_BLOCK_BYTES: u32 = 110u;

// Quants (q - 4 where the hmask bit is clear) of 4 weights: `w` holds their
// low-bit bytes, `hm` their hmask bytes, at shift/bit index `s` (0..7).
fn q3k_quants(w: u32, hm: u32, shift: u32, bit: u32) -> vec4<f32> {
    let low = q_bytes((w >> shift) & 0x03030303u);
    let high = q_bytes((hm >> bit) & 0x01010101u);
    return low - 4.0 + 4.0 * high;
}

fn q_run(block: u32, j: u32) -> vec4<f32> {
    let n = j >> 7u;
    let s = (j >> 5u) & 3u;
    let i = j & 31u;
    let w = qbuf_u32(block + 32u + 32u * n + i);
    let hm = qbuf_u32(block + i);
    let sc = q3k_scale(q_scales12(block + 96u), 8u * n + 2u * s + (i >> 4u));
    return q3k_quants(w, hm, 2u * s, 4u * n + s) * (qbuf_half(block + 108u) * sc);
}

fn q_unit(block: u32, u: u32) -> array<vec4<f32>, 4> {
    let n = u >> 3u;
    let h = (u >> 2u) & 1u;
    let i = 4u * (u & 7u);
    let w = qbuf_u32(block + 32u + 32u * n + i);
    let hm = qbuf_u32(block + i);
    let scales = q_scales12(block + 96u);
    let d = qbuf_half(block + 108u);
    var out: array<vec4<f32>, 4>;
    for (var r = 0u; r < 4u; r++) {
        out[r] = q3k_quants(w, hm, 2u * r, 4u * n + r) * (d * q3k_scale(scales, 8u * n + 2u * r + h));
    }
    return out;
}
#endif

#if defined(QUANT_Q4_K) || defined(QUANT_Q5_K)
// q4_K / q5_K: weight k lives in qs byte 32 * (k / 64) + k % 32, low nibble
// when k % 64 < 32, with scale/min group 2 * (k / 64) + (k % 64 >= 32).
// Unit u = (p = u / 4, g) takes qs bytes 32p + 8g ..+7: runs at 64p + 8g,
// +4 (low nibbles), 64p + 32 + 8g, +4 (high nibbles).
fn q_unit_k(u: u32, r: u32) -> u32 {
    return 64u * (u >> 2u) + 8u * (u & 3u) + 4u * (r & 1u) + 32u * (r >> 1u);
}
#endif

#ifdef QUANT_Q4_K
const QUANT_BLOCK_BYTES: u32 = 144u;

// Bytes of a block's head (d, dmin and the 12 scale bytes) and quants,
// which ggml stores in that order and the split layout in two regions.
const QUANT_HEAD_BYTES: u32 = 16u;
const QUANT_QS_BYTES: u32 = 128u;

fn q_run(block: u32, j: u32) -> vec4<f32> {
    return q_run_at(block + QUANT_HEAD_BYTES, block, j);
}

// Run j of the block whose quants start at byte `qs` and whose head at
// byte `head` (ggml's blocks, or the split layout).
fn q_run_at(qs: u32, head: u32, j: u32) -> vec4<f32> {
    let p = j >> 6u;
    let upper = (j & 63u) >= 32u;
    let w = qbuf_u32(qs + 32u * p + (j & 31u));
    let q = select(q_lo4(w), q_hi4(w), upper);
    let dm = unpack2x16float(qbuf_u32(head));
    let sm = q_scale_min_k4(q_scales12(head + 4u), 2u * p + select(0u, 1u, upper));
    return q_bytes(q) * (dm.x * sm.x) - dm.y * sm.y;
}

fn q_unit(block: u32, u: u32) -> array<vec4<f32>, 4> {
    return q_unit_at(block + QUANT_HEAD_BYTES, block, u);
}

// Unit u of the block whose quants start at byte `qs` and whose head at
// byte `head` (ggml's blocks, or the split layout).
fn q_unit_at(qs: u32, head: u32, u: u32) -> array<vec4<f32>, 4> {
    let p = u >> 2u;
    let q = qbuf_u32x2(qs + 32u * p + 8u * (u & 3u));
    let dm = unpack2x16float(qbuf_u32(head));
    let scales = q_scales12(head + 4u);
    let s0 = q_scale_min_k4(scales, 2u * p);
    let s1 = q_scale_min_k4(scales, 2u * p + 1u);
    let d0 = dm.x * s0.x;
    let m0 = dm.y * s0.y;
    let d1 = dm.x * s1.x;
    let m1 = dm.y * s1.y;
    return array<vec4<f32>, 4>(
        q_bytes(q_lo4(q.x)) * d0 - m0,
        q_bytes(q_lo4(q.y)) * d0 - m0,
        q_bytes(q_hi4(q.x)) * d1 - m1,
        q_bytes(q_hi4(q.y)) * d1 - m1);
}
#endif

#ifdef QUANT_Q5_K
const QUANT_BLOCK_BYTES: u32 = 176u;

fn q_run(block: u32, j: u32) -> vec4<f32> {
    let p = j >> 6u;
    let upper = (j & 63u) >= 32u;
    let i = j & 31u;
    let w = qbuf_u32(block + 48u + 32u * p + i);
    let group = 2u * p + select(0u, 1u, upper);
    let hb = (qbuf_u32(block + 16u + i) >> group) & 0x01010101u;
    let q = select(q_lo4(w), q_hi4(w), upper) | (hb << 4u);
    let dm = unpack2x16float(qbuf_u32(block));
    let sm = q_scale_min_k4(q_scales12(block + 4u), group);
    return q_bytes(q) * (dm.x * sm.x) - dm.y * sm.y;
}

fn q_unit(block: u32, u: u32) -> array<vec4<f32>, 4> {
    let p = u >> 2u;
    let g = u & 3u;
    let q = qbuf_u32x2(block + 48u + 32u * p + 8u * g);
    let qh = qbuf_u32x2(block + 16u + 8u * g);
    let dm = unpack2x16float(qbuf_u32(block));
    let scales = q_scales12(block + 4u);
    let s0 = q_scale_min_k4(scales, 2u * p);
    let s1 = q_scale_min_k4(scales, 2u * p + 1u);
    let d0 = dm.x * s0.x;
    let m0 = dm.y * s0.y;
    let d1 = dm.x * s1.x;
    let m1 = dm.y * s1.y;
    let b0 = 2u * p;
    let b1 = b0 + 1u;
    return array<vec4<f32>, 4>(
        q_bytes(q_lo4(q.x) | (((qh.x >> b0) & 0x01010101u) << 4u)) * d0 - m0,
        q_bytes(q_lo4(q.y) | (((qh.y >> b0) & 0x01010101u) << 4u)) * d0 - m0,
        q_bytes(q_hi4(q.x) | (((qh.x >> b1) & 0x01010101u) << 4u)) * d1 - m1,
        q_bytes(q_hi4(q.y) | (((qh.y >> b1) & 0x01010101u) << 4u)) * d1 - m1);
}
#endif

#ifdef QUANT_Q6_K
const QUANT_BLOCK_BYTES: u32 = 210u;

// q6_K: in half h = k / 128, weight k with i = k % 32 and quarter
// c = (k % 128) / 32 takes the low (c < 2) or high nibble of ql byte
// 64h + 32 * (c & 1) + i, bits 2c..2c+1 of qh byte 32h + i, and scale
// 8h + 2c + i / 16. Unit u = (h = u / 8, g) takes i = 4g..4g+3 at the four
// quarters: run r is at 128h + 32r + 4g.
fn q_unit_k(u: u32, r: u32) -> u32 {
    return 128u * (u >> 3u) + 32u * r + 4u * (u & 7u);
}

// Quants (q - 32) of 4 weights of quarter `c`.
fn q6k_quants(ql: u32, qh: u32, c: u32) -> vec4<f32> {
    let nib = select(q_lo4(ql), q_hi4(ql), c >= 2u);
    return q_bytes(nib | (((qh >> (2u * c)) & 0x03030303u) << 4u)) - 32.0;
}

fn q_run(block: u32, j: u32) -> vec4<f32> {
    let h = j >> 7u;
    let c = (j >> 5u) & 3u;
    let i = j & 31u;
    let ql = qbuf_u32(block + 64u * h + 32u * (c & 1u) + i);
    let qh = qbuf_u32(block + 128u + 32u * h + i);
    let sc = q_i8(qbuf_u8(block + 192u + 8u * h + 2u * c + (i >> 4u)));
    return q6k_quants(ql, qh, c) * (qbuf_half(block + 208u) * sc);
}

fn q_unit(block: u32, u: u32) -> array<vec4<f32>, 4> {
    let h = u >> 3u;
    let i = 4u * (u & 7u);
    let ql0 = qbuf_u32(block + 64u * h + i);
    let ql1 = qbuf_u32(block + 64u * h + 32u + i);
    let qh = qbuf_u32(block + 128u + 32u * h + i);
    let sc = qbuf_u32x2(block + 192u + 8u * h);
    let d = qbuf_half(block + 208u);
    let second16 = i >> 4u;
    var out: array<vec4<f32>, 4>;
    for (var c = 0u; c < 4u; c++) {
        let b = 2u * c + second16;
        let s = q_i8((select(sc.x, sc.y, b >= 4u) >> ((b & 3u) * 8u)) & 0xFFu);
        out[c] = q6k_quants(select(ql0, ql1, (c & 1u) == 1u), qh, c) * (d * s);
    }
    return out;
}
#endif

#if defined(QUANT_Q4_0) || defined(QUANT_Q4_K)
// The split layout: the byte offset, from the first head, of the head of
// the block whose quants start `quants` bytes after the first quants (a
// whole number of blocks).
fn q_split_head(quants: u32) -> u32 {
    return quants / QUANT_QS_BYTES * QUANT_HEAD_BYTES;
}
#endif
