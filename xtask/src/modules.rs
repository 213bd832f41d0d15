//! `cargo xtask check-modules [--crate DIR]... [--all]`: module import
//! circles and files reached outside a crate.
//!
//! For each workspace crate (or each `--crate DIR`), the module tree is read
//! from `src/lib.rs`, `src/main.rs` and `src/bin/*` through the `mod`
//! items (inline `mod x { … }` blocks and `#[path]` included). Every path a
//! module writes that starts with `crate::`, `super::` or `self::` (in `use`
//! declarations, groups expanded, and qualified paths in code, test modules
//! included), or with a module name a glob import brought in (`norm::x`
//! after `use super::*`), is resolved to the deepest module it names.
//! Paths through a name imported one by one (`use super::norm;` then
//! `norm::x`) count at their `use`.
//!
//! What counts as a dependency between modules: a use from module `P` of
//! something in module `T` is an edge between the two children of their
//! deepest common ancestor that contain them, if both are below it. So:
//! - `ops::reduce` using `crate::ops::norm::same_memory` is an edge
//!   `reduce → norm` under `ops`; `exec::x` using `crate::ops::y` is an
//!   edge `exec → ops` under the crate root.
//! - A child using its parent's (or any ancestor's) own items, such as
//!   `super::Thing` from `ops/norm.rs` to an item of `ops/mod.rs`, is no
//!   edge: the parent is where shared things of its children live.
//! - A parent using its children (`ops::norm::run` from `ops/mod.rs`) is
//!   no edge either: that is what a parent is for.
//! - A path through a re-export counts where it is written:
//!   `crate::ops::Thing` re-exported by `ops/mod.rs` is a use of `ops`.
//!
//! A cycle is a set of sibling modules (same parent) whose edges form a
//! strongly connected component: `exec → ops → exec`. Each is reported
//! with the file and line of every use that makes its edges.
//!
//! Also reported: `include!`/`include_str!`/`include_bytes!` and `#[path]` that reach
//! outside the crate's directory (a crate owns the files it embeds).
//!
//! `--crate DIR` (repeatable) checks only those crate directories; `--all`
//! also checks the crates in [`SKIPPED`]. Exits non-zero on any finding.

mod scan;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use crate::workspace_root;

/// Workspace members the default run leaves out, with why (none: every
/// crate is checked). `--all` or `--crate DIR` checks them.
pub const SKIPPED: &[(&str, &str)] = &[];

/// One use that makes an edge between sibling modules.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Use {
    file: PathBuf,
    line: usize,
    path: String,
}

/// Edges between the children of one parent module: from → to → uses.
type Siblings = BTreeMap<String, BTreeMap<String, Vec<Use>>>;

/// What the check found in one crate.
#[derive(Debug, Default)]
pub struct Findings {
    /// Each cycle: its parent module and its report lines.
    pub cycles: Vec<Cycle>,
    /// Each include or `#[path]` leaving the crate, as a report line.
    pub outside: Vec<String>,
}

/// A cycle among sibling modules.
#[derive(Debug)]
pub struct Cycle {
    /// The parent module, `crate` for the root.
    pub parent: String,
    /// The siblings in the cycle, sorted.
    pub members: Vec<String>,
    /// `from → to: file:line path`, one per use making an edge inside it.
    pub evidence: Vec<String>,
}

/// A source file of the crate and the module it is.
struct SourceFile {
    path: PathBuf,
    module: Vec<String>,
    masked: scan::Masked,
    items: Vec<scan::ModItem>,
}

/// Reads a crate's module tree from its roots: each file's module path.
fn load_tree(crate_dir: &Path, findings: &mut Findings) -> Vec<SourceFile> {
    let src = crate_dir.join("src");
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.is_file())
        .collect();
    if let Ok(entries) = std::fs::read_dir(src.join("bin")) {
        let mut bins: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .map(|p| if p.is_dir() { p.join("main.rs") } else { p })
            .filter(|p| p.extension().is_some_and(|e| e == "rs") && p.is_file())
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    let mut files = Vec::new();
    for root in roots {
        let dir = root.parent().expect("a file has a directory").to_path_buf();
        load_file(crate_dir, &root, Vec::new(), &dir, findings, &mut files);
    }
    files
}

