//! How many client-error request lines are written at info (D25): a leaf the metrics hold and
//! the request middleware asks.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

/// Client-error request lines written at info per second (D25); the rest go to debug.
pub const CLIENT_ERROR_LINES_PER_SECOND: u32 = 10;

/// Lets the first [`CLIENT_ERROR_LINES_PER_SECOND`] lines of each second through, and counts
/// the others so the next line that passes can say how many were held back. Lock-free: a few
/// atomics, touched only by client errors.
#[derive(Debug)]
pub(crate) struct LogSampler {
    origin: Instant,
    per_second: u32,
    /// The second (since `origin`) being counted.
    window: AtomicU64,
    /// Lines let through in that second.
    passed: AtomicU32,
    /// Lines held back since the last summary.
    held_back: AtomicU64,
}

impl LogSampler {
    pub(crate) fn new(per_second: u32) -> Self {
        Self {
            origin: Instant::now(),
            per_second,
            window: AtomicU64::new(0),
            passed: AtomicU32::new(0),
            held_back: AtomicU64::new(0),
        }
    }

    /// Whether this line is written at info, and, once per second at most, how many lines were
    /// held back before it (to be reported).
    pub(crate) fn admit(&self) -> (bool, u64) {
        self.admit_at(self.origin.elapsed().as_secs())
    }

    fn admit_at(&self, second: u64) -> (bool, u64) {
        let window = self.window.load(Ordering::Relaxed);
        let mut report = 0;
        if second != window
            && self
                .window
                .compare_exchange(window, second, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.passed.store(0, Ordering::Relaxed);
            report = self.held_back.swap(0, Ordering::Relaxed);
        }
        let write = self.passed.fetch_add(1, Ordering::Relaxed) < self.per_second;
        if !write {
            self.held_back.fetch_add(1, Ordering::Relaxed);
        }
        (write, report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sampler_passes_a_few_lines_a_second_and_reports_the_rest_once() {
        let sampler = LogSampler::new(3);
        let second = |s: u64, n: usize| -> Vec<(bool, u64)> {
            (0..n).map(|_| sampler.admit_at(s)).collect()
        };
        let first = second(0, 5);
        assert_eq!(
            first.iter().filter(|(w, _)| *w).count(),
            3,
            "three lines pass in a second"
        );
        assert!(first.iter().all(|(_, held)| *held == 0));
        // The first line of the next second reports the two held back, once.
        let next = second(1, 4);
        assert_eq!(next[0], (true, 2));
        assert!(next[1..].iter().all(|(_, held)| *held == 0));
        assert_eq!(next.iter().filter(|(w, _)| *w).count(), 3);
        // A quiet stretch: the one held back in second 1 is reported at second 7.
        assert_eq!(sampler.admit_at(7), (true, 1));
    }
}
