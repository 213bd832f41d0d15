//! Parses arbitrary bytes as a GGUF file. Whatever parses must be
//! consistent (every tensor's data inside the file, every key found again)
//! and must survive a rewrite: writing it back and parsing that gives a file
//! that writes back to the same bytes.
//!
//! `cargo +nightly fuzz run parse -- -rss_limit_mb=512` from this folder
//! (seed the corpus with the files in models/vocab).

#![no_main]

use backplane_gguf::{Gguf, GgufWriter};
use libfuzzer_sys::fuzz_target;

fn rewrite(file: &Gguf) -> Vec<u8> {
    let mut writer = GgufWriter::from_gguf(file).expect("a parsed table is a valid table");
    writer
        .set_version(file.version())
        .expect("parsed versions are writable");
    let mut stream = writer
        .begin(Vec::new())
        .expect("parsed metadata is writable");
    for t in file.tensors() {
        stream
            .write_tensor(&t.name, file.tensor_data(t))
            .expect("sizes match");
    }
    stream.finish().expect("all tensors written")
}

fuzz_target!(|data: &[u8]| {
    let Ok(file) = Gguf::from_bytes(data.to_vec()) else {
        return;
    };
    for t in file.tensors() {
        assert_eq!(file.tensor_data(t).len() as u64, t.size_bytes);
        assert!(file.tensor(&t.name).is_some());
    }
    for (key, value) in file.metadata() {
        assert!(file.get(key).is_some_and(|v| std::ptr::eq(v, value)));
    }
    let once = rewrite(&file);
    let reparsed = Gguf::from_bytes(once.clone()).expect("the writer's output parses");
    // The writer packs tensors in table order; the reader also takes gaps
    // and any order, so only the offsets may differ.
    let shape = |g: &Gguf| -> Vec<_> {
        g.tensors()
            .iter()
            .map(|t| (t.name.clone(), t.dtype, t.ne, t.size_bytes))
            .collect()
    };
    assert_eq!(shape(&reparsed), shape(&file));
    for (a, b) in reparsed.tensors().iter().zip(file.tensors()) {
        assert!(
            reparsed.tensor_data(a) == file.tensor_data(b),
            "tensor '{}' data changed",
            a.name
        );
    }
    assert!(rewrite(&reparsed) == once, "rewriting is not idempotent");
});
