// RMS_NORM fused with the nodes around it, one workgroup per f32 row
// (the host's fusion plan: backends/webgpu/src/ops/fusion.rs):
// FUSE_ADD: the row is first s = x + b (b broadcast over x), written out;
// FUSE_MUL: the normalised row n is multiplied by w (broadcast) into dst;
// KEEP_NORM: n itself is written too (whenever dst does not replace it);
// QUANTIZE: dst is also written as the integer mat-vec's quantized
// activations (ggml's q8_1 runs, exactly as mul_mat_quantize.wgsl makes
// them; ne0 a multiple of 32), for the MUL_MATs that read dst next.
// Each value is computed as the separate ADD, RMS_NORM and MUL kernels
// compute it, in the same order, so the results are the same bits: the
// row is shared out and reduced as common/row_norm says (norm.wgsl does
// the same). With ROW_CHUNKS the row (and the weight) is loaded once into
// registers before the reduction and nothing is read back; the quantized
// runs are made from the products held in registers.
//
// Every tensor role has its own offset and strides (in elements). The host
// binds each distinct memory region once: BIND_<ROLE> is a role's binding
// number, and a role whose tensor is exactly another's (an in-place node)
// is instead defined as that role's array. An invocation only ever reads
// back elements it wrote itself, and only when the row does not fit its
// registers, so such aliasing is safe.

#include "common/index"
#include "common/row_norm"

struct Params {
    ne0: u32, ne1: u32, ne2: u32, ne3: u32,
    off_x: u32, sx0: u32, sx1: u32, sx2: u32, sx3: u32,
    off_b: u32, nb0: u32, nb1: u32, nb2: u32, nb3: u32,
    sb0: u32, sb1: u32, sb2: u32, sb3: u32,
    off_s: u32, ss0: u32, ss1: u32, ss2: u32, ss3: u32,
    off_w: u32, nw0: u32, nw1: u32, nw2: u32, nw3: u32,
    sw0: u32, sw1: u32, sw2: u32, sw3: u32,
    off_n: u32, sn0: u32, sn1: u32, sn2: u32, sn3: u32,
    off_d: u32, sd0: u32, sd1: u32, sd2: u32, sd3: u32,
    eps: f32,
}

#ifdef BIND_X
@group(0) @binding(BIND_X) var<storage, read_write> buf_x: array<f32>;
#endif
#ifdef BIND_B
@group(0) @binding(BIND_B) var<storage, read_write> buf_b: array<f32>;
#endif
#ifdef BIND_S
@group(0) @binding(BIND_S) var<storage, read_write> buf_s: array<f32>;
#endif
#ifdef BIND_W
@group(0) @binding(BIND_W) var<storage, read_write> buf_w: array<f32>;
#endif
#ifdef BIND_N
@group(0) @binding(BIND_N) var<storage, read_write> buf_n: array<f32>;
#endif
#ifdef BIND_D
@group(0) @binding(BIND_D) var<storage, read_write> buf_d: array<f32>;
#endif
#ifdef QUANTIZE
@group(0) @binding(BIND_Q) var<storage, read_write> buf_q: array<u32>;
#include "common/q8_1_run"
#endif
@group(0) @binding(BIND_P) var<uniform> p: Params;

// Element bases of the row's tensors (broadcast ones reduced).
struct Bases {
    x: u32, b: u32, s: u32, w: u32, n: u32, d: u32,
}

// Element e of a row broadcast over n elements (a division only when it
// really is broadcast: the weight and addend usually span the row).
fn wrap(e: u32, n: u32) -> u32 {
    if (n == p.ne0) {
        return e;
    }
    return e % n;
}

// Chunk k of the row source x (zeros past the row).
fn load_x(at: Bases, me: u32, k: u32) -> vec4<f32> {
    let e0 = chunk_first(me, k);
    var v = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
        if (e0 + j < p.ne0) {
            v[j] = buf_x[at.x + (e0 + j) * p.sx0];
        }
    }
    return v;
}

#ifdef FUSE_ADD
// Chunk k of the addend b, broadcast (zeros past the row).
fn load_b(at: Bases, me: u32, k: u32) -> vec4<f32> {
    let e0 = chunk_first(me, k);
    var v = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
        if (e0 + j < p.ne0) {
            v[j] = buf_b[at.b + wrap(e0 + j, p.nb0) * p.sb0];
        }
    }
    return v;
}
#endif

#ifdef FUSE_MUL
// Chunk k of the weight w, broadcast (zeros past the row).
fn load_w(at: Bases, me: u32, k: u32) -> vec4<f32> {
    let e0 = chunk_first(me, k);
    var v = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
        if (e0 + j < p.ne0) {
            v[j] = buf_w[at.w + wrap(e0 + j, p.nw0) * p.sw0];
        }
    }
    return v;
}
#endif

