//! A latency histogram of bounded size: a long soak records millions of requests, and keeping
//! every latency to sort at the end would grow without bound.

/// Values below this have a bucket each; above, each power of two is split in half as many equal
/// parts, so a recorded value is known to within 1/64 of itself (under 2%).
const SUB_BUCKETS: u64 = 128;
const SUB_BITS: u32 = SUB_BUCKETS.trailing_zeros();

/// Latencies in microseconds, log-linear buckets: exact below 128 µs, within 2% above.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

impl Histogram {
    /// Records one latency of `us` microseconds.
    pub fn record(&mut self, us: u64) {
        let at = bucket_of(us);
        if self.counts.len() <= at {
            self.counts.resize(at + 1, 0);
        }
        self.counts[at] += 1;
        self.total += 1;
    }

    /// Adds every latency `other` recorded.
    pub fn merge(&mut self, other: &Histogram) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.total += other.total;
    }

    /// The `p`-quantile (0 to 1) in milliseconds: the upper edge of the bucket holding the
    /// latency of rank ceil(p * count); 0 when nothing was recorded.
    pub fn quantile_ms(&self, p: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let rank = ((p * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (at, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return upper_edge(at) as f64 / 1000.0;
            }
        }
        unreachable!("rank {rank} is at most the total {}", self.total)
    }
}

/// The bucket of `us`: values below `SUB_BUCKETS` have one each; above, each power of two is
/// split into `SUB_BUCKETS / 2` equal parts.
fn bucket_of(us: u64) -> usize {
    if us < SUB_BUCKETS {
        return us as usize;
    }
    let magnitude = 63 - us.leading_zeros(); // >= SUB_BITS
    let shift = magnitude + 1 - SUB_BITS;
    let sub = (us >> shift) - SUB_BUCKETS / 2; // 0 .. SUB_BUCKETS / 2
    (SUB_BUCKETS + u64::from(shift - 1) * (SUB_BUCKETS / 2) + sub) as usize
}

/// The largest value that falls in bucket `at`.
fn upper_edge(at: usize) -> u64 {
    let at = at as u64;
    if at < SUB_BUCKETS {
        return at;
    }
    let shift = (at - SUB_BUCKETS) / (SUB_BUCKETS / 2) + 1;
    let sub = (at - SUB_BUCKETS) % (SUB_BUCKETS / 2) + SUB_BUCKETS / 2;
    ((sub + 1) << shift) - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lands_in_a_bucket_whose_upper_edge_is_within_a_64th_above_it() {
        let mut last = 0;
        for us in (0..5_000).chain((5_000..200_000_000).step_by(997)) {
            let at = bucket_of(us);
            assert!(at >= last, "buckets go down at {us}");
            last = at;
            let edge = upper_edge(at);
            assert!(edge >= us, "{us} above its bucket's edge {edge}");
            assert!(edge - us <= us / 64, "{us} -> {edge}");
            assert_eq!(bucket_of(edge), at, "{us}: edge {edge} in another bucket");
        }
    }

    #[test]
    fn quantiles_match_the_sorted_values_and_merging_adds_counts() {
        let mut low = Histogram::default();
        let mut high = Histogram::default();
        for us in 1..=100 {
            low.record(us);
            high.record(us * 1_000);
        }
        assert_eq!(low.quantile_ms(0.5), 0.050);
        assert_eq!(low.quantile_ms(0.99), 0.099);
        assert_eq!(low.quantile_ms(1.0), 0.100);
        low.merge(&high);
        assert_eq!(low.total, 200);
        assert_eq!(low.quantile_ms(0.5), 0.100);
        let p99 = low.quantile_ms(0.99);
        assert!((98.0..=98.0 * (1.0 + 1.0 / 64.0)).contains(&p99), "{p99}");
        assert_eq!(Histogram::default().quantile_ms(0.99), 0.0);
    }
}
