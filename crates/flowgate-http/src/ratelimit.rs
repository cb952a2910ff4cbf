//! Rate limiting (D10): governor's keyed GCRA limiter (the generic cell rate algorithm, a
//! token bucket kept as one timestamp per key in a sharded map), and what the `RateLimit-*`
//! headers report of it.
//!
//! With rate `r` and burst `b`, a fresh key may send `b` requests at once and then `r` per
//! second. Keys whose bucket is full again are indistinguishable from absent keys and are swept
//! as the keys held near [`MAX_TRACKED`], which bounds memory by the number of clients active
//! within the last `b / r` seconds.

use std::hash::Hash;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::Quota;

/// The most keys held while fewer clients than that are active.
pub const MAX_TRACKED: usize = 65_536;
/// One in this many checks that may have added a key looks at the key count (a look reads
/// every shard). The check draws from its thread's generator, so it writes no memory that
/// other workers share.
const LOOK_ONE_IN: u32 = 256;
/// Full buckets are swept from this many keys below [`MAX_TRACKED`]: 16 times the checks
/// expected between two looks, so the count passes [`MAX_TRACKED`] with a chance of about
/// e^-16 each time it climbs that far.
const SWEEP_MARGIN: usize = 4_096;

/// The outcome of one check, with what the `RateLimit-*` headers report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// The burst size (`RateLimit-Limit`).
    pub limit: u32,
    /// Requests left right now (`RateLimit-Remaining`).
    pub remaining: u32,
    /// Seconds until the bucket is full again (`RateLimit-Reset`).
    pub reset_secs: u32,
    /// Seconds to wait before a retry can succeed (`Retry-After`, on refusal; at least 1).
    pub retry_after_secs: u32,
}

/// The governor limiter of one [`RateLimiter`]: keyed, on a sharded map, reporting the state
/// of the key's bucket on every check.
type Keyed<K, C> = governor::RateLimiter<K, DashMapStateStore<K>, C, StateInformationMiddleware>;

/// A keyed GCRA limiter. Keys are small values (an IP address, a key id), hashed with a
/// randomly keyed SipHash (clients choose their keys, so the map must resist collisions).
#[derive(Debug)]
pub struct RateLimiter<K: Hash + Eq + Clone, C: Clock = DefaultClock> {
    limiter: Keyed<K, C>,
    /// Nanoseconds between two requests at the sustained rate.
    interval: u64,
    burst: u32,
}

