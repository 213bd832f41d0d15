//! How a FLASH_ATTN_EXT runs on a device: which kernel (the tiled
//! `flash_attn`, the one-query `flash_attn_vec` or the cooperative-matrix
//! `flash_attn_coopmat`), its block sizes, how the keys are split over
//! workgroups, and the pipeline key.

use backplane_abi::DType;
use backplane_shaders::PipelineKey;

use crate::facts::{Facts, human_bytes};
use crate::ops::type_name;

/// K/V types the kernels decode: all of FLASH_ATTN_EXT's.
pub(super) const KV_TYPES: &[DType] = &DType::ATTENTION_KV_TYPES;

/// Queries per workgroup, largest first.
const QUERY_BLOCKS: [u32; 6] = [32, 16, 8, 4, 2, 1];

/// (keys per tile, workgroup size), preferred first. A workgroup has at
/// most `queries x keys` invocations, so a single query (decode) takes the
/// first entry with the workgroup no larger than its tile: (32, 32). That
/// entry was added for it: with only (8, 8) left, a decode on an H200
/// (plain kernel forced, head 128, 16,384 keys, 32 query heads on 8 K/V
/// heads) took 1,824-1,830 us for f16 K/V, and (32, 32) takes 995-997
/// (q8_0 1,153-1,166 -> 774-778, q4_0 968-981 -> 637-639); (64, 64) ran
/// 1,035 and (128, 128) 1,119.
const KEY_TILES: [(u32, u32); 8] = [
    (32, 128),
    (32, 64),
    (32, 32),
    (16, 64),
    (16, 32),
    (8, 32),
    (8, 16),
    (8, 8),
];

/// How one FLASH_ATTN_EXT kernel is tiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Plan {
    /// Queries per workgroup.
    bq: u32,
    /// Keys per K/V tile.
    bk: u32,
    /// Workgroup size.
    wg: u32,
    /// Bytes per element of the Q and K/V tiles (4: f32, 2: half).
    tile_elem: u32,
    /// Score thread grid: `tqt` along queries x `tkt` along keys.
    tqt: u32,
    tkt: u32,
    /// Output thread grid: `oqt` along queries x `odt` along vec4 columns.
    oqt: u32,
    odt: u32,
}

/// Workgroup memory of a tiling: padded Q and K/V tiles, the padded
/// score tile and three per-row values.
fn workgroup_bytes(bq: u32, bk: u32, dk: u32, dv: u32, tile_elem: u32) -> u64 {
    let q_row = u64::from(dk / 4 + 1);
    let kv_row = u64::from(dk.max(dv) / 4 + 1);
    let tiles = (u64::from(bq) * q_row + u64::from(bk) * kv_row) * 4 * u64::from(tile_elem);
    tiles + u64::from(bq * (bk + 1) + 3 * bq) * 4
}

/// The score grid with the fewest tile loads per score: `(tqt, tkt)`.
fn score_grid(bq: u32, bk: u32, wg: u32) -> (u32, u32) {
    (0..=wg.trailing_zeros())
        .map(|s| 1u32 << s)
        .filter(|&tkt| tkt <= bk && wg / tkt <= bq)
        .map(|tkt| (wg / tkt, tkt))
        .min_by_key(|&(tqt, tkt)| (bq / tqt + bk / tkt, u32::MAX - tkt))
        .unwrap_or((1, wg))
}

/// The output grid with the fewest loads per useful multiply-add:
/// `(oqt, odt)`, columns in vec4 units.
fn output_grid(bq: u32, dv4: u32, wg: u32) -> (u32, u32) {
    let cost = |oqt: u32, odt: u32| {
        let (oq, od) = (u64::from(bq / oqt), u64::from(dv4.div_ceil(odt)));
        // loads per vec4 multiply-add, times the padding waste.
        ((oq + od) * od * u64::from(odt) * 1000) / (oq * od * u64::from(dv4))
    };
    (0..=wg.trailing_zeros())
        .map(|s| 1u32 << s)
        .filter(|&odt| wg / odt <= bq)
        .map(|odt| (wg / odt, odt))
        .min_by_key(|&(oqt, odt)| cost(oqt, odt))
        .unwrap_or((1, wg))
}

