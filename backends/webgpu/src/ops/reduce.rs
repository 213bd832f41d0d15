//! Reductions of f32 rows, one workgroup per row: SUM (row sums into
//! scratch, then their sum), SUM_ROWS, CUMSUM, ARGMAX, and ARGSORT / TOP_K
//! (bitonic sort in workgroup memory, so rows are limited to what it holds).
//! Index results are i32. Kernels: `shaders/wgsl/{sum_rows,cumsum,argmax,
//! argsort}.wgsl`.

use backplane_abi::{DType, Op, SortOrder, TensorDesc};
use backplane_shaders::PipelineKey;

use crate::encode::{Binding, Encoder, Params};
use crate::facts::Facts;
use crate::ops::{nb_elems, ne_u32, src, src_index, want_type};
use crate::ops::{row_count, row_workgroup_size, same_memory};
use crate::pipelines::Checks;

/// Workgroup memory per sorted entry: the order key and the index.
const SORT_BYTES_PER_ENTRY: u64 = 8;

/// Scratch bytes per top-k candidate: the order key and the index.
const CANDIDATE_BYTES: u64 = 8;

/// Largest workgroup of the sort kernel.
const SORT_MAX_WG: u32 = 256;

/// Padded row length of the bitonic sort of `ne0` entries.
fn sort_len(ne0: i64) -> u64 {
    (ne0.max(1) as u64).next_power_of_two()
}

/// The longest row the bitonic sort holds in workgroup memory.
fn max_sort_row(facts: &Facts) -> u64 {
    let entries = u64::from(facts.workgroup_storage_bytes) / SORT_BYTES_PER_ENTRY;
    if entries == 0 {
        0
    } else {
        1 << entries.ilog2()
    }
}

/// Requires f32 strides of whole elements and u32 dims.
fn check_layout(what: &str, t: &TensorDesc, elem: u64) -> Result<(), String> {
    nb_elems(t, elem).map_err(|e| format!("{what}: {e}"))?;
    ne_u32(t).map_err(|e| format!("{what}: {e}"))?;
    Ok(())
}

/// Accepts f32 sources (i32 results for the index ops), argsort/top-k
/// rows up to what workgroup memory holds.
pub fn supports(facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    let d = &graph[node];
    let a = src(graph, node, 0)?;
    let op = d.op().map_err(|e| e.to_string())?;
    // The op contract has checked the result's type and shape and the sort
    // order; what follows is what the kernels implement and index.
    want_type("src0", a, &[DType::F32])?;
    check_layout("src0", a, 4)?;
    check_layout("dst", d, 4)?;
    let ne0 = a.ne[0];
    if matches!(op, Op::Argsort | Op::TopK) {
        let max = max_sort_row(facts);
        if sort_len(ne0) > max {
            let what = format!(
                "rows of {ne0} > {max}, the longest the bitonic sort holds in {} bytes of workgroup memory",
                facts.workgroup_storage_bytes
            );
            if op == Op::Argsort {
                return Err(format!("ARGSORT {what}"));
            }
            // Longer rows: top-k of chunks, then of their candidates.
            let k = d.ne[0] as u64;
            if 2 * k > max {
                return Err(format!("TOP_K k = {k} > {} on {what}", max / 2));
            }
            let first = row_count(a) * (ne0 as u64).div_ceil(max) * k * CANDIDATE_BYTES;
            if !facts.fits_binding(first) {
                return Err(facts.binding_refusal("TOP_K candidate scratch", first));
            }
        }
    }
    Ok(())
}

/// Encodes the kernel(s) of the node.
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    match e.graph[node].op().map_err(|x| x.to_string())? {
        Op::Sum => encode_sum(e, node),
        Op::SumRows => {
            let ia = src_index(e.graph, node, 0)?;
            let (a, d) = (&e.graph[ia], &e.graph[node]);
            let (ba, bd) = (e.binding(ia)?, e.binding(node)?);
            let nb_d = nb_elems(d, 4)?;
            sum_rows(e, a.ne, nb_elems(a, 4)?, ba, bd, nb_d)
        }
        Op::Cumsum => encode_cumsum(e, node),
        Op::Argmax => encode_argmax(e, node),
        _ => encode_sort(e, node),
    }
}

