//! The backend-options extension: a plugin's option schema
//! ([`OptionSpec`]s; their parsing and precedence are in
//! [`support::options`](crate::support::options)) across the ABI, so the
//! host can list what `init_backend` params a backend takes. Like every [`ext`](super::ext) extension it is a symbol
//! of its own, [`OPTIONS_SYMBOL`], returning an [`ExtEntry`] whose layout
//! the host checks; a plugin without the symbol (built before it) has no
//! options to list.

use std::panic::{AssertUnwindSafe, catch_unwind};

use abi_stable::StableAbi;
use abi_stable::std_types::{RString, RVec};

use crate::plugin::ext::ExtEntry;

/// The type of an option's value, and what values are allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionKind {
    /// `1/0`, `true/false`, `on/off`.
    Bool,
    /// A decimal integer from `min` to `max` inclusive.
    Integer {
        /// Smallest allowed value.
        min: i64,
        /// Largest allowed value.
        max: i64,
    },
    /// One of these words.
    Word(&'static [&'static str]),
    /// Free text (a path, a list the backend parses itself).
    Text,
}

impl OptionKind {
    /// The kind's name as listings show it (`bool`, `integer 1..=16`,
    /// `one of: a, b`, `text`).
    pub fn describe(&self) -> String {
        match self {
            OptionKind::Bool => "bool".into(),
            OptionKind::Integer { min, max } => format!("integer {min}..={max}"),
            OptionKind::Word(words) => format!("one of: {}", words.join(", ")),
            OptionKind::Text => "text".into(),
        }
    }
}

/// One option a backend declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionSpec {
    /// Key in the params string: lower-case ASCII letters, digits and `_`.
    pub name: &'static str,
    /// Type and allowed values.
    pub kind: OptionKind,
    /// The value when nothing sets it, in the params form (`""` for an
    /// unset text or word option: "the backend decides").
    pub default: &'static str,
    /// What it does, one line.
    pub meaning: &'static str,
    /// The environment variable that sets it when the host does not (`""`
    /// when none does).
    pub env: &'static str,
}

/// Name of the symbol `extern "C" fn() -> ExtEntry<BackendOptionsV1>`.
pub const OPTIONS_SYMBOL: &str = "backplane_plugin_options_v1";

/// [`OptionKind`] codes across the ABI.
pub mod kind_code {
    /// [`OptionKind::Bool`](super::OptionKind::Bool).
    pub const BOOL: u32 = 0;
    /// [`OptionKind::Integer`](super::OptionKind::Integer).
    pub const INTEGER: u32 = 1;
    /// [`OptionKind::Word`](super::OptionKind::Word).
    pub const WORD: u32 = 2;
    /// [`OptionKind::Text`](super::OptionKind::Text).
    pub const TEXT: u32 = 3;
}

/// One option of a plugin's schema, as it crosses the ABI.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct FfiOptionSpec {
    /// Key in the params string.
    pub name: RString,
    /// One of [`kind_code`]; a code this host does not know lists as
    /// "kind N".
    pub kind: u32,
    /// Smallest value of an integer option.
    pub min: i64,
    /// Largest value of an integer option.
    pub max: i64,
    /// The words of a word option.
    pub words: RVec<RString>,
    /// Default value in the params form (`""`: the backend decides).
    pub default: RString,
    /// What it does, one line.
    pub meaning: RString,
    /// Environment variable that sets it when the host does not (`""`: none).
    pub env: RString,
}

impl FfiOptionSpec {
    /// The ABI form of `spec`.
    pub fn of(spec: &OptionSpec) -> FfiOptionSpec {
        let (kind, min, max, words) = match spec.kind {
            OptionKind::Bool => (kind_code::BOOL, 0, 1, RVec::new()),
            OptionKind::Integer { min, max } => (kind_code::INTEGER, min, max, RVec::new()),
            OptionKind::Word(w) => (
                kind_code::WORD,
                0,
                0,
                w.iter().map(|&w| RString::from(w)).collect(),
            ),
            OptionKind::Text => (kind_code::TEXT, 0, 0, RVec::new()),
        };
        FfiOptionSpec {
            name: spec.name.into(),
            kind,
            min,
            max,
            words,
            default: spec.default.into(),
            meaning: spec.meaning.into(),
            env: spec.env.into(),
        }
    }

    /// The type as listings show it (as [`OptionKind::describe`]).
    pub fn describe_kind(&self) -> String {
        match self.kind {
            kind_code::BOOL => "bool".into(),
            kind_code::INTEGER => format!("integer {}..={}", self.min, self.max),
            kind_code::WORD => {
                let words: Vec<&str> = self.words.iter().map(|w| w.as_str()).collect();
                format!("one of: {}", words.join(", "))
            }
            kind_code::TEXT => "text".into(),
            other => format!("kind {other}"),
        }
    }
}

/// The backend-options extension, version 1.
#[repr(C)]
#[derive(StableAbi)]
pub struct BackendOptionsV1 {
    /// The plugin's option schema (empty when it has none).
    pub schema: extern "C" fn() -> RVec<FfiOptionSpec>,
}

/// The ABI form of `schema`, a panic while building it read as "no
/// options".
pub fn schema_of(schema: impl FnOnce() -> &'static [OptionSpec]) -> RVec<FfiOptionSpec> {
    catch_unwind(AssertUnwindSafe(|| {
        schema().iter().map(FfiOptionSpec::of).collect()
    }))
    .unwrap_or_default()
}

/// The entry `export_plugin!`'s options symbol returns for `module`.
#[doc(hidden)]
pub fn entry(module: &'static BackendOptionsV1) -> ExtEntry<BackendOptionsV1> {
    ExtEntry {
        layout: <BackendOptionsV1 as StableAbi>::LAYOUT,
        module,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::ext::check_entry;

    const SCHEMA: &[OptionSpec] = &[
        OptionSpec {
            name: "rows",
            kind: OptionKind::Integer { min: 1, max: 16 },
            default: "4",
            meaning: "rows per group",
            env: "",
        },
        OptionSpec {
            name: "path",
            kind: OptionKind::Word(&["tiled", "matvec"]),
            default: "",
            meaning: "forced path",
            env: "X_PATH",
        },
    ];

    extern "C" fn schema() -> RVec<FfiOptionSpec> {
        schema_of(|| SCHEMA)
    }

    static MODULE: BackendOptionsV1 = BackendOptionsV1 { schema };

    #[test]
    fn the_schema_crosses_with_kinds_described_as_on_the_plugin_side() {
        let module = check_entry(OPTIONS_SYMBOL, &entry(&MODULE)).unwrap();
        let got = (module.schema)();
        assert_eq!(got.len(), 2);
        for (ffi, spec) in got.iter().zip(SCHEMA) {
            assert_eq!(ffi.name.as_str(), spec.name);
            assert_eq!(ffi.describe_kind(), spec.kind.describe());
            assert_eq!(ffi.default.as_str(), spec.default);
            assert_eq!(ffi.env.as_str(), spec.env);
        }
        assert_eq!(got[1].describe_kind(), "one of: tiled, matvec");
    }

    #[test]
    fn a_panicking_schema_reads_as_no_options() {
        assert!(schema_of(|| panic!("boom")).is_empty());
    }
}
