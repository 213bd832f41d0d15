//! The WebGPU backend's options ([`WEBGPU_OPTIONS`]), their environment
//! variables (mapped in one place, [`env_pairs`]) and the typed forms the
//! code reads: [`Tuning`] (kernel forcing and tuning, per stream, inside
//! the stream's [`Facts`](crate::facts::Facts)) and [`DeviceSettings`]
//! (what the device's shared context is opened with).
//!
//! Options come from `init_backend` params (`key=value;...`), else the
//! environment, else the defaults (see `backplane_abi::support::options`).
//! Device-wide options (`profile`, `bind_cache`, `no_coopmat`, `split_weights`) configure
//! the device's shared context, opened before any stream: they are read
//! from the environment when the plugin loads, and a stream's params may
//! not change them.

use backplane_abi::support::options::{
    OptionError, OptionKind, OptionSpec, Options, refuse_settled,
};

/// Backend name options are reported under.
const BACKEND: &str = "webgpu";

/// Mat-mul paths `matmul_path` may force (a forced path the device or
/// type cannot run is ignored): `matvec`, `matvec-wg` (mat-vec reduced in
/// workgroup memory, not subgroups), `tiled`, `tiled8` (8 x 8 outputs per
/// invocation where it fits), `coopmat`, `coopmat-emulated` (the
/// cooperative-matrix kernel with plain code in place of the matrix calls,
/// to test it on any device with f16).
pub const MATMUL_PATHS: &[&str] = &[
    "matvec",
    "matvec-wg",
    "tiled",
    "tiled8",
    "coopmat",
    "coopmat-emulated",
];

/// Flash-attention kernels `flash_attn` may force (ignored where the
/// device or shape cannot run it): `plain` (the tiled `flash_attn`),
/// `vector` (`flash_attn_vec`, one query), `coopmat`, `coopmat-emulated`.
pub const FLASH_ATTN_KERNELS: &[&str] = &["plain", "vector", "coopmat", "coopmat-emulated"];

/// Options that configure the device's shared context.
const DEVICE_WIDE: &[&str] = &["profile", "bind_cache", "no_coopmat", "split_weights"];

/// The variable whose comma-separated words set the `matmul_*` options.
pub const MATMUL_ENV: &str = "BACKPLANE_WEBGPU_MATMUL";

const fn flag(name: &'static str, meaning: &'static str) -> OptionSpec {
    OptionSpec {
        name,
        kind: OptionKind::Bool,
        default: "off",
        meaning,
        env: "",
    }
}

