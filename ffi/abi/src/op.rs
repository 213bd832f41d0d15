//! The op set. Semantics, shapes and op parameters follow ggml exactly; the
//! numeric codes are backplane's own and are append-only.

use std::fmt;

macro_rules! code_enum {
    ($(#[$meta:meta])* $name:ident, $unknown:ident, $what:literal { $($(#[$vmeta:meta])* $var:ident = $code:literal => $text:literal,)* }) => {
        $(#[$meta])*
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(non_camel_case_types)]
        pub enum $name {
            $($(#[$vmeta])* $var = $code,)*
        }

        #[doc = concat!("Error for a raw ", $what, " code this build does not know.")]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $unknown(pub u32);

        impl fmt::Display for $unknown {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!("unknown ", $what, " code {}"), self.0)
            }
        }

        impl std::error::Error for $unknown {}

        impl $name {
            /// Every value, in code order.
            pub const ALL: &'static [$name] = &[$($name::$var,)*];

            /// Decodes a raw code.
            pub fn from_code(code: u32) -> Result<$name, $unknown> {
                match code {
                    $($code => Ok($name::$var),)*
                    _ => Err($unknown(code)),
                }
            }

            /// The raw code.
            pub const fn code(self) -> u32 {
                self as u32
            }

            /// ggml's upper-case name.
            pub const fn name(self) -> &'static str {
                match self {
                    $($name::$var => $text,)*
                }
            }

            /// Parses a name as printed by `name` (case-insensitive).
            pub fn from_name(name: &str) -> Option<$name> {
                Self::ALL.iter().copied().find(|v| v.name().eq_ignore_ascii_case(name))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

code_enum! {
    /// A graph operation. Leaves (inputs, weights) have [`Op::None`].
    Op, UnknownOp, "op" {
        /// A leaf: no computation.
        None = 0 => "NONE",
        /// `a + b`, b broadcast over a (ne of b divides ne of a per dim).
        Add = 1 => "ADD",
        /// `a - b` with broadcast.
        Sub = 2 => "SUB",
        /// `a * b` with broadcast.
        Mul = 3 => "MUL",
        /// `a / b` with broadcast.
        Div = 4 => "DIV",
        /// `a * a`.
        Sqr = 5 => "SQR",
        /// `sqrt(a)`.
        Sqrt = 6 => "SQRT",
        /// `ln(a)`.
        Log = 7 => "LOG",
        /// `sin(a)`.
        Sin = 8 => "SIN",
        /// `cos(a)`.
        Cos = 9 => "COS",
        /// Sum of all elements into a 1-element tensor.
        Sum = 10 => "SUM",
        /// Sum along dim 0 (ne0 becomes 1).
        SumRows = 11 => "SUM_ROWS",
        /// Inclusive prefix sum along dim 0.
        Cumsum = 12 => "CUMSUM",
        /// Index of the largest element of each row (i32, ne = [ne1]).
        Argmax = 13 => "ARGMAX",
        /// Tile a to the shape of b.
        Repeat = 14 => "REPEAT",
        /// Join a and b along dim `op_params[0]`.
        Concat = 15 => "CONCAT",
        /// Normalise each row to zero mean, unit variance (eps in params[0]).
        Norm = 16 => "NORM",
        /// Divide each row by its root mean square (eps in params[0]).
        RmsNorm = 17 => "RMS_NORM",
        /// Divide each row by max(l2 norm, eps) (eps in params[0]).
        L2Norm = 18 => "L2_NORM",
        /// `a^T b`: a [K, M, ...], b [K, N, ...] -> f32 [M, N, ...].
        MulMat = 19 => "MUL_MAT",
        /// Expert-routed mat-mul: as [K, M, E], b [K, e, T], ids i32 [u, T].
        MulMatId = 20 => "MUL_MAT_ID",
        /// `a * s + b` (s, b as f32 in params[0], params[1]).
        Scale = 21 => "SCALE",
        /// Write rows of src0 into a view of the destination at src1's indices.
        SetRows = 22 => "SET_ROWS",
        /// Copy src0 into src1 (same element count), converting type.
        Cpy = 23 => "CPY",
        /// Contiguous copy of src0.
        Cont = 24 => "CONT",
        /// View with new shape over contiguous data.
        Reshape = 25 => "RESHAPE",
        /// View with explicit shape, strides and byte offset.
        View = 26 => "VIEW",
        /// View with permuted axes.
        Permute = 27 => "PERMUTE",
        /// View with dims 0 and 1 swapped.
        Transpose = 28 => "TRANSPOSE",
        /// Gather rows of src0 by i32 indices in src1, as f32 (or i32).
        GetRows = 29 => "GET_ROWS",
        /// Softmax over dim 0 with scale, optional mask, ALiBi slope and sinks.
        SoftMax = 30 => "SOFT_MAX",
        /// Rotary position embedding.
        Rope = 31 => "ROPE",
        /// Clamp to [params[0], params[1]].
        Clamp = 32 => "CLAMP",
        /// Direct 2-D convolution.
        Conv2d = 33 => "CONV_2D",
        /// Image to columns for convolution as matmul.
        Im2col = 34 => "IM2COL",
        /// Zero padding before and after each dim.
        Pad = 35 => "PAD",
        /// Indices that sort each row (ascending or descending).
        Argsort = 36 => "ARGSORT",
        /// Indices of the k largest elements of each row.
        TopK = 37 => "TOP_K",
        /// Fused attention: softmax(scale * Q K^T + mask) V.
        FlashAttnExt = 38 => "FLASH_ATTN_EXT",
        /// Mamba depthwise causal convolution.
        SsmConv = 39 => "SSM_CONV",
        /// Mamba selective scan.
        SsmScan = 40 => "SSM_SCAN",
        /// Element-wise unary function selected by params[0] ([`UnaryOp`]).
        Unary = 41 => "UNARY",
        /// Gated linear unit selected by params[0] ([`GluOp`]).
        Glu = 42 => "GLU",
        /// Fill with the value params[0].
        Fill = 43 => "FILL",
    }
}

code_enum! {
    /// The function of an [`Op::Unary`] node (op_params[0]).
    UnaryOp, UnknownUnaryOp, "unary op" {
        /// `|x|`.
        Abs = 0 => "ABS",
        /// Sign: -1, 0 or 1.
        Sgn = 1 => "SGN",
        /// `-x`.
        Neg = 2 => "NEG",
        /// 1 if x > 0 else 0.
        Step = 3 => "STEP",
        /// `tanh(x)`.
        Tanh = 4 => "TANH",
        /// x if x > 0 else exp(x) - 1.
        Elu = 5 => "ELU",
        /// `max(x, 0)`.
        Relu = 6 => "RELU",
        /// `1 / (1 + exp(-x))`.
        Sigmoid = 7 => "SIGMOID",
        /// GELU, tanh approximation.
        Gelu = 8 => "GELU",
        /// `x * sigmoid(1.702 x)`.
        GeluQuick = 9 => "GELU_QUICK",
        /// `x * sigmoid(x)`.
        Silu = 10 => "SILU",
        /// `x * min(1, max(0, (x + 3) / 6))`.
        Hardswish = 11 => "HARDSWISH",
        /// `min(1, max(0, (x + 3) / 6))`.
        Hardsigmoid = 12 => "HARDSIGMOID",
        /// `exp(x)`.
        Exp = 13 => "EXP",
        /// `exp(x) - 1`.
        Expm1 = 14 => "EXPM1",
        /// `ln(1 + exp(x))`, x for x > 20.
        Softplus = 15 => "SOFTPLUS",
        /// GELU, exact with erf.
        GeluErf = 16 => "GELU_ERF",
        /// xIELU; alpha_n, alpha_p, beta, eps as f32 in params[1..5].
        Xielu = 17 => "XIELU",
        /// Round toward minus infinity.
        Floor = 18 => "FLOOR",
        /// Round toward plus infinity.
        Ceil = 19 => "CEIL",
        /// Round half away from zero.
        Round = 20 => "ROUND",
        /// Round toward zero.
        Trunc = 21 => "TRUNC",
    }
}

code_enum! {
    /// The variant of an [`Op::Glu`] node (op_params[0]; params[1] = swapped).
    GluOp, UnknownGluOp, "glu op" {
        /// `relu(a) * b`.
        Reglu = 0 => "REGLU",
        /// `gelu(a) * b` (tanh approximation).
        Geglu = 1 => "GEGLU",
        /// `silu(a) * b`.
        Swiglu = 2 => "SWIGLU",
        /// SwiGLU as in gpt-oss, alpha and limit in params[2], params[3].
        SwigluOai = 3 => "SWIGLU_OAI",
        /// `gelu_erf(a) * b`.
        GegluErf = 4 => "GEGLU_ERF",
        /// `gelu_quick(a) * b`.
        GegluQuick = 5 => "GEGLU_QUICK",
    }
}

impl Op {
    /// True for ops whose result aliases the memory of another tensor
    /// (VIEW, RESHAPE, PERMUTE, TRANSPOSE): no kernel runs for them.
    pub const fn is_view(self) -> bool {
        matches!(self, Op::View | Op::Reshape | Op::Permute | Op::Transpose)
    }
}

/// Sort order for [`Op::Argsort`] (op_params[0]).
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SortOrder {
    /// Smallest first.
    Asc = 0,
    /// Largest first.
    Desc = 1,
}

/// ROPE mode bits (op_params[2]), as ggml's `GGML_ROPE_TYPE_*`.
pub mod rope_mode {
    /// Rotate adjacent pairs (x0, x1), (x2, x3), ...
    pub const NORMAL: i32 = 0;
    /// Rotate (x_i, x_{i + n_dims/2}) as GPT-NeoX does.
    pub const NEOX: i32 = 2;
    /// Multi-section rope (Qwen2-VL); sections in op_params[11..15].
    pub const MROPE: i32 = 8;
    /// Vision rope.
    pub const VISION: i32 = 24;
    /// Interleaved multi-section rope.
    pub const IMROPE: i32 = 40;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_round_trip() {
        for &op in Op::ALL {
            assert_eq!(Op::from_code(op.code()), Ok(op));
            assert_eq!(Op::from_name(op.name()), Some(op));
        }
        for &u in UnaryOp::ALL {
            assert_eq!(UnaryOp::from_code(u.code()), Ok(u));
        }
        for &g in GluOp::ALL {
            assert_eq!(GluOp::from_name(g.name()), Some(g));
        }
        assert!(Op::from_code(9999).is_err());
    }
}
