//! `BACKPLANE_WEBGPU_PROFILE=steps`: GPU timestamps between the barriers
//! of a native replay, so a graph's time on the GPU is seen step by step
//! as it really runs (barriers, kernels side by side, weights coming from
//! memory), not kernel by kernel in passes of their own as `kernels`
//! times them.
//!
//! A step is the run of kernels between two barriers. A timestamp is
//! written at the bottom of the pipe before every barrier (and after the
//! first, and at the end), so step k's time is from the end of step k - 1
//! to its own end: its barrier, its launches and its kernels. Each
//! recording keeps per-step totals over its executions; the recordings
//! run at least twice are printed at exit, step by step and summed by
//! the kernels a step holds.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Once};

use ash::vk;

use crate::lock;
use crate::replay::Step;

/// Per-step totals of one recording.
struct Table {
    /// What each step runs: its kernels' labels and workgroup counts.
    steps: Vec<String>,
    /// Nanoseconds summed per step, and the executions read.
    total_ns: Vec<f64>,
    runs: u64,
}

/// Every timed recording's table, printed by the exit hook.
static TABLES: Mutex<Vec<Arc<Mutex<Table>>>> = Mutex::new(Vec::new());

unsafe extern "C" {
    fn atexit(cb: extern "C" fn()) -> i32;
}

extern "C" fn report_all() {
    for t in lock(&TABLES).iter() {
        print_table(&lock(t));
    }
}

fn print_table(t: &Table) {
    if t.runs < 2 || t.steps.is_empty() {
        return;
    }
    let runs = t.runs as f64;
    let sum: f64 = t.total_ns.iter().sum::<f64>() / runs;
    eprintln!(
        "backplane-webgpu step profile: a graph of {} steps run {} times, {:.1} us per run on the GPU",
        t.steps.len(),
        t.runs,
        sum / 1e3
    );
    let mut groups: BTreeMap<&str, (f64, u64)> = BTreeMap::new();
    for (what, ns) in t.steps.iter().zip(&t.total_ns) {
        let g = groups.entry(what.as_str()).or_default();
        g.0 += ns / runs;
        g.1 += 1;
    }
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by(|a, b| b.1.0.total_cmp(&a.1.0));
    eprintln!(
        "{:>10} {:>6} {:>10} {:>6}  step (kernels, workgroups)",
        "us/run", "steps", "us/step", "share"
    );
    for (what, (ns, n)) in groups {
        eprintln!(
            "{:>10.1} {:>6} {:>10.2} {:>5.1}%  {what}",
            ns / 1e3,
            n,
            ns / 1e3 / n as f64,
            100.0 * ns / sum.max(1.0)
        );
    }
    eprintln!("step by step (us per run):");
    for (i, (what, ns)) in t.steps.iter().zip(&t.total_ns).enumerate() {
        eprintln!("{i:>5} {:>9.2}  {what}", ns / runs / 1e3);
    }
}

/// One timed recording's steps as measured so far.
#[derive(Clone, Debug)]
pub struct StepProfile {
    /// What each step runs: its kernels' labels and workgroup counts.
    pub steps: Vec<String>,
    /// Executions whose timestamps were read.
    pub runs: u64,
    /// Mean nanoseconds per step over those executions.
    pub mean_ns: Vec<f64>,
}

/// Every recording timed in this process (`profile=steps`), as printed at
/// exit.
pub fn step_profiles() -> Vec<StepProfile> {
    lock(&TABLES)
        .iter()
        .map(|t| {
            let t = lock(t);
            let runs = t.runs.max(1) as f64;
            StepProfile {
                steps: t.steps.clone(),
                runs: t.runs,
                mean_ns: t.total_ns.iter().map(|ns| ns / runs).collect(),
            }
        })
        .collect()
}

/// What a step runs, as its line in the table.
fn describe(steps: &[Step]) -> String {
    let parts: Vec<String> = steps
        .iter()
        .map(|s| {
            let [x, y, z] = s.groups;
            format!("{} ({x}x{y}x{z})", s.pipeline.label)
        })
        .collect();
    parts.join(" + ")
}