/// Row sums of `ne`/`nb_a` at `ba` into `bd` (strides `nb_d`).
fn sum_rows(
    e: &mut Encoder,
    ne: [i64; 4],
    nb_a: [u32; 4],
    ba: Binding,
    bd: Binding,
    nb_d: [u32; 4],
) -> Result<(), String> {
    let wg = row_workgroup_size(e.facts(), ne[0]);
    let key = PipelineKey::new("sum_rows", "").wg(wg);
    let ne32 = ne.map(|n| n as u32);
    let params = Params::new()
        .u32x4(ne32)
        .u32(ba.elem_offset(4)?)
        .u32x4(nb_a)
        .u32(bd.elem_offset(4)?)
        .u32(nb_d[1])
        .u32(nb_d[2])
        .u32(nb_d[3]);
    let rows = ne[1..].iter().map(|&n| n as u64).product();
    e.dispatch_linear(&key, Checks::On, &[ba, bd], &params, rows)
}

/// SUM: the row sums into scratch, then their sum (one pass for one row).
fn encode_sum(e: &mut Encoder, node: usize) -> Result<(), String> {
    let ia = src_index(e.graph, node, 0)?;
    let a = &e.graph[ia];
    let rows = row_count(a);
    let ba = e.binding(ia)?;
    let bd = e.binding(node)?;
    if rows == 1 {
        return sum_rows(e, a.ne, nb_elems(a, 4)?, ba, bd, [1; 4]);
    }
    let n = u32::try_from(rows).map_err(|_| format!("{rows} rows do not fit u32"))?;
    let partial = e.scratch(rows * 4)?;
    // Pass 1 writes a contiguous [1, ne1, ne2, ne3]; pass 2 reads it as one row.
    let [_, ne1, ne2, _] = ne_u32(a)?;
    let rows_out = [1, 1, ne1, ne1 * ne2];
    sum_rows(e, a.ne, nb_elems(a, 4)?, ba, partial.clone(), rows_out)?;
    sum_rows(
        e,
        [i64::from(n), 1, 1, 1],
        [1, n, n, n],
        partial,
        bd,
        [1; 4],
    )
}

/// CUMSUM, in place when the destination is the source.
fn encode_cumsum(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let ia = src_index(g, node, 0)?;
    let a = &g[ia];
    let inplace = same_memory(d, a);
    let wg = row_workgroup_size(e.facts(), a.ne[0]);
    let mut key = PipelineKey::new("cumsum", "").wg(wg);
    key.inplace = inplace;
    let (ba, bd) = (e.binding(ia)?, e.binding(node)?);
    let params = Params::new()
        .u32x4(ne_u32(a)?)
        .u32(ba.elem_offset(4)?)
        .u32x4(nb_elems(a, 4)?)
        .u32(bd.elem_offset(4)?)
        .u32x4(nb_elems(d, 4)?);
    let bindings = if inplace { vec![ba] } else { vec![ba, bd] };
    e.dispatch_linear(&key, Checks::On, &bindings, &params, row_count(a))
}

/// ARGMAX of each row of a matrix.
fn encode_argmax(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let ia = src_index(g, node, 0)?;
    let a = &g[ia];
    let wg = row_workgroup_size(e.facts(), a.ne[0]);
    let key = PipelineKey::new("argmax", "").wg(wg);
    let (ba, bd) = (e.binding(ia)?, e.binding(node)?);
    let nb_a = nb_elems(a, 4)?;
    let params = Params::new()
        .u32(a.ne[0] as u32)
        .u32(a.ne[1] as u32)
        .u32(ba.elem_offset(4)?)
        .u32(nb_a[0])
        .u32(nb_a[1])
        .u32(bd.elem_offset(4)?)
        .u32(nb_elems(d, 4)?[0]);
    e.dispatch_linear(&key, Checks::On, &[ba, bd], &params, a.ne[1] as u64)
}

/// The chunked passes of a top-k of `k` over rows of `ne0` when a sort
/// holds `chunk` entries: (entries per row, chunks per row) of each pass
/// that leaves candidates; the final pass sorts what the last one left.
fn candidate_passes(ne0: u64, k: u64, chunk: u64) -> Vec<(u64, u64)> {
    let mut passes = Vec::new();
    let mut n = ne0;
    while n > chunk && 2 * k <= chunk {
        let chunks = n.div_ceil(chunk);
        passes.push((n, chunks));
        n = chunks * k;
    }
    passes
}

