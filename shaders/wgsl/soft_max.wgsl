// SOFT_MAX of f32 rows: softmax(x * scale + slope * mask) with optional
// per-head sinks joining the denominator, one workgroup per row. The mask
// row is the row index i1; mask dims 2 and 3 broadcast by modulo. The ALiBi
// slope of head i2 is m0^(i2+1) for the first n_head_log2 heads and
// m1^(2(i2-n_head_log2)+1) after, 1 when max_bias is 0 (as ggml).
// Bindings (host-chosen indices): src0, [mask], [sinks], [dst], params.

#include "common/index"
#include "common/row_reduce"
#include "common/alibi"

struct Params {
    ne0: u32, ne1: u32, ne2: u32, ne3: u32,
    off_a: u32, sa0: u32, sa1: u32, sa2: u32, sa3: u32,
    off_d: u32, sd0: u32, sd1: u32, sd2: u32, sd3: u32,
    off_m: u32, sm0: u32, sm1: u32, sm2: u32, sm3: u32, nm2: u32, nm3: u32,
    off_s: u32, ss0: u32,
    scale: f32, max_bias: f32, m0: f32, m1: f32, n_head_log2: u32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<f32>;
#ifdef HAS_MASK
@group(0) @binding(BINDING_MASK) var<storage, read_write> mask: array<MASK_TYPE>;
#endif
#ifdef HAS_SINKS
@group(0) @binding(BINDING_SINKS) var<storage, read_write> sinks: array<f32>;
#endif
#ifdef INPLACE
#define dst src0
#else
@group(0) @binding(BINDING_DST) var<storage, read_write> dst: array<f32>;
#endif
@group(0) @binding(BINDING_PARAMS) var<uniform> p: Params;

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
#ifdef HAS_MASK
    let base_m = p.off_m + r.x * p.sm1 + (r.y % p.nm2) * p.sm2 + (r.z % p.nm3) * p.sm3;
    let slope = alibi_slope(r.y);
#endif

    // Pass 1: the scaled, masked logits into dst, and their maximum.
    var m = -3.4028235e38;
    for (var i = lid; i < p.ne0; i += WG_SIZE) {
        var w = src0[base_a + i * p.sa0] * p.scale;
#ifdef HAS_MASK
        w += slope * f32(mask[base_m + i * p.sm0]);
#endif
        dst[base_d + i * p.sd0] = w;
        m = max(m, w);
    }
    var row_max = wg_max(m, lid);
#ifdef HAS_SINKS
    let sink = sinks[p.off_s + r.y * p.ss0];
    row_max = max(row_max, sink);
#endif

    // Pass 2: exponentials and their sum.
    var s = 0.0;
    for (var i = lid; i < p.ne0; i += WG_SIZE) {
        let e = exp(dst[base_d + i * p.sd0] - row_max);
        dst[base_d + i * p.sd0] = e;
        s += e;
    }
    var total = wg_sum(s, lid);
#ifdef HAS_SINKS
    total += exp(sink - row_max);
#endif

    // Pass 3: normalise.
    let inv = 1.0 / total;
    for (var i = lid; i < p.ne0; i += WG_SIZE) {
        dst[base_d + i * p.sd0] = dst[base_d + i * p.sd0] * inv;
    }
}
