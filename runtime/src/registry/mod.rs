//! Finding and loading backend plugins.
//!
//! [`Registry::load`] searches the directories of a [`SearchPath`] (host
//! dirs, `BACKPLANE_PLUGIN_PATH`, the executable's dir and
//! `<exe dir>/../lib/backplane`, then the build-time default
//! `target/plugins`) for files named `libbackplane_<backend>[-<variant>].so`
//! (`.dylib`, `.dll`). Every file is first judged in a child process
//! ([`probe`]: ABI version, score, root module, registration, devices; a
//! hang, exit, abort or crash refuses the file), with outcomes cached
//! ([`cache`]); per backend the variant with the highest score is then
//! loaded in process through abi_stable (ties: the one found first in
//! search order, with a warning). If it fails to load, the next best is
//! tried. A plugin must register the backend name of its file
//! (`libbackplane_<name>[-variant]`). Every file seen ends up either in
//! [`Registry::backends`] or in [`Registry::refused`] with a one-line
//! reason; unreadable directories and entries are refused too.
//!
//! Every value a plugin hands over is checked once, in [`handle`], by the
//! rules of [`check`].
//!
//! The registry links no backend itself. A host program may hand it one
//! linked into the program ([`BuiltinBackend`], the `backplane` facade's CPU
//! fallback): when no plugin of that name loads, the built-in one is added,
//! behind the same [`Device`] handles. [`Registry::builtin`] says what became
//! of it, including that none was given.
//!
//! Libraries are never unloaded (see [`load`] for why).

pub mod cache;
pub mod check;
pub mod handle;
pub mod load;
pub mod probe;
pub mod search;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use backplane_abi::plugin::RegBox;
use backplane_abi::plugin::ext_options::{FfiOptionSpec, OptionSpec};

pub use handle::{Buffer, BufferType, Device, Event, Stream};
pub use load::{MAX_REASON_LINES, short_reason};
pub use search::{PLUGIN_PATH_ENV, SearchPath, build_time_plugin_dir};

/// A backend linked into the host program, handed to the registry by
/// whoever links it (the `backplane` facade hands over the CPU backend).
/// The registry adds it when no plugin of the same name loads.
#[derive(Clone, Copy, Debug)]
pub struct BuiltinBackend {
    /// The backend name its registration uses (`cpu`).
    pub name: &'static str,
    /// Makes its registration and the score of what it runs on this machine.
    pub register: fn() -> (RegBox, u32),
    /// The options its `init_backend` params take.
    pub options: &'static [OptionSpec],
}

/// What became of the built-in backend when the registry loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuiltinStatus {
    /// None was handed to the registry (a program linking only the runtime,
    /// or one that turned it off).
    NotGiven,
    /// Added as the last loaded backend.
    Added {
        /// Its backend name.
        name: String,
    },
    /// A plugin of the same name loaded, so the built-in one was not added.
    Replaced {
        /// Its backend name.
        name: String,
    },
    /// It failed the registry's checks.
    Failed {
        /// Its backend name.
        name: String,
        /// Why, one line.
        reason: String,
    },
}

impl std::fmt::Display for BuiltinStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuiltinStatus::NotGiven => {
                f.write_str("no built-in backend (none linked, or turned off)")
            }
            BuiltinStatus::Added { name } => write!(f, "built-in {name} backend added"),
            BuiltinStatus::Replaced { name } => {
                write!(
                    f,
                    "built-in {name} backend not added: a {name} plugin loaded"
                )
            }
            BuiltinStatus::Failed { name, reason } => {
                write!(f, "built-in {name} backend failed its checks: {reason}")
            }
        }
    }
}

/// What to load.
#[derive(Clone, Debug, Default)]
pub struct RegistryOptions {
    /// Where to look for plugin files.
    pub search: SearchPath,
    /// The backend linked into this program, added when no plugin of its
    /// name loads; `None` loads plugins only.
    pub builtin: Option<BuiltinBackend>,
}

/// How plugin files are judged before loading: probed in a child process
/// ([`probe`]), with outcomes cached ([`cache`]).
#[derive(Clone, Debug)]
pub struct ProbeOptions {
    /// Probe at all (false: load in process directly, as before probing existed).
    pub enabled: bool,
    /// How long one probe may take.
    pub timeout: Duration,
    /// The executable to run (`None`: this program).
    pub exe: Option<PathBuf>,
    /// The cache file (`None`: no cache).
    pub cache: Option<PathBuf>,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions::from_env()
    }
}

