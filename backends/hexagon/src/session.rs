//! A started DSP session: the HMX clock vote at open, the message window
//! (requests in flight), buffer ids, and the one lock that keeps requests
//! and responses in step.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use backplane_abi::plugin::PluginError;
use backplane_hexagon_sys::HapPowerHmxV2;

use crate::msg::{HtpDspInfo, HtpReq, HtpRsp, kind};
use crate::transport::{SharedMem, Transport, TransportError};

/// How a session is started.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// The session's index (FastRPC `_session`).
    pub session_id: u32,
    /// HVX threads to use (capped by the DSP's); `None` = all.
    pub n_hvx: Option<u32>,
    /// Requests the queue holds.
    pub queue_depth: u32,
    /// Requests the host keeps in flight before waiting for a response
    /// (normally `queue_depth`; larger only to test the queue-full path).
    pub max_in_flight: u32,
    /// How long to wait for room in the queue or for a response, in µs.
    pub timeout_us: u32,
}

impl Default for SessionConfig {
    fn default() -> SessionConfig {
        SessionConfig {
            session_id: 0,
            n_hvx: None,
            queue_depth: 64,
            max_in_flight: 64,
            timeout_us: 30_000_000,
        }
    }
}

struct Io {
    next_seq: u32,
    /// Set when requests and responses may be out of step; every later call fails with it.
    broken: Option<String>,
}

/// One DSP session, shared by the device's buffers and streams.
pub struct Session {
    transport: Box<dyn Transport>,
    info: HtpDspInfo,
    n_threads: u32,
    config: SessionConfig,
    io: Mutex<Io>,
    next_buffer: AtomicU64,
}

fn transport_err(context: &str, e: TransportError) -> PluginError {
    PluginError::other(format!("{context}: {e}"))
}

impl Session {
    /// Votes the HMX clock to its max corner (failure fails the open), asks
    /// the DSP what it has, and starts its message loop.
    pub fn open(
        transport: Box<dyn Transport>,
        config: SessionConfig,
    ) -> Result<Session, PluginError> {
        transport
            .vote_hmx_clock(&HapPowerHmxV2::max_clock())
            .map_err(|e| transport_err("opening the DSP session", e))?;
        let info = transport
            .info()
            .map_err(|e| transport_err("querying the DSP", e))?;
        let n_threads = config
            .n_hvx
            .unwrap_or(info.n_hvx)
            .clamp(1, info.n_hvx.max(1));
        transport
            .start(config.session_id, n_threads, config.queue_depth.max(1))
            .map_err(|e| transport_err("starting the DSP message loop", e))?;
        Ok(Session {
            transport,
            info,
            n_threads,
            config,
            io: Mutex::new(Io {
                next_seq: 1,
                broken: None,
            }),
            next_buffer: AtomicU64::new(1),
        })
    }

    /// What the DSP reported at open.
    pub fn info(&self) -> HtpDspInfo {
        self.info
    }

    /// HVX threads ops are split over.
    pub fn n_threads(&self) -> u32 {
        self.n_threads
    }

    /// `"fastrpc"` or `"emulated"`.
    pub fn transport_kind(&self) -> &'static str {
        self.transport.kind()
    }

    /// Allocates shared memory and binds a fresh buffer id to it on the DSP.
    pub fn alloc_buffer(&self, size: u64) -> Result<(u64, SharedMem), PluginError> {
        let mem = self.transport.alloc_shared(size).map_err(|e| {
            PluginError::out_of_memory(format!("shared buffer of {size} bytes: {e}"))
        })?;
        let id = self.next_buffer.fetch_add(1, Ordering::Relaxed);
        let mut req = HtpReq {
            kind: kind::MAP,
            ..HtpReq::default()
        };
        req.params[0] = mem.fd;
        req.dst.buf = id;
        req.dst.offset = size;
        if let Err(e) = self.run(std::slice::from_mut(&mut req), "mapping a buffer") {
            self.transport.free_shared(&mem);
            return Err(e);
        }
        Ok((id, mem))
    }

    /// Unbinds buffer `id` on the DSP and frees its memory.
    pub fn free_buffer(&self, id: u64, mem: &SharedMem) {
        let mut req = HtpReq {
            kind: kind::UNMAP,
            ..HtpReq::default()
        };
        req.dst.buf = id;
        // The DSP may be gone (broken session); the memory is freed regardless.
        let _ = self.run(std::slice::from_mut(&mut req), "unmapping a buffer");
        self.transport.free_shared(mem);
    }

    /// Sends `reqs` in order, keeping at most `max_in_flight` unanswered, and
    /// waits for every response. Returns the first DSP error (prefixed with
    /// `label(i)` of its request), or the transport failure (prefixed with
    /// `what`); a transport failure that may leave responses unread breaks
    /// the session for good.
    pub fn run(&self, reqs: &mut [HtpReq], what: &str) -> Result<(), PluginError> {
        let n = reqs.len();
        self.run_labelled(reqs, what, &|i| {
            format!("{what} (request {} of {n})", i + 1)
        })
    }

    /// [`Session::run`] with a label per request for DSP errors.
    pub fn run_labelled(
        &self,
        reqs: &mut [HtpReq],
        what: &str,
        label: &dyn Fn(usize) -> String,
    ) -> Result<(), PluginError> {
        let mut io = self.io.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(why) = &io.broken {
            return Err(PluginError::other(format!(
                "{what}: the DSP session is broken ({why})"
            )));
        }
        let first_seq = io.next_seq;
        let timeout = self.config.timeout_us;
        let window = self.config.max_in_flight.max(1) as usize;
        let mut first_err: Option<PluginError> = None;
        let (mut sent, mut answered) = (0usize, 0usize);
        let take = |answered: &mut usize,
                    first_err: &mut Option<PluginError>|
         -> Result<(), TransportError> {
            let rsp: HtpRsp = self.transport.read(timeout)?;
            let want = first_seq.wrapping_add(*answered as u32);
            if rsp.seq != want {
                return Err(TransportError::Call {
                    what: "response out of order",
                    code: rsp.seq as i32,
                });
            }
            if first_err.is_none() {
                *first_err = rsp.into_result(&label(*answered)).err();
            }
            *answered += 1;
            Ok(())
        };
        let mut failure: Option<TransportError> = None;
        for req in reqs.iter_mut() {
            req.seq = io.next_seq;
            if sent - answered >= window
                && let Err(e) = take(&mut answered, &mut first_err)
            {
                failure = Some(e);
                break;
            }
            if let Err(e) = self.transport.write(req, timeout) {
                failure = Some(e);
                break;
            }
            io.next_seq = io.next_seq.wrapping_add(1);
            sent += 1;
        }
        while failure.is_none() && answered < sent {
            if let Err(e) = take(&mut answered, &mut first_err) {
                failure = Some(e);
            }
        }
        if let Some(e) = failure {
            // Responses still owed would desynchronise every later call.
            while answered < sent {
                if take(&mut answered, &mut first_err).is_err() {
                    io.broken = Some(e.to_string());
                    break;
                }
            }
            return Err(transport_err(what, e));
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Waits until everything sent before is done.
    pub fn sync(&self) -> Result<(), PluginError> {
        let mut req = HtpReq {
            kind: kind::SYNC,
            ..HtpReq::default()
        };
        self.run(std::slice::from_mut(&mut req), "synchronizing")
    }
}
