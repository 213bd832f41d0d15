// SET_ROWS parameters, the index lookup with ggml's broadcasting, and the
// error report (common/row_index). The including kernel declares `idx`
// (array<SRC1_TYPE>), `flag` (array<atomic<u32>>) and the uniform `p`. Offsets and strides of
// the source and indices are in elements (i64 indices: u32 words); those of
// the destination are the including kernel's (elements, words or bytes).

struct Params {
    ne0: u32, n_rows: u32, ne2: u32, ne3: u32,
    off_s: u32, ss0: u32, ss1: u32, ss2: u32, ss3: u32,
    off_i: u32, si0: u32, si1: u32, si2: u32, ni1: u32, ni2: u32,
    off_d: u32, sd0: u32, sd1: u32, sd2: u32, sd3: u32,
    dst_rows: u32, node1: u32,
#ifdef PAIR
    // The second SET_ROWS of a pair (same indices): its source and
    // destination, as the fields above.
    ne0_b: u32, n_rows_b: u32, ne2_b: u32, ne3_b: u32,
    off_s_b: u32, ss0_b: u32, ss1_b: u32, ss2_b: u32, ss3_b: u32,
    off_d_b: u32, sd0_b: u32, sd1_b: u32, sd2_b: u32, sd3_b: u32,
#endif
}

#include "common/row_index"

// The destination row of source row i1 of (i2, i3), as `stored_row`.
fn dst_row(i1: u32, i2: u32, i3: u32) -> vec2<u32> {
    return stored_row(p.off_i + i1 * p.si0 + (i2 % p.ni1) * p.si1 + (i3 % p.ni2) * p.si2, p.dst_rows);
}

fn report(bad: u32) {
    report_bad_row(bad, p.node1);
}