/// Where a sort pass reads its entries and writes its result.
enum SortIo {
    /// The f32 source row in, the i32 destination out.
    Tensor,
    /// The source row in, candidates out.
    SourceToCandidates(Binding),
    /// Candidates in, candidates out.
    Candidates(Binding, Binding),
    /// Candidates in, the destination out.
    CandidatesToTensor(Binding),
}

/// ARGSORT (all indices, asc or desc) or TOP_K (the first k descending);
/// rows longer than one sort go through candidate passes (top-k only).
fn encode_sort(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let ia = src_index(g, node, 0)?;
    let a = &g[ia];
    let op = d.op().map_err(|x| x.to_string())?;
    let descending = op == Op::TopK || d.param_i32(0) == SortOrder::Desc as i32;
    let chunk = max_sort_row(e.facts());
    let (k, rows) = (d.ne[0] as u64, row_count(a));
    let mut input: Option<Binding> = None;
    let mut n = a.ne[0] as u64;
    for (n_in, chunks) in candidate_passes(n, k, chunk) {
        let out = e.scratch(rows * chunks * k * CANDIDATE_BYTES)?;
        let io = match input.take() {
            None => SortIo::SourceToCandidates(out.clone()),
            Some(cand) => SortIo::Candidates(cand, out.clone()),
        };
        sort_pass(e, node, descending, io, [n_in, chunk, chunks, k])?;
        input = Some(out);
        n = chunks * k;
    }
    let io = match input {
        None => SortIo::Tensor,
        Some(cand) => SortIo::CandidatesToTensor(cand),
    };
    sort_pass(e, node, descending, io, [n, sort_len(n as i64), 1, k])
}

/// One sort pass over every row: `[entries per row, sort length, chunks
/// per row, entries written per chunk]`.
fn sort_pass(
    e: &mut Encoder,
    node: usize,
    descending: bool,
    io: SortIo,
    [n_in, sort_n, chunks, n_out]: [u64; 4],
) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let ia = src_index(g, node, 0)?;
    let a = &g[ia];
    let limit = SORT_MAX_WG.min(e.facts().max_invocations.max(1));
    let wg = (sort_n / 2).clamp(1, u64::from(1u32 << limit.ilog2())) as u32;
    let mut key = PipelineKey::new("argsort", "")
        .wg(wg)
        .define("SORT_N", format!("{sort_n}u"));
    if descending {
        key = key.define("DESCENDING", "");
    }
    let (input, output, in_cand, out_cand) = match io {
        SortIo::Tensor => (e.binding(ia)?, e.binding(node)?, false, false),
        SortIo::SourceToCandidates(out) => (e.binding(ia)?, out, false, true),
        SortIo::Candidates(cand, out) => (cand, out, true, true),
        SortIo::CandidatesToTensor(cand) => (cand, e.binding(node)?, true, false),
    };
    if in_cand {
        key = key.define("IN_CAND", "");
    }
    if out_cand {
        key = key.define("OUT_CAND", "");
    }
    let [_, ne1, ne2, ne3] = ne_u32(a)?;
    let params = Params::new()
        .u32x4([n_in as u32, ne1, ne2, ne3])
        .u32(input.elem_offset(4)?)
        .u32x4(nb_elems(a, 4)?)
        .u32(output.elem_offset(4)?)
        .u32x4(nb_elems(d, 4)?)
        .u32(n_out as u32)
        .u32(chunks as u32)
        .u32(n_in.min(sort_n) as u32);
    let groups = row_count(a) * chunks;
    e.dispatch_linear(&key, Checks::On, &[input, output], &params, groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_rows_pad_to_powers_of_two() {
        assert_eq!(sort_len(1), 1);
        assert_eq!(sort_len(1025), 2048);
        assert_eq!(sort_len(2048), 2048);
    }

    #[test]
    fn long_top_k_rows_shrink_to_one_sort() {
        assert!(candidate_passes(4096, 40, 4096).is_empty());
        assert_eq!(candidate_passes(150_000, 40, 4096), vec![(150_000, 37)]);
        // 37 chunks of 1000 candidates, then 10, then 3: 3000 fit one sort.
        assert_eq!(
            candidate_passes(150_000, 1000, 4096),
            vec![(150_000, 37), (37_000, 10), (10_000, 3)]
        );
    }
}