/// Tiles for head sizes `dk`, `dv` and `n_q` queries on this device, or
/// the refusal naming the workgroup memory the smallest tiling needs.
fn plan(facts: &Facts, dk: u32, dv: u32, n_q: u32, kv_f32: bool) -> Result<Plan, String> {
    let elems: &[u32] = match (kv_f32, facts.f16) {
        (true, true) => &[4, 2],
        (false, true) => &[2],
        (_, false) => &[4],
    };
    let bq_cap = n_q.max(1).next_power_of_two().min(QUERY_BLOCKS[0]);
    let limit = u64::from(facts.workgroup_storage_bytes);
    let mut smallest = u64::MAX;
    for &tile_elem in elems {
        for bq in QUERY_BLOCKS.into_iter().filter(|&bq| bq <= bq_cap) {
            for (bk, wg) in KEY_TILES {
                if wg > facts.max_invocations || wg > bq * bk {
                    continue;
                }
                let bytes = workgroup_bytes(bq, bk, dk, dv, tile_elem);
                smallest = smallest.min(bytes);
                if bytes > limit {
                    continue;
                }
                let (tqt, tkt) = score_grid(bq, bk, wg);
                let (oqt, odt) = output_grid(bq, dv / 4, wg);
                return Ok(Plan {
                    bq,
                    bk,
                    wg,
                    tile_elem,
                    tqt,
                    tkt,
                    oqt,
                    odt,
                });
            }
        }
    }
    if smallest == u64::MAX {
        return Err(format!(
            "device allows only {} invocations per workgroup",
            facts.max_invocations
        ));
    }
    Err(format!(
        "head size {} needs {} of workgroup memory > device's {}",
        dk.max(dv),
        human_bytes(smallest),
        human_bytes(limit)
    ))
}

/// Workgroups the keys are split to fill when the device does not say how
/// many it runs at once (flash decoding: few queries still occupy a large
/// device).
pub(super) const TARGET_WORKGROUPS: u64 = 1024;

/// Fewest key tiles one split takes.
const MIN_TILES_PER_SPLIT: u32 = 2;

/// Cooperative-matrix attention workgroups one multiprocessor runs at once,
/// for head sizes above 128 and up to 128. Measured on an H200 (132 SMs)
/// by the wave steps of the split sweep: prefill (128 workgroups before
/// splitting) at head 256 ran 942-957 us with 256 workgroups, 1,183-1,191
/// with 384; at head 128 561-564 us with 384, 696-697 with 256.
const COOP_PER_UNIT: (u64, u64) = (2, 3);

/// How many workgroups share the keys of one query block, and how many
/// keys each takes: `(splits, chunk)`; `(1, n_kv)` when not split. The
/// grid of `workgroups` (before splitting) grows to at most `at_most`.
/// `forced` (the `flash_attn_splits` option) forces that many splits (1:
/// none).
pub(super) fn kv_splits(
    forced: Option<u32>,
    workgroups: u64,
    n_kv: u32,
    bk: u32,
    at_most: u64,
) -> (u32, u32) {
    let tiles = n_kv.div_ceil(bk);
    let want = forced.unwrap_or_else(|| {
        let want = (at_most / workgroups.max(1)).min(u64::from(u32::MAX)) as u32;
        want.min(tiles / MIN_TILES_PER_SPLIT)
    });
    let splits = want.min(tiles);
    if splits <= 1 {
        return (1, n_kv.max(1));
    }
    let chunk_tiles = tiles.div_ceil(splits);
    (tiles.div_ceil(chunk_tiles), chunk_tiles * bk)
}

/// Most workgroups `kernel` (head sizes `dk`, `dv`) should be split into:
/// for the cooperative-matrix kernel on a device that reports its
/// multiprocessors, as many as run at once (one wave: a second, partly
/// filled wave costs a whole kernel's time, and each split adds fixed work
/// per workgroup and to the combine pass), otherwise
/// [`TARGET_WORKGROUPS`]. A decode on an H200 (head 128, 16,384 keys, 8 K/V
/// heads: 8 workgroups before splitting) took 126.5 us as 1,024
/// workgroups, 65.4 as 256, 66.6-67.2 as 384 (f16 K/V; q8_0 K/V 196 / 167
/// / 128-130 us).
pub(super) fn split_target(facts: &Facts, kernel: &Kernel, dk: u32, dv: u32) -> u64 {
    match (kernel, facts.compute_units) {
        (Kernel::CoopMat { .. }, Some(units)) => {
            let per_unit = if dk.max(dv) > 128 {
                COOP_PER_UNIT.0
            } else {
                COOP_PER_UNIT.1
            };
            u64::from(units) * per_unit
        }
        _ => TARGET_WORKGROUPS,
    }
}

