//! Deterministic weight values.
//!
//! Every tensor has its own ChaCha8 stream, keyed by the model seed and the
//! tensor's name: 32 key bytes are the seed (8 bytes, little-endian), the
//! 64-bit FNV-1a hash of the name, the name's length and the ASCII bytes
//! `bptmodel`. Element `i` of the tensor (row-major, rows of `dims[0]`)
//! takes the stream's 32-bit word `i`, so any row range can be generated on
//! its own, in parallel, with the same result.
//!
//! A word `x` becomes `u = (x >> 8) * 2^-23 - 1`, uniform in `[-1, 1)` on a
//! grid of 2^24 points (both steps are exact in f32), and the value is
//! `center + u * half_width` with `half_width = std * sqrt(3)`: one rounded
//! multiply and one rounded add, the same on every IEEE 754 machine (no
//! libm functions anywhere).

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

/// `sqrt(3)` rounded to f32: a uniform distribution on `[-a, a]` has
/// standard deviation `a / sqrt(3)`.
const SQRT_3: f32 = 1.732_050_8;

/// How a tensor's values are drawn: uniform on
/// `[center - half_width, center + half_width)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Init {
    /// Mean of the values.
    pub center: f32,
    /// Half the width of the interval.
    pub half_width: f32,
}

impl Init {
    /// Uniform values around 0 with standard deviation `std`.
    pub fn uniform(std: f32) -> Init {
        Init {
            center: 0.0,
            half_width: std * SQRT_3,
        }
    }

    /// Uniform values around 1 with standard deviation `std` (norm weights).
    pub fn around_one(std: f32) -> Init {
        Init::around(1.0, std)
    }

    /// Uniform values around `center` with standard deviation `std`.
    pub fn around(center: f32, std: f32) -> Init {
        Init {
            center,
            half_width: std * SQRT_3,
        }
    }

    /// The standard deviation of the values.
    pub fn std(&self) -> f32 {
        self.half_width / SQRT_3
    }
}

/// 64-bit FNV-1a hash.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The ChaCha8 key of a tensor (see the module documentation).
pub fn tensor_key(seed: u64, name: &str) -> [u8; 32] {
    let mut key = [0u8; 32];
    key[0..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&fnv1a64(name.as_bytes()).to_le_bytes());
    key[16..24].copy_from_slice(&(name.len() as u64).to_le_bytes());
    key[24..32].copy_from_slice(b"bptmodel");
    key
}

/// Maps a random word to `[-1, 1)` exactly (see the module documentation).
fn unit(word: u32) -> f32 {
    const STEP: f32 = 1.0 / (1u32 << 23) as f32;
    (word >> 8) as f32 * STEP - 1.0
}

/// Fills `out` with the tensor's elements starting at element `first`.
pub fn fill(key: [u8; 32], init: Init, first: u64, out: &mut [f32]) {
    let mut rng = ChaCha8Rng::from_seed(key);
    rng.set_word_pos(u128::from(first));
    for v in out {
        *v = init.center + unit(rng.next_u32()) * init.half_width;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_spans_minus_one_to_just_below_one() {
        assert_eq!(unit(0), -1.0);
        assert_eq!(unit(u32::MAX), 1.0 - 1.0 / (1u32 << 23) as f32);
        assert_eq!(unit(1 << 31), 0.0);
    }

    #[test]
    fn any_range_equals_the_same_slice_of_the_whole() {
        let key = tensor_key(7, "blk.0.attn_q.weight");
        let init = Init::uniform(0.1);
        let mut whole = vec![0.0; 1000];
        fill(key, init, 0, &mut whole);
        let mut part = vec![0.0; 333];
        fill(key, init, 501, &mut part);
        assert_eq!(part[..], whole[501..834]);
    }

    #[test]
    fn different_names_and_seeds_give_different_streams() {
        let init = Init::uniform(1.0);
        let draw = |seed, name| {
            let mut v = [0.0f32; 8];
            fill(tensor_key(seed, name), init, 0, &mut v);
            v
        };
        assert_ne!(draw(0, "a.weight"), draw(0, "b.weight"));
        assert_ne!(draw(0, "a.weight"), draw(1, "a.weight"));
        assert_eq!(draw(3, "a.weight"), draw(3, "a.weight"));
    }

    #[test]
    fn first_words_of_a_known_key_are_pinned() {
        // Guards the stream against a change of the generator or key
        // layout: these are the values every machine must produce.
        let mut v = [0.0f32; 4];
        fill(
            tensor_key(0, "token_embd.weight"),
            Init::uniform(1.0),
            0,
            &mut v,
        );
        let bits: Vec<u32> = v.iter().map(|x| x.to_bits()).collect();
        assert_eq!(bits, PINNED_BITS);
    }

    /// The first four values of `token_embd.weight` for seed 0 at unit
    /// standard deviation, as f32 bit patterns.
    const PINNED_BITS: [u32; 4] = [1_061_567_482, 1_066_932_363, 3_177_610_583, 1_053_578_937];
}
