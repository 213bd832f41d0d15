// How the norm kernels (norm.wgsl and rms_norm_fused.wgsl) share a row out
// to a workgroup and reduce it: both follow exactly this order, so the
// fused kernel gives the same bits as the separate ones.
//
// The row is cut into chunks of four consecutive elements. Position `me`
// of the workgroup owns chunks me, me + WG_SIZE, me + 2 WG_SIZE, ...:
// ROW_CHUNKS of them when the host sized the workgroup so that they stay
// in registers (the kernel then loads everything before its first
// reduction and never reads the row back), else as many as the row needs
// (the kernel reads the row again after the reduction). An invocation's
// partial sum adds its elements in that order (elements past the row are
// zeros and change nothing), then row_sum adds the workgroup's partials:
// - ROW_SUM_LANES (a power of two no larger than any subgroup the device
//   makes): a butterfly of subgroupShuffleXor over each aligned block of
//   ROW_SUM_LANES positions, then the blocks' sums one after another. The
//   kernel's entry takes `me` as subgroup_id * subgroup_size + lane, so a
//   block lies within one subgroup, and the order is the same whatever
//   subgroup size the driver picks for a pipeline.
// - otherwise the workgroup-memory tree of wg_sum.
// Each chunk lies within one run of 32 (eight neighbouring positions make
// a run), which is how common/q8_1_run shares a run out.

#include "common/row_reduce"

// Chunks each position owns in a row of ne0 elements.
fn row_chunk_count(ne0: u32) -> u32 {
#ifdef ROW_CHUNKS
    return ROW_CHUNKS;
#else
    return ((ne0 + 3u) / 4u + WG_SIZE - 1u) / WG_SIZE;
#endif
}

// The first element of position me's chunk k.
fn chunk_first(me: u32, k: u32) -> u32 {
    return 4u * (me + k * WG_SIZE);
}

// Which of the four elements from e0 on lie within the row.
fn chunk_live(e0: u32, ne0: u32) -> vec4<bool> {
    return vec4<u32>(e0, e0 + 1u, e0 + 2u, e0 + 3u) < vec4<u32>(ne0);
}

// `s` plus the squares of v's elements, one after another (v holds zeros
// past the row).
fn add_squares(s: f32, v: vec4<f32>) -> f32 {
    return s + v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
}

// `s` plus v's elements, one after another.
fn add_values(s: f32, v: vec4<f32>) -> f32 {
    return s + v.x + v.y + v.z + v.w;
}

// The sum of every position's `v`, returned to all; every invocation calls
// it in uniform control flow, and row_red is free again when it returns.
fn row_sum(v: f32, me: u32) -> f32 {
#ifdef ROW_SUM_LANES
    var s = v;
    for (var m = 1u; m < ROW_SUM_LANES; m = m << 1u) {
        // Both partners add the same two values: the same bits.
        s += subgroupShuffleXor(s, m);
    }
    if (me % ROW_SUM_LANES == 0u) {
        row_red[me / ROW_SUM_LANES] = s;
    }
    workgroupBarrier();
    var total = row_red[0];
    for (var b = 1u; b < WG_SIZE / ROW_SUM_LANES; b++) {
        total += row_red[b];
    }
    workgroupBarrier();
    return total;
#else
    return wg_sum(v, me);
#endif
}
