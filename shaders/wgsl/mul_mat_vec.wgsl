// MUL_MAT for few columns (N <= 8): dst[m, n] = sum_k w[k, m] * x[k, n].
//
// One workgroup computes NROWS rows x NCOLS columns of one batch. Rows are
// cut into units of 16 weights (4 runs of 4: for block formats the grouping
// of common/quant that reads each byte once, for f32/half/bfloat16 16
// contiguous weights; with W_HALF8, 8 halves read in one 16-byte load);
// invocation i takes units i, i + WG_SIZE, ... of every row, so a
// subgroup reads consecutive units, and each weight is read once and used
// for the NCOLS columns. Partial sums are reduced with subgroupAdd then
// across subgroups through workgroup memory (PATH_SUBGROUP), or by a tree
// in workgroup memory.
//
// x (src1) is f32 with 16-byte aligned rows (the host converts anything
// else into scratch memory first), read as vec4; offsets and strides of x
// in vec4s, of dst in elements, of the weights as mul_mat_common says.
//
// X_Q8 (legacy block weights, q4_K and q6_K): x was quantized by
// mul_mat_quantize into runs of 32 signed bytes with a scale (three
// vec4<u32> per run, strides in vec4s); a unit is then Q8_RUNS runs of 32
// weights (x runs q8_run(u, r)) and the products are integer dot products (common/quant_dot),
// as ggml's MMVQ kernels do.
//
// W_SPLIT (q4_0 or q4_K): the weights are stored split
// (backends/webgpu/src/split.rs): rows of block quants (16 or 128 bytes
// a block) w_s1 bytes apart from w_off (with X_Q8 a unit is whole vec4
// loads), and the
// blocks' heads after all quants from byte w_scales (q4_0: its half
// scale, 2 bytes; q4_K: d, dmin and the scales, one vec4).
//
// EPILOGUE (one column, NROWS = 2, the host's ops::epilogue fusion):
// the product's rows go on to what the next nodes would make of them, in
// the same kernel and with the same bits:
// - EPILOGUE_ROPE: the ROPE over the product (normal mode, one token,
//   rows of r_ne0 values, in place), as rope.wgsl rotates it; a
//   workgroup's two rows are one pair (r_ne0 is even);
// - EPILOGUE_STORE: the SET_ROWS storing the (rotated) product as one
//   cache row (element m of row idx[0], as CACHE_TYPE), a bad index
//   reported as set_rows reports it (node1: the SET_ROWS node + 1).
//
// MUL_MAT_ID: batch b is the pair (slot e = b % n_used, token t =
// b / n_used); its weights are expert ids[e, t] and its single column is x
// row e % ne11 of token t; an id outside 0..n_experts is reported through
// the error flag.

#include "mul_mat_common"
#ifdef X_Q8
#include "common/quant_dot"
#endif

struct Params {
    k: u32, m: u32, n: u32, ne12: u32,
    r2: u32, r3: u32, n_units: u32, total_groups: u32,
    n_row_groups: u32, n_col_groups: u32,
    w_off: u32, w_s1: u32, w_s2: u32, w_s3: u32,
    x_off: u32, x_s1: u32, x_s2: u32, x_s3: u32,
    d_off: u32, d_s0: u32, d_s1: u32, d_s2: u32, d_s3: u32,
    ids_off: u32, ids_s0: u32, ids_s1: u32, n_used: u32, n_experts: u32, node1: u32,
#ifdef W_SPLIT
    w_scales: u32,
#endif
#ifdef EPILOGUE
    r_ne0: u32, off_pos: u32, off_ff: u32, sff: u32, n_ff: u32, n_pairs: u32,
    theta_scale: f32, freq_scale: f32, ext_factor: f32, mscale: f32,
    corr_low: f32, corr_high: f32,
    c_off: u32, c_s0: u32, c_s1: u32, c_rows: u32, i_off: u32,
#endif
}

