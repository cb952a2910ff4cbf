//! Wrong admin tokens, limited per client address (D24, issue 49): the console's sign-in and
//! every admin API route that checks the bearer token count their failures in one limiter, so
//! the admin token cannot be guessed at full speed on any of them.
//!
//! The limiter is the API's GCRA limiter (D10) keyed by the connecting address: ten attempts at
//! once, one more each minute ([`ATTEMPT_BURST`], [`ATTEMPT_INTERVAL`]). The console's sign-in
//! counts every attempt (as it always has); the admin API counts only refusals (a missing or
//! wrong token), so an operator's scripts are not limited. Once an address is refused (429), it
//! is *blocked* until its `Retry-After` has passed: the right token from it waits too, on the
//! API as on the sign-in page, so a guesser cannot tell a hit from a miss while limited.
//!
//! Failures are logged as warnings, sampled: the first of each address in each minute, and the
//! one that makes the address limited, with how many came from it in that minute; never the
//! token. The per-address state is bounded ([`MAX_ADDRESSES`]): past it, failures are still
//! limited and counted, and the next warning logged says how many went unattributed.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use actix_web::HttpRequest;

use crate::ratelimit::{Decision, RateLimiter};

/// Attempts (sign-ins, or refused admin API calls) an address may make at once.
pub const ATTEMPT_BURST: u32 = 10;
/// One more attempt comes back after each interval; also the window of the sampled warnings.
pub const ATTEMPT_INTERVAL: Duration = Duration::from_secs(60);
/// Addresses whose failures are tracked at once for sampling and blocking.
pub const MAX_ADDRESSES: usize = 4_096;

/// What one address did in its current window.
#[derive(Clone, Copy, Debug)]
struct Strikes {
    /// When the window began (its first failure).
    window_start: Instant,
    /// Failures in the window, the first one included.
    failures: u64,
    /// Whether the warning of this window's limit was written.
    limit_logged: bool,
    /// Refused until then (none: not refused).
    blocked_until: Option<Instant>,
}

/// The limiter of wrong admin tokens, shared by the console and the admin API.
#[derive(Debug)]
pub(crate) struct TokenGuard {
    limiter: RateLimiter<IpAddr>,
    strikes: Mutex<HashMap<IpAddr, Strikes>>,
    /// Failures of addresses that could not be tracked (the map was full).
    untracked: AtomicU64,
}

impl Default for TokenGuard {
    fn default() -> Self {
        Self::new()
    }
}

/// The connecting address of `req` (0.0.0.0 when unknown). The admin listener does not read
/// `X-Forwarded-For` (docs/security.md, known gaps).
pub(crate) fn client_of(req: &HttpRequest) -> IpAddr {
    req.peer_addr()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| a.ip())
}

fn whole_secs(d: Duration) -> u32 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    u32::try_from(secs).unwrap_or(u32::MAX).max(1)
}

