// Sums the partial products of a cooperative-matrix MUL_MAT split along K
// (mul_mat_coopmat with SPLIT_K) into dst. The partials are `splits`
// dense planes of m_full x n_full x batches f32 (m fastest); element i of
// a plane is dst[m, n, i12, i13] for (m, n, i12, i13) = unravel(i,
// m_full, n_full, ne12). Offset and strides of dst in f32s.

#include "common/index"

struct Params {
    m_full: u32, n_full: u32, ne12: u32, total: u32,
    splits: u32, d_off: u32, d_s1: u32, d_s2: u32, d_s3: u32,
}

@group(0) @binding(0) var<storage, read_write> part: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= p.total) {
        return;
    }
    var sum = 0.0;
    for (var s = 0u; s < p.splits; s++) {
        sum += part[s * p.total + i];
    }
    let c = unravel(i, p.m_full, p.n_full, p.ne12);
    dst[p.d_off + c.w * p.d_s3 + c.z * p.d_s2 + c.y * p.d_s1 + c.x] = sum;
}
