//! backplane: the library host programs link. It re-exports the runtime
//! ([`backplane_runtime`]: element types, tensors, the op set and graph
//! builder, host tensors, the plugin registry and the scheduler) and links
//! the CPU backend in as the built-in fallback the registry adds when no
//! `cpu` plugin loads ([`builtin_cpu`]). [`examples`] holds the demo graphs
//! `backplane explain` plans.

pub mod examples;

pub use backplane_runtime::*;

use backplane_abi::plugin::{RegBox, reg_object};
use backplane_cpu::plugin::{CPU_OPTIONS, CpuReg, Isa, score};
use registry::BuiltinBackend;

/// The CPU backend linked into this library, to hand to the registry
/// ([`registry::RegistryOptions::builtin`]): the fallback every host has,
/// at the best instruction-set level this machine runs.
pub fn builtin_cpu() -> BuiltinBackend {
    BuiltinBackend {
        name: sched::CPU_BACKEND,
        register: register_cpu,
        options: CPU_OPTIONS,
    }
}

/// The built-in CPU backend's registration and its score on this machine.
fn register_cpu() -> (RegBox, u32) {
    let isa = Isa::detect();
    (reg_object(CpuReg::new(isa)), score(isa))
}
