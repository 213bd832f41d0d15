// K and V tiles of flash_attn_coopmat, streamed in runs: fetch_kv loads
// run i of invocation t of a tile into registers (as raw words for f16,
// q8_0 and q4_0 K/V, else decoded to half) and store_kv later decodes and
// writes it to kv_tile, zero past the keys and the head size. Included by
// flash_attn_coopmat after its tiles and constants (BK, KVPITCH, DKP,
// DVP, DK4, DV4, WG_SIZE, the KV_RAW_* flags) are declared.

// Elements per run one invocation moves of a K or V tile: 8 halves (one
// 16-byte load) for f16 K/V on 16-byte rows, 8 quants for raw q8_0 and
// q4_0, else 4.
#if defined(KV_RAW_F16_X8) || defined(KV_RAW_Q8_0) || defined(KV_RAW_Q4_0)
const KV_RUN: u32 = 8u;
#else
const KV_RUN: u32 = 4u;
#endif
const KV_LOADS: u32 = (BK * (max(DKP, DVP) / KV_RUN) + WG_SIZE - 1u) / WG_SIZE;

// Run i of invocation t in a K (which = 0) or V tile: its key row j and
// first element e; whether it lies in the tile (j < BK) and in the head.
struct RunPos {
    j: u32,
    e: u32,
    in_tile: bool,
    in_head: bool,
}

fn run_pos(which: u32, i: u32, t: u32) -> RunPos {
    let runs = select(u32(DKP), u32(DVP), which == 1u) / KV_RUN;
    let d = select(u32(DK4), u32(DV4), which == 1u) * 4u;
    let u = t + i * WG_SIZE;
    let j = u / runs;
    let e = (u % runs) * KV_RUN;
    return RunPos(j, e, j < BK, e < d);
}

// Byte of key row `row` of the K (which = 0) or V head at byte `head`.
fn kv_row(which: u32, head: u32, row: u32) -> u32 {
    return head + row * select(p.k_nb1, p.v_nb1, which == 1u);
}

#ifdef KV_RAW_F16
// f16 K and V with 4-aligned rows (16-aligned: KV_RAW_F16_X8): runs travel
// as raw words, fetched without branches (out-of-range runs read the
// binding's first words) and left untouched until store_kv zeroes the
// out-of-range ones and converts the rest, so the loads stay in flight
// through the work in between (any use at fetch time, even a select,
// would wait for them there). Runs of 8 halves, one 16-byte load each,
// took an H200 prefill at head size 256 from 1,283-1,297 to 1,027.5 us.
#ifdef KV_RAW_F16_X8
alias KvRun = vec4<u32>;
#else
alias KvRun = vec2<u32>;
#endif

fn fetch_kv(which: u32, i: u32, t: u32, kv0: u32, kv_end: u32, head: u32) -> KvRun {
    let r = run_pos(which, i, t);
    let ok = r.in_tile && r.in_head && kv0 + r.j < kv_end;
    let byte = kv_row(which, head, kv0 + r.j) + 2u * r.e;
#ifdef KV_RAW_F16_X8
    let w = select(0u, byte >> 4u, ok);
    if (which == 0u) {
        return kbuf[w];
    }
    return vbuf[w];
#else
    let w = select(0u, byte >> 2u, ok);
    if (which == 0u) {
        return vec2<u32>(kbuf[w], kbuf[w + 1u]);
    }
    return vec2<u32>(vbuf[w], vbuf[w + 1u]);
#endif
}

fn halves(lo: u32, hi: u32) -> vec4<f16> {
    return vec4<f16>(vec4<f32>(unpack2x16float(lo), unpack2x16float(hi)));
}
#elif defined(KV_RAW_Q8_0) || defined(KV_RAW_Q4_0)
// q8_0 or q4_0 K and V (blocks of a half scale, then 32 signed bytes or
// 16 bytes of nibbles: elements i and i + 16 share byte i): a run of 8
// quants travels as the three words that can hold its 8 bytes and the
// word holding its block's scale, fetched without branches (the
// addresses follow the block's alignment, never loaded data) and decoded
// by store_kv, as for the raw f16 runs above.
alias KvRun = vec4<u32>;

#ifdef KV_RAW_Q8_0
const RAW_BLOCK_BYTES: u32 = 34u;
#else
const RAW_BLOCK_BYTES: u32 = 18u;
#endif

// Byte of the block holding element e of key row j (from the tile at
// kv0) of the head at byte `head`.
fn raw_block(which: u32, head: u32, kv0: u32, j: u32, e: u32) -> u32 {
    return kv_row(which, head, kv0 + j) + (e >> 5u) * RAW_BLOCK_BYTES;
}

// Byte of the run's first quant in the block at `blk` (e % 8 == 0).
fn raw_quants(blk: u32, e: u32) -> u32 {
#ifdef KV_RAW_Q8_0
    return blk + 2u + (e & 31u);
#else
    return blk + 2u + (e & 15u);
#endif
}

