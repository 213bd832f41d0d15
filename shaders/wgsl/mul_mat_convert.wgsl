// MUL_MAT activations (src1, f32 or half, any strides) copied to DST_TYPE
// (f32, or half for the cooperative-matrix kernel) rows of k4 = K rounded
// up to 4 elements, zero past K: x[k, n, i2, i3] at
// ((i3 * ne12 + i2) * N + n) * k4 + k. The matmul kernels read the result
// as aligned vec4s. Strides and offset in elements of the source.
//
// VEC4 (rows dense, K % 4 == 0, offset and strides multiples of 4
// elements): each invocation copies 4 elements; k, k4, total, offset and
// strides are then in vec4s.

#include "common/index"

struct Params {
    k: u32, k4: u32, n: u32, ne12: u32,
    total: u32, off: u32, s0: u32, s1: u32, s2: u32, s3: u32,
}

#ifdef VEC4
alias In = vec4<SRC1_TYPE>;
alias Out = vec4<DST_TYPE>;
alias Value = vec4<f32>;
#else
alias In = SRC1_TYPE;
alias Out = DST_TYPE;
alias Value = f32;
#endif

@group(0) @binding(0) var<storage, read_write> src1: array<In>;
@group(0) @binding(1) var<storage, read_write> dst: array<Out>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= p.total) {
        return;
    }
    let c = unravel(i, p.k4, p.n, p.ne12);
    var v = Value(0.0);
    if (c.x < p.k) {
        v = Value(src1[p.off + c.x * p.s0 + c.y * p.s1 + c.z * p.s2 + c.w * p.s3]);
    }
    dst[i] = Out(v);
}
