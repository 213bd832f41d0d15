//! Normalisation, softmax, rope and attention.

use backplane_abi::{DType, Op, rope_mode};

use super::{need, need_contiguous, need_rows};
use crate::error::{GraphError, describe, expect_type};
use crate::graph::{Graph, TensorId};

/// Parameters of [`Graph::rope`], as ggml_rope_ext takes them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeParams {
    /// Leading dims of each row that rotate (the rest pass through).
    pub n_dims: i32,
    /// [`rope_mode`] value.
    pub mode: i32,
    /// Training context length (YaRN).
    pub n_ctx_orig: i32,
    /// Base of the frequencies (10000 in Llama).
    pub freq_base: f32,
    /// Position scale (1 / linear rope scaling factor).
    pub freq_scale: f32,
    /// YaRN extrapolation mix (0 = off).
    pub ext_factor: f32,
    /// Magnitude scale.
    pub attn_factor: f32,
    /// YaRN low correction dim.
    pub beta_fast: f32,
    /// YaRN high correction dim.
    pub beta_slow: f32,
    /// Dims per section for the multi-section modes.
    pub sections: [i32; 4],
}

impl RopeParams {
    /// Plain rope over `n_dims` with base 10000 and no scaling.
    pub fn new(n_dims: i32, mode: i32) -> RopeParams {
        RopeParams {
            n_dims,
            mode,
            n_ctx_orig: 0,
            freq_base: 10000.0,
            freq_scale: 1.0,
            ext_factor: 0.0,
            attn_factor: 1.0,
            beta_fast: 32.0,
            beta_slow: 1.0,
            sections: [0; 4],
        }
    }
}

impl Graph {
    fn norm_like(&mut self, op: Op, a: TensorId, eps: f32) -> Result<TensorId, GraphError> {
        let da = self.d(a)?;
        expect_type(op, "a", &da, &[DType::F32])?;
        need_rows(op, "a", &da)?;
        need(eps >= 0.0, op, || format!("eps {eps} must not be negative"))?;
        let mut d = Graph::fresh(DType::F32, da.ne);
        d.set_param_f32(0, eps);
        Ok(self.push_node(d, op, &[a]))
    }

    /// Each row to zero mean and unit variance.
    pub fn norm(&mut self, a: TensorId, eps: f32) -> Result<TensorId, GraphError> {
        self.norm_like(Op::Norm, a, eps)
    }
    /// Each row divided by `sqrt(mean(x^2) + eps)`.
    pub fn rms_norm(&mut self, a: TensorId, eps: f32) -> Result<TensorId, GraphError> {
        self.norm_like(Op::RmsNorm, a, eps)
    }
    /// Each row divided by `max(||x||, eps)`.
    pub fn l2_norm(&mut self, a: TensorId, eps: f32) -> Result<TensorId, GraphError> {
        self.norm_like(Op::L2Norm, a, eps)
    }

    /// `softmax(a * scale + slope * mask)` over dim 0 as ggml_soft_max_ext,
    /// with optional per-head `sinks` (f32 [a.ne2]) as ggml_soft_max_add_sinks.
    pub fn soft_max(
        &mut self,
        a: TensorId,
        mask: Option<TensorId>,
        sinks: Option<TensorId>,
        scale: f32,
        max_bias: f32,
    ) -> Result<TensorId, GraphError> {
        let op = Op::SoftMax;
        let da = self.d(a)?;
        expect_type(op, "a", &da, &[DType::F32])?;
        need_contiguous(op, "a", &da)?;
        let mut srcs = vec![a];
        if let Some(m) = mask {
            let dm = self.d(m)?;
            expect_type(op, "mask", &dm, &[DType::F32, DType::F16])?;
            need_rows(op, "mask", &dm)?;
            need(
                dm.ne[0] == da.ne[0]
                    && dm.ne[1] >= da.ne[1]
                    && da.ne[2] % dm.ne[2] == 0
                    && da.ne[3] % dm.ne[3] == 0,
                op,
                || format!("mask {} does not cover a {}", describe(&dm), describe(&da)),
            )?;
        }
        need(max_bias == 0.0 || mask.is_some(), op, || {
            "max_bias > 0 needs a mask".into()
        })?;
        srcs.push(mask.unwrap_or(crate::graph::ABSENT));
        if let Some(s) = sinks {
            let ds = self.d(s)?;
            expect_type(op, "sinks", &ds, &[DType::F32])?;
            need(ds.nelements() == da.ne[2], op, || {
                format!(
                    "sinks {} need one value per head ({})",
                    describe(&ds),
                    da.ne[2]
                )
            })?;
            srcs.push(s);
        }
        let mut d = Graph::fresh(DType::F32, da.ne);
        d.set_param_f32(0, scale);
        d.set_param_f32(1, max_bias);
        let t = self.push_node_optional(d, op, &srcs);
        Ok(t)
    }