/// Reads `file` as module `module`, whose `mod x;` children live in
/// `child_dir`, and then its children.
fn load_file(
    crate_dir: &Path,
    file: &Path,
    module: Vec<String>,
    child_dir: &Path,
    findings: &mut Findings,
    files: &mut Vec<SourceFile>,
) {
    let Ok(text) = std::fs::read_to_string(file) else {
        return;
    };
    let masked = scan::mask(&text);
    let items = scan::mod_items(&masked);
    let file_dir = file.parent().expect("a file has a directory");
    let mut children = Vec::new();
    for item in items.iter().filter(|m| m.body.is_none()) {
        let inline_dir = item
            .within
            .iter()
            .fold(child_dir.to_path_buf(), |d, n| d.join(n));
        let mut path = module.clone();
        path.extend(item.within.iter().cloned());
        path.push(item.name.clone());
        if let Some(p) = &item.path_attr {
            let base = if item.within.is_empty() {
                file_dir
            } else {
                &inline_dir
            };
            let target = normalize(&base.join(p));
            if !target.starts_with(normalize(crate_dir)) {
                findings.outside.push(format!(
                    "{}:{}: #[path = {p:?}] leaves {}",
                    rel(file),
                    masked.line(item.at),
                    rel(crate_dir)
                ));
            }
            let dir = target.parent().map(Path::to_path_buf).unwrap_or_default();
            children.push((target, path, dir));
        } else {
            let flat = inline_dir.join(format!("{}.rs", item.name));
            let nested = inline_dir.join(&item.name).join("mod.rs");
            let (target, dir) = if flat.is_file() {
                (flat, inline_dir.join(&item.name))
            } else {
                (nested, inline_dir.join(&item.name))
            };
            children.push((target, path, dir));
        }
    }
    files.push(SourceFile {
        path: file.to_path_buf(),
        module,
        masked,
        items,
    });
    for (target, path, dir) in children {
        load_file(crate_dir, &target, path, &dir, findings, files);
    }
}

/// `a/b/../c` → `a/c`, without touching the file system.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `p` relative to the workspace root, for reports.
fn rel(p: &Path) -> String {
    let root = normalize(&workspace_root());
    let p = normalize(p);
    p.strip_prefix(&root).unwrap_or(&p).display().to_string()
}

/// The module a written path lands in: `crate`/`self`/`super` applied to
/// `current`, then the longest prefix that is a module of the crate.
fn resolve(
    current: &[String],
    segments: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    let mut base = current.to_vec();
    let mut rest = segments;
    while let Some((first, tail)) = rest.split_first() {
        match first.as_str() {
            "crate" | "$crate" if rest.len() == segments.len() => base.clear(),
            "self" => {}
            "super" => {
                base.pop()?;
            }
            _ => break,
        }
        rest = tail;
    }
    let mut full = base;
    full.extend(rest.iter().cloned());
    while !modules.contains(&full) {
        full.pop()?;
    }
    Some(full)
}

/// How many segments `segments` resolves to from `current` before any
/// lookup: the length of the full path it names.
fn exact_len(current: &[String], segments: &[String]) -> usize {
    let mut len = current.len();
    for (i, s) in segments.iter().enumerate() {
        match s.as_str() {
            "crate" | "$crate" if i == 0 => len = 0,
            "self" => {}
            "super" => len = len.saturating_sub(1),
            _ => return len + segments.len() - i,
        }
    }
    len
}

/// The module of byte `at` in `file`: its own plus the inline ones around.
fn module_at(file: &SourceFile, at: usize) -> Vec<String> {
    let mut module = file.module.clone();
    // Inline modules come in source order, outer before inner.
    for item in &file.items {
        if let Some((start, end)) = item.body
            && start <= at
            && at < end
        {
            module.truncate(file.module.len() + item.within.len());
            module.push(item.name.clone());
        }
    }
    module
}

