//! Conformance for backplane backends: a catalogue of cases covering every
//! op, and a runner that checks a backend against the reference kernels
//! (`test`), times it (`perf`) and writes the op-support matrix (`support`).

pub mod case;
pub mod catalogue;
pub mod device_target;
pub mod guarded;
pub mod report;
pub mod runner;
pub mod target;
pub mod vectors;

pub use case::{Case, Fill, Work};
pub use catalogue::Catalogue;
pub use runner::{
    CaseResult, PerfOptions, PerfResult, Prepared, Status, compare, perf_case, test_case,
    test_prepared,
};
pub use target::{CpuTarget, Target};
