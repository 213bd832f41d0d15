//! Picking the next token: greedy (argmax) at temperature 0, else a seeded
//! draw from the softmax of the logits over the temperature.

/// How tokens are drawn from the logits.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampler {
    /// 0 (or less): always the most likely token. Else the logits are
    /// divided by this before the softmax.
    pub temp: f32,
    /// Seed of the random draws (the same seed gives the same tokens).
    pub seed: u64,
    /// Only the `top_k` most likely tokens can be drawn (0: all).
    pub top_k: usize,
    /// Stop at the tokenizer's end-of-generation tokens.
    pub stop_at_eog: bool,
}

impl Default for Sampler {
    fn default() -> Self {
        Sampler {
            temp: 0.0,
            seed: 0,
            top_k: 0,
            stop_at_eog: true,
        }
    }
}

impl Sampler {
    /// Greedy sampling that does not stop at end-of-generation tokens.
    pub fn greedy() -> Sampler {
        Sampler {
            stop_at_eog: false,
            ..Sampler::default()
        }
    }
}

/// Index of the largest value (the first of equal ones); 0 when empty.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// A [`Sampler`]'s random state over one generation.
pub struct SamplerState {
    temp: f32,
    top_k: usize,
    rng: u64,
    scratch: Vec<(f32, u32)>,
}

impl SamplerState {
    /// Starts drawing with `sampler`'s seed.
    pub fn new(sampler: &Sampler) -> SamplerState {
        SamplerState {
            temp: sampler.temp,
            top_k: sampler.top_k,
            rng: sampler.seed,
            scratch: Vec::new(),
        }
    }

    /// SplitMix64: a uniform number in [0, 1).
    fn uniform(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The next token from one row of logits.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        if self.temp <= 0.0 || logits.is_empty() {
            return argmax(logits);
        }
        self.scratch.clear();
        self.scratch
            .extend(logits.iter().enumerate().map(|(i, &v)| (v, i as u32)));
        if self.top_k > 0 && self.top_k < self.scratch.len() {
            self.scratch
                .select_nth_unstable_by(self.top_k - 1, |a, b| b.0.total_cmp(&a.0));
            self.scratch.truncate(self.top_k);
        }
        let max = self
            .scratch
            .iter()
            .map(|p| p.0)
            .fold(f32::NEG_INFINITY, f32::max);
        let inv_t = 1.0 / f64::from(self.temp);
        let mut total = 0.0f64;
        for p in &mut self.scratch {
            let w = ((f64::from(p.0) - f64::from(max)) * inv_t).exp();
            p.0 = w as f32;
            total += w;
        }
        let mut r = self.uniform() * total;
        for p in &self.scratch {
            r -= f64::from(p.0);
            if r < 0.0 {
                return p.1;
            }
        }
        self.scratch.last().map_or(0, |p| p.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_picks_the_first_largest_logit() {
        assert_eq!(argmax(&[0.5, 2.0, -1.0, 2.0]), 1);
        let mut s = SamplerState::new(&Sampler::greedy());
        assert_eq!(s.sample(&[0.1, 0.2, 3.0]), 2);
    }

    #[test]
    fn seeded_sampling_repeats_and_follows_the_distribution() {
        let logits = [0.0f32, (3.0f32).ln(), f32::NEG_INFINITY];
        let sampler = Sampler {
            temp: 1.0,
            seed: 42,
            ..Sampler::default()
        };
        let draw = |n: usize| {
            let mut s = SamplerState::new(&sampler);
            (0..n).map(|_| s.sample(&logits)).collect::<Vec<u32>>()
        };
        let a = draw(4000);
        assert_eq!(a, draw(4000), "same seed, same draws");
        assert!(!a.contains(&2), "a -inf logit is never drawn");
        let ones = a.iter().filter(|&&t| t == 1).count() as f64 / a.len() as f64;
        assert!((ones - 0.75).abs() < 0.03, "p(1) = {ones}, want 0.75");
    }

    #[test]
    fn top_k_one_is_greedy() {
        let sampler = Sampler {
            temp: 5.0,
            top_k: 1,
            seed: 7,
            ..Sampler::default()
        };
        let mut s = SamplerState::new(&sampler);
        for _ in 0..20 {
            assert_eq!(s.sample(&[1.0, 4.0, 3.9]), 1);
        }
    }
}
