// Integer dot products of weight units with activations quantized by
// mul_mat_quantize (ggml's q8_1: runs of 32 signed bytes, scale dx and
// s = dx * sum). Include after common/quant. A unit is Q8_RUNS runs of 32
// weights: one block of q4_0, q4_1, q5_0, q5_1 or q8_0, or two 32-weight
// sub-blocks of q4_K (one 32-byte run of its quants). For a unit,
// q_load8 gives its quants as signed bytes, four to a word (run r in
// q[2r], q[2r + 1]), and per run d, m with weight = d * q + m; q_dot8 then
// returns sum(weight * x) = sum over runs of d * dx * sum(q * qx) + m * s.
// q6_K: a unit is two 32-weight runs of half h of a block, quarters c and
// c + 2 (c = 0, 1), which share their ql and qh bytes (low and high
// nibbles, qh bits 2c and 2c + 4): x runs q8_run(u, 0) and q8_run(u, 1)
// are not adjacent. Quants are q - 32 as signed bytes with a scale per 16
// weights (d[2r], d[2r + 1] = block d * run r's two 8-bit scales) and no
// offset (m unused). With W_SPLIT (q4_0 or q4_K stored split),
// q_load8_split(row, head, u) gives the same unit of a split row.

#if defined(QUANT_Q4_K)
const Q8_RUNS: u32 = 2u;
const Q8_UNITS_PER_BLOCK: u32 = 4u;
#elif defined(QUANT_Q6_K)
const Q8_RUNS: u32 = 2u;
const Q8_UNITS_PER_BLOCK: u32 = 4u;
#else
const Q8_RUNS: u32 = 1u;
const Q8_UNITS_PER_BLOCK: u32 = 1u;
#endif

// Scales of a unit: one per run, q6_K one per 16 weights.
#if defined(QUANT_Q6_K)
const Q8_SCALES: u32 = 4u;
#else
const Q8_SCALES: u32 = Q8_RUNS;
#endif

struct QUnit8 {
    q: array<vec4<u32>, 2 * Q8_RUNS>,
    d: array<f32, Q8_SCALES>,
    m: array<f32, Q8_RUNS>,
}

const Q_NIBBLES: vec4<u32> = vec4<u32>(0x0F0F0F0Fu);

// The x run (of 32 values, counted from the row's start) that run r of
// unit u multiplies.
fn q8_run(u: u32, r: u32) -> u32 {
#if defined(QUANT_Q6_K)
    return 8u * (u / Q8_UNITS_PER_BLOCK) + 4u * ((u >> 1u) & 1u) + (u & 1u) + 2u * r;
#else
    return Q8_RUNS * u + r;
#endif
}

#if defined(QUANT_Q5_0) || defined(QUANT_Q5_1)
// Fifth bits of weights 4k..4k+3 from `qh >> 4k`, moved to bit 4 of each byte.
fn q5_high(qh: u32, shift: vec4<u32>) -> vec4<u32> {
    let h = (vec4<u32>(qh) >> shift) & vec4<u32>(0xFu);
    return ((h * 0x00204081u) & vec4<u32>(0x01010101u)) << vec4<u32>(4u);
}
#endif

#if defined(QUANT_Q4_0) || defined(QUANT_Q5_0) || defined(QUANT_Q8_0)
// Blocks of these formats are 2 mod 4 bytes long (18, 22, 34), so the
// same number of aligned words covers a block at either 2-byte alignment:
// Q_WINDOW words from the one holding its first byte (which starts 2 bytes
// early when the block does). Every lane loads the same words, with no
// branch on the alignment, and stays inside the tensor's binding.
#if defined(QUANT_Q4_0)
const Q_WINDOW: u32 = 5u;
#elif defined(QUANT_Q5_0)
const Q_WINDOW: u32 = 6u;
#else
const Q_WINDOW: u32 = 9u;
#endif

