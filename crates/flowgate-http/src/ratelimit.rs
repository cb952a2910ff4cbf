//! Rate limiting (D10): GCRA (the generic cell rate algorithm, a token bucket kept as one
//! timestamp per key) in a sharded map, so checking costs one short lock.
//!
//! With rate `r` and burst `b`, a fresh key may send `b` requests at once and then `r` per
//! second. Keys whose bucket is full again are indistinguishable from absent keys and are swept,
//! which bounds memory by the number of clients active within the last `b / r` seconds.
//!
//! Workers check through their own [`Leases`]: a worker that keeps using a key takes several
//! of its requests from the shared bucket at once and counts them down in its own memory, so a
//! hot key (an app's SDK key, a carrier NAT's address) does not make every request of every
//! worker write the same shared cache line (docs/benchmarks.md, 2026-11-23).
//!
//! A check hashes its key once, with a randomly keyed SipHash (clients choose their keys, so the
//! tables must resist collisions): the hash picks the shard, and the shard's table reuses it
//! (`Hashed`) for its lookup and insert instead of hashing the key twice more.

use std::cell::RefCell;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

const SHARDS: usize = 16;
/// Sweep a shard when it grows past this many keys.
const SWEEP_AT: usize = 4_096;
/// The most requests a worker's lease holds (see [`Leases`]).
pub const MAX_LEASE: u32 = 64;
/// How long a lease's requests may be used: unused ones go back to the bucket when the
/// worker next sees the key.
pub const LEASE_NANOS: u64 = 100_000_000;

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

    /// Counts one request of `key` now through one worker's `leases`.
    pub fn check_leased(&self, leases: &Leases<K>, key: &K) -> Decision {
        leases.check_at(self, key, self.now())
    }

    /// Counts one request of `key` at `now` nanoseconds since the limiter was made.
    pub fn check_at(&self, key: &K, now: u64) -> Decision {
        self.take_at(self.hasher.hash_one(key), key, now, 1, 0).0
    }

    /// Takes up to `want` (at least 1) conforming requests of `key` at once, after giving back
    /// `unused` taken earlier: how many were granted (0 when refused), with the decision for
    /// the first of them (its `remaining` counts the other granted ones as still remaining)
    /// and the time the bucket is full again. Requests granted now conform at any later time:
    /// a bucket only fills up as time passes.
    fn take_at(
        &self,
        hash: u64,
        key: &K,
        now: u64,
        want: u32,
        unused: u32,
    ) -> (Decision, u32, u64) {
        // Bits 32-35: the table's buckets come from the low bits and its tags from the top 7,
        // so every shard's keys still spread over both.
        let shard = &self.shards[(hash >> 32) as usize % SHARDS];
        let key = Hashed {
            hash,
            key: key.clone(),
        };
        let mut map = shard.lock().unwrap_or_else(PoisonError::into_inner);
        let returned = u64::from(unused) * self.interval;
        let tat = map
            .get(&key)
            .map_or(now, |&t| t.saturating_sub(returned))
            .max(now);
        // Request k (1-based) conforms when tat + k * interval <= now + tolerance.
        let room = (now + self.tolerance).saturating_sub(tat) / self.interval;
        let granted = u32::try_from(room.min(u64::from(want.max(1)))).unwrap_or(u32::MAX);
        if granted == 0 {
            if unused > 0 {
                map.insert(key, tat);
            }
            let allow_at = (tat + self.interval).saturating_sub(self.tolerance);
            let decision = Decision {
                allowed: false,
                limit: self.burst,
                remaining: 0,
                reset_secs: ceil_secs(tat - now),
                retry_after_secs: ceil_secs(allow_at - now).max(1),
            };
            return (decision, 0, tat);
        }
        if map.len() >= SWEEP_AT && !map.contains_key(&key) {
            map.retain(|_, t| *t > now);
        }
        let new_tat = tat + u64::from(granted) * self.interval;
        map.insert(key, new_tat);
        let used = new_tat - now;
        let remaining = (self.tolerance - used.min(self.tolerance)) / self.interval;
        let remaining = u32::try_from(remaining).unwrap_or(u32::MAX);
        let decision = Decision {
            allowed: true,
            limit: self.burst,
            remaining: remaining.saturating_add(granted - 1),
            reset_secs: ceil_secs(used),
            retry_after_secs: 0,
        };
        (decision, granted, new_tat)
    }

    /// The most requests one worker's lease may hold: an eighth of the burst, at most
    /// [`MAX_LEASE`].
    fn max_lease(&self) -> u32 {
        (self.burst / 8).clamp(1, MAX_LEASE)
    }

    /// Keys currently tracked (for tests and metrics).
    pub fn tracked_keys(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}

