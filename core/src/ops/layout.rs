//! Views (reshape, view, permute, transpose), copies, gathers and scatters,
//! and ops that move data around (repeat, concat, pad).

use backplane_abi::{DType, MAX_DIMS, Op};

use super::{can_repeat, need, need_contiguous};
use crate::error::{GraphError, describe, expect_type, invalid};
use crate::graph::{Graph, TensorId, shape4};

impl Graph {
    /// View of contiguous `a` with a new shape of the same element count.
    pub fn reshape(&mut self, a: TensorId, ne: &[i64]) -> Result<TensorId, GraphError> {
        let op = Op::Reshape;
        let da = self.d(a)?;
        let ne4 = shape4(ne).map_err(|m| invalid(op, m))?;
        need_contiguous(op, "a", &da)?;
        need(ne4.iter().product::<i64>() == da.nelements(), op, || {
            format!(
                "a {} has {} elements; {:?} has {}",
                describe(&da),
                da.nelements(),
                ne,
                ne4.iter().product::<i64>()
            )
        })?;
        let dt = self.dtype(a);
        need(ne4[0] % dt.block_size() as i64 == 0, op, || {
            format!("ne0 {} is not a multiple of {dt}'s block size", ne4[0])
        })?;
        let mut d = Graph::fresh(dt, ne4);
        d.view_src = a.0 as i32;
        Ok(self.push_node(d, op, &[a]))
    }

    /// View of `a` with shape `ne`, byte strides `nb[1..]` (nb0 is the type
    /// size) starting `offset` bytes into a, as ggml_view_4d.
    pub fn view(
        &mut self,
        a: TensorId,
        ne: &[i64],
        nb: &[u64],
        offset: u64,
    ) -> Result<TensorId, GraphError> {
        let op = Op::View;
        let da = self.d(a)?;
        let ne4 = shape4(ne).map_err(|m| invalid(op, m))?;
        let dt = self.dtype(a);
        need(ne4[0] % dt.block_size() as i64 == 0, op, || {
            format!("ne0 {} is not a multiple of {dt}'s block size", ne4[0])
        })?;
        need(nb.len() + 1 == ne.len(), op, || {
            format!(
                "a view of {} dims takes {} strides (dims 1..), got {}",
                ne.len(),
                ne.len() - 1,
                nb.len()
            )
        })?;
        let mut d = Graph::fresh(dt, ne4);
        for (i, &s) in nb.iter().enumerate() {
            d.nb[i + 1] = s;
        }
        for i in nb.len() + 1..MAX_DIMS {
            d.nb[i] = d.nb[i - 1] * d.ne[i - 1] as u64;
        }
        let end = offset + d.nbytes();
        let root = self.storage_root(a);
        let room = self.offset_in_root(a) + self.desc(root).nbytes();
        need(self.offset_in_root(a) + end <= room, op, || {
            format!(
                "view {:?} at offset {offset} spans {end} bytes, past the end of a {} ({} bytes)",
                ne,
                describe(&da),
                da.nbytes()
            )
        })?;
        d.view_src = a.0 as i32;
        d.view_offset = offset;
        d.op_params[0] = offset as i32;
        d.op_params[1] = (offset >> 32) as i32;
        Ok(self.push_node(d, op, &[a]))
    }

    /// View with axes permuted: source dim i goes to position `axes[i]`.
    pub fn permute(&mut self, a: TensorId, axes: [usize; 4]) -> Result<TensorId, GraphError> {
        let op = Op::Permute;
        let da = self.d(a)?;
        let mut seen = [false; 4];
        for &x in &axes {
            need(x < 4 && !std::mem::replace(&mut seen[x], true), op, || {
                format!("axes {axes:?} must be a permutation of 0..4")
            })?;
        }
        let mut d = da;
        for (i, &to) in axes.iter().enumerate() {
            d.ne[to] = da.ne[i];
            d.nb[to] = da.nb[i];
        }
        d.flags = 0;
        d.view_src = a.0 as i32;
        d.view_offset = 0;
        d.op_params = [0; 16];
        for (i, &x) in axes.iter().enumerate() {
            d.op_params[i] = x as i32;
        }
        d.src = [backplane_abi::NO_TENSOR; backplane_abi::MAX_SRC];
        Ok(self.push_node(d, op, &[a]))
    }