impl ProbeOptions {
    /// From the environment: [`PROBE_EXE_ENV`](probe::PROBE_EXE_ENV),
    /// [`PROBE_TIMEOUT_ENV`](probe::PROBE_TIMEOUT_ENV) and
    /// [`CACHE_ENV`](cache::CACHE_ENV).
    pub fn from_env() -> ProbeOptions {
        let exe = std::env::var_os(probe::PROBE_EXE_ENV);
        // Without the start-up hook this program cannot serve as its own
        // probe: probe only with an executable named in the environment.
        let enabled = match exe.as_deref() {
            Some(e) => e != "off",
            None => probe::HOOK_SUPPORTED,
        };
        let timeout = std::env::var(probe::PROBE_TIMEOUT_ENV)
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .map_or(probe::DEFAULT_TIMEOUT, Duration::from_secs_f64);
        ProbeOptions {
            enabled,
            timeout,
            exe: exe.filter(|e| e != "off").map(PathBuf::from),
            cache: cache::default_path(),
        }
    }
}

/// Where a loaded backend came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Linked into this program and handed over as a [`BuiltinBackend`].
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
    /// Devices the plugin offered that the host refused, with why (one
    /// line each, naming the device, the value and the rule).
    pub refused_devices: Vec<String>,
    /// The options its `init_backend` params take (empty for a plugin
    /// built before options existed).
    pub options: Vec<FfiOptionSpec>,
    _reg: RegBox,
}

/// A plugin file that was not loaded, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The file.
    pub path: PathBuf,
    /// Why, one line ([`MAX_REASON_LINES`]).
    pub reason: String,
}

/// The loaded backends and the refused files.
pub struct Registry {
    backends: Vec<LoadedBackend>,
    refused: Vec<Refusal>,
    builtin: BuiltinStatus,
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
    /// Searches the default places, adding `builtin` when no plugin of its
    /// name loads.
    pub fn discover(builtin: Option<BuiltinBackend>) -> Registry {
        Registry::load(&RegistryOptions {
            search: SearchPath::default(),
            builtin,
        })
    }

    /// Loads according to `options`, probing as the environment says
    /// ([`ProbeOptions::from_env`]).
    pub fn load(options: &RegistryOptions) -> Registry {
        Registry::load_with(options, &ProbeOptions::from_env())
    }

