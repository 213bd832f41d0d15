// MUL_MAT on cooperative matrices (16x16x16, half inputs, f32
// accumulation). x arrives as half rows (X_F16, converted by the host) or
// f32. Each workgroup computes a 128 x 128 block of dst (rows m, columns
// n) of one batch with 16 subgroups, each a 32 x 32 sub-block of 2 x 2
// matrices in named accumulators (an array of cooperative matrices need
// not stay in registers). (Measured on an H200 at 4096 x 512 x 14336:
// 128 x 64 blocks, or 8 subgroups of 64 x 32, ran 1.4-2x slower.) Per
// step of 64 along K, the
// weights (dequantized or converted while loading) and x are staged
// through workgroup memory as half, K-contiguous, in vec4 units (one
// store per run of 4), rows padded to 72 halves: the weights read with
// coopLoadT (row-major A, m x k), x with coopLoad (column-major B,
// k x n); the matrix calls take offsets and strides in vec4s. The next
// step's tiles are fetched into registers while the current one
// multiplies. The result goes straight to dst with coopStore
// (column-major: dst rows are m-contiguous), only for 16 x 16 blocks
// inside rows 0..m_full and columns 0..n_full (multiples of 16); the
// host computes the rest with mul_mat_tiled. When too few tiles would
// fill the GPU, the host splits K over workgroups along z: each split
// then stores its partial sums as a dense plane in scratch memory, and
// mul_mat_split_sum adds the planes into dst.
//
// Bounds (the host builds this kernel without runtime checks): every
// storage read has m < M and n < N (clamped) and k < K (every step inside
// K, or tested with K_TAIL), which keeps it inside the tensors (x rows
// hold K rounded up to 4 floats; weight runs never cross their row);
// every dst store is a whole 16 x 16 block inside m_full x n_full (of a
// split's plane: the host sizes the scratch for every split); K steps
// stay inside the split's chunk, a multiple of BK;
// workgroup indices are bounded by the tile shapes (row < 128, vec4 < 16,
// 16 * 7 + 16 <= 128).
//
// Needs WG_SIZE = 16 subgroups (subgroup_id 0..15). EMULATE_COOPMAT
// replaces the cooperative-matrix calls by plain code with the same
// layouts (any WG_SIZE dividing 2048), so
// conformance can check the rest of the kernel on devices without them.
// Layouts of x, dst and the weights as in mul_mat_vec.

#include "mul_mat_common"

struct Params {
    k: u32, m: u32, n: u32, ne12: u32,
    r2: u32, r3: u32, m_full: u32, n_full: u32,
    w_off: u32, w_s1: u32, w_s2: u32, w_s3: u32,
    x_off: u32, x_s1: u32, x_s2: u32, x_s3: u32,
    d_off: u32, d_s1: u32, d_s2: u32, d_s3: u32,
    // SPLIT_K: K is split over workgroups along z (wid.z = split *
    // batches + batch); each takes k_chunk of it (a multiple of BK) and
    // stores its partial sums split_plane f32s after the previous split's.
    batches: u32, k_chunk: u32, split_plane: u32,
#ifdef W_SPLIT
    w_scales: u32,
#endif
}

#include "common/weights_binding"
#ifdef X_F16
@group(0) @binding(1) var<storage, read_write> src1: array<vec4<f16>>;
#else
@group(0) @binding(1) var<storage, read_write> src1: array<vec4<f32>>;
#endif
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const BM: u32 = 128u;
const BN: u32 = 128u;
const BK: u32 = 64u;
// Row pitch of the tiles in vec4s of halves: BK plus 8 halves of padding.
const PITCH: u32 = 18u;
const RUNS_PER_ROW: u32 = BK / 4u;
// Runs of 4 of each tile per invocation (WG_SIZE divides 128 * 16).
const RUNS_PER_THREAD: u32 = BM * RUNS_PER_ROW / WG_SIZE;

var<workgroup> a_tile: array<vec4<f16>, BM * PITCH>;
var<workgroup> b_tile: array<vec4<f16>, BN * PITCH>;

// Tile rows past M (columns past N) repeat the last row (column): they
// only feed dst rows (columns) that are never stored, and a clamp keeps
// the loads free of branches (bounds tested per load cost 22% on an
// H200). Runs at or past K are zero: tested only with K_TAIL, which the
// host defines unless every K step lies inside K.

