// FLASH_ATTN_EXT: out = softmax(scale * Q K^T [softcap] + slope * mask) V,
// with attention sinks and grouped-query broadcast of K/V heads, as ggml.
//
// One workgroup per (block of BQ queries, head, batch). Q is scaled and
// kept in workgroup memory; K and V are streamed through one tile of BK
// rows (K first, then V into the same tile). Per tile:
//   1. scores S = Q K^T (each thread an SQ x SK register block), softcap,
//      mask and ALiBi, written to s_tile;
//   2. one thread per query row: running max, rescale factor alpha,
//      P = exp(S - max) in place, running sum (online softmax);
//   3. O = O * alpha + P V (each thread OQ rows x OD vec4 columns, f32).
// K/V of any supported type are decoded while loading the tile (bindings
// read as u32 words, offsets in bytes). The tile element type TT is
// f32, or the half type when the host needs the room.
//
// SPLIT_KV: the keys are split over workgroups (wid.z = batch * n_split +
// split, each taking `chunk` keys); each writes its unnormalised O rows and
// their (max, sum) to scratch (bound as dbuf) for flash_attn_combine.
//
// Host defines: DK4, DV4 (head sizes / 4), BQ, BK,
// WG_SIZE, TQT x TKT (score thread grid), SQ = BQ / TQT, SK = BK / TKT,
// OQT x ODT (output thread grid), OQ = BQ / OQT, OD = ceil(DV4 / ODT),
// SQK = SQ * SK, OQD = OQ * OD,
// QROW4 / KVROW4 (padded tile rows in vec4), SROW (padded score row),
// Q_TILE_LEN, KV_TILE_LEN, S_TILE_LEN, TT; flags HAS_MASK, HAS_SINKS,
// K_<TYPE>, V_<TYPE>, MASK_F32.

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

#if defined(HAS_MASK) && defined(HAS_SINKS)
#define B_MASK 3
#define B_SINKS 4
#define B_DST 5
#define B_PARAMS 6
#elif defined(HAS_MASK)
#define B_MASK 3
#define B_DST 4
#define B_PARAMS 5
#elif defined(HAS_SINKS)
#define B_SINKS 3
#define B_DST 4
#define B_PARAMS 5
#else
#define B_DST 3
#define B_PARAMS 4
#endif

@group(0) @binding(0) var<storage, read_write> qbuf: array<f32>;
@group(0) @binding(1) var<storage, read_write> kbuf: array<u32>;
@group(0) @binding(2) var<storage, read_write> vbuf: array<u32>;
#ifdef HAS_MASK
@group(0) @binding(B_MASK) var<storage, read_write> mbuf: array<u32>;
#endif
#ifdef HAS_SINKS
@group(0) @binding(B_SINKS) var<storage, read_write> sbuf: array<f32>;
#endif
@group(0) @binding(B_DST) var<storage, read_write> dbuf: array<f32>;
@group(0) @binding(B_PARAMS) var<uniform> p: Params;

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

var<workgroup> q_tile: array<vec4<TT>, Q_TILE_LEN>;
var<workgroup> kv_tile: array<vec4<TT>, KV_TILE_LEN>;
var<workgroup> s_tile: array<f32, S_TILE_LEN>;
var<workgroup> row_max: array<f32, BQ>;
var<workgroup> row_sum: array<f32, BQ>;
var<workgroup> row_alpha: array<f32, BQ>;

