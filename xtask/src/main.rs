//! Project tasks, run as `cargo xtask <task>`.
//!
//! `cargo xtask plugins [--fixtures]` builds every plugin (release profile)
//! into `target/plugins/` (or `$CARGO_TARGET_DIR/plugins/`), which the CLI,
//! the tests and conformance search by default: the CPU backend once per
//! ISA variant of this architecture as `libbackplane_cpu-<variant>.so`.
//! With `--fixtures` it also builds the test fixture plugins into
//! `target/plugin-fixtures/`.
//!
//! `cargo xtask conformance [ARGS]` builds the plugins, then runs the
//! conformance runner (release build) with ARGS (see docs/conformance.md).
//!
//! `cargo xtask test` runs everything CI checks (see `test.rs`).
//!
//! `cargo xtask make-model --arch A --preset P --type T -o F.gguf` writes a
//! random-weight GGUF test model (see `make_model.rs`).
//!
//! `cargo xtask hexagon-qemu` builds the Hexagon DSP C for Hexagon and runs
//! its kernel tests under qemu-hexagon (see `hexagon_qemu.rs`).
//!
//! `cargo xtask check-modules [--crate DIR]... [--all]` reports modules that
//! import each other in a circle and files embedded from outside their
//! crate (see `modules.rs`).

mod hexagon_qemu;
mod make_model;
mod modules;
mod setup;
mod test;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask", about = "backplane project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Build every plugin into target/plugins/ (and fixtures into target/plugin-fixtures/).
    Plugins {
        /// Also build the test fixture plugins.
        #[arg(long)]
        fixtures: bool,
    },
    /// Build the plugins, then check every op on every backend found.
    Conformance {
        /// Arguments for the runner: [test|perf|support] [--backend NAME]... (see docs/conformance.md).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run everything CI checks: format, clippy, plugins, tests, conformance.
    Test,
    /// Build the Hexagon DSP C for Hexagon v67 + HVX and compare its kernel tests under qemu-hexagon with the host's.
    HexagonQemu,
    /// Write a random-weight GGUF test model (llama/qwen2/qwen3, tiny or 1b).
    MakeModel(make_model::Args),
    /// Report sibling modules importing each other in a circle, and includes leaving their crate.
    CheckModules {
        /// `--crate DIR` (repeatable) checks only those crates; `--all` also checks the skipped ones.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// One cdylib build: package, features, and the file name to install it as.
struct Build<'a> {
    package: &'static str,
    lib: &'static str,
    features: &'a str,
    file: String,
}

fn cpu_variants() -> Vec<&'static str> {
    if cfg!(target_arch = "x86_64") {
        vec!["x86-64", "avx2", "avx512"]
    } else if cfg!(target_arch = "aarch64") {
        vec!["aarch64", "neon"]
    } else {
        vec![]
    }
}

fn plugin_file(backend_and_variant: &str) -> String {
    let prefix = if cfg!(windows) {
        "backplane_"
    } else {
        "libbackplane_"
    };
    format!(
        "{prefix}{backend_and_variant}{}",
        std::env::consts::DLL_SUFFIX
    )
}

fn cargo_output(lib: &str) -> String {
    format!(
        "{}{lib}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    )
}

/// The hostile fixture's cases: the features of `tests/fixtures/hostile`
/// (its Cargo.toml is the one list; the CLI tests read it too).
fn hostile_fixture_cases() -> Result<Vec<String>, String> {
    let path = workspace_root().join("tests/fixtures/hostile/Cargo.toml");
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let cases: Vec<String> = text
        .lines()
        .skip_while(|l| l.trim() != "[features]")
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('=').map(|(name, _)| name.trim().to_string()))
        .collect();
    if cases.is_empty() {
        return Err(format!("no [features] in {}", path.display()));
    }
    Ok(cases)
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from)
}

/// Builds one cdylib and installs it under `dest` (write + rename, so a
/// running process that has the old file mapped is not disturbed).
fn build(b: &Build<'_>, dest: &Path) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root())
        .args(["build", "--release", "-p", b.package]);
    if !b.features.is_empty() {
        cmd.args(["--features", b.features]);
    }
    eprintln!(
        "xtask: building {} [{}] -> {}",
        b.package, b.features, b.file
    );
    let status = cmd.status().map_err(|e| format!("running cargo: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building {} with features [{}] failed",
            b.package, b.features
        ));
    }
    let built = target_dir().join("release").join(cargo_output(b.lib));
    std::fs::create_dir_all(dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    let tmp = dest.join(format!(".{}.tmp", b.file));
    std::fs::copy(&built, &tmp).map_err(|e| format!("copying {}: {e}", built.display()))?;
    std::fs::rename(&tmp, dest.join(&b.file)).map_err(|e| format!("installing {}: {e}", b.file))?;
    Ok(())
}

