//! Intel device architectures and the capability families they belong to.
//!
//! The SYCL runtime names a device's architecture
//! (`sycl::ext::oneapi::experimental::info::device::architecture`, e.g.
//! `intel_gpu_acm_g10` for the Arc A770). As ggml's SYCL backend does, each
//! known GPU architecture maps to a [`Family`], ordered by capability, and
//! the families (plus a few single architectures) steer kernel choice in
//! [`crate::policy`]. Pure Rust: no runtime needed, tested everywhere.

use std::fmt;

/// A capability family, ordered from least to most capable (the derive of
/// `Ord` follows declaration order), as ggml's `sycl_intel_gpu_family`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// Not an Intel GPU we know: CPUs, other vendors, architectures newer
    /// than this table.
    Unknown,
    /// Integrated GPU without Xe cores (Broadwell .. Alder Lake, Xe-LP).
    IGpuNonXe,
    /// Integrated GPU with Xe cores (Meteor Lake and newer).
    IGpuXe,
    /// Discrete client / gaming GPU (DG1, Arc Alchemist, Battlemage).
    DGpuClient,
    /// Discrete data-centre GPU for AI (Ponte Vecchio).
    DGpuCloud,
}

impl Family {
    /// Every family, in capability order.
    pub const ALL: [Family; 5] = [
        Family::Unknown,
        Family::IGpuNonXe,
        Family::IGpuXe,
        Family::DGpuClient,
        Family::DGpuCloud,
    ];

    /// Short lower-case name shown in device descriptions.
    pub const fn name(self) -> &'static str {
        match self {
            Family::Unknown => "unknown",
            Family::IGpuNonXe => "igpu-non-xe",
            Family::IGpuXe => "igpu-xe",
            Family::DGpuClient => "dgpu-client",
            Family::DGpuCloud => "dgpu-cloud",
        }
    }

    /// True for the Intel GPU families (everything but `Unknown`).
    pub const fn is_intel_gpu(self) -> bool {
        !matches!(self, Family::Unknown)
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The architecture name of the Arc A770 / A750 (Alchemist G10), where the
/// Q4_0 mat-vec keeps dequantize-mat-vec (see [`crate::policy`]).
pub const ACM_G10: &str = "intel_gpu_acm_g10";

/// Every Intel GPU architecture of ggml's table, by the SYCL runtime's
/// canonical name (aliases such as `intel_gpu_dg2_g10` resolve to these),
/// in the order of the runtime's `device_architecture.def`.
pub const ARCHITECTURES: &[(&str, Family)] = &[
    ("intel_gpu_bdw", Family::IGpuNonXe),
    ("intel_gpu_skl", Family::IGpuNonXe),
    ("intel_gpu_kbl", Family::IGpuNonXe),
    ("intel_gpu_cfl", Family::IGpuNonXe),
    ("intel_gpu_apl", Family::IGpuNonXe),
    ("intel_gpu_glk", Family::IGpuNonXe),
    ("intel_gpu_whl", Family::IGpuNonXe),
    ("intel_gpu_aml", Family::IGpuNonXe),
    ("intel_gpu_cml", Family::IGpuNonXe),
    ("intel_gpu_icllp", Family::IGpuNonXe),
    ("intel_gpu_ehl", Family::IGpuNonXe),
    ("intel_gpu_tgllp", Family::IGpuNonXe),
    ("intel_gpu_rkl", Family::IGpuNonXe),
    ("intel_gpu_adl_s", Family::IGpuNonXe),
    ("intel_gpu_adl_p", Family::IGpuNonXe),
    ("intel_gpu_adl_n", Family::IGpuNonXe),
    ("intel_gpu_dg1", Family::DGpuClient),
    ("intel_gpu_acm_g10", Family::DGpuClient),
    ("intel_gpu_acm_g11", Family::DGpuClient),
    ("intel_gpu_acm_g12", Family::DGpuClient),
    ("intel_gpu_pvc", Family::DGpuCloud),
    ("intel_gpu_pvc_vg", Family::DGpuCloud),
    ("intel_gpu_mtl_u", Family::IGpuXe),
    ("intel_gpu_mtl_h", Family::IGpuXe),
    ("intel_gpu_arl_h", Family::IGpuXe),
    ("intel_gpu_bmg_g21", Family::DGpuClient),
    ("intel_gpu_bmg_g31", Family::DGpuClient),
    ("intel_gpu_lnl_m", Family::IGpuXe),
    ("intel_gpu_ptl_h", Family::IGpuXe),
    ("intel_gpu_ptl_u", Family::IGpuXe),
    ("intel_gpu_wcl", Family::IGpuXe),
];

/// Aliases the runtime accepts for the architectures above.
const ALIASES: &[(&str, &str)] = &[
    ("intel_gpu_bxt", "intel_gpu_apl"),
    ("intel_gpu_icl", "intel_gpu_icllp"),
    ("intel_gpu_jsl", "intel_gpu_ehl"),
    ("intel_gpu_tgl", "intel_gpu_tgllp"),
    ("intel_gpu_rpl_s", "intel_gpu_adl_s"),
    ("intel_gpu_dg2_g10", "intel_gpu_acm_g10"),
    ("intel_gpu_dg2_g11", "intel_gpu_acm_g11"),
    ("intel_gpu_dg2_g12", "intel_gpu_acm_g12"),
    ("intel_gpu_mtl_s", "intel_gpu_mtl_u"),
    ("intel_gpu_arl_u", "intel_gpu_mtl_u"),
    ("intel_gpu_arl_s", "intel_gpu_mtl_u"),
];

/// A device architecture as the runtime names it, with its family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Architecture {
    /// Canonical runtime name (`intel_gpu_acm_g10`, `intel_cpu_spr`,
    /// `x86_64`, `unknown`).
    pub name: String,
    /// Its capability family.
    pub family: Family,
}

