//! Typed backend options: what a backend declares it can be told
//! ([`OptionSpec`]), how the host tells it (the params string of
//! [`Device::init_backend`](crate::plugin::Device::init_backend)), and the
//! documented environment variables that stand in when the host says
//! nothing.
//!
//! # The params string
//!
//! `key=value` pairs separated by `;`, spaces around keys and values
//! ignored, empty pairs skipped: `matmul_path=tiled; matmul_rows=4`. Keys
//! are the option names of the backend's schema; a key given twice keeps
//! the last value. A value's form follows the option's [`OptionKind`]:
//!
//! - bool: `1`, `true`, `on` or `0`, `false`, `off` (any case), nothing
//!   else ([`parse_bool`]);
//! - integer: decimal, inside the option's range;
//! - word: one of the option's words;
//! - text: anything without `;`.
//!
//! # Precedence
//!
//! An option the host sets in the params string wins; otherwise its
//! environment variable, when the backend maps one ([`OptionSpec::env`]
//! or the backend's own mapping of a variable onto several options);
//! otherwise the default. Environment values follow the same forms, and an
//! empty variable counts as unset. An error names the backend, the key
//! (and the variable it came from) and what is allowed.

use std::collections::BTreeMap;
use std::fmt;

pub use crate::plugin::ext_options::{OptionKind, OptionSpec};

/// A parsed option value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptionValue {
    /// A bool option's value.
    Bool(bool),
    /// An integer option's value.
    Integer(i64),
    /// A word option's word.
    Word(String),
    /// A text option's text.
    Text(String),
}

/// A refused option.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionError {
    /// The backend whose option it is.
    pub backend: String,
    /// The key as given.
    pub key: String,
    /// The environment variable it came from, if not from the params.
    pub from_env: Option<String>,
    /// What is wrong and what is allowed.
    pub problem: String,
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} backend option '{}'", self.backend, self.key)?;
        if let Some(var) = &self.from_env {
            write!(f, " (from {var})")?;
        }
        write!(f, ": {}", self.problem)
    }
}

impl std::error::Error for OptionError {}

impl From<OptionError> for crate::plugin::PluginError {
    fn from(e: OptionError) -> crate::plugin::PluginError {
        crate::plugin::PluginError::bad_input(e.to_string())
    }
}

/// The one boolean convention of options and their environment variables:
/// `1`, `true`, `on` are true; `0`, `false`, `off` are false (any case);
/// anything else is `None`.
pub fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" => Some(true),
        "0" | "false" | "off" => Some(false),
        _ => None,
    }
}

/// Parses `text` as a value of `spec`, or says what is allowed.
pub fn parse_value(spec: &OptionSpec, text: &str) -> Result<OptionValue, String> {
    let text = text.trim();
    match spec.kind {
        OptionKind::Bool => parse_bool(text)
            .map(OptionValue::Bool)
            .ok_or_else(|| format!("'{text}' is not a bool (use 1/0, true/false or on/off)")),
        OptionKind::Integer { min, max } => match text.parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(OptionValue::Integer(n)),
            Ok(n) => Err(format!("{n} is outside {min}..={max}")),
            Err(_) => Err(format!("'{text}' is not an integer ({min}..={max})")),
        },
        OptionKind::Word(words) => words
            .iter()
            .find(|&&w| w == text)
            .map(|w| OptionValue::Word(w.to_string()))
            .ok_or_else(|| format!("'{text}' is not one of: {}", words.join(", "))),
        OptionKind::Text => Ok(OptionValue::Text(text.to_string())),
    }
}

/// Splits a params string into `(key, value)` pairs (see the module
/// docs); a pair without `=` is an error naming it.
pub fn split_params(params: &str) -> Result<Vec<(&str, &str)>, String> {
    params
        .split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.trim(), v.trim()))
                .ok_or_else(|| format!("'{p}' is not key=value"))
        })
        .collect()
}