/// The pipeline key of the main kernel for plan `pl`.
fn kernel_key(pl: &Plan, dk: u32, dv: u32, tk: DType, tv: DType) -> PipelineKey {
    let (dk4, dv4) = (dk / 4, dv / 4);
    let (q_row4, kv_row4, s_row) = (dk4 + 1, dk4.max(dv4) + 1, pl.bk + 1);
    let (sq, sk) = (pl.bq / pl.tqt, pl.bk / pl.tkt);
    let (oq, od) = (pl.bq / pl.oqt, dv4.div_ceil(pl.odt));
    let mut key = PipelineKey::new("flash_attn", "")
        .ty("K", type_name(tk))
        .ty("V", type_name(tv))
        .wg(pl.wg)
        .define("TT", if pl.tile_elem == 2 { "f16" } else { "f32" });
    for (name, value) in [
        ("DK4", dk4),
        ("DV4", dv4),
        ("BQ", pl.bq),
        ("BK", pl.bk),
        ("TQT", pl.tqt),
        ("TKT", pl.tkt),
        ("SQ", sq),
        ("SK", sk),
        ("SQK", sq * sk),
        ("OQT", pl.oqt),
        ("ODT", pl.odt),
        ("OQ", oq),
        ("OD", od),
        ("OQD", oq * od),
        ("QROW4", q_row4),
        ("KVROW4", kv_row4),
        ("SROW", s_row),
        ("Q_TILE_LEN", pl.bq * q_row4),
        ("KV_TILE_LEN", pl.bk * kv_row4),
        ("S_TILE_LEN", pl.bq * s_row),
    ] {
        key = key.define(name, value.to_string());
    }
    key
}

/// Workgroup size of `flash_attn_vec`, which is also its keys per tile.
const VEC_WG: u32 = 128;

/// Whether `flash_attn_vec` runs `n_q` queries of head sizes `dk`, `dv`
/// here: one query, a value head of at most 4 x [`VEC_WG`] elements (each
/// vec4 column of O belongs to an invocation), and its workgroup memory.
fn vector_fits(facts: &Facts, dk: u32, dv: u32, n_q: u32) -> bool {
    n_q == 1
        && dv / 4 <= VEC_WG
        && VEC_WG <= facts.max_invocations
        && vector_workgroup_bytes(dk, dv) <= u64::from(facts.workgroup_storage_bytes)
}

/// Workgroup memory of `flash_attn_vec`: Q in f32, the scores and the
/// probabilities of a tile, and the key groups' O columns.
fn vector_workgroup_bytes(dk: u32, dv: u32) -> u64 {
    let groups = vector_groups(dv);
    u64::from(dk / 4) * 16 + u64::from(2 * VEC_WG) * 4 + u64::from(groups * (dv / 4)) * 16
}

/// Key groups of `flash_attn_vec`'s P V (`NG`): each takes every vec4
/// column of a value head of `dv`.
fn vector_groups(dv: u32) -> u32 {
    VEC_WG / (dv / 4).max(1)
}

/// The pipeline key of `flash_attn_vec`.
fn vector_key(dk: u32, dv: u32, tk: DType, tv: DType) -> PipelineKey {
    let (dk4, dv4) = (dk / 4, dv / 4);
    let mut key = PipelineKey::new("flash_attn_vec", "")
        .ty("K", type_name(tk))
        .ty("V", type_name(tv))
        .wg(VEC_WG);
    for (name, value) in [("DK4", dk4), ("DV4", dv4), ("NG", vector_groups(dv))] {
        key = key.define(name, value.to_string());
    }
    key
}

/// Queries per workgroup of the cooperative-matrix kernel.
const COOP_QUERIES: u32 = 32;
/// Keys per tile of the cooperative-matrix kernel.
const COOP_KEYS: u32 = 32;
/// Subgroups per workgroup of the cooperative-matrix kernel.
const COOP_SUBGROUPS: u32 = 4;
/// Workgroup size of the cooperative-matrix kernel: its softmax gives each
/// query row four neighbouring invocations, so the real kernel's
/// subgroups must make exactly this many (subgroups of 32).
const COOP_WG: u32 = 4 * COOP_QUERIES;
/// Largest head size the cooperative-matrix kernel takes (its half tiles
/// of Q and K/V must fit the workgroup memory).
const COOP_MAX_HEAD: u32 = 256;
/// Fewest queries for which the cooperative-matrix kernel is chosen by
/// default: any. Even at one query, where 31 of its 32 rows would be
/// padding without packed heads, it ran a decode (head size 128, 16,384
/// keys, f16 K/V, 32 query heads on 8 K/V heads) in 154-159 us on an H200
/// against the plain kernel's 1,886-1,897.
const COOP_MIN_QUERIES: u32 = 1;

