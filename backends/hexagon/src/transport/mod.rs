//! How the host reaches a DSP session: the [`Transport`] trait and its two
//! implementations, [`FastRpcTransport`] (a real compute DSP through
//! `libcdsprpc.so`) and, in builds with the `emulation` feature only,
//! `EmulatedTransport` (the same DSP C built for the host, run on a host
//! thread).
//!
//! A transport is one opened session: the constructor opens it (FastRPC
//! `htp_iface_open`), the methods vote the HMX clock, query the DSP, start
//! the DSP's message loop on a queue, hand out shared memory, and move
//! request and response records. Dropping it stops and closes the session.

#[cfg(feature = "emulation")]
mod emulated;
mod fastrpc;

use std::fmt;

use backplane_hexagon_sys::HapPowerHmxV2;

#[cfg(feature = "emulation")]
pub use emulated::{EmulatedTransport, c_struct_sizes};
pub use fastrpc::FastRpcTransport;

use crate::msg::{HtpDspInfo, HtpReq, HtpRsp};

/// The URI of DSP session `session_id` of our DSP library, with extra
/// `&key=value` options appended (the emulation reads its `emu_*` options).
pub fn session_uri(session_id: u32, extra: &str) -> String {
    let mut uri = format!(
        "file:///libbackplane_htp_skel.so?htp_iface_skel_handle_invoke&_modver=1.0&_dom=cdsp&_session={session_id}"
    );
    for opt in extra.split('&').filter(|s| !s.is_empty()) {
        uri.push('&');
        uri.push_str(opt);
    }
    uri
}

/// Shared memory visible to host and DSP (rpcmem).
#[derive(Debug)]
pub struct SharedMem {
    /// Host address of the first byte.
    pub ptr: *mut u8,
    /// Size in bytes.
    pub size: u64,
    /// The fd the DSP maps it by.
    pub fd: i32,
}

// SAFETY: the memory is owned by the transport that allocated it and only
// released through `free_shared`; access to the bytes is the owner's duty.
unsafe impl Send for SharedMem {}
// SAFETY: as above.
unsafe impl Sync for SharedMem {}

/// A failure of a transport call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportError {
    /// The session could not be opened.
    Open {
        /// The session URI.
        uri: String,
        /// The library's error code.
        code: i32,
    },
    /// The HAP power request for the HMX clock was refused.
    HmxClock {
        /// The DSP's error code.
        code: i32,
    },
    /// The request queue had no room within the timeout.
    QueueFull {
        /// Microseconds waited.
        waited_us: u32,
    },
    /// No response arrived within the timeout.
    Timeout {
        /// Microseconds waited.
        waited_us: u32,
    },
    /// Another call failed.
    Call {
        /// The entry point.
        what: &'static str,
        /// Its error code.
        code: i32,
    },
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::Open { uri, code } => {
                write!(f, "opening DSP session {uri} failed with error {code:#x}")
            }
            TransportError::HmxClock { code } => {
                write!(
                    f,
                    "HAP power request for the HMX clock at its max corner failed with error {code:#x}"
                )
            }
            TransportError::QueueFull { waited_us } => {
                write!(
                    f,
                    "DSP request queue full: no room after {} ms",
                    waited_us / 1000
                )
            }
            TransportError::Timeout { waited_us } => {
                write!(f, "DSP did not answer within {} ms", waited_us / 1000)
            }
            TransportError::Call { what, code } => write!(f, "{what} failed with error {code:#x}"),
        }
    }
}

impl std::error::Error for TransportError {}

/// One opened DSP session.
pub trait Transport: Send + Sync {
    /// `"fastrpc"` or `"emulated"`.
    fn kind(&self) -> &'static str;
    /// Makes the HAP power request `req` (the HMX clock vote) on the DSP.
    fn vote_hmx_clock(&self, req: &HapPowerHmxV2) -> Result<(), TransportError>;
    /// What the DSP reports about itself.
    fn info(&self) -> Result<HtpDspInfo, TransportError>;
    /// Creates the message queue (`depth` requests) and starts the DSP loop on `n_hvx` threads.
    fn start(&self, session_id: u32, n_hvx: u32, depth: u32) -> Result<(), TransportError>;
    /// Allocates `size` bytes of shared memory and maps it into the DSP process.
    fn alloc_shared(&self, size: u64) -> Result<SharedMem, TransportError>;
    /// Unmaps and frees memory from `alloc_shared`.
    fn free_shared(&self, mem: &SharedMem);
    /// Queues one request, waiting at most `timeout_us` for room.
    fn write(&self, req: &HtpReq, timeout_us: u32) -> Result<(), TransportError>;
    /// Takes one response, waiting at most `timeout_us`.
    fn read(&self, timeout_us: u32) -> Result<HtpRsp, TransportError>;
}
