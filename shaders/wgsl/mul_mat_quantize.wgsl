// MUL_MAT activations (src1, f32 or half, any strides) quantized for the
// integer mat-vec kernel (mul_mat_vec with X_Q8), as ggml's q8_1: every
// run of 32 values of a row becomes 32 signed bytes q = round(x / d) with
// d = max|x| / 127, packed four to a word, plus d and s = d * sum(q).
// One invocation per run; run b of row (n, i2, i3) is the three vec4<u32>
// at 3 * (((i3 * ne12 + i2) * N + n) * runs + b): [q0..q15], [q16..q31],
// [bits(d), bits(s), 0, 0]. K is a multiple of 32 (the weights' block).
// Strides and offset in elements of the source.

#include "common/index"

struct Params {
    runs: u32, n: u32, ne12: u32, total: u32,
    off: u32, s0: u32, s1: u32, s2: u32, s3: u32,
}

@group(0) @binding(0) var<storage, read_write> src1: array<SRC1_TYPE>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= p.total) {
        return;
    }
    let c = unravel(i, p.runs, p.n, p.ne12);
    let base = p.off + 32u * c.x * p.s0 + c.y * p.s1 + c.z * p.s2 + c.w * p.s3;
    var v: array<f32, 32>;
    var amax = 0.0;
    for (var j = 0u; j < 32u; j++) {
        v[j] = f32(src1[base + j * p.s0]);
        amax = max(amax, abs(v[j]));
    }
    let d = amax / 127.0;
    let id = select(0.0, 1.0 / d, d > 0.0);
    var words: array<u32, 8>;
    var sum = 0;
    for (var w = 0u; w < 8u; w++) {
        let q = vec4<i32>(round(vec4<f32>(v[4u * w], v[4u * w + 1u], v[4u * w + 2u], v[4u * w + 3u]) * id));
        sum += q.x + q.y + q.z + q.w;
        words[w] = pack4xI8(q);
    }
    dst[3u * i] = vec4<u32>(words[0], words[1], words[2], words[3]);
    dst[3u * i + 1u] = vec4<u32>(words[4], words[5], words[6], words[7]);
    dst[3u * i + 2u] = vec4<u32>(bitcast<u32>(d), bitcast<u32>(d * f32(sum)), 0u, 0u);
}
