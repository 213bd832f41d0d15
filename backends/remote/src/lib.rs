//! The `remote` backend plugin: every device of the `backplane serve`
//! servers named in `BACKPLANE_REMOTE` appears as a local device.
//!
//! Configuration (environment, read once at load):
//! - `BACKPLANE_REMOTE=host:port,unix:/path,...` (a leading `servers=` is
//!   accepted): the servers.
//! - `BACKPLANE_REMOTE_TOKEN`: the shared token.
//! - `BACKPLANE_REMOTE_CA=/path/cert.pem`: the certificate to trust for TLS.
//! - `BACKPLANE_REMOTE_CERT=/path/client.pem`, `BACKPLANE_REMOTE_KEY=/path/client.key`:
//!   a client certificate and its key, for servers started with `--client-ca`.
//! - `BACKPLANE_REMOTE_INSECURE=1`: plain TCP (loopback servers only).
//! - `BACKPLANE_REMOTE_TIMEOUT_MS`: deadline of one call (default 60000).
//! - `BACKPLANE_REMOTE_ISOLATE=/path/libbackplane_x.so,...`: run each of
//!   these plugins in a child `backplane serve --unix` ([`isolate`]) and
//!   expose its devices, so that its crash or hang costs an error and a
//!   restart, not the host.
//!
//! Device names are `r<server>-<backend>-<device>`; a remote CPU is
//! reported as an accelerator (its memory is not this host's).

pub mod config;
pub mod device;
pub mod isolate;
pub mod verdicts;

use std::sync::Arc;

use backplane_abi::plugin::{Device, Reg};

/// The plugin's registration: the devices of every configured server.
pub struct RemoteReg {
    devices: Vec<Arc<dyn Device>>,
    problems: Vec<String>,
}

impl RemoteReg {
    /// Reads the configuration and asks each server for its devices; a
    /// server that cannot be reached is left out and named in
    /// `no_device_reason`.
    pub fn from_env() -> RemoteReg {
        let cfg = config::Config::from_env();
        let mut devices: Vec<Arc<dyn Device>> = Vec::new();
        let mut problems = cfg.problems.clone();
        for (k, server) in cfg.servers().into_iter().enumerate() {
            match device::server_devices(k, server) {
                Ok(mut d) => devices.append(&mut d),
                Err(e) => problems.push(e),
            }
        }
        RemoteReg { devices, problems }
    }
}

impl Reg for RemoteReg {
    fn name(&self) -> String {
        "remote".into()
    }

    fn devices(&self) -> Vec<Arc<dyn Device>> {
        self.devices.clone()
    }

    fn no_device_reason(&self) -> Option<String> {
        if self.problems.is_empty() {
            Some("no servers configured: set BACKPLANE_REMOTE=host:port,... or BACKPLANE_REMOTE_ISOLATE".into())
        } else {
            Some(self.problems.join("; "))
        }
    }
}

backplane_abi::export_plugin! {
    reg: RemoteReg::from_env(),
    score: 1,
    options: config::REMOTE_OPTIONS,
}
