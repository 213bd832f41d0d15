//! Reductions to indices, sorting, convolution and state-space ops.

use backplane_abi::{DType, Op, SortOrder};

use super::{need, need_contiguous};
use crate::error::{GraphError, describe, expect_type};
use crate::graph::{Graph, TensorId};

/// Output size of a convolution along one dim, as ggml_calc_conv_output_size.
pub fn conv_output_size(input: i64, kernel: i64, stride: i32, pad: i32, dilation: i32) -> i64 {
    (input + 2 * pad as i64 - dilation as i64 * (kernel - 1) - 1) / stride as i64 + 1
}

/// Stride, padding and dilation of a 2-D convolution (x then y).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dParams {
    /// Stride along x (dim 0).
    pub s0: i32,
    /// Stride along y (dim 1).
    pub s1: i32,
    /// Padding along x.
    pub p0: i32,
    /// Padding along y.
    pub p1: i32,
    /// Dilation along x.
    pub d0: i32,
    /// Dilation along y.
    pub d1: i32,
}

impl Conv2dParams {
    fn check(&self, op: Op) -> Result<(), GraphError> {
        need(
            self.s0 > 0
                && self.s1 > 0
                && self.d0 > 0
                && self.d1 > 0
                && self.p0 >= 0
                && self.p1 >= 0,
            op,
            || format!("strides and dilations must be positive, paddings not negative: {self:?}"),
        )
    }

    fn store(&self, p: &mut [i32]) {
        p[..6].copy_from_slice(&[self.s0, self.s1, self.p0, self.p1, self.d0, self.d1]);
    }
}

impl Graph {
    /// Index of the largest element of each row: a [n, rows] f32 -> i32 [rows].
    pub fn argmax(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        let op = Op::Argmax;
        let da = self.d(a)?;
        expect_type(op, "a", &da, &[DType::F32])?;
        need(da.ne[2] == 1 && da.ne[3] == 1, op, || {
            format!("a {} must be a matrix", describe(&da))
        })?;
        Ok(self.push_node(Graph::fresh(DType::I32, [da.ne[1], 1, 1, 1]), op, &[a]))
    }

    /// Indices that sort each row of f32 `a`.
    pub fn argsort(&mut self, a: TensorId, order: SortOrder) -> Result<TensorId, GraphError> {
        let op = Op::Argsort;
        let da = self.d(a)?;
        expect_type(op, "a", &da, &[DType::F32])?;
        need(da.ne[0] <= i32::MAX as i64, op, || {
            format!("rows of a {} are too long for i32 indices", describe(&da))
        })?;
        let mut d = Graph::fresh(DType::I32, da.ne);
        d.op_params[0] = order as i32;
        Ok(self.push_node(d, op, &[a]))
    }

    /// Indices of the `k` largest elements of each row, largest first.
    pub fn top_k(&mut self, a: TensorId, k: i64) -> Result<TensorId, GraphError> {
        let op = Op::TopK;
        let da = self.d(a)?;
        expect_type(op, "a", &da, &[DType::F32])?;
        need(k >= 1 && k <= da.ne[0], op, || {
            format!(
                "k = {k} must be in 1..={} for a {}",
                da.ne[0],
                describe(&da)
            )
        })?;
        let mut d = Graph::fresh(DType::I32, [k, da.ne[1], da.ne[2], da.ne[3]]);
        d.op_params[0] = k as i32;
        Ok(self.push_node(d, op, &[a]))
    }

    /// Direct 2-D convolution as ggml_conv_2d_direct: kernel [KW, KH, Cin,
    /// Cout], input [W, H, Cin, N] -> [OW, OH, Cout, N] in the input's type.
    pub fn conv_2d(
        &mut self,
        kernel: TensorId,
        input: TensorId,
        p: Conv2dParams,
    ) -> Result<TensorId, GraphError> {
        let op = Op::Conv2d;
        let (dk, di) = (self.d(kernel)?, self.d(input)?);
        expect_type(op, "kernel", &dk, &[DType::F32, DType::F16])?;
        let dt = expect_type(op, "input", &di, &[DType::F32])?;
        p.check(op)?;
        need(dk.ne[2] == di.ne[2], op, || {
            format!(
                "kernel {} and input {} differ in channels",
                describe(&dk),
                describe(&di)
            )
        })?;
        let ow = conv_output_size(di.ne[0], dk.ne[0], p.s0, p.p0, p.d0);
        let oh = conv_output_size(di.ne[1], dk.ne[1], p.s1, p.p1, p.d1);
        need(ow > 0 && oh > 0, op, || {
            format!(
                "kernel {} does not fit input {} with {p:?}",
                describe(&dk),
                describe(&di)
            )
        })?;
        let mut d = Graph::fresh(dt, [ow, oh, dk.ne[3], di.ne[3]]);
        p.store(&mut d.op_params);
        Ok(self.push_node(d, op, &[kernel, input]))
    }

