// FLASH_ATTN_EXT on cooperative matrices (16x16x16, half inputs, f32
// accumulation): same semantics, bindings and parameters as flash_attn
// (mask, ALiBi, softcap, sinks, grouped-query K/V, every K/V type, split
// KV), for head sizes up to 256.
//
// One workgroup of 4 subgroups per (block of BQ = 32 query rows, head,
// batch [x split]); with few queries, the rows may hold QROWS queries of
// each of BQ / QROWS heads that share a K/V head (row_query, row_head).
// Q is scaled, staged as half through the K/V tile
// and held by each subgroup as matrices for its 16 query rows; K
// and V stream through one half tile of BK = 32 rows (decoded from any
// type while loading), head dimensions zero-padded to DKP / DVP
// (multiples of 16). Per tile:
//   1. S = Q K^T: subgroup s computes the 16 x 16 block (queries
//      16 * (s % 2), keys 16 * (s / 2)) and stores it to s_tile;
//   2. softcap, mask, ALiBi and the online softmax, four invocations per
//      query row (subgroup shuffles); P as half to p_tile; V replaces K;
//   3. O += P V: subgroup s owns query block s % 2 and every other 16
//      columns of DVP from s / 2, as accumulators kept in registers.
// The accumulators cannot be scaled per row in place, so the running
// maximum a row's exponentials use only moves when a tile's maximum
// exceeds it by more than RESCALE_SLACK (or on the row's first key):
// then the subgroups owning that row round-trip their accumulators
// through their scratch block (in s_tile, whose scores are read by then)
// to rescale them. Exponentials stay below e^RESCALE_SLACK, well inside
// half range; O and the sum use the same maximum, so the
// result is exact up to rounding. The end divides by the sum (and adds
// the sink) through that block, or writes the unnormalised rows and their
// (max, sum) for flash_attn_combine (SPLIT_KV).
//
// Bounds (built without runtime checks): every storage access is guarded
// by the query, key and head-dimension bounds as in flash_attn; matrix
// loads read only rows < BQ / BK and columns < DKP / DVP of tiles padded
// past them; stores to dst go element by element under the same guards.
//
// Host defines: DK4, DV4 (head sizes / 4), DKP, DVP, QPITCH, KVPITCH,
// QROWS, WG_SIZE = 4 * 32, O1 .. O7 for each further output block a
// subgroup owns beyond the first (ceil(DVP / 32) in all), Q1 .. Q15 for
// each further 16 columns of Q (DKP / 16 in all), KV_RAW_F16 when
// K and V are f16 with rows on 4-byte boundaries, and KV_RAW_F16_X8 as
// well when on 16-byte boundaries with head sizes multiples of 8,
// KV_RAW_Q8_0 / KV_RAW_Q4_0 when both are q8_0 / q4_0; flags as
// flash_attn_common. EMULATE_COOPMAT replaces the matrix calls by plain
// code with the same tile layouts (each invocation of a subgroup owning
// fixed elements of a 16 x 16 block), so conformance checks the rest of
// the kernel on any device with f16 and subgroups.

#include "flash_attn_common"

const BQ: u32 = 32u;
// Keys per tile (pv_block takes its P as two 16-key blocks).
const BK: u32 = 32u;
// Subgroups per workgroup, and invocations per subgroup.
const NSG: u32 = 4u;
const SGS: u32 = WG_SIZE / NSG;
// Row pitches of the score and probability tiles.
const SPITCH: u32 = BK + 4u;
const PPITCH: u32 = BK + 8u;
// Output blocks of 16 columns per row block.
const DV_BLOCKS: u32 = DVP / 16u;
// How far a tile's maximum may exceed the one in use before it moves.
const RESCALE_SLACK: f32 = 8.0;

// Row i of the workgroup's BQ rows is query q0 + i % QROWS of head
// h0 + i / QROWS: QROWS = BQ (one head) unless the host packs the query
// heads that share a K/V head into one workgroup (decode with grouped
// query attention reads each K/V tile once for all of them).
fn row_query(q0: u32, i: u32) -> u32 {
    return q0 + i % QROWS;
}