fn ceil_secs(nanos: u64) -> u32 {
    u32::try_from(nanos.div_ceil(1_000_000_000)).unwrap_or(u32::MAX)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl<K: Hash + Eq + Clone> RateLimiter<K> {
    /// A limiter of `rate` requests per second with bursts of `burst` (both at least 1). The
    /// clock counts nanoseconds, so a rate above 10^9 per second is taken as 10^9.
    pub fn new(rate: u32, burst: u32) -> Self {
        Self::with_clock(rate, burst, DefaultClock::default())
    }

    /// One request per `interval`, bursts of `burst` ([`RateLimiter::every_with_clock`]).
    pub fn every(interval: Duration, burst: u32) -> Self {
        Self::every_with_clock(interval, burst, DefaultClock::default())
    }
}

impl<K: Hash + Eq + Clone, C: Clock> RateLimiter<K, C> {
    /// [`RateLimiter::new`] on `clock`.
    pub fn with_clock(rate: u32, burst: u32, clock: C) -> Self {
        let interval = (1_000_000_000 / u64::from(rate.max(1))).max(1);
        Self::every_with_clock(Duration::from_nanos(interval), burst, clock)
    }

    /// A limiter of one request per `interval` (at least a nanosecond) with bursts of `burst`,
    /// on `clock`: rates below one a second, such as the console's sign-in attempts (D24).
    pub fn every_with_clock(interval: Duration, burst: u32, clock: C) -> Self {
        let interval = nanos(interval).max(1);
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        // A period of at least one nanosecond is a quota.
        let quota = Quota::with_period(Duration::from_nanos(interval))
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MAX))
            .allow_burst(burst);
        Self {
            limiter: governor::RateLimiter::dashmap_with_clock(quota, clock)
                .with_middleware::<StateInformationMiddleware>(),
            interval,
            burst: burst.get(),
        }
    }

    /// Counts one request of `key` now.
    pub fn check(&self, key: &K) -> Decision {
        match self.limiter.check_key(key) {
            Ok(state) => {
                let remaining = state.remaining_burst_capacity();
                // Only a bucket that was full (or absent) leaves `burst - 1`.
                if remaining == self.burst - 1 {
                    self.sweep_now_and_then();
                }
                // The bucket is full again once the requests it lacks have replenished. The
                // snapshot gives that count, not the exact time: this is at most one interval
                // above it, and the same whole seconds when the interval divides a second.
                let lacking = u64::from(self.burst - remaining);
                Decision {
                    allowed: true,
                    limit: self.burst,
                    remaining,
                    reset_secs: ceil_secs(lacking.saturating_mul(self.interval)),
                    retry_after_secs: 0,
                }
            }
            Err(refusal) => {
                let wait = nanos(refusal.wait_time_from(self.limiter.clock().now()));
                // The bucket holds `burst - 1` requests more than the one that has to wait.
                let full_in = wait.saturating_add(u64::from(self.burst - 1) * self.interval);
                Decision {
                    allowed: false,
                    limit: self.burst,
                    remaining: 0,
                    reset_secs: ceil_secs(full_in),
                    retry_after_secs: ceil_secs(wait).max(1),
                }
            }
        }
    }

    /// After a check that may have added a key: one time in [`LOOK_ONE_IN`], sweeps the full
    /// buckets when the keys come within [`SWEEP_MARGIN`] of [`MAX_TRACKED`].
    fn sweep_now_and_then(&self) {
        if fastrand::u32(..LOOK_ONE_IN) != 0 {
            return;
        }
        if self.limiter.len() + SWEEP_MARGIN > MAX_TRACKED {
            self.limiter.retain_recent();
        }
    }
}

