//! MUL_MAT and MUL_MAT_ID.

use backplane_abi::{DType, Op};

use super::need;
use crate::error::{GraphError, describe, expect_type};
use crate::graph::{Graph, TensorId};

impl Graph {
    /// `a^T b` as ggml_mul_mat: a [K, M, a2, a3] (any type, rows not
    /// transposed), b [K, N, b2, b3] with a2 | b2 and a3 | b3 -> f32 [M, N, b2, b3].
    pub fn mul_mat(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        let op = Op::MulMat;
        let (da, db) = (self.d(a)?, self.d(b)?);
        expect_type(op, "b", &db, &[DType::F32, DType::F16, DType::BF16])?;
        let ta = self.dtype(a);
        need(
            ta.is_float() || (ta.is_quantized() && ta != DType::Q8_K),
            op,
            || format!("a {} has no mat-mul kernel", describe(&da)),
        )?;
        need(
            da.ne[0] == db.ne[0] && db.ne[2] % da.ne[2] == 0 && db.ne[3] % da.ne[3] == 0,
            op,
            || {
                format!(
                    "a {} and b {}: need a.ne0 == b.ne0 and a.ne2|b.ne2, a.ne3|b.ne3",
                    describe(&da),
                    describe(&db)
                )
            },
        )?;
        need(!da.is_transposed(), op, || {
            format!("a {} must not be transposed", describe(&da))
        })?;
        need(da.is_contiguous_rows(), op, || {
            format!("a {} must have contiguous rows", describe(&da))
        })?;
        let d = Graph::fresh(DType::F32, [da.ne[1], db.ne[1], db.ne[2], db.ne[3]]);
        Ok(self.push_node(d, op, &[a, b]))
    }

    /// Mixture-of-experts mat-mul as ggml_mul_mat_id: experts `as_` [K, M, E],
    /// b [K, e_b, T] with e_b = 1 or n_used, ids i32 [n_used, T] -> f32 [M, n_used, T].
    pub fn mul_mat_id(
        &mut self,
        as_: TensorId,
        b: TensorId,
        ids: TensorId,
    ) -> Result<TensorId, GraphError> {
        let op = Op::MulMatId;
        let (da, db, di) = (self.d(as_)?, self.d(b)?, self.d(ids)?);
        expect_type(op, "ids", &di, &[DType::I32])?;
        expect_type(op, "b", &db, &[DType::F32])?;
        let ta = self.dtype(as_);
        need(
            ta.is_float() || (ta.is_quantized() && ta != DType::Q8_K),
            op,
            || format!("experts {} have no mat-mul kernel", describe(&da)),
        )?;
        need(
            da.ne[3] == 1 && db.ne[3] == 1 && di.ne[2] == 1 && di.ne[3] == 1,
            op,
            || {
                format!(
                    "experts {}, b {}, ids {}: experts and b are 3-d, ids 2-d",
                    describe(&da),
                    describe(&db),
                    describe(&di)
                )
            },
        )?;
        need(
            di.ne[1] == db.ne[2] && da.ne[0] == db.ne[0] && di.ne[0] % db.ne[1] == 0,
            op,
            || {
                format!(
                    "experts {}, b {}, ids {} do not fit",
                    describe(&da),
                    describe(&db),
                    describe(&di)
                )
            },
        )?;
        need(!da.is_transposed(), op, || {
            format!("experts {} must not be transposed", describe(&da))
        })?;
        let d = Graph::fresh(DType::F32, [da.ne[1], di.ne[0], db.ne[2], 1]);
        Ok(self.push_node(d, op, &[as_, b, ids]))
    }
}
