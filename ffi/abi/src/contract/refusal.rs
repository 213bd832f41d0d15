//! The one wording of every refusal: which op, which operand, what was
//! expected and what was found.

use std::fmt;

use crate::{DType, Op, TensorDesc};

/// Why an op refuses its operands: `"SSM_CONV: c: expected type f32, found
/// f16"`. Every rule of the contract answers with one; backends word their
/// own refusals (types they implement, layouts, device limits) the same way
/// through [`wording`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The op refusing.
    pub op: Op,
    /// The operand at fault, by the op's own name for it (`q`, `mask`,
    /// `c`, `result`, `op_params[6]`).
    pub operand: String,
    /// What the rule asks of it.
    pub expected: String,
    /// What it is.
    pub found: String,
}

impl Refusal {
    /// A refusal of `op`'s `operand`.
    pub fn new(
        op: Op,
        operand: impl Into<String>,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> Refusal {
        Refusal {
            op,
            operand: operand.into(),
            expected: expected.into(),
            found: found.into(),
        }
    }

    /// The refusal without the op's name (`"c: expected type f32, found
    /// f16"`), for messages that name the op already.
    pub fn detail(&self) -> String {
        wording(&self.operand, &self.expected, &self.found)
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.detail())
    }
}

impl std::error::Error for Refusal {}

/// The shared wording: `"{operand}: expected {expected}, found {found}"`.
pub fn wording(operand: &str, expected: &str, found: &str) -> String {
    format!("{operand}: expected {expected}, found {found}")
}

/// `"type f32"` or `"type f32, f16 or bf16"`.
pub fn type_list(allowed: &[DType]) -> String {
    let names: Vec<&str> = allowed.iter().map(|t| t.name()).collect();
    match names.split_last() {
        None => "no type".to_string(),
        Some((last, [])) => format!("type {last}"),
        Some((last, rest)) => format!("type {} or {last}", rest.join(", ")),
    }
}

/// Shape and type of a tensor: `[4096, 32, 1, 1] f32`.
pub fn describe(t: &TensorDesc) -> String {
    let dtype = t
        .dtype()
        .map(|d| d.name().to_string())
        .unwrap_or_else(|e| e.to_string());
    format!(
        "[{}, {}, {}, {}] {}",
        t.ne[0], t.ne[1], t.ne[2], t.ne[3], dtype
    )
}
