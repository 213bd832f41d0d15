// CPY from f32 to a legacy quantized type (DST_Q8_0, DST_Q4_0, DST_Q4_1,
// DST_Q5_0, DST_Q5_1) with ggml's reference quantizers, bit for bit
// (common/quantize.wgsl).
// Element k of src0 in logical order goes to element k of the contiguous
// destination. Blocks of 18, 22 or 34 bytes straddle u32 words, so each
// invocation builds a group of blocks that ends on a word boundary in a
// private word array and stores whole words; a group cut short by the end
// of the tensor merges its last half word with the bytes that follow.

#include "common/index"

struct Params {
    n_blocks: u32,
    ne00: u32, ne01: u32, ne02: u32,
    off0: u32, s00: u32, s01: u32, s02: u32, s03: u32,
    offd_words: u32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

// Blocks per invocation: 2 where a block ends in the middle of a word.
#if defined(DST_Q8_0) || defined(DST_Q4_0) || defined(DST_Q5_0)
const BLOCKS_PER_GROUP: u32 = 2u;
#else
const BLOCKS_PER_GROUP: u32 = 1u;
#endif
const GROUP_WORDS: u32 = BLOCK_BYTES * BLOCKS_PER_GROUP / 4u;

var<private> words: array<u32, GROUP_WORDS>;

#define QUANT_OUT words
#include "common/quantize"

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let group = linear_index(wid, nwg, lid, WG_SIZE);
    let first = group * BLOCKS_PER_GROUP;
    if (first >= p.n_blocks) {
        return;
    }
    let n = min(BLOCKS_PER_GROUP, p.n_blocks - first);
    for (var w = 0u; w < GROUP_WORDS; w++) {
        words[w] = 0u;
    }
    for (var bi = 0u; bi < n; bi++) {
        for (var j = 0u; j < QK; j++) {
            let c = unravel((first + bi) * QK + j, p.ne00, p.ne01, p.ne02);
            x[j] = src0[p.off0 + c.x * p.s00 + c.y * p.s01 + c.z * p.s02 + c.w * p.s03];
        }
        quantize_block(bi * BLOCK_BYTES, select(0.0, 1.0, p.n_blocks != 0u));
    }
    let bytes = n * BLOCK_BYTES;
    let base = p.offd_words + group * GROUP_WORDS;
    for (var w = 0u; w < bytes / 4u; w++) {
        dst[base + w] = words[w];
    }
    if (bytes % 4u != 0u) {
        // Only the low half word is ours; keep what follows the tensor.
        let w = bytes / 4u;
        dst[base + w] = (dst[base + w] & 0xffff0000u) | (words[w] & 0xffffu);
    }
}
