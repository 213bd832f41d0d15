//! Views (reshape, view, permute, transpose), copies, gathers and scatters,
//! and ops that move data around (repeat, concat, pad).

use backplane_abi::contract::{self, Chosen};
use backplane_abi::{MAX_DIMS, Op, TensorDesc};

use super::Out;
use crate::error::{GraphError, describe, invalid};
use crate::graph::{Graph, TensorId, shape4};

impl Graph {
    /// View of contiguous `a` with a new shape of the same element count.
    pub fn reshape(&mut self, a: TensorId, ne: &[i64]) -> Result<TensorId, GraphError> {
        let op = Op::Reshape;
        self.d(a)?;
        let ne4 = shape4(ne).map_err(|m| invalid(op, m))?;
        let mut d = TensorDesc::new(self.dtype(a), ne4);
        d.view_src = a.0 as i32;
        self.node(op, [0; 16], &[a], Out::Laid(d))
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
        if nb.len() + 1 != ne.len() {
            return Err(invalid(
                op,
                format!(
                    "a view of {} dims takes {} strides (dims 1..), got {}",
                    ne.len(),
                    ne.len() - 1,
                    nb.len()
                ),
            ));
        }
        let mut d = TensorDesc::new(self.dtype(a), ne4);
        for (i, &s) in nb.iter().enumerate() {
            d.nb[i + 1] = s;
        }
        for i in nb.len() + 1..MAX_DIMS {
            d.nb[i] = d.nb[i - 1] * d.ne[i - 1] as u64;
        }
        // That the view lies inside a's memory needs the graph (a's storage
        // root), so it is checked here rather than in the contract.
        let end = offset.saturating_add(d.nbytes());
        let root = self.storage_root(a);
        let room = self.offset_in_root(a) + self.desc(root).nbytes();
        if self.offset_in_root(a).saturating_add(end) > room {
            return Err(invalid(
                op,
                format!(
                    "view {:?} at offset {offset} spans {end} bytes, past the end of a {} ({} bytes)",
                    ne,
                    describe(&da),
                    da.nbytes()
                ),
            ));
        }
        d.view_src = a.0 as i32;
        d.view_offset = offset;
        let mut p = [0; 16];
        p[0] = offset as i32;
        p[1] = (offset >> 32) as i32;
        self.node(op, p, &[a], Out::Laid(d))
    }

    /// View with axes permuted: source dim i goes to position `axes[i]`.
    pub fn permute(&mut self, a: TensorId, axes: [usize; 4]) -> Result<TensorId, GraphError> {
        let op = Op::Permute;
        let da = self.d(a)?;
        let p: [i32; 16] = std::array::from_fn(|i| {
            axes.get(i)
                .map_or(0, |&x| i32::try_from(x).unwrap_or(i32::MAX))
        });
        contract::result(op, &p, &[Some(&da)], Chosen::Nothing)?;
        let mut d = self.alias(a)?;
        for (i, &to) in axes.iter().enumerate() {
            d.ne[to] = da.ne[i];
            d.nb[to] = da.nb[i];
        }
        self.node(op, p, &[a], Out::Laid(d))
    }

    /// View with dims 0 and 1 swapped.
    pub fn transpose(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        let t = self.permute(a, [1, 0, 2, 3])?;
        let mut d = *self.desc(t);
        d.op = Op::Transpose.code();
        self.replace_last(d, "transpose");
        Ok(t)
    }

    fn replace_last(&mut self, d: TensorDesc, prefix: &str) {
        let t = TensorId(self.len() - 1);
        self.set_name(t, format!("{prefix}-{}", t.0));
        self.set_desc_internal(t, d);
    }

    /// Contiguous copy of `a` (same type and shape).
    pub fn cont(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.node(Op::Cont, [0; 16], &[a], Out::Fresh)
    }

    /// Copies `a` into `b` (same element count), converting to b's type. The
    /// result aliases b.
    pub fn cpy(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.node(Op::Cpy, [0; 16], &[a, b], Out::Alias(b))
    }

    /// Tiles `a` to b's shape; result has a's type.
    pub fn repeat(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.node(Op::Repeat, [0; 16], &[a, b], Out::Fresh)
    }

    /// Joins a and b along `dim`; all other dims must match.
    pub fn concat(&mut self, a: TensorId, b: TensorId, dim: usize) -> Result<TensorId, GraphError> {
        let mut p = [0; 16];
        p[0] = i32::try_from(dim).unwrap_or(i32::MAX);
        self.node(Op::Concat, p, &[a, b], Out::Fresh)
    }

    /// Zero padding: `pads[2i]` before and `pads[2i + 1]` after dim i.
    pub fn pad(&mut self, a: TensorId, pads: [i32; 8]) -> Result<TensorId, GraphError> {
        let mut p = [0; 16];
        p[..8].copy_from_slice(&pads);
        self.node(Op::Pad, p, &[a], Out::Fresh)
    }

    /// Gathers rows: a [n0, n1, n2, n3], rows i32 [r, n2, n3] -> [n0, r, n2, n3]
    /// as f32 (or i32 when a is i32).
    pub fn get_rows(&mut self, a: TensorId, rows: TensorId) -> Result<TensorId, GraphError> {
        self.node(Op::GetRows, [0; 16], &[a, rows], Out::Fresh)
    }

    /// Scatters f32 rows of `src` [n0, r, n2, n3] into `dst` [n0, m, n2, n3] at
    /// i32/i64 `rows` [r, b2, b3] (broadcast over dims 2, 3). The result aliases dst.
    pub fn set_rows(
        &mut self,
        dst: TensorId,
        src: TensorId,
        rows: TensorId,
    ) -> Result<TensorId, GraphError> {
        self.node(Op::SetRows, [0; 16], &[src, rows], Out::Alias(dst))
    }
}

impl Graph {
    pub(crate) fn set_desc_internal(&mut self, t: TensorId, d: TensorDesc) {
        self.tensors_mut()[t.0] = d;
    }
}
