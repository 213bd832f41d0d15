//! Per-backend options the host passes to each device's `init_backend`:
//! a params string per backend name (see
//! `backplane_abi::support::options` for its syntax), set by the host API
//! ([`SchedOptions::backend_options`](super::SchedOptions::backend_options))
//! or the command line's `--backend-option NAME.KEY=VALUE`.

use std::collections::BTreeMap;

/// Backend name -> `init_backend` params (`key=value;key=value`). A
/// backend without an entry gets `""`: its defaults, under its documented
/// environment overrides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackendOptions {
    params: BTreeMap<String, String>,
}

impl BackendOptions {
    /// No options for any backend.
    pub fn new() -> BackendOptions {
        BackendOptions::default()
    }

    /// Adds `key=value` to `backend`'s params (a later value of the same
    /// key wins when the backend parses them). A `;` in any part would
    /// split the pair, so it is refused, naming the part.
    pub fn set(&mut self, backend: &str, key: &str, value: &str) -> Result<(), String> {
        for (what, text) in [("backend", backend), ("key", key), ("value", value)] {
            if text.contains(';') {
                return Err(format!("backend option {what} '{text}' contains ';'"));
            }
        }
        if backend.is_empty() || key.is_empty() || key.contains('=') {
            return Err(format!(
                "backend option '{backend}.{key}={value}': want NAME.KEY=VALUE"
            ));
        }
        let params = self.params.entry(backend.to_string()).or_default();
        if !params.is_empty() {
            params.push(';');
        }
        params.push_str(&format!("{key}={value}"));
        Ok(())
    }

    /// Adds one `NAME.KEY=VALUE` assignment (the command line's form),
    /// `NAME` a backend name (`webgpu`, `cpu`).
    pub fn add_assignment(&mut self, text: &str) -> Result<(), String> {
        let bad = || {
            format!("backend option '{text}': want NAME.KEY=VALUE (e.g. webgpu.matmul_path=tiled)")
        };
        let (lhs, value) = text.split_once('=').ok_or_else(bad)?;
        let (backend, key) = lhs.trim().split_once('.').ok_or_else(bad)?;
        self.set(backend.trim(), key.trim(), value.trim())
    }

    /// Options from `NAME.KEY=VALUE` assignments.
    pub fn from_assignments<S: AsRef<str>>(items: &[S]) -> Result<BackendOptions, String> {
        let mut o = BackendOptions::new();
        for item in items {
            o.add_assignment(item.as_ref())?;
        }
        Ok(o)
    }

    /// The params string for `backend` (`""` when none are set).
    pub fn params(&self, backend: &str) -> &str {
        self.params.get(backend).map_or("", String::as_str)
    }

    /// Backends that have options set.
    pub fn backends(&self) -> impl Iterator<Item = &str> {
        self.params.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_collect_into_one_params_string_per_backend() {
        let o = BackendOptions::from_assignments(&[
            "webgpu.matmul_path=tiled",
            "cpu.threads=2",
            " webgpu.matmul_rows = 4 ",
        ])
        .unwrap();
        assert_eq!(o.params("webgpu"), "matmul_path=tiled;matmul_rows=4");
        assert_eq!(o.params("cpu"), "threads=2");
        assert_eq!(o.params("sycl"), "");
        assert_eq!(o.backends().collect::<Vec<_>>(), ["cpu", "webgpu"]);
    }

    #[test]
    fn malformed_assignments_are_refused_naming_the_form() {
        for bad in ["webgpu", "webgpu=tiled", ".x=1", "webgpu.=1"] {
            let e = BackendOptions::from_assignments(&[bad]).unwrap_err();
            assert!(e.contains("want NAME.KEY=VALUE"), "{bad}: {e}");
        }
        let e = BackendOptions::from_assignments(&["cpu.threads=1;x=2"]).unwrap_err();
        assert_eq!(e, "backend option value '1;x=2' contains ';'");
    }
}