/// Every option of the WebGPU backend.
pub const WEBGPU_OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "matmul_path",
        kind: OptionKind::Word(MATMUL_PATHS),
        default: "",
        meaning: "force a MUL_MAT kernel where it can run (measuring, tests); BACKPLANE_WEBGPU_MATMUL's words set the matmul_* options",
        env: "",
    },
    flag(
        "matmul_f32x",
        "cooperative-matrix MUL_MAT reads f32 activations in place instead of a half copy",
    ),
    flag(
        "matmul_xf32",
        "integer-quant mat-vec keeps f32 activations (the float kernel), for comparison",
    ),
    flag(
        "matmul_noquant16",
        "q4_K mat-vec does not read 16-byte weight runs",
    ),
    flag(
        "matmul_nohalf8",
        "f16 mat-vec does not read 8 halves at once",
    ),
    flag(
        "matmul_nodequant",
        "never dequantize weights before a cooperative-matrix MUL_MAT",
    ),
    flag(
        "matmul_colfirst",
        "cooperative-matrix MUL_MAT workgroups take the column tiles of one row tile together (its weight rows read from memory once), not one column tile's row tiles",
    ),
    flag(
        "matmul_dequant",
        "dequantize weights before a cooperative-matrix MUL_MAT at any batch",
    ),
    OptionSpec {
        name: "matmul_rows",
        kind: OptionKind::Integer { min: 1, max: 16 },
        default: "",
        meaning: "rows of dst per mat-vec workgroup",
        env: "",
    },
    OptionSpec {
        name: "matmul_wg",
        kind: OptionKind::Integer { min: 1, max: 1024 },
        default: "",
        meaning: "mat-vec workgroup size (used when the device allows it)",
        env: "",
    },
    OptionSpec {
        name: "matmul_dqruns",
        kind: OptionKind::Word(&["1", "2", "4", "8"]),
        default: "",
        meaning: "32-value runs each invocation of the dense dequantization converts",
        env: "",
    },
    OptionSpec {
        name: "matmul_splitk",
        kind: OptionKind::Integer { min: 1, max: 1024 },
        default: "",
        meaning: "K splits of the cooperative-matrix MUL_MAT (1: none)",
        env: "",
    },
    OptionSpec {
        name: "matmul_trace",
        kind: OptionKind::Bool,
        default: "off",
        meaning: "print each MUL_MAT's kernel choice to stderr, and each FLASH_ATTN_EXT's native-or-WGSL choice",
        env: "BACKPLANE_WEBGPU_MATMUL_TRACE",
    },
    OptionSpec {
        name: "flash_attn",
        kind: OptionKind::Word(FLASH_ATTN_KERNELS),
        default: "",
        meaning: "force a FLASH_ATTN_EXT kernel where it can run (measuring, tests)",
        env: "BACKPLANE_WEBGPU_FLASH_ATTN",
    },
    OptionSpec {
        name: "flash_attn_splits",
        kind: OptionKind::Integer { min: 1, max: 65535 },
        default: "",
        meaning: "workgroups sharing one query block's keys (1: no split)",
        env: "BACKPLANE_WEBGPU_FLASH_ATTN_SPLITS",
    },
    OptionSpec {
        name: "norm_chunks",
        kind: OptionKind::Integer { min: 1, max: 8 },
        default: "",
        meaning: "chunks of four elements each invocation of the row-norm kernels aims for, which sizes their workgroup (measuring)",
        env: "BACKPLANE_WEBGPU_NORM_CHUNKS",
    },
    OptionSpec {
        name: "flash_attn_pack",
        kind: OptionKind::Bool,
        default: "on",
        meaning: "cooperative-matrix flash attention packs query heads sharing K/V",
        env: "BACKPLANE_WEBGPU_FLASH_ATTN_PACK",
    },
    OptionSpec {
        name: "native",
        kind: OptionKind::Word(crate::native::NativeMode::WORDS),
        default: "auto",
        meaning: "native Vulkan MUL_MAT and FLASH_ATTN_EXT kernels (SPIR-V from GLSL, docs/webgpu.md): auto, on wherever one can run, off (the WGSL kernels only), or emulated (on, with the GEMM's cooperative-matrix calls as plain code, for tests)",
        env: "BACKPLANE_WEBGPU_NATIVE",
    },
    OptionSpec {
        name: "fuse",
        kind: OptionKind::Bool,
        default: "on",
        meaning: "fuse kernels where the graph allows: ADD/RMS_NORM/MUL chains, a mat-vec's activation quantizing with the node making them, K/V SET_ROWS pairs (docs/webgpu.md, Execution)",
        env: "BACKPLANE_WEBGPU_FUSE",
    },
    OptionSpec {
        name: "first_submit",
        kind: OptionKind::Integer { min: 1, max: 32 },
        default: "4",
        meaning: "kernels in a graph's first submission (each later one doubles, up to 32)",
        env: "BACKPLANE_WEBGPU_FIRST_SUBMIT",
    },
    OptionSpec {
        name: "replay",
        kind: OptionKind::Bool,
        default: "on",
        meaning: "replay the kernels recorded for a graph identical to a recent one instead of planning its ops again (docs/webgpu.md, Execution)",
        env: "BACKPLANE_WEBGPU_REPLAY",
    },
    OptionSpec {
        name: "native_replay",
        kind: OptionKind::Word(NativeReplayMode::WORDS),
        default: "auto",
        meaning: "submit a replayed graph as one Vulkan command buffer recorded once (docs/webgpu.md, Native replay): on (wherever the device is Vulkan), off, auto (on for Vulkan GPUs, off on CPU devices such as lavapipe), or serial (on, with a barrier between every two kernels instead of only where one depends on another)",
        env: "BACKPLANE_WEBGPU_NATIVE_REPLAY",
    },
    OptionSpec {
        name: "profile",
        kind: OptionKind::Word(&["off", "kernels", "graph", "steps"]),
        default: "off",
        meaning: "device-wide: per-kernel GPU times (kernels), host time per graph (graph), or GPU time per step of a natively replayed graph (steps), printed at exit",
        env: "BACKPLANE_WEBGPU_PROFILE",
    },
    OptionSpec {
        name: "bind_cache",
        kind: OptionKind::Bool,
        default: "on",
        meaning: "device-wide: reuse bind groups across dispatches",
        env: "BACKPLANE_WEBGPU_BIND_CACHE",
    },
    OptionSpec {
        name: "no_coopmat",
        kind: OptionKind::Bool,
        default: "off",
        meaning: "device-wide: do not use cooperative matrices even where offered",
        env: "BACKPLANE_WEBGPU_NO_COOPMAT",
    },
    OptionSpec {
        name: "split_weights",
        kind: OptionKind::Bool,
        default: "off",
        meaning: "device-wide: offer the split weight layout (q4_0/q4_K quants and heads apart) for weights; off by default: on an H100 it made n=1 products at most 5% faster and n=512 ones 30-40% slower (docs/webgpu.md)",
        env: "BACKPLANE_WEBGPU_SPLIT_WEIGHTS",
    },
];