/// Checks one crate directory.
pub fn check_crate(crate_dir: &Path) -> Findings {
    let mut findings = Findings::default();
    let files = load_tree(crate_dir, &mut findings);
    let mut modules = BTreeSet::new();
    for f in &files {
        modules.insert(f.module.clone());
        for item in f.items.iter().filter(|m| m.body.is_some()) {
            let mut m = f.module.clone();
            m.extend(item.within.iter().cloned());
            m.push(item.name.clone());
            modules.insert(m);
        }
    }
    let mut parents: BTreeMap<Vec<String>, Siblings> = BTreeMap::new();
    // Each file's paths with the module they are written in; then the
    // modules each module glob-imports the names of (`use super::*`).
    let used: Vec<Vec<(Vec<String>, scan::UsedPath)>> = files
        .iter()
        .map(|f| {
            scan::used_paths(&f.masked.code)
                .into_iter()
                .map(|u| (module_at(f, u.at), u))
                .collect()
        })
        .collect();
    let mut globs: BTreeMap<Vec<String>, Vec<Vec<String>>> = BTreeMap::new();
    for (from, u) in used.iter().flatten() {
        if u.kind == scan::PathKind::Glob
            && let Some(target) = resolve(from, &u.segments, &modules)
            && target.len() == exact_len(from, &u.segments)
        {
            globs.entry(from.clone()).or_default().push(target);
        }
    }
    for (f, used) in files.iter().zip(&used) {
        for (from, used) in used {
            let to = match used.kind {
                scan::PathKind::Local | scan::PathKind::Glob => {
                    resolve(from, &used.segments, &modules)
                }
                // A module name a glob brought in: `norm::x` after `use super::*`.
                scan::PathKind::Bare => globs.get(from).and_then(|targets| {
                    targets.iter().find_map(|g| {
                        let mut full = g.clone();
                        full.push(used.segments[0].clone());
                        modules.contains(&full).then(|| {
                            let mut local = vec!["crate".to_string()];
                            local.extend(g.iter().cloned());
                            local.extend(used.segments.iter().cloned());
                            resolve(from, &local, &modules)
                        })?
                    })
                }),
            };
            let Some(to) = to else {
                continue;
            };
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common < from.len() && common < to.len() {
                parents
                    .entry(from[..common].to_vec())
                    .or_default()
                    .entry(from[common].clone())
                    .or_default()
                    .entry(to[common].clone())
                    .or_default()
                    .push(Use {
                        file: f.path.clone(),
                        line: f.masked.line(used.at),
                        path: used.segments.join("::"),
                    });
            }
        }
    }
    for (parent, siblings) in &parents {
        for members in strongly_connected(siblings) {
            let mut evidence = Vec::new();
            for from in &members {
                for (to, uses) in &siblings[from] {
                    if !members.contains(to) {
                        continue;
                    }
                    let mut uses = uses.clone();
                    uses.sort();
                    uses.dedup();
                    for u in uses {
                        evidence.push(format!(
                            "{from} → {to}: {}:{} `{}`",
                            rel(&u.file),
                            u.line,
                            u.path
                        ));
                    }
                }
            }
            findings.cycles.push(Cycle {
                parent: if parent.is_empty() {
                    "crate".to_string()
                } else {
                    format!("crate::{}", parent.join("::"))
                },
                members,
                evidence,
            });
        }
    }
    check_includes(crate_dir, &mut findings);
    findings
}

/// Strongly connected components of more than one sibling (Tarjan's).
fn strongly_connected(graph: &Siblings) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a Siblings,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flat_map(|e| e.keys()) {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// Every `.rs` file under `dir`, leaving out nested crates and `target/`.
fn rust_files(dir: &Path, top: bool, out: &mut Vec<PathBuf>) {
    if !top && dir.join("Cargo.toml").is_file() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "target") {
                rust_files(&p, false, out);
            }
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Reports includes in any of the crate's `.rs` files (build script, tests
/// and examples too) that leave the crate's directory.
fn check_includes(crate_dir: &Path, findings: &mut Findings) {
    let mut files = Vec::new();
    rust_files(crate_dir, true, &mut files);
    let root = normalize(crate_dir);
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let masked = scan::mask(&text);
        for inc in scan::includes(&masked) {
            let target = if inc.from_manifest_dir {
                normalize(&root.join(inc.path.trim_start_matches('/')))
            } else {
                normalize(
                    &file
                        .parent()
                        .expect("a file has a directory")
                        .join(&inc.path),
                )
            };
            if !target.starts_with(&root) {
                findings.outside.push(format!(
                    "{}:{}: {}!({:?}) leaves {}",
                    rel(&file),
                    masked.line(inc.at),
                    inc.mac,
                    inc.path,
                    rel(crate_dir)
                ));
            }
        }
    }
}

