//! The CPU backend's threads: the thread that runs a graph plus `n - 1`
//! workers, as ggml runs its graphs. A parallel section ([`WorkerPool::
//! broadcast`]) runs one function on every thread at once, the calling
//! thread included, and returns when all are done.
//!
//! A decoded token is some 400 ops, most of them short, so what matters
//! is the hand-off between sections: workers wait for the next one by
//! spinning (then yielding) for [`SPIN`], and only then sleep on a
//! condition variable. A general-purpose pool that parks its workers
//! between sections and wakes them through the kernel spent about a tenth
//! of a CPU decode in the scheduler (context switches and wake-ups).

use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker waits for the next section before sleeping:
/// longer than the gaps between the sections of one graph, short enough
/// that an idle backend costs nothing measurable.
const SPIN: Duration = Duration::from_micros(300);

/// Past this much waiting, waiters yield their core between checks, so
/// that a machine with more runnable threads than cores (tests in
/// parallel) lets the thread they wait for run.
const SPIN_ONLY: Duration = Duration::from_micros(30);

/// The section being run, its lifetime erased: [`WorkerPool::broadcast`]
/// does not return before every worker is done with it.
type Job = *const (dyn Fn(usize) + Sync + 'static);

struct Shared {
    /// Bumped once per section; workers run each generation exactly once.
    generation: AtomicU64,
    /// The current section (written before `generation` is bumped, read
    /// after it is seen).
    job: UnsafeCell<Option<Job>>,
    /// Workers still running the current section.
    pending: AtomicUsize,
    /// Workers asleep (guarded count) and their wake-up.
    sleepers: Mutex<usize>,
    wake: Condvar,
    shutdown: AtomicBool,
    /// The first panic of a worker in the current section.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

// SAFETY: `job` is written only by the thread holding the pool's run lock
// while no worker reads it (all finished the previous section), and read
// by workers only between the Release bump of `generation` they observe
// and their decrement of `pending`.
unsafe impl Sync for Shared {}
// SAFETY: as above; the raw pointer it holds is only dereferenced while
// the function it points to is alive.
unsafe impl Send for Shared {}

thread_local! {
    /// Whether this thread is inside a section of some pool (a nested
    /// broadcast then runs inline).
    static IN_SECTION: Cell<bool> = const { Cell::new(false) };
}

/// `n` threads (the caller and `n - 1` workers) that run parallel sections.
pub struct WorkerPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// One section at a time.
    run: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits until `done()`, spinning, then (past [`SPIN_ONLY`]) yielding;
/// gives up after `limit` if one is given. Whether `done()` came true.
fn spin_until(done: impl Fn() -> bool, limit: Option<Duration>) -> bool {
    let start = Instant::now();
    let mut spins = 0u32;
    while !done() {
        spins = spins.wrapping_add(1);
        if !spins.is_multiple_of(64) {
            std::hint::spin_loop();
            continue;
        }
        let waited = start.elapsed();
        if limit.is_some_and(|l| waited >= l) {
            return false;
        }
        if waited > SPIN_ONLY {
            std::thread::yield_now();
        }
    }
    true
}

impl WorkerPool {
    /// A pool of `n` threads (at least 1): the calling thread of each
    /// section and `n - 1` workers named `backplane-cpu-<i>`.
    pub fn new(n: usize) -> std::io::Result<WorkerPool> {
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            job: UnsafeCell::new(None),
            pending: AtomicUsize::new(0),
            sleepers: Mutex::new(0),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
            panic: Mutex::new(None),
        });
        let mut pool = WorkerPool {
            shared,
            workers: Vec::new(),
            run: Mutex::new(()),
        };
        for index in 1..n.max(1) {
            let shared = Arc::clone(&pool.shared);
            let handle = std::thread::Builder::new()
                .name(format!("backplane-cpu-{index}"))
                .spawn(move || worker(&shared, index))?;
            pool.workers.push(handle);
        }
        Ok(pool)
    }

    /// Threads in a section, the caller included.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `f(thread)` for every `thread` in `0..self.threads()` at once
    /// (the caller runs 0) and returns when all have returned. A panic in
    /// any of them is resumed here once all are done. Called from inside a
    /// section, it runs every `f(thread)` in turn on the calling thread.
    pub fn broadcast(&self, f: &(dyn Fn(usize) + Sync)) {
        if self.workers.is_empty() || IN_SECTION.with(Cell::get) {
            (0..self.threads()).for_each(f);
            return;
        }
        let _one_at_a_time = lock(&self.run);
        let shared = &*self.shared;
        // SAFETY: only the lifetime is erased; the workers' last use of
        // the pointer happens before `pending` reaches zero below, and
        // this function does not return (or unwind) before that.
        let job: Job = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), Job>(f) };
        // SAFETY: we hold the run lock and every worker finished the
        // previous section (pending was zero), so no one reads `job`.
        unsafe { *shared.job.get() = Some(job) };
        shared.pending.store(self.workers.len(), Ordering::Relaxed);
        shared.generation.fetch_add(1, Ordering::Release);
        if *lock(&shared.sleepers) > 0 {
            shared.wake.notify_all();
        }
        IN_SECTION.with(|s| s.set(true));
        let mine = catch_unwind(AssertUnwindSafe(|| f(0)));
        IN_SECTION.with(|s| s.set(false));
        spin_until(|| shared.pending.load(Ordering::Acquire) == 0, None);
        if let Err(p) = mine {
            resume_unwind(p);
        }
        if let Some(p) = lock(&shared.panic).take() {
            resume_unwind(p);
        }
    }

    /// Runs `f(thread, item)` once for every item in `0..items`, handing
    /// items out in order to whichever thread is free; on the calling
    /// thread alone when there is one thread or one item.
    pub fn for_each_item(&self, items: usize, f: &(dyn Fn(usize, usize) + Sync)) {
        if self.workers.is_empty() || items <= 1 {
            (0..items).for_each(|i| f(0, i));
            return;
        }
        let next = AtomicUsize::new(0);
        self.broadcast(&|thread| {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= items {
                    break;
                }
                f(thread, i);
            }
        });
    }
}

