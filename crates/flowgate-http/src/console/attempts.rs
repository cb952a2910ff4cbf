//! Failed sign-ins per account and address (D28, issue 65).
//!
//! `console.failed_sign_ins_per_account` failures of one account from one client address
//! within [`super::ACCOUNT_WINDOW`] make that account's sign-in from that address wait (429).
//! The owner signing in from anywhere else is not affected: a guesser cannot lock a known
//! admin out with one post a minute.
//!
//! Counted atomically: an attempt is reserved before its password is checked and counts
//! against the limit while the check runs, so any number of concurrent posts gets at most the
//! limit checked. The failures written to the audit log (`sign_in.failed`, with the address)
//! count too, so every replica and a restart see them; within this process the failures
//! noted here count at once, before their audit entry is written.
//!
//! The state is bounded ([`MAX_TRACKED`] account and address pairs): past it, pairs with no
//! attempt running and no failure in the window are forgotten first; when none can be, the
//! new pair is counted by its audit entries alone.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Account and address pairs tracked at once.
pub const MAX_TRACKED: usize = 16_384;
/// Addresses whose last recorded refusal (429) is remembered, to record one a minute each.
const MAX_REFUSALS: usize = 4_096;
/// One 429 of an address is recorded in the audit log per this interval.
pub const REFUSAL_RECORD_INTERVAL: Duration = Duration::from_secs(60);

type Key = (String, IpAddr);

#[derive(Debug, Default)]
struct Pair {
    /// When each failure noted here happened, oldest first (within the window).
    failures: VecDeque<Instant>,
    /// Attempts reserved and still being checked.
    running: u32,
}

#[derive(Debug, Default)]
struct State {
    pairs: HashMap<Key, Pair>,
    /// When each address's last 429 was recorded in the audit log.
    refusals: HashMap<IpAddr, Instant>,
}

/// The failed sign-ins of each account and address.
#[derive(Debug)]
pub(crate) struct AccountAttempts {
    limit: u32,
    window: Duration,
    state: Arc<Mutex<State>>,
}

