// One run of 32 activations quantized as ggml's q8_1 for the integer
// mat-vec (mul_mat_quantize.wgsl gives the run's 12 words: 8 of quants,
// then bits(d), bits(d * sum(q)), 0, 0). Eight neighbouring invocations
// share a run, four values each; the run's maximum and sum go through
// workgroup memory. The includer defines WG_SIZE, and every invocation of
// the workgroup calls q8_1_part at the same point (it holds barriers).

var<workgroup> q8_max: array<f32, WG_SIZE>;
var<workgroup> q8_sum: array<i32, WG_SIZE>;

struct Q8Part {
    // This invocation's four quants, packed: word `lid % 8` of the run.
    quants: u32,
    // bits(d) and bits(d * sum(q)) of the run: its words 8 and 9.
    d: u32,
    s: u32,
}

// Quantizes `v`, values 4 (lid % 8) .. 4 (lid % 8) + 3 of a run.
fn q8_1_part(v: vec4<f32>, lid: u32) -> Q8Part {
    let a = abs(v);
    q8_max[lid] = max(max(a.x, a.y), max(a.z, a.w));
    workgroupBarrier();
    let first = lid & ~7u;
    var amax = 0.0;
    for (var j = 0u; j < 8u; j++) {
        amax = max(amax, q8_max[first + j]);
    }
    let d = amax / 127.0;
    let id = select(0.0, 1.0 / d, d > 0.0);
    let q = vec4<i32>(round(v * id));
    q8_sum[lid] = q.x + q.y + q.z + q.w;
    workgroupBarrier();
    var sum = 0;
    for (var j = 0u; j < 8u; j++) {
        sum += q8_sum[first + j];
    }
    return Q8Part(pack4xI8(q), bitcast<u32>(d), bitcast<u32>(d * f32(sum)));
}
