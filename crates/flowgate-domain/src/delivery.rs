//! Storing a batch of events so that an event the store refuses for good cannot hold the
//! others back (D17): the sink's writers and the bus consumer both store through
//! [`store_batch`].
//!
//! # Versions
//!
//! A dead letter names the format of its payload (`DeadLetter::format`). The letter of one
//! event is the event as JSON, an object with the fields of [`AnalyticsEvent`] (the stored
//! model). This release writes [`EVENT_JSON_FORMAT`] and reads every format of
//! [`EVENT_JSON_READS`] (D26); golden samples of each version are kept, never rewritten, under
//! `formats/flowgate.event+json/v<N>/` at the repository's root (listed in
//! `formats/MANIFEST.sha256`), and a test reads each with this reader. (A letter may also hold
//! a whole bus message, in the message's own format: see `flowgate_jetstream::codec`.)
//!
//! | Version | Changed | Written | Read |
//! |---|---|---|---|
//! | `flowgate.event.v1+json` | the first version: one `AnalyticsEvent` as a JSON object | yes | yes |
//!
//! Adding an **optional** member to the event is not a new version: the reader ignores
//! members it does not know (a letter a newer release wrote, replayed by an older one) and
//! takes a missing optional member as absent (`AnalyticsEvent`'s deserializer refuses no
//! unknown member and gives every optional one, `payload` included, a default). A required
//! member, a changed type or meaning, or a new value of an enumerated member is a new
//! version, read by one release before a later one writes it. A letter whose format this
//! release does not read is never replayed nor removed by it: `flowgate events dead-letters
//! replay` skips it, saying why, and leaves it for a release that reads it.

use time::OffsetDateTime;

use crate::events::AnalyticsEvent;
use crate::ids::DeadLetterId;
use crate::ports::{DeadLetter, DeadLetterStore, EventStore, StoreError};

/// The format this release writes for a dead letter that holds one event: the event as JSON,
/// with the fields of [`AnalyticsEvent`] (the stored model).
pub const EVENT_JSON_FORMAT: &str = "flowgate.event.v1+json";

/// Every one-event letter format this release reads, [`EVENT_JSON_FORMAT`] included (see
/// "Versions" above).
pub const EVENT_JSON_READS: &[&str] = &[EVENT_JSON_FORMAT];

/// What [`store_batch`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Events written.
    pub inserted: usize,
    /// Events whose `event_id` was already stored (or repeated in the batch).
    pub duplicates: usize,
    /// Events the store refused for good, now dead letters.
    pub dead_lettered: usize,
    /// Store writes it took: 1 unless the batch had to be split.
    pub writes: usize,
}

/// Stores `batch` through `events`. When the store refuses it with a non-transient error, the
/// batch is split in halves, and halves again, until each refusing event is alone; those go
/// to `dead_letters` with the store's error (stamped `now`) and everything else is stored. A
/// batch with one bad event of 1,000 costs about 20 writes instead of holding its writer.
///
/// Returns an error when the store failed transiently (or the dead letters could not be
/// written): the caller tries the whole batch again later, which stores nothing twice, since
/// [`EventStore::append_events`] is idempotent on `event_id` and a dead letter is kept once
/// per event.
pub async fn store_batch(
    events: &dyn EventStore,
    dead_letters: &dyn DeadLetterStore,
    batch: &[AnalyticsEvent],
    now: OffsetDateTime,
) -> Result<BatchOutcome, StoreError> {
    let mut outcome = BatchOutcome::default();
    let mut letters = Vec::new();
    // Ranges still to write, the next one last: halves are written left to right.
    let mut pending = Vec::with_capacity(16);
    pending.push(0..batch.len());
    while let Some(range) = pending.pop() {
        let Some(part) = batch.get(range.clone()).filter(|p| !p.is_empty()) else {
            continue;
        };
        outcome.writes += 1;
        match events.append_events(part).await {
            Ok(stored) => {
                outcome.inserted += stored.inserted;
                outcome.duplicates += stored.duplicates;
            }
            Err(error) if error.is_transient() => return Err(error),
            Err(error) => match part {
                [event] => letters.push(dead_letter(event, &error, now)?),
                _ => {
                    let middle = range.start + part.len() / 2;
                    pending.push(middle..range.end);
                    pending.push(range.start..middle);
                }
            },
        }
    }
    if !letters.is_empty() {
        dead_letters.add_dead_letters(&letters).await?;
        outcome.dead_lettered = letters.len();
    }
    Ok(outcome)
}

