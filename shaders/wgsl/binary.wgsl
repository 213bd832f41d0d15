// ADD / SUB / MUL / DIV with src1 broadcast over src0 (ggml semantics:
// each ne1[k] divides ne0[k]). One invocation per destination element;
// strides and offsets are in elements. INPLACE: the destination is src0.

#include "common/index"

struct Params {
    ne0: u32, ne1: u32, ne2: u32, ne3: u32,
    off0: u32, s00: u32, s01: u32, s02: u32, s03: u32,
    off1: u32, ne10: u32, ne11: u32, ne12: u32, ne13: u32,
    s10: u32, s11: u32, s12: u32, s13: u32,
    offd: u32, sd0: u32, sd1: u32, sd2: u32, sd3: u32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<SRC0_TYPE>;
@group(0) @binding(1) var<storage, read_write> src1: array<SRC1_TYPE>;
#ifdef INPLACE
@group(0) @binding(2) var<uniform> p: Params;
#else
@group(0) @binding(2) var<storage, read_write> dst: array<DST_TYPE>;
@group(0) @binding(3) var<uniform> p: Params;
#endif

fn apply(a: f32, b: f32) -> f32 {
#ifdef OP_ADD
    return a + b;
#elif defined(OP_SUB)
    return a - b;
#elif defined(OP_MUL)
    return a * b;
#else
    return a / b;
#endif
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= p.ne0 * p.ne1 * p.ne2 * p.ne3) {
        return;
    }
    let c = unravel(i, p.ne0, p.ne1, p.ne2);
    let i_a = p.off0 + c.x * p.s00 + c.y * p.s01 + c.z * p.s02 + c.w * p.s03;
    let i_b = p.off1 + (c.x % p.ne10) * p.s10 + (c.y % p.ne11) * p.s11
        + (c.z % p.ne12) * p.s12 + (c.w % p.ne13) * p.s13;
    let v = apply(f32(src0[i_a]), f32(src1[i_b]));
#ifdef INPLACE
    src0[i_a] = SRC0_TYPE(v);
#else
    dst[p.offd + c.x * p.sd0 + c.y * p.sd1 + c.z * p.sd2 + c.w * p.sd3] = DST_TYPE(v);
#endif
}
