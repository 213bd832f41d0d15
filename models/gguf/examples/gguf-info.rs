//! Prints a GGUF file's header, metadata and tensor table, and with
//! `--rewrite` checks that the writer reproduces the file byte for byte.
//!
//! `cargo run -p backplane-gguf --example gguf-info -- FILE [--rewrite]`

use std::io::Write;
use std::time::Instant;

use backplane_gguf::{Array, Gguf, GgufError, GgufWriter, Value};

/// Compares everything written against the original bytes.
struct Compare<'a> {
    expected: &'a [u8],
    pos: usize,
    first_difference: Option<usize>,
}

impl Write for Compare<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let end = self.pos + buf.len();
        let expected = self
            .expected
            .get(self.pos..end.min(self.expected.len()))
            .unwrap_or(&[]);
        if self.first_difference.is_none() && expected != buf {
            let at = expected
                .iter()
                .zip(buf)
                .position(|(a, b)| a != b)
                .unwrap_or(expected.len());
            self.first_difference = Some(self.pos + at);
        }
        self.pos = end;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn summary(value: &Value) -> String {
    match value {
        Value::String(s) if s.chars().count() > 60 => {
            format!("{:?}...", s.chars().take(60).collect::<String>())
        }
        Value::String(s) => format!("{s:?}"),
        Value::Array(Array::String(v)) if !v.is_empty() => {
            format!("[{} strings: {:?}, ...]", v.len(), v[0])
        }
        Value::Array(a) => format!("[{} x {}]", a.len(), a.type_name()),
        other => format!("{other:?}"),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.iter().find(|a| !a.starts_with("--")) else {
        eprintln!("usage: gguf-info FILE [--rewrite]");
        std::process::exit(2);
    };
    let started = Instant::now();
    let file = Gguf::open(path)?;
    let opened = started.elapsed();
    println!(
        "{path}: GGUF v{}, {} bytes, alignment {}, data at {}, {} keys, {} tensors (parsed in {:.2?})",
        file.version(),
        file.file_size(),
        file.alignment(),
        file.data_offset(),
        file.metadata().len(),
        file.tensors().len(),
        opened
    );
    for (key, value) in file.metadata() {
        println!("  {key}: {}", summary(value));
    }
    for t in file.tensors() {
        println!(
            "  {} {} {:?} @{} ({} bytes)",
            t.name,
            t.dtype,
            t.shape(),
            t.offset,
            t.size_bytes
        );
    }
    if args.iter().any(|a| a == "--rewrite") {
        let mut writer = GgufWriter::from_gguf(&file)?;
        writer.set_version(file.version())?;
        let mut out = Compare {
            expected: file.bytes(),
            pos: 0,
            first_difference: None,
        };
        let mut stream = writer.begin(&mut out)?;
        for t in file.tensors() {
            stream.write_tensor(&t.name, file.tensor_data(t))?;
        }
        stream.finish()?;
        match (out.first_difference, out.pos as u64 == file.file_size()) {
            (None, true) => println!("rewrite: identical ({} bytes)", out.pos),
            (Some(at), _) => {
                return Err(Box::new(GgufError::Write {
                    what: "rewrite".into(),
                    reason: format!("first difference at byte {at}"),
                }));
            }
            (None, false) => {
                return Err(Box::new(GgufError::Write {
                    what: "rewrite".into(),
                    reason: format!("{} bytes written, file has {}", out.pos, file.file_size()),
                }));
            }
        }
    }
    Ok(())
}