fn row_head(h0: u32, i: u32) -> u32 {
    return h0 + i / QROWS;
}

#ifdef EMULATE_COOPMAT
// Emulated, Q stays here; the real kernel keeps it in matrix registers
// (staged through kv_tile once), which keeps its workgroup memory small
// enough for two workgroups per multiprocessor on an H200 (see the host).
var<workgroup> q_tile: array<f16, BQ * QPITCH>;
const Q_PITCH: u32 = QPITCH;
#else
const Q_PITCH: u32 = KVPITCH;
#endif
var<workgroup> kv_tile: array<f16, BK * KVPITCH>;
// The scores; after the softmax has read them, one 16 x 16 f32 block per
// subgroup (row-major at 256 * subgroup) for rescaling and output.
var<workgroup> s_tile: array<f32, BQ * SPITCH>;
const_assert BQ * SPITCH >= NSG * 256u;
var<workgroup> p_tile: array<f16, BQ * PPITCH>;
// Per query row: the maximum the exponentials use, their sum, and this
// tile's rescale factor (1 when the maximum stayed).
var<workgroup> row_max: array<f32, BQ>;
var<workgroup> row_sum: array<f32, BQ>;
var<workgroup> row_alpha: array<f32, BQ>;

// Position (row, column) in a 16 x 16 block of element u of invocation
// `lane` when a block round-trips through its scratch block (row-major
// there).
fn block_pos(lane: u32, u: u32) -> vec2<u32> {
    let idx = lane + SGS * u;
#ifdef EMULATE_COOPMAT
    // The emulated accumulators own elements column by column.
    return vec2<u32>(idx % 16u, idx / 16u);
#else
    return vec2<u32>(idx / 16u, idx % 16u);
#endif
}

#ifdef EMULATE_COOPMAT
// Elements of a 16 x 16 block per invocation.
const EPL: u32 = 256u / SGS;
alias Acc = array<f32, EPL>;

fn acc_zero() -> Acc {
    return Acc();
}

// c + Q K^T for the block whose Q rows start at q_tile[a_at] and K rows
// at kv_tile[b_at] (K-contiguous), 16 along the head dimension.
fn qk_step(c_in: Acc, lane: u32, a_at: u32, b_at: u32) -> Acc {
    var c = c_in;
    for (var u = 0u; u < EPL; u++) {
        let at = block_pos(lane, u);
        var s = 0.0;
        for (var k = 0u; k < 16u; k++) {
            s += f32(q_tile[a_at + at.x * QPITCH + k]) * f32(kv_tile[b_at + at.y * KVPITCH + k]);
        }
        c[u] += s;
    }
    return c;
}

// A 16 x 16 block of P: emulated, its offset in p_tile.
alias PMat = u32;

fn load_p(at: u32) -> PMat {
    return at;
}

// c + P V for the P block `a_at` and V rows (keys) at kv_tile[b_at].
fn pv_step(c_in: Acc, lane: u32, a_at: PMat, b_at: u32) -> Acc {
    var c = c_in;
    for (var u = 0u; u < EPL; u++) {
        let at = block_pos(lane, u);
        var s = 0.0;
        for (var k = 0u; k < 16u; k++) {
            s += f32(p_tile[a_at + at.x * PPITCH + k]) * f32(kv_tile[b_at + k * KVPITCH + at.y]);
        }
        c[u] += s;
    }
    return c;
}

// Stores a score block row-major at s_tile[at].
fn store_scores(c: Acc, lane: u32, at: u32) {
    for (var u = 0u; u < EPL; u++) {
        let e = block_pos(lane, u);
        s_tile[at + e.x * SPITCH + e.y] = c[u];
    }
}

// Copies a block to this subgroup's scratch block (each invocation its own
// elements, so no barrier is needed).
fn spill(c: Acc, lane: u32, sg: u32) {
    for (var u = 0u; u < EPL; u++) {
        let e = block_pos(lane, u);
        s_tile[sg * 256u + e.x * 16u + e.y] = c[u];
    }
}

