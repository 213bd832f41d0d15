// SSM_CONV (Mamba causal depthwise convolution), as ggml:
// out[r, t, s] = sum_k sx[t + k, r, s] * c[k, r] for sx [d_conv - 1 + n_t,
// d_inner, n_s], c [d_conv, d_inner], out [d_inner, n_t, n_s]. One
// invocation per output element; strides and offsets in elements.

#include "common/index"

struct Params {
    n_r: u32, n_t: u32, n_s: u32, d_conv: u32,
    x_off: u32, x_s0: u32, x_s1: u32, x_s2: u32,
    c_off: u32, c_s0: u32, c_s1: u32,
    d_off: u32, d_s0: u32, d_s1: u32, d_s2: u32,
}

@group(0) @binding(0) var<storage, read_write> sx: array<f32>;
@group(0) @binding(1) var<storage, read_write> cw: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= p.n_r * p.n_t * p.n_s) {
        return;
    }
    let r = i % p.n_r;
    let t = (i / p.n_r) % p.n_t;
    let s = i / (p.n_r * p.n_t);
    let x_row = p.x_off + t * p.x_s0 + r * p.x_s1 + s * p.x_s2;
    let c_row = p.c_off + r * p.c_s1;
    var sum = 0.0;
    for (var k = 0u; k < p.d_conv; k++) {
        sum += sx[x_row + k * p.x_s0] * cw[c_row + k * p.c_s0];
    }
    dst[p.d_off + r * p.d_s0 + t * p.d_s1 + s * p.d_s2] = sum;
}
