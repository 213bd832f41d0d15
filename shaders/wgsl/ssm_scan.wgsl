// SSM_SCAN (Mamba-1 and Mamba-2 selective scan), as ggml. For sequence q
// the state starts as s[.., ids[q]]; per token, head h (group
// g = h / heads_per_group), channel i and state element j:
//   dt' = softplus(dt[h]),
//   state = state * exp(dt' * A[j or 0, h]) + B[j, g] * x[i, h] * dt',
//   y[i, h] = sum_j state * C[j, g].
// dst holds every y ([head_dim, n_head, n_tok, n_seqs]) followed by the
// final states ([d_state, head_dim, n_head, n_seqs]).
//
// Workgroup (block of ROWS channels, head, sequence); thread (row, lane)
// keeps state elements j = lane + k * TJ (k < JPER) in registers, and the
// lanes of a row sum y through workgroup memory. Strides and offsets in
// elements; a_s0 is 0 for Mamba-2's scalar A. ids out of range set the
// error flag (HAS_ERROR_FLAG) and read slot 0.

struct Params {
    d_state: u32, head_dim: u32, n_head: u32, n_tok: u32,
    heads_per_group: u32, n_slots: u32, node1: u32, y_len: u32,
    s_off: u32, s_s0: u32, s_s1: u32, s_s2: u32, s_s3: u32,
    x_off: u32, x_s0: u32, x_s1: u32, x_s2: u32, x_s3: u32,
    dt_off: u32, dt_s0: u32, dt_s1: u32, dt_s2: u32,
    a_off: u32, a_s0: u32, a_s1: u32,
    b_off: u32, b_s0: u32, b_s1: u32, b_s2: u32, b_s3: u32,
    c_off: u32, c_s0: u32, c_s1: u32, c_s2: u32, c_s3: u32,
    ids_off: u32, ids_s0: u32, d_off: u32,
}

@group(0) @binding(0) var<storage, read_write> s0: array<f32>;
@group(0) @binding(1) var<storage, read_write> xs: array<f32>;
@group(0) @binding(2) var<storage, read_write> dts: array<f32>;
@group(0) @binding(3) var<storage, read_write> As: array<f32>;
@group(0) @binding(4) var<storage, read_write> Bs: array<f32>;
@group(0) @binding(5) var<storage, read_write> Cs: array<f32>;
@group(0) @binding(6) var<storage, read_write> ids: array<i32>;
@group(0) @binding(7) var<storage, read_write> dst: array<f32>;
#ifdef HAS_ERROR_FLAG
@group(0) @binding(8) var<storage, read_write> flag: array<atomic<u32>>;
@group(0) @binding(9) var<uniform> p: Params;
#else
@group(0) @binding(8) var<uniform> p: Params;
#endif

#ifdef HAS_ERROR_FLAG
#include "common/error_flag"
#endif

var<workgroup> partial: array<f32, WG_SIZE>;

fn softplus(x: f32) -> f32 {
    if (x > 20.0) {
        return x;
    }
    return log(1.0 + exp(x));
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
    let lane = t % TJ;
    let row = t / TJ;
    let i = wid.x * ROWS + row;
    let h = wid.y;
    let q = wid.z;
    let row_ok = i < p.head_dim;
    let g = h / p.heads_per_group;

    var slot = ids[p.ids_off + q * p.ids_s0];
    if (slot < 0 || slot >= i32(p.n_slots)) {
#ifdef HAS_ERROR_FLAG
        if (t == 0u) {
            report_error(p.node1, bitcast<u32>(slot));
        }
#endif
        slot = 0;
    }

    var st: array<f32, JPER>;
    for (var k = 0u; k < JPER; k++) {
        let j = lane + k * TJ;
        st[k] = 0.0;
        if (row_ok && j < p.d_state) {
            st[k] = s0[p.s_off + j * p.s_s0 + i * p.s_s1 + h * p.s_s2 + u32(slot) * p.s_s3];
        }
    }

    for (var tok = 0u; tok < p.n_tok; tok++) {
        var sum = 0.0;
        if (row_ok) {
            let dt_sp = softplus(dts[p.dt_off + h * p.dt_s0 + tok * p.dt_s1 + q * p.dt_s2]);
            let x_dt = xs[p.x_off + i * p.x_s0 + h * p.x_s1 + tok * p.x_s2 + q * p.x_s3] * dt_sp;
            let b_row = p.b_off + g * p.b_s1 + tok * p.b_s2 + q * p.b_s3;
            let c_row = p.c_off + g * p.c_s1 + tok * p.c_s2 + q * p.c_s3;
            for (var k = 0u; k < JPER; k++) {
                let j = lane + k * TJ;
                if (j < p.d_state) {
                    let a = As[p.a_off + j * p.a_s0 + h * p.a_s1];
                    st[k] = st[k] * exp(dt_sp * a) + Bs[b_row + j * p.b_s0] * x_dt;
                    sum += st[k] * Cs[c_row + j * p.c_s0];
                }
            }
        }
        partial[t] = sum;
        workgroupBarrier();
        for (var w = TJ / 2u; w > 0u; w >>= 1u) {
            if (lane < w) {
                partial[t] += partial[t + w];
            }
            workgroupBarrier();
        }
        if (lane == 0u && row_ok) {
            dst[p.d_off + ((q * p.n_tok + tok) * p.n_head + h) * p.head_dim + i] = partial[t];
        }
        // The next token's partial sums overwrite this one's.
        workgroupBarrier();
    }

    if (row_ok) {
        let base = p.d_off + p.y_len + ((q * p.n_head + h) * p.head_dim + i) * p.d_state;
        for (var k = 0u; k < JPER; k++) {
            let j = lane + k * TJ;
            if (j < p.d_state) {
                dst[base + j] = st[k];
            }
        }
    }
}
