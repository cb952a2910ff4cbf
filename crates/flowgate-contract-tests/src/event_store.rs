//! [`EventStore`] contract: batches are idempotent on `event_id` within an app (D7, D25),
//! server events (D8) included, and large batches work.
//!
//! The port has no read side, so what is stored is observed through the outcome of appending
//! the same events again.

use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ids::AppId;
use flowgate_domain::ports::{AppendOutcome, EventStore};

async fn append<S: EventStore + ?Sized>(store: &S, events: &[AnalyticsEvent]) -> AppendOutcome {
    match store.append_events(events).await {
        Ok(outcome) => outcome,
        Err(e) => panic!("append_events of {} events: {e}", events.len()),
    }
}

fn outcome(inserted: usize, duplicates: usize) -> AppendOutcome {
    AppendOutcome {
        inserted,
        duplicates,
    }
}

/// A new batch (SDK and server events) is inserted whole.
pub async fn append_batch_counts_inserted<S: EventStore + ?Sized>(store: &S) {
    let batch: Vec<_> = (0..10)
        .map(AnalyticsEvent::sample)
        .chain([AnalyticsEvent::sample_no_flow()])
        .collect();
    assert_eq!(append(store, &batch).await, outcome(11, 0));
}

/// Appending the same batch again stores nothing: every event is a duplicate.
pub async fn same_batch_again_is_all_duplicates<S: EventStore + ?Sized>(store: &S) {
    let batch: Vec<_> = (0..10)
        .map(AnalyticsEvent::sample)
        .chain([AnalyticsEvent::sample_no_flow()])
        .collect();
    assert_eq!(append(store, &batch).await, outcome(11, 0));
    assert_eq!(append(store, &batch).await, outcome(0, 11));
}

/// An id repeated within a batch is stored once; a later batch mixing a stored and a new
/// event inserts only the new one.
pub async fn duplicate_ids_within_a_batch_are_stored_once<S: EventStore + ?Sized>(store: &S) {
    let a = AnalyticsEvent::sample(1);
    let mut a_again = a.clone();
    a_again.user_id = "someone-else".to_owned();
    let batch = [a.clone(), AnalyticsEvent::sample(2), a_again];
    assert_eq!(append(store, &batch).await, outcome(2, 1));
    assert_eq!(
        append(store, &[a, AnalyticsEvent::sample(3)]).await,
        outcome(1, 1)
    );
    assert_eq!(append(store, &batch).await, outcome(0, 3));
}

/// Event ids are unique per app (D25): the id another app already stored is another event,
/// stored too, in the same batch or later; within each app it is idempotent as before.
pub async fn the_same_id_in_two_apps_is_two_events<S: EventStore + ?Sized>(store: &S) {
    let a = AnalyticsEvent::sample(1);
    let mut b = a.clone();
    b.app_id = AppId::from_uuid(uuid::Uuid::from_u128(0xB));
    assert_eq!(append(store, std::slice::from_ref(&a)).await, outcome(1, 0));
    assert_eq!(append(store, std::slice::from_ref(&b)).await, outcome(1, 0));
    assert_eq!(append(store, &[a.clone(), b.clone()]).await, outcome(0, 2));
    let mut c = a.clone();
    c.app_id = AppId::from_uuid(uuid::Uuid::from_u128(0xC));
    let mut d = a;
    d.app_id = AppId::from_uuid(uuid::Uuid::from_u128(0xD));
    assert_eq!(append(store, &[c.clone(), d, c]).await, outcome(2, 1));
}

/// A batch of 1,000 events is inserted whole, and is all duplicates the second time.
pub async fn a_batch_of_a_thousand_events<S: EventStore + ?Sized>(store: &S) {
    let batch: Vec<_> = (0..1000).map(AnalyticsEvent::sample).collect();
    assert_eq!(append(store, &batch).await, outcome(1000, 0));
    assert_eq!(append(store, &batch).await, outcome(0, 1000));
}

/// An empty batch is a no-op.
pub async fn an_empty_batch_stores_nothing<S: EventStore + ?Sized>(store: &S) {
    assert_eq!(append(store, &[]).await, AppendOutcome::default());
}
