//! Finding and loading backend plugins.
//!
//! [`Registry::load`] searches the directories of a [`SearchPath`] (host
//! dirs, `BACKPLANE_PLUGIN_PATH`, the executable's dir and
//! `<exe dir>/../lib/backplane`, then the build-time default
//! `target/plugins`) for files named `libbackplane_<backend>[-<variant>].so`
//! (`.dylib`, `.dll`). Every file is preflighted with libloading (ABI
//! version and score); per backend the variant with the highest score is
//! loaded through abi_stable (ties: the one found first in search order,
//! with a warning). If it fails to load, the next best is tried. Every file
//! seen ends up either in [`Registry::backends`] or in
//! [`Registry::refused`] with a reason of at most five lines.
//!
//! The CPU backend is also linked in: when no `cpu` plugin loads, the
//! built-in one is added, behind the same [`Device`] handles.
//!
//! Libraries are never unloaded (see [`load`] for why).

pub mod handle;
pub mod load;
pub mod search;

use std::path::PathBuf;
use std::sync::Arc;

use backplane_abi::plugin::{RegBox, reg_object};
use backplane_cpu::plugin::{CpuReg, Isa, score};

pub use handle::{Buffer, BufferType, Device, Event, Stream};
pub use load::{MAX_REASON_LINES, short_reason};
pub use search::{PLUGIN_PATH_ENV, SearchPath, build_time_plugin_dir};

/// What to load.
#[derive(Clone, Debug)]
pub struct RegistryOptions {
    /// Where to look for plugin files.
    pub search: SearchPath,
    /// Add the linked-in CPU backend when no `cpu` plugin loads.
    pub builtin_cpu: bool,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            search: SearchPath::default(),
            builtin_cpu: true,
        }
    }
}

/// Where a loaded backend came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Linked into this program (the CPU fallback).
    Builtin,
    /// A plugin file.
    File {
        /// The file.
        path: PathBuf,
        /// Its variant (`avx2` in `libbackplane_cpu-avx2.so`).
        variant: Option<String>,
    },
}

impl Source {
    /// The file, if any.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            Source::Builtin => None,
            Source::File { path, .. } => Some(path),
        }
    }
}

/// A backend whose registration loaded.
pub struct LoadedBackend {
    /// Backend name (from the plugin's registration).
    pub name: String,
    /// Score of the loaded variant on this machine.
    pub score: u32,
    /// File or built-in.
    pub source: Source,
    /// Its devices.
    pub devices: Vec<Device>,
    /// Why there are no devices, when the plugin says.
    pub no_device_reason: Option<String>,
    _reg: RegBox,
}

/// A plugin file that was not loaded, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The file.
    pub path: PathBuf,
    /// Why, at most [`MAX_REASON_LINES`] lines.
    pub reason: String,
}

/// The loaded backends and the refused files.
pub struct Registry {
    backends: Vec<LoadedBackend>,
    refused: Vec<Refusal>,
}

/// A plugin file that passed the preflight.
struct Candidate {
    order: usize,
    path: PathBuf,
    backend: String,
    variant: Option<String>,
    score: u32,
}

impl Registry {
    /// Searches the default places and adds the built-in CPU backend.
    pub fn discover() -> Registry {
        Registry::load(&RegistryOptions::default())
    }

