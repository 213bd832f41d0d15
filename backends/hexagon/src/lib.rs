//! The Hexagon HTP backend: a plugin whose devices are sessions on a
//! Snapdragon compute DSP, reached through FastRPC, with the DSP-side
//! kernels written in C (`htp/`).
//!
//! Layers, top down:
//! - [`device`]: the backend contract (`Device`, `BufferType`, `Buffer`,
//!   `Backend`) over a session; `supports_op` answers from the same
//!   [`encode::plan_node`] that builds requests, plus the VTCM budget.
//! - [`session`]: the HMX clock vote at open, the request window, buffer ids.
//! - [`transport`]: `FastRpcTransport` (real DSP through
//!   `backplane-hexagon-sys`) and, with the `emulation` feature only,
//!   `EmulatedTransport` (the `htp/` C built for the host and run on a
//!   thread, see build.rs).
//! - [`msg`]: the wire records of `htp/htp-msg.h`.
//!
//! Without a DSP the plugin reports zero devices and why.
//!
//! # Two artifacts
//!
//! The plugin users load (`libbackplane_hexagon.so`, built without
//! features) holds the FastRPC path and the host build of the DSP's VTCM
//! planner, nothing else of the DSP C. The `emulation` feature adds the
//! emulated DSP with its fault injection (`emu_fault=...` in the session
//! URI) and, on Linux, builds the `libcdsprpc.so` test double; `cargo xtask
//! plugins` installs that build as `libbackplane_hexagon-emu.so` in its own
//! directory, `target/test-plugins/`, which only tests put on the plugin
//! search path (`BACKPLANE_PLUGIN_PATH`); there it outscores the shipped
//! file ([`plugin_score`]). The crate's own tests enable the feature.

pub mod device;
pub mod encode;
pub mod msg;
pub mod session;
pub mod transport;

use std::sync::Arc;

use backplane_abi::plugin::{Device, PluginError, Reg};
use backplane_abi::support::options::{
    OptionError, OptionKind, OptionSpec, Options, refuse_settled,
};
use backplane_hexagon_sys::CdspRpc;

pub use device::HexagonDevice;
pub use session::{Session, SessionConfig};
#[cfg(all(test, feature = "emulation"))]
mod tests;
#[cfg(all(test, feature = "emulation", target_os = "linux"))]
mod tests_fastrpc;

#[cfg(feature = "emulation")]
pub use transport::EmulatedTransport;
pub use transport::{FastRpcTransport, Transport, TransportError, session_uri};

/// Set to `1` to offer the emulated DSP (only the `emulation` build,
/// `libbackplane_hexagon-emu.so`, has one).
pub const ENV_EMULATE: &str = "BACKPLANE_HEXAGON_EMULATE";
/// Number of DSP sessions (devices) to open; default 1.
pub const ENV_SESSIONS: &str = "BACKPLANE_HEXAGON_SESSIONS";
/// Extra `key=value&...` options appended to session URIs (e.g. `emu_vtcm_kib=4096`).
pub const ENV_URI_OPTIONS: &str = "BACKPLANE_HEXAGON_URI_OPTIONS";
/// The FastRPC library to load instead of `libcdsprpc.so` from the loader
/// path (a full path; the tests point it at the test double built by build.rs).
pub const ENV_CDSPRPC: &str = "BACKPLANE_HEXAGON_CDSPRPC";
/// How long to wait for room in the DSP's queue or for a response, in
/// milliseconds (default 30000).
pub const ENV_TIMEOUT_MS: &str = "BACKPLANE_HEXAGON_TIMEOUT_MS";

/// The Hexagon backend's options. All are load-time: they say which
/// sessions (devices) the plugin opens when it loads, so they come from
/// their environment variables only; a stream's `init_backend` params
/// naming one are refused with the variable to set.
pub const HEXAGON_OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "emulate",
        kind: OptionKind::Bool,
        default: "off",
        meaning: "load-time: offer the emulated DSP (only the emulation build has one)",
        env: ENV_EMULATE,
    },
    OptionSpec {
        name: "sessions",
        kind: OptionKind::Integer { min: 1, max: 16 },
        default: "1",
        meaning: "load-time: DSP sessions (devices) to open",
        env: ENV_SESSIONS,
    },
    OptionSpec {
        name: "uri_options",
        kind: OptionKind::Text,
        default: "",
        meaning: "load-time: extra key=value&... options appended to session URIs",
        env: ENV_URI_OPTIONS,
    },
    OptionSpec {
        name: "cdsprpc",
        kind: OptionKind::Text,
        default: "",
        meaning: "load-time: the FastRPC library to load instead of libcdsprpc.so",
        env: ENV_CDSPRPC,
    },
    OptionSpec {
        name: "timeout_ms",
        kind: OptionKind::Integer {
            min: 1,
            max: 4_294_967,
        },
        default: "30000",
        meaning: "load-time: wait for room in the DSP's queue or for a response, in ms",
        env: ENV_TIMEOUT_MS,
    },
];

