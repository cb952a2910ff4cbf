//! Rate limiting (D10): GCRA (the generic cell rate algorithm, a token bucket kept as one
//! timestamp per key) in a sharded map, so checking costs one short lock.
//!
//! With rate `r` and burst `b`, a fresh key may send `b` requests at once and then `r` per
//! second. Keys whose bucket is full again are indistinguishable from absent keys and are swept,
//! which bounds memory by the number of clients active within the last `b / r` seconds.
//!
//! A check hashes its key once, with a randomly keyed SipHash (clients choose their keys, so the
//! tables must resist collisions): the hash picks the shard, and the shard's table reuses it
//! (`Hashed`) for its lookup and insert instead of hashing the key twice more.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

const SHARDS: usize = 16;
/// Sweep a shard when it grows past this many keys.
const SWEEP_AT: usize = 4_096;

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

/// A keyed GCRA limiter. Keys are small values (an IP address, a key id), so a check
/// allocates nothing.
#[derive(Debug)]
pub struct RateLimiter<K> {
    /// Nanoseconds between two requests at the sustained rate.
    interval: u64,
    /// `interval * burst`: how far ahead of now the theoretical arrival time may run.
    tolerance: u64,
    burst: u32,
    epoch: Instant,
    hasher: RandomState,
    shards: Vec<Mutex<HashMap<Hashed<K>, u64, PreHashed>>>,
}

/// A key with its hash, computed once per check.
#[derive(Clone, Debug)]
struct Hashed<K> {
    hash: u64,
    key: K,
}

impl<K: PartialEq> PartialEq for Hashed<K> {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.key == other.key
    }
}

impl<K: Eq> Eq for Hashed<K> {}

impl<K> Hash for Hashed<K> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// The hasher of a shard's table: a [`Hashed`] key's hash as it is.
#[derive(Clone, Copy, Debug, Default)]
struct PreHashed;

impl BuildHasher for PreHashed {
    type Hasher = PreHasher;
    fn build_hasher(&self) -> PreHasher {
        PreHasher(0)
    }
}

/// Keeps the last `u64` written ([`Hashed`] writes exactly one).
#[derive(Debug)]
struct PreHasher(u64);

impl Hasher for PreHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Not reached: `Hashed` writes one u64. Folded anyway, so any use still hashes.
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

fn ceil_secs(nanos: u64) -> u32 {
    u32::try_from(nanos.div_ceil(1_000_000_000)).unwrap_or(u32::MAX)
}

impl<K: Hash + Eq + Clone> RateLimiter<K> {
    /// A limiter of `rate` requests per second with bursts of `burst` (both at least 1). The
    /// clock counts nanoseconds, so a rate above 10^9 per second is taken as 10^9.
    pub fn new(rate: u32, burst: u32) -> Self {
        let rate = u64::from(rate.max(1));
        let burst = burst.max(1);
        let interval = (1_000_000_000 / rate).max(1);
        Self {
            interval,
            tolerance: interval * u64::from(burst),
            burst,
            epoch: Instant::now(),
            hasher: RandomState::new(),
            shards: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::with_hasher(PreHashed)))
                .collect(),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Counts one request of `key` now.
    pub fn check(&self, key: &K) -> Decision {
        self.check_at(key, self.now())
    }

    /// Counts one request of `key` at `now` nanoseconds since the limiter was made.
    pub fn check_at(&self, key: &K, now: u64) -> Decision {
        let hash = self.hasher.hash_one(key);
        // Bits 32-35: the table's buckets come from the low bits and its tags from the top 7,
        // so every shard's keys still spread over both.
        let shard = &self.shards[(hash >> 32) as usize % SHARDS];
        let key = Hashed {
            hash,
            key: key.clone(),
        };
        let mut map = shard.lock().unwrap_or_else(PoisonError::into_inner);
        let tat = map.get(&key).copied().unwrap_or(now).max(now);
        let new_tat = tat + self.interval;
        let allow_at = new_tat.saturating_sub(self.tolerance);
        if now < allow_at {
            let remaining_time = tat - now;
            return Decision {
                allowed: false,
                limit: self.burst,
                remaining: 0,
                reset_secs: ceil_secs(remaining_time),
                retry_after_secs: ceil_secs(allow_at - now).max(1),
            };
        }
        if map.len() >= SWEEP_AT && !map.contains_key(&key) {
            map.retain(|_, t| *t > now);
        }
        map.insert(key, new_tat);
        let used = new_tat - now;
        let remaining = (self.tolerance - used.min(self.tolerance)) / self.interval;
        Decision {
            allowed: true,
            limit: self.burst,
            remaining: u32::try_from(remaining).unwrap_or(u32::MAX),
            reset_secs: ceil_secs(used),
            retry_after_secs: 0,
        }
    }

