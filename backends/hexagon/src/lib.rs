//! The Hexagon HTP backend: a plugin whose devices are sessions on a
//! Snapdragon compute DSP, reached through FastRPC, with the DSP-side
//! kernels written in C (`htp/`).
//!
//! Layers, top down:
//! - [`device`]: the backend contract (`Device`, `BufferType`, `Buffer`,
//!   `Backend`) over a session; `supports_op` answers from the same
//!   [`encode::plan_node`] that builds requests, plus the VTCM budget.
//! - [`session`]: the HMX clock vote at open, the request window, buffer ids.
//! - [`transport`]: [`transport::FastRpcTransport`] (real DSP through
//!   `backplane-hexagon-sys`) and [`transport::EmulatedTransport`] (the
//!   `htp/` C built for the host and run on a thread, see build.rs).
//! - [`msg`]: the wire records of `htp/htp-msg.h`.
//!
//! Without a DSP the plugin reports zero devices and why; the emulated DSP
//! is offered only when `BACKPLANE_HEXAGON_EMULATE=1`.

pub mod device;
pub mod encode;
pub mod msg;
pub mod session;
pub mod transport;

use std::sync::Arc;

use backplane_abi::plugin::{Device, Reg};
use backplane_hexagon_sys::CdspRpc;

pub use device::HexagonDevice;
pub use session::{Session, SessionConfig};
#[cfg(test)]
mod tests;

pub use transport::{EmulatedTransport, FastRpcTransport, Transport, TransportError, session_uri};

/// Set to `1` to offer the emulated DSP.
pub const ENV_EMULATE: &str = "BACKPLANE_HEXAGON_EMULATE";
/// Number of DSP sessions (devices) to open; default 1.
pub const ENV_SESSIONS: &str = "BACKPLANE_HEXAGON_SESSIONS";
/// Extra `key=value&...` options appended to session URIs (e.g. `emu_vtcm_kib=4096`).
pub const ENV_URI_OPTIONS: &str = "BACKPLANE_HEXAGON_URI_OPTIONS";

/// The backend's registration: the sessions opened at load.
pub struct HexagonReg {
    devices: Vec<Arc<HexagonDevice>>,
    reason: Option<String>,
}

impl HexagonReg {
    /// Opens sessions as the environment says: emulated ones when
    /// `BACKPLANE_HEXAGON_EMULATE=1`, else FastRPC ones when
    /// `libcdsprpc.so` loads and the DSP answers; otherwise none, with why.
    pub fn from_env() -> HexagonReg {
        let n: u32 = std::env::var(ENV_SESSIONS)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1);
        let extra = std::env::var(ENV_URI_OPTIONS).unwrap_or_default();
        let emulate = std::env::var(ENV_EMULATE).is_ok_and(|v| v == "1");
        HexagonReg::with_options(emulate, n, &extra, None)
    }

    /// [`HexagonReg::from_env`] with explicit settings: `emulate` offers the
    /// emulated DSP, else FastRPC through `cdsprpc_path` (default
    /// `libcdsprpc.so`); `n` sessions with `extra` URI options.
    pub fn with_options(
        emulate: bool,
        n: u32,
        extra: &str,
        cdsprpc_path: Option<&str>,
    ) -> HexagonReg {
        if emulate {
            return HexagonReg::open_all(n, |i| {
                Ok(Box::new(EmulatedTransport::open(&session_uri(i, extra))?)
                    as Box<dyn Transport>)
            });
        }
        let api = match CdspRpc::load(cdsprpc_path) {
            Ok(api) => Arc::new(api),
            Err(e) => {
                return HexagonReg::none(format!(
                    "no Hexagon DSP: cannot load {e} (set {ENV_EMULATE}=1 for the emulated DSP)"
                ));
            }
        };
        HexagonReg::open_all(n, |i| {
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

    /// Opens `n` sessions through `open`; stops at the first failure and
    /// keeps the sessions opened so far (reason recorded if none opened).
    pub fn open_all(
        n: u32,
        open: impl Fn(u32) -> Result<Box<dyn Transport>, TransportError>,
    ) -> HexagonReg {
        let mut devices = Vec::new();
        let mut reason = None;
        for i in 0..n {
            let config = SessionConfig {
                session_id: i,
                ..SessionConfig::default()
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
    score: 1,
}
