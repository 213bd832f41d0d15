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

#include "flash_attn_common"

var<workgroup> q_tile: array<vec4<TT>, Q_TILE_LEN>;
var<workgroup> kv_tile: array<vec4<TT>, KV_TILE_LEN>;
var<workgroup> s_tile: array<f32, S_TILE_LEN>;
var<workgroup> row_max: array<f32, BQ>;
var<workgroup> row_sum: array<f32, BQ>;
var<workgroup> row_alpha: array<f32, BQ>;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
    let q0 = wid.x * BQ;
    let span = span_of(wid.y, wid.z);
    let slope = alibi_slope(span.h);

    // Q tile, pre-scaled (scale / softcap when softcap is on).
    for (var u = t; u < BQ * DK4; u += WG_SIZE) {
        let i = u / DK4;
        let e = (u % DK4) * 4u;
        let iq = q0 + i;
        var v = vec4<f32>(0.0);
        if (iq < p.n_q) {
            let at = p.q_off + e * p.q_s0 + iq * p.q_s1 + span.h * p.q_s2 + span.b * p.q_s3;
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

    for (var kv0 = span.kv_begin; kv0 < span.kv_end; kv0 += BK) {
        // The previous tile's P V is done with kv_tile and s_tile.
        workgroupBarrier();
        for (var u = t; u < BK * DK4; u += WG_SIZE) {
            let j = u / DK4;
            let e = (u % DK4) * 4u;
            var v = vec4<f32>(0.0);
            if (kv0 + j < span.kv_end) {
                v = load4(0u, K_KIND, span.k_head + (kv0 + j) * p.k_nb1, e);
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
                if (kv0 + j >= span.kv_end) {
                    x = NEG_INF;
                }
#ifdef HAS_MASK
                else if (q0 + i < p.n_q) {
                    x += slope * mask_at(q0 + i, kv0 + j, span.h, span.b);
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
            if (kv0 + j < span.kv_end) {
                v = load4(1u, V_KIND, span.v_head + (kv0 + j) * p.v_nb1, e);
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
        store_row_stats(span.split, span.b, q0 + t, span.h, row_max[t], row_sum[t]);
    }
    for (var a = 0u; a < OQ; a++) {
        let iq = q0 + oq + a * OQT;
        if (iq >= p.n_q) {
            continue;
        }
        let row = (span.split * p.n_rows + (span.b * p.n_q + iq) * p.n_head + span.h) * (DV4 * 4u);
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
    if (t < BQ) {
        row_alpha[t] = row_factor(row_max[t], row_sum[t], span.h);
    }
    workgroupBarrier();

    for (var a = 0u; a < OQ; a++) {
        let i = oq + a * OQT;
        let iq = q0 + i;
        if (iq >= p.n_q) {
            continue;
        }
        let f = row_alpha[i];
        let row = p.d_off + span.h * p.d_s1 + iq * p.d_s2 + span.b * p.d_s3;
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