    /// Keys currently tracked (for tests and metrics).
    pub fn tracked_keys(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn a_rate_above_a_billion_per_second_is_a_billion() {
        // The interval was 0: a division by zero in every check.
        let limiter = RateLimiter::new(u32::MAX, u32::MAX);
        let d = limiter.check_at(&"k", 0);
        assert!(d.allowed);
        assert_eq!(d.limit, u32::MAX);
        assert_eq!(d.remaining, u32::MAX - 1);
        let tight = RateLimiter::new(u32::MAX, 2);
        assert!(tight.check_at(&"k", 0).allowed);
        assert!(tight.check_at(&"k", 0).allowed);
        assert!(!tight.check_at(&"k", 0).allowed);
        assert!(tight.check_at(&"k", 1).allowed, "one nanosecond later");
    }

    #[test]
    fn burst_then_sustained_rate() {
        let limiter = RateLimiter::new(10, 5);
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
        let limiter = RateLimiter::new(1, 1);
        assert!(limiter.check_at(&"a", 0).allowed);
        assert!(!limiter.check_at(&"a", 0).allowed);
        assert!(limiter.check_at(&"b", 0).allowed);
    }

    #[test]
    fn refusals_do_not_consume() {
        let limiter = RateLimiter::new(1, 1);
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
        let limiter = RateLimiter::new(1000, 1);
        for i in 0..(SWEEP_AT * SHARDS * 2) {
            limiter.check_at(&format!("ip-{i}"), (i as u64) * SEC);
        }
        assert!(
            limiter.tracked_keys() <= SWEEP_AT * SHARDS,
            "{}",
            limiter.tracked_keys()
        );
    }

    #[test]
    fn keys_with_the_same_hash_stay_apart() {
        // The shard's table compares keys, not only the hash it is given.
        let mut table = HashMap::with_hasher(PreHashed);
        table.insert(Hashed { hash: 7, key: "a" }, 1);
        table.insert(Hashed { hash: 7, key: "b" }, 2);
        table.insert(Hashed { hash: 7, key: "a" }, 3);
        assert_eq!(table.len(), 2);
        assert_eq!(table.get(&Hashed { hash: 7, key: "a" }), Some(&3));
        assert_eq!(table.get(&Hashed { hash: 7, key: "b" }), Some(&2));
        assert_eq!(table.get(&Hashed { hash: 8, key: "a" }), None);
    }

    #[test]
    fn keys_spread_over_every_shard_and_its_table() {
        let limiter = RateLimiter::new(1, 1);
        let keys = SHARDS * 1024;
        for i in 0..keys {
            limiter.check_at(&i, 0);
        }
        for (n, shard) in limiter.shards.iter().enumerate() {
            let map = shard.lock().unwrap_or_else(PoisonError::into_inner);
            assert!(
                (768..=1280).contains(&map.len()),
                "shard {n} holds {} of {keys} keys",
                map.len()
            );
            // The table's buckets come from the low bits of the hash: within one shard they
            // must still take every value, so the shard cannot be chosen from them.
            let mut low = [false; 16];
            for key in map.keys() {
                low[(key.hash & 0xF) as usize] = true;
            }
            assert!(low.iter().all(|&seen| seen), "shard {n}: low bits {low:?}");
        }
        assert_eq!(limiter.tracked_keys(), keys);
    }

    #[test]
    fn reset_reports_time_to_full() {
        let limiter = RateLimiter::new(2, 4);
        let d = limiter.check_at(&"k", 0);
        assert_eq!(d.reset_secs, 1, "half a second of debt rounds up");
        limiter.check_at(&"k", 0);
        limiter.check_at(&"k", 0);
        let d = limiter.check_at(&"k", 0);
        assert_eq!((d.remaining, d.reset_secs), (0, 2));
    }
}
