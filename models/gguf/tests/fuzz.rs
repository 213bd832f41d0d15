//! Mutation fuzzing of real files: flipped, inserted, deleted and
//! overwritten bytes, truncation and huge counts must give an error or a
//! consistent file, never a panic, and parsing must stay within a small
//! multiple of the file's size in memory (a counting allocator measures the
//! peak).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use backplane_gguf::{DType, Gguf, GgufWriter};
use proptest::prelude::*;

/// The system allocator, counting live bytes and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Tests in this binary measure the process-wide peak, so they run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

// SAFETY: forwards every call to `System` unchanged and only updates counters.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let grow = new_size - layout.size();
                let live = LIVE.fetch_add(grow, Ordering::Relaxed) + grow;
                PEAK.fetch_max(live, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Most bytes parsing may hold beyond the input itself.
fn memory_cap(file_len: usize) -> usize {
    16 * file_len + (1 << 20)
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip { pos: usize, bit: u8 },
    Insert { pos: usize, bytes: Vec<u8> },
    Delete { pos: usize, len: usize },
    Overwrite { pos: usize, bytes: Vec<u8> },
    Truncate { len: usize },
    HugeCount { pos: usize, value: u64 },
}

impl Mutation {
    fn apply(&self, data: &mut Vec<u8>) {
        let at = |pos: usize, data: &Vec<u8>| {
            if data.is_empty() {
                0
            } else {
                pos % (data.len() + 1)
            }
        };
        match self {
            Mutation::Flip { pos, bit } => {
                if !data.is_empty() {
                    let i = pos % data.len();
                    data[i] ^= 1 << (bit % 8);
                }
            }
            Mutation::Insert { pos, bytes } => {
                let i = at(*pos, data);
                data.splice(i..i, bytes.iter().copied());
            }
            Mutation::Delete { pos, len } => {
                let i = at(*pos, data);
                let end = (i + len).min(data.len());
                data.drain(i..end);
            }
            Mutation::Overwrite { pos, bytes } => {
                let i = at(*pos, data);
                for (j, b) in bytes.iter().enumerate() {
                    if let Some(slot) = data.get_mut(i + j) {
                        *slot = *b;
                    }
                }
            }
            Mutation::Truncate { len } => {
                let keep = at(*len, data);
                data.truncate(keep);
            }
            Mutation::HugeCount { pos, value } => {
                Mutation::Overwrite {
                    pos: *pos,
                    bytes: value.to_le_bytes().to_vec(),
                }
                .apply(data);
            }
        }
    }
}

/// Positions biased to the header and tables, where the structure lives.
fn position() -> impl Strategy<Value = usize> {
    prop_oneof![0..64usize, 0..512usize, 0..8192usize, any::<usize>()]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let huge = prop_oneof![
        Just(u64::MAX),
        Just(1u64 << 63),
        Just(1u64 << 32),
        Just(u64::from(u32::MAX)),
        any::<u64>()
    ];
    prop_oneof![
        (position(), any::<u8>()).prop_map(|(pos, bit)| Mutation::Flip { pos, bit }),
        (position(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(pos, bytes)| Mutation::Insert { pos, bytes }),
        (position(), 1..64usize).prop_map(|(pos, len)| Mutation::Delete { pos, len }),
        (position(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(pos, bytes)| Mutation::Overwrite { pos, bytes }),
        position().prop_map(|len| Mutation::Truncate { len }),
        (position(), huge).prop_map(|(pos, value)| Mutation::HugeCount { pos, value }),
    ]
}

/// Parses `data` and checks the result is consistent and memory stayed bounded.
fn parse_checked(data: Vec<u8>) -> Result<(), TestCaseError> {
    let len = data.len();
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let parsed = Gguf::from_bytes(data);
    let used = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    prop_assert!(
        used <= memory_cap(len),
        "parsing {len} bytes peaked at {used} extra bytes"
    );
    match parsed {
        Err(e) => {
            prop_assert!(!e.to_string().is_empty());
        }
        Ok(file) => {
            for t in file.tensors() {
                prop_assert_eq!(file.tensor_data(t).len() as u64, t.size_bytes);
                prop_assert_eq!(t.offset % file.alignment(), 0);
                prop_assert!(file.tensor(&t.name).is_some());
            }
            for (key, value) in file.metadata() {
                // Same entry (compared by address: NaN values are not equal to themselves).
                prop_assert!(
                    file.get(key).is_some_and(|v| std::ptr::eq(v, value)),
                    "lookup of '{}'",
                    key
                );
                let _ = (file.get_u32(key), file.get_str(key), file.get_f32(key));
            }
        }
    }
    Ok(())
}

/// A small file with metadata of several types and one tensor of each type.
fn file_with_tensors() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama");
    w.set("llama.block_count", 2u32);
    w.set("tokenizer.ggml.tokens", vec!["<s>", "a", "b"]);
    w.set("tokenizer.ggml.scores", vec![0.0f32, -1.0, -2.0]);
    w.set(
        "nested",
        backplane_gguf::Array::Array(vec![backplane_gguf::Array::I32(vec![1, 2])]),
    );
    for dtype in DType::ALL {
        w.add_tensor(format!("t.{dtype}"), dtype, &[dtype.block_size() as i64, 2])
            .unwrap();
    }
    let mut s = w.begin(Vec::new()).unwrap();
    for t in w.tensors() {
        s.write_tensor(&t.name, &vec![0x5a; t.size_bytes as usize])
            .unwrap();
    }
    s.finish().unwrap()
}

fn spm_vocab() -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../vocab/ggml-vocab-llama-spm.gguf"
    );
    std::fs::read(path).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_file_with_tensors_never_panics_and_stays_bounded(
        mutations in prop::collection::vec(mutation(), 1..5)
    ) {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let mut data = file_with_tensors();
        for m in &mutations {
            m.apply(&mut data);
        }
        parse_checked(data)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_vocab_file_never_panics_and_stays_bounded(
        mutations in prop::collection::vec(mutation(), 1..4)
    ) {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let mut data = spm_vocab();
        for m in &mutations {
            m.apply(&mut data);
        }
        parse_checked(data)?;
    }
}

#[test]
fn huge_counts_in_a_real_file_allocate_nothing_large() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let original = spm_vocab();
    // The counter sees the parser's allocations: 32,000 token strings alone
    // take more than 700 KB.
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let file = Gguf::from_bytes(original.clone()).unwrap();
    let used = PEAK.load(Ordering::Relaxed) - base;
    assert!(
        used > 700_000 && used <= memory_cap(original.len()),
        "{used} bytes"
    );
    eprintln!(
        "parsing the {} byte spm vocab peaked at {used} bytes",
        original.len()
    );
    drop(file);
    // Every 8-byte window of the first 2 KiB set to u64::MAX in turn: the
    // counts and lengths of the header and first keys are among them.
    for pos in 0..2048 {
        let mut data = original[..original.len().min(1 << 16)].to_vec();
        data[pos..pos + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let len = data.len();
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let result = Gguf::from_bytes(data);
        let used = PEAK.load(Ordering::Relaxed).saturating_sub(base);
        assert!(
            used <= memory_cap(len),
            "u64::MAX at byte {pos}: {used} bytes"
        );
        assert!(result.is_err(), "a 64 KiB prefix of the vocab cannot parse");
    }
}

#[test]
fn opening_a_sparse_4_gib_file_reads_only_the_tables() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path =
        std::env::temp_dir().join(format!("backplane-gguf-sparse-{}.gguf", std::process::id()));
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama");
    w.add_tensor("big", DType::F32, &[1 << 20, 1 << 10])
        .unwrap();
    let total = w.file_size().unwrap();
    let stream = w.begin(std::fs::File::create(&path).unwrap()).unwrap();
    drop(stream);
    // The data section becomes a hole: 4 GiB that were never written.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(total)
        .unwrap();

    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let file = Gguf::open(&path);
    let used = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    std::fs::remove_file(&path).unwrap();
    let file = file.unwrap();
    assert!(used < 64 * 1024, "opening took {used} heap bytes");
    let big = file.tensor("big").unwrap();
    assert_eq!(big.size_bytes, 4 << 30);
    assert_eq!(file.file_size(), total);
    let data = file.tensor_data(big);
    assert_eq!(data.len() as u64, 4 << 30);
    assert_eq!(data[(3 << 30) + 12345], 0);
}

#[test]
fn extreme_values_at_every_table_position_are_handled() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let original = file_with_tensors();
    let table_end = Gguf::from_bytes(original.clone()).unwrap().data_offset() as usize;
    let extremes = [
        u64::MAX,
        i64::MAX as u64,
        1 << 62,
        1 << 61,
        1 << 32,
        u64::from(u32::MAX),
        0,
    ];
    let mut outcomes = [0usize; 2];
    // Every counts, length, dimension, type and offset field is among these windows.
    for pos in 0..table_end - 8 {
        for value in extremes {
            let mut data = original.clone();
            data[pos..pos + 8].copy_from_slice(&value.to_le_bytes());
            let result = Gguf::from_bytes(data);
            outcomes[usize::from(result.is_ok())] += 1;
        }
    }
    assert!(
        outcomes[0] > 0 && outcomes[1] > 0,
        "errors and successes: {outcomes:?}"
    );
}