/// The dead letter of one event the store refused with `error`.
pub fn dead_letter(
    event: &AnalyticsEvent,
    error: &StoreError,
    now: OffsetDateTime,
) -> Result<DeadLetter, StoreError> {
    let payload = serde_json::to_vec(event).map_err(|e| StoreError::Unstorable {
        detail: format!("cannot encode a dead letter: {e}"),
    })?;
    Ok(DeadLetter {
        id: DeadLetterId::new_v7(now),
        event_id: Some(event.event_id),
        app_id: Some(event.app_id),
        format: EVENT_JSON_FORMAT.to_owned(),
        payload,
        error: error.to_string(),
        first_attempt_at: now,
        last_attempt_at: now,
        attempts: 1,
    })
}

/// The event of a dead letter in [`EVENT_JSON_FORMAT`].
pub fn decode_event(payload: &[u8]) -> Result<AnalyticsEvent, String> {
    decode_event_in(EVENT_JSON_FORMAT, payload)
}

/// Whether this release reads one-event letters in `format` (one of [`EVENT_JSON_READS`]).
pub fn reads_event_format(format: &str) -> bool {
    EVENT_JSON_READS.contains(&format)
}

/// The event of a dead letter whose `format` is one of [`EVENT_JSON_READS`]; an error naming
/// the format otherwise, or when the payload is not an event in it.
pub fn decode_event_in(format: &str, payload: &[u8]) -> Result<AnalyticsEvent, String> {
    if !reads_event_format(format) {
        return Err(format!(
            "format {format:?} is not one this release reads ({})",
            EVENT_JSON_READS.join(", ")
        ));
    }
    // Every version read so far (v1) is the same JSON object: one parser.
    serde_json::from_slice(payload).map_err(|e| format!("not an event in {format}: {e}"))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Mutex;

    use super::*;

    use crate::memory::InMemoryStore;
    use crate::ports::{AppendOutcome, BoxFuture, Outage};

    /// Refuses, whole, any batch holding a poisoned user (a check constraint); fails
    /// transiently while `down`; counts its writes.
    struct Picky {
        inner: InMemoryStore,
        poisoned: HashSet<String>,
        down: Mutex<bool>,
        writes: Mutex<usize>,
    }

    impl Picky {
        fn new(poisoned: &[u32]) -> Self {
            Self {
                inner: InMemoryStore::new(),
                poisoned: poisoned.iter().map(|n| format!("user-{n}")).collect(),
                down: Mutex::new(false),
                writes: Mutex::new(0),
            }
        }
    }

    impl EventStore for Picky {
        fn append_events<'a>(
            &'a self,
            events: &'a [AnalyticsEvent],
        ) -> BoxFuture<'a, Result<AppendOutcome, StoreError>> {
            *self.writes.lock().unwrap() += 1;
            if *self.down.lock().unwrap() {
                return Box::pin(std::future::ready(Err(StoreError::Unavailable {
                    reason: Outage::Connection,
                    detail: "down".to_owned(),
                })));
            }
            if let Some(bad) = events.iter().find(|e| self.poisoned.contains(&e.user_id)) {
                let error = StoreError::Conflict {
                    detail: format!("check violated by {}", bad.user_id),
                };
                return Box::pin(std::future::ready(Err(error)));
            }
            self.inner.append_events(events)
        }
    }

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        // The futures here never wait: the in-memory stores answer at once.
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("the in-memory stores never wait"),
        }
    }

    #[test]
    fn a_healthy_batch_is_one_write() {
        let store = Picky::new(&[]);
        let letters = InMemoryStore::new();
        let batch: Vec<_> = (1..=10).map(AnalyticsEvent::sample).collect();
        let outcome = run(store_batch(
            &store,
            &letters,
            &batch,
            OffsetDateTime::UNIX_EPOCH,
        ))
        .unwrap();
        assert_eq!(
            outcome,
            BatchOutcome {
                inserted: 10,
                duplicates: 0,
                dead_lettered: 0,
                writes: 1
            }
        );
    }

    #[test]
    fn refused_events_are_isolated_and_the_rest_is_stored() {
        let store = Picky::new(&[7, 300, 301, 1000]);
        let letters = InMemoryStore::new();
        let batch: Vec<_> = (1..=1000).map(AnalyticsEvent::sample).collect();
        let at = OffsetDateTime::UNIX_EPOCH + time::Duration::hours(1);
        let outcome = run(store_batch(&store, &letters, &batch, at)).unwrap();
        assert_eq!(outcome.inserted, 996);
        assert_eq!(outcome.dead_lettered, 4);
        // About two writes per level per bad event: far fewer than one per event.
        assert!(
            outcome.writes <= 4 * 2 * 10 + 1,
            "{} writes",
            outcome.writes
        );
        let stored: HashSet<String> = store
            .inner
            .events()
            .into_iter()
            .map(|e| e.user_id)
            .collect();
        assert_eq!(stored.len(), 996);
        for bad in ["user-7", "user-300", "user-301", "user-1000"] {
            assert!(!stored.contains(bad));
        }
        let dead = run(letters.list_dead_letters(None, 10)).unwrap();
        let ids: Vec<_> = dead.iter().map(|l| l.event_id.unwrap()).collect();
        for n in [7, 300, 301, 1000] {
            assert!(ids.contains(&AnalyticsEvent::sample(n).event_id));
        }
        let letter = &dead[0];
        assert_eq!(letter.format, EVENT_JSON_FORMAT);
        assert_eq!(letter.attempts, 1);
        assert_eq!(letter.first_attempt_at, at);
        assert!(letter.error.contains("check violated"), "{}", letter.error);
        // The payload is the event, whole.
        let event_back = decode_event(&letter.payload).unwrap();
        assert_eq!(Some(event_back.event_id), letter.event_id);
        assert!(batch.contains(&event_back));
    }

    #[test]
    fn a_transient_failure_is_returned_for_a_retry_of_the_whole_batch() {
        let store = Picky::new(&[3]);
        *store.down.lock().unwrap() = true;
        let letters = InMemoryStore::new();
        let batch: Vec<_> = (1..=8).map(AnalyticsEvent::sample).collect();
        let error = run(store_batch(
            &store,
            &letters,
            &batch,
            OffsetDateTime::UNIX_EPOCH,
        ))
        .unwrap_err();
        assert!(error.is_transient());
        assert_eq!(
            *store.writes.lock().unwrap(),
            1,
            "no splitting on a transient error"
        );
        assert_eq!(run(letters.count_dead_letters()).unwrap(), 0);
        // The retry stores the rest and isolates the bad one, once.
        *store.down.lock().unwrap() = false;
        let outcome = run(store_batch(
            &store,
            &letters,
            &batch,
            OffsetDateTime::UNIX_EPOCH,
        ))
        .unwrap();
        assert_eq!((outcome.inserted, outcome.dead_lettered), (7, 1));
        let again = run(store_batch(
            &store,
            &letters,
            &batch,
            OffsetDateTime::UNIX_EPOCH,
        ))
        .unwrap();
        assert_eq!((again.inserted, again.duplicates), (0, 7));
        let dead = run(letters.list_dead_letters(None, 10)).unwrap();
        assert_eq!(dead.len(), 1, "one letter per event");
        assert_eq!(dead[0].attempts, 2);
    }
}