fn fetch_kv(which: u32, i: u32, t: u32, kv0: u32, kv_end: u32, head: u32) -> KvRun {
    let r = run_pos(which, i, t);
    let ok = r.in_tile && r.in_head && kv0 + r.j < kv_end;
    let blk = raw_block(which, head, kv0, r.j, r.e);
    // The run's 8 bytes start 2 bytes past the block's alignment (both
    // block sizes are 2 mod 4): two whole words when the block is 2 bytes
    // into a word, else the upper half of one word, one word and the
    // lower half of a third. Out-of-range runs read words 0 to 2 (a
    // binding of either type holds at least 20 bytes).
    let q = raw_quants(blk, r.e);
    let w = select(0u, q >> 2u, ok);
    let last = w + select(1u, 2u, (q & 2u) != 0u);
    return vec4<u32>(kv_word(which, w), kv_word(which, w + 1u), kv_word(which, last),
                     kv_word(which, select(0u, blk >> 2u, ok)));
}

// Four quants of a run (bytes of `word`, signed for q8_0, low nibbles
// less 8 for q4_0) as half, times the block's scale d.
fn raw_quarter(word: u32, d: f32) -> vec4<f16> {
#ifdef KV_RAW_Q8_0
    let w = bitcast<i32>(word);
    let q = vec4<f32>(vec4<i32>(extractBits(w, 0u, 8u), extractBits(w, 8u, 8u),
                                extractBits(w, 16u, 8u), extractBits(w, 24u, 8u)));
#else
    let n = word & 0x0f0f0f0fu;
    let q = vec4<f32>(vec4<u32>(n & 0xffu, (n >> 8u) & 0xffu, (n >> 16u) & 0xffu, n >> 24u)) - 8.0;
#endif
    return vec4<f16>(q * d);
}
#else
alias KvRun = vec4<f16>;

// Run i of invocation t of the K (which = 0) or V tile starting at key
// kv0 of the head at byte `head`, as half; zero past the keys and the
// head size.
fn fetch_kv(which: u32, i: u32, t: u32, kv0: u32, kv_end: u32, head: u32) -> KvRun {
    let r = run_pos(which, i, t);
    if (r.in_tile && r.in_head && kv0 + r.j < kv_end) {
        if (which == 0u) {
            return vec4<f16>(load4(0u, K_KIND, kv_row(0u, head, kv0 + r.j), r.e));
        }
        return vec4<f16>(load4(1u, V_KIND, kv_row(1u, head, kv0 + r.j), r.e));
    }
    return vec4<f16>(0.0);
}
#endif

fn put4(at: u32, v: vec4<f16>) {
    kv_tile[at] = v.x;
    kv_tile[at + 1u] = v.y;
    kv_tile[at + 2u] = v.z;
    kv_tile[at + 3u] = v.w;
}

// Stores run i of invocation t (from fetch_kv for the tile at kv0 of the
// head at byte `head`) to kv_tile, zero past the keys and the head size.
fn store_kv(which: u32, i: u32, t: u32, run: KvRun, kv0: u32, kv_end: u32, head: u32) {
    let r = run_pos(which, i, t);
    let ok = r.in_head && kv0 + r.j < kv_end;
    let zero = vec4<f16>(0.0);
    if (r.in_tile) {
        let at = r.j * KVPITCH + r.e;
#if defined(KV_RAW_F16_X8)
        put4(at, select(zero, halves(run.x, run.y), ok));
        put4(at + 4u, select(zero, halves(run.z, run.w), ok));
#elif defined(KV_RAW_F16)
        put4(at, select(zero, halves(run.x, run.y), ok));
#elif defined(KV_RAW_Q8_0) || defined(KV_RAW_Q4_0)
        // Blocks are 2 mod 4 bytes long: a block on a word boundary has
        // its scale in the low half of its first word and its quants
        // starting 2 bytes into a word.
        let blk = raw_block(which, head, kv0, r.j, r.e);
        let split = (blk & 2u) == 0u;
        var lo = select(run.x, (run.x >> 16u) | (run.y << 16u), split);
        var hi = select(run.y, (run.y >> 16u) | (run.z << 16u), split);
#ifdef KV_RAW_Q4_0
        // Elements 16..31 of a block are the high nibbles.
        let shift = select(0u, 4u, (r.e & 31u) >= 16u);
        lo >>= shift;
        hi >>= shift;
#endif
        let d = unpack2x16float(select(run.w >> 16u, run.w, split)).x;
        put4(at, select(zero, raw_quarter(lo, d), ok));
        put4(at + 4u, select(zero, raw_quarter(hi, d), ok));
#else
        put4(at, select(zero, run, ok));
#endif
    }
}
