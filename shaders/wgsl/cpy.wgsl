// CPY / CONT of plain types: element k of src0 in logical order (dim 0
// fastest) goes to element k of dst, converted with DST_TYPE(...) (floats
// round, f32/f16 -> i32 truncates toward zero as C's (int32_t) x). The two
// shapes may differ; only their element counts agree. One invocation per
// element; strides and offsets are in elements.

#include "common/index"

struct Params {
    n: u32,
    ne00: u32, ne01: u32, ne02: u32,
    off0: u32, s00: u32, s01: u32, s02: u32, s03: u32,
    ned0: u32, ned1: u32, ned2: u32,
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
    let a = unravel(i, p.ne00, p.ne01, p.ne02);
    let d = unravel(i, p.ned0, p.ned1, p.ned2);
    let v = src0[p.off0 + a.x * p.s00 + a.y * p.s01 + a.z * p.s02 + a.w * p.s03];
    dst[p.offd + d.x * p.sd0 + d.y * p.sd1 + d.z * p.sd2 + d.w * p.sd3] = DST_TYPE(v);
}