// Weights k0 + 4 * (i % 16) .. +3 of tile row i / 16 (clamped to M).
fn fetch_a(w_base: u32, m0: u32, k0: u32, i: u32) -> vec4<f16> {
    let m = min(m0 + i / RUNS_PER_ROW, p.m - 1u);
    let k = k0 + 4u * (i % RUNS_PER_ROW);
#ifdef K_TAIL
    if (k >= p.k) {
        return vec4<f16>(0.0);
    }
#endif
#if defined(W_VEC4) && defined(SRC0_F16)
    return src0[w_base + m * p.w_s1 + (k >> 2u)];
#else
    return vec4<f16>(w_run(w_base + m * p.w_s1, k, p.k));
#endif
}

// x k0 + 4 * (i % 16) .. +3 of tile column i / 16 (clamped to N).
fn fetch_b(x_base: u32, n0: u32, k0: u32, i: u32) -> vec4<f16> {
    let n = min(n0 + i / RUNS_PER_ROW, p.n - 1u);
    let k = k0 + 4u * (i % RUNS_PER_ROW);
#ifdef K_TAIL
    if (k >= p.k) {
        return vec4<f16>(0.0);
    }
#endif
    return vec4<f16>(src1[x_base + n * p.x_s1 + (k >> 2u)]);
}

// Index in a tile of run i: row i / 16, vec4 i % 16.
fn tile_at(i: u32) -> u32 {
    return (i / RUNS_PER_ROW) * PITCH + i % RUNS_PER_ROW;
}

#ifdef EMULATE_COOPMAT
// Plain-code stand-in for the cooperative-matrix calls, for devices
// without them (tests): the same tile layout and the same 16 x 16 block
// origins, read with the layouts the real calls use (coopLoadT
// row-major, coopLoad and coopStore column-major). Invocation t owns the
// elements t, t + WG_SIZE, ... of the BM x BN block (m fastest).
const OUT_PER_THREAD: u32 = BM * BN / WG_SIZE;

#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
#ifdef COLUMNS_FIRST
        @builtin(num_workgroups) groups: vec3<u32>,
#endif
#ifndef EMULATE_COOPMAT
        @builtin(subgroup_id) sg: u32,