/// One worker's leases on a [`RateLimiter`]'s buckets (not shared between threads).
///
/// A check first counts down the worker's lease for the key. When it is used up, the worker
/// takes a new one from the shared bucket: twice as large when the last one was used up within
/// [`LEASE_NANOS`], half as large when it expired first (its unused requests are given back
/// then), one request at first. A key seen now and then is therefore checked against the
/// bucket every time, exactly as without leases, and only a key a worker keeps using gets a
/// lease of up to an eighth of the burst ([`MAX_LEASE`] at most).
///
/// What this changes, for a key hot on several workers at once: requests are never admitted
/// beyond the limit (a lease's requests were conforming when taken, and a bucket only fills up
/// as time passes), but a client can be refused while other workers still hold unused requests
/// of its bucket: at most `max lease - 1` per other worker, for at most [`LEASE_NANOS`].
/// `RateLimit-Remaining` counts the lease's requests as remaining, as of when it was taken.
#[derive(Debug)]
pub struct Leases<K> {
    leases: RefCell<HashMap<Hashed<K>, Lease, PreHashed>>,
}

impl<K> Default for Leases<K> {
    fn default() -> Self {
        Self {
            leases: RefCell::new(HashMap::with_hasher(PreHashed)),
        }
    }
}

/// A worker's requests taken ahead from one bucket.
#[derive(Clone, Copy, Debug)]
struct Lease {
    /// Requests left to use.
    left: u32,
    /// How many the last take asked for.
    size: u32,
    /// Until when `left` may be used.
    until: u64,
    /// The bucket's remaining requests when the lease was taken, not counting the lease's.
    remaining: u32,
    /// When the bucket is full again, as of the take.
    full_at: u64,
}

impl<K: Hash + Eq + Clone> Leases<K> {
    /// Counts one request of `key` at `now` (the limiter's nanoseconds).
    pub fn check_at(&self, limiter: &RateLimiter<K>, key: &K, now: u64) -> Decision {
        let hash = limiter.hasher.hash_one(key);
        let key = Hashed {
            hash,
            key: key.clone(),
        };
        let mut leases = self.leases.borrow_mut();
        let (size, unused) = match leases.get_mut(&key) {
            Some(lease) if now < lease.until && lease.left > 0 => {
                lease.left -= 1;
                return Decision {
                    allowed: true,
                    limit: limiter.burst,
                    remaining: lease.remaining.saturating_add(lease.left),
                    reset_secs: ceil_secs(lease.full_at.saturating_sub(now)),
                    retry_after_secs: 0,
                };
            }
            // Used up in time: the key is hot on this worker.
            Some(lease) if now < lease.until => ((lease.size * 2).min(limiter.max_lease()), 0),
            Some(lease) => ((lease.size / 2).max(1), lease.left),
            None => (1, 0),
        };
        let (decision, granted, full_at) = limiter.take_at(hash, &key.key, now, size, unused);
        if granted == 0 {
            leases.remove(&key);
            return decision;
        }
        if leases.len() >= SWEEP_AT && !leases.contains_key(&key) {
            // Expired leases hold nothing usable; requests left in them refill with time.
            leases.retain(|_, lease| lease.until > now);
        }
        let left = granted - 1;
        leases.insert(
            key,
            Lease {
                left,
                size,
                until: now + LEASE_NANOS,
                remaining: decision.remaining - left,
                full_at,
            },
        );
        decision
    }