/// Defines of the cooperative-matrix kernel's output blocks 2 to 8 of a
/// subgroup.
const OUTPUT_BLOCK_FLAGS: [&str; 7] = ["O1", "O2", "O3", "O4", "O5", "O6", "O7"];

/// Defines of the cooperative-matrix kernel's Q blocks 2 to 16 (16 head
/// dimensions each) of a subgroup.
const Q_BLOCK_FLAGS: [&str; 15] = [
    "Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8", "Q9", "Q10", "Q11", "Q12", "Q13", "Q14", "Q15",
];

/// Which kernel runs a FLASH_ATTN_EXT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kernel {
    /// `flash_attn`, tiled by [`plan`].
    Plain(Plan),
    /// `flash_attn_coopmat` ([`COOP_WG`] invocations) with `rows` queries
    /// per head in its 32 rows (see [`coop_query_rows`]), or (`emulated`)
    /// the same kernel with plain code in place of the matrix calls.
    CoopMat { emulated: bool, rows: u32 },
    /// `flash_attn_vec`: one query per workgroup of [`VEC_WG`] invocations,
    /// one key each (decode without cooperative matrices).
    Vector,
}

impl Kernel {
    /// Queries per workgroup.
    pub(super) fn queries(&self) -> u32 {
        match self {
            Kernel::Plain(p) => p.bq,
            Kernel::CoopMat { rows, .. } => *rows,
            Kernel::Vector => 1,
        }
    }

    /// Query heads per workgroup (packed heads share one K/V head).
    pub(super) fn heads(&self) -> u32 {
        match self {
            Kernel::Plain(_) | Kernel::Vector => 1,
            Kernel::CoopMat { rows, .. } => COOP_QUERIES / rows,
        }
    }

    /// Keys per tile.
    pub(super) fn keys(&self) -> u32 {
        match self {
            Kernel::Plain(p) => p.bk,
            Kernel::CoopMat { .. } => COOP_KEYS,
            Kernel::Vector => VEC_WG,
        }
    }

    /// The pipeline key for head sizes `dk`, `dv` and K/V types `tk`, `tv`.
    pub(super) fn key(&self, dk: u32, dv: u32, tk: DType, tv: DType) -> PipelineKey {
        let (emulated, rows) = match *self {
            Kernel::Plain(pl) => return kernel_key(&pl, dk, dv, tk, tv),
            Kernel::Vector => return vector_key(dk, dv, tk, tv),
            Kernel::CoopMat { emulated, rows } => (emulated, rows),
        };
        let (dkp, dvp) = (dk.next_multiple_of(16), dv.next_multiple_of(16));
        let mut key = PipelineKey::new("flash_attn_coopmat", "")
            .ty("K", type_name(tk))
            .ty("V", type_name(tv))
            .wg(COOP_WG);
        for (name, value) in [
            ("DK4", dk / 4),
            ("DV4", dv / 4),
            ("DKP", dkp),
            ("DVP", dvp),
            ("QPITCH", dkp + 8),
            ("KVPITCH", dkp.max(dvp) + 8),
            ("QROWS", rows),
        ] {
            key = key.define(name, value.to_string());
        }
        // Output blocks per subgroup beyond the first (named accumulators:
        // arrays of cooperative matrices may not stay in registers).
        for &flag in &OUTPUT_BLOCK_FLAGS[..(dvp / 16).div_ceil(2) as usize - 1] {
            key = key.define(flag, "");
        }
        for &flag in &Q_BLOCK_FLAGS[..(dkp / 16) as usize - 1] {
            key = key.define(flag, "");
        }
        if emulated {
            key.define("EMULATE_COOPMAT", "")
        } else {
            key.path = "coopmat";
            key
        }
    }
}

/// Workgroup memory of the cooperative-matrix kernel: the half K/V tile
/// padded by 8 (and, `emulated`, a Q tile; the real kernel keeps Q in
/// matrix registers), the f32 score tile (which also holds each
/// subgroup's 16 x 16 block for rescaling), the half probability tile and
/// three per-row values. At head size 256 that is 24.4 KB, 45.4 KB with
/// the Q tile: on an H200 a workgroup of 45.4 KB had a multiprocessor to
/// itself, while two of 24.4 KB share one (head size 256, 20,000 keys:
/// 2,100-2,123 -> 1,277-1,283 us).
fn coop_workgroup_bytes(dk: u32, dv: u32, emulated: bool) -> u64 {
    let (dkp, dvp) = (dk.next_multiple_of(16), dv.next_multiple_of(16));
    let q_halves = if emulated {
        COOP_QUERIES * (dkp + 8)
    } else {
        0
    };
    let halves = q_halves + COOP_KEYS * (dkp.max(dvp) + 8);
    let floats = COOP_QUERIES * (COOP_KEYS + 4) + 3 * COOP_QUERIES;
    let p_halves = COOP_QUERIES * (COOP_KEYS + 8);
    u64::from(halves + p_halves) * 2 + u64::from(floats) * 4
}

