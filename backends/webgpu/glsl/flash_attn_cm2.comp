#version 450
// FLASH_ATTN_EXT with VK_NV_cooperative_matrix2: f32 Q, f16 K and V with
// dense rows, an optional f16 mask, optional f32 sinks, f32 dst; ggml's
// semantics (scale, logit softcap, ALiBi, grouped-query K/V broadcast,
// mask broadcast over dims 2 and 3), as the WGSL flash_attn kernels.
//
// One workgroup of WG_SIZE invocations per (block of BR queries, head,
// batch x split). Every matrix has workgroup scope, so the driver decides
// how the tiles are staged and shared:
//   Q (BR x DKP) is loaded once by tensor addressing, scaled in f32 and
//   converted to f16. Per tile of BC keys:
//     S = Q K^T            (K loaded transposed, DKP x BC)
//     S = softcap tanh(S) + slope mask
//     M' = max(M, rowmax S), P = exp(S - M'), e = exp(M - M')
//     L = e L + rowsum P   (rowsum as P times a matrix of ones, or with
//                           ROWSUM_REDUCE a row reduce of P in f32)
//     O = e O + P V        (e and L resized to O's shape by a row reduce
//                           that keeps one element; with PV_HALF, P V is
//                           summed in f16 over the BC keys of the block,
//                           as ggml's kernels do, then added in f32;
//                           with V_EARLY, V is loaded with K; with O_HALF,
//                           O itself is kept in f16, as ggml's CPU
//                           kernel keeps its f16 V sums)
// All matrices of one type hold the same elements in the same
// invocations, so element loops combine O with the resized e and L.
// Keys past n_kv (zeros from the clamped loads) get -inf scores, so they
// add nothing; M starts at -FLT_MAX / 2, so a row whose keys are all
// masked keeps finite differences and ends with L = 0 (output 0, as
// ggml's CPU kernel gives).
// The end divides by L (the sink joining it as in ggml) and stores O
// through a tensor layout with dst's strides, or, with the keys split
// over workgroups (FLAG_SPLIT), stores the unnormalised rows and each
// row's (M, L) for the WGSL pass flash_attn_combine, in its layout.
//
// Host defines: BR, BC, DKP, DVP (head sizes rounded up to 16), WG_SIZE.
// Bindings are always six: with no mask or sinks the host binds another
// tensor in their place (never read: the flags say so).

#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = WG_SIZE, local_size_y = 1, local_size_z = 1) in;

layout(binding = 0, std430) readonly buffer Q { float qbuf[]; };
layout(binding = 1, std430) readonly buffer K { float16_t kbuf[]; };
layout(binding = 2, std430) readonly buffer V { float16_t vbuf[]; };
layout(binding = 3, std430) readonly buffer Mask { float16_t mbuf[]; };
layout(binding = 4, std430) readonly buffer Sinks { float sbuf[]; };
layout(binding = 5, std430) writeonly buffer D { float dbuf[]; };

// Offsets and strides in elements of each binding (halves for K, V and
// the mask).
layout(binding = 6, std140) uniform Params {
    uint n_q;
    uint n_kv;
    uint n_head;
    uint rk2;       // query heads per K/V head
    uint rk3;       // batches per K/V batch
    uint flags;
    uint q_off;
    uint q_s0;
    uint q_s1;
    uint q_s2;
    uint q_s3;
    uint k_off;
    uint k_s1;
    uint k_s2;
    uint k_s3;
    uint v_off;
    uint v_s1;
    uint v_s2;
    uint v_s3;
    uint m_off;
    uint m_s1;
    uint m_s2;
    uint m_s3;
    uint m_ne1;
    uint m_ne2;
    uint m_ne3;
    uint s_off;
    uint s_s0;
    uint d_off;
    uint d_s0;
    uint d_s1;
    uint d_s2;
    uint d_s3;
    uint dk;
    uint dv;
    float q_scale;  // scale, divided by softcap when there is one
    float softcap;
    float max_bias;
    float m0;
    float m1;
    uint n_head_log2;
    uint n_split;
    uint chunk;     // keys per split (a multiple of BC)
    uint n_rows;    // n_q * n_head * batches (split layout)
    uint ml_off;    // where the (M, L) pairs start (split layout)
} p;

