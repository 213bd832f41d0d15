// Workgroup-wide sum and max for kernels that run one workgroup per row.
// Every invocation of the workgroup must call them, in uniform control
// flow; WG_SIZE must be a power of two. The result is returned to every
// invocation, and the scratch array is free again when they return.

var<workgroup> row_red: array<f32, WG_SIZE>;

fn wg_sum(v: f32, lid: u32) -> f32 {
    row_red[lid] = v;
    workgroupBarrier();
    for (var s = WG_SIZE / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            row_red[lid] = row_red[lid] + row_red[lid + s];
        }
        workgroupBarrier();
    }
    let r = row_red[0];
    workgroupBarrier();
    return r;
}

fn wg_max(v: f32, lid: u32) -> f32 {
    row_red[lid] = v;
    workgroupBarrier();
    for (var s = WG_SIZE / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            row_red[lid] = max(row_red[lid], row_red[lid + s]);
        }
        workgroupBarrier();
    }
    let r = row_red[0];
    workgroupBarrier();
    return r;
}

// The row handled by this workgroup (the host may split rows over x and y).
fn row_of(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}
