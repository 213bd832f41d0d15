// SET_ROWS: row i1 of f32 src [ne0, n_rows, ne2, ne3] is written over row
// idx[i1, i2 % ni1, i3 % ni2] of dst, converted to DST_TYPE. The index
// tensor is i32 (SRC1_I32) or i64 (SRC1_I64, read as two u32 words, strides
// in words). An index outside 0..dst_rows writes nothing: the first bad one
// stores node + 1 in word 0 of the error flag and the index in word 1.
// PATH_PAIRS (bfloat16): each invocation packs elements 2j and 2j+1 into one
// u32 word of dst (dst strides and offset in words, ne0 even); otherwise
// one invocation per element. Strides and offsets in elements.
// PAIR (not with PATH_PAIRS): a second SET_ROWS with the same indices
// (a layer's K and V cache stores) runs in the same dispatch, its
// invocations after the first one's, from src0_b into dst_b.

#include "common/index"
#include "common/set_rows_index"

@group(0) @binding(0) var<storage, read_write> src0: array<f32>;
@group(0) @binding(1) var<storage, read_write> idx: array<SRC1_TYPE>;
@group(0) @binding(2) var<storage, read_write> dst: array<DST_TYPE>;
@group(0) @binding(3) var<storage, read_write> flag: array<atomic<u32>>;
#ifdef PAIR
@group(0) @binding(4) var<storage, read_write> src0_b: array<f32>;
@group(0) @binding(5) var<storage, read_write> dst_b: array<DST_TYPE>;
@group(0) @binding(6) var<uniform> p: Params;

// Element i of the second SET_ROWS, as main stores the first's.
fn store_second(i: u32) {
    if (i >= p.ne0_b * p.n_rows_b * p.ne2_b * p.ne3_b) {
        return;
    }
    let c = unravel(i, p.ne0_b, p.n_rows_b, p.ne2_b);
    let r = dst_row(c.y, c.z, c.w);
    if (r.y == 0u) {
        report(r.x);
        return;
    }
    let s = p.off_s_b + c.y * p.ss1_b + c.z * p.ss2_b + c.w * p.ss3_b;
    let d = p.off_d_b + r.x * p.sd1_b + c.z * p.sd2_b + c.w * p.sd3_b;
    dst_b[d + c.x * p.sd0_b] = DST_TYPE(src0_b[s + c.x * p.ss0_b]);
}
#else
@group(0) @binding(4) var<uniform> p: Params;
#endif

#ifdef PATH_PAIRS
// f32 -> bfloat16 bits, round to nearest even, NaN kept quiet (as ggml).
fn bfloat16_bits(x: f32) -> u32 {
    let u = bitcast<u32>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (u >> 16u) | 64u;
    }
    return (u + (0x7fffu + ((u >> 16u) & 1u))) >> 16u;
}
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
#ifdef PATH_PAIRS
    let width = p.ne0 / 2u;
#else
    let width = p.ne0;
#endif
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    let first = width * p.n_rows * p.ne2 * p.ne3;
#ifdef PAIR
    if (i >= first) {
        store_second(i - first);
        return;
    }
#endif
    if (i >= first) {
        return;
    }
    let c = unravel(i, width, p.n_rows, p.ne2);
    let r = dst_row(c.y, c.z, c.w);
    if (r.y == 0u) {
        report(r.x);
        return;
    }
    let s = p.off_s + c.y * p.ss1 + c.z * p.ss2 + c.w * p.ss3;
    let d = p.off_d + r.x * p.sd1 + c.z * p.sd2 + c.w * p.sd3;
#ifdef PATH_PAIRS
    let lo = bfloat16_bits(src0[s + 2u * c.x * p.ss0]);
    let hi = bfloat16_bits(src0[s + (2u * c.x + 1u) * p.ss0]);
    dst[d + c.x * p.sd0] = lo | (hi << 16u);
#else
    dst[d + c.x * p.sd0] = DST_TYPE(src0[s + c.x * p.ss0]);
#endif
}