#endif
        @builtin(local_invocation_index) lid: u32) {
#ifdef SPLIT_K
    // wid.z = split * batches + batch.
    let split = wid.z / p.batches;
    let batch = wid.z % p.batches;
    let k_begin = split * p.k_chunk;
    // Past K in the last split: those tiles load zeros.
    let k_end = k_begin + p.k_chunk;
    let d_split = split * p.split_plane;
#else
    // Loop bounds of the whole K, as plain as they can be: the same kernel
    // with bounds from the split ran 30% slower on an H200.
    let batch = wid.z;
    let k_begin = 0u;
    let k_end = p.k;
    let d_split = 0u;
#endif
    let i12 = batch % p.ne12;
    let i13 = batch / p.ne12;
#ifdef COLUMNS_FIRST
    // Consecutive workgroups (x fastest) take the column tiles of one row
    // tile, so those running together share weight rows.
    let linear = wid.x + wid.y * groups.x;
    let m0 = (linear / groups.y) * BM;
    let n0 = (linear % groups.y) * BN;
#else
    let m0 = wid.x * BM;
    let n0 = wid.y * BN;
#endif
    let w_base = p.w_off + (i13 / p.r3) * p.w_s3 + (i12 / p.r2) * p.w_s2;
    let x_base = p.x_off + i13 * p.x_s3 + i12 * p.x_s2;
    let d_base = p.d_off + d_split + i13 * p.d_s3 + i12 * p.d_s2;

#ifdef EMULATE_COOPMAT
    var acc: array<f32, OUT_PER_THREAD>;
#else
    // This subgroup's 32 x 32 sub-block: matrices c<i><j> at rows
    // sm + 16 i, columns sn + 16 j.
    let sm = 32u * (sg % 4u);
    let sn = 32u * (sg / 4u);
    var c00 = coop_mat16x16<f32, C>();
    var c01 = coop_mat16x16<f32, C>();
    var c10 = coop_mat16x16<f32, C>();
    var c11 = coop_mat16x16<f32, C>();
#endif

    // The next step's tiles wait in registers while this step multiplies.
    var a_next: array<vec4<f16>, RUNS_PER_THREAD>;
    var b_next: array<vec4<f16>, RUNS_PER_THREAD>;
    for (var r = 0u; r < RUNS_PER_THREAD; r++) {
        a_next[r] = fetch_a(w_base, m0, k_begin, lid + r * WG_SIZE);
        b_next[r] = fetch_b(x_base, n0, k_begin, lid + r * WG_SIZE);
    }
#ifdef SPLIT_K
    for (var step = 0u; step < p.k_chunk / BK; step++) {
        let k0 = k_begin + step * BK;
#else
    for (var k0 = 0u; k0 < p.k; k0 += BK) {
#endif
        for (var r = 0u; r < RUNS_PER_THREAD; r++) {
            let at = tile_at(lid + r * WG_SIZE);
            a_tile[at] = a_next[r];
            b_tile[at] = b_next[r];
        }
        workgroupBarrier();
        let k1 = k0 + BK;
        if (k1 < k_end) {
            for (var r = 0u; r < RUNS_PER_THREAD; r++) {
                a_next[r] = fetch_a(w_base, m0, k1, lid + r * WG_SIZE);
                b_next[r] = fetch_b(x_base, n0, k1, lid + r * WG_SIZE);
            }
        }
#ifdef EMULATE_COOPMAT
        for (var o = 0u; o < OUT_PER_THREAD; o++) {
            let e = lid + o * WG_SIZE;
            let ml = e % BM;
            let nl = e / BM;
            var sum = 0.0;
            for (var j = 0u; j < RUNS_PER_ROW; j++) {
                sum += dot(vec4<f32>(a_tile[ml * PITCH + j]), vec4<f32>(b_tile[nl * PITCH + j]));
            }
            acc[o] += sum;
        }
#else
        for (var kk = 0u; kk < BK / 4u; kk += 4u) {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&a_tile[sm * PITCH + kk], PITCH);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&a_tile[(sm + 16u) * PITCH + kk], PITCH);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&b_tile[sn * PITCH + kk], PITCH);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&b_tile[(sn + 16u) * PITCH + kk], PITCH);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
        }
#endif
        workgroupBarrier();
    }

#ifdef EMULATE_COOPMAT
    // coopStore column-major: C(i, j) of the 16 x 16 block at dst row m,
    // column n goes to dst[d_base + (n + j) * d_s1 + m + i]; only whole
    // blocks inside m_full x n_full are stored.
    for (var o = 0u; o < OUT_PER_THREAD; o++) {
        let e = lid + o * WG_SIZE;
        let ml = e % BM;
        let nl = e / BM;
        let m_blk = m0 + ml - ml % 16u;
        let n_blk = n0 + nl - nl % 16u;
        if (m_blk + 16u <= p.m_full && n_blk + 16u <= p.n_full) {
            dst[d_base + (n0 + nl) * p.d_s1 + m0 + ml] = acc[o];
        }
    }
}
#else
    // Arguments of coopStore go through `let`s: naga 30 does not emit
    // expressions built inside its argument list before the store.
    let stride = p.d_s1;
    let n_a = n0 + sn;
    let n_b = n_a + 16u;
    let cols_a = n_a + 16u <= p.n_full;
    let cols_b = n_b + 16u <= p.n_full;
    store_pair(c00, c01, d_base, m0 + sm, n_a, n_b, cols_a, cols_b, stride);
    store_pair(c10, c11, d_base, m0 + sm + 16u, n_a, n_b, cols_a, cols_b, stride);
}

// Stores the two 16 x 16 blocks of rows m.. (columns n_a.. and n_b..)
// that lie inside m_full x n_full.
fn store_pair(ca: coop_mat16x16<f32, C>, cb: coop_mat16x16<f32, C>, d_base: u32, m: u32,
              n_a: u32, n_b: u32, cols_a: bool, cols_b: bool, stride: u32) {
    if (m + 16u > p.m_full) {
        return;
    }
    if (cols_a) {
        let at = d_base + n_a * stride + m;
        coopStore(ca, &dst[at], stride);
    }
    if (cols_b) {
        let at = d_base + n_b * stride + m;
        coopStore(cb, &dst[at], stride);
    }
}
#endif