    /// View with dims 0 and 1 swapped.
    pub fn transpose(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        let t = self.permute(a, [1, 0, 2, 3])?;
        let mut d = *self.desc(t);
        d.op = Op::Transpose.code();
        self.replace_last(d, "transpose");
        Ok(t)
    }

    fn replace_last(&mut self, d: backplane_abi::TensorDesc, prefix: &str) {
        let t = TensorId(self.len() - 1);
        self.set_name(t, format!("{prefix}-{}", t.0));
        self.set_desc_internal(t, d);
    }

    /// Contiguous copy of `a` (same type and shape).
    pub fn cont(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        let da = self.d(a)?;
        let d = Graph::fresh(self.dtype(a), da.ne);
        Ok(self.push_node(d, Op::Cont, &[a]))
    }

    /// Copies `a` into `b` (same element count), converting to b's type. The
    /// result aliases b.
    pub fn cpy(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        let op = Op::Cpy;
        let (da, db) = (self.d(a)?, self.d(b)?);
        need(da.nelements() == db.nelements(), op, || {
            format!(
                "a {} and b {} differ in element count",
                describe(&da),
                describe(&db)
            )
        })?;
        let ta = self.dtype(a);
        let tb = self.dtype(b);
        let ok = ta == tb
            || (ta.is_float() && (tb.is_float() || tb.is_quantized() || tb == DType::I32))
            || (ta == DType::I32 && tb == DType::F32)
            || (ta.is_quantized() && tb == DType::F32);
        need(ok, op, || format!("cannot convert {ta} to {tb}"))?;
        if tb.is_quantized() {
            need(
                db.is_contiguous() && db.ne[0] % tb.block_size() as i64 == 0,
                op,
                || {
                    format!(
                        "quantized destination b {} must be contiguous",
                        describe(&db)
                    )
                },
            )?;
        }
        if ta.is_quantized() {
            need(da.is_contiguous(), op, || {
                format!("quantized source a {} must be contiguous", describe(&da))
            })?;
        }
        let d = self.alias(b)?;
        Ok(self.push_node(d, op, &[a, b]))
    }

    /// Tiles `a` to b's shape; result has a's type.
    pub fn repeat(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        let op = Op::Repeat;
        let (da, db) = (self.d(a)?, self.d(b)?);
        let dt = expect_type(
            op,
            "a",
            &da,
            &[DType::F32, DType::F16, DType::BF16, DType::I32, DType::I16],
        )?;
        need(can_repeat(&da, &db), op, || {
            format!("a {} does not tile to b {}", describe(&da), describe(&db))
        })?;
        Ok(self.push_node(Graph::fresh(dt, db.ne), op, &[a, b]))
    }

    /// Joins a and b along `dim`; all other dims must match.
    pub fn concat(&mut self, a: TensorId, b: TensorId, dim: usize) -> Result<TensorId, GraphError> {
        let op = Op::Concat;
        let (da, db) = (self.d(a)?, self.d(b)?);
        need(dim < 4, op, || format!("dim {dim} out of range 0..4"))?;
        need(da.dtype == db.dtype, op, || {
            format!("a {} and b {} differ in type", describe(&da), describe(&db))
        })?;
        let dt = expect_type(
            op,
            "a",
            &da,
            &[DType::F32, DType::F16, DType::BF16, DType::I32],
        )?;
        need((0..4).all(|i| i == dim || da.ne[i] == db.ne[i]), op, || {
            format!(
                "a {} and b {} differ outside dim {dim}",
                describe(&da),
                describe(&db)
            )
        })?;
        let mut ne = da.ne;
        ne[dim] += db.ne[dim];
        let mut d = Graph::fresh(dt, ne);
        d.op_params[0] = dim as i32;
        Ok(self.push_node(d, op, &[a, b]))
    }