fn worker(shared: &Shared, index: usize) {
    IN_SECTION.with(|s| s.set(true));
    let mut seen = 0u64;
    let stop_waiting = |seen: u64| {
        shared.shutdown.load(Ordering::Acquire) || shared.generation.load(Ordering::Acquire) != seen
    };
    loop {
        if !spin_until(|| stop_waiting(seen), Some(SPIN)) {
            // Sleep until the next section (or shutdown). The count and
            // the check are under the lock the publisher takes after its
            // bump, so a bump is either seen here or followed by a wake.
            let mut sleepers = lock(&shared.sleepers);
            *sleepers += 1;
            while !stop_waiting(seen) {
                sleepers = shared
                    .wake
                    .wait(sleepers)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            *sleepers -= 1;
        }
        if shared.shutdown.load(Ordering::Acquire) {
            return;
        }
        seen += 1;
        // SAFETY: the publisher wrote the job before the Release bump this
        // thread observed, and keeps it alive until `pending` reaches zero.
        if let Some(job) = unsafe { *shared.job.get() } {
            // SAFETY: as above, the function outlives this call.
            let f = unsafe { &*job };
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(index))) {
                lock(&shared.panic).get_or_insert(p);
            }
        }
        shared.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        {
            let _sleepers = lock(&self.shared.sleepers);
            self.shared.wake.notify_all();
        }
        for handle in self.workers.drain(..) {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thread_runs_each_section_once() {
        let pool = WorkerPool::new(3).unwrap();
        for _ in 0..1000 {
            let hits: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
            pool.broadcast(&|t| {
                hits[t].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
    }

    #[test]
    fn for_each_item_runs_every_item_exactly_once() {
        for threads in [1, 3] {
            let pool = WorkerPool::new(threads).unwrap();
            for items in [0, 1, 2, 7, 1000] {
                let hits: Vec<AtomicUsize> = (0..items).map(|_| AtomicUsize::new(0)).collect();
                pool.for_each_item(items, &|thread, i| {
                    assert!(thread < threads);
                    hits[i].fetch_add(1, Ordering::Relaxed);
                });
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
            }
        }
    }

    #[test]
    fn sections_after_the_workers_slept_still_run_everywhere() {
        let pool = WorkerPool::new(2).unwrap();
        for _ in 0..3 {
            std::thread::sleep(SPIN * 4);
            let sum = AtomicUsize::new(0);
            pool.broadcast(&|t| {
                sum.fetch_add(t + 1, Ordering::Relaxed);
            });
            assert_eq!(sum.load(Ordering::Relaxed), 3);
        }
    }

    #[test]
    fn a_panicking_worker_is_resumed_in_the_caller_and_the_pool_goes_on() {
        let pool = WorkerPool::new(2).unwrap();
        let caught = catch_unwind(AssertUnwindSafe(|| {
            pool.broadcast(&|t| {
                if t == 1 {
                    panic!("worker {t} fails");
                }
            })
        }));
        assert!(caught.is_err());
        let n = AtomicUsize::new(0);
        pool.broadcast(&|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_nested_section_runs_inline() {
        let pool = WorkerPool::new(2).unwrap();
        let n = AtomicUsize::new(0);
        pool.broadcast(&|_| {
            pool.broadcast(&|_| {
                n.fetch_add(1, Ordering::Relaxed);
            })
        });
        assert_eq!(n.load(Ordering::Relaxed), 4);
    }

    #[test]
    fn one_thread_runs_on_the_caller() {
        let pool = WorkerPool::new(1).unwrap();
        let caller = std::thread::current().id();
        pool.broadcast(&|t| {
            assert_eq!(t, 0);
            assert_eq!(std::thread::current().id(), caller);
        });
    }
}
