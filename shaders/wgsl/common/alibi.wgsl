// ALiBi slope of head h as ggml computes it: m0^(h+1) for the first
// n_head_log2 heads, m1^(2(h-n_head_log2)+1) after, 1 when max_bias is 0.
// The includer declares the uniform `p` with fields max_bias, m0, m1 (f32)
// and n_head_log2 (u32), as SOFT_MAX and FLASH_ATTN_EXT pass them.
fn alibi_slope(h: u32) -> f32 {
    if (p.max_bias <= 0.0) {
        return 1.0;
    }
    if (h < p.n_head_log2) {
        return pow(p.m0, f32(h + 1u));
    }
    return pow(p.m1, f32(2u * (h - p.n_head_log2) + 1u));
}