fn unspill(lane: u32, sg: u32) -> Acc {
    var c: Acc;
    for (var u = 0u; u < EPL; u++) {
        let e = block_pos(lane, u);
        c[u] = s_tile[sg * 256u + e.x * 16u + e.y];
    }
    return c;
}
#else
alias Acc = coop_mat16x16<f32, C>;

fn acc_zero() -> Acc {
    return coop_mat16x16<f32, C>();
}

// A 16 x 16 block of Q, loaded once from where the kernel staged Q.
alias QMat = coop_mat16x16<f16, A>;

fn load_q(at: u32) -> QMat {
    return coopLoadT<coop_mat16x16<f16, A>>(&kv_tile[at], KVPITCH);
}

fn qk_step(c: Acc, lane: u32, a: QMat, b_at: u32) -> Acc {
    let b = coopLoad<coop_mat16x16<f16, B>>(&kv_tile[b_at], KVPITCH);
    return coopMultiplyAdd(a, b, c);
}

// A 16 x 16 block of P, loaded once per tile for every output block.
alias PMat = coop_mat16x16<f16, A>;

fn load_p(at: u32) -> PMat {
    return coopLoadT<coop_mat16x16<f16, A>>(&p_tile[at], PPITCH);
}

fn pv_step(c: Acc, lane: u32, a: PMat, b_at: u32) -> Acc {
    let b = coopLoadT<coop_mat16x16<f16, B>>(&kv_tile[b_at], KVPITCH);
    return coopMultiplyAdd(a, b, c);
}

fn store_scores(c: Acc, lane: u32, at: u32) {
    coopStoreT(c, &s_tile[at], SPITCH);
}

// Stores a block to this subgroup's scratch block, visible to the whole
// subgroup afterwards.
fn spill(c: Acc, lane: u32, sg: u32) {
    let at = sg * 256u;
    coopStoreT(c, &s_tile[at], 16u);
    subgroupBarrier();
}

fn unspill(lane: u32, sg: u32) -> Acc {
    subgroupBarrier();
    let at = sg * 256u;
    return coopLoadT<coop_mat16x16<f32, C>>(&s_tile[at], 16u);
}
#endif

// Accumulator block o (query block rb) times each row's factor in `f`.
fn scale_rows(o: Acc, lane: u32, sg: u32, rb: u32) -> Acc {
    spill(o, lane, sg);
    for (var u = 0u; u < 256u / SGS; u++) {
        let e = block_pos(lane, u);
        s_tile[sg * 256u + e.x * 16u + e.y] *= row_alpha[rb * 16u + e.x];
    }
    return unspill(lane, sg);
}

// Column of output block f of subgroup sg (DVP or more: none).
fn out_col(sg: u32, f: u32) -> u32 {
    return 16u * (sg / 2u + 2u * f);
}

// o + P V for output block (column col) over the tile's keys, with the
// row block's P as p0 (keys 0..15) and p1 (keys 16..31; BK is 32).
fn pv_block(o: Acc, lane: u32, p0: PMat, p1: PMat, col: u32) -> Acc {
    if (col >= DVP) {
        return o;
    }
    let c = pv_step(o, lane, p0, col);
    return pv_step(c, lane, p1, 16u * KVPITCH + col);
}

// Writes output block (rows rb, column col), each row times its
// row_alpha: to dst, or unnormalised to the split-KV scratch.
fn write_block(o: Acc, lane: u32, sg: u32, rb: u32, col: u32, q0: u32, h0: u32, b: u32, split: u32) {
    if (col >= DVP) {
        return;
    }
    spill(o, lane, sg);
    for (var u = 0u; u < 256u / SGS; u++) {
        let e = block_pos(lane, u);
        let iq = row_query(q0, rb * 16u + e.x);
        let h = row_head(h0, rb * 16u + e.x);
        let d = col + e.y;
        if (iq >= p.n_q || d >= DV4 * 4u) {
            continue;
        }
        let v = s_tile[sg * 256u + e.x * 16u + e.y] * row_alpha[rb * 16u + e.x];
#ifdef SPLIT_KV
        dbuf[(split * p.n_rows + (b * p.n_q + iq) * p.n_head + h) * (DV4 * 4u) + d] = v;
#else
        dbuf[p.d_off + h * p.d_s1 + iq * p.d_s2 + b * p.d_s3 + d * p.d_s0] = v;
#endif
    }
    // The scratch block is reused by the next block.
#ifndef EMULATE_COOPMAT
    subgroupBarrier();
#endif
}

