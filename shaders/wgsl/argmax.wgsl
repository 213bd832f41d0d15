// ARGMAX of f32 rows as ggml_vec_argmax_f32, one workgroup per row: the
// last index among equal maxima wins. NaNs behave as ggml's sequential
// loop makes them: trailing NaNs are ignored, and the search restarts
// after the last NaN before them (a row of NaNs gives 0).

#include "common/index"

struct Params {
    ne0: u32, n_rows: u32,
    off_a: u32, sa0: u32, sa1: u32,
    off_d: u32, sd0: u32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<i32>;
@group(0) @binding(2) var<uniform> p: Params;

const NONE: u32 = 0xffffffffu;

var<workgroup> red_val: array<f32, WG_SIZE>;
var<workgroup> red_idx: array<u32, WG_SIZE>;

fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// Maximum of v over the workgroup (NONE counts as smallest).
fn wg_max_index(v: u32, lid: u32) -> u32 {
    red_idx[lid] = v;
    workgroupBarrier();
    for (var s = WG_SIZE / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            let o = red_idx[lid + s];
            if (red_idx[lid] == NONE || (o != NONE && o > red_idx[lid])) {
                red_idx[lid] = o;
            }
        }
        workgroupBarrier();
    }
    let r = red_idx[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.y * nwg.x + wid.x;
    if (row >= p.n_rows) {
        return;
    }
    let base = p.off_a + row * p.sa1;

    // The search covers [start, end): end is past the last non-NaN, start
    // past the last NaN before it.
    var last_num = NONE;
    for (var i = lid; i < p.ne0; i += WG_SIZE) {
        if (!is_nan(src0[base + i * p.sa0])) {
            last_num = i;
        }
    }
    let last = wg_max_index(last_num, lid);
    var last_nan = NONE;
    for (var i = lid; i < p.ne0; i += WG_SIZE) {
        if (last != NONE && i < last && is_nan(src0[base + i * p.sa0])) {
            last_nan = i;
        }
    }
    let nan_before = wg_max_index(last_nan, lid);
    let start = select(nan_before + 1u, 0u, nan_before == NONE);
    let end = select(last + 1u, 0u, last == NONE);

    var best = 0.0;
    var best_i = NONE;
    for (var i = start + lid; i < end; i += WG_SIZE) {
        let x = src0[base + i * p.sa0];
        if (best_i == NONE || x >= best) {
            best = x;
            best_i = i;
        }
    }
    red_val[lid] = best;
    red_idx[lid] = best_i;
    workgroupBarrier();
    for (var s = WG_SIZE / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            let oi = red_idx[lid + s];
            let ov = red_val[lid + s];
            let mi = red_idx[lid];
            let take = oi != NONE && (mi == NONE || ov > red_val[lid] || (ov == red_val[lid] && oi > mi));
            if (take) {
                red_val[lid] = ov;
                red_idx[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        let r = red_idx[0];
        dst[p.off_d + row * p.sd0] = select(i32(r), 0, r == NONE);
    }
}
