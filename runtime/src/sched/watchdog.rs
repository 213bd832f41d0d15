//! Calls into a device that may never return, bounded by a timeout.
//!
//! A plugin's `graph_compute` or `synchronize` can hang (a driver stuck, a
//! kernel that loops, a plugin that deadlocks). The host cannot interrupt a
//! thread that is inside foreign code, so each device gets one worker
//! thread that makes those calls; the scheduler waits for the answer at
//! most the device's timeout. Past it, the call is reported as timed out
//! and the worker is abandoned: it stays blocked in the plugin for as long
//! as the plugin keeps it (what cannot be recovered in process; running the
//! plugin in a child process is the way to get that back). The device is
//! then out of service for the scheduler.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::time::{Duration, Instant};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// How long the worker keeps looking for the next call after one returns
/// before it sleeps. A decode step's next call comes within the host's
/// work between tokens (reading the logits, the next inputs: about
/// 100-150 us on a GPU); waking a sleeping thread costs tens of
/// microseconds, and more on a server whose idle cores sleep deeply.
const WORKER_SPIN: Duration = Duration::from_micros(200);

/// The answer on `rx`, looked for during `spin` (yielding the core to any
/// other thread that wants it) and then waited for, within `timeout` in
/// all.
fn wait_for<R>(rx: &Receiver<R>, spin: Duration, timeout: Duration) -> Result<R, RecvTimeoutError> {
    let t0 = Instant::now();
    let spin = spin.min(timeout);
    loop {
        match rx.try_recv() {
            Ok(r) => return Ok(r),
            Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
            Err(TryRecvError::Empty) if t0.elapsed() < spin => std::thread::yield_now(),
            Err(TryRecvError::Empty) => {
                return rx.recv_timeout(timeout.saturating_sub(t0.elapsed()));
            }
        }
    }
}

/// The next job of `rx`: looked for during [`WORKER_SPIN`], then waited
/// for without a limit (`recv_timeout` waits like `recv` when the deadline
/// cannot be represented); `None` once the scheduler dropped its sender.
fn next_job(rx: &Receiver<Job>) -> Option<Job> {
    wait_for(rx, WORKER_SPIN, Duration::MAX).ok()
}

/// How long a caller looks for the answer of a call into a GPU before it
/// sleeps ([`Watchdog::for_device`]). While
/// a GPU works the host thread has nothing to do, and waking it from sleep
/// when the answer comes cost an NVIDIA H100's host about 8% of a 1b
/// model's decode (docs/models.md); looking costs a core while it lasts.
/// Past this (a long prefill), the caller sleeps.
pub(crate) const CALLER_SPIN: Duration = Duration::from_millis(20);

/// One device's call thread.
pub(crate) struct Watchdog {
    jobs: Option<SyncSender<Job>>,
    /// Set once a call timed out: the worker is stuck in the plugin.
    stuck: bool,
    /// How long a caller looks for the answer before it sleeps.
    caller_spin: Duration,
}

/// A call did not return within its time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallError {
    /// No answer within the timeout; the worker is abandoned.
    TimedOut,
    /// An earlier call timed out, so the device takes no more calls.
    Stuck,
}

impl Watchdog {
    /// A watchdog whose worker thread is started on the first call; its
    /// callers sleep while they wait.
    pub(crate) fn new() -> Watchdog {
        Watchdog {
            jobs: None,
            stuck: false,
            caller_spin: Duration::ZERO,
        }
    }

    /// The watchdog of a device: callers of a GPU (`gpu`) look for the
    /// answer during [`CALLER_SPIN`] before they sleep; callers of any
    /// other device (the host's CPU, whatever API it is behind, an emulated
    /// or remote accelerator) sleep at once, leaving the cores to it.
    pub(crate) fn for_device(gpu: bool) -> Watchdog {
        Watchdog {
            caller_spin: if gpu { CALLER_SPIN } else { Duration::ZERO },
            ..Watchdog::new()
        }
    }

