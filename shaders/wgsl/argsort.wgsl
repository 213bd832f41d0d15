// ARGSORT and TOP_K of f32 rows: one workgroup sorts one chunk of a row,
// a bitonic sort of (order key, index) pairs padded to SORT_N (a power of
// two) in workgroup memory. Values order by IEEE total order (NaNs after
// +inf, negative NaNs before -inf); equal values keep ascending index
// order; padding sorts last. DESCENDING: largest first.
// Input: the f32 row (entries chunk * chunk_len + i of a row of ne0), or
// IN_CAND: candidates of an earlier pass, (key, index) u32 pairs, ne0 per
// row. Output: the first n_out indices of the sorted chunk as i32 (one
// chunk per row), or OUT_CAND: its first n_out (key, index) pairs as
// candidates for the next pass (top-k of rows longer than SORT_N).

#include "common/index"

struct Params {
    ne0: u32, ne1: u32, ne2: u32, ne3: u32,
    off_a: u32, sa0: u32, sa1: u32, sa2: u32, sa3: u32,
    off_d: u32, sd0: u32, sd1: u32, sd2: u32, sd3: u32,
    n_out: u32, n_chunks: u32, chunk_len: u32,
}

#ifdef IN_CAND
@group(0) @binding(0) var<storage, read_write> cand_in: array<u32>;
#else
@group(0) @binding(0) var<storage, read_write> src0: array<f32>;
#endif
#ifdef OUT_CAND
@group(0) @binding(1) var<storage, read_write> cand_out: array<u32>;
#else
@group(0) @binding(1) var<storage, read_write> dst: array<i32>;
#endif
@group(0) @binding(2) var<uniform> p: Params;

const PAD: u32 = 0xffffffffu;

var<workgroup> keys: array<u32, SORT_N>;
var<workgroup> idxs: array<u32, SORT_N>;

// Bits of x whose unsigned order is the total order of x.
fn order_key(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    if ((b & 0x80000000u) != 0u) {
        return ~b;
    }
    return b | 0x80000000u;
}

// Whether entry a sorts before entry b.
fn before(a: u32, b: u32) -> bool {
    let ia = idxs[a];
    let ib = idxs[b];
    if (ia == PAD) {
        return false;
    }
    if (ib == PAD) {
        return true;
    }
    let ka = keys[a];
    let kb = keys[b];
    if (ka != kb) {
#ifdef DESCENDING
        return ka > kb;
#else
        return ka < kb;
#endif
    }
    return ia < ib;
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = wid.y * nwg.x + wid.x;
    let row = g / p.n_chunks;
    let chunk = g % p.n_chunks;
    if (row >= p.ne1 * p.ne2 * p.ne3) {
        return;
    }
    let r = unravel(row, p.ne1, p.ne2, p.ne3);
    let first = chunk * p.chunk_len;

    for (var i = lid; i < SORT_N; i += WG_SIZE) {
        let e = first + i;
        if (i < p.chunk_len && e < p.ne0) {
#ifdef IN_CAND
            let w = p.off_a + 2u * (row * p.ne0 + e);
            keys[i] = cand_in[w];
            idxs[i] = cand_in[w + 1u];
#else
            let base_a = p.off_a + r.x * p.sa1 + r.y * p.sa2 + r.z * p.sa3;
            keys[i] = order_key(src0[base_a + e * p.sa0]);
            idxs[i] = e;
#endif
        } else {
            keys[i] = 0u;
            idxs[i] = PAD;
        }
    }
    workgroupBarrier();

    for (var k = 2u; k <= SORT_N; k = k << 1u) {
        for (var j = k >> 1u; j > 0u; j = j >> 1u) {
            for (var t = lid; t < SORT_N / 2u; t += WG_SIZE) {
                let i = 2u * j * (t / j) + (t % j);
                let l = i + j;
                let up = (i & k) == 0u;
                var swap = before(i, l);
                if (up) {
                    swap = before(l, i);
                }
                if (swap) {
                    let tk = keys[i];
                    keys[i] = keys[l];
                    keys[l] = tk;
                    let ti = idxs[i];
                    idxs[i] = idxs[l];
                    idxs[l] = ti;
                }
            }
            workgroupBarrier();
        }
    }

    for (var i = lid; i < p.n_out; i += WG_SIZE) {
#ifdef OUT_CAND
        let w = p.off_d + 2u * (row * p.n_chunks * p.n_out + chunk * p.n_out + i);
        cand_out[w] = keys[i];
        cand_out[w + 1u] = idxs[i];
#else
        let base_d = p.off_d + r.x * p.sd1 + r.y * p.sd2 + r.z * p.sd3;
        dst[base_d + i * p.sd0] = i32(idxs[i]);
#endif
    }
}
