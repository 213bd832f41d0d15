#version 450
// MUL_MAT GEMM with VK_NV_cooperative_matrix2: f16 weights, f32
// activations (converted to f16 matrices after loading; B_F16: converted
// to dense f16 rows by mul_mat_convert first), f32 dst, ggml
// semantics as in mul_mat_vec.comp; the Params block is
// mul_mat_coopmat.comp's.
//
// A workgroup of WG_SIZE invocations computes one BM x BN tile as one
// workgroup-scope accumulator. Per step of BK, the BM x BK weight block
// and the BK x BN activation block are loaded straight from the storage
// buffers by tensor addressing (coopMatLoadTensorNV: the driver stages
// them), so there is no staging code here. Tensor layouts carry every
// stride (weights: rows a_nb1 bytes apart; activations and dst: any
// element strides, read and written through a transposing view) and
// clamp to the tensors' sizes: loads past M, N or K give zeros and stores
// past M or N are dropped, so partial tiles need no code either. With
// PREFETCH the next step's blocks are loaded before this step's product.
// With UNCLAMPED (B_F16 only) a tile that lies wholly inside M, N and
// its K range, with 16-byte aligned rows, is loaded through layouts that
// do not clamp, with its strides and offsets masked so the compiler sees
// the alignment, and the K loop unrolled UNROLL steps deep; other tiles
// take the clamped loop.

#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = WG_SIZE, local_size_y = 1, local_size_z = 1) in;

layout(binding = 0, std430) readonly buffer A { float16_t a[]; };
#ifdef B_F16
// Activations converted to f16 rows first (mul_mat_convert), dense; the
// host gives their offset and strides in units of 4 halves.
layout(binding = 1, std430) readonly buffer B { float16_t b[]; };
const uint B_UNIT = 4u;
#else
layout(binding = 1, std430) readonly buffer B { float b[]; };
const uint B_UNIT = 1u;
#endif
layout(binding = 2, std430) writeonly buffer D { float d[]; };

layout(binding = 3, std140) uniform Params {
    uint K;
    uint M;
    uint ne12;
    uint r2;
    uint r3;
    uint row_tiles;
    uint a_off;   // bytes
    uint a_nb1;   // bytes
    uint a_nb2;
    uint a_nb3;
    uint b_off;   // elements
    uint b_nb0;
    uint b_nb1;
    uint b_nb2;
    uint b_nb3;
    uint d_off;   // elements
    uint d_nb0;
    uint d_nb1;
    uint d_nb2;
    uint d_nb3;
    uint N;
    uint flags;
    uint batches;
    uint k_chunk;
    uint split_plane;   // elements of dst between splits
} p;

