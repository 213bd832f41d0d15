//! Which device runs what: the scheduler's device list and each layer's
//! backend, following llama.cpp's `-ngl` rule.

use std::path::PathBuf;

use backplane::registry::{Device, Registry, RegistryOptions, SearchPath};
use backplane::sched::priority_order;

use crate::error::LlmError;
use crate::weights::Role;

/// How layers are spread when several devices are named (llama.cpp's
/// `--split-mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SplitMode {
    /// Only the first named device is used.
    None,
    /// Each device gets a contiguous range of layers (the default).
    #[default]
    Layer,
}

impl std::str::FromStr for SplitMode {
    type Err = String;
    fn from_str(s: &str) -> Result<SplitMode, String> {
        match s {
            "none" => Ok(SplitMode::None),
            "layer" => Ok(SplitMode::Layer),
            other => Err(format!("split mode '{other}': expected layer or none")),
        }
    }
}

/// Where the layers go when [`crate::LoadOptions::device`] names several
/// devices (`"A,B"`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Split {
    /// Layer ranges per device, or only the first device.
    pub mode: SplitMode,
    /// Share of the layers of each named device, in order (llama.cpp's
    /// `--tensor-split 3,1`). Empty or all zero: in proportion to each
    /// device's free memory.
    pub tensor_split: Vec<f32>,
}

/// The devices a model runs on and where each part lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// `backend:device` of the offload devices (several joined by commas),
    /// or `cpu`.
    pub device: String,
    /// `backend:device` of each scheduler backend, the CPU last.
    pub backends: Vec<String>,
    /// Backend index (in the scheduler) of each transformer block.
    pub layer_backend: Vec<usize>,
    /// Backend index of the output norm and projection.
    pub output_backend: usize,
    /// Backend index of the CPU (the last one).
    pub cpu_backend: usize,
}

impl Placement {
    /// The backend a weight of `role` is placed on.
    pub fn backend_of(&self, role: Role) -> usize {
        match role {
            Role::Input => self.cpu_backend,
            Role::Layer(l) => self.layer_backend[l],
            Role::Output => self.output_backend,
        }
    }

    /// Layers placed on an offload device (not the CPU).
    pub fn offloaded_layers(&self) -> usize {
        self.layer_backend
            .iter()
            .filter(|&&b| b != self.cpu_backend)
            .count()
    }
}

/// Loads the registry: `plugin_dirs` first, then the default places.
pub fn registry(plugin_dirs: &[PathBuf]) -> Registry {
    Registry::load(&RegistryOptions {
        search: SearchPath {
            host_dirs: plugin_dirs.to_vec(),
            ..SearchPath::default()
        },
        builtin: Some(backplane::builtin_cpu()),
    })
}

fn device_label(d: &Device) -> String {
    format!("{}:{}", d.backend(), d.name())
}

/// The scheduler's devices and which of them take layers.
#[derive(Clone, Debug)]
pub struct Chosen {
    /// The scheduler's devices: the offload devices in the order named,
    /// then the CPU.
    pub devices: Vec<Device>,
    /// Backend index of each named device, in the order named (the CPU's
    /// when `cpu` is named).
    pub targets: Vec<usize>,
}

/// Picks the scheduler's devices for `requested`: one entry or several
/// separated by commas, each `cpu`, `auto`, a backend name such as
/// `webgpu`, or `backend:device`. The offload devices come first, then the
/// CPU; with [`SplitMode::None`] only the first entry counts.
pub fn choose_devices(
    registry: &Registry,
    requested: &str,
    mode: SplitMode,
) -> Result<Chosen, LlmError> {
    let all: Vec<Device> = registry.devices().cloned().collect();
    let listing = || {
        let names: Vec<String> = all.iter().map(device_label).collect();
        if names.is_empty() {
            "no devices are loaded".to_string()
        } else {
            format!("devices here: {}", names.join(", "))
        }
    };
    let cpu = all
        .iter()
        .find(|d| d.backend() == "cpu")
        .cloned()
        .ok_or_else(|| LlmError::Device {
            requested: requested.into(),
            reason: format!("the CPU backend is not loaded ({})", listing()),
        })?;
    let mut entries: Vec<&str> = requested.split(',').map(str::trim).collect();
    if mode == SplitMode::None {
        entries.truncate(1);
    }
    let mut picked: Vec<Device> = Vec::new();
    for entry in &entries {
        let chosen = match *entry {
            "auto" => priority_order(all.clone()).into_iter().next(),
            "cpu" => Some(cpu.clone()),
            name => all
                .iter()
                .find(|d| d.backend() == name || device_label(d) == name || d.name() == name)
                .cloned(),
        };
        let chosen = chosen.ok_or_else(|| {
            let why = registry
                .backend(entry)
                .and_then(|b| b.no_device_reason.clone())
                .map_or_else(String::new, |r| format!("the backend has no device: {r}; "));
            LlmError::Device {
                requested: requested.into(),
                reason: format!("{why}no such device '{entry}' ({})", listing()),
            }
        })?;
        if picked
            .iter()
            .any(|d| device_label(d) == device_label(&chosen))
        {
            return Err(LlmError::Device {
                requested: requested.into(),
                reason: format!(
                    "'{entry}' names {} again: each device may be listed once",
                    device_label(&chosen)
                ),
            });
        }
        picked.push(chosen);
    }
    let mut devices: Vec<Device> = picked
        .iter()
        .filter(|d| d.backend() != "cpu")
        .cloned()
        .collect();
    devices.push(cpu);
    let cpu_backend = devices.len() - 1;
    let mut next = 0;
    let targets = picked
        .iter()
        .map(|d| {
            if d.backend() == "cpu" {
                cpu_backend
            } else {
                next += 1;
                next - 1
            }
        })
        .collect();
    Ok(Chosen { devices, targets })
}

