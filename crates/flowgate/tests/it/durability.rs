//! What a 202 promises (D15), end to end through the real binary: with `events.ack =
//! "stored"` a SIGKILL loses no acknowledged event, on SQLite and on PostgreSQL, whether the
//! store is healthy or stalled by a held table lock; the same run with `buffered` shows the
//! loss that mode allows (so the test can fail); and a store that is down gets requests a 503
//! within the acknowledgement timeout, never a 202, with their retries stored once after.

use std::time::{Duration, Instant};

use flowgate_store::Backend;

use crate::support::{assert_exactly_once, Load, LoadOptions, LoadOutcome, Served};

/// Four clients posting batches of 100 valid events; the store healthy, then stalled by a
/// held lock on the events table, `kill -9` while stalled, a restart on the same store, the
/// load again on a healthy store and `kill -9` in the middle of it, a last restart and a
/// graceful stop. Returns what the clients saw and what the store holds.
async fn kill_mid_stream(backend: Backend, ack: &str) -> Option<(LoadOutcome, Vec<String>)> {
    let mut s = Served::start_on(backend, &[("FLOWGATE__EVENTS__ACK", ack)]).await?;
    let load = Load::with(
        s.api,
        &s.key,
        LoadOptions {
            producers: 4,
            batch: 100,
            retry_after: None,
        },
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let lock = s.db.lock_events().await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    s.kill9();
    lock.release().await;
    s.restart().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    s.kill9();
    s.restart().await;
    let outcome = load.finish();
    assert_eq!(s.terminate().await, Some(0), "the last run drained");
    let stored = s.stored_sdk_event_ids().await;
    assert!(
        outcome.accepted.len() >= 1_000,
        "a real load: {} events accepted",
        outcome.accepted.len()
    );
    outcome.assert_only_sent_events_stored(&stored);
    Some((outcome, stored))
}

async fn stored_mode_survives_sigkill(backend: Backend) {
    let Some((outcome, stored)) = kill_mid_stream(backend, "stored").await else {
        return;
    };
    assert_exactly_once(&stored, &outcome.accepted);
    println!(
        "{backend}, stored: {} events answered 202, all stored once; {} sent without a 202",
        outcome.accepted.len(),
        outcome.unanswered.len()
    );
}

/// `buffered` answers 202 before the events are stored: a SIGKILL while the store is stalled
/// loses what the buffer held. The test asserts the loss, so the stored-mode test above is
/// known to detect one.
async fn buffered_mode_loses_what_it_held(backend: Backend) {
    let Some((outcome, stored)) = kill_mid_stream(backend, "buffered").await else {
        return;
    };
    let stored_set: std::collections::HashSet<&String> = stored.iter().collect();
    assert_eq!(stored_set.len(), stored.len(), "no event is stored twice");
    let lost = outcome
        .accepted
        .iter()
        .filter(|id| !stored_set.contains(id))
        .count();
    assert!(
        lost > 0,
        "buffered mode lost nothing: the kill did not hit a held buffer"
    );
    println!(
        "{backend}, buffered: {lost} of {} events answered 202 were never stored",
        outcome.accepted.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_loses_no_acknowledged_event_on_sqlite() {
    stored_mode_survives_sigkill(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_loses_no_acknowledged_event_on_postgres() {
    stored_mode_survives_sigkill(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_in_buffered_mode_loses_the_buffer_on_sqlite() {
    buffered_mode_loses_what_it_held(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_in_buffered_mode_loses_the_buffer_on_postgres() {
    buffered_mode_loses_what_it_held(Backend::Postgres).await;
}

/// D15: with the store down, events requests get 503 within `events.ack_timeout_ms`, never
/// 202; clients that send the same events again after the store returns get them accepted,
/// and every event is stored once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_down_answers_503_in_time_and_retries_are_stored_once() {
    const ACK_TIMEOUT: Duration = Duration::from_millis(1000);
    let Some(mut s) = Served::start(&[("FLOWGATE__EVENTS__ACK_TIMEOUT_MS", "1000")]).await else {
        return;
    };
    let load = Load::with(
        s.api,
        &s.key,
        LoadOptions {
            producers: 4,
            batch: 20,
            retry_after: Some(Duration::from_millis(200)),
        },
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    s.proxy().cut();
    let cut_at = Instant::now();
    s.wait_ready("degraded", Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    s.proxy().restore();
    let restored_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let outcome = load.finish();
    assert_eq!(s.terminate().await, Some(0));

    // Requests sent while the store was surely down were all refused, each within the
    // timeout and its margin: from when the writes in flight at the cut have failed, to the
    // last moment a request could not have been stored after the store came back.
    let during: Vec<_> = outcome
        .exchanges
        .iter()
        .filter(|x| {
            x.sent > cut_at + Duration::from_millis(2500)
                && x.sent + ACK_TIMEOUT + Duration::from_millis(500) < restored_at
        })
        .collect();
    assert!(during.len() >= 8, "requests during the outage: {during:?}");
    for x in &during {
        assert_eq!(x.status, 503, "answered during the outage: {x:?}");
        assert!(
            x.took < ACK_TIMEOUT + Duration::from_millis(1500),
            "the 503 came late: {x:?}"
        );
    }
    assert!(
        outcome.accepted_on_retry > 0,
        "requests refused during the outage were accepted when sent again"
    );
    let stored = s.stored_sdk_event_ids().await;
    assert_exactly_once(&stored, &outcome.accepted);
    outcome.assert_only_sent_events_stored(&stored);
}
