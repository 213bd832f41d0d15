//! Hand-built GGUF bytes for tests: every field written explicitly so a test
//! can place a bad value at a known offset.

#![allow(dead_code)]

/// A little-endian byte buffer with GGUF field writers.
#[derive(Default)]
pub struct Raw(pub Vec<u8>);

impl Raw {
    /// Magic, version, tensor count and kv count.
    pub fn header(version: u32, tensors: u64, kvs: u64) -> Raw {
        let mut r = Raw::default();
        r.bytes(b"GGUF").u32(version).u64(tensors).u64(kvs);
        r
    }
    pub fn len(&self) -> u64 {
        self.0.len() as u64
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut Raw {
        self.0.extend_from_slice(b);
        self
    }
    pub fn u8(&mut self, v: u8) -> &mut Raw {
        self.bytes(&[v])
    }
    pub fn u32(&mut self, v: u32) -> &mut Raw {
        self.bytes(&v.to_le_bytes())
    }
    pub fn u64(&mut self, v: u64) -> &mut Raw {
        self.bytes(&v.to_le_bytes())
    }
    pub fn i64(&mut self, v: i64) -> &mut Raw {
        self.bytes(&v.to_le_bytes())
    }
    pub fn str(&mut self, s: &str) -> &mut Raw {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }
    /// A key with a u32 value (type 4).
    pub fn kv_u32(&mut self, key: &str, v: u32) -> &mut Raw {
        self.str(key).u32(4).u32(v)
    }
    /// A key with a string value (type 8).
    pub fn kv_str(&mut self, key: &str, v: &str) -> &mut Raw {
        self.str(key).u32(8).str(v)
    }
    /// A tensor entry.
    pub fn tensor(&mut self, name: &str, ne: &[i64], dtype: u32, offset: u64) -> &mut Raw {
        self.str(name).u32(ne.len() as u32);
        for &d in ne {
            self.i64(d);
        }
        self.u32(dtype).u64(offset)
    }
    /// Zero bytes up to a multiple of `alignment`.
    pub fn pad(&mut self, alignment: usize) -> &mut Raw {
        while !self.0.len().is_multiple_of(alignment) {
            self.0.push(0);
        }
        self
    }
    pub fn zeros(&mut self, n: usize) -> &mut Raw {
        self.0.resize(self.0.len() + n, 0);
        self
    }
    pub fn done(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.0)
    }
}