#include "common/matvec_inputs"
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
#ifdef MUL_MAT_ID
@group(0) @binding(3) var<storage, read_write> ids: array<i32>;
@group(0) @binding(4) var<storage, read_write> flag: array<atomic<u32>>;
@group(0) @binding(5) var<uniform> p: Params;
#elif defined(EPILOGUE)
#ifdef EPILOGUE_ROPE
@group(0) @binding(BINDING_POS) var<storage, read_write> pos: array<i32>;
#ifdef HAS_FF
@group(0) @binding(BINDING_FF) var<storage, read_write> ff: array<f32>;
#endif
#endif
#ifdef EPILOGUE_STORE
@group(0) @binding(BINDING_CACHE) var<storage, read_write> cache: array<CACHE_TYPE>;
@group(0) @binding(BINDING_IDX) var<storage, read_write> idx: array<SRC1_TYPE>;
@group(0) @binding(BINDING_FLAG) var<storage, read_write> flag: array<atomic<u32>>;
#endif
@group(0) @binding(BINDING_PARAMS) var<uniform> p: Params;
#else
@group(0) @binding(3) var<uniform> p: Params;
#endif

const NACC: u32 = NROWS * NCOLS;

#ifdef PATH_SUBGROUP
var<workgroup> partial: array<f32, MAX_SUBGROUPS * NACC>;
#else
var<workgroup> partial: array<f32, WG_SIZE * NACC>;
#endif

#ifdef EPILOGUE_ROPE
#include "common/rope_angle"
#endif
#ifdef EPILOGUE_STORE
#include "common/row_index"

// Stores the product's element m (rotated) into the cache row idx[0].
fn store_row(m: u32, y: f32) {
    let r = stored_row(p.i_off, p.c_rows);
    if (r.y == 0u) {
        report_bad_row(r.x, p.node1);
        return;
    }
    cache[p.c_off + r.x * p.c_s1 + m * p.c_s0] = CACHE_TYPE(y);
}
#endif

#ifdef EPILOGUE
// Row `row0 + lid` (lid 0 or 1) of the product `sums` (the workgroup's
// two rows), rotated with its pair when EPILOGUE_ROPE; the value dst and
// the cache row get.
fn epilogue_value(sums: vec2<f32>, row0: u32, lid: u32) -> f32 {
#ifdef EPILOGUE_ROPE
    let k = (row0 % p.r_ne0) / 2u;
    if (k >= p.n_pairs) {
        return sums[lid];
    }
    let cs = rope_cos_sin(powered(f32(pos[p.off_pos]), k), k);
    let c = cs.x;
    let s = cs.y;
    let x0 = sums.x;
    let x1 = sums.y;
    if (lid == 0u) {
        return x0 * c - x1 * s;
    }
    return x0 * s + x1 * c;
#else
    return sums[lid];
#endif
}
#endif

#ifdef MUL_MAT_ID
#include "common/error_flag"

// Stores node + 1 and the bad id in the error flag (first report wins).
fn report(bad: u32) {
    report_error(p.node1, bad);
}
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
#ifdef PATH_SUBGROUP
        @builtin(subgroup_id) sg_id: u32,
        @builtin(subgroup_invocation_id) sg_lane: u32,
        @builtin(num_subgroups) n_sg: u32,