/// Refuses stream params: every Hexagon option is load-time (see
/// [`HEXAGON_OPTIONS`]); the error names the key and the variable to set.
pub fn refuse_stream_params(params: &str) -> Result<(), PluginError> {
    let why = "load-time: it chooses the sessions opened at load";
    refuse_settled("hexagon", HEXAGON_OPTIONS, params, |_| true, why)?;
    Ok(())
}

/// Why a build without the `emulation` feature opens nothing when asked
/// for the emulated DSP.
#[cfg(not(feature = "emulation"))]
const NO_EMULATION: &str = "BACKPLANE_HEXAGON_EMULATE=1 asks for the emulated DSP, which this \
     plugin does not contain: it is the test artifact libbackplane_hexagon-emu.so, which `cargo \
     xtask plugins` puts in target/test-plugins/ (add that directory to BACKPLANE_PLUGIN_PATH)";

/// What to try when no FastRPC library loads.
#[cfg(feature = "emulation")]
const NO_DSP_HINT: &str = " (set BACKPLANE_HEXAGON_EMULATE=1 for the emulated DSP)";
/// What to try when no FastRPC library loads.
#[cfg(not(feature = "emulation"))]
const NO_DSP_HINT: &str = "";

/// The score of this build as a plugin variant: 1 for the shipped build,
/// 2 for the `emulation` build, so that where a test puts the emulation
/// build's directory on the search path it is chosen over the shipped one.
/// (Scores are cached per file by the host, so they cannot depend on the
/// environment.)
pub const fn plugin_score() -> u32 {
    if cfg!(feature = "emulation") { 2 } else { 1 }
}

/// How [`HexagonReg`] opens its sessions.
#[derive(Clone, Debug, Default)]
pub struct RegOptions {
    /// Offer the emulated DSP instead of FastRPC sessions (a build
    /// without the `emulation` feature has none and says so).
    pub emulate: bool,
    /// Sessions (devices) to open; `None` = 1.
    pub sessions: Option<u32>,
    /// Extra `&key=value` options for the session URIs.
    pub uri_options: String,
    /// The FastRPC library; `None` = `libcdsprpc.so` from the loader path.
    pub cdsprpc_path: Option<String>,
    /// Queue and response timeout in microseconds; `None` = the default.
    pub timeout_us: Option<u32>,
}

impl RegOptions {
    /// The options `env` sets (the variables of [`HEXAGON_OPTIONS`]), or
    /// the first refused value.
    pub fn resolve(env: impl Fn(&str) -> Option<String>) -> Result<RegOptions, OptionError> {
        let o = Options::resolve("hexagon", HEXAGON_OPTIONS, "", env, &[])?;
        Ok(RegOptions {
            emulate: o.bool("emulate"),
            sessions: o
                .is_set("sessions")
                .then(|| o.integer("sessions"))
                .flatten()
                .and_then(|n| u32::try_from(n).ok()),
            uri_options: o.text("uri_options").unwrap_or_default(),
            cdsprpc_path: o.text("cdsprpc"),
            timeout_us: o
                .is_set("timeout_ms")
                .then(|| o.integer("timeout_ms"))
                .flatten()
                .and_then(|ms| u32::try_from(ms).ok())
                .map(|ms| ms.saturating_mul(1000)),
        })
    }

    /// The options the process environment sets ([`ENV_EMULATE`],
    /// [`ENV_SESSIONS`], [`ENV_URI_OPTIONS`], [`ENV_CDSPRPC`],
    /// [`ENV_TIMEOUT_MS`]); a refused value is an error.
    pub fn from_env() -> Result<RegOptions, OptionError> {
        RegOptions::resolve(|k| std::env::var(k).ok())
    }
}

/// The backend's registration: the sessions opened at load.
pub struct HexagonReg {
    devices: Vec<Arc<HexagonDevice>>,
    reason: Option<String>,
}

impl HexagonReg {
    /// Opens sessions as the environment says (see [`RegOptions::from_env`]);
    /// none, with the reason, when it holds a bad value.
    pub fn from_env() -> HexagonReg {
        match RegOptions::from_env() {
            Ok(o) => HexagonReg::with_options(&o),
            Err(e) => HexagonReg::none(e.to_string()),
        }
    }

