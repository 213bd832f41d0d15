// SUM_ROWS of f32 rows (and each pass of SUM): one workgroup per row of
// src [ne0, ne1, ne2, ne3] writes the row's sum to dst[i1, i2, i3].
// Strides and offsets in elements.

#include "common/index"
#include "common/row_reduce"

struct Params {
    ne0: u32, ne1: u32, ne2: u32, ne3: u32,
    off_a: u32, sa0: u32, sa1: u32, sa2: u32, sa3: u32,
    off_d: u32, sd1: u32, sd2: u32, sd3: u32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = row_of(wid, nwg);
    if (row >= p.ne1 * p.ne2 * p.ne3) {
        return;
    }
    let r = unravel(row, p.ne1, p.ne2, p.ne3);
    let base = p.off_a + r.x * p.sa1 + r.y * p.sa2 + r.z * p.sa3;
    var s = 0.0;
    for (var i = lid; i < p.ne0; i += WG_SIZE) {
        s += src0[base + i * p.sa0];
    }
    let total = wg_sum(s, lid);
    if (lid == 0u) {
        dst[p.off_d + r.x * p.sd1 + r.y * p.sd2 + r.z * p.sd3] = total;
    }
}
