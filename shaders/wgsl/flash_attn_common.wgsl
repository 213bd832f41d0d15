// Shared by flash_attn and flash_attn_coopmat: the parameter block, the
// bindings (Q f32, K and V as u32 words, optional mask and sinks, dst or
// the split-KV scratch), K/V decoding of every supported type, the mask
// and the ALiBi slope (common/alibi). Needs the host defines K_<TYPE>,
// V_<TYPE>, HAS_MASK, HAS_SINKS, MASK_F32.

#include "common/alibi"

struct Params {
    n_q: u32, n_kv: u32, n_head: u32, rk2: u32, rk3: u32,
    q_off: u32, q_s0: u32, q_s1: u32, q_s2: u32, q_s3: u32,
    k_off: u32, k_nb1: u32, k_nb2: u32, k_nb3: u32,
    v_off: u32, v_nb1: u32, v_nb2: u32, v_nb3: u32,
    m_off: u32, m_nb1: u32, m_nb2: u32, m_nb3: u32, m_ne2: u32, m_ne3: u32,
    s_off: u32, s_s0: u32,
    d_off: u32, d_s0: u32, d_s1: u32, d_s2: u32, d_s3: u32,
    q_scale: f32, softcap: f32, max_bias: f32, m0: f32, m1: f32, n_head_log2: u32,
    n_split: u32, chunk: u32, n_rows: u32, ml_off: u32,
}

// B_NEXT: the first binding after dst (the parameters, or with QUANTIZE
// the quantized copy and then the parameters).
#if defined(HAS_MASK) && defined(HAS_SINKS)
#define B_MASK 3
#define B_SINKS 4
#define B_DST 5
#define B_NEXT 6
#define B_NEXT2 7
#elif defined(HAS_MASK)
#define B_MASK 3
#define B_DST 4
#define B_NEXT 5
#define B_NEXT2 6
#elif defined(HAS_SINKS)
#define B_SINKS 3
#define B_DST 4
#define B_NEXT 5
#define B_NEXT2 6
#else
#define B_DST 3
#define B_NEXT 4
#define B_NEXT2 5
#endif

@group(0) @binding(0) var<storage, read_write> qbuf: array<f32>;
// f16 K/V on 16-byte rows (KV_RAW_F16_X8, flash_attn_coopmat) are read
// 16 bytes at a time.
#ifdef KV_RAW_F16_X8
@group(0) @binding(1) var<storage, read_write> kbuf: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> vbuf: array<vec4<u32>>;
#else
@group(0) @binding(1) var<storage, read_write> kbuf: array<u32>;
@group(0) @binding(2) var<storage, read_write> vbuf: array<u32>;
#endif
#ifdef HAS_MASK
@group(0) @binding(B_MASK) var<storage, read_write> mbuf: array<u32>;
#endif
#ifdef HAS_SINKS
@group(0) @binding(B_SINKS) var<storage, read_write> sbuf: array<f32>;
#endif
@group(0) @binding(B_DST) var<storage, read_write> dbuf: array<f32>;
#ifdef QUANTIZE
@group(0) @binding(B_NEXT) var<storage, read_write> buf_q: array<u32>;
@group(0) @binding(B_NEXT2) var<uniform> p: Params;
#else
@group(0) @binding(B_NEXT) var<uniform> p: Params;
#endif

// Element kinds of K and V.
const KIND_F32: u32 = 0u;
const KIND_HALF: u32 = 1u;
const KIND_BF16: u32 = 2u;
const KIND_Q4_0: u32 = 3u;
const KIND_Q4_1: u32 = 4u;
const KIND_Q5_0: u32 = 5u;
const KIND_Q5_1: u32 = 6u;
const KIND_Q8_0: u32 = 7u;

#if defined(K_F16)
const K_KIND: u32 = KIND_HALF;
#elif defined(K_BF16)
const K_KIND: u32 = KIND_BF16;
#elif defined(K_Q4_0)
const K_KIND: u32 = KIND_Q4_0;
#elif defined(K_Q4_1)
const K_KIND: u32 = KIND_Q4_1;
#elif defined(K_Q5_0)
const K_KIND: u32 = KIND_Q5_0;
#elif defined(K_Q5_1)
const K_KIND: u32 = KIND_Q5_1;
#elif defined(K_Q8_0)
const K_KIND: u32 = KIND_Q8_0;
#else
const K_KIND: u32 = KIND_F32;
#endif