    /// Opens sessions: emulated ones when `opts.emulate`, else FastRPC ones
    /// when the FastRPC library loads and the DSP answers; otherwise none,
    /// with why.
    pub fn with_options(opts: &RegOptions) -> HexagonReg {
        let n = opts.sessions.unwrap_or(1);
        let extra = opts.uri_options.as_str();
        let mut config = SessionConfig::default();
        if let Some(t) = opts.timeout_us {
            config.timeout_us = t.max(1);
        }
        if opts.emulate {
            #[cfg(feature = "emulation")]
            return HexagonReg::open_all(n, &config, |i| {
                Ok(Box::new(EmulatedTransport::open(&session_uri(i, extra))?)
                    as Box<dyn Transport>)
            });
            #[cfg(not(feature = "emulation"))]
            return HexagonReg::none(NO_EMULATION);
        }
        let api = match CdspRpc::load(opts.cdsprpc_path.as_deref()) {
            Ok(api) => Arc::new(api),
            Err(e) => {
                return HexagonReg::none(format!("no Hexagon DSP: cannot load {e}{NO_DSP_HINT}"));
            }
        };
        HexagonReg::open_all(n, &config, |i| {
            Ok(
                Box::new(FastRpcTransport::open(api.clone(), &session_uri(i, extra))?)
                    as Box<dyn Transport>,
            )
        })
    }

    /// A registration with no devices and the reason.
    pub fn none(reason: impl Into<String>) -> HexagonReg {
        HexagonReg {
            devices: Vec::new(),
            reason: Some(reason.into()),
        }
    }

    /// Opens `n` sessions through `open`, each started with `config` (its
    /// session id set); stops at the first failure and keeps the sessions
    /// opened so far (reason recorded if none opened).
    pub fn open_all(
        n: u32,
        config: &SessionConfig,
        open: impl Fn(u32) -> Result<Box<dyn Transport>, TransportError>,
    ) -> HexagonReg {
        let mut devices = Vec::new();
        let mut reason = None;
        for i in 0..n {
            let config = SessionConfig {
                session_id: i,
                ..config.clone()
            };
            let session = open(i)
                .map_err(|e| e.to_string())
                .and_then(|t| Session::open(t, config).map_err(|e| e.to_string()));
            match session {
                Ok(s) => devices.push(Arc::new(HexagonDevice::new(i as usize, s))),
                Err(e) => {
                    reason = Some(format!("DSP session {i}: {e}"));
                    break;
                }
            }
        }
        if !devices.is_empty() {
            reason = None;
        }
        HexagonReg { devices, reason }
    }
}

impl Reg for HexagonReg {
    fn name(&self) -> String {
        "hexagon".to_string()
    }

    fn devices(&self) -> Vec<Arc<dyn Device>> {
        self.devices
            .iter()
            .map(|d| d.clone() as Arc<dyn Device>)
            .collect()
    }

    fn no_device_reason(&self) -> Option<String> {
        self.reason.clone()
    }
}

backplane_abi::export_plugin! {
    reg: HexagonReg::from_env(),
    score: plugin_score(),
    options: HEXAGON_OPTIONS,
}

#[cfg(test)]
mod option_tests {
    use super::*;
    use backplane_abi::support::options::check_schema;

    #[test]
    fn load_time_options_come_from_their_variables() {
        assert_eq!(check_schema(HEXAGON_OPTIONS), Ok(()));
        let env = |k: &str| match k {
            ENV_EMULATE => Some("on".to_string()),
            ENV_SESSIONS => Some("3".to_string()),
            ENV_TIMEOUT_MS => Some("250".to_string()),
            _ => None,
        };
        let o = RegOptions::resolve(env).unwrap();
        assert!(o.emulate);
        assert_eq!(o.sessions, Some(3));
        assert_eq!(o.timeout_us, Some(250_000));
        assert_eq!(o.cdsprpc_path, None);
        let d = RegOptions::resolve(|_| None).unwrap();
        assert_eq!((d.emulate, d.sessions, d.timeout_us), (false, None, None));
    }

    #[test]
    fn bad_values_and_stream_params_are_refused_naming_the_variable() {
        let e = RegOptions::resolve(|k| (k == ENV_SESSIONS).then(|| "0".to_string())).unwrap_err();
        assert_eq!(
            e.to_string(),
            "hexagon backend option 'sessions' (from BACKPLANE_HEXAGON_SESSIONS): 0 is outside 1..=16"
        );
        let e = refuse_stream_params("sessions=2").unwrap_err();
        assert!(e.message.contains("set BACKPLANE_HEXAGON_SESSIONS"), "{e}");
        assert!(refuse_stream_params(" ").is_ok());
    }
}