#endif
        @builtin(local_invocation_index) lid: u32) {
    let g = wid.y * nwg.x + wid.x;
    if (g >= p.total_groups) {
        return;
    }
    let row0 = (g % p.n_row_groups) * NROWS;
    let rest = g / p.n_row_groups;
    let col0 = (rest % p.n_col_groups) * NCOLS;
    let b = rest / p.n_col_groups;
#ifdef MUL_MAT_ID
    let e = b % p.n_used;
    let t = b / p.n_used;
    let id = ids[p.ids_off + e * p.ids_s0 + t * p.ids_s1];
    let valid = id >= 0 && u32(id) < p.n_experts;
    let expert = select(0u, u32(id), valid);
    let w_base = p.w_off + expert * p.w_s2;
    let x_base = p.x_off + (e % p.n) * p.x_s1 + t * p.x_s2;
    let d_base = p.d_off + e * p.d_s1 + t * p.d_s2;
#else
    let valid = true;
    let i12 = b % p.ne12;
    let i13 = b / p.ne12;
    let w_base = p.w_off + (i13 / p.r3) * p.w_s3 + (i12 / p.r2) * p.w_s2;
    let x_base = p.x_off + i13 * p.x_s3 + i12 * p.x_s2;
    let d_base = p.d_off + i13 * p.d_s3 + i12 * p.d_s2;
#endif

    // Rows and columns past the end repeat the last one; their sums are
    // not stored.
    var rows: array<u32, NROWS>;
    for (var r = 0u; r < NROWS; r++) {
        rows[r] = w_base + min(row0 + r, p.m - 1u) * p.w_s1;
    }
    var cols: array<u32, NCOLS>;
    for (var c = 0u; c < NCOLS; c++) {
#ifdef MUL_MAT_ID
        cols[c] = x_base;
#else
        cols[c] = x_base + min(col0 + c, p.n - 1u) * p.x_s1;
#endif
    }

    var acc: array<f32, NACC>;
#ifdef W_HALF8
    // K % 16 == 0 (so rows stay 16-byte aligned): a unit is 8 halves, one
    // 16-byte load, and neighbouring invocations read neighbouring units
    // (16 halves in two loads per unit: 33.6-33.9 against 32.5-32.8 us
    // at 4096 x 14336 on an H200).
    for (var u = lid; u < p.n_units; u += WG_SIZE) {
        var wv: array<vec4<u32>, NROWS>;
        for (var r = 0u; r < NROWS; r++) {
            wv[r] = src0[rows[r] + u];
        }
        for (var c = 0u; c < NCOLS; c++) {
            let xb = cols[c] + 2u * u;
            let x0 = src1[xb];
            let x1 = src1[xb + 1u];
            for (var r = 0u; r < NROWS; r++) {
                let a = wv[r];
                acc[r * NCOLS + c] += dot(vec4<f32>(unpack2x16float(a.x), unpack2x16float(a.y)), x0)
                    + dot(vec4<f32>(unpack2x16float(a.z), unpack2x16float(a.w)), x1);
            }
        }
    }
#else
    for (var u = lid; u < p.n_units; u += WG_SIZE) {
#ifdef X_Q8
        var wq: array<QUnit8, NROWS>;
        for (var r = 0u; r < NROWS; r++) {
#ifdef W_SPLIT
            wq[r] = q_load8_split(rows[r], w_split_head(rows[r]), u);
#else
            wq[r] = q_load8(rows[r], u);
#endif
        }
        for (var c = 0u; c < NCOLS; c++) {
            var x: array<vec4<u32>, 3 * Q8_RUNS>;
            for (var r = 0u; r < Q8_RUNS; r++) {
                let xi = cols[c] + 3u * q8_run(u, r);
                for (var i = 0u; i < 3u; i++) {
                    x[3u * r + i] = src1[xi + i];
                }
            }
            for (var r = 0u; r < NROWS; r++) {
                acc[r * NCOLS + c] += q_dot8(wq[r], x);
            }
        }
#else
        var w: array<array<vec4<f32>, 4>, NROWS>;
        var kr: vec4<u32>;
#ifdef W_QUANT
        let blk = u / QUANT_UNITS;
        let ub = u % QUANT_UNITS;
        let kb = blk * QUANT_BLOCK_K;
        for (var r = 0u; r < NROWS; r++) {
#ifdef W_SPLIT
            w[r] = q_unit_at(rows[r] + blk * QUANT_QS_BYTES, w_split_head(rows[r]) + blk * QUANT_HEAD_BYTES, ub);
#else
            w[r] = q_unit(rows[r] + blk * QUANT_BLOCK_BYTES, ub);
#endif
        }
        kr = (vec4<u32>(kb) + vec4<u32>(q_unit_k(ub, 0u), q_unit_k(ub, 1u), q_unit_k(ub, 2u), q_unit_k(ub, 3u))) >> vec4<u32>(2u);
#else
        let k0 = 16u * u;
        for (var r = 0u; r < NROWS; r++) {
            for (var q = 0u; q < 4u; q++) {
                let k = k0 + 4u * q;
                if (k < p.k) {
                    w[r][q] = w_run(rows[r], k, p.k);
                }
            }
        }
        // Runs past K have zero weights; their x index is clamped to the
        // row's first vec4 (finite products are masked below).
        let kq = vec4<u32>(k0) + vec4<u32>(0u, 4u, 8u, 12u);
        let live = kq < vec4<u32>(p.k);
        kr = select(vec4<u32>(0u), kq >> vec4<u32>(2u), live);
#endif
        for (var c = 0u; c < NCOLS; c++) {
            let xb = cols[c];
            let x0 = src1[xb + kr.x];
            let x1 = src1[xb + kr.y];
            let x2 = src1[xb + kr.z];
            let x3 = src1[xb + kr.w];
            for (var r = 0u; r < NROWS; r++) {
#ifdef W_QUANT
                acc[r * NCOLS + c] += dot(w[r][0], x0) + dot(w[r][1], x1) + dot(w[r][2], x2) + dot(w[r][3], x3);
#else
                let d = vec4<f32>(dot(w[r][0], x0), dot(w[r][1], x1), dot(w[r][2], x2), dot(w[r][3], x3));
                acc[r * NCOLS + c] += dot(select(vec4<f32>(0.0), d, live), vec4<f32>(1.0));
#endif
            }
        }
#endif
    }
#endif

#ifdef PATH_SUBGROUP
    for (var i = 0u; i < NACC; i++) {
        let s = subgroupAdd(acc[i]);
        if (sg_lane == 0u) {
            partial[sg_id * NACC + i] = s;
        }
    }
    workgroupBarrier();
#ifdef EPILOGUE
    if (lid < 2u) {
        var sums = vec2<f32>(0.0);
        for (var i = 0u; i < 2u; i++) {
            for (var s = 0u; s < n_sg; s++) {
                sums[i] += partial[s * 2u + i];
            }
        }
#else
    if (lid < NACC) {
        var sum = 0.0;
        for (var s = 0u; s < n_sg; s++) {
            sum += partial[s * NACC + lid];
        }
#endif
#else
    for (var i = 0u; i < NACC; i++) {
        partial[i * WG_SIZE + lid] = acc[i];
    }
    workgroupBarrier();
    for (var stride = WG_SIZE / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            for (var i = 0u; i < NACC; i++) {
                partial[i * WG_SIZE + lid] += partial[i * WG_SIZE + lid + stride];
            }
        }
        workgroupBarrier();
    }
#ifdef EPILOGUE
    if (lid < 2u) {
        let sums = vec2<f32>(partial[0], partial[WG_SIZE]);
#else
    if (lid < NACC) {
        let sum = partial[lid * WG_SIZE];
#endif
#endif
#ifdef EPILOGUE
        // Every row exists (M is even); one column.
        let m = row0 + lid;
        let y = epilogue_value(sums, row0, lid);
        dst[d_base + m * p.d_s0] = y;
#ifdef EPILOGUE_STORE
        store_row(m, y);
#endif
#else
        let m = row0 + lid / NCOLS;
        let n = col0 + lid % NCOLS;
        if (m < p.m && n < p.n && valid) {
            dst[d_base + n * p.d_s1 + m * p.d_s0] = sum;
        }
#endif
    }
#ifdef MUL_MAT_ID
    if (!valid && lid == 0u) {
        report(bitcast<u32>(id));
    }
#endif
}
