//! Which device runs what: the scheduler's device list and each layer's
//! backend, following llama.cpp's `-ngl` rule.

use std::path::PathBuf;

use backplane::registry::{Device, Registry, RegistryOptions, SearchPath};
use backplane::sched::priority_order;

use crate::error::LlmError;
use crate::weights::Role;

/// The devices a model runs on and where each part lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// `backend:device` of the offload device, or `cpu`.
    pub device: String,
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

    /// Layers placed on the offload device.
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
        builtin_cpu: true,
    })
}

fn device_label(d: &Device) -> String {
    format!("{}:{}", d.backend(), d.name())
}

/// Picks the scheduler's devices for `requested` (`cpu`, `auto`, a backend
/// name such as `webgpu`, or `backend:device`): the chosen device first,
/// then the CPU; just the CPU when the choice is the CPU.
pub fn choose_devices(registry: &Registry, requested: &str) -> Result<Vec<Device>, LlmError> {
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
    let chosen = match requested {
        "auto" => priority_order(all.clone()).into_iter().next(),
        "cpu" => Some(cpu.clone()),
        name => all
            .iter()
            .find(|d| d.backend() == name || device_label(d) == name || d.name() == name)
            .cloned(),
    };
    let chosen = chosen.ok_or_else(|| {
        let why = registry
            .backend(requested)
            .and_then(|b| b.no_device_reason.clone())
            .map_or_else(String::new, |r| format!("the backend has no device: {r}; "));
        LlmError::Device {
            requested: requested.into(),
            reason: format!("{why}no such device ({})", listing()),
        }
    })?;
    if chosen.backend() == "cpu" {
        Ok(vec![cpu])
    } else {
        Ok(vec![chosen, cpu])
    }
}

/// llama.cpp's layer assignment for `-ngl gpu_layers` (`None`: all): the
/// output counts as layer `n_layer`, and the last `gpu_layers` of those
/// `n_layer + 1` go on the device. So 1 offloads only the output, and
/// `n_layer + 1` or more offload everything but the token embedding.
pub fn assign(devices: &[Device], n_layer: usize, gpu_layers: Option<usize>) -> Placement {
    let cpu_backend = devices.len() - 1;
    let device = devices.first().map_or_else(|| "cpu".into(), device_label);
    if cpu_backend == 0 {
        return Placement {
            device,
            layer_backend: vec![0; n_layer],
            output_backend: 0,
            cpu_backend,
        };
    }
    let ngl = gpu_layers.unwrap_or(n_layer + 1).min(n_layer + 1);
    let first_gpu = n_layer + 1 - ngl;
    let on = |il: usize| if il >= first_gpu { 0 } else { cpu_backend };
    Placement {
        device,
        layer_backend: (0..n_layer).map(on).collect(),
        output_backend: on(n_layer),
        cpu_backend,
    }
}