/// Refuses `params` of a stream that set an option `settled` says is
/// fixed before any stream exists (load-time or device-wide: read from
/// its environment variable when the plugin loads), or an unknown one;
/// the error names the key, `why` and the variable to set.
pub fn refuse_settled(
    backend: &str,
    schema: &[OptionSpec],
    params: &str,
    settled: impl Fn(&OptionSpec) -> bool,
    why: &str,
) -> Result<(), OptionError> {
    let error = |key: &str, problem: String| OptionError {
        backend: backend.to_string(),
        key: key.to_string(),
        from_env: None,
        problem,
    };
    for (key, _) in split_params(params).map_err(|p| error("", p))? {
        match schema.iter().find(|s| s.name == key) {
            Some(s) if settled(s) => {
                return Err(error(key, format!("{why}; set {}", s.env)));
            }
            Some(_) => {}
            None => {
                let known: Vec<&str> = schema.iter().map(|s| s.name).collect();
                return Err(error(
                    key,
                    format!("unknown option (known: {})", known.join(", ")),
                ));
            }
        }
    }
    Ok(())
}

/// A backend's options resolved from params, environment and defaults.
#[derive(Clone, Debug)]
pub struct Options {
    backend: &'static str,
    schema: &'static [OptionSpec],
    values: BTreeMap<&'static str, OptionValue>,
}

impl Options {
    /// Every option at its default.
    pub fn defaults(backend: &'static str, schema: &'static [OptionSpec]) -> Options {
        Options {
            backend,
            schema,
            values: BTreeMap::new(),
        }
    }

    /// Resolves the options of `backend` (its `schema`) from the host's
    /// `params`, then, for options the params leave unset, the
    /// environment: each option's own variable ([`OptionSpec::env`]) read
    /// through `env`, and `extra_env`, pairs the backend derived from
    /// variables that set several options at once, each with the variable
    /// it came from.
    pub fn resolve(
        backend: &'static str,
        schema: &'static [OptionSpec],
        params: &str,
        env: impl Fn(&str) -> Option<String>,
        extra_env: &[(&str, String, &str)],
    ) -> Result<Options, OptionError> {
        let mut options = Options::defaults(backend, schema);
        let error = |key: &str, from_env: Option<&str>, problem: String| OptionError {
            backend: backend.to_string(),
            key: key.to_string(),
            from_env: from_env.map(str::to_string),
            problem,
        };
        let mut from_env = Vec::new();
        for spec in schema.iter().filter(|s| !s.env.is_empty()) {
            if let Some(v) = env(spec.env).filter(|v| !v.trim().is_empty()) {
                from_env.push((spec.name, v, spec.env));
            }
        }
        for (key, value, var) in extra_env {
            from_env.push((key, value.clone(), var));
        }
        for (key, value, var) in from_env {
            options
                .set(key, &value)
                .map_err(|problem| error(key, Some(var), problem))?;
        }
        let pairs = split_params(params).map_err(|problem| error("", None, problem))?;
        for (key, value) in pairs {
            options
                .set(key, value)
                .map_err(|problem| error(key, None, problem))?;
        }
        Ok(options)
    }

    /// [`resolve`](Self::resolve) reading the process environment.
    pub fn from_params_and_env(
        backend: &'static str,
        schema: &'static [OptionSpec],
        params: &str,
        extra_env: &[(&str, String, &str)],
    ) -> Result<Options, OptionError> {
        Options::resolve(
            backend,
            schema,
            params,
            |k| std::env::var(k).ok(),
            extra_env,
        )
    }

    /// Sets option `key` from `text`; the error says what is wrong.
    pub fn set(&mut self, key: &str, text: &str) -> Result<(), String> {
        let spec = self.schema.iter().find(|s| s.name == key).ok_or_else(|| {
            let known: Vec<&str> = self.schema.iter().map(|s| s.name).collect();
            if known.is_empty() {
                "unknown option (this backend has none)".to_string()
            } else {
                format!("unknown option (known: {})", known.join(", "))
            }
        })?;
        let value = parse_value(spec, text)?;
        self.values.insert(spec.name, value);
        Ok(())
    }

