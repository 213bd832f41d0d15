#version 450
// MUL_MAT with 1..8 columns (NCOLS) of activations and q4_0 or q8_0
// weights (A_Q4_0 / A_Q8_0), f32 dst, ggml semantics: dst[m, n, i2, i3] =
// sum_k a[k, m, i2 / r2, i3 / r3] * b[k, n, i2, i3].
//
// The activations arrive quantized as ggml's q8_1 by the WGSL kernel
// mul_mat_quantize (the backend runs it first, or reuses a copy an
// earlier node left): run r of a row is three uvec4 at 3 r (8 words of
// signed bytes, then the float bits of d and of s = d * sum(q), 0, 0),
// rows x_nb1 uvec4s apart. Products are 4 x 8-bit integer dot products
// (GL_EXT_integer_dot_product, signed), as ggml's MMVQ kernels compute them:
// sum(w * x) = d_w * (d_x * sum(q_w * q_x) + m * s_x), m = -8 for q4_0.
//
// A workgroup of WG_SIZE invocations computes NROWS rows x NCOLS columns;
// invocation t takes blocks t, t + WG_SIZE, ... of its rows, so a
// subgroup reads consecutive blocks (18 or 34 bytes, 2-byte aligned). A
// block is read as the two (q4_0) or three (q8_0) 16-byte words that
// hold it, its bytes picked out with shifts (16-byte loads against the
// 5 or 9 word loads of a 4-byte window); a block whose window would pass
// the end of the binding is read as 16-bit words. WORD_LOADS: the block
// is read as the 5 or 9 aligned 4-byte words that hold it instead,
// one funnel shift per word (more loads, less shifting). Each block is read
// once and used for every column. subgroupAdd, then a sum over the
// subgroups in workgroup memory.
//
// W_SPLIT (with A_Q4_0): the weights are stored split (the backend's
// split.rs): a row's blocks' 16 quant bytes each, rows a_nb1 bytes apart
// from a_off, then every block's f16 scale from byte w_scales, block after
// block. A block's quants are one 16-byte load, its scale one 16-bit load;
// neighbouring invocations read neighbouring blocks in both regions.
//
// Bindings follow the backend's convention: tensors 0..2 as storage
// buffers, the parameters a uniform at binding 3 (dynamic offset).

#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_integer_dot_product : require

layout(local_size_x = WG_SIZE, local_size_y = 1, local_size_z = 1) in;

layout(binding = 0, std430) readonly buffer AU16 { uint16_t a_u16[]; };
layout(binding = 0, std430) readonly buffer AV4 { uvec4 a_v4[]; };
layout(binding = 0, std430) readonly buffer AU32 { uint a_u32[]; };
layout(binding = 1, std430) readonly buffer X { uvec4 x[]; };
layout(binding = 2, std430) writeonly buffer D { float d[]; };

// Field order is the order of the words the host writes (all u32).
layout(binding = 3, std140) uniform Params {
    uint K;
    uint M;
    uint ne12;
    uint r2;
    uint r3;
    uint row_groups;
    uint a_off;   // bytes
    uint a_nb1;   // bytes
    uint a_nb2;
    uint a_nb3;
    uint x_off;   // uvec4s of the quantized copy
    uint x_nb1;
    uint x_nb2;
    uint x_nb3;
    uint d_off;   // elements
    uint d_nb0;
    uint d_nb1;
    uint d_nb2;
    uint d_nb3;
    uint w_scales; // bytes; W_SPLIT only
} p;

#if defined(W_SPLIT) && !defined(A_Q4_0)
#error "W_SPLIT is for q4_0 only"
#endif

#if defined(A_Q4_0)
const uint BLOCK_BYTES = 18;
// 32-bit words of a block from its first byte: scale + 16 quant bytes.
const uint BLOCK_WORDS = 5;
// 16-byte words that hold any 2-byte aligned block.
const uint WINDOW = 2;
#elif defined(A_Q8_0)
const uint BLOCK_BYTES = 34;
const uint BLOCK_WORDS = 9;
const uint WINDOW = 3;
#else
#error "define A_Q4_0 or A_Q8_0"
#endif

// Subgroups of at least 8 invocations (the host checks).
const uint MAX_SUBGROUPS = WG_SIZE / 8;
shared float partial[NROWS * NCOLS][MAX_SUBGROUPS];

// The block at byte `at` (even) as 32-bit words from its first byte (the
// last word of a q4_0 block holds 2 bytes of the next one, unused).
void load_block(uint at, out uint w[BLOCK_WORDS]) {
#if defined(WORD_LOADS)
    // A block starting 2 bytes into a word ends 2 bytes into its last
    // word; the bytes after it (the upper half of the last result word)
    // are never used, so no word past the block is read.
    const uint word = at >> 2;
    const bool odd = (at & 2) != 0;
    uint v[BLOCK_WORDS + 1];
    [[unroll]] for (uint i = 0; i < BLOCK_WORDS; i++) {
        v[i] = a_u32[word + i];
    }
    v[BLOCK_WORDS] = 0;
    [[unroll]] for (uint i = 0; i < BLOCK_WORDS; i++) {
        w[i] = odd ? (v[i] >> 16) | (v[i + 1] << 16) : v[i];
    }
#else
    const uint first = at >> 4;
    if (first + WINDOW <= a_v4.length()) {
        uint v[4 * WINDOW + 1];
        [[unroll]] for (uint i = 0; i < WINDOW; i++) {
            const uvec4 q = a_v4[first + i];
            v[4 * i] = q.x;
            v[4 * i + 1] = q.y;
            v[4 * i + 2] = q.z;
            v[4 * i + 3] = q.w;
        }
        v[4 * WINDOW] = 0;
        // Move the window down to the block's word: by 2 words, then 1.
        const uint word = (at >> 2) & 3;
        if ((word & 2) != 0) {
            [[unroll]] for (uint i = 0; i + 2 < 4 * WINDOW + 1; i++) {
                v[i] = v[i + 2];
            }
        }
        if ((word & 1) != 0) {
            [[unroll]] for (uint i = 0; i + 1 < 4 * WINDOW + 1; i++) {
                v[i] = v[i + 1];
            }
        }
        const bool odd = (at & 2) != 0;
        [[unroll]] for (uint i = 0; i < BLOCK_WORDS; i++) {
            w[i] = odd ? (v[i] >> 16) | (v[i + 1] << 16) : v[i];
        }
    } else {
        const uint h = at >> 1;
        [[unroll]] for (uint i = 0; i < BLOCK_WORDS; i++) {
            const uint lo = uint(a_u16[h + 2 * i]);
            const uint hi = 2 * i + 1 < BLOCK_BYTES / 2 ? uint(a_u16[h + 2 * i + 1]) : 0u;
            w[i] = lo | (hi << 16);
        }
    }
#endif
}