impl Architecture {
    /// Looks `name` up (aliases accepted); unknown names keep their name
    /// and get [`Family::Unknown`].
    pub fn from_name(name: &str) -> Architecture {
        let canonical = ALIASES
            .iter()
            .find(|(a, _)| *a == name)
            .map_or(name, |(_, c)| c);
        let family = ARCHITECTURES
            .iter()
            .find(|(n, _)| *n == canonical)
            .map_or(Family::Unknown, |(_, f)| *f);
        Architecture {
            name: canonical.to_string(),
            family,
        }
    }

    /// True for the Arc A770 / A750 (Alchemist G10).
    pub fn is_acm_g10(&self) -> bool {
        self.name == ACM_G10
    }
}

impl fmt::Display for Architecture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.family)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_ordered_by_capability() {
        assert!(Family::IGpuNonXe < Family::IGpuXe);
        assert!(Family::IGpuXe < Family::DGpuClient);
        assert!(Family::DGpuClient < Family::DGpuCloud);
        assert!(Family::Unknown < Family::IGpuNonXe);
    }

    #[test]
    fn every_listed_architecture_maps_to_its_family() {
        assert_eq!(ARCHITECTURES.len(), 31);
        for &(name, family) in ARCHITECTURES {
            let a = Architecture::from_name(name);
            assert_eq!((a.name.as_str(), a.family), (name, family));
        }
    }

    #[test]
    fn seed_families_of_landmark_architectures() {
        let fam = |n| Architecture::from_name(n).family;
        assert_eq!(fam("intel_gpu_bdw"), Family::IGpuNonXe);
        assert_eq!(fam("intel_gpu_tgllp"), Family::IGpuNonXe);
        assert_eq!(fam("intel_gpu_acm_g10"), Family::DGpuClient);
        assert_eq!(fam("intel_gpu_bmg_g21"), Family::DGpuClient);
        assert_eq!(fam("intel_gpu_pvc"), Family::DGpuCloud);
        assert_eq!(fam("intel_gpu_lnl_m"), Family::IGpuXe);
        assert_eq!(fam("intel_gpu_wcl"), Family::IGpuXe);
    }

    #[test]
    fn aliases_resolve_to_the_canonical_architecture() {
        let a = Architecture::from_name("intel_gpu_dg2_g10");
        assert_eq!(a.name, ACM_G10);
        assert!(a.is_acm_g10());
        assert_eq!(
            Architecture::from_name("intel_gpu_arl_s").family,
            Family::IGpuXe
        );
    }

    #[test]
    fn cpus_and_unknown_names_are_unknown_family() {
        for n in ["intel_cpu_spr", "x86_64", "unknown", "nvidia_gpu_sm_90"] {
            let a = Architecture::from_name(n);
            assert_eq!(a.family, Family::Unknown, "{n}");
            assert_eq!(a.name, n);
        }
    }
}
