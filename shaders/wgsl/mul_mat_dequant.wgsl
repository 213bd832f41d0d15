// MUL_MAT weights of any layout of mul_mat_common (block-quantized, f32)
// rewritten as dense half rows for the cooperative-matrix kernel, which
// then stages plain halves instead of decoding the same weights again for
// every column tile: weights 4 j .. 4 j + 3 of row m of weight batch
// (i2, i3) go to vec4 ((i3 * ne02 + i2) * M + m) * k4 + j, where K % 4
// == 0 and k4 = K / 4. Offsets and strides in the layout's units.
//
// Invocation i converts item i % per_row of row i / per_row: with UNITS
// (k-quants), unit u of q_unit (16 weights whose scales it decodes once:
// per_row = K / 16); otherwise run j (4 weights: per_row = k4), which
// keeps neighbouring invocations' loads and stores adjacent. On an H200
// (4096 x 14336): q4_K 130 us by runs of four per invocation, 82 us by
// units; q8_0 78 us by runs, 137 by units.

#include "mul_mat_common"
#include "common/index"

struct Params {
    per_row: u32, m: u32, ne02: u32, total: u32,
    w_off: u32, w_s1: u32, w_s2: u32, w_s3: u32,
}

#ifdef W_VEC4
@group(0) @binding(0) var<storage, read_write> src0: array<vec4<SRC0_TYPE>>;
#else
@group(0) @binding(0) var<storage, read_write> src0: array<SRC0_TYPE>;
#endif
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f16>>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= p.total) {
        return;
    }
    let c = unravel(i, p.per_row, p.m, p.ne02);
    let row = p.w_off + c.w * p.w_s3 + c.z * p.w_s2 + c.y * p.w_s1;
#ifdef UNITS
    // Row r of the result starts at vec4 r * 4 * per_row.
    let blk = c.x / QUANT_UNITS;
    let u = c.x % QUANT_UNITS;
    let w = q_unit(row + blk * QUANT_BLOCK_BYTES, u);
    let out = (i - c.x) * 4u + blk * (QUANT_BLOCK_K / 4u);
    for (var r = 0u; r < 4u; r++) {
        dst[out + q_unit_k(u, r) / 4u] = vec4<f16>(w[r]);
    }
#else
    dst[i] = vec4<f16>(w_run(row, 4u * c.x, 4u * p.per_row));
#endif
}