/// The `native_replay` option.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NativeReplayMode {
    /// On for Vulkan GPUs, off on CPU devices such as lavapipe (which run
    /// the kernels inside the submission: nothing to save). On an NVIDIA
    /// H100 it made a 1b decode 13-19% faster (docs/webgpu.md).
    #[default]
    Auto,
    /// On wherever the device is Vulkan.
    On,
    /// Never: replays record through wgpu.
    Off,
    /// On, with a barrier between every two kernels (as wgpu orders them)
    /// instead of only where one depends on another's memory.
    Serial,
}

impl NativeReplayMode {
    /// The option's words, in schema order.
    pub const WORDS: &'static [&'static str] = &["auto", "on", "off", "serial"];

    /// The mode a word of [`NativeReplayMode::WORDS`] names (`auto`
    /// otherwise).
    pub fn from_word(word: Option<&str>) -> NativeReplayMode {
        match word {
            Some("on") => NativeReplayMode::On,
            Some("off") => NativeReplayMode::Off,
            Some("serial") => NativeReplayMode::Serial,
            _ => NativeReplayMode::Auto,
        }
    }

    /// Whether a stream in this mode replays natively on a device that is
    /// a CPU (`is_cpu`) or not.
    pub fn wanted(self, is_cpu: bool) -> bool {
        match self {
            NativeReplayMode::On | NativeReplayMode::Serial => true,
            NativeReplayMode::Off => false,
            NativeReplayMode::Auto => !is_cpu,
        }
    }
}

/// Options derived from `BACKPLANE_WEBGPU_MATMUL`'s words: a path word
/// sets `matmul_path`, `name=N` sets `matmul_<name>=N`, any other word
/// `matmul_<word>=1` (the flags `f32x`, `xf32`, `noquant16`, `nohalf8`,
/// `nodequant`, `dequant`; an unknown word is then refused by the schema,
/// naming it).
pub fn matmul_words(words: &str) -> Vec<(String, String)> {
    words
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(|w| {
            if MATMUL_PATHS.contains(&w) {
                ("matmul_path".to_string(), w.to_string())
            } else if let Some((k, v)) = w.split_once('=') {
                (format!("matmul_{}", k.trim()), v.trim().to_string())
            } else {
                (format!("matmul_{w}"), "1".to_string())
            }
        })
        .collect()
}

