// CONV_2D (direct), as ggml_conv_2d_direct: out[ox, oy, co, n] =
// sum_{ci, ky, kx} kernel[kx, ky, ci, co] * input[ox*s0 + kx*d0 - p0,
// oy*s1 + ky*d1 - p1, ci, n], taps outside the input being zero. One
// invocation per output element; strides and offsets in elements.
// KERNEL_TYPE: f32 or the half type; input and output f32.

#include "common/index"

struct Params {
    ow: u32, oh: u32, cout: u32, n: u32,
    iw: u32, ih: u32, cin: u32, kw: u32, kh: u32,
    s0: u32, s1: u32, p0: u32, p1: u32, d0: u32, d1: u32,
    k_off: u32, k_s0: u32, k_s1: u32, k_s2: u32, k_s3: u32,
    x_off: u32, x_s0: u32, x_s1: u32, x_s2: u32, x_s3: u32,
    d_off: u32, d_s0: u32, d_s1: u32, d_s2: u32, d_s3: u32,
}

@group(0) @binding(0) var<storage, read_write> kbuf: array<KERNEL_TYPE>;
@group(0) @binding(1) var<storage, read_write> xbuf: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= p.ow * p.oh * p.cout * p.n) {
        return;
    }
    let c = unravel(i, p.ow, p.oh, p.cout);
    let ox = c.x;
    let oy = c.y;
    let co = c.z;
    let n = c.w;
    var acc = 0.0;
    for (var ci = 0u; ci < p.cin; ci++) {
        let k_plane = p.k_off + ci * p.k_s2 + co * p.k_s3;
        let x_plane = p.x_off + ci * p.x_s2 + n * p.x_s3;
        for (var ky = 0u; ky < p.kh; ky++) {
            // Signed tap: padding may put it above the input.
            let iy = i32(oy * p.s1 + ky * p.d1) - i32(p.p1);
            if (iy < 0 || iy >= i32(p.ih)) {
                continue;
            }
            for (var kx = 0u; kx < p.kw; kx++) {
                let ix = i32(ox * p.s0 + kx * p.d0) - i32(p.p0);
                if (ix < 0 || ix >= i32(p.iw)) {
                    continue;
                }
                let w = f32(kbuf[k_plane + kx * p.k_s0 + ky * p.k_s1]);
                acc += w * xbuf[x_plane + u32(ix) * p.x_s0 + u32(iy) * p.x_s1];
            }
        }
    }
    dst[p.d_off + ox * p.d_s0 + oy * p.d_s1 + co * p.d_s2 + n * p.d_s3] = acc;
}
