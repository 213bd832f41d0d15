// ROPE as ggml_compute_forward_rope_flt: one invocation per pair slot k of
// a row (ceil(ne0 / 2) slots). Slots below the rotated pair count rotate a
// pair by the angle of pair k; the others copy elements 2k and 2k+1.
// Pair layout: OP_NORMAL (2k, 2k+1); OP_VISION (k, k + n_dims);
// OP_NEOX / OP_MROPE / OP_IMROPE (k, k + n_dims/2).
// The angle is pos * theta_scale^e multiplied out step by step (e = k, or
// the steps since its section restarted in vision mode) exactly as the
// reference, divided by the frequency factor, mixed by YaRN, and reduced
// to [-pi, pi] before cos/sin. Strides and offsets are in elements.
// HAS_FF: frequency factors are bound after the positions.
// STORE_ROWS (f32 rows [ne0, ne1, ne2, 1], dst contiguous): the SET_ROWS
// that follows, storing dst as rows of ne0 * ne1 values (a layer's K cache
// store), runs here too: element j of head i1 of token i2 also goes to
// element i1 * ne0 + j of cache row idx[i2] (as CACHE_TYPE, the same
// conversion set_rows makes), and a bad index is reported as set_rows
// reports it (common/row_index).

#include "common/index"

struct Params {
    ne0: u32, ne1: u32, ne2: u32, ne3: u32,
    off_a: u32, sa0: u32, sa1: u32, sa2: u32, sa3: u32,
    off_d: u32, sd0: u32, sd1: u32, sd2: u32, sd3: u32,
    off_pos: u32, off_ff: u32, sff: u32, n_ff: u32,
    n_dims: u32, n_pairs: u32,
    theta_scale: f32, freq_scale: f32, ext_factor: f32, mscale: f32,
    corr_low: f32, corr_high: f32,
    sec0: u32, sec1: u32, sec2: u32, sec3: u32,
    // STORE_ROWS: the cache's offset, element and row strides (elements)
    // and rows; the indices' offset and stride (elements, i64: words);
    // the SET_ROWS node + 1.
    c_off: u32, c_s0: u32, c_s1: u32, c_rows: u32,
    i_off: u32, i_s0: u32, node1: u32,
}

@group(0) @binding(0) var<storage, read_write> src0: array<SRC0_TYPE>;
@group(0) @binding(1) var<storage, read_write> pos: array<i32>;
#ifdef HAS_FF
@group(0) @binding(2) var<storage, read_write> ff: array<f32>;
#endif
#ifdef INPLACE
#define dst src0
#else
@group(0) @binding(BINDING_DST) var<storage, read_write> dst: array<DST_TYPE>;
#endif
#ifdef STORE_ROWS
@group(0) @binding(BINDING_CACHE) var<storage, read_write> cache: array<CACHE_TYPE>;
@group(0) @binding(BINDING_IDX) var<storage, read_write> idx: array<SRC1_TYPE>;
@group(0) @binding(BINDING_FLAG) var<storage, read_write> flag: array<atomic<u32>>;
#endif
@group(0) @binding(BINDING_PARAMS) var<uniform> p: Params;

#ifdef STORE_ROWS
#include "common/row_index"
#endif
#include "common/rope_angle"

// Writes element j of row (i1, i2, i3) at `at` of dst, and with STORE_ROWS
// into its cache row too.
fn put(at: u32, y: f32, j: u32, i1: u32, i2: u32) {
    dst[at] = DST_TYPE(y);
#ifdef STORE_ROWS
    let r = stored_row(p.i_off + i2 * p.i_s0, p.c_rows);
    if (r.y == 0u) {
        report_bad_row(r.x, p.node1);
        return;
    }
    cache[p.c_off + r.x * p.c_s1 + (i1 * p.ne0 + j) * p.c_s0] = CACHE_TYPE(DST_TYPE(y));
#endif
}

fn position(i2: u32, section: u32) -> f32 {
    return f32(pos[p.off_pos + i2 + section * p.ne2]);
}

// The unscaled angle of pair k of a row of token i2.
fn angle(k: u32, i2: u32) -> f32 {
#if defined(OP_NORMAL) || defined(OP_NEOX)
    return powered(position(i2, 0u), k);
#else
    let sect_dims = p.sec0 + p.sec1 + p.sec2 + p.sec3;
    let sector = k % sect_dims;
    let sec_w = p.sec0 + p.sec1;
    let sec_e = sec_w + p.sec2;
#ifdef OP_IMROPE
    var section = 3u;
    if (sector % 3u == 1u && sector < 3u * p.sec1) {
        section = 1u;
    } else if (sector % 3u == 2u && sector < 3u * p.sec2) {
        section = 2u;
    } else if (sector % 3u == 0u && sector < 3u * p.sec0) {
        section = 0u;
    }
    return powered(position(i2, section), k);
#else
    var section = 0u;
    var start = 0u;
    if (sector >= p.sec0 && sector < sec_w) {
        section = 1u;
        start = p.sec0;
    } else if (sector >= sec_w && sector < sec_e) {
        section = 2u;
        start = sec_w;
    } else if (sector >= sec_e) {
        section = 3u;
        start = sec_e;
    }
#ifdef OP_VISION
    // Each section's angle restarts when the sector reaches its start,
    // unless an earlier section of the reference's if-chain starts there.
    var restarts = true;
    if (section == 1u) {
        restarts = start != 0u;
    } else if (section == 2u) {
        restarts = start != 0u && start != p.sec0;
    } else if (section == 3u) {
        restarts = start != 0u && start != p.sec0 && start != sec_w;
    }
    if (restarts) {
        return powered(position(i2, section), sector - start);
    }
#endif
    return powered(position(i2, section), k);
#endif
#endif
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let slots = (p.ne0 + 1u) / 2u;
    let i = linear_index(wid, nwg, lid, WG_SIZE);
    if (i >= slots * p.ne1 * p.ne2 * p.ne3) {
        return;
    }
    let k = i % slots;
    let r = unravel(i / slots, p.ne1, p.ne2, p.ne3);
    let base_a = p.off_a + r.x * p.sa1 + r.y * p.sa2 + r.z * p.sa3;
    let base_d = p.off_d + r.x * p.sd1 + r.y * p.sd2 + r.z * p.sd3;

    if (k >= p.n_pairs) {
        let j = 2u * k;
        put(base_d + j * p.sd0, f32(src0[base_a + j * p.sa0]), j, r.x, r.y);
        if (j + 1u < p.ne0) {
            put(base_d + (j + 1u) * p.sd0, f32(src0[base_a + (j + 1u) * p.sa0]), j + 1u, r.x, r.y);
        }
        return;
    }

#ifdef OP_NORMAL
    let j0 = 2u * k;
    let j1 = j0 + 1u;
#elif defined(OP_VISION)
    let j0 = k;
    let j1 = k + p.n_dims;
#else
    let j0 = k;
    let j1 = k + p.n_dims / 2u;
#endif

    let cs = rope_cos_sin(angle(k, r.y), k);
    let c = cs.x;
    let s = cs.y;

    let x0 = f32(src0[base_a + j0 * p.sa0]);
    let x1 = f32(src0[base_a + j1 * p.sa0]);
    put(base_d + j0 * p.sd0, x0 * c - x1 * s, j0, r.x, r.y);
    put(base_d + j1 * p.sd0, x0 * s + x1 * c, j1, r.x, r.y);
}