#if defined(V_F16)
const V_KIND: u32 = KIND_HALF;
#elif defined(V_BF16)
const V_KIND: u32 = KIND_BF16;
#elif defined(V_Q4_0)
const V_KIND: u32 = KIND_Q4_0;
#elif defined(V_Q4_1)
const V_KIND: u32 = KIND_Q4_1;
#elif defined(V_Q5_0)
const V_KIND: u32 = KIND_Q5_0;
#elif defined(V_Q5_1)
const V_KIND: u32 = KIND_Q5_1;
#elif defined(V_Q8_0)
const V_KIND: u32 = KIND_Q8_0;
#else
const V_KIND: u32 = KIND_F32;
#endif

// Stands for -inf: a row whose maximum is still this has no key yet.
const NEG_INF: f32 = -3.0e38;

// Word `idx` of K (which = 0) or V (which = 1).
fn kv_word(which: u32, idx: u32) -> u32 {
#ifdef KV_RAW_F16_X8
    if (which == 0u) {
        return kbuf[idx >> 2u][idx & 3u];
    }
    return vbuf[idx >> 2u][idx & 3u];
#else
    if (which == 0u) {
        return kbuf[idx];
    }
    return vbuf[idx];
#endif
}

// The 16-bit value at 2-aligned byte `byte`.
fn kv_u16(which: u32, byte: u32) -> u32 {
    return (kv_word(which, byte >> 2u) >> ((byte & 2u) * 8u)) & 0xffffu;
}

// The 32 bits at 2-aligned byte `byte`.
fn kv_u32(which: u32, byte: u32) -> u32 {
    if ((byte & 3u) == 0u) {
        return kv_word(which, byte >> 2u);
    }
    return kv_u16(which, byte) | (kv_u16(which, byte + 2u) << 16u);
}

fn half_bits(bits: u32) -> f32 {
    return unpack2x16float(bits).x;
}

// Four 4-bit quants of a q4/q5 block: elements i..i+3 (i % 4 == 0) of the
// block whose nibble bytes start at `qs`.
fn nibbles4(which: u32, qs: u32, i: u32) -> vec4<u32> {
    let w = kv_u32(which, qs + (i & 15u));
    let n = (w >> select(0u, 4u, i >= 16u)) & 0x0f0f0f0fu;
    return vec4<u32>(n & 0xffu, (n >> 8u) & 0xffu, (n >> 16u) & 0xffu, n >> 24u);
}

// Fifth bits of elements i..i+3 from the block's qh word at `qh`, as 16s.
fn high4(which: u32, qh: u32, i: u32) -> vec4<u32> {
    let h = kv_u32(which, qh) >> i;
    return vec4<u32>(h & 1u, (h >> 1u) & 1u, (h >> 2u) & 1u, (h >> 3u) & 1u) << vec4<u32>(4u);
}

// Elements e..e+3 (e % 4 == 0) of the K or V row starting at byte `row`.
fn load4(which: u32, kind: u32, row: u32, e: u32) -> vec4<f32> {
    if (kind == KIND_F32) {
        let w = (row >> 2u) + e;
        return vec4<f32>(bitcast<f32>(kv_word(which, w)), bitcast<f32>(kv_word(which, w + 1u)),
                         bitcast<f32>(kv_word(which, w + 2u)), bitcast<f32>(kv_word(which, w + 3u)));
    }
    if (kind == KIND_HALF) {
        let b = row + e * 2u;
        return vec4<f32>(unpack2x16float(kv_u32(which, b)), unpack2x16float(kv_u32(which, b + 4u)));
    }
    if (kind == KIND_BF16) {
        let b = row + e * 2u;
        let lo = kv_u32(which, b);
        let hi = kv_u32(which, b + 4u);
        return vec4<f32>(bitcast<f32>(lo << 16u), bitcast<f32>(lo & 0xffff0000u),
                         bitcast<f32>(hi << 16u), bitcast<f32>(hi & 0xffff0000u));
    }
    let i = e & 31u;
    if (kind == KIND_Q8_0) {
        let blk = row + (e >> 5u) * 34u;
        let w = bitcast<i32>(kv_u32(which, blk + 2u + i));
        let q = vec4<i32>(extractBits(w, 0u, 8u), extractBits(w, 8u, 8u),
                          extractBits(w, 16u, 8u), extractBits(w, 24u, 8u));
        return vec4<f32>(q) * half_bits(kv_u16(which, blk));
    }
    if (kind == KIND_Q4_0) {
        let blk = row + (e >> 5u) * 18u;
        let q = nibbles4(which, blk + 2u, i);
        return (vec4<f32>(q) - 8.0) * half_bits(kv_u16(which, blk));
    }
    if (kind == KIND_Q4_1) {
        let blk = row + (e >> 5u) * 20u;
        let q = nibbles4(which, blk + 4u, i);
        return vec4<f32>(q) * half_bits(kv_u16(which, blk)) + half_bits(kv_u16(which, blk + 2u));
    }
    if (kind == KIND_Q5_0) {
        let blk = row + (e >> 5u) * 22u;
        let q = nibbles4(which, blk + 6u, i) | high4(which, blk + 2u, i);
        return (vec4<f32>(q) - 16.0) * half_bits(kv_u16(which, blk));
    }
    // q5_1
    let blk = row + (e >> 5u) * 24u;
    let q = nibbles4(which, blk + 8u, i) | high4(which, blk + 4u, i);
    return vec4<f32>(q) * half_bits(kv_u16(which, blk)) + half_bits(kv_u16(which, blk + 2u));
}

