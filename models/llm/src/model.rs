//! [`Model`]: hyper-parameters, weights placed on devices, the scheduler
//! that runs its graphs, and the tokenizer.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use backplane::registry::Registry;
use backplane::sched::{BackendOptions, SchedOptions, Scheduler};

use crate::error::LlmError;
use crate::hparams::HParams;
use crate::placement::{self, Placement, Split};
use crate::source::ModelSource;
use crate::tok::Tokenizer;
use crate::weights::{EndLeaves, Weights};

/// How to load a model.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadOptions {
    /// `cpu`, `auto` (the best device), a backend (`webgpu`, `sycl`,
    /// `hexagon`) or `backend:device`; several separated by commas split
    /// the layers across them (see [`Split`]).
    pub device: String,
    /// llama.cpp's `-ngl`: of the `n_layer` blocks and the output (counted
    /// as one more layer), the last this many go on the device, the rest on
    /// the CPU. `None`: all of them.
    pub gpu_layers: Option<usize>,
    /// Default context size of [`Model::session`] sessions (0: the
    /// training context, at most 4096).
    pub n_ctx: usize,
    /// Directories searched for backend plugins before the default places.
    pub plugin_dirs: Vec<PathBuf>,
    /// Put mat-mul weights in their device's preferred layout (an extra
    /// buffer type such as the CPU's repacked weights) where it has one;
    /// false keeps ggml's layout everywhere (llama.cpp's `--no-repack`).
    pub repack: bool,
    /// `init_backend` params per backend name (the command line's
    /// `--backend-option NAME.KEY=VALUE`).
    pub backend_options: BackendOptions,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            device: "auto".into(),
            gpu_layers: None,
            n_ctx: 0,
            plugin_dirs: Vec::new(),
            repack: true,
            backend_options: BackendOptions::default(),
        }
    }
}

/// Bytes uploaded so far and in all, passed to a load's progress callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadProgress {
    /// Bytes written to devices so far.
    pub done_bytes: u64,
    /// Bytes of all weights.
    pub total_bytes: u64,
}

/// A loaded model: weights in device memory, ready for [`crate::Session`]s.
pub struct Model {
    pub(crate) sched: Mutex<Scheduler>,
    pub(crate) hparams: HParams,
    pub(crate) weights: Weights,
    /// The leaves of the embedding rows and the output projection.
    pub(crate) ends: EndLeaves,
    placement: Placement,
    tokenizer: Option<Tokenizer>,
    name: String,
    n_ctx: usize,
    weight_bytes: u64,
    next_session: AtomicU64,
    _registry: Registry,
}

