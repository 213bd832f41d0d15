// NORM, RMS_NORM and L2_NORM of f32 rows: one workgroup per row, strides
// and offsets in elements. OP_NORM: (x - mean) / sqrt(var + eps);
// OP_RMS_NORM: x / sqrt(mean(x^2) + eps); OP_L2_NORM: x / max(|x|, eps).
// INPLACE: the destination is the source. The row is shared out and
// reduced as common/row_norm says (rms_norm_fused.wgsl follows the same
// order, for the same bits).

#include "common/index"
#include "common/row_norm"

struct Params {
    ne0: u32, ne1: u32, ne2: u32, ne3: u32,
    off_a: u32, sa0: u32, sa1: u32, sa2: u32, sa3: u32,
    off_d: u32, sd0: u32, sd1: u32, sd2: u32, sd3: u32,
    eps: f32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<f32>;
#ifdef INPLACE
#define dst src0
@group(0) @binding(1) var<uniform> p: Params;
#else
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
#endif

// Chunk k of position me (zeros past the row).
fn load_chunk(base_a: u32, me: u32, k: u32) -> vec4<f32> {
    let e0 = chunk_first(me, k);
    var v = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
        if (e0 + j < p.ne0) {
            v[j] = src0[base_a + (e0 + j) * p.sa0];
        }
    }
    return v;
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
#ifdef ROW_SUM_LANES
        @builtin(subgroup_id) sg_id: u32,
        @builtin(subgroup_size) sg_size: u32,
        @builtin(subgroup_invocation_id) sg_lane: u32,
#endif
        @builtin(local_invocation_index) lid: u32) {
#ifdef ROW_SUM_LANES
    let me = sg_id * sg_size + sg_lane;
#else
    let me = lid;
#endif
    let row = row_of(wid, nwg);
    if (row >= p.ne1 * p.ne2 * p.ne3) {
        return;
    }
    let r = unravel(row, p.ne1, p.ne2, p.ne3);
    let base_a = p.off_a + r.x * p.sa1 + r.y * p.sa2 + r.z * p.sa3;
    let base_d = p.off_d + r.x * p.sd1 + r.y * p.sd2 + r.z * p.sd3;
    let n = f32(p.ne0);
    let chunks = row_chunk_count(p.ne0);
#ifdef ROW_CHUNKS
    // The row, loaded once: every load is issued before the first use.
    var held: array<vec4<f32>, ROW_CHUNKS>;
    for (var k = 0u; k < ROW_CHUNKS; k++) {
        held[k] = load_chunk(base_a, me, k);
    }
#endif

    var s = 0.0;
    for (var k = 0u; k < chunks; k++) {
#ifdef ROW_CHUNKS
        let v = held[k];
#else
        let v = load_chunk(base_a, me, k);
#endif
#ifdef OP_NORM
        s = add_values(s, v);
#else
        s = add_squares(s, v);
#endif
    }

#ifdef OP_NORM
    let mean = row_sum(s, me) / n;
    var q = 0.0;
    for (var k = 0u; k < chunks; k++) {
#ifdef ROW_CHUNKS
        let v = held[k];
#else
        let v = load_chunk(base_a, me, k);
#endif
        let live = chunk_live(chunk_first(me, k), p.ne0);
        q = add_squares(q, select(vec4<f32>(0.0), v - mean, live));
    }
    let scale = 1.0 / sqrt(row_sum(q, me) / n + p.eps);
#else
    let total = row_sum(s, me);
    let mean = 0.0;
#ifdef OP_RMS_NORM
    let scale = 1.0 / sqrt(total / n + p.eps);
#else
    let scale = 1.0 / max(sqrt(total), p.eps);
#endif
#endif

    for (var k = 0u; k < chunks; k++) {
#ifdef ROW_CHUNKS
        let v = held[k];
#else
        let v = load_chunk(base_a, me, k);
#endif
        let e0 = chunk_first(me, k);
        for (var j = 0u; j < 4u; j++) {
            if (e0 + j < p.ne0) {
                dst[base_d + (e0 + j) * p.sd0] = (v[j] - mean) * scale;
            }
        }
    }
}
