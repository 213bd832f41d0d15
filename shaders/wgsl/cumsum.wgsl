// CUMSUM: inclusive prefix sum of f32 rows, one workgroup per row. Each
// invocation sums a contiguous segment of the row, the segment totals are
// scanned in workgroup memory, then each invocation writes its segment
// starting from the sum of the segments before it. Strides in elements.

#include "common/index"
#include "common/row_reduce"

struct Params {
    ne0: u32, ne1: u32, ne2: u32, ne3: u32,
    off_a: u32, sa0: u32, sa1: u32, sa2: u32, sa3: u32,
    off_d: u32, sd0: u32, sd1: u32, sd2: u32, sd3: u32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<f32>;
#ifdef INPLACE
#define dst src0
@group(0) @binding(1) var<uniform> p: Params;
#else
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
#endif

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
    let seg = (p.ne0 + WG_SIZE - 1u) / WG_SIZE;
    let begin = min(lid * seg, p.ne0);
    let end = min(begin + seg, p.ne0);

    var local = 0.0;
    for (var i = begin; i < end; i++) {
        local += src0[base_a + i * p.sa0];
    }
    // Inclusive Hillis-Steele scan of the segment totals.
    row_red[lid] = local;
    workgroupBarrier();
    for (var off = 1u; off < WG_SIZE; off = off << 1u) {
        var v = 0.0;
        if (lid >= off) {
            v = row_red[lid - off];
        }
        workgroupBarrier();
        row_red[lid] = row_red[lid] + v;
        workgroupBarrier();
    }
    var run = 0.0;
    if (lid > 0u) {
        run = row_red[lid - 1u];
    }
    for (var i = begin; i < end; i++) {
        run += src0[base_a + i * p.sa0];
        dst[base_d + i * p.sd0] = run;
    }
}