    /// Zero padding: `pads[2i]` before and `pads[2i + 1]` after dim i.
    pub fn pad(&mut self, a: TensorId, pads: [i32; 8]) -> Result<TensorId, GraphError> {
        let op = Op::Pad;
        let da = self.d(a)?;
        expect_type(op, "a", &da, &[DType::F32])?;
        need(pads.iter().all(|&p| p >= 0), op, || {
            format!("pads {pads:?} must not be negative")
        })?;
        let mut ne = da.ne;
        for i in 0..4 {
            ne[i] += (pads[2 * i] + pads[2 * i + 1]) as i64;
        }
        let mut d = Graph::fresh(DType::F32, ne);
        d.op_params[..8].copy_from_slice(&pads);
        Ok(self.push_node(d, op, &[a]))
    }

    /// Gathers rows: a [n0, n1, n2, n3], rows i32 [r, n2, n3] -> [n0, r, n2, n3]
    /// as f32 (or i32 when a is i32).
    pub fn get_rows(&mut self, a: TensorId, rows: TensorId) -> Result<TensorId, GraphError> {
        let op = Op::GetRows;
        let (da, db) = (self.d(a)?, self.d(rows)?);
        expect_type(op, "rows", &db, &[DType::I32])?;
        need(
            da.ne[2] == db.ne[1] && da.ne[3] == db.ne[2] && db.ne[3] == 1,
            op,
            || {
                format!(
                    "a {} and rows {}: rows must be [r, a.ne2, a.ne3, 1]",
                    describe(&da),
                    describe(&db)
                )
            },
        )?;
        let out = if self.dtype(a) == DType::I32 {
            DType::I32
        } else {
            DType::F32
        };
        let d = Graph::fresh(out, [da.ne[0], db.ne[0], db.ne[1], db.ne[2]]);
        Ok(self.push_node(d, op, &[a, rows]))
    }

    /// Scatters f32 rows of `src` [n0, r, n2, n3] into `dst` [n0, m, n2, n3] at
    /// i32/i64 `rows` [r, b2, b3] (broadcast over dims 2, 3). The result aliases dst.
    pub fn set_rows(
        &mut self,
        dst: TensorId,
        src: TensorId,
        rows: TensorId,
    ) -> Result<TensorId, GraphError> {
        let op = Op::SetRows;
        let (da, db, dc) = (self.d(dst)?, self.d(src)?, self.d(rows)?);
        expect_type(op, "src", &db, &[DType::F32])?;
        expect_type(op, "rows", &dc, &[DType::I32, DType::I64])?;
        let td = self.dtype(dst);
        need(td.is_float() || td.is_quantized(), op, || {
            format!("destination type {td} not supported")
        })?;
        need(
            da.ne[0] == db.ne[0]
                && da.ne[2] == db.ne[2]
                && da.ne[3] == db.ne[3]
                && db.ne[1] == dc.ne[0]
                && db.ne[2] % dc.ne[1] == 0
                && db.ne[3] % dc.ne[2] == 0
                && dc.ne[3] == 1,
            op,
            || {
                format!(
                    "dst {}, src {} and rows {} do not fit",
                    describe(&da),
                    describe(&db),
                    describe(&dc)
                )
            },
        )?;
        need(da.is_contiguous_rows(), op, || {
            format!("dst {} must have contiguous rows", describe(&da))
        })?;
        let d = self.alias(dst)?;
        Ok(self.push_node(d, op, &[src, rows]))
    }
}

impl Graph {
    pub(crate) fn set_desc_internal(&mut self, t: TensorId, d: backplane_abi::TensorDesc) {
        self.tensors_mut()[t.0] = d;
    }
}