    /// Rotary embedding as ggml_rope_ext: a [d, heads, tokens, b] f32/f16,
    /// pos i32 [tokens] (4x for multi-section modes), optional f32 freq factors.
    pub fn rope(
        &mut self,
        a: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        p: RopeParams,
    ) -> Result<TensorId, GraphError> {
        let op = Op::Rope;
        let (da, dp) = (self.d(a)?, self.d(pos)?);
        let dt = expect_type(op, "a", &da, &[DType::F32, DType::F16])?;
        expect_type(op, "pos", &dp, &[DType::I32])?;
        let multi = p.mode & rope_mode::MROPE != 0;
        let per = if multi { 4 } else { 1 };
        need(
            dp.ne[0] == da.ne[2] * per && dp.nelements() == dp.ne[0],
            op,
            || {
                format!(
                    "pos {} must be a vector of {} positions for a {}",
                    describe(&dp),
                    da.ne[2] * per,
                    describe(&da)
                )
            },
        )?;
        need(
            p.n_dims > 0 && p.n_dims % 2 == 0 && p.n_dims as i64 <= da.ne[0],
            op,
            || {
                format!(
                    "n_dims {} must be even and within ne0 {}",
                    p.n_dims, da.ne[0]
                )
            },
        )?;
        need(
            matches!(
                p.mode,
                rope_mode::NORMAL
                    | rope_mode::NEOX
                    | rope_mode::MROPE
                    | rope_mode::VISION
                    | rope_mode::IMROPE
            ),
            op,
            || format!("unknown rope mode {}", p.mode),
        )?;
        need_rows(op, "a", &da)?;
        let mut srcs = vec![a, pos];
        if let Some(f) = freq_factors {
            let df = self.d(f)?;
            expect_type(op, "freq_factors", &df, &[DType::F32])?;
            need(df.ne[0] >= p.n_dims as i64 / 2, op, || {
                format!(
                    "freq_factors {} need n_dims/2 = {} values",
                    describe(&df),
                    p.n_dims / 2
                )
            })?;
            srcs.push(f);
        }
        let mut d = Graph::fresh(dt, da.ne);
        d.op_params[1] = p.n_dims;
        d.op_params[2] = p.mode;
        d.op_params[4] = p.n_ctx_orig;
        for (i, v) in [
            p.freq_base,
            p.freq_scale,
            p.ext_factor,
            p.attn_factor,
            p.beta_fast,
            p.beta_slow,
        ]
        .into_iter()
        .enumerate()
        {
            d.set_param_f32(5 + i, v);
        }
        d.op_params[11..15].copy_from_slice(&p.sections);
        Ok(self.push_node(d, op, &srcs))
    }

    /// Fused attention as ggml_flash_attn_ext: q [D, n_q, H, B] f32,
    /// k [D, n_kv, H_kv, B_kv], v [Dv, n_kv, H_kv, B_kv] (f32/f16/q4_0/q8_0),
    /// optional f16 mask [n_kv, >= n_q, *, *] and f32 sinks [H]
    /// -> f32 [Dv, H, n_q, B].
    #[allow(clippy::too_many_arguments)]
    pub fn flash_attn_ext(
        &mut self,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        mask: Option<TensorId>,
        sinks: Option<TensorId>,
        scale: f32,
        max_bias: f32,
        logit_softcap: f32,
    ) -> Result<TensorId, GraphError> {
        let op = Op::FlashAttnExt;
        let (dq, dk, dv) = (self.d(q)?, self.d(k)?, self.d(v)?);
        expect_type(op, "q", &dq, &[DType::F32])?;
        let kv_types = DType::ATTENTION_KV_TYPES;
        expect_type(op, "k", &dk, &kv_types)?;
        expect_type(op, "v", &dv, &kv_types)?;
        need(
            dk.ne[0] == dq.ne[0]
                && dv.ne[1] == dk.ne[1]
                && dv.ne[2] == dk.ne[2]
                && dv.ne[3] == dk.ne[3]
                && dq.ne[2] % dk.ne[2] == 0
                && dq.ne[3] % dk.ne[3] == 0,
            op,
            || {
                format!(
                    "q {}, k {}, v {} do not fit",
                    describe(&dq),
                    describe(&dk),
                    describe(&dv)
                )
            },
        )?;
        need(!dk.is_transposed() && !dv.is_transposed(), op, || {
            "k and v must not be transposed".into()
        })?;
        let mut srcs = vec![q, k, v];
        match mask {
            Some(m) => {
                let dm = self.d(m)?;
                expect_type(op, "mask", &dm, &[DType::F16])?;
                need(
                    dm.ne[0] == dk.ne[1]
                        && dm.ne[1] >= dq.ne[1]
                        && dq.ne[2] % dm.ne[2] == 0
                        && dq.ne[3] % dm.ne[3] == 0,
                    op,
                    || {
                        format!(
                            "mask {} does not cover q {} x k {}",
                            describe(&dm),
                            describe(&dq),
                            describe(&dk)
                        )
                    },
                )?;
                need_rows(op, "mask", &dm)?;
                srcs.push(m);
            }
            None => {
                need(max_bias == 0.0, op, || "max_bias > 0 needs a mask".into())?;
                srcs.push(crate::graph::ABSENT);
            }
        }
        if let Some(s) = sinks {
            let ds = self.d(s)?;
            expect_type(op, "sinks", &ds, &[DType::F32])?;
            need(ds.nelements() == dq.ne[2], op, || {
                format!(
                    "sinks {} need one value per head ({})",
                    describe(&ds),
                    dq.ne[2]
                )
            })?;
            srcs.push(s);
        }
        let mut d = Graph::fresh(DType::F32, [dv.ne[0], dq.ne[2], dq.ne[1], dq.ne[3]]);
        d.set_param_f32(0, scale);
        d.set_param_f32(1, max_bias);
        d.set_param_f32(2, logit_softcap);
        Ok(self.push_node_optional(d, op, &srcs))
    }
}
