//! The probe cache: probe outcomes keyed by the plugin file's (path, size,
//! mtime, content hash) and the host's identity, so a warm start runs no
//! probe process.
//!
//! The file is JSON at [`CACHE_ENV`] if set (`off`: no cache), else
//! `$XDG_CACHE_HOME/backplane/probe-cache.json`, else
//! `~/.cache/backplane/probe-cache.json`. Writes go to a temporary file and
//! are renamed into place, so concurrent hosts never see half a file; the
//! last writer wins, which costs at most a repeated probe.
//!
//! The content hash is a fast non-cryptographic 64-bit hash of every byte
//! (about 0.1 s per GB here; see docs/plugin-authors.md): it catches a file
//! replaced in place with the same size and mtime (`cp -p`, an unpacked
//! archive), not an attacker, who could as well write a plugin that
//! behaves while probed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::probe::Outcome;

/// Entries kept at most (the oldest are dropped).
pub const MAX_ENTRIES: usize = 1000;

/// Environment variable naming the cache file (`off`: no cache).
pub const CACHE_ENV: &str = "BACKPLANE_PROBE_CACHE";

/// The default cache file, `None` when caching is off or no place is known.
pub fn default_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(CACHE_ENV) {
        return (p != "off").then(|| PathBuf::from(p));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("backplane").join("probe-cache.json"))
}

/// What identifies one plugin file's content and the host judging it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Its modification time, nanoseconds since the epoch.
    pub mtime_ns: u128,
    /// [`content_hash`] of its bytes, hex.
    pub hash: String,
    /// The judging host ([`host_identity`]).
    pub host: String,
}

/// One cached outcome.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    key: Key,
    outcome: Outcome,
    /// For a timeout: the limit it ran under (a longer limit probes again).
    timeout_s: Option<f64>,
}

/// The cache file's content.
#[derive(Default, Serialize, Deserialize)]
struct CacheFile {
    entries: Vec<Entry>,
}

/// A 64-bit hash of `bytes` read from `r` (FxHash-style multiply-rotate
/// over 8-byte words, four lanes, then a final avalanche).
pub fn content_hash(mut r: impl Read) -> std::io::Result<u64> {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut lanes = [K, K.rotate_left(17), K.rotate_left(31), K.rotate_left(47)];
    let mut buf = vec![0u8; 1 << 20];
    let mut total: u64 = 0;
    loop {
        let mut n = 0;
        while n < buf.len() {
            match r.read(&mut buf[n..])? {
                0 => break,
                m => n += m,
            }
        }
        if n == 0 {
            break;
        }
        total += n as u64;
        // Zero-pad the tail to whole 32-byte blocks (the length is mixed in
        // at the end, so padding does not collide with real zeros).
        let padded = n.div_ceil(32) * 32;
        buf[n..padded].fill(0);
        for block in buf[..padded].chunks_exact(32) {
            for (lane, word) in lanes.iter_mut().zip(block.chunks_exact(8)) {
                let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
                *lane = (lane.rotate_left(5) ^ w).wrapping_mul(K);
            }
        }
        if n < buf.len() {
            break;
        }
    }
    let mut h = total.wrapping_mul(K);
    for lane in lanes {
        h = (h ^ lane).wrapping_mul(K).rotate_left(23);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    Ok(h)
}

/// The host's identity in cache keys: the ABI version plus the size and
/// mtime of the executable that probes (a rebuilt host probes again, as its
/// layout checks may have changed).
pub fn host_identity(probe_exe: &Path) -> String {
    let (len, mtime) = std::fs::metadata(probe_exe)
        .map(|m| (m.len(), mtime_ns(&m)))
        .unwrap_or((0, 0));
    format!(
        "abi{}-{}-{len}-{mtime}",
        backplane_abi::plugin::ABI_VERSION,
        probe_exe.display()
    )
}

fn mtime_ns(m: &std::fs::Metadata) -> u128 {
    m.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos())
}

/// The key of `path` as judged by `host`, or why the file cannot be read.
pub fn key(path: &Path, host: &str) -> Result<Key, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let m = f.metadata().map_err(|e| format!("cannot stat: {e}"))?;
    let hash = content_hash(std::io::BufReader::new(f)).map_err(|e| format!("cannot read: {e}"))?;
    Ok(Key {
        path: path.to_path_buf(),
        size: m.len(),
        mtime_ns: mtime_ns(&m),
        hash: format!("{hash:016x}"),
        host: host.to_string(),
    })
}

