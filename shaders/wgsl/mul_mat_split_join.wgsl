// Weights stored split (every block's quants, then every block's head;
// see backends/webgpu/src/split.rs) back to ggml's blocks, for the MUL_MAT
// paths that read ggml's layout. QUANT_Q4_0: one invocation per pair of
// 18-byte blocks, nine whole words of dst; QUANT_Q4_K: one per 144-byte
// block, nine vec4s (its 16-byte head, then 128 bytes of quants).

#include "common/index"

struct Params {
    blocks: u32,
    // The quants' offset in vec4s and the heads' in bytes, in src.
    q_off: u32,
    h_off: u32,
    pad: u32,
}

@group(0) @binding(0) var<storage, read_write> src: array<vec4<u32>>;
#ifdef QUANT_Q4_K
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;
#else
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
#endif
@group(0) @binding(2) var<uniform> p: Params;

#ifdef QUANT_Q4_K
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let b = linear_index(wid, nwg, lid, WG_SIZE);
    if (b >= p.blocks) {
        return;
    }
    dst[9u * b] = src[(p.h_off >> 4u) + b];
    for (var i = 0u; i < 8u; i++) {
        dst[9u * b + 1u + i] = src[p.q_off + 8u * b + i];
    }
}
#else
// The half scale of block b, in the low 16 bits.
fn scale(b: u32) -> u32 {
    let at = p.h_off + 2u * b;
    let word = src[at >> 4u][(at >> 2u) & 3u];
    return select(word & 0xFFFFu, word >> 16u, (at & 2u) != 0u);
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let pair = linear_index(wid, nwg, lid, WG_SIZE);
    let b = 2u * pair;
    if (b >= p.blocks) {
        return;
    }
    let q0 = src[p.q_off + b];
    let o = 9u * pair;
    dst[o] = scale(b) | (q0.x << 16u);
    dst[o + 1u] = (q0.x >> 16u) | (q0.y << 16u);
    dst[o + 2u] = (q0.y >> 16u) | (q0.z << 16u);
    dst[o + 3u] = (q0.z >> 16u) | (q0.w << 16u);
    if (b + 1u >= p.blocks) {
        // An odd last block: its last two bytes, and two of padding.
        dst[o + 4u] = q0.w >> 16u;
        return;
    }
    let q1 = src[p.q_off + b + 1u];
    dst[o + 4u] = (q0.w >> 16u) | (scale(b + 1u) << 16u);
    dst[o + 5u] = q1.x;
    dst[o + 6u] = q1.y;
    dst[o + 7u] = q1.z;
    dst[o + 8u] = q1.w;
}
#endif