    /// Loads according to `options`, probing files as `probe` says.
    pub fn load_with(options: &RegistryOptions, probe: &ProbeOptions) -> Registry {
        // Keeps the probe child's start-up hook linked into every program
        // that loads plugins.
        std::hint::black_box(&probe::PROBE_CHILD_HOOK);
        let mut refused = Vec::new();
        let mut files: Vec<(PathBuf, String, Option<String>)> = Vec::new();
        let mut seen_files: Vec<PathBuf> = Vec::new();
        for dir in options.search.dirs() {
            let (found, problems) = search::plugin_files_reporting(&dir);
            refused.extend(
                problems
                    .into_iter()
                    .map(|(path, reason)| Refusal { path, reason }),
            );
            for (path, backend, variant) in found {
                let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
                if seen_files.contains(&canonical) {
                    continue;
                }
                seen_files.push(canonical);
                files.push((path, backend, variant));
            }
        }
        let paths: Vec<PathBuf> = files.iter().map(|f| f.0.clone()).collect();
        let judged = judge_files(&paths, probe);

        let mut candidates: Vec<Candidate> = Vec::new();
        for (order, ((path, backend, variant), judged)) in files.into_iter().zip(judged).enumerate()
        {
            match judged {
                Ok(0) => refused.push(Refusal {
                    path,
                    reason: "score 0: this variant cannot run on this machine (missing CPU or OS features, or hardware)"
                        .to_string(),
                }),
                Ok(score) => candidates.push(Candidate { order, path, backend, variant, score }),
                Err(reason) => refused.push(Refusal { path, reason: short_reason(&reason) }),
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
                    let reason = if c.score == w.score && same_contents(&c.path, &w.path) {
                        // Cargo leaves each cdylib beside the binaries as well
                        // as the copy installed for plugins: not worth a warning.
                        let msg = format!(
                            "copy of {} (same bytes; the one earlier in the search path is loaded)",
                            w.path.display()
                        );
                        tracing::debug!(path = %c.path.display(), "{msg}");
                        msg
                    } else if c.score == w.score {
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
                let source = Source::File {
                    path: c.path.clone(),
                    variant: c.variant.clone(),
                };
                let extra = |_: &RegBox| match load::extra_buffer_types_ext(&c.path) {
                    Some(m) => ExtraTypes::Module(m),
                    None => ExtraTypes::None,
                };
                match load::load(&c.path).and_then(|reg| {
                    let extra = extra(&reg);
                    LoadedBackend::new(reg, c.score, source, Some(&name), extra)
                }) {
                    Ok(mut backend) => {
                        backend.options = load::option_schema(&c.path);
                        backends.push(backend);
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

        let builtin = match options.builtin {
            None => BuiltinStatus::NotGiven,
            Some(linked) => add_builtin(linked, &mut backends),
        };
        Registry {
            backends,
            refused,
            builtin,
        }
    }

    /// Loaded backends: plugins in search order, then the built-in one if added.
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

    /// What became of the built-in backend (none given, added, replaced by
    /// a plugin, or failed).
    pub fn builtin(&self) -> &BuiltinStatus {
        &self.builtin
    }
}

/// Adds the linked-in backend `linked` to `backends` unless a plugin of its
/// name loaded.
fn add_builtin(linked: BuiltinBackend, backends: &mut Vec<LoadedBackend>) -> BuiltinStatus {
    let name = linked.name.to_string();
    if backends.iter().any(|b| b.name == linked.name) {
        return BuiltinStatus::Replaced { name };
    }
    let (reg, score) = (linked.register)();
    match LoadedBackend::new(reg, score, Source::Builtin, None, ExtraTypes::InProcess) {
        Ok(mut b) => {
            b.options = linked.options.iter().map(FfiOptionSpec::of).collect();
            backends.push(b);
            BuiltinStatus::Added { name }
        }
        Err(reason) => {
            tracing::error!("the built-in {name} backend failed its checks: {reason}");
            BuiltinStatus::Failed { name, reason }
        }
    }
}

/// Where a backend's extra buffer types come from.
pub(crate) enum ExtraTypes {
    /// It offers none.
    None,
    /// A plugin file's extension module.
    Module(&'static backplane_abi::plugin::ext::ExtraBufferTypesV1),
    /// A backend linked into the host (its objects are the host's own).
    InProcess,
}

impl ExtraTypes {
    /// The extra buffer types of `device`, as its plugin answered.
    fn of(&self, device: &backplane_abi::plugin::DeviceRef) -> ExtraAnswer {
        use abi_stable::std_types::{RResult, RVec};
        match self {
            ExtraTypes::None => RResult::ROk(RVec::new()),
            ExtraTypes::Module(m) => (m.get)(device),
            ExtraTypes::InProcess => {
                backplane_abi::plugin::ext::extra_buffer_types_of_object(device)
            }
        }
    }
}

/// A plugin's answer to "extra buffer types of this device".
pub(crate) type ExtraAnswer = abi_stable::std_types::RResult<
    abi_stable::std_types::RVec<backplane_abi::plugin::ext::ExtraBufferType>,
    backplane_abi::plugin::PluginError,
>;

/// Everything the registry does with a plugin file in process (preflight,
/// root module, registration, name rule, device checks), reporting each
/// stage to `stage`; the score, or why the file is refused. What the probe
/// child runs.
pub(crate) fn judge_in_process(path: &Path, stage: &mut dyn FnMut(&str)) -> Result<u32, String> {
    let family = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(search::parse_file_name)
        .map(|(backend, _)| backend);
    let score = load::preflight_staged(path, stage)?;
    if score == 0 {
        return Ok(0);
    }
    stage("init");
    let reg = load::load(path)?;
    stage("devices");
    let source = Source::File {
        path: path.to_path_buf(),
        variant: None,
    };
    let extra = match load::extra_buffer_types_ext(path) {
        Some(m) => ExtraTypes::Module(m),
        None => ExtraTypes::None,
    };
    let backend = LoadedBackend::new(reg, score, source, family.as_deref(), extra)?;
    stage("drop");
    drop(backend);
    Ok(score)
}

/// The score of each file, or why it is refused: from the probe (cache,
/// else a child process per file, in parallel), or, with probing off, from
/// an in-process preflight.
fn judge_files(paths: &[PathBuf], options: &ProbeOptions) -> Vec<Result<u32, String>> {
    let preflight_all = || paths.iter().map(|p| load::preflight(p)).collect();
    if !options.enabled || paths.is_empty() {
        return preflight_all();
    }
    let exe = match probe::probe_exe(options) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!("plugins load unprobed: {e}");
            return preflight_all();
        }
    };
    let host = cache::host_identity(&exe);
    let mut store = cache::Cache::open(options.cache.as_deref());
    let mut results: Vec<Option<Result<u32, String>>> = vec![None; paths.len()];
    let mut to_probe: Vec<(usize, Option<cache::Key>)> = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        match cache::key(path, &host) {
            Ok(k) => match store.get(&k, options.timeout) {
                Some(outcome) => results[i] = Some(outcome_result(outcome)),
                None => to_probe.push((i, Some(k))),
            },
            Err(e) => results[i] = Some(Err(e)),
        }
    }
    let files: Vec<PathBuf> = to_probe.iter().map(|(i, _)| paths[*i].clone()).collect();
    let outcomes = probe::probe_files(&exe, &files, options.timeout);
    for ((i, k), outcome) in to_probe.into_iter().zip(outcomes) {
        if let Some(k) = k {
            let timed_out = matches!(&outcome, probe::Outcome::Refused { reason } if reason.starts_with("probe timed out"));
            store.put(k, outcome.clone(), timed_out.then_some(options.timeout));
        }
        results[i] = Some(outcome_result(outcome));
    }
    store.save();
    results
        .into_iter()
        .map(|r| r.expect("every file judged"))
        .collect()
}

fn outcome_result(outcome: probe::Outcome) -> Result<u32, String> {
    match outcome {
        probe::Outcome::Accepted { score } => Ok(score),
        probe::Outcome::Refused { reason } => Err(reason),
    }
}

impl LoadedBackend {
    /// Checks a registration: its name against the file's backend name
    /// (`family`, `None` for a linked-in backend), then its devices, each
    /// kept or refused by the rules of [`handle`].
    fn new(
        reg: RegBox,
        score: u32,
        source: Source,
        family: Option<&str>,
        extra: ExtraTypes,
    ) -> Result<LoadedBackend, String> {
        let raw_name: String = reg
            .name()
            .into_result()
            .map_err(|e| short_reason(&e.message))?
            .into();
        let name = check::clean_text(&raw_name, check::MAX_NAME_CHARS);
        if let Some(family) = family
            && raw_name != family
        {
            return Err(format!(
                "registers as backend '{name}' but its file name says '{family}': a plugin must register \
                 the backend of its file name ({}{family}[-variant]{})",
                search::FILE_PREFIX,
                search::FILE_SUFFIX
            ));
        }
        let backend: Arc<str> = Arc::from(name.as_str());
        let raw_devices = reg
            .devices()
            .into_result()
            .map_err(|e| format!("devices() failed: {}", short_reason(&e.message)))?;
        let mut devices = Vec::new();
        let mut refused_devices = Vec::new();
        for (i, d) in raw_devices.into_iter().enumerate() {
            let answer = extra.of(&d);
            match Device::check(backend.clone(), d, answer) {
                Ok(d) => devices.push(d),
                Err(e) => {
                    let reason = short_reason(&format!("device {i} refused: {e}"));
                    tracing::warn!(backend = %name, "{reason}");
                    refused_devices.push(reason);
                }
            }
        }
        let no_device_reason = match reg.no_device_reason().into_result() {
            Ok(r) => r.into_option().map(|r| short_reason(&r)),
            Err(e) => Some(short_reason(&e.message)),
        };
        Ok(LoadedBackend {
            name,
            score,
            source,
            devices,
            no_device_reason,
            refused_devices,
            options: Vec::new(),
            _reg: reg,
        })
    }
}

/// Whether two plugin files hold the same bytes (same length and content
/// hash); unreadable files count as different.
fn same_contents(a: &Path, b: &Path) -> bool {
    let hash = |p: &Path| -> Option<(u64, u64)> {
        let f = std::fs::File::open(p).ok()?;
        let len = f.metadata().ok()?.len();
        Some((len, cache::content_hash(std::io::BufReader::new(f)).ok()?))
    };
    matches!((hash(a), hash(b)), (Some(x), Some(y)) if x == y)
}
