//! Where a recorded graph needs a barrier between two kernels: only
//! before a kernel that touches memory an earlier kernel since the last
//! barrier writes (read after write, write after write), or writes memory
//! such a kernel reads (write after read). Kernels with no such hazard
//! between them (a layer's Q, K and V projections, its gate and up
//! projections, the two ROPEs) then run at the same time on the GPU,
//! which a barrier between every pair of kernels forbids; each barrier
//! costs a decode step a few microseconds of an idle GPU.
//!
//! Which storage bindings a kernel writes comes from naga's analysis of
//! its WGSL ([`super::pipelines`]); the kernels declare every binding
//! `read_write`, so the declaration says nothing. A kernel whose writes
//! are unknown (a native GLSL kernel) counts as writing every binding.

/// One storage binding of a kernel: its bytes of a buffer and whether the
/// kernel writes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access<B> {
    /// The buffer (any identity that equals only for the same buffer).
    pub buffer: B,
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// Whether the kernel writes (or atomically updates) them.
    pub write: bool,
}

impl<B: PartialEq> Access<B> {
    fn overlaps(&self, other: &Access<B>) -> bool {
        self.buffer == other.buffer && self.start < other.end && other.start < self.end
    }
}

/// For each kernel (its bindings, in order), whether a barrier must come
/// right before it. The first kernel needs none here (the recording
/// begins with one that covers everything before it).
pub fn barriers_needed<B: PartialEq + Copy>(kernels: &[Vec<Access<B>>]) -> Vec<bool> {
    // What the kernels since the last barrier touch.
    let mut pending: Vec<Access<B>> = Vec::new();
    kernels
        .iter()
        .map(|accesses| {
            let hazard = accesses.iter().any(|a| {
                pending
                    .iter()
                    .any(|p| (p.write || a.write) && p.overlaps(a))
            });
            if hazard {
                pending.clear();
            }
            pending.extend(accesses.iter().copied());
            hazard
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(buffer: u32, start: u64, end: u64) -> Access<u32> {
        Access {
            buffer,
            start,
            end,
            write: false,
        }
    }

    fn write(buffer: u32, start: u64, end: u64) -> Access<u32> {
        Access {
            write: true,
            ..read(buffer, start, end)
        }
    }

    #[test]
    fn kernels_reading_one_input_into_separate_outputs_share_a_barrier() {
        // norm writes x; Q, K, V read x and write their own outputs; ROPE
        // reads Q: one barrier after the norm, one before the ROPE.
        let x = read(1, 0, 256);
        let kernels = vec![
            vec![read(0, 0, 64), write(1, 0, 256)],
            vec![x, read(2, 0, 1024), write(1, 256, 512)],
            vec![x, read(2, 1024, 2048), write(1, 512, 768)],
            vec![x, read(2, 2048, 3072), write(1, 768, 1024)],
            vec![read(1, 256, 512), write(1, 1024, 1280)],
        ];
        assert_eq!(
            barriers_needed(&kernels),
            vec![false, true, false, false, true]
        );
    }

    #[test]
    fn every_kind_of_hazard_gets_a_barrier_and_reads_alone_do_not() {
        // Read after write.
        let raw = vec![vec![write(0, 0, 8)], vec![read(0, 4, 12)]];
        assert_eq!(barriers_needed(&raw), vec![false, true]);
        // Write after write.
        let waw = vec![vec![write(0, 0, 8)], vec![write(0, 7, 9)]];
        assert_eq!(barriers_needed(&waw), vec![false, true]);
        // Write after read.
        let war = vec![vec![read(0, 0, 8)], vec![write(0, 0, 8)]];
        assert_eq!(barriers_needed(&war), vec![false, true]);
        // Reads of the same bytes, or touching ranges, or another buffer.
        let apart = vec![
            vec![read(0, 0, 8), write(0, 8, 16)],
            vec![read(0, 0, 8), write(0, 16, 24)],
            vec![write(1, 8, 16)],
        ];
        assert_eq!(barriers_needed(&apart), vec![false, false, false]);
    }

    #[test]
    fn a_barrier_covers_everything_before_it() {
        // After the barrier before kernel 2, kernel 0's write is done:
        // kernel 3 may read it without another.
        let kernels = vec![
            vec![write(0, 0, 8)],
            vec![write(1, 0, 8)],
            vec![read(1, 0, 8), write(2, 0, 8)],
            vec![read(0, 0, 8), write(3, 0, 8)],
            vec![read(2, 0, 8)],
        ];
        assert_eq!(
            barriers_needed(&kernels),
            vec![false, false, true, false, true]
        );
    }
}
