// NORM, RMS_NORM and L2_NORM of f32 rows: one workgroup per row, strides
// and offsets in elements. OP_NORM: (x - mean) / sqrt(var + eps);
// OP_RMS_NORM: x / sqrt(mean(x^2) + eps); OP_L2_NORM: x / max(|x|, eps).
// INPLACE: the destination is the source.

#include "common/index"
#include "common/row_reduce"

struct Params {
    ne0: u32, ne1: u32, ne2: u32, ne3: u32,
    off_a: u32, sa0: u32, sa1: u32, sa2: u32, sa3: u32,
    off_d: u32, sd0: u32, sd1: u32, sd2: u32, sd3: u32,
    eps: f32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<f32>;
#ifdef INPLACE
#define dst src0
@group(0) @binding(1) var<uniform> p: Params;
#else
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = row_of(wid, nwg);
    if (row >= p.ne1 * p.ne2 * p.ne3) {
        return;
    }
    let r = unravel(row, p.ne1, p.ne2, p.ne3);
    let base_a = p.off_a + r.x * p.sa1 + r.y * p.sa2 + r.z * p.sa3;
    let base_d = p.off_d + r.x * p.sd1 + r.y * p.sd2 + r.z * p.sd3;
    let n = f32(p.ne0);

#ifdef OP_NORM
    var s = 0.0;
    for (var i = lid; i < p.ne0; i += WG_SIZE) {
        s += src0[base_a + i * p.sa0];
    }
    let mean = wg_sum(s, lid) / n;
    var v = 0.0;
    for (var i = lid; i < p.ne0; i += WG_SIZE) {
        let x = src0[base_a + i * p.sa0] - mean;
        v += x * x;
    }
    let scale = 1.0 / sqrt(wg_sum(v, lid) / n + p.eps);
#else
    var s = 0.0;
    for (var i = lid; i < p.ne0; i += WG_SIZE) {
        let x = src0[base_a + i * p.sa0];
        s += x * x;
    }
    let total = wg_sum(s, lid);
    let mean = 0.0;
#ifdef OP_RMS_NORM
    let scale = 1.0 / sqrt(total / n + p.eps);
#else
    let scale = 1.0 / max(sqrt(total), p.eps);
#endif
#endif

    for (var i = lid; i < p.ne0; i += WG_SIZE) {
        dst[base_d + i * p.sd0] = (src0[base_a + i * p.sa0] - mean) * scale;
    }
}
