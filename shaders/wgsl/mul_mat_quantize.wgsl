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
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> part_max: array<f32, WG_SIZE>;
var<workgroup> part_sum: array<i32, WG_SIZE>;

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
    let a = abs(v);
    part_max[lid] = max(max(a.x, a.y), max(a.z, a.w));
    workgroupBarrier();
    let first = lid & ~7u;
    var amax = 0.0;
    for (var j = 0u; j < 8u; j++) {
        amax = max(amax, part_max[first + j]);
    }
    let d = amax / 127.0;
    let id = select(0.0, 1.0 / d, d > 0.0);
    let q = vec4<i32>(round(v * id));
    part_sum[lid] = q.x + q.y + q.z + q.w;
    workgroupBarrier();
    if (live) {
        dst[12u * run + part] = pack4xI8(q);
        if (part == 0u) {
            var sum = 0;
            for (var j = 0u; j < 8u; j++) {
                sum += part_sum[first + j];
            }
            dst[12u * run + 8u] = bitcast<u32>(d);
            dst[12u * run + 9u] = bitcast<u32>(d * f32(sum));
            dst[12u * run + 10u] = 0u;
            dst[12u * run + 11u] = 0u;
        }
    }
}