    /// Keys this worker holds a lease for (for tests).
    pub fn held(&self) -> usize {
        self.leases.borrow().len()
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

    /// Requests at `times` through `workers` leases in turn: which were allowed.
    fn through_leases(
        limiter: &RateLimiter<&'static str>,
        workers: &[Leases<&'static str>],
        times: &[u64],
    ) -> Vec<bool> {
        times
            .iter()
            .enumerate()
            .map(|(i, &t)| {
                workers[i % workers.len()]
                    .check_at(limiter, &"k", t)
                    .allowed
            })
            .collect()
    }

    #[test]
    fn one_worker_with_leases_decides_as_the_bucket() {
        // A burst, then a steady 3x overload, then a pause and a second burst: one worker's
        // leases allow exactly the requests the shared bucket alone allows, with the same
        // RateLimit-Remaining during the burst.
        let rate = 1_000;
        let mut times: Vec<u64> = vec![0; 300];
        times.extend((0..6_000).map(|i| i * SEC / (3 * rate)));
        times.extend(vec![5 * SEC; 300]);
        let exact = RateLimiter::new(1_000, 200);
        let leased = RateLimiter::new(1_000, 200);
        let worker = Leases::default();
        let mut allowed = 0;
        for (i, &t) in times.iter().enumerate() {
            let a = exact.check_at(&"k", t);
            let b = worker.check_at(&leased, &"k", t);
            assert_eq!(a.allowed, b.allowed, "request {i} at {t} ns");
            if i < 300 {
                assert_eq!(a.remaining, b.remaining, "request {i} of the burst");
            }
            allowed += usize::from(b.allowed);
        }
        assert!(allowed > 2_000 && allowed < 2_600, "{allowed}");
        assert!(worker.held() <= 1);
    }

    #[test]
    fn leases_grow_only_while_a_worker_uses_them_up() {
        let limiter = RateLimiter::new(1_000_000, 1_000_000);
        let worker = Leases::default();
        // Requests 1 ms apart on one worker: a lease of 1 is used up in time, so it doubles up
        // to the largest; the bucket saw one take per lease.
        for i in 0..1_000 {
            assert!(worker.check_at(&limiter, &"k", i * 1_000_000).allowed);
        }
        let lease = |w: &Leases<&str>| *w.leases.borrow().values().next().unwrap();
        assert_eq!(lease(&worker).size, MAX_LEASE);
        // A request after the lease expired halves it.
        assert!(worker.check_at(&limiter, &"k", 10 * SEC).allowed);
        assert_eq!(lease(&worker).size, MAX_LEASE / 2);
        assert_eq!(lease(&worker).left, MAX_LEASE / 2 - 1);
        // The limit's burst bounds the lease: an eighth of it.
        let small = RateLimiter::new(1_000, 40);
        let w = Leases::default();
        for i in 0..30 {
            assert!(w.check_at(&small, &"k", i * 1_000).allowed);
        }
        assert_eq!(lease(&w).size, 5);
    }

    #[test]
    fn workers_never_admit_more_than_the_bucket() {
        // Two and four workers in turn, at 5x the rate for 3 s: never more than the burst
        // plus the rate over the time, and at most the leases' slack below what one worker
        // gets.
        let (rate, burst) = (2_000_u64, 4_000_u32);
        let times: Vec<u64> = (0..30_000).map(|i| i * SEC / (5 * rate)).collect();
        let single = through_leases(
            &RateLimiter::new(2_000, burst),
            &[Leases::default()],
            &times,
        );
        let single = single.iter().filter(|&&a| a).count();
        for workers in [2, 4] {
            let leases: Vec<_> = (0..workers).map(|_| Leases::default()).collect();
            let limiter = RateLimiter::new(2_000, burst);
            let allowed = through_leases(&limiter, &leases, &times)
                .iter()
                .filter(|&&a| a)
                .count();
            let ceiling = u64::from(burst) + rate * 3;
            assert!(
                allowed as u64 <= ceiling,
                "{workers} workers: {allowed} > {ceiling}"
            );
            let slack = (workers - 1) * MAX_LEASE as usize;
            assert!(
                allowed + slack >= single,
                "{workers} workers: {allowed} against {single}"
            );
        }
    }

    #[test]
    fn a_burst_across_workers_is_refused_at_the_burst() {
        // Two workers alternating on one key at one instant: the burst is never exceeded, and
        // refusals start at most one lease per other worker early.
        let limiter = RateLimiter::new(10, 400);
        let workers = [Leases::default(), Leases::default()];
        let allowed = through_leases(&limiter, &workers, &vec![0; 1_000]);
        let n = allowed.iter().filter(|&&a| a).count();
        assert!(n <= 400 && n + (limiter.max_lease() as usize) >= 400, "{n}");
        // A refused worker's next check, later, gets what refilled.
        assert!(workers[0].check_at(&limiter, &"k", SEC).allowed);
    }

    #[test]
    fn expired_leases_give_their_requests_back() {
        let limiter = RateLimiter::new(1, 64);
        let (a, b) = (Leases::default(), Leases::default());
        // Worker a takes leases while it uses them up: 1 + 2 + 4 + 8 = 15 requests used, and
        // the last lease (8) still holds requests when a stops.
        let mut used = 0;
        while used < 12 {
            assert!(a.check_at(&limiter, &"k", 0).allowed);
            used += 1;
        }
        let held = a.leases.borrow().values().next().unwrap().left;
        assert!(held > 0, "a holds unused requests");
        // b, meanwhile, can take what a does not hold.
        let b_allowed = (0..64)
            .filter(|_| b.check_at(&limiter, &"k", 0).allowed)
            .count();
        assert_eq!(b_allowed as u32, 64 - used - held);
        // After a's lease expired, a's next check gives its unused requests back first: they
        // are what a and b can still use before the bucket refills (one per second).
        let later = LEASE_NANOS + 1;
        assert!(
            !b.check_at(&limiter, &"k", later).allowed,
            "all taken or held by a"
        );
        let a_allowed = (0..10)
            .filter(|_| a.check_at(&limiter, &"k", later).allowed)
            .count();
        assert_eq!(
            a_allowed as u32, held,
            "a's unused requests, given back and taken again"
        );
        assert!(!b.check_at(&limiter, &"k", later).allowed);
    }

    #[test]
    fn leases_of_gone_keys_are_swept() {
        let limiter = RateLimiter::new(1_000, 1_000);
        let worker = Leases::default();
        for i in 0..(SWEEP_AT as u64 * 3) {
            worker.check_at(&limiter, &format!("ip-{i}"), i * LEASE_NANOS / 1_000);
        }
        assert!(worker.held() <= SWEEP_AT, "{}", worker.held());
    }
}
