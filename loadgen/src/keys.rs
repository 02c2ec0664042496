//! Key choice: which key index a request touches, uniformly or Zipf-distributed over
//! `--keyspace` keys, and the 12-digit zero-padded form redis-benchmark gives it
//! (`key:000000001234`), so both tools address the same keys.

use std::fmt;

use crate::rng::Rng;

/// Width of a key index in a key name, as redis-benchmark's `__rand_int__` writes it.
pub const KEY_DIGITS: usize = 12;

/// How key indexes are drawn from `[0, keyspace)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyDist {
    /// Every key equally likely.
    Uniform,
    /// Key of rank k (k = 1 is index 0) drawn with probability ∝ 1/k^s.
    Zipf(f64),
}

impl fmt::Display for KeyDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyDist::Uniform => f.write_str("uniform"),
            KeyDist::Zipf(s) => write!(f, "zipf:{s}"),
        }
    }
}

impl std::str::FromStr for KeyDist {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "uniform" {
            return Ok(KeyDist::Uniform);
        }
        if let Some(exp) = s.strip_prefix("zipf:") {
            return match exp.parse::<f64>() {
                Ok(e) if e.is_finite() && e > 0.0 => Ok(KeyDist::Zipf(e)),
                _ => Err(format!("zipf exponent must be a number > 0, got {exp:?}")),
            };
        }
        Err(format!("expected uniform or zipf:S, got {s:?}"))
    }
}

/// Draws key indexes from `[0, n)` according to a [`KeyDist`].
#[derive(Clone, Debug)]
pub struct KeySampler {
    n: u64,
    zipf: Option<Zipf>,
}

impl KeySampler {
    /// A sampler over `n` keys; `n` must be at least 1.
    pub fn new(dist: KeyDist, n: u64) -> Self {
        let n = n.max(1);
        let zipf = match dist {
            KeyDist::Uniform => None,
            KeyDist::Zipf(s) => Some(Zipf::new(n, s)),
        };
        KeySampler { n, zipf }
    }

    /// The next key index.
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        match &self.zipf {
            None => rng.below(self.n),
            Some(z) => z.sample(rng) - 1,
        }
    }
}

/// Zipf sampling by rejection-inversion (W. Hörmann and G. Derflinger, "Rejection-inversion
/// to generate variates from monotone discrete distributions", 1996), the method Apache
/// Commons RNG uses: O(1) per sample and no table, so a billion-key space costs nothing.
/// Yields ranks in `[1, n]`.
#[derive(Clone, Debug)]
struct Zipf {
    n: f64,
    exponent: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
}

impl Zipf {
    fn new(n: u64, exponent: f64) -> Self {
        let mut z = Zipf {
            n: n as f64,
            exponent,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(z.n + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_integral_n + rng.unit() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.s || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }

    /// h(x) = 1/x^exponent.
    fn h(&self, x: f64) -> f64 {
        (-self.exponent * x.ln()).exp()
    }

    /// H(x), an integral of h with H(1.5) − h(1) = H(x1).
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.exponent) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.exponent)).max(-1.0);
        (helper1(t) * x).exp()
    }
}

/// ln(1 + x) / x, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// (e^x − 1) / x, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

/// Writes `n` as [`KEY_DIGITS`] zero-padded decimal digits (the low digits of larger numbers).
#[inline]
pub fn pad12(mut n: u64, out: &mut [u8; KEY_DIGITS]) {
    for slot in out.iter_mut().rev() {
        *slot = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frequencies(sampler: &KeySampler, n: usize, draws: usize, seed: u64) -> Vec<u64> {
        let mut rng = Rng::new(seed);
        let mut counts = vec![0u64; n];
        for _ in 0..draws {
            let k = sampler.sample(&mut rng) as usize;
            assert!(k < n, "sample {k} outside [0, {n})");
            counts[k] += 1;
        }
        counts
    }

    /// Each observed count is within five binomial standard deviations of n·p.
    fn assert_matches(counts: &[u64], expected: &[f64], draws: usize) {
        for (k, (&got, &p)) in counts.iter().zip(expected).enumerate() {
            let mean = draws as f64 * p;
            let sd = (draws as f64 * p * (1.0 - p)).sqrt();
            assert!(
                (got as f64 - mean).abs() <= 5.0 * sd + 1.0,
                "index {k}: {got} draws, expected {mean:.1} ± {:.1}",
                5.0 * sd
            );
        }
    }

    fn zipf_expected(n: usize, s: f64) -> Vec<f64> {
        let weights: Vec<f64> = (1..=n).map(|k| (k as f64).powf(-s)).collect();
        let total: f64 = weights.iter().sum();
        weights.iter().map(|w| w / total).collect()
    }

    #[test]
    fn zipf_matches_expected_frequencies() {
        const DRAWS: usize = 1_000_000;
        for (n, s) in [(100, 1.0), (100, 0.99), (50, 1.5), (1000, 0.5), (10, 2.5)] {
            let sampler = KeySampler::new(KeyDist::Zipf(s), n as u64);
            let counts = frequencies(&sampler, n, DRAWS, 42);
            assert_matches(&counts, &zipf_expected(n, s), DRAWS);
        }
    }

    #[test]
    fn zipf_hottest_key_is_index_zero() {
        let sampler = KeySampler::new(KeyDist::Zipf(1.2), 1_000_000);
        let mut rng = Rng::new(3);
        let zeros = (0..10_000)
            .filter(|_| sampler.sample(&mut rng) == 0)
            .count();
        // p(rank 1) = 1/ζ(1.2) restricted to 10^6 terms ≈ 0.18.
        assert!((1_500..2_200).contains(&zeros), "{zeros}");
    }

    #[test]
    fn zipf_single_key() {
        let sampler = KeySampler::new(KeyDist::Zipf(1.0), 1);
        let mut rng = Rng::new(1);
        assert!((0..1000).all(|_| sampler.sample(&mut rng) == 0));
    }

    #[test]
    fn uniform_covers_the_range_evenly() {
        const N: usize = 64;
        const DRAWS: usize = 640_000;
        let sampler = KeySampler::new(KeyDist::Uniform, N as u64);
        let counts = frequencies(&sampler, N, DRAWS, 9);
        assert!(counts.iter().all(|&c| c > 0), "every key drawn");
        assert_matches(&counts, &[1.0 / N as f64; N], DRAWS);
    }

    #[test]
    fn parse_distributions() {
        assert_eq!("uniform".parse(), Ok(KeyDist::Uniform));
        assert_eq!("zipf:0.99".parse(), Ok(KeyDist::Zipf(0.99)));
        assert!("zipf:0".parse::<KeyDist>().is_err());
        assert!("zipf:x".parse::<KeyDist>().is_err());
        assert!("normal".parse::<KeyDist>().is_err());
    }

    #[test]
    fn padding() {
        let mut b = [0u8; KEY_DIGITS];
        pad12(1234, &mut b);
        assert_eq!(&b, b"000000001234");
        pad12(0, &mut b);
        assert_eq!(&b, b"000000000000");
    }
}