impl Model {
    /// Loads `source` onto the devices `options` asks for, reporting the
    /// upload through `progress`. The model has no tokenizer: feed it ids.
    pub fn from_source(
        source: &dyn ModelSource,
        options: &LoadOptions,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Model, LlmError> {
        Model::from_source_split(source, options, &Split::default(), progress)
    }

    /// [`Model::from_source`] with the layers spread over the devices
    /// `options.device` lists as `split` says.
    pub fn from_source_split(
        source: &dyn ModelSource,
        options: &LoadOptions,
        split: &Split,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Model, LlmError> {
        let hparams = HParams::from_source(source)?;
        let weights = Weights::check(source, &hparams)?;
        let registry = placement::registry(&options.plugin_dirs);
        let chosen = placement::choose_devices(&registry, &options.device, split.mode)?;
        let shares = placement::shares(&chosen, &split.tensor_split)?;
        let placement = placement::assign(&chosen, hparams.n_layer, options.gpu_layers, &shares);
        let devices = chosen.devices;
        let options_s = SchedOptions {
            cache_capacity: 64,
            backend_options: options.backend_options.clone(),
            ..SchedOptions::default()
        };
        let mut sched = Scheduler::new(devices, options_s)
            .map_err(|e| LlmError::sched("starting the scheduler", e))?;
        let ends = end_leaves(&weights, &placement, &sched);
        let weight_bytes = upload_weights(
            &mut sched,
            source,
            (&hparams, &weights),
            &placement,
            (&ends, options.repack),
            progress,
        )?;
        let name = source
            .meta("general.name")
            .and_then(|v| match v {
                crate::source::MetaValue::Str(s) => Some(s),
                _ => None,
            })
            .unwrap_or_else(|| file_stem(source.path()));
        let n_ctx = if options.n_ctx == 0 {
            hparams.n_ctx_train.min(4096)
        } else {
            options.n_ctx
        };
        Ok(Model {
            sched: Mutex::new(sched),
            hparams,
            weights,
            ends,
            placement,
            tokenizer: None,
            name,
            n_ctx,
            weight_bytes,
            next_session: AtomicU64::new(0),
            _registry: registry,
        })
    }

    pub(crate) fn set_tokenizer(&mut self, tokenizer: Tokenizer) {
        self.tokenizer = Some(tokenizer);
    }

    /// The hyper-parameters.
    pub fn hparams(&self) -> &HParams {
        &self.hparams
    }

    /// Vocabulary size (columns of the logits).
    pub fn n_vocab(&self) -> usize {
        self.hparams.n_vocab
    }

    /// `general.name`, or the file's stem.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the layers live.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Default context size of [`Model::session`].
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Bytes of weights uploaded to devices.
    pub fn weight_bytes(&self) -> u64 {
        self.weight_bytes
    }

    /// The tokenizer built from the file's vocabulary.
    pub fn tokenizer(&self) -> Result<&Tokenizer, LlmError> {
        self.tokenizer
            .as_ref()
            .ok_or_else(|| LlmError::Tokenizer("this model was loaded without a vocabulary".into()))
    }

    /// True when `token` ends a generation (the tokenizer's end-of-generation
    /// tokens; false without a tokenizer).
    pub fn is_eog(&self, token: u32) -> bool {
        self.tokenizer.as_ref().is_some_and(|t| t.is_eog(token))
    }

    /// The scheduler (its planner's cache counters, its run statistics).
    /// Held locked while a session evaluates.
    pub fn scheduler(&self) -> MutexGuard<'_, Scheduler> {
        self.sched.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn new_session_id(&self) -> u64 {
        self.next_session.fetch_add(1, Ordering::Relaxed)
    }
}

/// Where a forward graph reads its embedding rows and its output
/// projection:
/// - untied: `token_embd.weight` on the CPU (as llama.cpp keeps it: one
///   row per token is picked there, and no device holds the matrix for
///   that) and `output.weight` on the output's device;
/// - tied, the output on the CPU: `token_embd.weight` for both;
/// - tied, the output on a device that also holds the first layer and
///   picks rows of the matrix's type itself: that device's copy
///   (`output.weight`) for both. The matrix is there anyway, so a decode
///   step then has no CPU part and copies no row to the device; the CPU
///   does not read the matrix at all;
/// - tied otherwise: `token_embd.weight` on the CPU, `output.weight` on
///   the device.
fn end_leaves(weights: &Weights, placement: &Placement, sched: &Scheduler) -> EndLeaves {
    if !weights.tied_output {
        return EndLeaves::untied();
    }
    let out = placement.output_backend;
    if out == placement.cpu_backend {
        return EndLeaves::both("token_embd.weight");
    }
    let first_layer_there = placement.layer_backend.first().is_none_or(|&b| b == out);
    let picks_rows = weights.get("output.weight").is_some_and(|w| {
        let mut g = backplane::Graph::new();
        let rows = g
            .weight("output.weight", w.dtype, &w.ne)
            .and_then(|m| Ok((m, g.input("tokens", backplane::DType::I32, &[1])?)))
            .and_then(|(m, ids)| g.get_rows(m, ids));
        rows.is_ok_and(|r| {
            sched.devices()[out]
                .supports_op(g.tensors(), r.index())
                .is_supported()
        })
    });
    if first_layer_there && picks_rows {
        EndLeaves::both("output.weight")
    } else {
        EndLeaves::untied()
    }
}

fn file_stem(p: &Path) -> String {
    p.file_stem().map_or_else(
        || p.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// Places every weight on its backend (one buffer per backend and buffer
/// type) and copies its bytes from the source (a memory map) straight into
/// it. With `repack`, each weight goes into its device's preferred buffer
/// type for the ops of a decode graph that read it.
fn upload_weights(
    sched: &mut Scheduler,
    source: &dyn ModelSource,
    (hparams, weights): (&HParams, &Weights),
    placement: &Placement,
    (ends, repack): (&EndLeaves, bool),
    progress: &mut dyn FnMut(LoadProgress),
) -> Result<u64, LlmError> {
    // The graph whose ops decide each weight's buffer type; no session
    // uses its cache names.
    let shape = crate::graph::Shape {
        n_tokens: 1,
        n_kv: 256,
        n_outputs: 1,
    };
    let mut g = crate::graph::build(hparams, weights, ends, u64::MAX, 256, shape)?.graph;
    let n_backends = placement.cpu_backend + 1;
    let mut by_backend = vec![Vec::new(); n_backends];
    let mut leaves = Vec::new();
    for spec in &weights.specs {
        if !ends.reads(&spec.name) {
            continue;
        }
        let t = match g.find(&spec.name) {
            Some(t) => t,
            None => g
                .weight(&spec.name, spec.dtype, &spec.ne)
                .map_err(|e| LlmError::graph("weights", e))?,
        };
        by_backend[placement.backend_of(spec.role)].push(t);
        leaves.push((t, spec));
    }
    for (b, ids) in by_backend.iter().enumerate() {
        if ids.is_empty() {
            continue;
        }
        let what = || format!("placing {} weights on backend {b}", ids.len());
        if repack {
            sched
                .place_weights_preferred(&mut g, b, ids)
                .map_err(|e| LlmError::sched(what(), e))?;
        } else {
            sched
                .place_weights(&mut g, b, ids)
                .map_err(|e| LlmError::sched(what(), e))?;
        }
    }
    let total_bytes: u64 = leaves
        .iter()
        .filter_map(|(_, s)| source.tensor(&s.file_name))
        .map(|t| t.data.len() as u64)
        .sum();
    let mut done_bytes = 0;
    progress(LoadProgress {
        done_bytes,
        total_bytes,
    });
    for (t, spec) in leaves {
        let data = source
            .tensor(&spec.file_name)
            .ok_or_else(|| LlmError::MissingTensor {
                path: source.path().to_path_buf(),
                name: spec.file_name.clone(),
            })?
            .data;
        sched
            .upload(&g, t, data)
            .map_err(|e| LlmError::sched(format!("uploading '{}'", spec.name), e))?;
        done_bytes += data.len() as u64;
        progress(LoadProgress {
            done_bytes,
            total_bytes,
        });
    }
    Ok(total_bytes)
}