// The word at bytes 2 + 4i .. 5 + 4i of the block, from its window `a`
// (`odd`: the block starts 2 bytes into a[0]).
fn q_win_word(a: array<u32, Q_WINDOW>, i: u32, odd: bool) -> u32 {
    return select((a[i] >> 16u) | (a[i + 1u] << 16u), a[i + 1u], odd);
}
#endif

#if defined(QUANT_Q6_K)
// The 32 bytes at byte `at` (even) as 8 words: 9 aligned words from the
// one holding `at`, shifted by 2 bytes when `at` is 2 mod 4 (q6_K blocks
// are 210 bytes, so every other block is). The ninth word stays inside
// the block for the ql and qh runs read here.
fn q_bytes32(at: u32) -> array<u32, 8> {
    var a: array<u32, 9>;
    let first = at >> 2u;
    for (var i = 0u; i < 9u; i++) {
        a[i] = q_word(first + i);
    }
    let odd = (at & 2u) != 0u;
    var out: array<u32, 8>;
    for (var i = 0u; i < 8u; i++) {
        out[i] = select(a[i], (a[i] >> 16u) | (a[i + 1u] << 16u), odd);
    }
    return out;
}

// Four 6-bit quants 0..63 (one per byte) minus 32, as signed bytes: the
// high bit of each byte set first so no borrow crosses bytes.
fn q6k_signed(q: u32) -> u32 {
    return ((q | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
}
#endif

// Unit `u` of the row starting at byte `row`.
fn q_load8(row: u32, u: u32) -> QUnit8 {
    var w: QUnit8;
    let block = row + (u / Q8_UNITS_PER_BLOCK) * QUANT_BLOCK_BYTES;
#if defined(QUANT_Q6_K)
    // Quarter c' of half h: weight i takes the low (c' < 2) or high nibble
    // of ql byte 64h + 32 * (c' & 1) + i, bits 2c', 2c' + 1 of qh byte
    // 32h + i, and scale byte 8h + 2c' + i / 16 (see common/quant).
    let j = u % Q8_UNITS_PER_BLOCK;
    let h = j >> 1u;
    let c = j & 1u;
    let ql = q_bytes32(block + 64u * h + 32u * c);
    let qh = q_bytes32(block + 128u + 32u * h);
    var lo: array<u32, 8>;
    var hi: array<u32, 8>;
    for (var i = 0u; i < 8u; i++) {
        let bits = qh[i] >> (2u * c);
        lo[i] = q6k_signed((ql[i] & 0x0F0F0F0Fu) | ((bits & 0x03030303u) << 4u));
        hi[i] = q6k_signed(((ql[i] >> 4u) & 0x0F0F0F0Fu) | (((bits >> 4u) & 0x03030303u) << 4u));
    }
    w.q[0] = vec4<u32>(lo[0], lo[1], lo[2], lo[3]);
    w.q[1] = vec4<u32>(lo[4], lo[5], lo[6], lo[7]);
    w.q[2] = vec4<u32>(hi[0], hi[1], hi[2], hi[3]);
    w.q[3] = vec4<u32>(hi[4], hi[5], hi[6], hi[7]);
    let d = qbuf_half(block + 208u);
    for (var r = 0u; r < 2u; r++) {
        let sc_at = block + 192u + 8u * h + 2u * c + 4u * r;
        let sc = q_word(sc_at >> 2u) >> ((sc_at & 2u) * 8u);
        w.d[2u * r] = d * q_i8(sc & 0xFFu);
        w.d[2u * r + 1u] = d * q_i8((sc >> 8u) & 0xFFu);
        w.m[r] = 0.0;
    }
#elif defined(QUANT_Q4_K)
    // Sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles) share qs
    // bytes 32c..32c+31.
    let c = u % Q8_UNITS_PER_BLOCK;
#ifdef QUANT_BUF_VEC4
    // 16-byte aligned blocks: d, dmin and the 12 scale bytes are the
    // block's first vec4, the unit's 32 quant bytes the next two from
    // 16 + 32c (three loads instead of a dozen words).
    let v = block >> 4u;
    let head = QUANT_BUF[v];
    let a = QUANT_BUF[v + 1u + 2u * c];
    let b = QUANT_BUF[v + 2u + 2u * c];
    let dm = unpack2x16float(head.x);
    let d = dm.x;
    let dmin = dm.y;
    let scales = head.yzw;
#else
    let d = qbuf_half(block);
    let dmin = qbuf_half(block + 2u);
    let scales = q_scales12(block + 4u);
    let a = qbuf_u32x4(block + 16u + 32u * c);
    let b = qbuf_u32x4(block + 32u + 32u * c);
#endif
    w.q[0] = a & Q_NIBBLES;
    w.q[1] = b & Q_NIBBLES;
    w.q[2] = (a >> vec4<u32>(4u)) & Q_NIBBLES;
    w.q[3] = (b >> vec4<u32>(4u)) & Q_NIBBLES;
    let s0 = q_scale_min_k4(scales, 2u * c);
    let s1 = q_scale_min_k4(scales, 2u * c + 1u);
    w.d[0] = d * s0.x;
    w.m[0] = -dmin * s0.y;
    w.d[1] = d * s1.x;
    w.m[1] = -dmin * s1.y;
#elif defined(QUANT_Q4_0) || defined(QUANT_Q5_0) || defined(QUANT_Q8_0)
    var a: array<u32, Q_WINDOW>;
    let first = block >> 2u;
    for (var i = 0u; i < Q_WINDOW; i++) {
        a[i] = q_word(first + i);
    }
    let odd = (block & 2u) != 0u;
    w.d[0] = unpack2x16float(select(a[0], a[0] >> 16u, odd)).x;
#if defined(QUANT_Q8_0)
    w.q[0] = vec4<u32>(q_win_word(a, 0u, odd), q_win_word(a, 1u, odd), q_win_word(a, 2u, odd), q_win_word(a, 3u, odd));
    w.q[1] = vec4<u32>(q_win_word(a, 4u, odd), q_win_word(a, 5u, odd), q_win_word(a, 6u, odd), q_win_word(a, 7u, odd));
    w.m[0] = 0.0;
#elif defined(QUANT_Q4_0)
    let q = vec4<u32>(q_win_word(a, 0u, odd), q_win_word(a, 1u, odd), q_win_word(a, 2u, odd), q_win_word(a, 3u, odd));
    w.m[0] = -8.0 * w.d[0];
    w.q[0] = q & Q_NIBBLES;
    w.q[1] = (q >> vec4<u32>(4u)) & Q_NIBBLES;
#else
    let qh = q_win_word(a, 0u, odd);
    let q = vec4<u32>(q_win_word(a, 1u, odd), q_win_word(a, 2u, odd), q_win_word(a, 3u, odd), q_win_word(a, 4u, odd));
    w.m[0] = -16.0 * w.d[0];
    w.q[0] = (q & Q_NIBBLES) | q5_high(qh, vec4<u32>(0u, 4u, 8u, 12u));
    w.q[1] = ((q >> vec4<u32>(4u)) & Q_NIBBLES) | q5_high(qh, vec4<u32>(16u, 20u, 24u, 28u));
#endif
#else
#if defined(QUANT_Q4_1)
    let q = qbuf_u32x4(block + 4u);
    w.d[0] = qbuf_half(block);
    w.m[0] = qbuf_half(block + 2u);
#elif defined(QUANT_Q5_1)
    let qh = qbuf_u32(block + 4u);
    let q = qbuf_u32x4(block + 8u);
    w.d[0] = qbuf_half(block);
    w.m[0] = qbuf_half(block + 2u);
#else
#error "quant_dot: no integer dot product for this weight type"
#endif
    w.q[0] = q & Q_NIBBLES;
    w.q[1] = (q >> vec4<u32>(4u)) & Q_NIBBLES;
#if defined(QUANT_Q5_1)
    w.q[0] |= q5_high(qh, vec4<u32>(0u, 4u, 8u, 12u));
    w.q[1] |= q5_high(qh, vec4<u32>(16u, 20u, 24u, 28u));
#endif
#endif
    return w;
}

#if defined(W_SPLIT) && defined(QUANT_Q4_K)
// Unit u (sub-blocks 2c and 2c + 1 of block u / 4) of a split row
// (backends/webgpu/src/split.rs; QUANT_BUF_VEC4) whose quants start at
// byte `row` and whose first block's head at byte `head`: its 32 quant
// bytes as two vec4s, the head of its block as one.
fn q_load8_split(row: u32, head: u32, u: u32) -> QUnit8 {
    var w: QUnit8;
    let blk = u / Q8_UNITS_PER_BLOCK;
    let c = u % Q8_UNITS_PER_BLOCK;
    let v = (row >> 4u) + 8u * blk + 2u * c;
    let a = QUANT_BUF[v];
    let b = QUANT_BUF[v + 1u];
    let h = QUANT_BUF[(head >> 4u) + blk];
    let dm = unpack2x16float(h.x);
    w.q[0] = a & Q_NIBBLES;
    w.q[1] = b & Q_NIBBLES;
    w.q[2] = (a >> vec4<u32>(4u)) & Q_NIBBLES;
    w.q[3] = (b >> vec4<u32>(4u)) & Q_NIBBLES;
    let s0 = q_scale_min_k4(h.yzw, 2u * c);
    let s1 = q_scale_min_k4(h.yzw, 2u * c + 1u);
    w.d[0] = dm.x * s0.x;
    w.m[0] = -dm.y * s0.y;
    w.d[1] = dm.x * s1.x;
    w.m[1] = -dm.y * s1.y;
    return w;
}
#elif defined(W_SPLIT)
// Unit (block) u of a split q4_0 row whose quants start at byte `row`
// and whose first block's head at byte `head`.
fn q_load8_split(row: u32, head: u32, u: u32) -> QUnit8 {
    var w: QUnit8;
    let q = QUANT_BUF[(row >> 4u) + u];
    w.d[0] = qbuf_half(head + QUANT_HEAD_BYTES * u);
    w.m[0] = -8.0 * w.d[0];
    w.q[0] = q & Q_NIBBLES;
    w.q[1] = (q >> vec4<u32>(4u)) & Q_NIBBLES;
    return w;
}
#endif

// Sum of the products of 16 signed bytes in a and b.
fn q_idot16(a: vec4<u32>, b: vec4<u32>) -> i32 {
    return dot4I8Packed(a.x, b.x) + dot4I8Packed(a.y, b.y)
        + dot4I8Packed(a.z, b.z) + dot4I8Packed(a.w, b.w);
}

// sum(weight * x) over the unit; x holds, per run, its two vec4 of quants
// and (bits(dx), bits(s), 0, 0).
fn q_dot8(w: QUnit8, x: array<vec4<u32>, 3 * Q8_RUNS>) -> f32 {
#if defined(QUANT_Q6_K)
    var sum = 0.0;
    for (var r = 0u; r < 2u; r++) {
        let lo = f32(q_idot16(w.q[2u * r], x[3u * r]));
        let hi = f32(q_idot16(w.q[2u * r + 1u], x[3u * r + 1u]));
        sum += bitcast<f32>(x[3u * r + 2u].x) * (w.d[2u * r] * lo + w.d[2u * r + 1u] * hi);
    }
    return sum;
#else
    var sum = 0.0;
    for (var r = 0u; r < Q8_RUNS; r++) {
        let i = q_idot16(w.q[2u * r], x[3u * r]) + q_idot16(w.q[2u * r + 1u], x[3u * r + 1u]);
        let xds = bitcast<vec2<f32>>(x[3u * r + 2u].xy);
        sum += w.d[r] * xds.x * f32(i) + w.m[r] * xds.y;
    }
    return sum;
#endif
}
