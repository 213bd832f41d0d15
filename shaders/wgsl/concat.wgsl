// CONCAT: dst joins src0 and src1 along dim p.dim; every other dim agrees.
// One invocation per destination element; strides and offsets in elements.

#include "common/index"

struct Params {
    n: u32,
    ne0: u32, ne1: u32, ne2: u32,
    dim: u32, ne_a_dim: u32,
    offa: u32, sa0: u32, sa1: u32, sa2: u32, sa3: u32,
    offb: u32, sb0: u32, sb1: u32, sb2: u32, sb3: u32,
    offd: u32, sd0: u32, sd1: u32, sd2: u32, sd3: u32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<SRC0_TYPE>;
@group(0) @binding(1) var<storage, read_write> src1: array<SRC1_TYPE>;
@group(0) @binding(2) var<storage, read_write> dst: array<DST_TYPE>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= p.n) {
        return;
    }
    let c = unravel(i, p.ne0, p.ne1, p.ne2);
    var v: DST_TYPE;
    if (c[p.dim] < p.ne_a_dim) {
        v = DST_TYPE(src0[p.offa + c.x * p.sa0 + c.y * p.sa1 + c.z * p.sa2 + c.w * p.sa3]);
    } else {
        var b = c;
        b[p.dim] = c[p.dim] - p.ne_a_dim;
        v = DST_TYPE(src1[p.offb + b.x * p.sb0 + b.y * p.sb1 + b.z * p.sb2 + b.w * p.sb3]);
    }
    dst[p.offd + c.x * p.sd0 + c.y * p.sd1 + c.z * p.sd2 + c.w * p.sd3] = v;
}
