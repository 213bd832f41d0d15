// GLU: dst = act(x) * g, one invocation per destination element. x and g
// are read from src0 and src1, or (SPLIT) both from src0 at offsets the
// host chose (the two halves of each row, swapped or not). Strides and
// offsets are in elements; math is in f32.
// QUANTIZE (f32 dst, ne0 a multiple of 32): eight invocations per run of
// 32 values, four each, which also write dst as the integer mat-vec's
// quantized activations (ggml's q8_1 runs, exactly as mul_mat_quantize.wgsl
// makes them from dst) for the MUL_MAT that reads dst next.

#include "common/index"
#include "common/activations"
#include "common/glu_act"

struct Params {
    n: u32,
    ne0: u32, ne1: u32, ne2: u32,
    offx: u32, sx0: u32, sx1: u32, sx2: u32, sx3: u32,
    offg: u32, sg0: u32, sg1: u32, sg2: u32, sg3: u32,
    offd: u32, sd0: u32, sd1: u32, sd2: u32, sd3: u32,
    alpha: f32, limit: f32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<SRC0_TYPE>;
#ifdef SPLIT
@group(0) @binding(1) var<storage, read_write> dst: array<DST_TYPE>;
#ifdef QUANTIZE
@group(0) @binding(2) var<storage, read_write> buf_q: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;
#else
@group(0) @binding(2) var<uniform> p: Params;
#endif
#else
@group(0) @binding(1) var<storage, read_write> src1: array<SRC1_TYPE>;
@group(0) @binding(2) var<storage, read_write> dst: array<DST_TYPE>;
#ifdef QUANTIZE
@group(0) @binding(3) var<storage, read_write> buf_q: array<u32>;
@group(0) @binding(4) var<uniform> p: Params;
#else
@group(0) @binding(3) var<uniform> p: Params;
#endif
#endif

// The value of element c and its index in dst.
fn glu_at(c: vec4<u32>) -> f32 {
    let x = f32(src0[p.offx + c.x * p.sx0 + c.y * p.sx1 + c.z * p.sx2 + c.w * p.sx3]);
    let i_g = p.offg + c.x * p.sg0 + c.y * p.sg1 + c.z * p.sg2 + c.w * p.sg3;
#ifdef SPLIT
    let g = f32(src0[i_g]);
#else
    let g = f32(src1[i_g]);
#endif
    return glu_act(x, g, p.alpha, p.limit);
}

fn dst_at(c: vec4<u32>) -> u32 {
    return p.offd + c.x * p.sd0 + c.y * p.sd1 + c.z * p.sd2 + c.w * p.sd3;
}

#ifdef QUANTIZE
#include "common/q8_1_run"

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = linear_index(wid, nwg, lid, WG_SIZE);
    let run = t / 8u;
    let part = t % 8u;
    let live = run < p.n / 32u;
    var v = vec4<f32>(0.0);
    if (live) {
        for (var j = 0u; j < 4u; j++) {
            let c = unravel(32u * run + 4u * part + j, p.ne0, p.ne1, p.ne2);
            let y = glu_at(c);
            dst[dst_at(c)] = y;
            v[j] = y;
        }
    }
    let r = q8_1_part(v, lid);
    if (live) {
        q8_1_store(run, part, r);
    }
}
#else
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= p.n) {
        return;
    }
    let c = unravel(i, p.ne0, p.ne1, p.ne2);
    dst[dst_at(c)] = DST_TYPE(glu_at(c));
}
#endif