#include "flash_attn_kv_runs"

#ifdef HAS_MASK
// The mask words of query row iq for keys j, j + 4, ..., j + 28, and the
// byte of key j's value. Key j + 4c lies 4c values further, at the same
// place in its word, so mask_value(w[c], byte) decodes each.
struct MaskWords {
    w: array<u32, 8>,
    byte: u32,
}

// The words, left undecoded so the loads stay in flight while the scores
// are computed. Past n_q and from kv_end on they are word 0 of the mask,
// read without a branch (the softmax sets keys from kv_end on to -inf,
// and rows past n_q are never stored); a guarded load per word ran 4%
// slower on an H200.
fn fetch_mask(iq: u32, j: u32, kv_end: u32, h: u32, b: u32) -> MaskWords {
    var m: MaskWords;
    m.byte = mask_byte(iq, j, h, b);
    for (var c = 0u; c < 8u; c++) {
        let ok = iq < p.n_q && j + 4u * c < kv_end;
        m.w[c] = mbuf[select(0u, (m.byte + 4u * c * MASK_SIZE) >> 2u, ok)];
    }
    return m;
}
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) t: u32,
        @builtin(subgroup_id) real_sg: u32,
        @builtin(subgroup_invocation_id) real_lane: u32,
        @builtin(subgroup_size) real_sgs: u32) {
    let q0 = wid.x * QROWS;
    let h0 = wid.y * (BQ / QROWS);
    // The packed heads share one K/V head, that of h0.
    let span = span_of(h0, wid.z);
    let b = span.b;
    let split = span.split;
    let kv_begin = span.kv_begin;
    let kv_end = span.kv_end;
    let k_head = span.k_head;
    let v_head = span.v_head;

    // The (virtual, when emulated) subgroup doing the matrix work.
#ifdef EMULATE_COOPMAT
    let sg = t / SGS;
    let lane = t % SGS;
#else
    let sg = real_sg;
    let lane = real_lane;
#endif
    // Softmax: four neighbouring invocations of a real subgroup per row.
    let st = real_sg * real_sgs + real_lane;
    let r = st / 4u;
    let part = st % 4u;
    let slope = alibi_slope(row_head(h0, r));

    // Q tile, pre-scaled, zero past n_q and DK.
    for (var u = t; u < BQ * (DKP / 4u); u += WG_SIZE) {
        let i = u / (DKP / 4u);
        let e = (u % (DKP / 4u)) * 4u;
        let iq = row_query(q0, i);
        var v = vec4<f32>(0.0);
        if (iq < p.n_q && e < DK4 * 4u) {
            let at = p.q_off + e * p.q_s0 + iq * p.q_s1 + row_head(h0, i) * p.q_s2 + b * p.q_s3;
            v = vec4<f32>(qbuf[at], qbuf[at + p.q_s0], qbuf[at + 2u * p.q_s0], qbuf[at + 3u * p.q_s0]);
        }
        let q = vec4<f16>(v * p.q_scale);
        let at = i * Q_PITCH + e;
#ifdef EMULATE_COOPMAT
        q_tile[at] = q.x;
        q_tile[at + 1u] = q.y;
        q_tile[at + 2u] = q.z;
        q_tile[at + 3u] = q.w;
#else
        kv_tile[at] = q.x;
        kv_tile[at + 1u] = q.y;
        kv_tile[at + 2u] = q.z;
        kv_tile[at + 3u] = q.w;
#endif
    }
    if (t < BQ) {
        row_max[t] = NEG_INF;
        row_sum[t] = 0.0;
    }

    // This subgroup's blocks: scores (rb_s, kb_s); outputs rows rb_o,
    // columns 16 * (sg / 2 + 2 * f).
    let rb_s = sg % 2u;
    let kb_s = sg / 2u;
    let rb_o = sg % 2u;
    // This subgroup's Q blocks, 16 columns each (Q1 .. Q15: those past the
    // first that DKP has), held for the whole kernel; the loop's first
    // barrier keeps the K tile from overwriting Q before all are loaded.
    // (Emulated, the scores read Q from q_tile in a loop: LLVM on lavapipe
    // takes minutes longer to compile the blocks written out.)
    let q_at = rb_s * 16u * Q_PITCH;
#ifndef EMULATE_COOPMAT
    workgroupBarrier();
    let qb0 = load_q(q_at);
#ifdef Q1
    let qb1 = load_q(q_at + 16u);
#endif
#ifdef Q2
    let qb2 = load_q(q_at + 32u);
#endif
#ifdef Q3
    let qb3 = load_q(q_at + 48u);
#endif
#ifdef Q4
    let qb4 = load_q(q_at + 64u);
#endif
#ifdef Q5
    let qb5 = load_q(q_at + 80u);
#endif
#ifdef Q6
    let qb6 = load_q(q_at + 96u);
#endif
#ifdef Q7
    let qb7 = load_q(q_at + 112u);
#endif
#ifdef Q8
    let qb8 = load_q(q_at + 128u);
#endif
#ifdef Q9
    let qb9 = load_q(q_at + 144u);
#endif
#ifdef Q10
    let qb10 = load_q(q_at + 160u);
#endif
#ifdef Q11
    let qb11 = load_q(q_at + 176u);
#endif
#ifdef Q12
    let qb12 = load_q(q_at + 192u);
#endif
#ifdef Q13
    let qb13 = load_q(q_at + 208u);
#endif
#ifdef Q14
    let qb14 = load_q(q_at + 224u);
#endif
#ifdef Q15
    let qb15 = load_q(q_at + 240u);
#endif
#endif
    var o0 = acc_zero();
#ifdef O1
    var o1 = acc_zero();
#endif
#ifdef O2
    var o2 = acc_zero();
#endif
#ifdef O3
    var o3 = acc_zero();
#endif
#ifdef O4
    var o4 = acc_zero();
#endif
#ifdef O5
    var o5 = acc_zero();
#endif
#ifdef O6
    var o6 = acc_zero();
#endif
#ifdef O7
    var o7 = acc_zero();
#endif

    // K/V tiles are fetched into registers one phase ahead: the first K
    // now; each tile's V during its scores, the next K during its softmax
    // and P V. The mask words of a tile load during its scores too. Each
    // load's first use is where it is needed (store_kv, the softmax), so
    // nothing waits for it earlier.
    var kv_in: array<KvRun, KV_LOADS>;
    for (var i = 0u; i < KV_LOADS; i++) {
        kv_in[i] = fetch_kv(0u, i, t, kv_begin, kv_end, k_head);
    }
    for (var kv0 = kv_begin; kv0 < kv_end; kv0 += BK) {
        // The previous tile's P V is done with kv_tile and p_tile.
        workgroupBarrier();
        for (var i = 0u; i < KV_LOADS; i++) {
            store_kv(0u, i, t, kv_in[i], kv0, kv_end, k_head);
        }
        workgroupBarrier();
        for (var i = 0u; i < KV_LOADS; i++) {
            kv_in[i] = fetch_kv(1u, i, t, kv0, kv_end, v_head);
        }
#ifdef HAS_MASK
        // Mask words now, decoded after the scores (see fetch_mask).
        let m_raw = fetch_mask(row_query(q0, r), kv0 + part, kv_end, row_head(h0, r), b);
#endif

        // 1. Scores.
        let k_at = kb_s * 16u * KVPITCH;
#ifdef EMULATE_COOPMAT
        var s = acc_zero();
        for (var e = 0u; e < DKP; e += 16u) {
            s = qk_step(s, lane, q_at + e, k_at + e);
        }
#else
        // Two chains of products (even and odd Q blocks), added at the
        // end: 1-1.5% faster than one chain of 16 on an H200 (four chains
        // were 2-3% slower).
        var s = qk_step(acc_zero(), lane, qb0, k_at);
        var s_odd = acc_zero();
#ifdef Q1
        s_odd = qk_step(s_odd, lane, qb1, k_at + 16u);
#endif
#ifdef Q2
        s = qk_step(s, lane, qb2, k_at + 32u);
#endif
#ifdef Q3
        s_odd = qk_step(s_odd, lane, qb3, k_at + 48u);
#endif
#ifdef Q4
        s = qk_step(s, lane, qb4, k_at + 64u);
#endif
#ifdef Q5
        s_odd = qk_step(s_odd, lane, qb5, k_at + 80u);
#endif
#ifdef Q6
        s = qk_step(s, lane, qb6, k_at + 96u);
#endif
#ifdef Q7
        s_odd = qk_step(s_odd, lane, qb7, k_at + 112u);
#endif
#ifdef Q8
        s = qk_step(s, lane, qb8, k_at + 128u);
#endif
#ifdef Q9
        s_odd = qk_step(s_odd, lane, qb9, k_at + 144u);
#endif
#ifdef Q10
        s = qk_step(s, lane, qb10, k_at + 160u);
#endif
#ifdef Q11
        s_odd = qk_step(s_odd, lane, qb11, k_at + 176u);
#endif
#ifdef Q12
        s = qk_step(s, lane, qb12, k_at + 192u);
#endif
#ifdef Q13
        s_odd = qk_step(s_odd, lane, qb13, k_at + 208u);
#endif
#ifdef Q14
        s = qk_step(s, lane, qb14, k_at + 224u);
#endif
#ifdef Q15
        s_odd = qk_step(s_odd, lane, qb15, k_at + 240u);
#endif
        s = s + s_odd;
#endif
        store_scores(s, lane, rb_s * 16u * SPITCH + kb_s * 16u);
        workgroupBarrier();

        // V tile into the same memory (scores are read from s_tile now),
        // then the next K into registers.
        for (var i = 0u; i < KV_LOADS; i++) {
            store_kv(1u, i, t, kv_in[i], kv0, kv_end, v_head);
        }
        if (kv0 + BK < kv_end) {
            for (var i = 0u; i < KV_LOADS; i++) {
                kv_in[i] = fetch_kv(0u, i, t, kv0 + BK, kv_end, k_head);
            }
        }

        // 2. Online softmax: row r, keys part, part + 4, ... x holds -inf
        // past the keys, else the mask term.
        var x: array<f32, 8>;
        for (var c = 0u; c < 8u; c++) {
            let j = part + 4u * c;
            x[c] = 0.0;
            if (kv0 + j >= kv_end) {
                x[c] = NEG_INF;
            }
#ifdef HAS_MASK
            else if (row_query(q0, r) < p.n_q) {
                x[c] = slope * mask_value(m_raw.w[c], m_raw.byte);
            }
#endif
        }
        var m_tile = NEG_INF;
        for (var c = 0u; c < 8u; c++) {
            var v = s_tile[r * SPITCH + part + 4u * c];
            if (p.softcap != 0.0) {
                v = p.softcap * tanh(clamp(v, -15.0, 15.0));
            }
            // x holds -inf past the keys, else the mask term.
            v = select(v + x[c], NEG_INF, x[c] == NEG_INF);
            x[c] = v;
            m_tile = max(m_tile, v);
        }
        m_tile = max(m_tile, subgroupShuffleXor(m_tile, 1u));
        m_tile = max(m_tile, subgroupShuffleXor(m_tile, 2u));
        let m_old = row_max[r];
        var m = m_old;
        var alpha = 1.0;
        if (m_tile > m_old + RESCALE_SLACK || (m_old == NEG_INF && m_tile > NEG_INF)) {
            m = m_tile;
            alpha = exp(m_old - m);
        }
        var sum = 0.0;
        for (var c = 0u; c < 8u; c++) {
            var pj = 0.0;
            if (m > NEG_INF) {
                pj = exp(x[c] - m);
            }
            let ph = f16(pj);
            p_tile[r * PPITCH + part + 4u * c] = ph;
            sum += f32(ph);
        }
        sum += subgroupShuffleXor(sum, 1u);
        sum += subgroupShuffleXor(sum, 2u);
        if (part == 0u) {
            row_max[r] = m;
            row_sum[r] = row_sum[r] * alpha + sum;
            row_alpha[r] = alpha;
        }
        workgroupBarrier();

        // 3. O = O * alpha + P V, the round trip only when a row moved.
        // (One read per invocation and a vote; 16 short-circuit reads per
        // invocation took 7% longer on an H200.)
        var mine = false;
#ifdef EMULATE_COOPMAT
        for (var i = 0u; i < 16u; i++) {
            mine = mine | (row_alpha[rb_o * 16u + i] != 1.0);
        }
        let moved = mine;
#else
        for (var i = lane; i < 16u; i += SGS) {
            mine = mine | (row_alpha[rb_o * 16u + i] != 1.0);
        }
        let moved = subgroupAny(mine);
#endif
        if (moved) {
            o0 = scale_rows(o0, lane, sg, rb_o);
#ifdef O1
            o1 = scale_rows(o1, lane, sg, rb_o);
#endif
#ifdef O2
            o2 = scale_rows(o2, lane, sg, rb_o);
#endif
#ifdef O3
            o3 = scale_rows(o3, lane, sg, rb_o);
#endif
#ifdef O4
            o4 = scale_rows(o4, lane, sg, rb_o);
#endif
#ifdef O5
            o5 = scale_rows(o5, lane, sg, rb_o);
#endif
#ifdef O6
            o6 = scale_rows(o6, lane, sg, rb_o);
#endif
#ifdef O7
            o7 = scale_rows(o7, lane, sg, rb_o);
#endif
        }
        let p0 = load_p(rb_o * 16u * PPITCH);
        let p1 = load_p(rb_o * 16u * PPITCH + 16u);
        o0 = pv_block(o0, lane, p0, p1, out_col(sg, 0u));
#ifdef O1
        o1 = pv_block(o1, lane, p0, p1, out_col(sg, 1u));
#endif
#ifdef O2
        o2 = pv_block(o2, lane, p0, p1, out_col(sg, 2u));
#endif
#ifdef O3
        o3 = pv_block(o3, lane, p0, p1, out_col(sg, 3u));
#endif
#ifdef O4
        o4 = pv_block(o4, lane, p0, p1, out_col(sg, 4u));
#endif
#ifdef O5
        o5 = pv_block(o5, lane, p0, p1, out_col(sg, 5u));
#endif
#ifdef O6
        o6 = pv_block(o6, lane, p0, p1, out_col(sg, 6u));
#endif
#ifdef O7
        o7 = pv_block(o7, lane, p0, p1, out_col(sg, 7u));
#endif
    }

    workgroupBarrier();
#ifdef SPLIT_KV
    // Unnormalised rows and their (max, sum) for flash_attn_combine.
    if (t < BQ && row_query(q0, t) < p.n_q) {
        store_row_stats(split, b, row_query(q0, t), row_head(h0, t), row_max[t], row_sum[t]);
    }
    if (t < BQ) {
        row_alpha[t] = 1.0;
    }
#else
    if (t < BQ) {
        row_alpha[t] = row_factor(row_max[t], row_sum[t], row_head(h0, t));
    }
#endif
    workgroupBarrier();

    write_block(o0, lane, sg, rb_o, out_col(sg, 0u), q0, h0, b, split);
#ifdef O1
    write_block(o1, lane, sg, rb_o, out_col(sg, 1u), q0, h0, b, split);
#endif
#ifdef O2
    write_block(o2, lane, sg, rb_o, out_col(sg, 2u), q0, h0, b, split);
#endif
#ifdef O3
    write_block(o3, lane, sg, rb_o, out_col(sg, 3u), q0, h0, b, split);
#endif
#ifdef O4
    write_block(o4, lane, sg, rb_o, out_col(sg, 4u), q0, h0, b, split);
#endif
#ifdef O5
    write_block(o5, lane, sg, rb_o, out_col(sg, 5u), q0, h0, b, split);
#endif
#ifdef O6
    write_block(o6, lane, sg, rb_o, out_col(sg, 6u), q0, h0, b, split);
#endif
#ifdef O7
    write_block(o7, lane, sg, rb_o, out_col(sg, 7u), q0, h0, b, split);
#endif
}
