// MUL_MAT for few columns of integer-dot weights (legacy blocks and q4_K)
// in one kernel: each workgroup quantizes its column of x into workgroup
// memory, as mul_mat_quantize would into scratch (ggml's q8_1: runs of 32
// signed bytes q = round(x / d), d = max|x| / 127, and s = d * sum(q)),
// then multiplies it with ROWS_PER_SG rows per subgroup. One kernel instead
// of two saves a dispatch, the barrier between them and a scratch round
// trip, which at n = 1 cost as much as the product itself.
//
// A workgroup is (row group, column, batch): its rows are ROWS_PER_SG per
// subgroup, num_subgroups * ROWS_PER_SG in all (the host knows the
// subgroup size: it is fixed on devices that get this kernel). Lanes take
// units u = lane, lane + subgroup size, ... of their rows (one unit is
// Q8_RUNS runs of 32, see common/quant_dot), read each unit's x once for
// every row and reduce with subgroupAdd: no workgroup memory traffic
// after the quantization and a single barrier.
//
// Quantization: eight invocations per run, four values each, combined
// with subgroup shuffles (needs subgroups of at least 8, aligned to
// groups of 8 by construction: invocation t = subgroup_id * size + lane).
//
// Bounds (built without runtime checks): x reads are guarded by
// run < runs; workgroup arrays are indexed by run < runs <= X_RUNS (the
// host sizes X_RUNS from K); weight rows past M repeat the last row and are
// not stored; units stay below K / unit, so block reads stay in the row.
// Offsets and strides: weights in bytes, x in elements, dst in f32s.

#include "mul_mat_common"
#include "common/quant_dot"

struct Params {
    m: u32, n: u32, ne12: u32, r2: u32,
    r3: u32, runs: u32, n_units: u32, row_groups: u32,
    total_groups: u32,
    w_off: u32, w_s1: u32, w_s2: u32, w_s3: u32,
    x_off: u32, x_s0: u32, x_s1: u32, x_s2: u32, x_s3: u32,
    d_off: u32, d_s0: u32, d_s1: u32, d_s2: u32, d_s3: u32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<u32>;
@group(0) @binding(1) var<storage, read_write> src1: array<SRC1_TYPE>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// Run r of the column: quants in xq[2r], xq[2r + 1]; (d, s) in xs[r].
var<workgroup> xq: array<vec4<u32>, 2 * X_RUNS>;
var<workgroup> xs: array<vec2<f32>, X_RUNS>;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(subgroup_id) sg_id: u32,
        @builtin(subgroup_invocation_id) lane: u32,
        @builtin(subgroup_size) sg_size: u32,
        @builtin(num_subgroups) n_sg: u32) {
    let g = wid.y * nwg.x + wid.x;
    if (g >= p.total_groups) {
        return;
    }
    let rg = g % p.row_groups;
    let rest = g / p.row_groups;
    let col = rest % p.n;
    let b = rest / p.n;
    let i12 = b % p.ne12;
    let i13 = b / p.ne12;
    let w_base = p.w_off + (i13 / p.r3) * p.w_s3 + (i12 / p.r2) * p.w_s2;
    let x_base = p.x_off + col * p.x_s1 + i12 * p.x_s2 + i13 * p.x_s3;
    let d_base = p.d_off + col * p.d_s1 + i12 * p.d_s2 + i13 * p.d_s3;

    // 1. The column, quantized into workgroup memory.
    let t = sg_id * sg_size + lane;
    let part = t % 8u;
    for (var r0 = 0u; r0 < p.runs; r0 += WG_SIZE / 8u) {
        let run = r0 + t / 8u;
        let live = run < p.runs;
        var v = vec4<f32>(0.0);
        if (live) {
            let at = x_base + (32u * run + 4u * part) * p.x_s0;
            v = vec4<f32>(f32(src1[at]), f32(src1[at + p.x_s0]), f32(src1[at + 2u * p.x_s0]), f32(src1[at + 3u * p.x_s0]));
        }
        let a = abs(v);
        var amax = max(max(a.x, a.y), max(a.z, a.w));
        amax = max(amax, subgroupShuffleXor(amax, 1u));
        amax = max(amax, subgroupShuffleXor(amax, 2u));
        amax = max(amax, subgroupShuffleXor(amax, 4u));
        let d = amax / 127.0;
        let id = select(0.0, 1.0 / d, d > 0.0);
        let q = vec4<i32>(round(v * id));
        var sum = q.x + q.y + q.z + q.w;
        sum += subgroupShuffleXor(sum, 1u);
        sum += subgroupShuffleXor(sum, 2u);
        sum += subgroupShuffleXor(sum, 4u);
        // Invocations 0 and 4 of the run gather their half of the quants.
        let word = pack4xI8(q);
        let w1 = subgroupShuffleXor(word, 1u);
        let w2 = subgroupShuffleXor(word, 2u);
        let w3 = subgroupShuffleXor(word, 3u);
        if (live && (part & 3u) == 0u) {
            xq[2u * run + part / 4u] = vec4<u32>(word, w1, w2, w3);
            if (part == 0u) {
                xs[run] = vec2<f32>(d, d * f32(sum));
            }
        }
    }
    workgroupBarrier();

    // 2. ROWS_PER_SG rows per subgroup.
    let row0 = (rg * n_sg + sg_id) * ROWS_PER_SG;
    var rows: array<u32, ROWS_PER_SG>;
    for (var r = 0u; r < ROWS_PER_SG; r++) {
        rows[r] = w_base + min(row0 + r, p.m - 1u) * p.w_s1;
    }
    var acc: array<f32, ROWS_PER_SG>;
    for (var u = lane; u < p.n_units; u += sg_size) {
        var x: array<vec4<u32>, 3 * Q8_RUNS>;
        for (var i = 0u; i < Q8_RUNS; i++) {
            let run = u * Q8_RUNS + i;
            x[3u * i] = xq[2u * run];
            x[3u * i + 1u] = xq[2u * run + 1u];
            x[3u * i + 2u] = vec4<u32>(bitcast<vec2<u32>>(xs[run]), 0u, 0u);
        }
        for (var r = 0u; r < ROWS_PER_SG; r++) {
            acc[r] += q_dot8(q_load8(rows[r], u), x);
        }
    }
    for (var r = 0u; r < ROWS_PER_SG; r++) {
        let s = subgroupAdd(acc[r]);
        if (lane == 0u && row0 + r < p.m) {
            dst[d_base + (row0 + r) * p.d_s0] = s;
        }
    }
}
