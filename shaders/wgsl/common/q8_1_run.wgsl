// One run of 32 activations quantized as ggml's q8_1 for the integer
// mat-vec (mul_mat_quantize.wgsl gives the run's 12 words: 8 of quants,
// then bits(d), bits(d * sum(q)), 0, 0). Eight neighbouring invocations
// share a run, four values each; the run's maximum and sum go through
// workgroup memory. The includer defines WG_SIZE, and every invocation of
// the workgroup calls q8_1_part at the same point (it holds barriers).
// Q8_LANES: the includer knows that the eight invocations of a run are
// lanes 8j .. 8j + 7 of one subgroup (`lid % 8` their lane % 8); the
// maximum and the sum then go through subgroup shuffles, without
// barriers or workgroup memory (the same bits: a maximum and an integer
// sum do not depend on the order).
// q8_1_store writes a part into `buf_q`, the includer's array<u32> of runs.

#ifndef Q8_LANES
var<workgroup> q8_max: array<f32, WG_SIZE>;
var<workgroup> q8_sum: array<i32, WG_SIZE>;
#endif

struct Q8Part {
    // This invocation's four quants, packed: word `lid % 8` of the run.
    quants: u32,
    // bits(d) and bits(d * sum(q)) of the run: its words 8 and 9.
    d: u32,
    s: u32,
}

// The quants of `v` in a run whose largest magnitude is amax.
fn q8_1_quants(v: vec4<f32>, amax: f32) -> vec4<i32> {
    let d = amax / 127.0;
    let id = select(0.0, 1.0 / d, d > 0.0);
    return vec4<i32>(round(v * id));
}

// The part of the run this invocation gives: its packed quants, d and
// d * sum(q) of the run.
fn q8_1_result(q: vec4<i32>, amax: f32, sum: i32) -> Q8Part {
    let d = amax / 127.0;
    return Q8Part(pack4xI8(q), bitcast<u32>(d), bitcast<u32>(d * f32(sum)));
}

// Quantizes `v`, values 4 (lid % 8) .. 4 (lid % 8) + 3 of a run.
fn q8_1_part(v: vec4<f32>, lid: u32) -> Q8Part {
    let a = abs(v);
    let own_max = max(max(a.x, a.y), max(a.z, a.w));
#ifdef Q8_LANES
    var amax = own_max;
    for (var m = 1u; m < 8u; m = m << 1u) {
        amax = max(amax, subgroupShuffleXor(amax, m));
    }
    let q = q8_1_quants(v, amax);
    var sum = q.x + q.y + q.z + q.w;
    for (var m = 1u; m < 8u; m = m << 1u) {
        sum += subgroupShuffleXor(sum, m);
    }
#else
    q8_max[lid] = own_max;
    workgroupBarrier();
    let first = lid & ~7u;
    var amax = 0.0;
    for (var j = 0u; j < 8u; j++) {
        amax = max(amax, q8_max[first + j]);
    }
    let q = q8_1_quants(v, amax);
    q8_sum[lid] = q.x + q.y + q.z + q.w;
    workgroupBarrier();
    var sum = 0;
    for (var j = 0u; j < 8u; j++) {
        sum += q8_sum[first + j];
    }
#endif
    return q8_1_result(q, amax, sum);
}

// Stores part `part` of run `run` into buf_q: word `part` of the run's
// quants; the first part also d, s and the two padding words.
fn q8_1_store(run: u32, part: u32, r: Q8Part) {
    buf_q[12u * run + part] = r.quants;
    if (part == 0u) {
        buf_q[12u * run + 8u] = r.d;
        buf_q[12u * run + 9u] = r.s;
        buf_q[12u * run + 10u] = 0u;
        buf_q[12u * run + 11u] = 0u;
    }
}
