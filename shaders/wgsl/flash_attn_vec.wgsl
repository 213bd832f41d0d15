// FLASH_ATTN_EXT for one query per workgroup (decode), on devices without
// cooperative matrices: same semantics, bindings and parameters as
// flash_attn with BQ = 1 (mask, ALiBi, softcap, sinks, grouped-query K/V,
// every K/V type, split KV), for value head sizes up to 4 * WG_SIZE.
//
// One workgroup per (query, head, batch [x split]). The keys stream in
// tiles of WG_SIZE, one key per invocation, read straight from K/V (no
// staging through workgroup memory):
//   1. invocation t computes the score of key kv0 + t over the whole head
//      (its K row's loads are independent, so they are all in flight at
//      once), then softcap, mask and ALiBi;
//   2. every invocation reads the tile's scores to find its maximum, so
//      the running maximum m is the same in all of them; P = exp(S - m);
//      each invocation keeps its own share of the running sum;
//   3. O += P V: the invocations form NG = WG_SIZE / DV4 groups, each
//      owning every vec4 column of O for the keys g, g + NG, ...; the
//      invocations of a group read neighbouring columns of one V row.
// Two barriers per tile. At the end the sums and the groups' O columns
// are added through workgroup memory, and the row is written (normalised,
// or unnormalised with its (max, sum) for flash_attn_combine).
//
// Host defines: DK4, DV4 (head sizes / 4), WG_SIZE (keys per tile),
// NG = WG_SIZE / DV4 (at least 1); K_<TYPE>, V_<TYPE>, HAS_MASK,
// HAS_SINKS, MASK_F32, SPLIT_KV as flash_attn_common.
// QUANTIZE (not with SPLIT_KV; DV a multiple of 32, dst contiguous): the
// row is also written as the integer mat-vec's quantized activations
// (ggml's q8_1 runs, as mul_mat_quantize.wgsl makes them from dst) for
// the MUL_MAT that reads dst next.

#include "flash_attn_common"
#ifdef QUANTIZE
#include "common/q8_1_run"
#endif

var<workgroup> q_tile: array<vec4<f32>, DK4>;
var<workgroup> s_tile: array<f32, WG_SIZE>;
var<workgroup> p_tile: array<f32, WG_SIZE>;
var<workgroup> o_part: array<vec4<f32>, NG * DV4>;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
    let iq = wid.x;
    let span = span_of(wid.y, wid.z);
    let slope = alibi_slope(span.h);

    // Q, pre-scaled (scale / softcap when softcap is on); the grid has
    // one workgroup per query, so iq < n_q.
    for (var u = t; u < DK4; u += WG_SIZE) {
        let at = p.q_off + 4u * u * p.q_s0 + iq * p.q_s1 + span.h * p.q_s2 + span.b * p.q_s3;
        let v = vec4<f32>(qbuf[at], qbuf[at + p.q_s0], qbuf[at + 2u * p.q_s0], qbuf[at + 3u * p.q_s0]);
        q_tile[u] = v * p.q_scale;
    }
    workgroupBarrier();

    // This invocation's vec4 column of O and its key group (g < NG: the
    // invocations past NG * DV4 take no part in P V).
    let col = t % DV4;
    let g = t / DV4;
    var acc = vec4<f32>(0.0);
    var m = NEG_INF;
    var l = 0.0;

    for (var kv0 = span.kv_begin; kv0 < span.kv_end; kv0 += WG_SIZE) {
        // 1. This invocation's score; -inf past the keys.
        let j = kv0 + t;
        var x = NEG_INF;
        if (j < span.kv_end) {
            let row = span.k_head + j * p.k_nb1;
            var s = 0.0;
            for (var e4 = 0u; e4 < DK4; e4++) {
                s += dot(q_tile[e4], load4(0u, K_KIND, row, 4u * e4));
            }
            if (p.softcap != 0.0) {
                s = p.softcap * tanh(clamp(s, -15.0, 15.0));
            }
#ifdef HAS_MASK
            s += slope * mask_at(iq, j, span.h, span.b);
#endif
            x = s;
        }
        // The previous tile's P V is done with p_tile (barrier below),
        // and everyone has read the previous scores.
        s_tile[t] = x;
        workgroupBarrier();

        // 2. The tile's maximum (the same in every invocation), P, and
        // this invocation's share of the sum.
        var m_tile = NEG_INF;
        for (var i = 0u; i < WG_SIZE; i++) {
            m_tile = max(m_tile, s_tile[i]);
        }
        let m_new = max(m, m_tile);
        var alpha = 1.0;
        var pj = 0.0;
        if (m_new != NEG_INF) {
            alpha = exp(m - m_new);
            if (x != NEG_INF) {
                pj = exp(x - m_new);
            }
        }
        m = m_new;
        l = l * alpha + pj;
        acc *= alpha;
        p_tile[t] = pj;
        workgroupBarrier();

        // 3. O += P V over this group's keys.
        if (g < NG) {
            for (var i = g; i < WG_SIZE && kv0 + i < span.kv_end; i += NG) {
                let row = span.v_head + (kv0 + i) * p.v_nb1;
                acc += p_tile[i] * load4(1u, V_KIND, row, 4u * col);
            }
        }
    }

    // The sums and the groups' columns added up through workgroup memory
    // (s_tile and o_part; every tile's reads are behind the barrier).
    workgroupBarrier();
    s_tile[t] = l;
    if (g < NG) {
        o_part[g * DV4 + col] = acc;
    }
    workgroupBarrier();
    var sum = 0.0;
    for (var i = 0u; i < WG_SIZE; i++) {
        sum += s_tile[i];
    }