impl TokenGuard {
    pub(crate) fn new() -> Self {
        Self {
            limiter: RateLimiter::every(ATTEMPT_INTERVAL, ATTEMPT_BURST),
            strikes: Mutex::new(HashMap::new()),
            untracked: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Strikes>> {
        // Every change is one statement: a panic leaves the map consistent.
        self.strikes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Seconds `client` must still wait, when it is blocked.
    pub(crate) fn blocked(&self, client: IpAddr) -> Option<u32> {
        let now = Instant::now();
        let strikes = self.lock();
        let until = strikes.get(&client)?.blocked_until?;
        (until > now).then(|| whole_secs(until - now))
    }

    /// Counts a sign-in attempt of `client` (right or wrong): the limiter's decision. A
    /// refusal blocks the address on the admin API too.
    pub(crate) fn attempt(&self, client: IpAddr) -> Decision {
        let decision = self.limiter.check(&client);
        if !decision.allowed {
            self.note(
                client,
                false,
                Some(decision.retry_after_secs),
                "/console/sign-in",
            );
        }
        decision
    }

    /// Counts a wrong token of `client` on `route`, logging it (sampled): the seconds to wait
    /// when the address is now over the limit.
    pub(crate) fn failed(&self, client: IpAddr, route: &str) -> Option<u32> {
        let decision = self.limiter.check(&client);
        let retry = (!decision.allowed).then_some(decision.retry_after_secs);
        self.note(client, true, retry, route);
        retry
    }

    /// Logs (sampled) a wrong token on the sign-in page, whose attempt [`TokenGuard::attempt`]
    /// already counted.
    pub(crate) fn wrong_sign_in(&self, client: IpAddr) {
        self.note(client, true, None, "/console/sign-in");
    }

    /// Records a failure (`counted`: one more wrong token; otherwise only a refusal of an
    /// attempt already counted) and the refusal, if any; writes the sampled warnings.
    fn note(&self, client: IpAddr, counted: bool, refused: Option<u32>, route: &str) {
        let now = Instant::now();
        let mut map = self.lock();
        if !map.contains_key(&client) && map.len() >= MAX_ADDRESSES {
            map.retain(|_, s| {
                now.duration_since(s.window_start) < ATTEMPT_INTERVAL
                    || s.blocked_until.is_some_and(|u| u > now)
            });
        }
        if !map.contains_key(&client) && map.len() >= MAX_ADDRESSES {
            drop(map);
            self.untracked.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let entry = map.entry(client).or_insert(Strikes {
            window_start: now,
            failures: 0,
            limit_logged: false,
            blocked_until: None,
        });
        let mut previous = 0;
        if now.duration_since(entry.window_start) >= ATTEMPT_INTERVAL {
            previous = entry.failures;
            entry.window_start = now;
            entry.failures = 0;
            entry.limit_logged = false;
        }
        if counted {
            entry.failures += 1;
        }
        if let Some(wait) = refused {
            entry.blocked_until = Some(now + Duration::from_secs(u64::from(wait)));
        }
        let failures = entry.failures;
        let first = counted && failures == 1;
        let limited_now = refused.is_some() && !entry.limit_logged;
        if limited_now {
            entry.limit_logged = true;
        }
        drop(map);
        if first {
            let untracked = self.untracked.swap(0, Ordering::Relaxed);
            tracing::warn!(
                client = %client,
                route,
                failures_in_previous_minute = previous,
                untracked_failures = untracked,
                "wrong admin token (further ones from this address this minute are counted, not \
                 logged)"
            );
        }
        if limited_now {
            tracing::warn!(
                client = %client,
                route,
                failures_this_minute = failures,
                retry_after_secs = refused.unwrap_or_default(),
                "too many wrong admin tokens from this address: refused (429), the right token \
                 too, until it waits"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_failures_pass_then_the_address_is_blocked_for_everything() {
        let guard = TokenGuard::new();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        for _ in 0..ATTEMPT_BURST {
            assert_eq!(guard.failed(a, "/r"), None);
            assert_eq!(guard.blocked(a), None);
        }
        let wait = guard.failed(a, "/r").expect("the eleventh is refused");
        assert!((1..=60).contains(&wait), "{wait}");
        assert!(guard.blocked(a).is_some(), "the right token waits too");
        assert!(!guard.attempt(a).allowed, "the console's sign-in shares it");
        assert_eq!(guard.blocked(b), None, "another address is not");
        assert_eq!(guard.failed(b, "/r"), None);
    }

    #[test]
    fn sign_in_attempts_and_api_failures_share_one_budget() {
        let guard = TokenGuard::new();
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        for _ in 0..ATTEMPT_BURST - 1 {
            assert!(guard.attempt(a).allowed);
        }
        assert_eq!(guard.failed(a, "/r"), None);
        assert!(guard.failed(a, "/r").is_some());
    }

    #[test]
    fn tracked_addresses_are_bounded() {
        let guard = TokenGuard::new();
        for i in 0..MAX_ADDRESSES as u32 + 10 {
            guard.failed(IpAddr::V4(i.into()), "/r");
        }
        assert_eq!(guard.lock().len(), MAX_ADDRESSES);
        assert_eq!(guard.untracked.load(Ordering::Relaxed), 10);
    }
}
