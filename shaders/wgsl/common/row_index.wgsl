// SET_ROWS' destination row lookup and its error report, shared by
// set_rows (common/set_rows_index) and ROPE storing its rows (rope.wgsl
// with STORE_ROWS). The including kernel declares `idx` (array<SRC1_TYPE>:
// i32, or i64 read as two u32 words with SRC1_I64) and `flag`
// (array<atomic<u32>>).

// The index at word `w` as a row of `dst_rows`: x = the row, y = 1 when it
// is in range; otherwise y = 0 and x = the index as i32 bits, clamped to
// the i32 range.
fn stored_row(w: u32, dst_rows: u32) -> vec2<u32> {
#ifdef SRC1_I64
    let lo = bitcast<u32>(idx[w]);
    let hi = bitcast<u32>(idx[w + 1u]);
    if (hi == 0u && lo < dst_rows) {
        return vec2<u32>(lo, 1u);
    }
    if (hi == 0u) {
        return vec2<u32>(min(lo, 0x7fffffffu), 0u);
    }
    if (hi == 0xffffffffu && lo >= 0x80000000u) {
        return vec2<u32>(lo, 0u);
    }
    if ((hi & 0x80000000u) != 0u) {
        return vec2<u32>(0x80000000u, 0u);
    }
    return vec2<u32>(0x7fffffffu, 0u);
#else
    let v = bitcast<u32>(idx[w]);
    return vec2<u32>(v, select(0u, 1u, v < dst_rows));
#endif
}

#include "common/error_flag"

// The first bad index of a graph: node1 (the SET_ROWS node + 1) and the
// index, as common/error_flag reports.
fn report_bad_row(bad: u32, node1: u32) {
    report_error(node1, bad);
}