    fn sender(&mut self, label: &str) -> SyncSender<Job> {
        if let Some(tx) = &self.jobs {
            return tx.clone();
        }
        let (tx, rx): (SyncSender<Job>, Receiver<Job>) = mpsc::sync_channel(1);
        let spawned = std::thread::Builder::new()
            .name(format!("backplane-{label}"))
            .spawn(move || {
                while let Some(job) = next_job(&rx) {
                    job();
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start the call thread for {label}: {e}; calls run inline");
        }
        self.jobs = Some(tx.clone());
        tx
    }

    /// Runs `f` on the device's worker thread and waits at most `timeout`
    /// for its result. `label` names the device in thread names and logs.
    pub(crate) fn call<R: Send + 'static>(
        &mut self,
        label: &str,
        timeout: Duration,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, CallError> {
        if self.stuck {
            return Err(CallError::Stuck);
        }
        let (done_tx, done_rx) = mpsc::sync_channel::<R>(1);
        let job: Job = Box::new(move || {
            let _ = done_tx.send(f());
        });
        let tx = self.sender(label);
        if let Err(mpsc::SendError(job)) = tx.send(job) {
            // The worker is gone (it could not start): call inline.
            job();
            return done_rx.recv().map_err(|_| CallError::Stuck);
        }
        match wait_for(&done_rx, self.caller_spin, timeout) {
            Ok(r) => Ok(r),
            Err(RecvTimeoutError::Timeout) => {
                self.stuck = true;
                self.jobs = None;
                Err(CallError::TimedOut)
            }
            // The job was dropped without answering: the plugin call
            // unwound through the worker (it should have been caught at
            // the boundary). Treat the device as stuck.
            Err(RecvTimeoutError::Disconnected) => {
                self.stuck = true;
                self.jobs = None;
                Err(CallError::Stuck)
            }
        }
    }

    /// True once a call timed out.
    pub(crate) fn is_stuck(&self) -> bool {
        self.stuck
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_waits_past_its_spin_for_the_next_job_and_stops_when_dropped() {
        let (tx, rx) = mpsc::sync_channel::<Job>(1);
        let (ran_tx, ran_rx) = mpsc::channel();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(WORKER_SPIN * 20);
            let _ = tx.send(Box::new(move || ran_tx.send(1).unwrap()));
            // `tx` drops here: the next wait ends.
        });
        next_job(&rx).expect("the late job")();
        assert_eq!(ran_rx.recv(), Ok(1));
        sender.join().unwrap();
        assert!(next_job(&rx).is_none());
    }

    #[test]
    fn call_returns_the_result_of_a_quick_call() {
        let mut w = Watchdog::new();
        assert_eq!(w.call("t", Duration::from_secs(5), || 41 + 1), Ok(42));
        assert_eq!(w.call("t", Duration::from_secs(5), || "again"), Ok("again"));
    }

    #[test]
    fn callers_of_a_gpu_look_for_the_answer_before_they_sleep() {
        assert_eq!(Watchdog::for_device(false).caller_spin, Duration::ZERO);
        let mut gpu = Watchdog::for_device(true);
        assert_eq!(gpu.caller_spin, CALLER_SPIN);
        // A call longer than the spin is still answered, and a hung one
        // still times out.
        let slow = gpu.call("t", Duration::from_secs(5), || {
            std::thread::sleep(CALLER_SPIN + Duration::from_millis(10));
            7
        });
        assert_eq!(slow, Ok(7));
        let (_hold, block) = mpsc::channel::<()>();
        let r = gpu.call("t", Duration::from_millis(5), move || {
            let _ = block.recv();
        });
        assert_eq!(r, Err(CallError::TimedOut));
    }

    #[test]
    fn a_call_past_its_timeout_is_reported_and_the_device_refuses_more() {
        let mut w = Watchdog::new();
        let (_hold, block) = mpsc::channel::<()>();
        let r = w.call("t", Duration::from_millis(50), move || {
            let _ = block.recv(); // blocks until the test ends
        });
        assert_eq!(r, Err(CallError::TimedOut));
        assert!(w.is_stuck());
        assert_eq!(
            w.call("t", Duration::from_secs(5), || 1),
            Err(CallError::Stuck)
        );
    }
}
