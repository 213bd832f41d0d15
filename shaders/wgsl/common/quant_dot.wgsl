// Integer dot products of one 32-weight block of a legacy format (q4_0,
// q4_1, q5_0, q5_1, q8_0) with 32 activations quantized by
// mul_mat_quantize (ggml's q8_1: signed bytes, scale d, s = d * sum).
// Include after common/quant. For a block, q_load8 gives its quants as
// signed bytes (weights 0..15 in `lo`, 16..31 in `hi`, four to a word)
// and d, m such that weight = d * q + m; q_dot8 then returns
// sum(weight * x) = d * dx * sum(q * qx) + m * s.

struct QBlock8 {
    lo: vec4<u32>,
    hi: vec4<u32>,
    d: f32,
    m: f32,
}

const Q_NIBBLES: vec4<u32> = vec4<u32>(0x0F0F0F0Fu);

#if defined(QUANT_Q5_0) || defined(QUANT_Q5_1)
// Fifth bits of weights 4k..4k+3 from `qh >> 4k`, moved to bit 4 of each byte.
fn q5_high(qh: u32, shift: vec4<u32>) -> vec4<u32> {
    let h = (vec4<u32>(qh) >> shift) & vec4<u32>(0xFu);
    return ((h * 0x00204081u) & vec4<u32>(0x01010101u)) << vec4<u32>(4u);
}
#endif

fn q_load8(block: u32) -> QBlock8 {
    var b: QBlock8;
#ifdef QUANT_Q4_0
    let q = qbuf_u32x4(block + 2u);
    b.d = qbuf_half(block);
    b.m = -8.0 * b.d;
#elif defined(QUANT_Q4_1)
    let q = qbuf_u32x4(block + 4u);
    b.d = qbuf_half(block);
    b.m = qbuf_half(block + 2u);
#elif defined(QUANT_Q5_0)
    let qh = qbuf_u32(block + 2u);
    let q = qbuf_u32x4(block + 6u);
    b.d = qbuf_half(block);
    b.m = -16.0 * b.d;
#elif defined(QUANT_Q5_1)
    let qh = qbuf_u32(block + 4u);
    let q = qbuf_u32x4(block + 8u);
    b.d = qbuf_half(block);
    b.m = qbuf_half(block + 2u);
#elif defined(QUANT_Q8_0)
    b.lo = qbuf_u32x4(block + 2u);
    b.hi = qbuf_u32x4(block + 18u);
    b.d = qbuf_half(block);
    b.m = 0.0;
#else
#error "quant_dot: no integer dot product for this weight type"
#endif
#ifndef QUANT_Q8_0
    b.lo = q & Q_NIBBLES;
    b.hi = (q >> vec4<u32>(4u)) & Q_NIBBLES;
#endif
#if defined(QUANT_Q5_0) || defined(QUANT_Q5_1)
    b.lo |= q5_high(qh, vec4<u32>(0u, 4u, 8u, 12u));
    b.hi |= q5_high(qh, vec4<u32>(16u, 20u, 24u, 28u));
#endif
    return b;
}

// sum(weight * x) over the block for activations xa (quants 0..15), xb
// (16..31) and xds = (dx, s).
fn q_dot8(b: QBlock8, xa: vec4<u32>, xb: vec4<u32>, xds: vec2<f32>) -> f32 {
    let lo = dot4I8Packed(b.lo.x, xa.x) + dot4I8Packed(b.lo.y, xa.y)
        + dot4I8Packed(b.lo.z, xa.z) + dot4I8Packed(b.lo.w, xa.w);
    let hi = dot4I8Packed(b.hi.x, xb.x) + dot4I8Packed(b.hi.y, xb.y)
        + dot4I8Packed(b.hi.z, xb.z) + dot4I8Packed(b.hi.w, xb.w);
    return b.d * xds.x * f32(lo + hi) + b.m * xds.y;
}