fn plugins(fixtures: bool) -> Result<(), String> {
    let dir = target_dir().join("plugins");
    for variant in cpu_variants() {
        let b = Build {
            package: "backplane-cpu-plugin",
            lib: "backplane_cpu_plugin",
            features: variant,
            file: plugin_file(&format!("cpu-{variant}")),
        };
        build(&b, &dir)?;
    }
    let others = [
        ("backplane-hexagon", "backplane_hexagon", "hexagon"),
        ("backplane-sycl", "backplane_sycl", "sycl"),
        ("backplane-webgpu", "backplane_webgpu", "webgpu"),
        (
            "backplane-remote-plugin",
            "backplane_remote_plugin",
            "remote",
        ),
    ];
    for (package, lib, name) in others {
        let b = Build {
            package,
            lib,
            features: "",
            file: plugin_file(name),
        };
        build(&b, &dir)?;
    }
    // The Hexagon plugin with the emulated DSP and its fault injection, for
    // tests and CI only, in a directory of its own that only tests search
    // (BACKPLANE_PLUGIN_PATH): target/plugins keeps what users load.
    let test_dir = target_dir().join("test-plugins");
    let b = Build {
        package: "backplane-hexagon",
        lib: "backplane_hexagon",
        features: "emulation",
        file: plugin_file("hexagon-emu"),
    };
    build(&b, &test_dir)?;
    eprintln!("xtask: plugins in {}", dir.display());
    eprintln!("xtask: test-only plugins in {}", test_dir.display());
    if fixtures {
        let fdir = target_dir().join("plugin-fixtures");
        let behaviours = [
            "panicky",
            "zero",
            "variant-low",
            "variant-high",
            "twin-one",
            "twin-two",
            "picky",
            "pickier",
        ];
        for f in behaviours {
            let b = Build {
                package: "backplane-fixture-plugin",
                lib: "backplane_fixture_plugin",
                features: f,
                file: plugin_file(f),
            };
            build(&b, &fdir)?;
        }
        let b = Build {
            package: "backplane-fixture-changed-abi",
            lib: "backplane_fixture_changed_abi",
            features: "",
            file: plugin_file("changed"),
        };
        build(&b, &fdir)?;
        // A plugin of the first ABI 1 layout (getters returning bare values).
        let b = Build {
            package: "backplane-fixture-changed-abi",
            lib: "backplane_fixture_changed_abi",
            features: "older-abi",
            file: plugin_file("older"),
        };
        build(&b, &fdir)?;
        // The hostile-plugin catalogue: one misbehaviour per build.
        let hostile = hostile_fixture_cases()?;
        for f in &hostile {
            let b = Build {
                package: "backplane-fixture-hostile",
                lib: "backplane_fixture_hostile",
                features: f,
                file: plugin_file(&format!("hostile-{f}")),
            };
            build(&b, &fdir)?;
        }
        eprintln!("xtask: fixture plugins in {}", fdir.display());
    }
    Ok(())
}

/// Makes `env` visible to every command this process starts.
fn set_env(env: &[(String, String)]) {
    for (k, v) in env {
        // SAFETY: called from main before any other thread exists.
        unsafe { std::env::set_var(k, v) };
    }
}

/// Runs the conformance runner (release) with `args` and extra environment.
fn conformance(args: &[String], env: &[(&str, &str)]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root())
        .args([
            "run",
            "--release",
            "--quiet",
            "-p",
            "backplane-conformance",
            "--",
        ])
        .args(args)
        .envs(env.iter().copied());
    let status = cmd.status().map_err(|e| format!("running cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("conformance failed ({status})"))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Plugins { fixtures } => plugins(fixtures),
        Task::Conformance { args } => setup::all(false).and_then(|env| {
            set_env(&env);
            plugins(false).and_then(|()| conformance(&args, &[]))
        }),
        Task::Test => test::run(),
        Task::HexagonQemu => hexagon_qemu::run_all(),
        Task::MakeModel(args) => make_model::run(&args),
        Task::CheckModules { args } => modules::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