/// The environment's settings beyond each option's own variable, with the
/// variable each came from: `BACKPLANE_WEBGPU_MATMUL`'s words.
pub fn env_pairs(env: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String, &'static str)> {
    let mut pairs: Vec<(String, String, &'static str)> = Vec::new();
    if let Some(words) = env(MATMUL_ENV) {
        for (k, v) in matmul_words(&words) {
            pairs.push((k, v, MATMUL_ENV));
        }
    }
    pairs
}

/// The WebGPU options resolved from `params` and `env` (the process
/// environment in the plugin; a closure in tests).
pub fn resolve(params: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Options, OptionError> {
    let profile_var = WEBGPU_OPTIONS
        .iter()
        .find(|s| s.name == "profile")
        .map_or("", |s| s.env);
    // The profile variable predates the words: `1` (or any value but `0`
    // and `graph`) meant per-kernel times.
    let env_mapped = |k: &str| {
        let v = env(k)?;
        if k == profile_var {
            let v = v.trim();
            return Some(
                match v {
                    "" => "",
                    "0" | "off" => "off",
                    "graph" => "graph",
                    "steps" => "steps",
                    _ => "kernels",
                }
                .to_string(),
            );
        }
        Some(v)
    };
    let extra = env_pairs(env);
    let extra: Vec<(&str, String, &str)> = extra
        .iter()
        .map(|(k, v, var)| (k.as_str(), v.clone(), *var))
        .collect();
    Options::resolve(BACKEND, WEBGPU_OPTIONS, params, env_mapped, &extra)
}

/// The process environment, for [`resolve`].
pub fn process_env(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

/// Refuses device-wide options in a stream's `params` (they configure the
/// context all streams share, opened before any stream).
pub fn refuse_device_wide(params: &str) -> Result<(), OptionError> {
    let why = "device-wide: it configures the device's shared context, opened before any stream";
    refuse_settled(
        BACKEND,
        WEBGPU_OPTIONS,
        params,
        |s| DEVICE_WIDE.contains(&s.name),
        why,
    )
}

/// Kernel forcing and tuning a stream plans with; the default is the
/// schema's defaults (nothing forced: the backend decides).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// Forced MUL_MAT path, one of [`MATMUL_PATHS`].
    pub matmul_path: Option<&'static str>,
    /// `matmul_f32x`.
    pub matmul_f32x: bool,
    /// `matmul_xf32`.
    pub matmul_xf32: bool,
    /// `matmul_noquant16`.
    pub matmul_noquant16: bool,
    /// `matmul_nohalf8`.
    pub matmul_nohalf8: bool,
    /// `matmul_nodequant`.
    pub matmul_nodequant: bool,
    /// `matmul_dequant`.
    pub matmul_dequant: bool,
    /// `matmul_colfirst`.
    pub matmul_colfirst: bool,
    /// `matmul_rows`.
    pub matmul_rows: Option<u32>,
    /// `matmul_wg`.
    pub matmul_wg: Option<u32>,
    /// `matmul_dqruns`.
    pub matmul_dqruns: Option<u32>,
    /// `matmul_splitk`.
    pub matmul_splitk: Option<u32>,
    /// `matmul_trace`.
    pub matmul_trace: bool,
    /// Forced FLASH_ATTN_EXT kernel, one of [`FLASH_ATTN_KERNELS`].
    pub flash_attn: Option<&'static str>,
    /// `flash_attn_splits`.
    pub flash_attn_splits: Option<u32>,
    /// `norm_chunks`.
    pub norm_chunks: Option<u32>,
    /// `flash_attn_no_pack`: the negation of `flash_attn_pack`, so that the
    /// default value of this struct is the option's default.
    pub flash_attn_no_pack: bool,
    /// `first_submit`.
    pub first_submit: usize,
    /// `fuse`: encode chains of nodes as one kernel (`ops::fusion`).
    pub fuse: bool,
    /// `replay`: replay a recorded graph ([`crate::replay`]).
    pub replay: bool,
    /// `native_replay`: submit replays as one native command buffer.
    pub native_replay: NativeReplayMode,
    /// `native`: whether MUL_MAT and FLASH_ATTN_EXT may use the native
    /// Vulkan kernels.
    pub native: crate::native::NativeMode,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning::from_options(&Options::defaults(BACKEND, WEBGPU_OPTIONS))
    }
}

/// The word of `words` equal to `w` (the `'static` copy).
fn static_word(words: &'static [&'static str], w: Option<String>) -> Option<&'static str> {
    let w = w?;
    words.iter().copied().find(|&x| x == w)
}

