//! The SYCL backend's options ([`SYCL_OPTIONS`]) and the typed form a
//! stream (and, from the environment alone, the device's `supports_op`)
//! decides by ([`Settings`]). Options come from `init_backend` params,
//! else their environment variables, else the defaults (see
//! `backplane_abi::support::options`).

use backplane_abi::support::options::{OptionError, OptionKind, OptionSpec, Options};

use crate::policy::Toggles;

const fn toggle(name: &'static str, meaning: &'static str, env: &'static str) -> OptionSpec {
    OptionSpec {
        name,
        kind: OptionKind::Bool,
        default: "off",
        meaning,
        env,
    }
}

/// Every option of the SYCL backend.
pub const SYCL_OPTIONS: &[OptionSpec] = &[
    toggle(
        "prioritize_dmmv",
        "MUL_MAT: the weight reorder never suppresses the DMMV kernels",
        "BACKPLANE_SYCL_PRIORITIZE_DMMV",
    ),
    toggle(
        "disable_opt",
        "MUL_MAT: no weight reorder optimisation at all (at load: no reordered weight layout)",
        "BACKPLANE_SYCL_DISABLE_OPT",
    ),
    toggle(
        "enable_reorder",
        "MUL_MAT: the weight reorder applies on any device (at load: every device offers the reordered weight layout)",
        "BACKPLANE_SYCL_ENABLE_REORDER",
    ),
    toggle(
        "log",
        "print each MUL_MAT's kernel choice and each kernel build to stderr",
        "BACKPLANE_SYCL_LOG",
    ),
];

/// What a stream decides by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// MUL_MAT path toggles.
    pub toggles: Toggles,
    /// `log`.
    pub log: bool,
}

impl Settings {
    /// The settings `o` sets.
    pub fn from_options(o: &Options) -> Settings {
        Settings {
            toggles: Toggles {
                prioritize_dmmv: o.bool("prioritize_dmmv"),
                disable_opt: o.bool("disable_opt"),
                force_reorder: o.bool("enable_reorder"),
            },
            log: o.bool("log"),
        }
    }

    /// The settings of `params` over `env` over the defaults.
    pub fn resolve(
        params: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Settings, OptionError> {
        Options::resolve("sycl", SYCL_OPTIONS, params, env, &[]).map(|o| Settings::from_options(&o))
    }

    /// The settings of `params` over the process environment.
    pub fn from_params(params: &str) -> Result<Settings, OptionError> {
        Settings::resolve(params, |k| std::env::var(k).ok())
    }

    /// The environment's settings (what `supports_op` decides by), the
    /// defaults with the error on stderr when it holds a bad value (which
    /// every stream then refuses).
    pub fn from_env() -> Settings {
        Settings::from_params("").unwrap_or_else(|e| {
            eprintln!("backplane-sycl: {e}");
            Settings::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backplane_abi::support::options::check_schema;

    #[test]
    fn the_schema_is_well_formed_and_defaults_are_all_off() {
        assert_eq!(check_schema(SYCL_OPTIONS), Ok(()));
        assert_eq!(
            Settings::resolve("", |_| None).unwrap(),
            Settings::default()
        );
    }

    #[test]
    fn toggles_come_from_params_over_the_environment() {
        let env = |k: &str| (k == "BACKPLANE_SYCL_DISABLE_OPT").then(|| "1".to_string());
        let s = Settings::resolve("enable_reorder=on", env).unwrap();
        assert!(s.toggles.disable_opt && s.toggles.force_reorder);
        assert!(!s.toggles.prioritize_dmmv);
        let s = Settings::resolve("disable_opt=0", env).unwrap();
        assert!(!s.toggles.disable_opt, "params win");
        let e = Settings::resolve("log=yes", |_| None).unwrap_err();
        assert!(
            e.to_string().starts_with("sycl backend option 'log'"),
            "{e}"
        );
    }
}
