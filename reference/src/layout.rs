//! Ops that move data: CPY/CONT, GET_ROWS, SET_ROWS, CONCAT, REPEAT, PAD.

use super::{Node, Tensor, for_each_index, unravel};
use backplane_runtime::ComputeError;
use backplane_runtime::error::describe;

/// Copies element k of the source (logical order) to element k of the
/// result. Same-type copies move raw bytes (blocks for block types);
/// otherwise values convert through f64: floats round once, integers
/// truncate toward zero like ggml's `(int32_t) x`, block types quantize each
/// destination row with ggml's reference quantizer.
pub(crate) fn cpy(n: &Node) -> Result<(), ComputeError> {
    let a = n.src(0)?;
    let dst = n.dst;
    if a.dt == dst.dt {
        return copy_same_type(n, &a);
    }
    let ne0 = a.ne()[0];
    let mut values = Vec::with_capacity(a.nelements() as usize);
    let [_, ne1, ne2, ne3] = a.ne();
    for i3 in 0..ne3 {
        for i2 in 0..ne2 {
            for i1 in 0..ne1 {
                values.extend(a.row(i1, i2, i3));
            }
        }
    }
    debug_assert_eq!(values.len() as i64, ne0 * ne1 * ne2 * ne3);
    n.store(&values)
}

/// Raw copy in logical order between tensors of one type.
fn copy_same_type(n: &Node, a: &Tensor) -> Result<(), ComputeError> {
    let dst = n.dst;
    let bs = a.dt.block_size() as i64;
    if bs > 1 {
        let blocks_a = [a.ne()[0] / bs, a.ne()[1], a.ne()[2], a.ne()[3]];
        let blocks_d = [dst.ne()[0] / bs, dst.ne()[1], dst.ne()[2], dst.ne()[3]];
        let mut all = Vec::new();
        for_each_index(blocks_a, |[b0, i1, i2, i3]| {
            all.push(a.block_bytes([b0 * bs, i1, i2, i3]))
        });
        for (k, bytes) in all.iter().enumerate() {
            let [b0, i1, i2, i3] = unravel(k as i64, blocks_d);
            dst.set_block_bytes([b0 * bs, i1, i2, i3], bytes);
        }
        return Ok(());
    }
    let mut all = Vec::with_capacity(a.nelements() as usize);
    for_each_index(a.ne(), |i| all.push(a.elem(i)));
    for (k, e) in all.into_iter().enumerate() {
        dst.set_elem(unravel(k as i64, dst.ne()), e);
    }
    Ok(())
}

/// `dst[:, r, i2, i3] = a[:, rows[r, i2, i3], i2, i3]`, as f32 (i32 rows of
/// an i32 source stay i32). An index outside `0..a.ne1` is an error.
pub(crate) fn get_rows(n: &Node) -> Result<(), ComputeError> {
    let (a, rows) = (n.src(0)?, n.src(1)?);
    let (an, rn) = (a.ne(), rows.ne());
    let mut out = Vec::with_capacity(n.dst.nelements() as usize);
    for i12 in 0..rn[2] {
        for i11 in 0..rn[1] {
            for i10 in 0..rn[0] {
                let r = rows.int_at([i10, i11, i12, 0]);
                if r < 0 || r >= an[1] {
                    return Err(n.bad_input(format!(
                        "row {i10} (of [{i11}, {i12}]) has index {r}, outside 0..{} of a {}",
                        an[1],
                        describe(a.d)
                    )));
                }
                out.extend(a.row(r, i11, i12));
            }
        }
    }
    n.store(&out)
}

/// Writes row r of f32 `src [n0, r, n2, n3]` over row `rows[r, i2 % b2,
/// i3 % b3]` of the destination (which the result aliases), converting or
/// quantizing. Every index is checked before anything is written.
pub(crate) fn set_rows(n: &Node) -> Result<(), ComputeError> {
    let (src, rows) = (n.src(0)?, n.src(1)?);
    let dst = n.dst;
    let (sn, rn, dn) = (src.ne(), rows.ne(), dst.ne());
    let mut writes = Vec::with_capacity((sn[1] * sn[2] * sn[3]) as usize);
    for i3 in 0..sn[3] {
        for i2 in 0..sn[2] {
            for i in 0..sn[1] {
                let r = rows.int_at([i, i2 % rn[1], i3 % rn[2], 0]);
                if r < 0 || r >= dn[1] {
                    return Err(n.bad_input(format!(
                        "row {i} (of [{i2}, {i3}]) has index {r}, outside 0..{} of the destination {}",
                        dn[1],
                        describe(dst.d)
                    )));
                }
                writes.push((r, i2, i3, src.row(i, i2, i3)));
            }
        }
    }
    for (r, i2, i3, values) in writes {
        dst.set_row(r, i2, i3, &values)
            .map_err(|e| n.unsupported(format!("writing {}: {e}", describe(dst.d))))?;
    }
    Ok(())
}

/// Joins a and b along op_params[0].
pub(crate) fn concat(n: &Node) -> Result<(), ComputeError> {
    let (a, b) = (n.src(0)?, n.src(1)?);
    let dim = n.p_i32(0);
    let dim = dim as usize;
    let (an, bn) = (a.ne(), b.ne());
    let mut want = an;
    want[dim] += bn[dim];
    let mut all = Vec::with_capacity(n.dst.nelements() as usize);
    for_each_index(want, |i| {
        if i[dim] < an[dim] {
            all.push(a.elem(i));
        } else {
            let mut j = i;
            j[dim] -= an[dim];
            all.push(b.elem(j));
        }
    });
    write_elems(n, all)
}

/// Tiles a over the result's shape.
pub(crate) fn repeat(n: &Node) -> Result<(), ComputeError> {
    let a = n.src(0)?;
    let an = a.ne();
    let mut all = Vec::with_capacity(n.dst.nelements() as usize);
    for_each_index(n.dst.ne(), |i| {
        all.push(a.elem([i[0] % an[0], i[1] % an[1], i[2] % an[2], i[3] % an[3]]))
    });
    write_elems(n, all)
}

fn write_elems(n: &Node, all: Vec<super::access::Elem>) -> Result<(), ComputeError> {
    let ne = n.dst.ne();
    for (k, e) in all.into_iter().enumerate() {
        n.dst.set_elem(unravel(k as i64, ne), e);
    }
    Ok(())
}

/// Zero padding: op_params[2k] before and op_params[2k + 1] after dim k.
pub(crate) fn pad(n: &Node) -> Result<(), ComputeError> {
    let a = n.src(0)?;
    let an = a.ne();
    let lp = [0, 2, 4, 6].map(|i| n.p_i32(i) as i64);
    let mut out = Vec::with_capacity(n.dst.nelements() as usize);
    for_each_index(n.dst.ne(), |i| {
        let inside = (0..4).all(|k| i[k] >= lp[k] && i[k] < lp[k] + an[k]);
        out.push(if inside {
            a.get(i[0] - lp[0], i[1] - lp[1], i[2] - lp[2], i[3] - lp[3])
        } else {
            0.0
        });
    });
    n.store(&out)
}
