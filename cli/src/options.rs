//! Backend options on the command line: `backplane devices --options`
//! lists each backend's options (type, default, meaning, environment
//! variable), and `--backend-option NAME.KEY=VALUE` sets one for the
//! scheduler a command builds.

use std::fmt::Write;

use backplane::registry::LoadedBackend;
use backplane::sched::BackendOptions;

/// The `--backend-option` values as per-backend params.
pub fn parse(assignments: &[String]) -> Result<BackendOptions, String> {
    BackendOptions::from_assignments(assignments)
}

/// `b`'s options as JSON: name, type, default, meaning, env.
pub fn json(b: &LoadedBackend) -> serde_json::Value {
    b.options
        .iter()
        .map(|o| {
            serde_json::json!({
                "name": o.name.as_str(),
                "type": o.describe_kind(),
                "default": o.default.as_str(),
                "meaning": o.meaning.as_str(),
                "env": (!o.env.is_empty()).then(|| o.env.as_str()),
            })
        })
        .collect()
}

/// `b`'s options as indented text lines, one per option.
pub fn text(b: &LoadedBackend, out: &mut String) {
    if b.options.is_empty() {
        let _ = writeln!(out, "  options: none");
        return;
    }
    let _ = writeln!(out, "  options (--backend-option {}.KEY=VALUE):", b.name);
    for o in &b.options {
        let default = if o.default.is_empty() {
            "backend decides"
        } else {
            o.default.as_str()
        };
        let _ = write!(
            out,
            "    {}  {}  default {}  {}",
            o.name,
            o.describe_kind(),
            default,
            o.meaning
        );
        if !o.env.is_empty() {
            let _ = write!(out, "  (env {})", o.env);
        }
        out.push('\n');
    }
}
