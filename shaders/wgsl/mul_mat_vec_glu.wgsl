// A layer's gate and up projections of one column (two MUL_MATs with the
// same activations, weights of one type in one buffer) and the GLU of
// their results, in one kernel (backends/webgpu/src/ops/matmul/glu.rs):
// the GLU no longer waits for both products in a kernel of its own.
//
// A workgroup makes 32 rows of both products: GROUPS groups of WGU
// invocations, WGU being the workgroup of the separate mat-vec
// (mul_mat_vec.wgsl) for these rows, and each group takes RG = 32 / GROUPS
// rows of each matrix. Within a group, units of the rows are shared out
// and the partial sums reduced exactly as that workgroup does (units pos,
// pos + WGU, ...; subgroupAdd, then the group's subgroups in order), so
// every product has the bits of the separate MUL_MAT. The host makes sure
// no subgroup spans two groups (WGU is a multiple of the subgroup size).
// Then, per row, one invocation writes the gate product, the up product
// and act(gate) * up (common/glu_act, as glu.wgsl computes it; the three
// are apart). With QUANTIZE the 32 GLU values
// are also written as the next MUL_MAT's quantized activations (one q8_1
// run per workgroup, as glu.wgsl's QUANTIZE writes them).
//
// Layouts as mul_mat_vec: X_Q8 (integer units, src1 the q8_1 runs of
// mul_mat_quantize), with W_SPLIT too for q4_0 / q4_K stored split (each
// matrix's heads after its quants, from h_x and h_g), or W_HALF8 (f16
// rows, src1 f32 vec4s). Offsets: the weights' rows in the layout's units
// (bytes but for W_HALF8), x in vec4s, dst in f32s; the three results
// are one binding (the host binds the span that holds them).

#ifdef W_QUANT
#define QUANT_BUF src0
#include "common/quant"
#endif
#ifdef X_Q8
#include "common/quant_dot"
#endif
#include "common/activations"
#include "common/glu_act"

struct Params {
    k: u32, m: u32, n_units: u32, row_groups: u32,
    w_x: u32, w_g: u32, w_s1: u32, x_off: u32,
    d_x: u32, d_g: u32, d_glu: u32,
    alpha: f32, limit: f32,
#ifdef W_SPLIT
    // Byte offsets of the x and g matrices' heads.
    h_x: u32, h_g: u32,
#endif
}

#include "common/matvec_inputs"
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
#ifdef QUANTIZE
@group(0) @binding(3) var<storage, read_write> buf_q: array<u32>;
@group(0) @binding(4) var<uniform> p: Params;
#include "common/q8_1_run"
#else
@group(0) @binding(3) var<uniform> p: Params;
#endif

// Rows of each matrix per group, and the sums one invocation holds: RG
// rows of the GLU's x matrix, then RG of its g matrix.
const RG: u32 = 32u / GROUPS;
const NACC: u32 = 2u * RG;

var<workgroup> partial: array<f32, MAX_SUBGROUPS * NACC>;
// The workgroup's 32 x products, then its 32 g products.
var<workgroup> sums: array<f32, 64>;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(subgroup_id) sg_id: u32,
        @builtin(subgroup_size) sg_size: u32,
        @builtin(subgroup_invocation_id) sg_lane: u32,
        @builtin(num_subgroups) n_sg: u32,
        @builtin(local_invocation_index) lid: u32) {
    let wg = wid.y * nwg.x + wid.x;
    if (wg >= p.row_groups) {
        return;
    }
    // A subgroup's invocations lie in one group whatever order the driver
    // gives them.
    let pos = sg_id * sg_size + sg_lane;
    let grp = pos / WGU;
    let me = pos % WGU;
    let first = 32u * wg + grp * RG;
    var rows: array<u32, NACC>;
#ifdef W_SPLIT
    var heads: array<u32, NACC>;
#endif
    for (var r = 0u; r < RG; r++) {
        let row = min(first + r, p.m - 1u);
        rows[r] = p.w_x + row * p.w_s1;
        rows[RG + r] = p.w_g + row * p.w_s1;
#ifdef W_SPLIT
        heads[r] = p.h_x + q_split_head(row * p.w_s1);
        heads[RG + r] = p.h_g + q_split_head(row * p.w_s1);
#endif
    }

    var acc: array<f32, NACC>;
    for (var u = me; u < p.n_units; u += WGU) {
#ifdef W_HALF8
        let x0 = src1[p.x_off + 2u * u];
        let x1 = src1[p.x_off + 2u * u + 1u];
        for (var r = 0u; r < NACC; r++) {
            let a = src0[rows[r] + u];
            acc[r] += dot(vec4<f32>(unpack2x16float(a.x), unpack2x16float(a.y)), x0)
                + dot(vec4<f32>(unpack2x16float(a.z), unpack2x16float(a.w)), x1);
        }
#else
        var x: array<vec4<u32>, 3 * Q8_RUNS>;
        for (var r = 0u; r < Q8_RUNS; r++) {
            let xi = p.x_off + 3u * q8_run(u, r);
            for (var i = 0u; i < 3u; i++) {
                x[3u * r + i] = src1[xi + i];
            }
        }
        for (var r = 0u; r < NACC; r++) {
#ifdef W_SPLIT
            acc[r] += q_dot8(q_load8_split(rows[r], heads[r], u), x);
#else
            acc[r] += q_dot8(q_load8(rows[r], u), x);
#endif
        }
#endif
    }

    for (var i = 0u; i < NACC; i++) {
        let s = subgroupAdd(acc[i]);
        if (sg_lane == 0u) {
            partial[sg_id * NACC + i] = s;
        }
    }
    workgroupBarrier();
    // Sum o: row o % 32 of the x matrix (o < 32) or of the g matrix.
    let per_group = n_sg / GROUPS;
    for (var o = lid; o < 64u; o += WG_SIZE) {
        let row = o % 32u;
        let i = (o / 32u) * RG + row % RG;
        let g0 = (row / RG) * per_group;
        var sum = 0.0;
        for (var s = 0u; s < per_group; s++) {
            sum += partial[(g0 + s) * NACC + i];
        }
        sums[o] = sum;
    }
    workgroupBarrier();
    if (lid < 32u) {
        let row = 32u * wg + lid;
        let x = sums[lid];
        let g = sums[32u + lid];
        if (row < p.m) {
            dst[p.d_x + row] = x;
            dst[p.d_g + row] = g;
            dst[p.d_glu + row] = glu_act(x, g, p.alpha, p.limit);
        }
    }
#ifdef QUANTIZE
    // Eight invocations quantize the run (m % 32 == 0), four values each.
    var v = vec4<f32>(0.0);
    if (lid < 8u) {
        for (var j = 0u; j < 4u; j++) {
            let r = 4u * lid + j;
            v[j] = glu_act(sums[r], sums[32u + r], p.alpha, p.limit);
        }
    }
    let q = q8_1_part(v, lid);
    if (lid < 8u) {
        q8_1_store(wg, lid, q);
    }
#endif
}
