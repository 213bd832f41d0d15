// Weight access shared by the MUL_MAT kernels (mul_mat_vec, mul_mat_tiled,
// mul_mat_coopmat). The includer declares the weights binding `src0` and
// the host picks one layout:
// - W_QUANT: block-quantized rows read as u32 words; row offsets in bytes
//   (with one QUANT_<TYPE> flag, see common/quant); with QUANT_BUF_VEC4
//   too (mat-vec, q4_K with 16-byte aligned rows) `src0` is an
//   array<vec4<u32>>, offsets still in bytes;
// - W_VEC4: f32/half rows whose offset and strides are multiples of 4
//   elements and K % 4 == 0; `src0` is an array of vec4, offsets in vec4s;
// - W_HALF8 (mat-vec): half rows with K % 16 == 0 and 16-byte aligned
//   offsets and strides; `src0` is an array<vec4<u32>> of 8 halves each,
//   offsets in those units;
// - W_QUANT with W_SPLIT (q4_0 or q4_K stored split,
//   backends/webgpu/src/split.rs; with QUANT_BUF_VEC4): one dense matrix
//   whose rows of block quants start at byte w_off, `row` offsets point at
//   a row's quants, and the blocks' heads follow all quants from byte
//   w_scales (the includer's Params has both fields); a run of a row
//   below M and below K reads only its own block's quants and head, so
//   the unchecked kernels' bounds hold as for ggml's blocks;
// - neither: f32/half/bfloat16 rows read element by element, offsets in
//   elements (bfloat16 as u32 words holding two).

#ifdef W_QUANT
#define QUANT_BUF src0
#include "common/quant"

#ifdef W_SPLIT
// Byte offset of the head of the block whose quants start at byte `row`.
fn w_split_head(row: u32) -> u32 {
    return p.w_scales + q_split_head(row - p.w_off);
}

// Weights k..k+3 (k % 4 == 0, k < K) of the split row whose quants start
// at byte `row`.
fn w_run(row: u32, k: u32, kmax: u32) -> vec4<f32> {
    let b = k / QUANT_BLOCK_K;
    return q_run_at(row + b * QUANT_QS_BYTES, w_split_head(row) + b * QUANT_HEAD_BYTES, k % QUANT_BLOCK_K);
}
#else
// Weights k..k+3 (k % 4 == 0, k < K) of the row starting at byte `row`.
fn w_run(row: u32, k: u32, kmax: u32) -> vec4<f32> {
    return q_run(row + (k / QUANT_BLOCK_K) * QUANT_BLOCK_BYTES, k % QUANT_BLOCK_K);
}
#endif
#elif defined(W_HALF8)
// Weights k..k+3 (k % 4 == 0, k < K) of the row starting at unit `row`
// of 8 halves (one vec4<u32>).
fn w_run(row: u32, k: u32, kmax: u32) -> vec4<f32> {
    let v = src0[row + (k >> 3u)];
    let h = select(v.xy, v.zw, (k & 4u) != 0u);
    return vec4<f32>(unpack2x16float(h.x), unpack2x16float(h.y));
}
#elif defined(W_VEC4)
// Weights k..k+3 (k % 4 == 0, k < K) of the row starting at vec4 `row`.
fn w_run(row: u32, k: u32, kmax: u32) -> vec4<f32> {
    return vec4<f32>(src0[row + (k >> 2u)]);
}
#else
// Element `i` of the weights binding.
fn w_elem(i: u32) -> f32 {
#ifdef SRC0_BF16
    return bitcast<f32>(((src0[i >> 1u] >> ((i & 1u) * 16u)) & 0xFFFFu) << 16u);
#else
    return f32(src0[i]);
#endif
}

// Weights k..k+3 (k % 4 == 0) of the row starting at element `row`, zero
// from `kmax` on.
fn w_run(row: u32, k: u32, kmax: u32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    for (var i = 0u; i < 4u; i++) {
        if (k + i < kmax) {
            v[i] = w_elem(row + k + i);
        }
    }
    return v;
}
#endif