/// Each named device's share of the layers: `tensor_split` when given and
/// not all zero, else each device's free memory (the CPU's memory for a
/// device that reports none), as llama.cpp does.
pub fn shares(chosen: &Chosen, tensor_split: &[f32]) -> Result<Vec<f64>, LlmError> {
    let n = chosen.targets.len();
    if !tensor_split.is_empty() && tensor_split.iter().any(|&r| r != 0.0) {
        if tensor_split.len() != n {
            return Err(LlmError::Input(format!(
                "tensor split {tensor_split:?} has {} ratios for {n} devices",
                tensor_split.len()
            )));
        }
        if let Some(bad) = tensor_split.iter().find(|r| !r.is_finite() || **r < 0.0) {
            return Err(LlmError::Input(format!(
                "tensor split {tensor_split:?}: ratio {bad} is not a finite number >= 0"
            )));
        }
        return Ok(tensor_split.iter().map(|&r| f64::from(r)).collect());
    }
    let cpu = &chosen.devices[chosen.devices.len() - 1];
    Ok(chosen
        .targets
        .iter()
        .map(|&b| {
            let m = chosen.devices[b].memory();
            let m = if m.free_bytes == 0 && m.total_bytes == 0 {
                cpu.memory()
            } else {
                m
            };
            m.free_bytes as f64
        })
        .collect())
}

/// llama.cpp's layer assignment for `-ngl gpu_layers` (`None`: all) over
/// devices with `shares`: the output counts as layer `n_layer`; the last
/// `gpu_layers` of those `n_layer + 1` are offloaded, the rest stay on the
/// CPU. Offloaded layer `i` (counted from the first offloaded one, of `k`)
/// goes to the first device whose cumulative share, as a fraction of the
/// total, exceeds `i / k`; so each device gets a contiguous range, the
/// later devices the later layers. Returns, for each of the `n_layer + 1`
/// layers, the index into `shares` of its device, or `None` for the CPU.
pub fn split_layers(
    n_layer: usize,
    gpu_layers: Option<usize>,
    shares: &[f64],
) -> Vec<Option<usize>> {
    let all = n_layer + 1;
    let ngl = gpu_layers.unwrap_or(all).min(all);
    let first = all - ngl;
    let total: f64 = shares.iter().sum();
    let cumulative: Vec<f64> = shares
        .iter()
        .scan(0.0, |acc, s| {
            *acc += s;
            Some(*acc / total)
        })
        .collect();
    (0..all)
        .map(|il| {
            if il < first || shares.is_empty() || total <= 0.0 {
                return None;
            }
            let fraction = (il - first) as f64 / ngl as f64;
            let k = cumulative.iter().take_while(|&&c| c <= fraction).count();
            Some(k.min(shares.len() - 1))
        })
        .collect()
}

/// The placement of `n_layer` blocks and the output over `chosen`.
pub fn assign(
    chosen: &Chosen,
    n_layer: usize,
    gpu_layers: Option<usize>,
    shares: &[f64],
) -> Placement {
    let cpu_backend = chosen.devices.len() - 1;
    let backends: Vec<String> = chosen.devices.iter().map(device_label).collect();
    let offload: Vec<String> = chosen
        .targets
        .iter()
        .map(|&b| {
            if b == cpu_backend {
                "cpu".to_string()
            } else {
                backends[b].clone()
            }
        })
        .collect();
    let device = if cpu_backend == 0 {
        "cpu".to_string()
    } else {
        offload.join(",")
    };
    let on: Vec<usize> = split_layers(n_layer, gpu_layers, shares)
        .into_iter()
        .map(|k| k.map_or(cpu_backend, |k| chosen.targets[k]))
        .collect();
    Placement {
        device,
        backends,
        layer_backend: on[..n_layer].to_vec(),
        output_backend: on[n_layer],
        cpu_backend,
    }
}

#[cfg(test)]
mod tests {
    use super::split_layers;

    #[test]
    fn equal_shares_give_contiguous_ranges_and_the_output_to_the_last() {
        // 4 blocks + output over two devices: fractions 0, .2, .4 | .6, .8.
        let got = split_layers(4, None, &[1.0, 1.0]);
        assert_eq!(got, [Some(0), Some(0), Some(0), Some(1), Some(1)]);
    }

    #[test]
    fn ratios_three_to_one_put_three_quarters_on_the_first() {
        let got = split_layers(7, None, &[3.0, 1.0]);
        let first = got.iter().filter(|d| **d == Some(0)).count();
        assert_eq!(first, 6, "{got:?}");
        assert_eq!(got[7], Some(1));
    }

    #[test]
    fn gpu_layers_keep_the_first_layers_on_the_cpu() {
        // -ngl 3 of 4 blocks + output: blocks 0 and 1 stay on the CPU.
        let got = split_layers(4, Some(3), &[1.0, 1.0]);
        assert_eq!(got, [None, None, Some(0), Some(0), Some(1)]);
    }

    #[test]
    fn a_zero_share_gets_no_layer() {
        let got = split_layers(4, None, &[0.0, 1.0]);
        assert!(got.iter().all(|d| *d == Some(1)), "{got:?}");
    }
}