/// The probe cache, loaded from its file.
pub struct Cache {
    path: Option<PathBuf>,
    entries: Vec<Entry>,
    changed: bool,
}

impl Cache {
    /// Loads the cache at `path` (`None`: an always-empty cache). A missing
    /// or unreadable file is an empty cache.
    pub fn open(path: Option<&Path>) -> Cache {
        let entries = path
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|b| serde_json::from_slice::<CacheFile>(&b).ok())
            .map(|f| f.entries)
            .unwrap_or_default();
        Cache {
            path: path.map(Path::to_path_buf),
            entries,
            changed: false,
        }
    }

    /// The cached outcome for `key` under `timeout`, if any.
    pub fn get(&self, key: &Key, timeout: Duration) -> Option<Outcome> {
        let e = self.entries.iter().find(|e| e.key == *key)?;
        match e.timeout_s {
            // A timeout under a shorter limit than now says nothing.
            Some(t) if t < timeout.as_secs_f64() => None,
            _ => Some(e.outcome.clone()),
        }
    }

    /// Records an outcome; `timed_out` with the limit it ran under.
    pub fn put(&mut self, key: Key, outcome: Outcome, timed_out: Option<Duration>) {
        self.entries
            .retain(|e| e.key.path != key.path || e.key.host != key.host);
        self.entries.push(Entry {
            key,
            outcome,
            timeout_s: timed_out.map(|t| t.as_secs_f64()),
        });
        self.changed = true;
    }

    /// Writes the cache back if it changed, dropping entries of files that
    /// no longer exist. Failures are logged, never fatal.
    pub fn save(mut self) {
        let Some(path) = self.path.take() else { return };
        if !self.changed {
            return;
        }
        self.entries.retain(|e| e.key.path.exists());
        // Bounded: the oldest entries go first.
        let excess = self.entries.len().saturating_sub(MAX_ENTRIES);
        self.entries.drain(..excess);
        let mut write = || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let tmp = path.with_extension(format!(
                "tmp{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let body = serde_json::to_vec(&CacheFile {
                entries: std::mem::take(&mut self.entries),
            })?;
            std::fs::write(&tmp, body)?;
            std::fs::rename(&tmp, &path)
        };
        if let Err(e) = write() {
            tracing::warn!(path = %path.display(), "cannot write the plugin probe cache: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_hash_sees_every_byte_and_the_length() {
        let a = vec![7u8; 3_000_001];
        let mut b = a.clone();
        b[2_999_999] = 8;
        let h = |v: &[u8]| content_hash(v).unwrap();
        assert_ne!(h(&a), h(&b));
        assert_ne!(h(&a[..10]), h(&a[..11]));
        assert_ne!(h(&[0u8; 5]), h(&[0u8; 6]));
        assert_eq!(h(&a), h(&a.clone()));
    }

    #[test]
    fn cache_round_trips_and_rejects_a_shorter_timeout_entry() {
        let dir = std::env::temp_dir().join(format!("backplane-cache-{}", std::process::id()));
        let file = dir.join("c.json");
        let plugin = dir.join("p.so");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&plugin, b"x").unwrap();
        let k = key(&plugin, "host").unwrap();
        let mut c = Cache::open(Some(&file));
        c.put(k.clone(), Outcome::Accepted { score: 3 }, None);
        c.save();
        let c = Cache::open(Some(&file));
        assert_eq!(c.get(&k, DEFAULT), Some(Outcome::Accepted { score: 3 }));
        let mut c = Cache::open(Some(&file));
        let hung = Outcome::Refused {
            reason: "timed out".into(),
        };
        c.put(k.clone(), hung.clone(), Some(Duration::from_secs(1)));
        assert_eq!(c.get(&k, Duration::from_secs(1)), Some(hung));
        assert_eq!(c.get(&k, Duration::from_secs(5)), None);
        std::fs::write(&plugin, b"y").unwrap();
        assert_ne!(key(&plugin, "host").unwrap(), k);
        let _ = std::fs::remove_dir_all(&dir);
    }

    const DEFAULT: Duration = Duration::from_secs(10);
}
