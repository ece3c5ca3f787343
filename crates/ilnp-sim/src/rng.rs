//! The run's shared random stream: the network (loss, jitter) and the workload
//! (start spreads, move intervals, the hosts' own streams' seeds) draw from it in
//! the order events happen, so a run is a function of (scenario, seed).

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

pub(crate) struct SimRng(ChaCha8Rng);

impl SimRng {
    pub(crate) fn new(seed: u64) -> SimRng {
        SimRng(ChaCha8Rng::seed_from_u64(seed))
    }

    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A host's own stream (its core's nonces), seeded from this one.
    pub(crate) fn host_stream(&mut self) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(self.next_u64())
    }

    /// Uniform in [0, 1).
    #[inline]
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi); `lo` without a draw if the range is empty.
    #[inline]
    pub(crate) fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        if hi <= lo {
            return lo;
        }
        lo + (hi - lo) * self.unit()
    }
}
