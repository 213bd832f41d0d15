// PAD (zero padding): dst element c is src0 at c - lp when lp <= c <
// lp + ne(src0) in every dim, else 0. One invocation per destination
// element; strides and offsets in elements.

#include "common/index"

struct Params {
    n: u32,
    ne0: u32, ne1: u32, ne2: u32,
    lp0: u32, lp1: u32, lp2: u32, lp3: u32,
    na0: u32, na1: u32, na2: u32, na3: u32,
    offa: u32, sa0: u32, sa1: u32, sa2: u32, sa3: u32,
    offd: u32, sd0: u32, sd1: u32, sd2: u32, sd3: u32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<SRC0_TYPE>;
@group(0) @binding(1) var<storage, read_write> dst: array<DST_TYPE>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= p.n) {
        return;
    }
    let c = unravel(i, p.ne0, p.ne1, p.ne2);
    let lp = vec4<u32>(p.lp0, p.lp1, p.lp2, p.lp3);
    let na = vec4<u32>(p.na0, p.na1, p.na2, p.na3);
    // c - lp wraps below zero, so one unsigned compare checks both sides.
    let a = c - lp;
    var v = DST_TYPE(0);
    if (all(a < na)) {
        v = DST_TYPE(src0[p.offa + a.x * p.sa0 + a.y * p.sa1 + a.z * p.sa2 + a.w * p.sa3]);
    }
    dst[p.offd + c.x * p.sd0 + c.y * p.sd1 + c.z * p.sd2 + c.w * p.sd3] = v;
}