#ifdef QUANTIZE
    // The row normalised, written, and quantized for the next MUL_MAT:
    // every invocation reaches the run's barriers.
    let live = t < DV4;
    var o = vec4<f32>(0.0);
    if (live) {
        for (var k = 0u; k < NG; k++) {
            o += o_part[k * DV4 + t];
        }
        let f = row_factor(m, sum, span.h);
        o = vec4<f32>(o.x * f, o.y * f, o.z * f, o.w * f);
        let at = p.d_off + span.h * p.d_s1 + iq * p.d_s2 + span.b * p.d_s3 + t * 4u * p.d_s0;
        dbuf[at] = o.x;
        dbuf[at + p.d_s0] = o.y;
        dbuf[at + 2u * p.d_s0] = o.z;
        dbuf[at + 3u * p.d_s0] = o.w;
    }
    let r = q8_1_part(o, t);
    // Run of the row's values 4t .. 4t + 3 in dst's element order.
    let run = ((span.b * p.n_q + iq) * p.n_head + span.h) * (DV4 / 8u) + t / 8u;
    if (live) {
        q8_1_store(run, t % 8u, r);
    }
#else
    if (t >= DV4) {
        return;
    }
    var o = vec4<f32>(0.0);
    for (var k = 0u; k < NG; k++) {
        o += o_part[k * DV4 + t];
    }
#ifdef SPLIT_KV
    // Unnormalised row and its (max, sum) for flash_attn_combine.
    if (t == 0u) {
        store_row_stats(span.split, span.b, iq, span.h, m, sum);
    }
    let at = (span.split * p.n_rows + (span.b * p.n_q + iq) * p.n_head + span.h) * (DV4 * 4u) + t * 4u;
    dbuf[at] = o.x;
    dbuf[at + 1u] = o.y;
    dbuf[at + 2u] = o.z;
    dbuf[at + 3u] = o.w;
#else
    let f = row_factor(m, sum, span.h);
    let at = p.d_off + span.h * p.d_s1 + iq * p.d_s2 + span.b * p.d_s3 + t * 4u * p.d_s0;
    dbuf[at] = o.x * f;
    dbuf[at + p.d_s0] = o.y * f;
    dbuf[at + 2u * p.d_s0] = o.z * f;
    dbuf[at + 3u * p.d_s0] = o.w * f;
#endif
#endif
}
