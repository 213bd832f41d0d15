// SET_ROWS into the 32-weight block formats (DST_Q4_0, DST_Q4_1, DST_Q5_0,
// DST_Q5_1, DST_Q8_0): one invocation quantizes one block of a source row
// exactly as ggml's quantize_row_*_ref (common/quantize.wgsl) and writes
// its bytes. Blocks are not word aligned, so the destination is bound as
// atomic words: whole words are stored, shared ones have their bytes
// cleared and set with atomicAnd and atomicOr (neighbours only touch their
// own bytes). Destination offset and strides (off_d, sd1..sd3) are in
// bytes; indices as in set_rows.wgsl.

#include "common/index"
#include "common/set_rows_index"

@group(0) @binding(0) var<storage, read_write> src0: array<f32>;
@group(0) @binding(1) var<storage, read_write> idx: array<SRC1_TYPE>;
@group(0) @binding(2) var<storage, read_write> dst: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> flag: array<atomic<u32>>;
@group(0) @binding(4) var<uniform> p: Params;

// The block being built, little-endian bytes packed in words.
var<private> blk: array<u32, 9>;

#define QUANT_OUT blk
#include "common/quantize"

// Writes the block's bytes at byte address `at` of dst.
fn store_block(at: u32) {
    let first = at / 4u;
    let last = (at + BLOCK_BYTES - 1u) / 4u;
    for (var w = first; w <= last; w++) {
        var mask = 0u;
        var bits = 0u;
        for (var lane = 0u; lane < 4u; lane++) {
            let g = w * 4u + lane;
            if (g >= at && g < at + BLOCK_BYTES) {
                let k = g - at;
                let b = (blk[k / 4u] >> ((k % 4u) * 8u)) & 0xffu;
                mask = mask | (0xffu << (lane * 8u));
                bits = bits | (b << (lane * 8u));
            }
        }
        if (mask == 0xffffffffu) {
            atomicStore(&dst[w], bits);
        } else {
            atomicAnd(&dst[w], ~mask);
            atomicOr(&dst[w], bits);
        }
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let blocks = p.ne0 / QK;
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= blocks * p.n_rows * p.ne2 * p.ne3) {
        return;
    }
    let c = unravel(i, blocks, p.n_rows, p.ne2);
    let r = dst_row(c.y, c.z, c.w);
    if (r.y == 0u) {
        report(r.x);
        return;
    }
    let s = p.off_s + c.y * p.ss1 + c.z * p.ss2 + c.w * p.ss3 + c.x * QK * p.ss0;
    for (var j = 0u; j < QK; j++) {
        x[j] = src0[s + j * p.ss0];
    }
    for (var k = 0u; k < 9u; k++) {
        blk[k] = 0u;
    }
    quantize_block(0u, select(0.0, 1.0, p.ne0 != 0u));
    store_block(p.off_d + r.x * p.sd1 + c.z * p.sd2 + c.w * p.sd3 + c.x * BLOCK_BYTES);
}