#ifdef FUSE_ADD
// Chunk k of the sum s = x + b, written out (zeros past the row).
fn add_chunk(at: Bases, me: u32, k: u32, x: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    let e0 = chunk_first(me, k);
    let v = x + b;
    for (var j = 0u; j < 4u; j++) {
        if (e0 + j < p.ne0) {
            buf_s[at.s + (e0 + j) * p.ss0] = v[j];
        }
    }
    return v;
}
#endif

// The row's source values of chunk k after the reduction: x, or the sum
// s read back (only without ROW_CHUNKS).
fn reread(at: Bases, me: u32, k: u32) -> vec4<f32> {
#ifdef FUSE_ADD
    let e0 = chunk_first(me, k);
    var v = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
        if (e0 + j < p.ne0) {
            v[j] = buf_s[at.s + (e0 + j) * p.ss0];
        }
    }
    return v;
#else
    return load_x(at, me, k);
#endif
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
#ifdef ROW_SUM_LANES
        @builtin(subgroup_id) sg_id: u32,
        @builtin(subgroup_size) sg_size: u32,
        @builtin(subgroup_invocation_id) sg_lane: u32,
#endif
        @builtin(local_invocation_index) lid: u32) {
#ifdef ROW_SUM_LANES
    let me = sg_id * sg_size + sg_lane;
#else
    let me = lid;
#endif
    let row = row_of(wid, nwg);
    if (row >= p.ne1 * p.ne2 * p.ne3) {
        return;
    }
    let r = unravel(row, p.ne1, p.ne2, p.ne3);
    var at = Bases(p.off_x + r.x * p.sx1 + r.y * p.sx2 + r.z * p.sx3, 0u, 0u, 0u, 0u, 0u);
#ifdef FUSE_ADD
    at.b = p.off_b + (r.x % p.nb1) * p.sb1 + (r.y % p.nb2) * p.sb2 + (r.z % p.nb3) * p.sb3;
    at.s = p.off_s + r.x * p.ss1 + r.y * p.ss2 + r.z * p.ss3;
#endif
#ifdef KEEP_NORM
    at.n = p.off_n + r.x * p.sn1 + r.y * p.sn2 + r.z * p.sn3;
#endif
#ifdef FUSE_MUL
    at.w = p.off_w + (r.x % p.nw1) * p.sw1 + (r.y % p.nw2) * p.sw2 + (r.z % p.nw3) * p.sw3;
    at.d = p.off_d + r.x * p.sd1 + r.y * p.sd2 + r.z * p.sd3;
#endif
    let n = f32(p.ne0);
    let chunks = row_chunk_count(p.ne0);

    var s = 0.0;
#ifdef ROW_CHUNKS
    // Every load is issued before the first store (which may alias them)
    // and before the reduction; the weight comes in with the row.
    var held: array<vec4<f32>, ROW_CHUNKS>;
#ifdef FUSE_ADD
    var addend: array<vec4<f32>, ROW_CHUNKS>;
#endif
#ifdef FUSE_MUL
    var weight: array<vec4<f32>, ROW_CHUNKS>;
#endif
    for (var k = 0u; k < ROW_CHUNKS; k++) {
        held[k] = load_x(at, me, k);
#ifdef FUSE_ADD
        addend[k] = load_b(at, me, k);
#endif
#ifdef FUSE_MUL
        weight[k] = load_w(at, me, k);
#endif
    }
    for (var k = 0u; k < ROW_CHUNKS; k++) {
#ifdef FUSE_ADD
        held[k] = add_chunk(at, me, k, held[k], addend[k]);
#endif
        s = add_squares(s, held[k]);
    }
#else
    for (var k = 0u; k < chunks; k++) {
#ifdef FUSE_ADD
        let v = add_chunk(at, me, k, load_x(at, me, k), load_b(at, me, k));
#else
        let v = load_x(at, me, k);
#endif
        s = add_squares(s, v);
    }
#endif
    let total = row_sum(s, me);
    let scale = 1.0 / sqrt(total / n + p.eps);

#ifdef QUANTIZE
    let runs = p.ne0 / 32u;
#endif
    for (var k = 0u; k < chunks; k++) {
        let e0 = chunk_first(me, k);
#ifdef ROW_CHUNKS
        let y = held[k] * scale;
#else
        let y = reread(at, me, k) * scale;
#endif
#ifdef FUSE_MUL
#ifdef ROW_CHUNKS
        let d = y * weight[k];
#else
        let d = y * load_w(at, me, k);
#endif
#endif
        for (var j = 0u; j < 4u; j++) {
            if (e0 + j < p.ne0) {
#ifdef KEEP_NORM
                buf_n[at.n + (e0 + j) * p.sn0] = y[j];
#endif
#ifdef FUSE_MUL
                buf_d[at.d + (e0 + j) * p.sd0] = d[j];
#endif
            }
        }
#ifdef QUANTIZE
        // Eight neighbouring positions hold a run of 32 (ne0 is a multiple
        // of 32), as mul_mat_quantize would read it back from dst.
        let run = e0 / 32u;
        let part = (e0 / 4u) % 8u;
        let q = q8_1_part(d, me);
        if (run < runs) {
            q8_1_store(row * runs + run, part, q);
        }
#endif
    }
}
