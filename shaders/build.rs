//! Embeds every WGSL file under `wgsl/` into the crate, so a new shader is
//! a new file and nothing else: `sources.rs` maps each path relative to
//! `wgsl/` (without `.wgsl`) to its text.

use std::path::{Path, PathBuf};

fn collect(dir: &Path, root: &Path, out: &mut Vec<(String, PathBuf)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            println!("cargo:rerun-if-changed={}", path.display());
            collect(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "wgsl") {
            let rel = path.strip_prefix(root).expect("under root");
            let name = rel.with_extension("").to_string_lossy().replace('\\', "/");
            out.push((name, path.clone()));
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("wgsl");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(&root, &root, &mut files);
    let mut code = String::from(
        "/// Every embedded WGSL file: (name relative to wgsl/ without .wgsl, text).\npub static SOURCES: &[(&str, &str)] = &[\n",
    );
    for (name, path) in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        code.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            path.display().to_string()
        ));
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("sources.rs");
    std::fs::write(&out, code).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}