/// The kernel for head sizes `dk`, `dv`, `n_q` queries, `gqa` query heads
/// per K/V head and K/V types `tk`, `tv` on this device, or why none fits.
pub(super) fn choose(
    facts: &Facts,
    (dk, dv): (u32, u32),
    n_q: u32,
    gqa: u32,
    tk: DType,
    tv: DType,
) -> Result<Kernel, String> {
    // The `flash_attn` option forces a kernel (benchmarks and tests;
    // ignored where the device or shape cannot run it; see
    // `crate::options::FLASH_ATTN_KERNELS`).
    let kernel = choose_with(facts, dk, dv, n_q, tk, tv, facts.tuning.flash_attn)?;
    Ok(match kernel {
        Kernel::CoopMat { emulated, .. } if !facts.tuning.flash_attn_no_pack => Kernel::CoopMat {
            emulated,
            rows: coop_query_rows(n_q, gqa),
        },
        other => other,
    })
}

/// Queries per head in the cooperative-matrix kernel's 32 rows: 32, or,
/// when fewer queries leave room, 32 / g for the largest power of two g
/// that divides `gqa` (query heads per K/V head) with g times `n_q`
/// (rounded up to a power of two) at most 32. The g heads then share the
/// workgroup's K/V tiles: a decode with 4 query heads per K/V head reads
/// each tile once instead of four times.
pub(super) fn coop_query_rows(n_q: u32, gqa: u32) -> u32 {
    let q = n_q.max(1).next_power_of_two().min(COOP_QUERIES);
    let mut g = 1;
    while q * g * 2 <= COOP_QUERIES && gqa.is_multiple_of(g * 2) {
        g *= 2;
    }
    COOP_QUERIES / g
}

fn choose_with(
    facts: &Facts,
    dk: u32,
    dv: u32,
    n_q: u32,
    tk: DType,
    tv: DType,
    forced: Option<&str>,
) -> Result<Kernel, String> {
    let (lo, hi) = facts.subgroup_size;
    // The softmax uses shuffles among four neighbouring invocations, and
    // bf16 K/V can exceed the half range of the tiles.
    let coop_shape = facts.f16
        && facts.subgroups
        && lo == hi
        && lo % 4 == 0
        && lo > 0
        && dk <= COOP_MAX_HEAD
        && dv <= COOP_MAX_HEAD
        && tk != DType::BF16
        && tv != DType::BF16;
    let fits = |emulated| {
        coop_workgroup_bytes(dk, dv, emulated) <= u64::from(facts.workgroup_storage_bytes)
    };
    let wg_ok = COOP_WG <= facts.max_invocations;
    let real = coop_shape
        && fits(false)
        && facts.coopmat_f16_16
        && wg_ok
        && COOP_SUBGROUPS * lo == COOP_WG;
    let emulated_ok = coop_shape && fits(true) && wg_ok && COOP_WG.is_multiple_of(lo);
    let kv_f32 = tk == DType::F32 && tv == DType::F32;
    match forced {
        Some("coopmat") if real => {
            return Ok(Kernel::CoopMat {
                emulated: false,
                rows: COOP_QUERIES,
            });
        }
        Some("coopmat-emulated") if emulated_ok => {
            return Ok(Kernel::CoopMat {
                emulated: true,
                rows: COOP_QUERIES,
            });
        }
        Some("plain") => return plan(facts, dk, dv, n_q, kv_f32).map(Kernel::Plain),
        Some("vector") if vector_fits(facts, dk, dv, n_q) => return Ok(Kernel::Vector),
        _ => {}
    }
    if real && n_q >= COOP_MIN_QUERIES {
        return Ok(Kernel::CoopMat {
            emulated: false,
            rows: COOP_QUERIES,
        });
    }
    if vector_fits(facts, dk, dv, n_q) {
        return Ok(Kernel::Vector);
    }
    plan(facts, dk, dv, n_q, kv_f32).map(Kernel::Plain)
}

#[cfg(test)]
mod tests;
