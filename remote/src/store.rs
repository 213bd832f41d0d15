//! Weights the server already holds: the tensors of its own GGUF files,
//! indexed by the SHA-256 of their bytes, so that a client uploading a
//! tensor with the same content can name it by hash and the bytes need not
//! cross the network (`UploadStored`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use backplane_gguf::Gguf;
use sha2::{Digest, Sha256};

/// Environment variable naming directories (a path list) whose `*.gguf`
/// files `backplane serve` indexes at start.
pub const MODELS_ENV: &str = "BACKPLANE_SERVE_MODELS";

/// Tensors smaller than this are not indexed (nor looked up by clients):
/// sending them costs less than asking.
pub const MIN_STORED_BYTES: u64 = 64 << 10;

/// The indexed tensors of a set of GGUF files (memory-mapped, read-only).
#[derive(Default)]
pub struct ModelStore {
    files: Vec<Gguf>,
    /// Content hash -> (file, tensor) of the first tensor with those bytes.
    by_hash: HashMap<[u8; 32], (usize, usize)>,
    bytes: u64,
    indexing_time: Duration,
}

/// What indexing found, for the server's start-up line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreSummary {
    /// GGUF files indexed.
    pub files: usize,
    /// Distinct tensors indexed.
    pub tensors: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Files that could not be read, each with its reason.
    pub skipped: Vec<String>,
}

impl ModelStore {
    /// Indexes every `*.gguf` file directly inside `dirs` (or named in
    /// `dirs` itself): opens it, and hashes each tensor of at least
    /// [`MIN_STORED_BYTES`]. A file that does not parse is skipped and named
    /// in the summary; a directory that cannot be read is an error.
    pub fn index(dirs: &[PathBuf]) -> Result<(ModelStore, StoreSummary), String> {
        let t0 = Instant::now();
        let mut paths = Vec::new();
        for d in dirs {
            if d.is_file() {
                paths.push(d.clone());
                continue;
            }
            let entries = std::fs::read_dir(d)
                .map_err(|e| format!("model directory {}: {e}", d.display()))?;
            let mut found: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "gguf") && p.is_file())
                .collect();
            found.sort();
            paths.extend(found);
        }
        let mut store = ModelStore::default();
        let mut skipped = Vec::new();
        for p in &paths {
            match Gguf::open(p) {
                Ok(g) => store.add(g),
                Err(e) => skipped.push(format!("{}: {e}", p.display())),
            }
        }
        store.indexing_time = t0.elapsed();
        let summary = StoreSummary {
            files: store.files.len(),
            tensors: store.by_hash.len(),
            bytes: store.bytes,
            skipped,
        };
        Ok((store, summary))
    }

    fn add(&mut self, file: Gguf) {
        let f = self.files.len();
        for (t, info) in file.tensors().iter().enumerate() {
            if info.size_bytes < MIN_STORED_BYTES {
                continue;
            }
            let data = file.tensor_data(info);
            if data.len() as u64 != info.size_bytes {
                continue;
            }
            let hash: [u8; 32] = Sha256::digest(data).into();
            if let std::collections::hash_map::Entry::Vacant(v) = self.by_hash.entry(hash) {
                v.insert((f, t));
                self.bytes += info.size_bytes;
            }
        }
        self.files.push(file);
    }

    /// Number of distinct tensors indexed.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// True when nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// How long indexing took.
    pub fn indexing_time(&self) -> Duration {
        self.indexing_time
    }

    /// The bytes whose SHA-256 is `hash`, if a file holds them, with the
    /// file and tensor name they come from.
    pub fn get(&self, hash: &[u8; 32]) -> Option<(&[u8], &Path, &str)> {
        let &(f, t) = self.by_hash.get(hash)?;
        let file = &self.files[f];
        let info = &file.tensors()[t];
        Some((
            file.tensor_data(info),
            file.path().unwrap_or(Path::new("")),
            &info.name,
        ))
    }
}

/// SHA-256 of some bytes, as the store keys them.
pub fn content_hash(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}