const uint FLAG_MASK = 1u;
const uint FLAG_SINKS = 2u;
const uint FLAG_SPLIT = 4u;

// -FLT_MAX / 2: the maximum before any key, so differences stay finite.
const float NEG_HALF_MAX = -1.7014117e38;

float max_op(const in float x, const in float y) {
    return max(x, y);
}

float add_op(const in float x, const in float y) {
    return x + y;
}

// A row reduce that keeps one element: resizes a row-constant matrix.
float keep_op(const in float x, const in float y) {
    return x;
}

// Scores of keys at or past `keys` (columns of this tile) become -inf.
float drop_keys(const in uint r, const in uint c, const in float e, const in uint keys) {
    return c < keys ? e : uintBitsToFloat(0xff800000u);
}

// Split layout: query row r of the block starting at q0 writes its M
// (which = 0) or L (which = 1), from column 0.
float store_row_stat(const in uint r, const in uint c, const in float e, const in uint q0,
                     const in uint which) {
    const uint iq = q0 + r;
    if (c == 0u && iq < p.n_q) {
        const uint z = gl_WorkGroupID.z;
        const uint b = z / p.n_split;
        const uint split = z % p.n_split;
        const uint row = (b * p.n_q + iq) * p.n_head + gl_WorkGroupID.y;
        dbuf[p.ml_off + (split * p.n_rows + row) * 2u + which] = e;
    }
    return e;
}

float alibi_slope(uint h) {
    if (p.max_bias <= 0.0) {
        return 1.0;
    }
    if (h < p.n_head_log2) {
        return pow(p.m0, float(h + 1u));
    }
    return pow(p.m1, float(2u * (h - p.n_head_log2) + 1u));
}