/// An attempt reserved by [`AccountAttempts::reserve`]: counted until it ends. Dropped without
/// [`Reservation::failed`] (a success, or a check that never ran), it counts no more.
#[derive(Debug)]
pub(crate) struct Reservation {
    key: Option<Key>,
    state: Arc<Mutex<State>>,
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    // Every change is one statement: a panic leaves the state consistent.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AccountAttempts {
    /// At most `limit` failures per account and address within `window`.
    pub(crate) fn new(limit: u32, window: Duration) -> Self {
        Self {
            limit,
            window,
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    /// Reserves an attempt on `account` from `address`, of which the audit log holds `stored`
    /// failures within the window; or the seconds to wait when the failures and the attempts
    /// running reach the limit.
    pub(crate) fn reserve(
        &self,
        account: &str,
        address: IpAddr,
        stored: u64,
    ) -> Result<Reservation, u64> {
        let now = Instant::now();
        let window = self.window;
        let mut state = lock(&self.state);
        let key = (account.to_owned(), address);
        if !state.pairs.contains_key(&key) && state.pairs.len() >= MAX_TRACKED {
            state.pairs.retain(|_, p| {
                p.running > 0 || p.failures.back().is_some_and(|t| now - *t < window)
            });
        }
        let tracked = state.pairs.contains_key(&key) || state.pairs.len() < MAX_TRACKED;
        let (noted, running, oldest) = match state.pairs.get_mut(&key) {
            Some(pair) => {
                while pair.failures.front().is_some_and(|t| now - *t >= window) {
                    pair.failures.pop_front();
                }
                (
                    pair.failures.len() as u64,
                    pair.running,
                    pair.failures.front().copied(),
                )
            }
            None => (0, 0, None),
        };
        if stored.max(noted) + u64::from(running) >= u64::from(self.limit) {
            // The oldest failure noted here frees a place when it leaves the window; without
            // one (the failures are another replica's), the whole window.
            let wait = oldest.map_or(window, |t| window.saturating_sub(now - t));
            return Err(wait.as_secs().max(1));
        }
        if !tracked {
            return Ok(Reservation {
                key: None,
                state: Arc::clone(&self.state),
            });
        }
        state.pairs.entry(key.clone()).or_default().running += 1;
        Ok(Reservation {
            key: Some(key),
            state: Arc::clone(&self.state),
        })
    }

    /// Whether a 429 of `address` is to be recorded in the audit log now: the first of each
    /// [`REFUSAL_RECORD_INTERVAL`], so a flood of refused posts is not a flood of writes.
    pub(crate) fn record_refusal(&self, address: IpAddr) -> bool {
        let now = Instant::now();
        let mut state = lock(&self.state);
        if let Some(last) = state.refusals.get(&address) {
            if now - *last < REFUSAL_RECORD_INTERVAL {
                return false;
            }
        }
        if !state.refusals.contains_key(&address) && state.refusals.len() >= MAX_REFUSALS {
            state
                .refusals
                .retain(|_, last| now - *last < REFUSAL_RECORD_INTERVAL);
            if state.refusals.len() >= MAX_REFUSALS {
                return false;
            }
        }
        state.refusals.insert(address, now);
        true
    }
}

impl Reservation {
    /// The attempt failed: noted as a failure now (before its audit entry is written), and
    /// no longer running.
    pub(crate) fn failed(mut self) {
        if let Some(key) = self.key.take() {
            let mut state = lock(&self.state);
            if let Some(pair) = state.pairs.get_mut(&key) {
                pair.running = pair.running.saturating_sub(1);
                pair.failures.push_back(Instant::now());
            }
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let mut state = lock(&self.state);
            if let Some(pair) = state.pairs.get_mut(&key) {
                pair.running = pair.running.saturating_sub(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    #[test]
    fn attempts_running_count_so_concurrency_cannot_pass_the_limit() {
        let attempts = AccountAttempts::new(3, Duration::from_secs(900));
        let held: Vec<_> = (0..3)
            .map(|_| attempts.reserve("ann@example.com", A, 0).unwrap())
            .collect();
        // Three checks running: a fourth waits, though no failure is written yet.
        assert!(attempts.reserve("ann@example.com", A, 0).is_err());
        for reservation in held {
            reservation.failed();
        }
        let wait = attempts.reserve("ann@example.com", A, 0).unwrap_err();
        assert!((899..=900).contains(&wait), "{wait}");
        // The owner from another address, and another account from this one, are not limited.
        let owner = attempts.reserve("ann@example.com", B, 0).unwrap();
        drop(owner);
        assert!(attempts.reserve("bob@example.com", A, 0).is_ok());
    }

    #[test]
    fn a_success_frees_its_place_and_stored_failures_count() {
        let attempts = AccountAttempts::new(2, Duration::from_secs(900));
        let first = attempts.reserve("ann@example.com", A, 0).unwrap();
        drop(first);
        let second = attempts.reserve("ann@example.com", A, 0).unwrap();
        let third = attempts.reserve("ann@example.com", A, 0).unwrap();
        drop((second, third));
        // Failures another replica wrote count as well.
        assert_eq!(attempts.reserve("ann@example.com", A, 2).unwrap_err(), 900);
        assert!(attempts.reserve("ann@example.com", A, 1).is_ok());
    }

    #[test]
    fn failures_leave_the_window() {
        let attempts = AccountAttempts::new(1, Duration::from_millis(50));
        attempts.reserve("ann@example.com", A, 0).unwrap().failed();
        assert!(attempts.reserve("ann@example.com", A, 0).is_err());
        std::thread::sleep(Duration::from_millis(60));
        assert!(attempts.reserve("ann@example.com", A, 0).is_ok());
    }

    #[test]
    fn one_refusal_of_an_address_is_recorded_a_minute() {
        let attempts = AccountAttempts::new(1, Duration::from_secs(900));
        assert!(attempts.record_refusal(A));
        assert!(!attempts.record_refusal(A));
        assert!(attempts.record_refusal(B));
    }
}