    /// Image to columns as ggml_im2col. 2-D: kernel [KW, KH, C, *], input
    /// [W, H, C, N] -> [C*KH*KW, OW, OH, N]; 1-D: kernel [KW, C, *], input
    /// [W, C, N] -> [C*KW, OW, N].
    pub fn im2col(
        &mut self,
        kernel: TensorId,
        input: TensorId,
        p: Conv2dParams,
        is_2d: bool,
        out: DType,
    ) -> Result<TensorId, GraphError> {
        let op = Op::Im2col;
        let (dk, di) = (self.d(kernel)?, self.d(input)?);
        expect_type(op, "input", &di, &[DType::F32])?;
        need(matches!(out, DType::F32 | DType::F16), op, || {
            format!("output type {out} not supported")
        })?;
        p.check(op)?;
        let ne = if is_2d {
            need(dk.ne[2] == di.ne[2], op, || {
                format!(
                    "kernel {} and input {} differ in channels",
                    describe(&dk),
                    describe(&di)
                )
            })?;
            let ow = conv_output_size(di.ne[0], dk.ne[0], p.s0, p.p0, p.d0);
            let oh = conv_output_size(di.ne[1], dk.ne[1], p.s1, p.p1, p.d1);
            need(ow > 0 && oh > 0, op, || {
                format!(
                    "kernel {} does not fit input {}",
                    describe(&dk),
                    describe(&di)
                )
            })?;
            [dk.ne[2] * dk.ne[1] * dk.ne[0], ow, oh, di.ne[3]]
        } else {
            need(dk.ne[1] == di.ne[1], op, || {
                format!(
                    "kernel {} and input {} differ in channels",
                    describe(&dk),
                    describe(&di)
                )
            })?;
            let ow = conv_output_size(di.ne[0], dk.ne[0], p.s0, p.p0, p.d0);
            need(ow > 0, op, || {
                format!(
                    "kernel {} does not fit input {}",
                    describe(&dk),
                    describe(&di)
                )
            })?;
            [dk.ne[1] * dk.ne[0], ow, di.ne[2], 1]
        };
        let mut d = Graph::fresh(out, ne);
        p.store(&mut d.op_params);
        d.op_params[6] = is_2d as i32;
        Ok(self.push_node(d, op, &[kernel, input]))
    }

    /// Mamba causal depthwise convolution: sx [d_conv-1+n_t, d_inner, n_s],
    /// c [d_conv, d_inner] -> [d_inner, n_t, n_s].
    pub fn ssm_conv(&mut self, sx: TensorId, c: TensorId) -> Result<TensorId, GraphError> {
        let op = Op::SsmConv;
        let (dx, dc) = (self.d(sx)?, self.d(c)?);
        expect_type(op, "sx", &dx, &[DType::F32])?;
        expect_type(op, "c", &dc, &[DType::F32])?;
        need(dx.ne[3] == 1 && dc.ne[2] == 1 && dc.ne[3] == 1, op, || {
            format!(
                "sx {} must be 3-d and c {} a matrix",
                describe(&dx),
                describe(&dc)
            )
        })?;
        let n_t = dx.ne[0] - dc.ne[0] + 1;
        need(n_t >= 1 && dx.ne[1] == dc.ne[1], op, || {
            format!("sx {} and c {} do not fit", describe(&dx), describe(&dc))
        })?;
        Ok(self.push_node(
            Graph::fresh(DType::F32, [dc.ne[1], n_t, dx.ne[2], 1]),
            op,
            &[sx, c],
        ))
    }

    /// Mamba selective scan as ggml_ssm_scan: states s [d_state, head_dim,
    /// n_head, n_seqs_total], x [head_dim, n_head, n_tok, n_seqs], dt [n_head,
    /// n_tok, n_seqs], A [1 or d_state, n_head], B and C [d_state, n_group,
    /// n_tok, n_seqs], ids i32 [n_seqs] -> f32 vector: y then final states.
    #[allow(clippy::too_many_arguments)]
    pub fn ssm_scan(
        &mut self,
        s: TensorId,
        x: TensorId,
        dt: TensorId,
        a: TensorId,
        b: TensorId,
        c: TensorId,
        ids: TensorId,
    ) -> Result<TensorId, GraphError> {
        let op = Op::SsmScan;
        let [ds, dx, ddt, da, db, dc, di] = [s, x, dt, a, b, c, ids].map(|t| self.d(t));
        let (ds, dx, ddt, da, db, dc, di) = (ds?, dx?, ddt?, da?, db?, dc?, di?);
        for (name, t) in [
            ("s", &ds),
            ("x", &dx),
            ("dt", &ddt),
            ("A", &da),
            ("B", &db),
            ("C", &dc),
        ] {
            expect_type(op, name, t, &[DType::F32])?;
        }
        expect_type(op, "ids", &di, &[DType::I32])?;
        need_contiguous(op, "s", &ds)?;
        need_contiguous(op, "dt", &ddt)?;
        need_contiguous(op, "A", &da)?;
        let (d_state, head_dim, n_head, n_tok, n_seqs) =
            (ds.ne[0], dx.ne[0], dx.ne[1], dx.ne[2], dx.ne[3]);
        let fits = ddt.ne[0] == n_head
            && ddt.ne[1] == n_tok
            && ddt.ne[2] == n_seqs
            && ddt.ne[3] == 1
            && ds.ne[1] == head_dim
            && ds.ne[2] == n_head
            && db.ne == dc.ne
            && db.ne[0] == d_state
            && db.ne[2] == n_tok
            && db.ne[3] == n_seqs
            && n_head % db.ne[1] == 0
            && di.ne[0] == n_seqs
            && di.nelements() == n_seqs
            && da.ne[1] == n_head
            && da.ne[2] == 1
            && da.ne[3] == 1
            && (da.ne[0] == 1 || da.ne[0] == d_state)
            && dx.nb[1] == dx.ne[0] as u64 * 4
            && dx.nb[0] == 4
            && db.nb[0] == 4
            && db.nb[1] == db.ne[0] as u64 * 4;
        need(fits, op, || {
            format!(
                "s {}, x {}, dt {}, A {}, B {}, C {}, ids {} do not fit",
                describe(&ds),
                describe(&dx),
                describe(&ddt),
                describe(&da),
                describe(&db),
                describe(&dc),
                describe(&di)
            )
        })?;
        let n = dx.nelements() + d_state * head_dim * n_head * n_seqs;
        Ok(self.push_node(
            Graph::fresh(DType::F32, [n, 1, 1, 1]),
            op,
            &[s, x, dt, a, b, c, ids],
        ))
    }
}