/// An integer option as u32 (the schema's ranges fit).
fn small(o: &Options, name: &str) -> Option<u32> {
    o.integer(name).and_then(|n| u32::try_from(n).ok())
}

impl Tuning {
    /// The tuning `o` sets.
    pub fn from_options(o: &Options) -> Tuning {
        Tuning {
            matmul_path: static_word(MATMUL_PATHS, o.text("matmul_path")),
            matmul_f32x: o.bool("matmul_f32x"),
            matmul_xf32: o.bool("matmul_xf32"),
            matmul_noquant16: o.bool("matmul_noquant16"),
            matmul_nohalf8: o.bool("matmul_nohalf8"),
            matmul_nodequant: o.bool("matmul_nodequant"),
            matmul_dequant: o.bool("matmul_dequant"),
            matmul_colfirst: o.bool("matmul_colfirst"),
            matmul_rows: small(o, "matmul_rows"),
            matmul_wg: small(o, "matmul_wg"),
            matmul_dqruns: o.text("matmul_dqruns").and_then(|w| w.parse().ok()),
            matmul_splitk: small(o, "matmul_splitk"),
            matmul_trace: o.bool("matmul_trace"),
            flash_attn: static_word(FLASH_ATTN_KERNELS, o.text("flash_attn")),
            flash_attn_splits: small(o, "flash_attn_splits"),
            norm_chunks: small(o, "norm_chunks"),
            flash_attn_no_pack: !o.bool("flash_attn_pack"),
            // In 1..=32 by the schema, which has a default.
            first_submit: o.integer("first_submit").map_or(1, |n| n as usize),
            fuse: o.bool("fuse"),
            replay: o.bool("replay"),
            native_replay: NativeReplayMode::from_word(o.text("native_replay").as_deref()),
            native: crate::native::NativeMode::from_word(o.text("native").as_deref()),
        }
    }
}

/// What the device's shared context is opened with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSettings {
    /// `profile`: `off`, `kernels`, `graph` or `steps`.
    pub profile: String,
    /// `bind_cache`.
    pub bind_cache: bool,
    /// `no_coopmat`.
    pub no_coopmat: bool,
    /// `split_weights`: the device offers the split weight layout.
    pub split_weights: bool,
    /// The stream defaults (environment only).
    pub tuning: Tuning,
}

impl DeviceSettings {
    /// The settings `o` sets.
    pub fn from_options(o: &Options) -> DeviceSettings {
        DeviceSettings {
            profile: o.text("profile").unwrap_or_else(|| "off".into()),
            bind_cache: o.bool("bind_cache"),
            no_coopmat: o.bool("no_coopmat"),
            split_weights: o.bool("split_weights"),
            tuning: Tuning::from_options(o),
        }
    }

    /// The settings the process environment gives, or the defaults with
    /// the error on stderr when it gives a bad value (the error also
    /// refuses every stream, which re-reads it).
    pub fn from_env() -> DeviceSettings {
        match resolve("", &process_env) {
            Ok(o) => DeviceSettings::from_options(&o),
            Err(e) => {
                eprintln!("backplane-webgpu: {e}");
                DeviceSettings::from_options(&Options::defaults(BACKEND, WEBGPU_OPTIONS))
            }
        }
    }
}

