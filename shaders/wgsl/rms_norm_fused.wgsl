// RMS_NORM fused with the nodes around it, one workgroup per f32 row
// (the host's fusion plan: backends/webgpu/src/ops/fusion.rs):
// FUSE_ADD: the row is first s = x + b (b broadcast over x), written out;
// FUSE_MUL: the normalised row n is multiplied by w (broadcast) into dst;
// KEEP_NORM: n itself is written too (whenever dst does not replace it);
// QUANTIZE: dst is also written as the integer mat-vec's quantized
// activations (ggml's q8_1 runs, exactly as mul_mat_quantize.wgsl makes
// them; ne0 a multiple of 32), for the MUL_MATs that read dst next.
// Each value is computed as the separate ADD, RMS_NORM and MUL kernels
// compute it, in the same order, so the results are the same bits.
//
// Every tensor role has its own offset and strides (in elements). The host
// binds each distinct memory region once: BIND_<ROLE> is a role's binding
// number, and a role whose tensor is exactly another's (an in-place node)
// is instead defined as that role's array. An invocation only ever reads
// back elements it wrote itself, so such aliasing is safe.

#include "common/index"
#include "common/row_reduce"

struct Params {
    ne0: u32, ne1: u32, ne2: u32, ne3: u32,
    off_x: u32, sx0: u32, sx1: u32, sx2: u32, sx3: u32,
    off_b: u32, nb0: u32, nb1: u32, nb2: u32, nb3: u32,
    sb0: u32, sb1: u32, sb2: u32, sb3: u32,
    off_s: u32, ss0: u32, ss1: u32, ss2: u32, ss3: u32,
    off_w: u32, nw0: u32, nw1: u32, nw2: u32, nw3: u32,
    sw0: u32, sw1: u32, sw2: u32, sw3: u32,
    off_n: u32, sn0: u32, sn1: u32, sn2: u32, sn3: u32,
    off_d: u32, sd0: u32, sd1: u32, sd2: u32, sd3: u32,
    eps: f32,
}

#ifdef BIND_X
@group(0) @binding(BIND_X) var<storage, read_write> buf_x: array<f32>;
#endif
#ifdef BIND_B
@group(0) @binding(BIND_B) var<storage, read_write> buf_b: array<f32>;
#endif
#ifdef BIND_S
@group(0) @binding(BIND_S) var<storage, read_write> buf_s: array<f32>;
#endif
#ifdef BIND_W
@group(0) @binding(BIND_W) var<storage, read_write> buf_w: array<f32>;
#endif
#ifdef BIND_N
@group(0) @binding(BIND_N) var<storage, read_write> buf_n: array<f32>;
#endif
#ifdef BIND_D
@group(0) @binding(BIND_D) var<storage, read_write> buf_d: array<f32>;
#endif
#ifdef QUANTIZE
@group(0) @binding(BIND_Q) var<storage, read_write> buf_q: array<u32>;
#include "common/q8_1_run"
#endif
@group(0) @binding(BIND_P) var<uniform> p: Params;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = row_of(wid, nwg);
    if (row >= p.ne1 * p.ne2 * p.ne3) {
        return;
    }
    let r = unravel(row, p.ne1, p.ne2, p.ne3);
    let base_x = p.off_x + r.x * p.sx1 + r.y * p.sx2 + r.z * p.sx3;
    let n = f32(p.ne0);

    var s = 0.0;
#ifdef FUSE_ADD
    let base_b = p.off_b + (r.x % p.nb1) * p.sb1 + (r.y % p.nb2) * p.sb2
        + (r.z % p.nb3) * p.sb3;
    let base_s = p.off_s + r.x * p.ss1 + r.y * p.ss2 + r.z * p.ss3;
    for (var i = lid; i < p.ne0; i += WG_SIZE) {
        let v = buf_x[base_x + i * p.sx0] + buf_b[base_b + (i % p.nb0) * p.sb0];
        buf_s[base_s + i * p.ss0] = v;
        s += v * v;
    }
#else
    for (var i = lid; i < p.ne0; i += WG_SIZE) {
        let v = buf_x[base_x + i * p.sx0];
        s += v * v;
    }
#endif
    let total = wg_sum(s, lid);
    let scale = 1.0 / sqrt(total / n + p.eps);

#ifdef KEEP_NORM
    let base_n = p.off_n + r.x * p.sn1 + r.y * p.sn2 + r.z * p.sn3;
#endif
#ifdef FUSE_MUL
    let base_w = p.off_w + (r.x % p.nw1) * p.sw1 + (r.y % p.nw2) * p.sw2
        + (r.z % p.nw3) * p.sw3;
    let base_d = p.off_d + r.x * p.sd1 + r.y * p.sd2 + r.z * p.sd3;
#endif
    for (var i = lid; i < p.ne0; i += WG_SIZE) {
#ifdef FUSE_ADD
        let v = buf_s[base_s + i * p.ss0];
#else
        let v = buf_x[base_x + i * p.sx0];
#endif
        let y = v * scale;
#ifdef KEEP_NORM
        buf_n[base_n + i * p.sn0] = y;
#endif
#ifdef FUSE_MUL
        buf_d[base_d + i * p.sd0] = y * buf_w[base_w + (i % p.nw0) * p.sw0];
#endif
    }

#ifdef QUANTIZE
    // The row's runs of 32, eight invocations a run, four values each, as
    // mul_mat_quantize computes them from dst read back.
    storageBarrier();
    let runs = p.ne0 / 32u;
    let part = lid % 8u;
    for (var r0 = 0u; r0 < runs; r0 += WG_SIZE / 8u) {
        let run = r0 + lid / 8u;
        let live = run < runs;
        var v = vec4<f32>(0.0);
        if (live) {
            let at = base_d + (32u * run + 4u * part) * p.sd0;
            v = vec4<f32>(buf_d[at], buf_d[at + p.sd0], buf_d[at + 2u * p.sd0], buf_d[at + 3u * p.sd0]);
        }
        let r = q8_1_part(v, lid);
        if (live) {
            let out = row * runs + run;
            buf_q[12u * out + part] = r.quants;
            if (part == 0u) {
                buf_q[12u * out + 8u] = r.d;
                buf_q[12u * out + 9u] = r.s;
                buf_q[12u * out + 10u] = 0u;
                buf_q[12u * out + 11u] = 0u;
            }
        }
        workgroupBarrier();
    }
#endif
}