void main() {
    const uint q0 = gl_WorkGroupID.x * BR;
    const uint h = gl_WorkGroupID.y;
    const uint b = gl_WorkGroupID.z / p.n_split;
    const uint split = gl_WorkGroupID.z % p.n_split;
    const uint kv_begin = split * p.chunk;
    const uint kv_end = min(p.n_kv, kv_begin + p.chunk);
    const bool has_mask = (p.flags & FLAG_MASK) != 0u;

    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lq =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    lq = setTensorLayoutDimensionNV(lq, p.n_q, p.dk);
    lq = setTensorLayoutStrideNV(lq, p.q_s1, p.q_s0);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lk =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    lk = setTensorLayoutDimensionNV(lk, p.n_kv, p.dk);
    lk = setTensorLayoutStrideNV(lk, p.k_s1, 1);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lv =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    lv = setTensorLayoutDimensionNV(lv, p.n_kv, p.dv);
    lv = setTensorLayoutStrideNV(lv, p.v_s1, 1);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lm =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    lm = setTensorLayoutDimensionNV(lm, p.m_ne1, p.n_kv);
    lm = setTensorLayoutStrideNV(lm, p.m_s1, 1);
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

    const uint q_base = p.q_off + h * p.q_s2 + b * p.q_s3;
    const uint k_base = p.k_off + (h / p.rk2) * p.k_s2 + (b / p.rk3) * p.k_s3;
    const uint v_base = p.v_off + (h / p.rk2) * p.v_s2 + (b / p.rk3) * p.v_s3;
    const uint m_base = p.m_off + (h % p.m_ne2) * p.m_s2 + (b % p.m_ne3) * p.m_s3;
    const float slope = alibi_slope(h);

    coopmat<float, gl_ScopeWorkgroup, BR, DKP, gl_MatrixUseAccumulator> q32;
    coopMatLoadTensorNV(q32, qbuf, q_base, sliceTensorLayoutNV(lq, q0, BR, 0, DKP));
    q32 = q32 * p.q_scale;
    const coopmat<float16_t, gl_ScopeWorkgroup, BR, DKP, gl_MatrixUseA> qa =
        coopmat<float16_t, gl_ScopeWorkgroup, BR, DKP, gl_MatrixUseA>(q32);

#ifdef O_HALF
    coopmat<float16_t, gl_ScopeWorkgroup, BR, DVP, gl_MatrixUseAccumulator> oh =
        coopmat<float16_t, gl_ScopeWorkgroup, BR, DVP, gl_MatrixUseAccumulator>(0.0);
#else
    coopmat<float, gl_ScopeWorkgroup, BR, DVP, gl_MatrixUseAccumulator> o =
        coopmat<float, gl_ScopeWorkgroup, BR, DVP, gl_MatrixUseAccumulator>(0.0);
#endif
    coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator> l =
        coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator>(0.0);
    coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator> m =
        coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator>(NEG_HALF_MAX);
#ifndef ROWSUM_REDUCE
    const coopmat<float16_t, gl_ScopeWorkgroup, BC, BC, gl_MatrixUseB> ones =
        coopmat<float16_t, gl_ScopeWorkgroup, BC, BC, gl_MatrixUseB>(1.0);
#endif

    [[dont_unroll]]
    for (uint j0 = kv_begin; j0 < kv_end; j0 += BC) {
        coopmat<float16_t, gl_ScopeWorkgroup, DKP, BC, gl_MatrixUseB> kt;
        coopMatLoadTensorNV(kt, kbuf, k_base, sliceTensorLayoutNV(lk, j0, BC, 0, DKP),
                            transposed);
#ifdef V_EARLY
        coopmat<float16_t, gl_ScopeWorkgroup, BC, DVP, gl_MatrixUseB> vb;
        coopMatLoadTensorNV(vb, vbuf, v_base, sliceTensorLayoutNV(lv, j0, BC, 0, DVP));
#endif
        coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator> s =
            coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator>(0.0);
        s = coopMatMulAdd(qa, kt, s);
        if (p.softcap != 0.0) {
            [[unroll]] for (int i = 0; i < s.length(); ++i) {
                s[i] = p.softcap * tanh(s[i]);
            }
        }
        if (has_mask) {
            coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator> mv;
            coopMatLoadTensorNV(mv, mbuf, m_base, sliceTensorLayoutNV(lm, q0, BR, j0, BC));
            s += coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator>(mv) * slope;
        }
        if (j0 + BC > p.n_kv) {
            coopMatPerElementNV(s, s, drop_keys, p.n_kv - j0);
        }

        coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator> rowmax;
        coopMatReduceNV(rowmax, s, gl_CooperativeMatrixReduceRowNV, max_op);
        coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator> e;
        [[unroll]] for (int i = 0; i < s.length(); ++i) {
            const float m_new = max(m[i], rowmax[i]);
            e[i] = exp(m[i] - m_new);
            s[i] = exp(s[i] - m_new);
            m[i] = m_new;
        }
        const coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseA> pa =
            coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseA>(s);
        coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator> rowsum;
#ifdef ROWSUM_REDUCE
        coopMatReduceNV(rowsum, s, gl_CooperativeMatrixReduceRowNV, add_op);
#else
        rowsum = coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator>(0.0);
        rowsum = coopMatMulAdd(pa, ones, rowsum);
#endif
        [[unroll]] for (int i = 0; i < l.length(); ++i) {
            l[i] = e[i] * l[i] + rowsum[i];
        }

#ifndef V_EARLY
        coopmat<float16_t, gl_ScopeWorkgroup, BC, DVP, gl_MatrixUseB> vb;
        coopMatLoadTensorNV(vb, vbuf, v_base, sliceTensorLayoutNV(lv, j0, BC, 0, DVP));
#endif
        coopmat<float, gl_ScopeWorkgroup, BR, DVP, gl_MatrixUseAccumulator> e_wide;
        coopMatReduceNV(e_wide, e, gl_CooperativeMatrixReduceRowNV, keep_op);
#ifdef O_HALF
        oh *= coopmat<float16_t, gl_ScopeWorkgroup, BR, DVP, gl_MatrixUseAccumulator>(e_wide);
        oh = coopMatMulAdd(pa, vb, oh);
#else
        [[unroll]] for (int i = 0; i < o.length(); ++i) {
            o[i] *= e_wide[i];
        }
#ifdef PV_HALF
        coopmat<float16_t, gl_ScopeWorkgroup, BR, DVP, gl_MatrixUseAccumulator> pv =
            coopmat<float16_t, gl_ScopeWorkgroup, BR, DVP, gl_MatrixUseAccumulator>(0.0);
        pv = coopMatMulAdd(pa, vb, pv);
        o += coopmat<float, gl_ScopeWorkgroup, BR, DVP, gl_MatrixUseAccumulator>(pv);
#else
        o = coopMatMulAdd(pa, vb, o);
#endif
#endif
    }
#ifdef O_HALF
    coopmat<float, gl_ScopeWorkgroup, BR, DVP, gl_MatrixUseAccumulator> o =
        coopmat<float, gl_ScopeWorkgroup, BR, DVP, gl_MatrixUseAccumulator>(oh);
#endif

    if ((p.flags & FLAG_SPLIT) != 0u) {
        // Row (b, iq, h) of split `split`: (split * n_rows + (b * n_q +
        // iq) * n_head + h) * dv, so query rows are n_head * dv apart.
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lp =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
        lp = setTensorLayoutDimensionNV(lp, p.n_q, p.dv);
        lp = setTensorLayoutStrideNV(lp, p.n_head * p.dv, 1);
        const uint part_base = (split * p.n_rows + b * p.n_q * p.n_head + h) * p.dv;
        coopMatStoreTensorNV(o, dbuf, part_base, sliceTensorLayoutNV(lp, q0, BR, 0, DVP));
        coopMatPerElementNV(m, m, store_row_stat, q0, 0u);
        coopMatPerElementNV(l, l, store_row_stat, q0, 1u);
        return;
    }

    coopmat<float, gl_ScopeWorkgroup, BR, DVP, gl_MatrixUseAccumulator> l_wide;
    coopMatReduceNV(l_wide, l, gl_CooperativeMatrixReduceRowNV, keep_op);
    if ((p.flags & FLAG_SINKS) != 0u) {
        const float sink = sbuf[p.s_off + h * p.s_s0];
        coopmat<float, gl_ScopeWorkgroup, BR, DVP, gl_MatrixUseAccumulator> m_wide;
        coopMatReduceNV(m_wide, m, gl_CooperativeMatrixReduceRowNV, keep_op);
        [[unroll]] for (int i = 0; i < o.length(); ++i) {
            if (sink > m_wide[i]) {
                const float ms = exp(m_wide[i] - sink);
                o[i] *= ms;
                l_wide[i] = l_wide[i] * ms + 1.0;
            } else {
                l_wide[i] += exp(sink - m_wide[i]);
            }
        }
    }
    [[unroll]] for (int i = 0; i < o.length(); ++i) {
        o[i] *= l_wide[i] == 0.0 ? 0.0 : 1.0 / l_wide[i];
    }
    // dst element (d, h, iq, b): rows (queries) d_s2 apart, values d_s0.
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ld =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    ld = setTensorLayoutDimensionNV(ld, p.n_q, p.dv);
    ld = setTensorLayoutStrideNV(ld, p.d_s2, p.d_s0);
    const uint d_base = p.d_off + h * p.d_s1 + b * p.d_s3;
    coopMatStoreTensorNV(o, dbuf, d_base, sliceTensorLayoutNV(ld, q0, BR, 0, DVP));
}
