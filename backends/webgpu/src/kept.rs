//! The last converted copy of a graph tensor, kept in scratch memory for
//! later nodes of the same graph that convert the same tensor the same way.
//!
//! MUL_MAT first quantizes or converts its activations (src1) into scratch
//! memory. Nodes that share src1 (a layer's Q, K and V projections, an
//! FFN's gate and up) then convert it once, as ggml's Vulkan backend does
//! with its last converted src1. The copy stays valid until a node writes
//! bytes of the source tensor, the scratch buffer is replaced, or the graph
//! ends (an encoder keeps it for one graph only).

use backplane_abi::TensorDesc;
use backplane_shaders::PipelineKey;

/// The bytes a tensor view covers in its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteRange {
    /// The buffer's id.
    pub buffer: u64,
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

impl ByteRange {
    /// The range `t` covers, from its offset over `nbytes()`.
    pub fn of(t: &TensorDesc) -> ByteRange {
        ByteRange {
            buffer: t.buffer,
            start: t.offset,
            end: t.offset + t.nbytes(),
        }
    }

    /// Whether the two ranges share a byte.
    pub fn overlaps(&self, other: &ByteRange) -> bool {
        self.buffer == other.buffer && self.start < other.end && other.start < self.end
    }
}

/// What produced a copy: the source tensor's graph index and bytes, and
/// the conversion kernel with its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyOrigin {
    /// Graph index of the source tensor.
    pub source: usize,
    /// The source's bytes.
    pub range: ByteRange,
    /// The conversion kernel.
    pub key: PipelineKey,
    /// Its parameter words.
    pub params: Vec<u32>,
}

/// At most one kept copy (`T`: its scratch binding) and where it ends in
/// scratch memory.
pub struct Kept<T> {
    entry: Option<(CopyOrigin, T, u64)>,
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept { entry: None }
    }
}

impl<T> Kept<T> {
    /// The copy made by `origin`, if it is still kept.
    pub fn find(&self, origin: &CopyOrigin) -> Option<&T> {
        match &self.entry {
            Some((o, copy, _)) if o == origin => Some(copy),
            _ => None,
        }
    }

    /// Keeps `copy`, which ends at byte `scratch_end` of scratch memory,
    /// in place of any earlier one.
    pub fn keep(&mut self, origin: CopyOrigin, copy: T, scratch_end: u64) {
        self.entry = Some((origin, copy, scratch_end));
    }

    /// Drops the copy.
    pub fn forget(&mut self) {
        self.entry = None;
    }

    /// Drops the copy when a node writing `written` changes its source.
    pub fn forget_if_written(&mut self, written: &ByteRange) {
        if self
            .entry
            .as_ref()
            .is_some_and(|(o, _, _)| o.range.overlaps(written))
        {
            self.entry = None;
        }
    }

    /// Scratch bytes the kept copy reaches (0 without one): a node's own
    /// scratch starts there.
    pub fn scratch_end(&self) -> u64 {
        self.entry.as_ref().map_or(0, |(_, _, end)| *end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(source: usize, start: u64, params: &[u32]) -> CopyOrigin {
        CopyOrigin {
            source,
            range: ByteRange {
                buffer: 7,
                start,
                end: start + 64,
            },
            key: PipelineKey::new("mul_mat_quantize", "").ty("SRC1", "f32"),
            params: params.to_vec(),
        }
    }

    #[test]
    fn a_copy_is_found_only_for_the_same_source_kernel_and_params() {
        let mut kept = Kept::default();
        assert_eq!(kept.scratch_end(), 0);
        kept.keep(origin(3, 0, &[1, 2]), "copy", 4096);
        assert_eq!(kept.find(&origin(3, 0, &[1, 2])), Some(&"copy"));
        assert_eq!(kept.find(&origin(4, 0, &[1, 2])), None);
        assert_eq!(kept.find(&origin(3, 0, &[1, 3])), None);
        let mut other_kernel = origin(3, 0, &[1, 2]);
        other_kernel.key = other_kernel.key.ty("DST", "f16");
        assert_eq!(kept.find(&other_kernel), None);
        assert_eq!(kept.scratch_end(), 4096);
        kept.keep(origin(5, 0, &[1, 2]), "newer", 256);
        assert_eq!(kept.find(&origin(3, 0, &[1, 2])), None);
        assert_eq!(kept.scratch_end(), 256);
        kept.forget();
        assert_eq!(kept.find(&origin(5, 0, &[1, 2])), None);
        assert_eq!(kept.scratch_end(), 0);
    }

    #[test]
    fn a_write_over_any_byte_of_the_source_drops_the_copy() {
        let mut kept = Kept::default();
        kept.keep(origin(3, 128, &[]), (), 256);
        // Next to the source, or in another buffer: kept.
        for (buffer, start, end) in [(7, 0, 128), (7, 192, 300), (8, 128, 192)] {
            kept.forget_if_written(&ByteRange { buffer, start, end });
            assert!(kept.find(&origin(3, 128, &[])).is_some(), "{start}..{end}");
        }
        kept.forget_if_written(&ByteRange {
            buffer: 7,
            start: 191,
            end: 192,
        });
        assert!(kept.find(&origin(3, 128, &[])).is_none());
        assert_eq!(kept.scratch_end(), 0);
    }
}