// Quant word i (bytes 4i .. 4i + 3 of the quants) of a block's words:
// they start 2 bytes in.
uint quant_word(uint w[BLOCK_WORDS], uint i) {
    return (w[i] >> 16) | (w[i + 1] << 16);
}

void main() {
    const uint group = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (group >= p.row_groups) {
        return;
    }
    const uint batch = gl_WorkGroupID.z;
    const uint i12 = batch % p.ne12;
    const uint i13 = batch / p.ne12;
    const uint a_base = p.a_off + (i12 / p.r2) * p.a_nb2 + (i13 / p.r3) * p.a_nb3;
    const uint x_base = p.x_off + i12 * p.x_nb2 + i13 * p.x_nb3;
    const uint blocks = p.K / 32;
    const uint tid = gl_LocalInvocationID.x;

    // Rows past M repeat the last one and are never stored.
    uint rows[NROWS];
    [[unroll]] for (uint r = 0; r < NROWS; r++) {
        rows[r] = a_base + min(group * NROWS + r, p.M - 1) * p.a_nb1;
    }
    float acc[NROWS][NCOLS];
    [[unroll]] for (uint r = 0; r < NROWS; r++) {
        [[unroll]] for (uint c = 0; c < NCOLS; c++) {
            acc[r][c] = 0.0;
        }
    }
    for (uint blk = tid; blk < blocks; blk += WG_SIZE) {
        uvec4 xq[NCOLS][3];
        [[unroll]] for (uint c = 0; c < NCOLS; c++) {
            const uint at = x_base + c * p.x_nb1 + 3 * blk;
            xq[c][0] = x[at];
            xq[c][1] = x[at + 1];
            xq[c][2] = x[at + 2];
        }
        [[unroll]] for (uint r = 0; r < NROWS; r++) {
#if defined(W_SPLIT)
            const uvec4 qv = a_v4[(rows[r] >> 4) + blk];
            const uint quants[4] = uint[4](qv.x, qv.y, qv.z, qv.w);
            const uint at = p.w_scales + 2 * (((rows[r] - p.a_off) >> 4) + blk);
            const float scale = unpackHalf2x16(uint(a_u16[at >> 1])).x;
#else
            uint w[BLOCK_WORDS];
            load_block(rows[r] + blk * BLOCK_BYTES, w);
            const float scale = unpackHalf2x16(w[0]).x;
#endif
            uint q[8];
#if defined(A_Q4_0)
            // Quant byte t holds weight t (low nibble) and t + 16 (high).
            [[unroll]] for (uint i = 0; i < 4; i++) {
#if defined(W_SPLIT)
                const uint qw = quants[i];
#else
                const uint qw = quant_word(w, i);
#endif
                q[i] = qw & 0x0F0F0F0Fu;
                q[i + 4] = (qw >> 4) & 0x0F0F0F0Fu;
            }
            const float m = -8.0;
#else
            [[unroll]] for (uint i = 0; i < 8; i++) {
                q[i] = quant_word(w, i);
            }
            const float m = 0.0;
#endif
            [[unroll]] for (uint c = 0; c < NCOLS; c++) {
                int dot4 = 0;
                [[unroll]] for (uint i = 0; i < 4; i++) {
                    dot4 += dotPacked4x8EXT(int(q[i]), int(xq[c][0][i]));
                    dot4 += dotPacked4x8EXT(int(q[i + 4]), int(xq[c][1][i]));
                }
                const vec2 ds = uintBitsToFloat(xq[c][2].xy);
                acc[r][c] += scale * (ds.x * float(dot4) + m * ds.y);
            }
        }
    }
    [[unroll]] for (uint r = 0; r < NROWS; r++) {
        [[unroll]] for (uint c = 0; c < NCOLS; c++) {
            const float s = subgroupAdd(acc[r][c]);
            if (subgroupElect()) {
                partial[r * NCOLS + c][gl_SubgroupID] = s;
            }
        }
    }
    barrier();
    if (tid < NROWS * NCOLS) {
        const uint r = tid / NCOLS;
        const uint c = tid % NCOLS;
        const uint row = group * NROWS + r;
        if (row < p.M) {
            float s = 0.0;
            for (uint i = 0; i < gl_NumSubgroups; i++) {
                s += partial[tid][i];
            }
            const uint at = p.d_off + row * p.d_nb0 + c * p.d_nb1 + i12 * p.d_nb2 + i13 * p.d_nb3;
            d[at] = s;
        }
    }
}