/// The tuning of a stream created with `params`: params over the
/// environment over the defaults; device-wide keys refused.
pub fn stream_tuning(params: &str) -> Result<Tuning, OptionError> {
    refuse_device_wide(params)?;
    resolve(params, &process_env).map(|o| Tuning::from_options(&o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_replay_auto_is_on_for_gpus_and_off_on_cpu_devices() {
        assert!(NativeReplayMode::On.wanted(true));
        assert!(NativeReplayMode::Serial.wanted(true));
        assert!(!NativeReplayMode::Off.wanted(false));
        assert!(!NativeReplayMode::Auto.wanted(true));
        assert!(NativeReplayMode::Auto.wanted(false));
        for w in NativeReplayMode::WORDS {
            let m = NativeReplayMode::from_word(Some(w));
            assert_eq!(format!("{m:?}").to_lowercase(), *w);
        }
        assert_eq!(NativeReplayMode::from_word(None), NativeReplayMode::Auto);
    }
    use backplane_abi::support::options::check_schema;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_schema_is_well_formed() {
        assert_eq!(check_schema(WEBGPU_OPTIONS), Ok(()));
    }

    #[test]
    fn no_params_and_no_environment_is_the_default_tuning() {
        let o = resolve("", &env_of(&[])).unwrap();
        assert_eq!(Tuning::from_options(&o), Tuning::default());
        let d = DeviceSettings::from_options(&o);
        assert_eq!(
            (d.profile.as_str(), d.bind_cache, d.no_coopmat),
            ("off", true, false)
        );
    }

    #[test]
    fn the_matmul_variable_words_map_onto_typed_options() {
        let env = env_of(&[(MATMUL_ENV, "tiled8, f32x,rows=8,dqruns=2")]);
        let t = Tuning::from_options(&resolve("", &env).unwrap());
        assert_eq!(t.matmul_path, Some("tiled8"));
        assert!(t.matmul_f32x);
        assert_eq!(t.matmul_rows, Some(8));
        assert_eq!(t.matmul_dqruns, Some(2));
    }

    #[test]
    fn params_win_over_the_environment() {
        let env = env_of(&[
            (MATMUL_ENV, "tiled"),
            ("BACKPLANE_WEBGPU_FLASH_ATTN", "plain"),
        ]);
        let o = resolve("matmul_path=matvec;flash_attn=vector", &env).unwrap();
        let t = Tuning::from_options(&o);
        assert_eq!(
            (t.matmul_path, t.flash_attn),
            (Some("matvec"), Some("vector"))
        );
    }

    #[test]
    fn bad_words_are_refused_naming_the_option_and_variable() {
        let env = env_of(&[(MATMUL_ENV, "fastest")]);
        let e = resolve("", &env).unwrap_err().to_string();
        assert!(e.starts_with("webgpu backend option 'matmul_fastest' (from BACKPLANE_WEBGPU_MATMUL): unknown option"), "{e}");
        let e = resolve("matmul_path=fastest", &env_of(&[]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("'fastest' is not one of: matvec, matvec-wg, tiled"),
            "{e}"
        );
        let e = resolve("matmul_rows=17", &env_of(&[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("17 is outside 1..=16"), "{e}");
    }

    #[test]
    fn the_older_profile_values_still_read() {
        for (v, want) in [("1", "kernels"), ("graph", "graph"), ("0", "off")] {
            let env = move |k: &str| (k == "BACKPLANE_WEBGPU_PROFILE").then(|| v.to_string());
            let d = DeviceSettings::from_options(&resolve("", &env).unwrap());
            assert_eq!(d.profile, want, "{v}");
        }
    }

    #[test]
    fn device_wide_options_are_refused_in_stream_params() {
        let e = refuse_device_wide("matmul_rows=2; bind_cache=0").unwrap_err();
        assert_eq!(e.key, "bind_cache");
        assert!(
            e.to_string().contains("set BACKPLANE_WEBGPU_BIND_CACHE"),
            "{e}"
        );
        assert!(refuse_device_wide("matmul_rows=2").is_ok());
    }
}
