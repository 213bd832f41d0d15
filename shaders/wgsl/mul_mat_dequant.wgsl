// MUL_MAT weights of any layout of mul_mat_common (block-quantized, f32)
// rewritten as dense half rows for the cooperative-matrix kernel, which
// then stages plain halves instead of decoding the same weights again for
// every column tile: weights 4 j .. 4 j + 3 of row m of weight batch
// (i2, i3) go to vec4 ((i3 * ne02 + i2) * M + m) * k4 + j, where K % 4
// == 0 and k4 = K / 4. Offsets and strides in the layout's units.
//
// Invocation i converts item i % per_row of row i / per_row:
// - W_QUANT: unit u of q_unit (16 weights whose bytes and scales it reads
//   once; per_row = K / 16). The workgroup's units fill 4 * WG_SIZE
//   consecutive vec4s of the result (a workgroup starts on a block, since
//   per_row and WG_SIZE are multiples of QUANT_UNITS), so they are put in
//   workgroup memory first and stored from there a vec4 per invocation at
//   a time, neighbours side by side. On an H200, 4096 x 14336, us per
//   call: q4_0 83 / 52, q8_0 78 / 55, q4_K 130 / 76 by runs of 4 / by
//   staged units (q8_0 took 137 with each unit's 32 bytes stored straight
//   from its invocation). With W_DENSE (rows stored contiguously, which
//   the host checks) unit i is unit i % QUANT_UNITS of block
//   i / QUANT_UNITS of the whole tensor. With W_SPLIT (q4_0 or q4_K
//   stored split, backends/webgpu/src/split.rs: one dense matrix,
//   QUANT_BUF_VEC4) block b = i / QUANT_UNITS has its quants at
//   w_off + QUANT_QS_BYTES b and its head at w_scales + QUANT_HEAD_BYTES b:
//   read in place, no join first.
// - otherwise run j (4 weights; per_row = k4): neighbouring invocations'
//   loads and stores are adjacent. With W_DENSE (W_VEC4 rows stored
//   contiguously, which the host checks) run i of the result is simply
//   run w_off + i of the weights.

#include "mul_mat_common"
#include "common/index"

struct Params {
    per_row: u32, m: u32, ne02: u32, total: u32,
    w_off: u32, w_s1: u32, w_s2: u32, w_s3: u32,
#ifdef W_SPLIT
    w_scales: u32,
#endif
}

#include "common/weights_binding"
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f16>>;
@group(0) @binding(2) var<uniform> p: Params;

#ifdef W_QUANT
var<workgroup> staged: array<vec4<f16>, 4u * WG_SIZE>;
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
#ifdef W_QUANT
    let first = i - lid;
    if (i < p.total) {
#ifdef W_SPLIT
        let b = i / QUANT_UNITS;
        let u = i % QUANT_UNITS;
        let w = q_unit_at(p.w_off + QUANT_QS_BYTES * b, p.w_scales + QUANT_HEAD_BYTES * b, u);
#elif defined(W_DENSE)
        // Contiguous rows: unit i lies in block i / QUANT_UNITS of the
        // whole tensor.
        let block = p.w_off + (i / QUANT_UNITS) * QUANT_BLOCK_BYTES;
        let u = i % QUANT_UNITS;
#else
        let c = unravel(i, p.per_row, p.m, p.ne02);
        let row = p.w_off + c.w * p.w_s3 + c.z * p.w_s2 + c.y * p.w_s1;
        let block = row + (c.x / QUANT_UNITS) * QUANT_BLOCK_BYTES;
        let u = c.x % QUANT_UNITS;
#endif
#ifndef W_SPLIT
        let w = q_unit(block, u);
#endif
        // The block's first vec4 relative to the workgroup's: invocation
        // lid - u holds its unit 0 (blocks are QUANT_UNITS units of 4
        // vec4s, and the workgroup starts on a block); then the runs'
        // places in the block.
        let at = 4u * (lid - u);
        for (var r = 0u; r < 4u; r++) {
            staged[at + q_unit_k(u, r) / 4u] = vec4<f16>(w[r]);
        }
    }
    workgroupBarrier();
    let end = 4u * p.total;
    for (var r = 0u; r < 4u; r++) {
        let v = lid + r * WG_SIZE;
        if (4u * first + v < end) {
            dst[4u * first + v] = staged[v];
        }
    }
#else
    if (i >= p.total) {
        return;
    }
#ifdef W_DENSE
    // DENSE_RUNS runs per invocation, n = total / DENSE_RUNS (rounded up)
    // apart, so each load and store stays coalesced.
    let n = (p.total + DENSE_RUNS - 1u) / DENSE_RUNS;
    if (i >= n) {
        return;
    }
    var v: array<vec4<f16>, DENSE_RUNS>;
    for (var r = 0u; r < DENSE_RUNS; r++) {
        v[r] = vec4<f16>(src0[p.w_off + min(i + r * n, p.total - 1u)]);
    }
    for (var r = 0u; r < DENSE_RUNS; r++) {
        if (i + r * n < p.total) {
            dst[i + r * n] = v[r];
        }
    }
#else
    let c = unravel(i, p.per_row, p.m, p.ne02);
    let row = p.w_off + c.w * p.w_s3 + c.z * p.w_s2 + c.y * p.w_s1;
    dst[i] = vec4<f16>(w_run(row, 4u * c.x, 4u * p.per_row));
#endif
#endif
}