#[cfg(test)]
impl<K: Hash + Eq + Clone, C: Clock> RateLimiter<K, C> {
    /// Keys currently tracked.
    fn tracked_keys(&self) -> usize {
        self.limiter.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;

    const SEC: u64 = 1_000_000_000;

    /// A limiter on a clock the test sets.
    struct Timed<K: Hash + Eq + Clone> {
        limiter: RateLimiter<K, FakeRelativeClock>,
        clock: FakeRelativeClock,
        now: std::cell::Cell<u64>,
    }

    impl<K: Hash + Eq + Clone> Timed<K> {
        fn new(rate: u32, burst: u32) -> Self {
            let clock = FakeRelativeClock::default();
            Self {
                limiter: RateLimiter::with_clock(rate, burst, clock.clone()),
                clock,
                now: std::cell::Cell::new(0),
            }
        }

        /// Counts one request of `key` at `now` nanoseconds since the limiter was made (never
        /// earlier than the last).
        fn check_at(&self, key: &K, now: u64) -> Decision {
            assert!(now >= self.now.get(), "the clock only goes forward");
            self.clock
                .advance(Duration::from_nanos(now - self.now.replace(now)));
            self.limiter.check(key)
        }
    }

    #[test]
    fn a_rate_above_a_billion_per_second_is_a_billion() {
        // The interval was 0: a division by zero in every check.
        let limiter = Timed::new(u32::MAX, u32::MAX);
        let d = limiter.check_at(&"k", 0);
        assert!(d.allowed);
        assert_eq!(d.limit, u32::MAX);
        assert_eq!(d.remaining, u32::MAX - 1);
        let tight = Timed::new(u32::MAX, 2);
        assert!(tight.check_at(&"k", 0).allowed);
        assert!(tight.check_at(&"k", 0).allowed);
        assert!(!tight.check_at(&"k", 0).allowed);
        assert!(tight.check_at(&"k", 1).allowed, "one nanosecond later");
    }

    #[test]
    fn burst_then_sustained_rate() {
        let limiter = Timed::new(10, 5);
        for i in 0..5 {
            let d = limiter.check_at(&"k", 0);
            assert!(d.allowed, "request {i} of the burst");
            assert_eq!(d.remaining, 4 - i);
        }
        let refused = limiter.check_at(&"k", 0);
        assert!(!refused.allowed);
        assert_eq!(refused.retry_after_secs, 1);
        assert_eq!(refused.remaining, 0);
        // One interval later exactly one more request is allowed.
        assert!(limiter.check_at(&"k", SEC / 10).allowed);
        assert!(!limiter.check_at(&"k", SEC / 10).allowed);
        // After burst/rate seconds the bucket is full again.
        let d = limiter.check_at(&"k", SEC);
        assert!(d.allowed);
        assert_eq!(d.remaining, 4);
    }

    #[test]
    fn keys_are_independent() {
        let limiter = Timed::new(1, 1);
        assert!(limiter.check_at(&"a", 0).allowed);
        assert!(!limiter.check_at(&"a", 0).allowed);
        assert!(limiter.check_at(&"b", 0).allowed);
    }

    #[test]
    fn refusals_do_not_consume() {
        let limiter = Timed::new(1, 1);
        assert!(limiter.check_at(&"a", 0).allowed);
        for _ in 0..100 {
            assert!(!limiter.check_at(&"a", SEC / 2).allowed);
        }
        assert!(
            limiter.check_at(&"a", SEC).allowed,
            "hammering while refused does not push the key back"
        );
    }

    #[test]
    fn full_buckets_are_swept() {
        let limiter = Timed::new(1000, 1);
        for i in 0..(MAX_TRACKED * 2) {
            limiter.check_at(&format!("ip-{i}"), (i as u64) * SEC);
        }
        let tracked = limiter.limiter.tracked_keys();
        assert!(tracked <= MAX_TRACKED, "{tracked}");
        assert!(tracked < MAX_TRACKED / 2, "swept recently: {tracked}");
    }

    #[test]
    fn active_keys_are_kept() {
        // Buckets that are not full again are never swept: more keys than `MAX_TRACKED` within
        // a second, at one request per second each.
        let limiter = Timed::new(1, 10);
        let keys = MAX_TRACKED + 1_000;
        for i in 0..keys {
            limiter.check_at(&i, (i as u64 + 1) * 10_000);
        }
        assert_eq!(limiter.limiter.tracked_keys(), keys);
        for i in 0..keys {
            assert_eq!(limiter.check_at(&i, SEC).remaining, 8, "key {i}");
        }
    }

    #[test]
    fn reset_reports_time_to_full() {
        let limiter = Timed::new(2, 4);
        let d = limiter.check_at(&"k", 0);
        assert_eq!(d.reset_secs, 1, "half a second of debt rounds up");
        limiter.check_at(&"k", 0);
        limiter.check_at(&"k", 0);
        let d = limiter.check_at(&"k", 0);
        assert_eq!((d.remaining, d.reset_secs), (0, 2));
        // Refused a quarter of a second later: a quarter of a second until one request
        // replenishes, 1.75 s until all four.
        let d = limiter.check_at(&"k", SEC / 4);
        assert!(!d.allowed);
        assert_eq!((d.remaining, d.reset_secs, d.retry_after_secs), (0, 2, 1));
        // At 1.75 s a quarter of a second of debt is left; with this request, 0.75 s.
        let d = limiter.check_at(&"k", SEC * 7 / 4);
        assert_eq!((d.remaining, d.reset_secs), (2, 1));
    }
}