    /// The backend these options are for.
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    /// Whether `name` was set (by params or environment) rather than
    /// defaulted.
    pub fn is_set(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// The value of `name`: as set, else the schema's default; `None` for
    /// a name the schema lacks or an unset option with an empty default.
    pub fn value(&self, name: &str) -> Option<OptionValue> {
        if let Some(v) = self.values.get(name) {
            return Some(v.clone());
        }
        let spec = self.schema.iter().find(|s| s.name == name)?;
        if spec.default.is_empty() {
            return None;
        }
        parse_value(spec, spec.default).ok()
    }

    /// A bool option (false when absent from the schema).
    pub fn bool(&self, name: &str) -> bool {
        matches!(self.value(name), Some(OptionValue::Bool(true)))
    }

    /// An integer option (`None` when unset with no default).
    pub fn integer(&self, name: &str) -> Option<i64> {
        match self.value(name) {
            Some(OptionValue::Integer(n)) => Some(n),
            _ => None,
        }
    }

    /// A word or text option (`None` when unset with no default).
    pub fn text(&self, name: &str) -> Option<String> {
        match self.value(name) {
            Some(OptionValue::Word(w) | OptionValue::Text(w)) => Some(w),
            _ => None,
        }
    }
}

/// Checks a schema: names are lower-case `[a-z0-9_]`, unique, and each
/// default parses as its option's kind. For backends' tests.
pub fn check_schema(schema: &[OptionSpec]) -> Result<(), String> {
    for (i, spec) in schema.iter().enumerate() {
        let good_name = !spec.name.is_empty()
            && spec
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !good_name {
            return Err(format!("option name '{}' is not [a-z0-9_]+", spec.name));
        }
        if schema[..i].iter().any(|s| s.name == spec.name) {
            return Err(format!("option '{}' declared twice", spec.name));
        }
        if !spec.default.is_empty() {
            parse_value(spec, spec.default)
                .map_err(|e| format!("option '{}': default {e}", spec.name))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &[OptionSpec] = &[
        OptionSpec {
            name: "trace",
            kind: OptionKind::Bool,
            default: "off",
            meaning: "print each choice",
            env: "TEST_OPT_TRACE",
        },
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
            env: "TEST_OPT_PATH",
        },
    ];

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn defaults_apply_when_nothing_is_set() {
        let o = Options::resolve("gpu", SCHEMA, "", no_env, &[]).unwrap();
        assert!(!o.bool("trace"));
        assert_eq!(o.integer("rows"), Some(4));
        assert_eq!(o.text("path"), None);
        assert!(!o.is_set("rows"));
    }

    #[test]
    fn params_set_typed_values_with_spaces_and_empty_pairs_ignored() {
        let o = Options::resolve(
            "gpu",
            SCHEMA,
            " trace = on ;; rows=16; path=tiled ;",
            no_env,
            &[],
        )
        .unwrap();
        assert!(o.bool("trace"));
        assert_eq!(o.integer("rows"), Some(16));
        assert_eq!(o.text("path").as_deref(), Some("tiled"));
    }

    #[test]
    fn one_bool_convention_and_nothing_else() {
        for t in ["1", "true", "on", "TRUE", "On"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["0", "false", "off", "OFF"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        for bad in ["yes", "no", "", "2", "enabled"] {
            assert_eq!(parse_bool(bad), None, "{bad}");
        }
    }

    #[test]
    fn bad_values_are_refused_naming_backend_key_and_allowed_values() {
        let e = |p: &str| {
            Options::resolve("gpu", SCHEMA, p, no_env, &[])
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            e("trace=yes"),
            "gpu backend option 'trace': 'yes' is not a bool (use 1/0, true/false or on/off)"
        );
        assert_eq!(
            e("rows=17"),
            "gpu backend option 'rows': 17 is outside 1..=16"
        );
        assert_eq!(
            e("rows=many"),
            "gpu backend option 'rows': 'many' is not an integer (1..=16)"
        );
        assert_eq!(
            e("path=fast"),
            "gpu backend option 'path': 'fast' is not one of: tiled, matvec"
        );
        assert_eq!(
            e("speed=9"),
            "gpu backend option 'speed': unknown option (known: trace, rows, path)"
        );
        assert_eq!(e("rows"), "gpu backend option '': 'rows' is not key=value");
    }

    #[test]
    fn environment_applies_under_params_and_its_errors_name_the_variable() {
        let env = |k: &str| match k {
            "TEST_OPT_TRACE" => Some("1".to_string()),
            "TEST_OPT_PATH" => Some("matvec".to_string()),
            _ => None,
        };
        let o = Options::resolve("gpu", SCHEMA, "path=tiled", env, &[]).unwrap();
        assert!(o.bool("trace"), "from the environment");
        assert_eq!(o.text("path").as_deref(), Some("tiled"), "params win");
        let bad = |k: &str| (k == "TEST_OPT_TRACE").then(|| "yes".to_string());
        let e = Options::resolve("gpu", SCHEMA, "", bad, &[]).unwrap_err();
        assert_eq!(e.from_env.as_deref(), Some("TEST_OPT_TRACE"));
        assert!(
            e.to_string()
                .starts_with("gpu backend option 'trace' (from TEST_OPT_TRACE):")
        );
        let empty = |_: &str| Some("  ".to_string());
        let o = Options::resolve("gpu", SCHEMA, "", empty, &[]).unwrap();
        assert!(!o.is_set("trace"), "an empty variable is unset");
    }

    #[test]
    fn pairs_a_backend_derives_from_one_variable_apply_like_the_environment() {
        let extra = [("rows", "8".to_string(), "TEST_OPT_WORDS")];
        let o = Options::resolve("gpu", SCHEMA, "", no_env, &extra).unwrap();
        assert_eq!(o.integer("rows"), Some(8));
        let o = Options::resolve("gpu", SCHEMA, "rows=2", no_env, &extra).unwrap();
        assert_eq!(o.integer("rows"), Some(2));
        let bad = [("rows", "99".to_string(), "TEST_OPT_WORDS")];
        let e = Options::resolve("gpu", SCHEMA, "", no_env, &bad).unwrap_err();
        assert_eq!(e.from_env.as_deref(), Some("TEST_OPT_WORDS"));
    }

    #[test]
    fn a_backend_without_options_refuses_any_key() {
        let e = Options::resolve("cpu", &[], "x=1", no_env, &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cpu backend option 'x': unknown option (this backend has none)"
        );
        assert!(Options::resolve("cpu", &[], " ; ", no_env, &[]).is_ok());
    }

    #[test]
    fn settled_options_in_stream_params_are_refused_naming_the_variable() {
        let settled = |s: &OptionSpec| s.name == "trace";
        let e = refuse_settled("gpu", SCHEMA, "rows=2;trace=1", settled, "load-time").unwrap_err();
        assert_eq!(
            e.to_string(),
            "gpu backend option 'trace': load-time; set TEST_OPT_TRACE"
        );
        let e = refuse_settled("gpu", SCHEMA, "depth=2", settled, "load-time").unwrap_err();
        assert!(
            e.to_string()
                .contains("unknown option (known: trace, rows, path)"),
            "{e}"
        );
        assert!(refuse_settled("gpu", SCHEMA, "rows=2", settled, "load-time").is_ok());
    }

    #[test]
    fn schemas_are_checked_for_names_duplicates_and_defaults() {
        assert_eq!(check_schema(SCHEMA), Ok(()));
        let bad_default = [OptionSpec {
            default: "9",
            ..SCHEMA[0]
        }];
        assert!(check_schema(&bad_default).unwrap_err().contains("default"));
        let twice = [SCHEMA[1], SCHEMA[1]];
        assert!(check_schema(&twice).unwrap_err().contains("twice"));
        let upper = [OptionSpec {
            name: "Rows",
            ..SCHEMA[1]
        }];
        assert!(check_schema(&upper).is_err());
    }
}
