//! The sink against a real PostgreSQL through `flowgate_store::Store`: a database per test,
//! dropped on drop. A server that cannot be reached skips these tests with a message, except
//! in CI (`CI=true`), where it fails them.
//!
//! The loss test cuts a TCP proxy between the store and PostgreSQL for 4 s in the middle of a
//! load: long enough to span many failed attempts and a backoff at its maximum, short enough
//! to keep `make test` fast. The same scenario against the real binary, and SIGTERM in the
//! middle of a load, are the binary's fault tests (`crates/flowgate/tests/it/faults.rs`).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowgate_analytics::{Backoff, Sink, SinkConfig};
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ids::EventId;
use flowgate_domain::ports::{AppendOutcome, BoxFuture, EventSink, EventStore, Outage, StoreError};
use flowgate_store::Store;

use crate::support::*;

/// Asserts that the database holds exactly the accepted events, each in one row.
async fn assert_db_holds_exactly(db: &TestDb, accepted: &[EventId]) {
    let rows = event_ids(db).await;
    let distinct: HashSet<EventId> = rows.iter().copied().collect();
    let expected: HashSet<EventId> = accepted.iter().copied().collect();
    assert_eq!(expected.len(), accepted.len(), "test bug: repeated ids");
    assert_eq!(rows.len(), distinct.len(), "an event is stored twice");
    assert_eq!(
        rows.len(),
        accepted.len(),
        "rows in the database vs events accepted"
    );
    assert_eq!(distinct, expected);
}

/// A store whose first failures are ambiguous: the batch is committed, then an error is
/// returned, as when the connection drops before the commit is acknowledged.
struct AckLost {
    inner: Store,
    remaining: AtomicU32,
}

impl EventStore for AckLost {
    fn append_events<'a>(
        &'a self,
        events: &'a [AnalyticsEvent],
    ) -> BoxFuture<'a, Result<AppendOutcome, StoreError>> {
        Box::pin(async move {
            let outcome = self.inner.append_events(events).await?;
            if self
                .remaining
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                return Err(StoreError::Unavailable {
                    reason: Outage::Connection,
                    detail: "acknowledgement lost".to_owned(),
                });
            }
            Ok(outcome)
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_retried_after_a_lost_acknowledgement_are_stored_once() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let store = Arc::new(AckLost {
        inner: Store::connect(&db.url, test_options()).unwrap(),
        remaining: AtomicU32::new(3),
    });
    let dead_letters = Arc::new(store.inner.clone());
    let sink = Sink::start(config(), store, dead_letters).unwrap();
    let mut accepted = Vec::new();
    for i in 0..40 {
        let events = request(1 + i % 100);
        accepted.extend(ids(&events));
        sink.try_enqueue(events).unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let report = sink.shutdown(Duration::from_secs(20)).await;
    assert!(report.completed, "{report:?}");
    let stats = sink.stats();
    assert_eq!(stats.write_retries, 3);
    assert!(
        stats.events_duplicate > 0,
        "the retried batches met their own rows"
    );
    assert_db_holds_exactly(&db, &accepted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_accepted_event_is_lost_when_the_database_is_cut_off_mid_load() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let proxy = Proxy::start(db.server_authority()).await;
    let store = Store::connect(&db.url_via(&proxy.addr.to_string()), test_options()).unwrap();
    let sink = Sink::start(
        SinkConfig {
            queue_capacity: 20_000,
            batch_size: 500,
            write_threshold: 500,
            flush_interval: Duration::from_millis(50),
            drain_deadline: Duration::from_secs(60),
            writers: 2,
            record_resolve_no_flow: true,
            write_timeout: Duration::from_secs(5),
            admission_wait: Duration::ZERO,
            backoff: Backoff {
                base: Duration::from_millis(50),
                max: Duration::from_secs(1),
            },
            ..config()
        },
        Arc::new(store.clone()),
        Arc::new(store),
    )
    .unwrap();

    // Load: 4 producers, each sending requests of 1..=100 events every few milliseconds for
    // 7 s. The proxy is cut from 1.5 s to 5.5 s.
    let load_for = Duration::from_secs(7);
    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..4)
        .map(|p| {
            let sink = sink.clone();
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let mut accepted: Vec<EventId> = Vec::new();
                let mut refused = 0usize;
                let mut i = 0usize;
                while !stop.load(Ordering::SeqCst) {
                    let events = request(1 + (i * 37 + p * 11) % 100);
                    let batch_ids = ids(&events);
                    match sink.try_enqueue(events) {
                        Ok(()) => accepted.extend(batch_ids),
                        Err(_) => refused += 1,
                    }
                    i += 1;
                    tokio::time::sleep(Duration::from_millis(4)).await;
                }
                (accepted, refused)
            })
        })
        .collect();

    let started = Instant::now();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let before_cut = sink.stats();
    proxy.cut();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let during_cut = sink.stats();
    proxy.restore();
    tokio::time::sleep(load_for.saturating_sub(started.elapsed())).await;
    stop.store(true, Ordering::SeqCst);

    let mut accepted = Vec::new();
    let mut refused = 0;
    for producer in producers {
        let (ids, r) = producer.await.unwrap();
        accepted.extend(ids);
        refused += r;
    }
    let report = sink.shutdown(Duration::from_secs(60)).await;
    let stats = sink.stats();
    eprintln!(
        "loss test: {} events accepted, {refused} requests refused, {} write retries, \
         {} duplicates on retry, drain {:?}; written before the cut {}, during {}",
        accepted.len(),
        stats.write_retries,
        stats.events_duplicate,
        report.elapsed,
        before_cut.events_written,
        during_cut.events_written,
    );
    assert!(report.completed, "{report:?}");
    assert!(
        before_cut.events_written > 0,
        "writes flowed before the cut"
    );
    assert!(!during_cut.store_healthy, "the cut was noticed");
    assert!(stats.write_retries > 0);
    assert!(stats.store_healthy, "healthy again after the restore");
    assert_eq!(stats.events_enqueued as usize, accepted.len());
    assert_db_holds_exactly(&db, &accepted).await;
    drop(proxy);
}
