// MUL_MAT activations (src1, f32 or half, any strides) quantized for the
// integer mat-vec kernel (mul_mat_vec with X_Q8), as ggml's q8_1: every
// run of 32 values of a row becomes 32 signed bytes q = round(x / d) with
// d = max|x| / 127, packed four to a word, plus d and s = d * sum(q).
// Run b of row (n, i2, i3) is the 12 words at
// 12 * (((i3 * ne12 + i2) * N + n) * runs + b): 8 words of quants, then
// bits(d), bits(s), 0, 0 (three vec4<u32> for the reader).
// Eight invocations share a run, four values each; the maximum and the sum
// go through workgroup memory. K is a multiple of 32 (the weights' block).
// Strides and offset in elements of the source.

#include "common/index"

struct Params {
    runs: u32, n: u32, ne12: u32, total: u32,
    off: u32, s0: u32, s1: u32, s2: u32, s3: u32,
}

@group(0) @binding(0) var<storage, read_write> src1: array<SRC1_TYPE>;
@group(0) @binding(1) var<storage, read_write> buf_q: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

#include "common/q8_1_run"

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = linear_index(wid, nwg, lid, WG_SIZE);
    let run = t / 8u;
    let part = t % 8u;
    let live = run < p.total;
    var v = vec4<f32>(0.0);
    if (live) {
        let c = unravel(run, p.runs, p.n, p.ne12);
        let base = p.off + (32u * c.x + 4u * part) * p.s0 + c.y * p.s1 + c.z * p.s2 + c.w * p.s3;
        v = vec4<f32>(f32(src1[base]), f32(src1[base + p.s0]), f32(src1[base + 2u * p.s0]), f32(src1[base + 3u * p.s0]));
    }
    let r = q8_1_part(v, lid);
    if (live) {
        q8_1_store(run, part, r);
    }
}