// What one attention workgroup takes, from its first query head `h` and
// its grid z (batch * n_split + split): batch b, keys kv_begin..kv_end of
// its split, and the bytes where the K and V heads of head h start.
struct Span {
    h: u32,
    b: u32,
    split: u32,
    kv_begin: u32,
    kv_end: u32,
    k_head: u32,
    v_head: u32,
}

fn span_of(h: u32, z: u32) -> Span {
    let b = z / p.n_split;
    let split = z % p.n_split;
    let kv_begin = split * p.chunk;
    let kv_end = min(p.n_kv, kv_begin + p.chunk);
    let k_head = p.k_off + (h / p.rk2) * p.k_nb2 + (b / p.rk3) * p.k_nb3;
    let v_head = p.v_off + (h / p.rk2) * p.v_nb2 + (b / p.rk3) * p.v_nb3;
    return Span(h, b, split, kv_begin, kv_end, k_head, v_head);
}

#ifdef HAS_MASK
#ifdef MASK_F32
// Bytes per mask value.
const MASK_SIZE: u32 = 4u;
#else
const MASK_SIZE: u32 = 2u;
#endif

// Byte of the mask value of query iq, key j for head h, batch b.
fn mask_byte(iq: u32, j: u32, h: u32, b: u32) -> u32 {
    let row = p.m_off + iq * p.m_nb1 + (h % p.m_ne2) * p.m_nb2 + (b % p.m_ne3) * p.m_nb3;
    return row + j * MASK_SIZE;
}

// The mask value at byte `byte` (from mask_byte), given the word holding
// it (only the byte's position in its word matters).
fn mask_value(w: u32, byte: u32) -> f32 {
#ifdef MASK_F32
    return bitcast<f32>(w);
#else
    return half_bits((w >> ((byte & 2u) * 8u)) & 0xffffu);
#endif
}

// Mask value of query iq, key j for head h, batch b.
fn mask_at(iq: u32, j: u32, h: u32, b: u32) -> f32 {
    let byte = mask_byte(iq, j, h, b);
    return mask_value(mbuf[byte >> 2u], byte);
}
#endif

#ifdef SPLIT_KV
// Stores the (max, sum) pair of query row iq, head h, batch b of this
// split, for flash_attn_combine.
fn store_row_stats(split: u32, b: u32, iq: u32, h: u32, m: f32, l: f32) {
    let ml = p.ml_off + (split * p.n_rows + (b * p.n_q + iq) * p.n_head + h) * 2u;
    dbuf[ml] = m;
    dbuf[ml + 1u] = l;
}
#else
// The factor a finished row (maximum m, sum l) of head h is multiplied
// by: the sink joins the denominator, then 1 / sum (0 for an empty row).
fn row_factor(m: f32, l_in: f32, h: u32) -> f32 {
    var l = l_in;
    var alpha = 1.0;
#ifdef HAS_SINKS
    let sink = sbuf[p.s_off + h * p.s_s0];
    let m_new = max(m, sink);
    alpha = exp(m - m_new);
    l = l * alpha + exp(sink - m_new);
#endif
    return select(0.0, alpha / l, l > 0.0);
}
#endif