/// The workspace members listed in the root `Cargo.toml`.
fn workspace_members() -> Result<Vec<String>, String> {
    let manifest = workspace_root().join("Cargo.toml");
    let text =
        std::fs::read_to_string(&manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let start = text
        .find("members")
        .and_then(|p| text[p..].find('[').map(|q| p + q + 1))
        .ok_or_else(|| format!("{}: no workspace members list", manifest.display()))?;
    let end = text[start..]
        .find(']')
        .map(|q| start + q)
        .ok_or_else(|| format!("{}: members list not closed", manifest.display()))?;
    Ok(text[start..end]
        .split(',')
        .map(|s| s.trim().trim_matches('"').to_string())
        .filter(|s| !s.is_empty())
        .collect())
}

/// Runs the check; `args` as on the command line after `check-modules`.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut chosen = Vec::new();
    let mut all = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--all" => all = true,
            "--crate" => chosen.push(
                it.next()
                    .ok_or("check-modules: --crate needs a directory")?
                    .clone(),
            ),
            other => {
                return Err(format!(
                    "check-modules: unknown argument {other:?} (--crate DIR, --all)"
                ));
            }
        }
    }
    if chosen.is_empty() {
        chosen = workspace_members()?;
        if !all {
            for (skipped, why) in SKIPPED {
                eprintln!("xtask check-modules: skipping {skipped} ({why}); --all checks it");
            }
            chosen.retain(|m| !SKIPPED.iter().any(|(s, _)| s == m));
        }
    }
    let root = workspace_root();
    let mut problems = 0;
    for member in &chosen {
        let dir = root.join(member);
        if !dir.join("Cargo.toml").is_file() {
            return Err(format!("check-modules: {member} is not a crate directory"));
        }
        let findings = check_crate(&dir);
        for c in &findings.cycles {
            println!(
                "{member}: modules under {} import each other in a circle: {}",
                c.parent,
                c.members.join(", ")
            );
            for e in &c.evidence {
                println!("    {e}");
            }
        }
        for o in &findings.outside {
            println!("{member}: {o}");
        }
        problems += findings.cycles.len() + findings.outside.len();
    }
    if problems == 0 {
        eprintln!(
            "xtask check-modules: {} crates, no module circles, nothing outside its crate",
            chosen.len()
        );
        Ok(())
    } else {
        Err(format!("check-modules: {problems} findings"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch crate under the system temp directory, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str, files: &[(&str, &str)]) -> Self {
            let dir =
                std::env::temp_dir().join(format!("xtask-modules-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            for (path, text) in files {
                let p = dir.join(path);
                std::fs::create_dir_all(p.parent().expect("has a parent")).expect("mkdir");
                std::fs::write(&p, text).expect("write");
            }
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_cycle_between_root_siblings_is_found_with_its_lines() {
        let s = Scratch::new(
            "root-cycle",
            &[
                ("src/lib.rs", "mod exec;\nmod ops;\n"),
                ("src/exec.rs", "use crate::ops::run;\n"),
                ("src/ops/mod.rs", "mod norm;\n"),
                ("src/ops/norm.rs", "fn f() {\n    crate::exec::step();\n}\n"),
            ],
        );
        let found = check_crate(&s.0);
        assert_eq!(found.cycles.len(), 1);
        let c = &found.cycles[0];
        assert_eq!(c.parent, "crate");
        assert_eq!(c.members, ["exec", "ops"]);
        assert_eq!(c.evidence.len(), 2);
        assert!(
            c.evidence[0].starts_with("exec → ops: ")
                && c.evidence[0].ends_with("exec.rs:1 `crate::ops::run`")
        );
        assert!(
            c.evidence[1].starts_with("ops → exec: ")
                && c.evidence[1].ends_with("norm.rs:2 `crate::exec::step`")
        );
    }

    #[test]
    fn super_paths_and_groups_make_sibling_edges() {
        let s = Scratch::new(
            "super-cycle",
            &[
                ("src/lib.rs", "mod ops;\n"),
                (
                    "src/ops/mod.rs",
                    "mod norm;\nmod reduce;\npub fn shared() {}\n",
                ),
                (
                    "src/ops/norm.rs",
                    "use super::{reduce::{sum, max}, shared};\n",
                ),
                (
                    "src/ops/reduce.rs",
                    "fn f() { super::super::ops::norm::same_memory(); }\n",
                ),
            ],
        );
        let found = check_crate(&s.0);
        assert_eq!(found.cycles.len(), 1);
        assert_eq!(found.cycles[0].parent, "crate::ops");
        assert_eq!(found.cycles[0].members, ["norm", "reduce"]);
        // Two uses of reduce from norm (the group), one back.
        assert_eq!(found.cycles[0].evidence.len(), 3);
    }

    #[test]
    fn parent_and_child_using_each_other_is_no_cycle() {
        let s = Scratch::new(
            "parent-child",
            &[
                ("src/lib.rs", "mod ops;\npub struct Thing;\n"),
                (
                    "src/ops/mod.rs",
                    "mod norm;\npub use norm::run;\npub fn helper() { self::norm::run(); }\n",
                ),
                (
                    "src/ops/norm.rs",
                    "use super::helper;\nuse crate::Thing;\npub fn run() { crate::ops::helper(); }\n#[cfg(test)]\nmod tests { use super::*; }\n",
                ),
            ],
        );
        let found = check_crate(&s.0);
        assert!(found.cycles.is_empty(), "{:?}", found.cycles);
        assert!(found.outside.is_empty());
    }

    #[test]
    fn nested_inline_and_path_modules_resolve_to_their_files() {
        let s = Scratch::new(
            "nested",
            &[
                (
                    "src/lib.rs",
                    "mod a;\nmod b { pub mod c { pub fn f() { crate::a::g(); } } }\n",
                ),
                (
                    "src/a.rs",
                    "#[path = \"a_impl.rs\"]\nmod inner;\npub fn g() {}\n",
                ),
                ("src/a_impl.rs", "fn h() { crate::b::c::f(); }\n"),
            ],
        );
        let found = check_crate(&s.0);
        assert_eq!(found.cycles.len(), 1);
        assert_eq!(found.cycles[0].members, ["a", "b"]);
        assert!(
            found.cycles[0]
                .evidence
                .iter()
                .any(|e| e.contains("a_impl.rs:1 `crate::b::c::f`"))
        );
    }

    #[test]
    fn sibling_names_a_glob_import_brought_in_make_edges() {
        let s = Scratch::new(
            "glob",
            &[
                ("src/lib.rs", "mod ops;\n"),
                ("src/ops/mod.rs", "mod norm;\nmod reduce;\n"),
                ("src/ops/norm.rs", "use super::reduce::sum;\n"),
                (
                    "src/ops/reduce.rs",
                    "use super::*;\nuse crate::Op::*;\nfn f() {\n    norm::same_memory();\n    std::mem::swap();\n}\n",
                ),
            ],
        );
        let found = check_crate(&s.0);
        assert_eq!(found.cycles.len(), 1);
        assert_eq!(found.cycles[0].members, ["norm", "reduce"]);
        assert!(
            found.cycles[0]
                .evidence
                .iter()
                .any(|e| e.starts_with("reduce → norm: ")
                    && e.ends_with("reduce.rs:4 `norm::same_memory`")),
            "{:?}",
            found.cycles[0].evidence
        );
    }

    #[test]
    fn one_way_sibling_use_is_no_cycle() {
        let s = Scratch::new(
            "one-way",
            &[
                ("src/lib.rs", "mod a;\nmod b;\n"),
                ("src/a.rs", "use crate::b::x;\n"),
                ("src/b.rs", "pub fn x() {}\n"),
            ],
        );
        assert!(check_crate(&s.0).cycles.is_empty());
    }

    #[test]
    fn includes_leaving_the_crate_are_reported() {
        let s = Scratch::new(
            "includes",
            &[
                (
                    "src/lib.rs",
                    "const A: &str = include_str!(\"../../shaders/k.cpp\");\nconst B: &str = include_str!(\"../kernels/k.cpp\");\n",
                ),
                (
                    "build.rs",
                    "const C: &[u8] = include_bytes!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/../x.bin\"));\n",
                ),
            ],
        );
        let found = check_crate(&s.0);
        assert_eq!(found.outside.len(), 2, "{:?}", found.outside);
        assert!(
            found
                .outside
                .iter()
                .any(|o| o.contains("lib.rs:1: include_str!(\"../../shaders/k.cpp\")"))
        );
        assert!(
            found
                .outside
                .iter()
                .any(|o| o.contains("build.rs:1: include_bytes!"))
        );
    }
}
