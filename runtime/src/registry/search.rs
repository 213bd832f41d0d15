//! Where plugins are looked for, and which file names count as plugins.

use std::path::{Path, PathBuf};

/// Environment variable holding extra plugin directories (a path list, `:`
/// separated on Unix, `;` on Windows), searched after the host's own.
pub const PLUGIN_PATH_ENV: &str = "BACKPLANE_PLUGIN_PATH";

/// File name prefix of every plugin.
#[cfg(not(windows))]
pub const FILE_PREFIX: &str = "libbackplane_";
/// File name prefix of every plugin.
#[cfg(windows)]
pub const FILE_PREFIX: &str = "backplane_";

/// File name suffix of every plugin on this platform.
pub const FILE_SUFFIX: &str = std::env::consts::DLL_SUFFIX;

/// The plugin directory baked in at build time: `BACKPLANE_PLUGIN_DIR` if it
/// was set when the runtime was compiled, else the workspace's `target/plugins`
/// (where `cargo xtask plugins` puts them).
pub fn build_time_plugin_dir() -> PathBuf {
    match option_env!("BACKPLANE_PLUGIN_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("target")
            .join("plugins"),
    }
}

/// Which places the registry searches; see [`SearchPath::dirs`] for the order.
#[derive(Clone, Debug)]
pub struct SearchPath {
    /// Directories the host passes, searched first, in order.
    pub host_dirs: Vec<PathBuf>,
    /// Search [`PLUGIN_PATH_ENV`].
    pub env: bool,
    /// Search the executable's directory and `<exe dir>/../lib/backplane`.
    pub exe_dir: bool,
    /// Search [`build_time_plugin_dir`].
    pub build_default: bool,
}

impl Default for SearchPath {
    fn default() -> Self {
        SearchPath {
            host_dirs: Vec::new(),
            env: true,
            exe_dir: true,
            build_default: true,
        }
    }
}

impl SearchPath {
    /// Only the given directories (tests, embedding hosts).
    pub fn only(dirs: impl IntoIterator<Item = impl Into<PathBuf>>) -> SearchPath {
        SearchPath {
            host_dirs: dirs.into_iter().map(Into::into).collect(),
            env: false,
            exe_dir: false,
            build_default: false,
        }
    }

    /// The directories to search, in order: host dirs, `BACKPLANE_PLUGIN_PATH`,
    /// the executable's dir, `<exe dir>/../lib/backplane`, the build-time
    /// default. Duplicates (same canonical path) are kept only the first time.
    pub fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self.host_dirs.clone();
        if self.env
            && let Some(list) = std::env::var_os(PLUGIN_PATH_ENV)
        {
            dirs.extend(std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty()));
        }
        if self.exe_dir
            && let Some(exe_dir) = std::env::current_exe()
                .ok()
                .and_then(|e| e.parent().map(Path::to_path_buf))
        {
            dirs.push(exe_dir.join("..").join("lib").join("backplane"));
            dirs.insert(dirs.len() - 1, exe_dir);
        }
        if self.build_default {
            dirs.push(build_time_plugin_dir());
        }
        let mut out: Vec<PathBuf> = Vec::new();
        for d in dirs {
            let d = d.canonicalize().unwrap_or(d);
            if !out.contains(&d) {
                out.push(d);
            }
        }
        out
    }
}

/// `(backend, variant)` of a plugin file name
/// `libbackplane_<backend>[-<variant>].so`, or `None` for other files.
pub fn parse_file_name(name: &str) -> Option<(String, Option<String>)> {
    let stem = name.strip_prefix(FILE_PREFIX)?.strip_suffix(FILE_SUFFIX)?;
    let (backend, variant) = match stem.split_once('-') {
        Some((b, v)) => (b, Some(v.to_string())),
        None => (stem, None),
    };
    // Backend names are lower-case letters and digits: this also keeps
    // cargo's own outputs (`libbackplane_cpu_plugin.so`) from counting.
    let valid_backend = !backend.is_empty()
        && backend
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let valid_variant = variant
        .as_deref()
        .is_none_or(|v| !v.is_empty() && !v.contains(['/', '\\']));
    if !valid_backend || !valid_variant {
        return None;
    }
    Some((backend.to_string(), variant))
}

/// A plugin file: its path, backend and variant.
pub type PluginFile = (PathBuf, String, Option<String>);

/// Plugin files of `dir` sorted by name, with their backend and variant.
pub fn plugin_files(dir: &Path) -> Vec<PluginFile> {
    plugin_files_reporting(dir).0
}

/// Plugin files of `dir` sorted by name, with their backend and variant,
/// and the paths that could not be judged, with why: a directory that
/// exists but cannot be read, an entry named like a plugin that cannot be
/// stat'ed (a symlink loop, a dangling link) or is not a file. A directory
/// that does not exist is not a problem (most default places do not).
pub fn plugin_files_reporting(dir: &Path) -> (Vec<PluginFile>, Vec<(PathBuf, String)>) {
    let mut problems = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Vec::new(), problems),
        Err(e) => {
            problems.push((
                dir.to_path_buf(),
                format!("plugin directory cannot be read: {e}"),
            ));
            return (Vec::new(), problems);
        }
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                problems.push((
                    dir.to_path_buf(),
                    format!("plugin directory cannot be listed: {e}"),
                ));
                continue;
            }
        };
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let Some((backend, variant)) = parse_file_name(&name) else {
            continue;
        };
        let path = entry.path();
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => files.push((path, backend, variant)),
            Ok(_) => problems.push((path, "named like a plugin but not a file".to_string())),
            Err(e) => {
                let why = if e.raw_os_error() == Some(40) {
                    "a symbolic link loop".to_string()
                } else if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_symlink()) {
                    format!("a symbolic link that does not resolve: {e}")
                } else {
                    e.to_string()
                };
                problems.push((path, format!("cannot open: {why}")));
            }
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    problems.sort();
    (files, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_backend_and_variant_from_file_name() {
        let so = |s: &str| format!("{FILE_PREFIX}{s}{FILE_SUFFIX}");
        assert_eq!(parse_file_name(&so("cpu")), Some(("cpu".into(), None)));
        assert_eq!(
            parse_file_name(&so("cpu-avx2")),
            Some(("cpu".into(), Some("avx2".into())))
        );
        assert_eq!(
            parse_file_name(&so("cpu-x86-64")),
            Some(("cpu".into(), Some("x86-64".into())))
        );
        assert_eq!(parse_file_name(&so("cpu-")), None);
        assert_eq!(parse_file_name(&so("cpu_plugin")), None);
        assert_eq!(parse_file_name("README.md"), None);
        assert_eq!(parse_file_name(&format!("{FILE_PREFIX}cpu.txt")), None);
    }

    #[test]
    fn host_dirs_come_first_and_duplicates_are_dropped() {
        let sp = SearchPath {
            host_dirs: vec!["/a".into(), "/b".into(), "/a".into()],
            ..SearchPath::default()
        };
        let dirs = sp.dirs();
        assert_eq!(&dirs[..2], &[PathBuf::from("/a"), PathBuf::from("/b")]);
        assert_eq!(
            dirs.iter()
                .filter(|d| d.as_path() == Path::new("/a"))
                .count(),
            1
        );
        let build = build_time_plugin_dir();
        assert_eq!(dirs.last(), Some(&build.canonicalize().unwrap_or(build)));
    }
}
