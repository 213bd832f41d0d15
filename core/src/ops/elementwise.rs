//! Binary, unary, GLU and other element-wise ops.

use backplane_abi::{DType, GluOp, Op, UnaryOp};

use super::{FLOATS, can_repeat, need, need_rows};
use crate::error::{GraphError, describe, expect_type};
use crate::graph::{Graph, TensorId};

impl Graph {
    fn binary(
        &mut self,
        op: Op,
        a: TensorId,
        b: TensorId,
        inplace: bool,
    ) -> Result<TensorId, GraphError> {
        let (da, db) = (self.d(a)?, self.d(b)?);
        expect_type(op, "a", &da, FLOATS)?;
        expect_type(op, "b", &db, FLOATS)?;
        need(can_repeat(&db, &da), op, || {
            format!(
                "b {} does not broadcast to a {}",
                describe(&db),
                describe(&da)
            )
        })?;
        need_rows(op, "b", &db)?;
        let d = if inplace {
            self.alias(a)?
        } else {
            Graph::fresh(self.dtype(a), da.ne)
        };
        Ok(self.push_node(d, op, &[a, b]))
    }

    /// `a + b`, b broadcast over a; result has a's type and shape.
    pub fn add(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Add, a, b, false)
    }
    /// `a += b` in place: the result aliases a.
    pub fn add_inplace(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Add, a, b, true)
    }
    /// `a - b` with broadcast.
    pub fn sub(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Sub, a, b, false)
    }
    /// `a -= b` in place.
    pub fn sub_inplace(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Sub, a, b, true)
    }
    /// `a * b` with broadcast.
    pub fn mul(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Mul, a, b, false)
    }
    /// `a *= b` in place.
    pub fn mul_inplace(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Mul, a, b, true)
    }
    /// `a / b` with broadcast.
    pub fn div(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Div, a, b, false)
    }
    /// `a /= b` in place.
    pub fn div_inplace(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Div, a, b, true)
    }

    fn simple_unary(
        &mut self,
        op: Op,
        a: TensorId,
        params: &[(usize, i32)],
        inplace: bool,
    ) -> Result<TensorId, GraphError> {
        let da = self.d(a)?;
        expect_type(op, "a", &da, FLOATS)?;
        need_rows(op, "a", &da)?;
        let mut d = if inplace {
            self.alias(a)?
        } else {
            Graph::fresh(self.dtype(a), da.ne)
        };
        for &(i, v) in params {
            d.op_params[i] = v;
        }
        Ok(self.push_node(d, op, &[a]))
    }

    /// `a * a`.
    pub fn sqr(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.simple_unary(Op::Sqr, a, &[], false)
    }
    /// `sqrt(a)`.
    pub fn sqrt(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.simple_unary(Op::Sqrt, a, &[], false)
    }
    /// `ln(a)`.
    pub fn log(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.simple_unary(Op::Log, a, &[], false)
    }
    /// `sin(a)`.
    pub fn sin(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.simple_unary(Op::Sin, a, &[], false)
    }
    /// `cos(a)`.
    pub fn cos(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.simple_unary(Op::Cos, a, &[], false)
    }

    /// `a * s + b` element-wise.
    pub fn scale_bias(
        &mut self,
        a: TensorId,
        s: f32,
        b: f32,
        inplace: bool,
    ) -> Result<TensorId, GraphError> {
        self.simple_unary(
            Op::Scale,
            a,
            &[(0, s.to_bits() as i32), (1, b.to_bits() as i32)],
            inplace,
        )
    }
    /// `a * s`.
    pub fn scale(&mut self, a: TensorId, s: f32) -> Result<TensorId, GraphError> {
        self.scale_bias(a, s, 0.0, false)
    }
    /// Clamp every element to `[min, max]`.
    pub fn clamp(&mut self, a: TensorId, min: f32, max: f32) -> Result<TensorId, GraphError> {
        self.simple_unary(
            Op::Clamp,
            a,
            &[(0, min.to_bits() as i32), (1, max.to_bits() as i32)],
            false,
        )
    }
    /// A tensor of a's shape and type filled with `value`.
    pub fn fill(&mut self, a: TensorId, value: f32) -> Result<TensorId, GraphError> {
        self.simple_unary(Op::Fill, a, &[(0, value.to_bits() as i32)], false)
    }

    /// Element-wise unary function.
    pub fn unary(&mut self, a: TensorId, f: UnaryOp) -> Result<TensorId, GraphError> {
        self.unary_impl(a, f, [0.0; 4], false)
    }
    /// Element-wise unary function in place.
    pub fn unary_inplace(&mut self, a: TensorId, f: UnaryOp) -> Result<TensorId, GraphError> {
        self.unary_impl(a, f, [0.0; 4], true)
    }
    /// xIELU activation with its four parameters. As ggml_xielu, the node
    /// stores `beta + softplus(alpha_n)`, `softplus(alpha_p)`, `beta`, `eps`.
    pub fn xielu(
        &mut self,
        a: TensorId,
        alpha_n: f32,
        alpha_p: f32,
        beta: f32,
        eps: f32,
    ) -> Result<TensorId, GraphError> {
        // ggml_compute_softplus_f32
        let softplus = |x: f32| if x > 20.0 { x } else { x.exp().ln_1p() };
        self.unary_impl(
            a,
            UnaryOp::Xielu,
            [beta + softplus(alpha_n), softplus(alpha_p), beta, eps],
            false,
        )
    }

    fn unary_impl(
        &mut self,
        a: TensorId,
        f: UnaryOp,
        extra: [f32; 4],
        inplace: bool,
    ) -> Result<TensorId, GraphError> {
        let mut params = vec![(0, f.code() as i32)];
        params.extend(
            extra
                .iter()
                .enumerate()
                .map(|(i, v)| (i + 1, v.to_bits() as i32)),
        );
        self.simple_unary(Op::Unary, a, &params, inplace)
    }

    /// Gated linear unit on one tensor: its rows split in halves, the gate
    /// half first unless `swapped`.
    pub fn glu_split(
        &mut self,
        a: TensorId,
        f: GluOp,
        swapped: bool,
    ) -> Result<TensorId, GraphError> {
        self.glu_impl(a, None, f, swapped, 0.0, 0.0)
    }
    /// Gated linear unit over two tensors of one shape: `f(a) * b`.
    pub fn glu(&mut self, a: TensorId, b: TensorId, f: GluOp) -> Result<TensorId, GraphError> {
        self.glu_impl(a, Some(b), f, false, 0.0, 0.0)
    }
    /// gpt-oss SwiGLU: `x = min(a, limit)`, `y = clamp(b, -limit, limit)`,
    /// `out = x * sigmoid(alpha * x) * (y + 1)`.
    pub fn swiglu_oai(
        &mut self,
        a: TensorId,
        b: Option<TensorId>,
        alpha: f32,
        limit: f32,
    ) -> Result<TensorId, GraphError> {
        self.glu_impl(a, b, GluOp::SwigluOai, false, alpha, limit)
    }

    fn glu_impl(
        &mut self,
        a: TensorId,
        b: Option<TensorId>,
        f: GluOp,
        swapped: bool,
        alpha: f32,
        limit: f32,
    ) -> Result<TensorId, GraphError> {
        let op = Op::Glu;
        let da = self.d(a)?;
        let dt = expect_type(op, "a", &da, FLOATS)?;
        need_rows(op, "a", &da)?;
        let mut ne = da.ne;
        let mut srcs = vec![a];
        if let Some(b) = b {
            let db = self.d(b)?;
            need(db.ne == da.ne && db.dtype == da.dtype, op, || {
                format!(
                    "a {} and b {} must have one shape and type",
                    describe(&da),
                    describe(&db)
                )
            })?;
            need_rows(op, "b", &db)?;
            srcs.push(b);
        } else {
            need(da.ne[0] % 2 == 0, op, || {
                format!("a {} must have an even ne0 to split", describe(&da))
            })?;
            ne[0] /= 2;
        }
        let mut d = Graph::fresh(dt, ne);
        d.op_params[0] = f.code() as i32;
        d.op_params[1] = swapped as i32;
        d.set_param_f32(2, alpha);
        d.set_param_f32(3, limit);
        Ok(self.push_node(d, op, &srcs))
    }

    /// Sum of all elements: a 1-element tensor.
    pub fn sum(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        let da = self.d(a)?;
        let dt = expect_type(Op::Sum, "a", &da, FLOATS)?;
        Ok(self.push_node(Graph::fresh(dt, [1, 1, 1, 1]), Op::Sum, &[a]))
    }
    /// Sum along dim 0.
    pub fn sum_rows(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        let da = self.d(a)?;
        let dt = expect_type(Op::SumRows, "a", &da, FLOATS)?;
        let ne = [1, da.ne[1], da.ne[2], da.ne[3]];
        Ok(self.push_node(Graph::fresh(dt, ne), Op::SumRows, &[a]))
    }
    /// Inclusive prefix sum along dim 0 (f32).
    pub fn cumsum(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        let da = self.d(a)?;
        expect_type(Op::Cumsum, "a", &da, &[DType::F32])?;
        need_rows(Op::Cumsum, "a", &da)?;
        Ok(self.push_node(Graph::fresh(DType::F32, da.ne), Op::Cumsum, &[a]))
    }
}