    /// Loads according to `options`.
    pub fn load(options: &RegistryOptions) -> Registry {
        let mut refused = Vec::new();
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut seen_files: Vec<PathBuf> = Vec::new();
        let mut order = 0;
        for dir in options.search.dirs() {
            for (path, backend, variant) in search::plugin_files(&dir) {
                let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
                if seen_files.contains(&canonical) {
                    continue;
                }
                seen_files.push(canonical);
                order += 1;
                match load::preflight(&path) {
                    Ok(0) => refused.push(Refusal {
                        path,
                        reason: "score 0: this variant cannot run on this machine (missing CPU or OS features, or hardware)"
                            .to_string(),
                    }),
                    Ok(score) => candidates.push(Candidate { order, path, backend, variant, score }),
                    Err(reason) => refused.push(Refusal { path, reason: short_reason(&reason) }),
                }
            }
        }

        // Group by backend name (from the file name), in order of first appearance.
        let mut names: Vec<String> = Vec::new();
        for c in &candidates {
            if !names.contains(&c.backend) {
                names.push(c.backend.clone());
            }
        }
        let mut backends: Vec<LoadedBackend> = Vec::new();
        for name in names {
            let mut group: Vec<&Candidate> =
                candidates.iter().filter(|c| c.backend == name).collect();
            // Highest score first; ties keep search order (stable sort).
            group.sort_by(|a, b| b.score.cmp(&a.score).then(a.order.cmp(&b.order)));
            let mut chosen: Option<&Candidate> = None;
            for c in group.iter().copied() {
                if let Some(w) = chosen {
                    let reason = if c.score == w.score {
                        let msg = format!(
                            "duplicate of backend '{}' at {} (same score {}; the one earlier in the search path wins)",
                            name,
                            w.path.display(),
                            c.score
                        );
                        tracing::warn!(path = %c.path.display(), "{msg}");
                        msg
                    } else {
                        format!(
                            "not chosen: score {} < {} of {}",
                            c.score,
                            w.score,
                            w.path.display()
                        )
                    };
                    refused.push(Refusal {
                        path: c.path.clone(),
                        reason,
                    });
                    continue;
                }
                match load::load(&c.path) {
                    Ok(reg) => {
                        let reg_name: String = reg.name().into();
                        if let Some(prev) = backends.iter().find(|b| b.name == reg_name) {
                            let msg = format!(
                                "duplicate backend name '{reg_name}': already loaded from {}",
                                prev.source
                                    .path()
                                    .map_or("the built-in".into(), |p| p.display().to_string())
                            );
                            tracing::warn!(path = %c.path.display(), "{msg}");
                            refused.push(Refusal {
                                path: c.path.clone(),
                                reason: msg,
                            });
                            continue;
                        }
                        if reg_name != name {
                            tracing::warn!(path = %c.path.display(), "file names backend '{name}' but the plugin calls itself '{reg_name}'");
                        }
                        let source = Source::File {
                            path: c.path.clone(),
                            variant: c.variant.clone(),
                        };
                        backends.push(LoadedBackend::new(reg, c.score, source));
                        chosen = Some(c);
                    }
                    Err(reason) => {
                        tracing::warn!(path = %c.path.display(), "plugin refused: {reason}");
                        refused.push(Refusal {
                            path: c.path.clone(),
                            reason: short_reason(&reason),
                        });
                    }
                }
            }
        }

        if options.builtin_cpu && !backends.iter().any(|b| b.name == "cpu") {
            let isa = Isa::detect();
            backends.push(LoadedBackend::new(
                reg_object(CpuReg::new(isa)),
                score(isa),
                Source::Builtin,
            ));
        }
        Registry { backends, refused }
    }

    /// Loaded backends: plugins in search order, then the built-in CPU if added.
    pub fn backends(&self) -> &[LoadedBackend] {
        &self.backends
    }

    /// The backend called `name`.
    pub fn backend(&self, name: &str) -> Option<&LoadedBackend> {
        self.backends.iter().find(|b| b.name == name)
    }

    /// Every device of every loaded backend.
    pub fn devices(&self) -> impl Iterator<Item = &Device> {
        self.backends.iter().flat_map(|b| b.devices.iter())
    }

    /// Files seen but not loaded, with reasons, in the order they were judged.
    pub fn refused(&self) -> &[Refusal] {
        &self.refused
    }
}

impl LoadedBackend {
    fn new(reg: RegBox, score: u32, source: Source) -> LoadedBackend {
        let name: String = reg.name().into();
        let backend: Arc<str> = Arc::from(name.as_str());
        let devices = reg
            .devices()
            .into_iter()
            .map(|d| Device::new(backend.clone(), d))
            .collect();
        let no_device_reason = reg.no_device_reason().into_option().map(Into::into);
        LoadedBackend {
            name,
            score,
            source,
            devices,
            no_device_reason,
            _reg: reg,
        }
    }
}
