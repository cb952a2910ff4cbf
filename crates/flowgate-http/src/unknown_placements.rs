//! How many `resolve_no_flow` events for unknown placements are recorded (D8, D25).
//!
//! An SDK key is public, so without a bound anyone could make the service write rows of keys
//! of their choosing: a batch of 50 made-up placement keys is 50 events. Per app and per
//! minute, at most `events.unknown_placement_events_per_minute` of them are recorded, each
//! placement key at most once in that minute; the others are counted in
//! `flowgate_http_unknown_placement_events_suppressed_total{app_id}`, so an operator still
//! sees an SDK asking for keys that do not exist. The keys remembered in a minute are at most
//! that many per app, each at most 128 characters (D2's key format, checked before resolve),
//! and apps are the catalog's (the request's app is checked first), so the memory is bounded.
//! The bound is per replica.
//!
//! Known placements are recorded as before: their events name what the catalog holds.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use flowgate_domain::ids::AppId;

/// The window of the bound.
const WINDOW: Duration = Duration::from_secs(60);

/// The unknown placement keys recorded per app in the current minute.
#[derive(Debug)]
pub(crate) struct UnknownPlacements {
    per_minute: usize,
    apps: Mutex<HashMap<AppId, Window>>,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    keys: HashSet<Box<str>>,
}

impl UnknownPlacements {
    pub(crate) fn new(per_minute: u32) -> Self {
        Self {
            per_minute: per_minute as usize,
            apps: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the event for `key`, unknown in `app`, is recorded at `now`: the app has room
    /// left in its minute and the key was not recorded in it yet.
    pub(crate) fn admit(&self, app: AppId, key: &str, now: Instant) -> bool {
        if self.per_minute == 0 {
            return false;
        }
        let mut apps = self.apps.lock().unwrap_or_else(PoisonError::into_inner);
        let window = apps.entry(app).or_insert_with(|| Window {
            started: now,
            keys: HashSet::new(),
        });
        if now.saturating_duration_since(window.started) >= WINDOW {
            window.started = now;
            window.keys.clear();
        }
        if window.keys.len() >= self.per_minute || window.keys.contains(key) {
            return false;
        }
        window.keys.insert(key.into());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(n: u128) -> AppId {
        AppId::from_uuid(uuid::Uuid::from_u128(n))
    }

    #[test]
    fn each_app_records_a_bounded_number_of_distinct_keys_a_minute() {
        let bound = UnknownPlacements::new(3);
        let t = Instant::now();
        assert!(bound.admit(app(1), "a", t));
        assert!(!bound.admit(app(1), "a", t), "a key once a minute");
        assert!(bound.admit(app(1), "b", t));
        assert!(bound.admit(app(1), "c", t + Duration::from_secs(30)));
        assert!(
            !bound.admit(app(1), "d", t + Duration::from_secs(59)),
            "3 a minute"
        );
        assert!(bound.admit(app(2), "d", t), "another app has its own");
        // The next minute starts afresh, repeated keys included.
        let next = t + Duration::from_secs(60);
        assert!(bound.admit(app(1), "a", next));
        assert!(bound.admit(app(1), "d", next));
        assert!(!bound.admit(app(1), "a", next));
        assert!(
            !UnknownPlacements::new(0).admit(app(1), "a", t),
            "0 records none"
        );
    }
}
