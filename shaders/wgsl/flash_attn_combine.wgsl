// Second pass of FLASH_ATTN_EXT with the keys split over workgroups
// (flash_attn.wgsl with SPLIT_KV): merges the n_split partial rows of each
// (query, head, batch) with their running max m_s and sum l_s:
//   M = max(max_s m_s, sink), L = sum_s l_s exp(m_s - M) + exp(sink - M),
//   out = sum_s O_s exp(m_s - M) / L (0 when L is 0).
// Partial rows: part[(s * n_rows + row) * DV + d], (m, l) pairs at ml_off
// + (s * n_rows + row) * 2, row = (b * n_q + iq) * n_head + h. One
// invocation per 4 output values; dst strides and offsets in elements.
// QUANTIZE (DV a multiple of 32, dst contiguous): dst is also written as
// the integer mat-vec's quantized activations (ggml's q8_1 runs, as
// mul_mat_quantize.wgsl makes them from dst: run r holds output values
// 32 r .. 32 r + 31, eight invocations each) for the MUL_MAT that reads
// dst next.

#include "common/index"

struct Params {
    n_rows: u32, dv4: u32, n_split: u32, n_q: u32,
    n_head: u32, ml_off: u32, s_off: u32, s_s0: u32,
    d_off: u32, d_s0: u32, d_s1: u32, d_s2: u32, d_s3: u32,
}

@group(0) @binding(0) var<storage, read_write> part: array<f32>;
#if defined(HAS_SINKS) && defined(QUANTIZE)
@group(0) @binding(1) var<storage, read_write> sbuf: array<f32>;
@group(0) @binding(2) var<storage, read_write> dbuf: array<f32>;
@group(0) @binding(3) var<storage, read_write> buf_q: array<u32>;
@group(0) @binding(4) var<uniform> p: Params;
#elif defined(HAS_SINKS)
@group(0) @binding(1) var<storage, read_write> sbuf: array<f32>;
@group(0) @binding(2) var<storage, read_write> dbuf: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;
#elif defined(QUANTIZE)
@group(0) @binding(1) var<storage, read_write> dbuf: array<f32>;
@group(0) @binding(2) var<storage, read_write> buf_q: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;
#else
@group(0) @binding(1) var<storage, read_write> dbuf: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
#endif
#ifdef QUANTIZE
#include "common/q8_1_run"
#endif

// Merges and writes output values 4 i .. 4 i + 3 (i < n_rows * dv4);
// returns them.
fn combined(i: u32) -> vec4<f32> {
    let c4 = i % p.dv4;
    let row = i / p.dv4;
    let h = row % p.n_head;
    let iq = (row / p.n_head) % p.n_q;
    let b = row / (p.n_head * p.n_q);
    var m = -3.0e38;
    for (var s = 0u; s < p.n_split; s++) {
        m = max(m, part[p.ml_off + (s * p.n_rows + row) * 2u]);
    }
#ifdef HAS_SINKS
    let sink = sbuf[p.s_off + h * p.s_s0];
    m = max(m, sink);
    var l = exp(sink - m);
#else
    var l = 0.0;
#endif
    var o = vec4<f32>(0.0);
    for (var s = 0u; s < p.n_split; s++) {
        let ml = p.ml_off + (s * p.n_rows + row) * 2u;
        let w = exp(part[ml] - m);
        l += part[ml + 1u] * w;
        let at = (s * p.n_rows + row) * p.dv4 * 4u + c4 * 4u;
        o += vec4<f32>(part[at], part[at + 1u], part[at + 2u], part[at + 3u]) * w;
    }
    o = select(vec4<f32>(0.0), o / l, l > 0.0);
    let at = p.d_off + c4 * 4u * p.d_s0 + h * p.d_s1 + iq * p.d_s2 + b * p.d_s3;
    dbuf[at] = o.x;
    dbuf[at + p.d_s0] = o.y;
    dbuf[at + 2u * p.d_s0] = o.z;
    dbuf[at + 3u * p.d_s0] = o.w;
    return o;
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear_index(wid, nwg, lid, WG_SIZE);
#ifdef QUANTIZE
    // Every invocation reaches the run's barriers.
    let live = i < p.n_rows * p.dv4;
    var o = vec4<f32>(0.0);
    if (live) {
        o = combined(i);
    }
    let r = q8_1_part(o, lid);
    if (live) {
        q8_1_store(i / 8u, i % 8u, r);
    }
#else
    if (i < p.n_rows * p.dv4) {
        combined(i);
    }
#endif
}
