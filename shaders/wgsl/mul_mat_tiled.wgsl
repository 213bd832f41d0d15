// MUL_MAT, register-tiled: each workgroup computes a 64 x 64 or 128 x 128
// block of dst (rows m, columns n) of one batch; each of its 256
// invocations a 4 x 4 or 8 x 8 block (THREAD_TILE). Per step of TILE_K
// along K, the weights (dequantized to f32 while loading) and x are staged
// through workgroup memory, k-major with one vec4 of padding per row. The
// block covers rows m_begin..m_end and columns n_begin..n_end (the
// cooperative-matrix path leaves its edges to this kernel). Layouts of x,
// dst and the weights as in mul_mat_vec; with X_F16, x holds halves
// (converted for the cooperative-matrix kernel).
//
// Bounds (built without runtime checks): tile rows past m_end (columns
// past n_end) repeat the last one, which only feeds outputs that are never
// stored, so the loads carry no row or column test; runs at or past K are
// zero, tested only with K_TAIL, which the host defines unless K is a
// multiple of TILE_K. Stores test m < m_end and n < n_end.

#include "mul_mat_common"

struct Params {
    k: u32, m_end: u32, n_end: u32, ne12: u32,
    r2: u32, r3: u32, m_begin: u32, n_begin: u32,
    w_off: u32, w_s1: u32, w_s2: u32, w_s3: u32,
    x_off: u32, x_s1: u32, x_s2: u32, x_s3: u32,
    d_off: u32, d_s0: u32, d_s1: u32, d_s2: u32, d_s3: u32,
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

// Each invocation computes THREAD_TILE x THREAD_TILE outputs (4 or 8):
// rows 4 * (tx + 16 * i) + 0..3 and columns 4 * (ty + 16 * j) + 0..3 of
// the block, so neighbours read neighbouring vec4s of the tiles.
const TT: u32 = THREAD_TILE;
const TV: u32 = THREAD_TILE / 4u;
const BM: u32 = 16u * TT;
const BN: u32 = 16u * TT;
// Row pitch of the tiles in vec4s: BM / 4 plus one of padding.
const PITCH: u32 = BM / 4u + 1u;
const RUNS_PER_ROW: u32 = TILE_K / 4u;

var<workgroup> a_tile: array<vec4<f32>, TILE_K * PITCH>;
var<workgroup> b_tile: array<vec4<f32>, TILE_K * PITCH>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let tx = lid % 16u;
    let ty = lid / 16u;
    let i12 = wid.z % p.ne12;
    let i13 = wid.z / p.ne12;
    let m0 = p.m_begin + wid.x * BM;
    let n0 = p.n_begin + wid.y * BN;
    let w_base = p.w_off + (i13 / p.r3) * p.w_s3 + (i12 / p.r2) * p.w_s2;
    let x_base = p.x_off + i13 * p.x_s3 + i12 * p.x_s2;
    let d_base = p.d_off + i13 * p.d_s3 + i12 * p.d_s2;

    // acc[i * TT + j]: rows 4 * (tx + 16 * i) + 0..3 of column
    // 4 * (ty + 16 * (j / 4)) + j % 4.
    var acc: array<vec4<f32>, TV * TT>;
    for (var k0 = 0u; k0 < p.k; k0 += TILE_K) {
        for (var i = lid; i < BM * RUNS_PER_ROW; i += 256u) {
            let row = i / RUNS_PER_ROW;
            let kq = 4u * (i % RUNS_PER_ROW);
            let m = min(m0 + row, p.m_end - 1u);
            let k = k0 + kq;
#ifdef K_TAIL
            var v = vec4<f32>(0.0);
            if (k < p.k) {
                v = w_run(w_base + m * p.w_s1, k, p.k);
            }
#else
            let v = w_run(w_base + m * p.w_s1, k, p.k);
#endif
            let at = kq * PITCH + row / 4u;
            let lane = row % 4u;
            a_tile[at][lane] = v.x;
            a_tile[at + PITCH][lane] = v.y;
            a_tile[at + 2u * PITCH][lane] = v.z;
            a_tile[at + 3u * PITCH][lane] = v.w;
        }
        for (var i = lid; i < BN * RUNS_PER_ROW; i += 256u) {
            let col = i / RUNS_PER_ROW;
            let kq = 4u * (i % RUNS_PER_ROW);
            let n = min(n0 + col, p.n_end - 1u);
            let k = k0 + kq;
#ifdef K_TAIL
            var v = vec4<f32>(0.0);
            if (k < p.k) {
                v = vec4<f32>(src1[x_base + n * p.x_s1 + (k >> 2u)]);
            }
#else
            let v = vec4<f32>(src1[x_base + n * p.x_s1 + (k >> 2u)]);
#endif
            let at = kq * PITCH + col / 4u;
            let lane = col % 4u;
            b_tile[at][lane] = v.x;
            b_tile[at + PITCH][lane] = v.y;
            b_tile[at + 2u * PITCH][lane] = v.z;
            b_tile[at + 3u * PITCH][lane] = v.w;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TILE_K; kk++) {
            var a: array<vec4<f32>, TV>;
            var b: array<vec4<f32>, TV>;
            for (var i = 0u; i < TV; i++) {
                a[i] = a_tile[kk * PITCH + tx + 16u * i];
                b[i] = b_tile[kk * PITCH + ty + 16u * i];
            }
            for (var i = 0u; i < TV; i++) {
                for (var j = 0u; j < TV; j++) {
                    let at = i * TT + 4u * j;
                    acc[at] += a[i] * b[j].x;
                    acc[at + 1u] += a[i] * b[j].y;
                    acc[at + 2u] += a[i] * b[j].z;
                    acc[at + 3u] += a[i] * b[j].w;
                }
            }
        }
        workgroupBarrier();
    }

    for (var j = 0u; j < TT; j++) {
        let n = n0 + 4u * (ty + 16u * (j / 4u)) + j % 4u;
        if (n >= p.n_end) {
            continue;
        }
        for (var i = 0u; i < TT; i++) {
            let m = m0 + 4u * (tx + 16u * (i / 4u)) + i % 4u;
            if (m < p.m_end) {
                dst[d_base + n * p.d_s1 + m * p.d_s0] = acc[(i / 4u) * TT + j][i % 4u];
            }
        }
    }
}
