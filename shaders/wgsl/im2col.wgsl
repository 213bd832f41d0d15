// IM2COL, as ggml_im2col: dst[(c*KH + ky)*KW + kx, ox, oy, n] =
// input[ox*s0 + kx*d0 - p0, oy*s1 + ky*d1 - p1, c, n], zero outside. The
// host maps 1-D onto this with KH = IH = OH = 1 (the height tap is then
// -p1, as in ggml). One invocation per destination element; strides and
// offsets in elements. DST_TYPE: f32 or the half type.

#include "common/index"

struct Params {
    n_col: u32, ow: u32, oh: u32, n: u32,
    kw: u32, kh: u32, iw: u32, ih: u32,
    s0: u32, s1: u32, p0: u32, p1: u32, d0: u32, d1: u32,
    x_off: u32, x_sw: u32, x_sh: u32, x_sc: u32, x_sn: u32,
    d_off: u32, d_s0: u32, d_s1: u32, d_s2: u32, d_s3: u32,
}

@group(0) @binding(0) var<storage, read_write> xbuf: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<DST_TYPE>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= p.n_col * p.ow * p.oh * p.n) {
        return;
    }
    let e = unravel(i, p.n_col, p.ow, p.oh);
    let kx = e.x % p.kw;
    let ky = (e.x / p.kw) % p.kh;
    let c = e.x / (p.kw * p.kh);
    let ix = i32(e.y * p.s0 + kx * p.d0) - i32(p.p0);
    let iy = i32(e.z * p.s1 + ky * p.d1) - i32(p.p1);
    var v = 0.0;
    if (ix >= 0 && ix < i32(p.iw) && iy >= 0 && iy < i32(p.ih)) {
        v = xbuf[p.x_off + u32(ix) * p.x_sw + u32(iy) * p.x_sh + c * p.x_sc + e.w * p.x_sn];
    }
    dst[p.d_off + e.x * p.d_s0 + e.y * p.d_s1 + e.z * p.d_s2 + e.w * p.d_s3] = DST_TYPE(v);
}
