// GLU: dst = act(x) * g, one invocation per destination element. x and g
// are read from src0 and src1, or (SPLIT) both from src0 at offsets the
// host chose (the two halves of each row, swapped or not). Strides and
// offsets are in elements; math is in f32.

#include "common/index"
#include "common/activations"

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
@group(0) @binding(2) var<uniform> p: Params;
#else
@group(0) @binding(1) var<storage, read_write> src1: array<SRC1_TYPE>;
@group(0) @binding(2) var<storage, read_write> dst: array<DST_TYPE>;
@group(0) @binding(3) var<uniform> p: Params;
#endif

fn act(x: f32, g: f32) -> f32 {
#ifdef OP_REGLU
    return select(0.0, x, x > 0.0) * g;
#elif defined(OP_GEGLU)
    return gelu_f32(x) * g;
#elif defined(OP_SWIGLU)
    return silu_f32(x) * g;
#elif defined(OP_GEGLU_ERF)
    return gelu_erf_f32(x) * g;
#elif defined(OP_GEGLU_QUICK)
    return gelu_quick_f32(x) * g;
#elif defined(OP_SWIGLU_OAI)
    // gpt-oss: x = min(x, limit), g = clamp(g, -limit, limit).
    let xl = min(x, p.limit);
    let gl = select(select(g, p.limit, p.limit < g), -p.limit, g < -p.limit);
    return xl / (1.0 + exp(p.alpha * -xl)) * (gl + 1.0);
#else
#error glu.wgsl: no OP_ variant defined
#endif
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= p.n) {
        return;
    }
    let c = unravel(i, p.ne0, p.ne1, p.ne2);
    let x = f32(src0[p.offx + c.x * p.sx0 + c.y * p.sx1 + c.z * p.sx2 + c.w * p.sx3]);
    let i_g = p.offg + c.x * p.sg0 + c.y * p.sg1 + c.z * p.sg2 + c.w * p.sg3;
#ifdef SPLIT
    let g = f32(src0[i_g]);
#else
    let g = f32(src1[i_g]);
#endif
    dst[p.offd + c.x * p.sd0 + c.y * p.sd1 + c.z * p.sd2 + c.w * p.sd3] = DST_TYPE(act(x, g));
}
