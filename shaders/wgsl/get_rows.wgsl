// GET_ROWS: dst[:, i10, i11, i12] = src0[:, idx[i10, i11, i12], i11 % ne02,
// i12 % ne03], converted to f32 (i32 rows stay i32). One invocation per
// element, or per run of 4 elements for block formats (dequantized with
// common/quant; source offsets in bytes then). An index outside
// 0..ne01 leaves its row unwritten and is reported through the error flag
// (node + 1 in word 0, the index in word 1). Other offsets and strides in
// elements (bfloat16: elements of the u32 words holding two).

#include "common/index"

#ifdef SRC0_QUANT
#define QUANT_BUF src0
#include "common/quant"
#endif

struct Params {
    ne00: u32, items: u32, ne10: u32, ne11: u32,
    total: u32, ne01: u32, ne02: u32, ne03: u32,
    s_off: u32, s1: u32, s2: u32, s3: u32,
    i_off: u32, i_s0: u32, i_s1: u32, i_s2: u32,
    d_off: u32, d_s0: u32, d_s1: u32, d_s2: u32,
    d_s3: u32, node1: u32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<SRC0_TYPE>;
@group(0) @binding(1) var<storage, read_write> idx: array<i32>;
@group(0) @binding(2) var<storage, read_write> dst: array<DST_TYPE>;
@group(0) @binding(3) var<storage, read_write> flag: array<atomic<u32>>;
@group(0) @binding(4) var<uniform> p: Params;

#include "common/error_flag"

// Stores node + 1 and the bad index in the error flag (first report wins).
fn report(bad: u32) {
    report_error(p.node1, bad);
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= p.total) {
        return;
    }
    let c = unravel(i, p.items, p.ne10, p.ne11);
    let row = idx[p.i_off + c.y * p.i_s0 + c.z * p.i_s1 + c.w * p.i_s2];
    if (row < 0 || u32(row) >= p.ne01) {
        report(bitcast<u32>(row));
        return;
    }
    let base = p.s_off + u32(row) * p.s1 + (c.z % p.ne02) * p.s2 + (c.w % p.ne03) * p.s3;
    let out = p.d_off + c.y * p.d_s1 + c.z * p.d_s2 + c.w * p.d_s3;
#ifdef SRC0_QUANT
    let k = 4u * c.x;
    let v = q_run(base + (k / QUANT_BLOCK_K) * QUANT_BLOCK_BYTES, k % QUANT_BLOCK_K);
    dst[out + k * p.d_s0] = v.x;
    dst[out + (k + 1u) * p.d_s0] = v.y;
    dst[out + (k + 2u) * p.d_s0] = v.z;
    dst[out + (k + 3u) * p.d_s0] = v.w;
#elif defined(SRC0_BF16)
    let e = base + c.x;
    dst[out + c.x * p.d_s0] = bitcast<f32>(((src0[e >> 1u] >> ((e & 1u) * 16u)) & 0xFFFFu) << 16u);
#else
    dst[out + c.x * p.d_s0] = DST_TYPE(src0[base + c.x]);
#endif
}
