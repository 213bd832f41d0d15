//! The stable plugin ABI of backplane.
//!
//! This is the only crate a backend author depends on. It defines the element
//! types ([`DType`]), the op set ([`Op`]) and the `#[repr(C)]` tensor
//! descriptor ([`TensorDesc`]) that graphs cross the plugin boundary as, the
//! op contract ([`contract`]: each op's type, shape and parameter rules), and
//! the plugin interface itself ([`plugin`]: the backend contract, the
//! `abi_stable` objects that carry it, and [`export_plugin!`]).

pub mod contract;
pub mod dtype;
pub mod op;
pub mod plugin;
pub mod support;
pub mod tensor;

#[doc(hidden)]
pub use abi_stable;

pub use contract::Refusal;
pub use dtype::{DType, UnknownDType};
pub use op::{GluOp, Op, SortOrder, UnaryOp, UnknownGluOp, UnknownOp, UnknownUnaryOp, rope_mode};
pub use tensor::{
    MAX_DIMS, MAX_OP_PARAMS, MAX_SRC, NO_TENSOR, TensorDesc, contiguous_strides, flags,
};