void main() {
    const uint tile_m = gl_WorkGroupID.x * BM;
    const uint tile_n = gl_WorkGroupID.y * BN;
    // Split K as in mul_mat_coopmat.comp.
    const uint split = gl_WorkGroupID.z / p.batches;
    const uint batch = gl_WorkGroupID.z % p.batches;
    const uint k_begin = split * p.k_chunk;
    const uint k_end = min(p.K, k_begin + p.k_chunk);
    const uint i12 = batch % p.ne12;
    const uint i13 = batch / p.ne12;
    // In elements of each binding (weight offsets and strides are even).
    const uint a_base = (p.a_off + (i12 / p.r2) * p.a_nb2 + (i13 / p.r3) * p.a_nb3) >> 1;
    const uint b_base = (p.b_off + i12 * p.b_nb2 + i13 * p.b_nb3) * B_UNIT;
    const uint d_base = p.d_off + split * p.split_plane + i12 * p.d_nb2 + i13 * p.d_nb3;

    // Weights (m, k); activations and dst indexed (n, k) and (n, m), read
    // and written transposed.
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> la =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    la = setTensorLayoutDimensionNV(la, p.M, p.K);
    la = setTensorLayoutStrideNV(la, p.a_nb1 >> 1, 1);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lb =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    lb = setTensorLayoutDimensionNV(lb, p.N, p.K);
#ifdef B_F16
    lb = setTensorLayoutStrideNV(lb, p.b_nb1 * B_UNIT, 1);
#else
    lb = setTensorLayoutStrideNV(lb, p.b_nb1, p.b_nb0);
#endif
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ld =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    ld = setTensorLayoutDimensionNV(ld, p.N, p.M);
    ld = setTensorLayoutStrideNV(ld, p.d_nb1, p.d_nb0);
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

    coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
#ifdef UNCLAMPED
    const uint a_stride = p.a_nb1 >> 1;
    const uint b_stride = p.b_nb1 * B_UNIT;
    if (tile_m + BM <= p.M && tile_n + BN <= p.N && (k_end - k_begin) % BK == 0u &&
        (a_stride | a_base | b_stride | b_base) % 8u == 0u) {
        tensorLayoutNV<2> ua = createTensorLayoutNV(2);
        ua = setTensorLayoutDimensionNV(ua, p.M, k_end);
        ua = setTensorLayoutStrideNV(ua, a_stride & ~7u, 1);
        tensorLayoutNV<2> ub = createTensorLayoutNV(2);
        ub = setTensorLayoutDimensionNV(ub, p.N, k_end);
        ub = setTensorLayoutStrideNV(ub, b_stride & ~7u, 1);
        const uint a_at = a_base & ~7u;
        const uint b_at = b_base & ~7u;
        // One K step at k: its two blocks and their product.
#define UNCLAMPED_STEP(k)                                                                      \
        {                                                                                      \
            coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> ua_m;                 \
            coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> ub_m;                 \
            coopMatLoadTensorNV(ua_m, a, a_at, sliceTensorLayoutNV(ua, tile_m, BM, k, BK));    \
            coopMatLoadTensorNV(ub_m, b, b_at, sliceTensorLayoutNV(ub, tile_n, BN, k, BK),     \
                                transposed);                                                   \
            acc = coopMatMulAdd(ua_m, ub_m, acc);                                              \
        }
        uint k0 = k_begin;
        for (; k0 + UNROLL * BK <= k_end; k0 += UNROLL * BK) {
            [[unroll]] for (uint j = 0u; j < UNROLL; ++j) UNCLAMPED_STEP(k0 + j * BK)
        }
        for (; k0 < k_end; k0 += BK) UNCLAMPED_STEP(k0)
        coopMatStoreTensorNV(acc, d, d_base, sliceTensorLayoutNV(ld, tile_n, BN, tile_m, BM),
                             transposed);
        return;
    }
#endif
#ifdef B_F16
    coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> mb;
#else
    coopmat<float, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> mb;
#endif
    coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> ma;
#ifdef PREFETCH
    // The first step's blocks; each step then loads the next before its
    // product (past k_end the clamped loads give zeros, never used).
    coopMatLoadTensorNV(ma, a, a_base, sliceTensorLayoutNV(la, tile_m, BM, k_begin, BK));
    coopMatLoadTensorNV(mb, b, b_base, sliceTensorLayoutNV(lb, tile_n, BN, k_begin, BK),
                        transposed);
#endif
    for (uint k0 = k_begin; k0 < k_end; k0 += BK) {
#ifdef PREFETCH
        const coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> ma_now = ma;
        const coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> mb_now =
            coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB>(mb);
        if (k0 + BK < k_end) {
            coopMatLoadTensorNV(ma, a, a_base, sliceTensorLayoutNV(la, tile_m, BM, k0 + BK, BK));
            coopMatLoadTensorNV(mb, b, b_base,
                                sliceTensorLayoutNV(lb, tile_n, BN, k0 + BK, BK), transposed);
        }
        acc = coopMatMulAdd(ma_now, mb_now, acc);
#else
        coopMatLoadTensorNV(ma, a, a_base, sliceTensorLayoutNV(la, tile_m, BM, k0, BK));
        coopMatLoadTensorNV(mb, b, b_base, sliceTensorLayoutNV(lb, tile_n, BN, k0, BK),
                            transposed);
        acc = coopMatMulAdd(ma, coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB>(mb),
                            acc);
#endif
    }
    coopMatStoreTensorNV(acc, d, d_base, sliceTensorLayoutNV(ld, tile_n, BN, tile_m, BM),
                         transposed);
}