/// Whether kernel `i` starts a timed step: the first kernel, and each
/// one after a barrier (the kernels between two barriers run together, so
/// only their sum can be timed).
pub fn starts_step(i: usize, barrier_before: &[bool]) -> bool {
    i == 0 || barrier_before[i]
}

/// The timestamps of one recording.
pub struct StepTimer {
    pool: vk::QueryPool,
    /// Queries written per execution (steps + 1).
    queries: u32,
    /// Nanoseconds per timestamp tick.
    period_ns: f64,
    /// Bits of a timestamp that count.
    valid_bits: u32,
    table: Arc<Mutex<Table>>,
}

impl StepTimer {
    /// A timer for `steps` cut where [`starts_step`] says, or why the
    /// device cannot time them.
    pub fn new(
        instance: &ash::Instance,
        pd: vk::PhysicalDevice,
        dev: &ash::Device,
        family: u32,
        steps: &[Step],
        barrier_before: &[bool],
    ) -> Result<StepTimer, String> {
        // SAFETY: valid instance and physical device from wgpu-hal.
        let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
        let valid_bits = families
            .get(family as usize)
            .map_or(0, |f| f.timestamp_valid_bits);
        if valid_bits == 0 {
            return Err("the queue family has no timestamps".into());
        }
        // SAFETY: as above.
        let limits = unsafe { instance.get_physical_device_properties(pd) }.limits;
        let mut cuts: Vec<usize> = (0..steps.len())
            .filter(|&i| starts_step(i, barrier_before))
            .collect();
        cuts.push(steps.len());
        let described: Vec<String> = cuts
            .windows(2)
            .map(|w| describe(&steps[w[0]..w[1]]))
            .collect();
        let queries = described.len() as u32 + 1;
        let info = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::TIMESTAMP)
            .query_count(queries);
        // SAFETY: valid device; the create info lives across the call.
        let pool = unsafe { dev.create_query_pool(&info, None) }
            .map_err(|e| format!("timestamp query pool: {e}"))?;
        let table = Arc::new(Mutex::new(Table {
            total_ns: vec![0.0; described.len()],
            steps: described,
            runs: 0,
        }));
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            // SAFETY: registering a plain function with the C library.
            unsafe { atexit(report_all) };
        });
        lock(&TABLES).push(Arc::clone(&table));
        Ok(StepTimer {
            pool,
            queries,
            period_ns: f64::from(limits.timestamp_period),
            valid_bits,
            table,
        })
    }

    /// Records the reset of the queries (first, before any timestamp).
    pub fn reset(&self, dev: &ash::Device, cb: vk::CommandBuffer) {
        // SAFETY: `cb` is recording, outside any render pass.
        unsafe { dev.cmd_reset_query_pool(cb, self.pool, 0, self.queries) };
    }

    /// Records timestamp `at` once everything before it has finished.
    pub fn mark(&self, dev: &ash::Device, cb: vk::CommandBuffer, at: u32) {
        // SAFETY: `cb` is recording; `at` < `queries` (the caller counts
        // steps as `new` cut them).
        unsafe {
            dev.cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, self.pool, at)
        };
    }

    /// Adds the timestamps of the execution that just finished (the
    /// caller waited for it) to the table.
    pub fn collect(&self, dev: &ash::Device) {
        let mut ticks = vec![0u64; self.queries as usize];
        // SAFETY: the pool's queries were all written by the finished
        // execution; the slice has one u64 per query.
        let read = unsafe {
            dev.get_query_pool_results(self.pool, 0, &mut ticks, vk::QueryResultFlags::TYPE_64)
        };
        if read.is_err() {
            return;
        }
        let mask = if self.valid_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.valid_bits) - 1
        };
        let mut t = lock(&self.table);
        for (k, w) in ticks.windows(2).enumerate() {
            let d = (w[1] & mask).wrapping_sub(w[0] & mask) & mask;
            t.total_ns[k] += d as f64 * self.period_ns;
        }
        t.runs += 1;
    }

    /// Destroys the pool.
    ///
    /// # Safety
    /// No execution that writes it may be pending.
    pub unsafe fn destroy(&self, dev: &ash::Device) {
        // SAFETY: by the caller's guarantee.
        unsafe { dev.destroy_query_pool(self.pool, None) };
    }
}
