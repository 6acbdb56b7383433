//! Request distributions of the YCSB core workloads: uniform, zipfian (scrambled, so that
//! popular keys are spread over the key space) and latest (zipfian over recency).
//!
//! The zipfian generator is the one YCSB uses (Gray et al., "Quickly Generating
//! Billion-Record Synthetic Databases", SIGMOD 1994), with the constant 0.99.

use rand::Rng;
use rand::rngs::SmallRng;

/// The skew YCSB uses.
const THETA: f64 = 0.99;

/// Draws item numbers in `0..n` with a Zipfian distribution (0 most popular).
#[derive(Debug, Clone)]
pub struct Zipfian {
    n: u64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    half_pow_theta: f64,
}

fn zeta(n: u64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(THETA)).sum()
}

impl Zipfian {
    pub fn new(n: u64) -> Zipfian {
        let n = n.max(1);
        let zetan = zeta(n);
        let zeta2 = zeta(2);
        Zipfian {
            n,
            alpha: 1.0 / (1.0 - THETA),
            zetan,
            eta: (1.0 - (2.0 / n as f64).powf(1.0 - THETA)) / (1.0 - zeta2 / zetan),
            half_pow_theta: 1.0 + 0.5f64.powf(THETA),
        }
    }

    pub fn next(&self, rng: &mut SmallRng) -> u64 {
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.half_pow_theta {
            return 1.min(self.n - 1);
        }
        let v = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.n - 1)
    }
}

/// FNV-1a of the 8 bytes of `x`: YCSB's scramble of Zipfian ranks into keys.
fn fnv(x: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in x.to_le_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Which records operations pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    Uniform,
    Zipfian,
    Latest,
}

impl Distribution {
    pub fn parse(s: &str) -> Option<Distribution> {
        Some(match s {
            "uniform" => Distribution::Uniform,
            "zipfian" => Distribution::Zipfian,
            "latest" => Distribution::Latest,
            _ => return None,
        })
    }
}

/// Picks existing records (`0..records`, growing as inserts add more).
#[derive(Debug, Clone)]
pub struct Picker {
    dist: Distribution,
    zipf: Zipfian,
}

impl Picker {
    pub fn new(dist: Distribution, records: u64) -> Picker {
        Picker {
            dist,
            zipf: Zipfian::new(records),
        }
    }

    /// A record among the first `records`.
    pub fn pick(&self, rng: &mut SmallRng, records: u64) -> u64 {
        let records = records.max(1);
        match self.dist {
            Distribution::Uniform => rng.random_range(0..records),
            Distribution::Zipfian => fnv(self.zipf.next(rng)) % records,
            // The newest record is the most popular.
            Distribution::Latest => records - 1 - self.zipf.next(rng) % records,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn zipfian_favours_low_ranks_and_stays_in_range() {
        let z = Zipfian::new(1000);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut counts = vec![0u32; 1000];
        for _ in 0..100_000 {
            counts[z.next(&mut rng) as usize] += 1;
        }
        assert!(counts[0] > counts[10] && counts[10] > counts[500]);
        assert!(
            counts[0] > 5_000,
            "rank 0 takes a large share: {}",
            counts[0]
        );
    }

    #[test]
    fn pickers_stay_within_the_records() {
        let mut rng = SmallRng::seed_from_u64(2);
        for dist in [
            Distribution::Uniform,
            Distribution::Zipfian,
            Distribution::Latest,
        ] {
            let p = Picker::new(dist, 100);
            assert!((0..10_000).all(|_| p.pick(&mut rng, 100) < 100));
        }
        let latest = Picker::new(Distribution::Latest, 1000);
        let newest = (0..1000)
            .filter(|_| latest.pick(&mut rng, 1000) >= 990)
            .count();
        assert!(newest > 300, "latest favours the newest records: {newest}");
    }
}