// Word `idx` of K (which = 0) or V (which = 1).
fn kv_word(which: u32, idx: u32) -> u32 {
    if (which == 0u) {
        return kbuf[idx];
    }
    return vbuf[idx];
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

#ifdef HAS_MASK
// Mask value of query iq, key j for head h, batch b.
fn mask_at(iq: u32, j: u32, h: u32, b: u32) -> f32 {
    let row = p.m_off + iq * p.m_nb1 + (h % p.m_ne2) * p.m_nb2 + (b % p.m_ne3) * p.m_nb3;
#ifdef MASK_F32
    return bitcast<f32>(mbuf[(row + j * 4u) >> 2u]);
#else
    let byte = row + j * 2u;
    return half_bits((mbuf[byte >> 2u] >> ((byte & 2u) * 8u)) & 0xffffu);
#endif
}
#endif

// ALiBi slope of head h (1 when max_bias is 0), as ggml.
fn alibi_slope(h: u32) -> f32 {
    if (p.max_bias <= 0.0) {
        return 1.0;
    }
    if (h < p.n_head_log2) {
        return pow(p.m0, f32(h + 1u));
    }
    return pow(p.m1, f32(2u * (h - p.n_head_log2) + 1u));
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
    let q0 = wid.x * BQ;
    let h = wid.y;
    let b = wid.z / p.n_split;
    let split = wid.z % p.n_split;
    let kv_begin = split * p.chunk;
    let kv_end = min(p.n_kv, kv_begin + p.chunk);
    let k_head = p.k_off + (h / p.rk2) * p.k_nb2 + (b / p.rk3) * p.k_nb3;
    let v_head = p.v_off + (h / p.rk2) * p.v_nb2 + (b / p.rk3) * p.v_nb3;
    let slope = alibi_slope(h);

    // Q tile, pre-scaled (scale / softcap when softcap is on).
    for (var u = t; u < BQ * DK4; u += WG_SIZE) {
        let i = u / DK4;
        let e = (u % DK4) * 4u;
        let iq = q0 + i;
        var v = vec4<f32>(0.0);
        if (iq < p.n_q) {
            let at = p.q_off + e * p.q_s0 + iq * p.q_s1 + h * p.q_s2 + b * p.q_s3;
            v = vec4<f32>(qbuf[at], qbuf[at + p.q_s0], qbuf[at + 2u * p.q_s0], qbuf[at + 3u * p.q_s0]);
        }
        q_tile[i * QROW4 + e / 4u] = vec4<TT>(v * p.q_scale);
    }
    if (t < BQ) {
        row_max[t] = NEG_INF;
        row_sum[t] = 0.0;
    }

    // Thread positions in the score grid and the output grid.
    let tk = t % TKT;
    let tq = t / TKT;
    let od = t % ODT;
    let oq = t / ODT;

    var acc: array<vec4<f32>, OQD>;
    for (var a = 0u; a < OQD; a++) {
        acc[a] = vec4<f32>(0.0);
    }

    for (var kv0 = kv_begin; kv0 < kv_end; kv0 += BK) {
        // The previous tile's P V is done with kv_tile and s_tile.
        workgroupBarrier();
        for (var u = t; u < BK * DK4; u += WG_SIZE) {
            let j = u / DK4;
            let e = (u % DK4) * 4u;
            var v = vec4<f32>(0.0);
            if (kv0 + j < kv_end) {
                v = load4(0u, K_KIND, k_head + (kv0 + j) * p.k_nb1, e);
            }
            kv_tile[j * KVROW4 + e / 4u] = vec4<TT>(v);
        }
        workgroupBarrier();

        // 1. Scores.
        var s: array<f32, SQK>;
        for (var a = 0u; a < SQK; a++) {
            s[a] = 0.0;
        }
        for (var e4 = 0u; e4 < DK4; e4++) {
            var kv: array<vec4<f32>, SK>;
            for (var c = 0u; c < SK; c++) {
                kv[c] = vec4<f32>(kv_tile[(tk + c * TKT) * KVROW4 + e4]);
            }
            for (var a = 0u; a < SQ; a++) {
                let qv = vec4<f32>(q_tile[(tq + a * TQT) * QROW4 + e4]);
                for (var c = 0u; c < SK; c++) {
                    s[a * SK + c] += dot(qv, kv[c]);
                }
            }
        }
        for (var a = 0u; a < SQ; a++) {
            let i = tq + a * TQT;
            for (var c = 0u; c < SK; c++) {
                let j = tk + c * TKT;
                var x = s[a * SK + c];
                if (p.softcap != 0.0) {
                    x = p.softcap * tanh(clamp(x, -15.0, 15.0));
                }
                if (kv0 + j >= kv_end) {
                    x = NEG_INF;
                }
#ifdef HAS_MASK
                else if (q0 + i < p.n_q) {
                    x += slope * mask_at(q0 + i, kv0 + j, h, b);
                }
#endif
                s_tile[i * SROW + j] = x;
            }
        }
        workgroupBarrier();

        // V tile into the same memory.
        for (var u = t; u < BK * DV4; u += WG_SIZE) {
            let j = u / DV4;
            let e = (u % DV4) * 4u;
            var v = vec4<f32>(0.0);
            if (kv0 + j < kv_end) {
                v = load4(1u, V_KIND, v_head + (kv0 + j) * p.v_nb1, e);
            }
            kv_tile[j * KVROW4 + e / 4u] = vec4<TT>(v);
        }

        // 2. Online softmax, one thread per query row.
        if (t < BQ) {
            let m_old = row_max[t];
            var m = m_old;
            for (var j = 0u; j < BK; j++) {
                m = max(m, s_tile[t * SROW + j]);
            }
            var alpha = 1.0;
            var sum = 0.0;
            if (m == NEG_INF) {
                for (var j = 0u; j < BK; j++) {
                    s_tile[t * SROW + j] = 0.0;
                }
            } else {
                alpha = exp(m_old - m);
                for (var j = 0u; j < BK; j++) {
                    let pj = exp(s_tile[t * SROW + j] - m);
                    s_tile[t * SROW + j] = pj;
                    sum += pj;
                }
            }
            row_max[t] = m;
            row_sum[t] = row_sum[t] * alpha + sum;
            row_alpha[t] = alpha;
        }
        workgroupBarrier();

        // 3. O = O * alpha + P V.
        for (var a = 0u; a < OQ; a++) {
            let alpha = row_alpha[oq + a * OQT];
            for (var c = 0u; c < OD; c++) {
                acc[a * OD + c] *= alpha;
            }
        }
        for (var j = 0u; j < BK; j++) {
            var vv: array<vec4<f32>, OD>;
            for (var c = 0u; c < OD; c++) {
                let col = min(od + c * ODT, DV4 - 1u);
                vv[c] = vec4<f32>(kv_tile[j * KVROW4 + col]);
            }
            for (var a = 0u; a < OQ; a++) {
                let pj = s_tile[(oq + a * OQT) * SROW + j];
                for (var c = 0u; c < OD; c++) {
                    acc[a * OD + c] += pj * vv[c];
                }
            }
        }
    }

    workgroupBarrier();
#ifdef SPLIT_KV
    // Unnormalised rows and their (max, sum) for flash_attn_combine.
    if (t < BQ && q0 + t < p.n_q) {
        let ml = p.ml_off + (split * p.n_rows + (b * p.n_q + q0 + t) * p.n_head + h) * 2u;
        dbuf[ml] = row_max[t];
        dbuf[ml + 1u] = row_sum[t];
    }
    for (var a = 0u; a < OQ; a++) {
        let iq = q0 + oq + a * OQT;
        if (iq >= p.n_q) {
            continue;
        }
        let row = (split * p.n_rows + (b * p.n_q + iq) * p.n_head + h) * (DV4 * 4u);
        for (var c = 0u; c < OD; c++) {
            let col = od + c * ODT;
            if (col < DV4) {
                let o = acc[a * OD + c];
                let at = row + col * 4u;
                dbuf[at] = o.x;
                dbuf[at + 1u] = o.y;
                dbuf[at + 2u] = o.z;
                dbuf[at + 3u] = o.w;
            }
        }
    }
#else
    // Sinks join the denominator; then 1 / sum (0 for an empty row).
    if (t < BQ) {
        let m = row_max[t];
        var l = row_sum[t];
        var alpha = 1.0;
#ifdef HAS_SINKS
        let sink = sbuf[p.s_off + h * p.s_s0];
        let m_new = max(m, sink);
        alpha = exp(m - m_new);
        l = l * alpha + exp(sink - m_new);
#endif
        row_alpha[t] = select(0.0, alpha / l, l > 0.0);
    }
    workgroupBarrier();

    for (var a = 0u; a < OQ; a++) {
        let i = oq + a * OQT;
        let iq = q0 + i;
        if (iq >= p.n_q) {
            continue;
        }
        let f = row_alpha[i];
        let row = p.d_off + h * p.d_s1 + iq * p.d_s2 + b * p.d_s3;
        for (var c = 0u; c < OD; c++) {
            let col = od + c * ODT;
            if (col < DV4) {
                let o = acc[a * OD + c] * f;
                let at = row + col * 4u * p.d_s0;
                dbuf[at] = o.x;
                dbuf[at + p.d_s0] = o.y;
                dbuf[at + 2u * p.d_s0] = o.z;
                dbuf[at + 3u * p.d_s0] = o.w;
            }
        }
    }
#endif
}
