//! The sink against the in-memory store and the fault-injecting wrapper.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowgate_analytics::{Sink, SinkConfig, StartError, RETRY_AFTER_MAX_SECS};
use flowgate_domain::ids::EventId;
use flowgate_domain::memory::InMemoryStore;
use flowgate_domain::ports::{EventSink, Overloaded};

use crate::support::*;

const LONG: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushes_full_batches_without_waiting_for_the_interval() {
    let store = FaultStore::new();
    let sink = Sink::start(
        SinkConfig {
            batch_size: 10,
            flush_interval: LONG,
            writers: 1,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    for _ in 0..3 {
        sink.try_enqueue(request(10)).unwrap();
    }
    sink.try_enqueue(request(5)).unwrap();
    // The store records a batch's size after its events: wait for the record.
    assert!(eventually(Duration::from_secs(5), || store.batches().len() == 3).await);
    assert_eq!(store.batches(), vec![10, 10, 10]);
    // The partial batch waits for the interval (60 s): still queued.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(store.events().len(), 30);
    let stats = sink.stats();
    assert_eq!(stats.queue_depth, 5);
    assert_eq!(stats.batches_written, 3);
    assert_eq!(stats.last_batch_size, 10);
    // Shutdown flushes it at once.
    let report = sink.shutdown(Duration::from_secs(5)).await;
    assert!(report.completed);
    assert_eq!(report.written, 5);
    assert_eq!(store.batches(), vec![10, 10, 10, 5]);
}

/// A sink of batches of 50 with a write threshold of 20 and no interval in practice (60 s).
fn threshold_sink(store: &Arc<FaultStore>, writers: usize) -> Sink {
    Sink::start(
        SinkConfig {
            batch_size: 50,
            write_threshold: 20,
            flush_interval: LONG,
            writers,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap()
}

/// After batches of 25 and 50, the last 10 events are below the threshold: they stay queued
/// until the shutdown writes them.
async fn rest_waits_for_the_shutdown(sink: &Sink, store: &FaultStore) {
    assert_eq!(store.batches(), vec![25, 50]);
    assert_eq!(sink.stats().queue_depth, 10);
    let report = sink.shutdown(Duration::from_secs(5)).await;
    assert!(report.completed);
    assert_eq!(store.batches(), vec![25, 50, 10]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_once_the_threshold_is_queued_up_to_a_full_batch() {
    let store = FaultStore::new();
    let sink = threshold_sink(&store, 1);
    // Below the threshold, events wait for the interval (60 s).
    sink.try_enqueue(request(15)).unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(store.events().is_empty());
    // Reaching it, they are written at once, all that is queued in one batch.
    sink.try_enqueue(request(10)).unwrap();
    assert!(eventually(Duration::from_secs(5), || store.batches().len() == 1).await);
    assert_eq!(store.batches(), vec![25]);
    // Above it, one write takes at most a full batch; the rest is below the threshold again.
    sink.try_enqueue(request(60)).unwrap();
    assert!(eventually(Duration::from_secs(5), || store.batches().len() == 2).await);
    tokio::time::sleep(Duration::from_millis(150)).await;
    rest_waits_for_the_shutdown(&sink, &store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_a_write_is_in_flight_only_full_batches_start() {
    let store = FaultStore::new();
    store.delay_ms.store(400, Ordering::SeqCst);
    let sink = threshold_sink(&store, 2);
    let attempts = || store.attempts.load(Ordering::SeqCst);
    sink.try_enqueue(request(25)).unwrap();
    assert!(eventually(Duration::from_secs(5), || attempts() == 1).await);
    // Past the threshold, but a write is in flight: the idle writer waits for a full batch.
    sink.try_enqueue(request(30)).unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(attempts(), 1);
    // A full batch starts at once beside the one in flight.
    sink.try_enqueue(request(30)).unwrap();
    assert!(eventually(Duration::from_secs(5), || attempts() == 2).await);
    // The store records a batch's size after its events: wait for the record.
    assert!(eventually(Duration::from_secs(5), || store.batches().len() == 2).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    rest_waits_for_the_shutdown(&sink, &store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushes_a_partial_batch_after_the_interval() {
    let store = FaultStore::new();
    let interval = Duration::from_millis(150);
    let sink = Sink::start(
        SinkConfig {
            batch_size: 1_000,
            flush_interval: interval,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let started = Instant::now();
    sink.try_enqueue(request(3)).unwrap();
    sink.try_enqueue(request(4)).unwrap();
    assert!(eventually(Duration::from_secs(5), || store.batches().len() == 1).await);
    let waited = started.elapsed();
    assert!(waited >= interval, "flushed after {waited:?}");
    assert!(waited < interval * 4, "flushed only after {waited:?}");
    assert_eq!(store.batches(), vec![7], "one batch for both requests");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_refuses_whole_requests_and_stores_the_earlier_ones() {
    let store = FaultStore::new();
    store.down.store(true, Ordering::SeqCst);
    let sink = Sink::start(
        SinkConfig {
            queue_capacity: 100,
            batch_size: 25,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let mut accepted: Vec<EventId> = Vec::new();
    let first = request(60);
    accepted.extend(ids(&first));
    sink.try_enqueue(first).unwrap();
    // Wait until the writers have failed at least once: the store is known to be down.
    assert!(eventually(Duration::from_secs(5), || !sink.stats().store_healthy).await);

    // 60 + 50 > 100: the whole request is refused, with the longest Retry-After (store down).
    let refused = request(50);
    let refused_ids = ids(&refused);
    assert_eq!(
        sink.try_enqueue(refused),
        Err(Overloaded {
            retry_after_secs: RETRY_AFTER_MAX_SECS
        })
    );
    // Exactly what remains still fits.
    let last = request(40);
    accepted.extend(ids(&last));
    sink.try_enqueue(last).unwrap();
    assert!(sink.try_enqueue(request(1)).is_err());

    let stats = sink.stats();
    assert_eq!(stats.queue_depth + stats.in_flight, 100);
    assert_eq!(stats.events_enqueued, 100);
    assert_eq!(stats.requests_accepted, 2);
    assert_eq!(stats.events_refused, 51);
    assert_eq!(stats.requests_refused, 2);

    store.down.store(false, Ordering::SeqCst);
    let report = sink.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed, "{report:?}");
    let stored = store.events();
    assert_stored_exactly_once(&stored, &accepted);
    assert!(stored.iter().all(|e| !refused_ids.contains(&e.event_id)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_the_time_to_write_the_backlog() {
    let store = FaultStore::new();
    // 100 ms per batch of 100 with one writer: about 1,000 events/s.
    store.delay_ms.store(100, Ordering::SeqCst);
    let sink = Sink::start(
        SinkConfig {
            queue_capacity: 5_000,
            batch_size: 100,
            writers: 1,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    // Faster than the writer: the queue fills up. Before the rate is known: the minimum.
    while sink.try_enqueue(request(100)).is_ok() {}
    assert_eq!(
        sink.try_enqueue(request(100)),
        Err(Overloaded {
            retry_after_secs: 1
        })
    );
    let deadline = Instant::now() + Duration::from_millis(1_500);
    while Instant::now() < deadline {
        let _ = sink.try_enqueue(request(100));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let rate = sink
        .stats()
        .write_rate
        .expect("a rate after 1.5 s of writes");
    assert!((300.0..3_000.0).contains(&rate), "rate {rate}");
    while sink.try_enqueue(request(100)).is_ok() {}
    let Err(Overloaded { retry_after_secs }) = sink.try_enqueue(request(100)) else {
        panic!("expected a refusal");
    };
    // About 5,000 events at about 1,000 events/s.
    assert!(
        (2..=15).contains(&retry_after_secs),
        "{retry_after_secs} s, rate {rate}"
    );
    store.delay_ms.store(0, Ordering::SeqCst);
    assert!(sink.shutdown(Duration::from_secs(30)).await.completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_with_backoff_until_the_store_recovers_and_stores_each_event_once() {
    let store = FaultStore::new();
    // Ambiguous failures: the batch is stored, then the write reports an error, so every
    // retry meets events the store already has.
    store.ambiguous.store(true, Ordering::SeqCst);
    store.fail_next.store(4, Ordering::SeqCst);
    let sink = Sink::start(
        SinkConfig {
            writers: 1,
            backoff: flowgate_analytics::Backoff {
                base: Duration::from_millis(40),
                max: Duration::from_millis(1_000),
            },
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let events = request(50);
    let accepted = ids(&events);
    sink.try_enqueue(events).unwrap();
    assert!(
        eventually(Duration::from_secs(10), || sink.stats().events_written
            == 50)
        .await
    );
    assert_eq!(store.attempts.load(Ordering::SeqCst), 5);
    // Delays are jittered in [d/2, d] with d = 40, 80, 160, 320 ms.
    let times = store.attempt_times();
    for (i, pair) in times.windows(2).enumerate() {
        let gap = pair[1] - pair[0];
        let ceiling = Duration::from_millis(40 << i);
        assert!(gap >= ceiling / 2, "gap {i} was {gap:?}");
        assert!(
            gap <= ceiling + Duration::from_millis(150),
            "gap {i} was {gap:?}"
        );
    }
    let stats = sink.stats();
    assert_eq!(stats.write_retries, 4);
    assert_eq!(
        stats.events_duplicate, 50,
        "the last attempt found them all stored"
    );
    assert!(stats.store_healthy);
    assert!(stats.last_failure.is_some());
    assert_eq!(
        stats.last_error.as_deref(),
        Some("store unavailable: injected outage")
    );
    assert_stored_exactly_once(&store.events(), &accepted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_load_through_an_outage_loses_nothing() {
    let store = FaultStore::new();
    store.ambiguous.store(true, Ordering::SeqCst);
    let sink = Sink::start(
        SinkConfig {
            queue_capacity: 5_000,
            batch_size: 200,
            writers: 3,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let producers: Vec<_> = (0..4)
        .map(|p| {
            let sink = sink.clone();
            let store = store.clone();
            tokio::spawn(async move {
                let mut accepted = Vec::new();
                let mut refused = 0usize;
                for i in 0..150 {
                    if p == 0 && i == 30 {
                        store.down.store(true, Ordering::SeqCst);
                    }
                    if p == 0 && i == 90 {
                        store.down.store(false, Ordering::SeqCst);
                    }
                    let events = request(1 + (i % 20));
                    let batch_ids = ids(&events);
                    match sink.try_enqueue(events) {
                        Ok(()) => accepted.extend(batch_ids),
                        Err(_) => refused += 1,
                    }
                    tokio::time::sleep(Duration::from_millis(3)).await;
                }
                (accepted, refused)
            })
        })
        .collect();
    let mut accepted = Vec::new();
    for producer in producers {
        let (ids, _) = producer.await.unwrap();
        accepted.extend(ids);
    }
    store.down.store(false, Ordering::SeqCst);
    let report = sink.shutdown(Duration::from_secs(20)).await;
    assert!(report.completed, "{report:?}");
    assert_stored_exactly_once(&store.events(), &accepted);
    let stats = sink.stats();
    assert!(stats.write_retries > 0, "the outage was noticed");
    assert_eq!(stats.events_enqueued as usize, accepted.len());
    assert_eq!(stats.events_written as usize, accepted.len());
}

/// D17: a batch the store refuses for good is split until the refusing events are alone;
/// they become dead letters, their neighbours are stored, and the writer goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_events_become_dead_letters_and_their_neighbours_are_stored() {
    let store = FaultStore::new();
    store.poison("user-13");
    store.poison("user-77");
    let sink = Sink::start(config(), store.clone(), store.clone()).unwrap();
    let events = request(100);
    let poisoned: Vec<EventId> = events
        .iter()
        .filter(|e| e.user_id == "user-13" || e.user_id == "user-77")
        .map(|e| e.event_id)
        .collect();
    let good: Vec<EventId> = ids(&events)
        .into_iter()
        .filter(|id| !poisoned.contains(id))
        .collect();
    sink.try_enqueue(events).unwrap();
    // The writer goes on: a later request is stored too.
    let later = request(5);
    let mut accepted = good.clone();
    accepted.extend(ids(&later));
    sink.try_enqueue(later).unwrap();
    let report = sink.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed, "{report:?}");
    assert_stored_exactly_once(&store.events(), &accepted);
    let letters = store.dead_letters();
    let mut lettered: Vec<EventId> = letters.iter().map(|l| l.event_id.unwrap()).collect();
    lettered.sort();
    let mut expected = poisoned.clone();
    expected.sort();
    assert_eq!(lettered, expected);
    assert!(
        letters[0].error.contains("check constraint refuses"),
        "{letters:?}"
    );
    let stats = sink.stats();
    assert_eq!(stats.events_dead_lettered, 2);
    assert_eq!(stats.write_retries, 0, "nothing was held for a retry");
}

/// A non-transient failure that no single event causes (the whole batch refused, then each
/// half stored) splits once and loses nothing: no dead letter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_that_clears_on_splitting_stores_everything() {
    let store = FaultStore::new();
    store.non_transient.store(true, Ordering::SeqCst);
    store.fail_next.store(1, Ordering::SeqCst);
    let sink = Sink::start(config(), store.clone(), store.clone()).unwrap();
    let events = request(10);
    let accepted = ids(&events);
    sink.try_enqueue(events).unwrap();
    let report = sink.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed);
    assert_stored_exactly_once(&store.events(), &accepted);
    assert_eq!(store.batches(), vec![5, 5]);
    assert!(store.dead_letters().is_empty());
}

/// Dead letters that cannot be written hold the batch, retried, until they can: nothing is
/// dropped, and the event is a dead letter once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_that_cannot_be_written_are_retried() {
    let store = FaultStore::new();
    store.poison("user-3");
    store.dead_letters_down.store(true, Ordering::SeqCst);
    let sink = Sink::start(config(), store.clone(), store.clone()).unwrap();
    let events = request(10);
    let bad = events[3].event_id;
    let accepted: Vec<EventId> = ids(&events).into_iter().filter(|id| *id != bad).collect();
    sink.try_enqueue(events).unwrap();
    assert!(eventually(Duration::from_secs(5), || sink.stats().write_retries >= 2).await);
    assert_eq!(sink.stats().in_flight, 10, "the batch is held");
    store.dead_letters_down.store(false, Ordering::SeqCst);
    let report = sink.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed);
    assert_stored_exactly_once(&store.events(), &accepted);
    let letters = store.dead_letters();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].event_id, Some(bad));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_slower_than_the_timeout_is_retried() {
    let store = FaultStore::new();
    store.delay_ms.store(500, Ordering::SeqCst);
    let sink = Sink::start(
        SinkConfig {
            write_timeout: Duration::from_millis(50),
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let events = request(10);
    let accepted = ids(&events);
    sink.try_enqueue(events).unwrap();
    assert!(eventually(Duration::from_secs(5), || sink.stats().write_retries >= 2).await);
    assert!(!sink.stats().store_healthy);
    store.delay_ms.store(0, Ordering::SeqCst);
    assert!(sink.shutdown(Duration::from_secs(10)).await.completed);
    assert!(sink.stats().store_healthy);
    assert_stored_exactly_once(&store.events(), &accepted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_everything_queued_and_in_flight() {
    let store = FaultStore::new();
    // Slow writes so that batches are in flight when the shutdown starts.
    store.delay_ms.store(30, Ordering::SeqCst);
    let sink = Sink::start(
        SinkConfig {
            queue_capacity: 10_000,
            batch_size: 100,
            flush_interval: LONG,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let mut accepted = Vec::new();
    for i in 0..25 {
        let events = request(20 + i);
        accepted.extend(ids(&events));
        sink.try_enqueue(events).unwrap();
    }
    let report = sink.shutdown(Duration::from_secs(20)).await;
    assert!(report.completed, "{report:?}");
    assert_eq!(report.remaining, 0);
    assert_eq!(report.written as usize, accepted.len());
    assert_stored_exactly_once(&store.events(), &accepted);
    assert!(sink.stats().shutting_down);
    let stats = sink.stats();
    assert_eq!(stats.queue_depth, 0);
    assert_eq!(stats.in_flight, 0);
    assert_eq!(stats.oldest_event_age, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_deadline_is_honoured_while_the_store_stays_down() {
    let store = FaultStore::new();
    store.down.store(true, Ordering::SeqCst);
    let sink = Sink::start(config(), store.clone(), store.clone()).unwrap();
    sink.try_enqueue(request(30)).unwrap();
    sink.try_enqueue(request(12)).unwrap();
    let started = Instant::now();
    let report = sink.shutdown(Duration::from_millis(300)).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300),
        "returned after {took:?}"
    );
    assert!(took < Duration::from_secs(2), "returned after {took:?}");
    assert!(!report.completed);
    assert_eq!(report.remaining, 42);
    assert_eq!(report.written, 0);
    assert!(store.events().is_empty());
    // The writers keep trying while the runtime runs: nothing is dropped.
    store.down.store(false, Ordering::SeqCst);
    assert!(eventually(Duration::from_secs(5), || store.events().len() == 42).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_refused_after_shutdown_began() {
    let store = FaultStore::new();
    let sink = Sink::start(config(), store.clone(), store.clone()).unwrap();
    sink.try_enqueue(request(5)).unwrap();
    let report = sink.shutdown(Duration::from_secs(5)).await;
    assert!(report.completed);
    assert_eq!(report.written, 5);
    assert_eq!(
        sink.try_enqueue(request(1)),
        Err(Overloaded {
            retry_after_secs: 1
        })
    );
    let stats = sink.stats();
    assert!(stats.shutting_down);
    assert_eq!(stats.events_refused, 1);
    assert_eq!(store.events().len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_report_what_happened() {
    let store = FaultStore::new();
    let sink = Sink::start(
        SinkConfig {
            batch_size: 40,
            flush_interval: LONG,
            writers: 1,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let fresh = sink.stats();
    assert_eq!(fresh.queue_capacity, 1_000);
    assert_eq!(fresh.events_enqueued, 0);
    assert_eq!(fresh.write_rate, None);
    assert!(fresh.store_healthy);
    assert_eq!(fresh.last_failure, None);

    sink.try_enqueue(request(40)).unwrap(); // one full batch
    assert!(eventually(Duration::from_secs(5), || sink.stats().batches_written == 1).await);
    store.down.store(true, Ordering::SeqCst);
    sink.try_enqueue(request(40)).unwrap();
    sink.try_enqueue(request(7)).unwrap();
    assert!(eventually(Duration::from_secs(5), || sink.stats().write_retries >= 2).await);
    tokio::time::sleep(Duration::from_millis(20)).await;

    let s = sink.stats();
    assert_eq!(s.events_enqueued, 87);
    assert_eq!(s.requests_accepted, 3);
    assert_eq!(s.events_written, 40);
    assert_eq!(s.batches_written, 1);
    assert_eq!(s.last_batch_size, 40);
    assert_eq!(s.in_flight, 40);
    assert_eq!(s.queue_depth, 7);
    assert!(!s.store_healthy);
    assert!(!sink.stats().store_healthy);
    assert!(s.last_failure.is_some());
    assert!(s.oldest_event_age.expect("events waiting") >= Duration::from_millis(20));
    assert_eq!(s.batch_sizes.count(), 1);
    assert_eq!(s.batch_sizes.sum(), 40.0);
    assert_eq!(s.write_latency.count(), 1);
    assert!(s.write_latency.sum() > 0.0);

    store.down.store(false, Ordering::SeqCst);
    let report = sink.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed);
    let s = sink.stats();
    assert!(s.store_healthy);
    assert_eq!(s.events_written, 87);
    assert_eq!(s.batches_written, 3);
    assert_eq!(s.batch_sizes.count(), 3);
    assert_eq!(s.events_duplicate, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolve_no_flow_events_follow_the_switch() {
    let store = Arc::new(InMemoryStore::new());
    let on = Sink::start(config(), store.clone(), store.clone()).unwrap();
    assert!(on.config().record_resolve_no_flow);
    on.try_enqueue(vec![no_flow_event(), no_flow_event()])
        .unwrap();
    assert!(on.shutdown(Duration::from_secs(5)).await.completed);
    assert_eq!(store.events().len(), 2);

    let store = Arc::new(InMemoryStore::new());
    let off = Sink::start(
        SinkConfig {
            record_resolve_no_flow: false,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    assert!(!off.config().record_resolve_no_flow);
    off.try_enqueue(vec![no_flow_event()]).unwrap();
    off.try_enqueue(request(3)).unwrap();
    assert!(off.shutdown(Duration::from_secs(5)).await.completed);
    assert_eq!(store.events().len(), 3, "only the SDK events");
    let s = off.stats();
    assert_eq!(s.server_events_skipped, 1);
    assert_eq!(s.events_enqueued, 3);
}

#[tokio::test]
async fn an_empty_request_is_accepted_and_stores_nothing() {
    let store = Arc::new(InMemoryStore::new());
    let sink = Sink::start(config(), store.clone(), store.clone()).unwrap();
    sink.try_enqueue(Vec::new()).unwrap();
    assert!(sink.shutdown(Duration::from_secs(1)).await.completed);
    assert_eq!(sink.stats().requests_accepted, 0);
}

#[test]
fn start_checks_the_config_and_the_runtime() {
    let store = Arc::new(InMemoryStore::new());
    let err = Sink::start(
        SinkConfig {
            batch_size: 0,
            ..SinkConfig::default()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "events.batch_size must be between 1 and 10000 (got 0)"
    );
    assert_eq!(
        Sink::start(SinkConfig::default(), store.clone(), store).unwrap_err(),
        StartError::NoRuntime
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_larger_than_a_batch_is_split_across_batches() {
    let store = FaultStore::new();
    let sink = Sink::start(
        SinkConfig {
            batch_size: 10,
            flush_interval: LONG,
            writers: 1,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let first = request(25);
    let second = request(7);
    let mut accepted = ids(&first);
    accepted.extend(ids(&second));
    sink.try_enqueue(first).unwrap();
    sink.try_enqueue(second).unwrap();
    assert!(sink.shutdown(Duration::from_secs(5)).await.completed);
    assert_eq!(store.batches(), vec![10, 10, 10, 2]);
    // Stored in acceptance order.
    assert_eq!(ids(&store.events()), accepted);
}

// ---------------------------------------------------------------------------------------------
// Admission: capacity reserved before a request's body is read (D7).

/// A sink with capacity for 200 events whose store is down: 200 queued events fill it.
async fn full_sink(store: &Arc<FaultStore>, admission_wait: Duration) -> (Sink, Vec<EventId>) {
    store.down.store(true, Ordering::SeqCst);
    let sink = Sink::start(
        SinkConfig {
            queue_capacity: 200,
            batch_size: 100,
            writers: 1,
            admission_wait,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let first = request(200);
    let accepted = ids(&first);
    sink.try_enqueue(first).unwrap();
    (sink, accepted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_enqueues_what_it_was_admitted_for_and_gives_back_the_rest() {
    let store = FaultStore::new();
    store.down.store(true, Ordering::SeqCst);
    let sink = Sink::start(
        SinkConfig {
            queue_capacity: 200,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let admission = sink.admit(100).await.unwrap();
    // The 100 events of the reservation are taken: 101 more do not fit, 100 do.
    assert!(sink.try_enqueue(request(101)).is_err());
    let a = request(30);
    let mut accepted = ids(&a);
    admission.enqueue(a).unwrap();
    // 30 used, 70 given back: 170 fit now, one more does not.
    let b = request(170);
    accepted.extend(ids(&b));
    sink.try_enqueue(b).unwrap();
    assert!(sink.try_enqueue(request(1)).is_err());
    store.down.store(false, Ordering::SeqCst);
    let report = sink.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed, "{report:?}");
    assert_stored_exactly_once(&store.events(), &accepted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_admission_gives_its_reservation_back() {
    let store = FaultStore::new();
    store.down.store(true, Ordering::SeqCst);
    let sink = Sink::start(
        SinkConfig {
            queue_capacity: 100,
            admission_wait: Duration::ZERO,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let reservation = sink.admit(100).await.unwrap();
    assert!(
        sink.try_enqueue(request(1)).is_err(),
        "the capacity is reserved"
    );
    assert!(sink.admit(100).await.is_err());
    drop(reservation);
    sink.try_enqueue(request(100)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_refuses_an_admission_after_the_wait() {
    let store = FaultStore::new();
    let wait = Duration::from_millis(300);
    let (sink, _) = full_sink(&store, wait).await;
    assert!(eventually(Duration::from_secs(5), || !sink.stats().store_healthy).await);
    let before = sink.stats();
    let started = Instant::now();
    let refused = sink.admit(100).await.err();
    let waited = started.elapsed();
    assert_eq!(
        refused,
        Some(Overloaded {
            retry_after_secs: RETRY_AFTER_MAX_SECS
        }),
        "store down: the longest Retry-After"
    );
    assert!(waited >= wait, "refused after {waited:?}");
    assert!(waited < wait * 4, "refused only after {waited:?}");
    let after = sink.stats();
    assert_eq!(after.requests_refused, before.requests_refused + 1);
    assert_eq!(
        after.events_refused, before.events_refused,
        "no event was read"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_wait_an_admission_reserves_what_is_free_and_a_request_that_fits_is_taken() {
    let store = FaultStore::new();
    store.down.store(true, Ordering::SeqCst);
    let sink = Sink::start(
        SinkConfig {
            queue_capacity: 200,
            admission_wait: Duration::from_millis(100),
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let first = request(150);
    let mut accepted = ids(&first);
    sink.try_enqueue(first).unwrap();
    // 50 free: no capacity for a full request (100) in time, but 40 events fit.
    let fits = request(40);
    accepted.extend(ids(&fits));
    sink.admit(100).await.unwrap().enqueue(fits).unwrap();
    // 10 free: 20 events do not fit, so the request is refused whole (after parsing).
    let before = sink.stats();
    assert!(sink.admit(100).await.unwrap().enqueue(request(20)).is_err());
    let after = sink.stats();
    assert_eq!(after.events_refused, before.events_refused + 20);
    // The refused request gave its reservation back: exactly 10 still fit.
    let last = request(10);
    accepted.extend(ids(&last));
    sink.try_enqueue(last).unwrap();
    assert!(
        sink.admit(100).await.is_err(),
        "nothing free: refused unread"
    );
    store.down.store(false, Ordering::SeqCst);
    let report = sink.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed, "{report:?}");
    assert_stored_exactly_once(&store.events(), &accepted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_wait_refuses_at_once() {
    let store = FaultStore::new();
    let (sink, _) = full_sink(&store, Duration::ZERO).await;
    let started = Instant::now();
    assert!(sink.admit(1).await.is_err());
    assert!(started.elapsed() < Duration::from_millis(100));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_admission_gets_the_capacity_the_writers_free() {
    let store = FaultStore::new();
    let (sink, mut accepted) = full_sink(&store, Duration::from_secs(20)).await;
    let waiter = {
        let sink = sink.clone();
        tokio::spawn(async move {
            let admission = sink.admit(100).await?;
            let events = request(100);
            let ids = ids(&events);
            admission.enqueue(events).map(|_receipt| ids)
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiter.is_finished(),
        "no free capacity yet: the request waits"
    );
    store.down.store(false, Ordering::SeqCst);
    let admitted = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("admitted once the writers stored a batch")
        .unwrap()
        .expect("admitted, not refused");
    accepted.extend(admitted);
    let report = sink.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed, "{report:?}");
    assert_stored_exactly_once(&store.events(), &accepted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_admissions_are_served_in_arrival_order() {
    let store = FaultStore::new();
    let (sink, _) = full_sink(&store, Duration::from_secs(20)).await;
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for n in 0..3 {
        let (sink, order) = (sink.clone(), order.clone());
        waiters.push(tokio::spawn(async move {
            let admission = sink.admit(100).await.unwrap();
            order.lock().unwrap().push(n);
            admission.enqueue(request(100)).unwrap();
        }));
        // Each waiter is queued before the next one arrives.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // One writer storing a batch of 100 every 150 ms frees capacity for one waiter at a time, so
    // each admitted task records itself long before the next is admitted.
    store.delay_ms.store(150, Ordering::SeqCst);
    store.down.store(false, Ordering::SeqCst);
    for w in waiters {
        tokio::time::timeout(Duration::from_secs(10), w)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_refuses_waiting_admissions_at_once() {
    let store = FaultStore::new();
    let (sink, _) = full_sink(&store, Duration::from_secs(30)).await;
    let waiter = {
        let sink = sink.clone();
        tokio::spawn(async move { sink.admit(100).await.map(|_| ()) })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let shutdown = {
        let sink = sink.clone();
        tokio::spawn(async move { sink.shutdown(Duration::from_millis(200)).await })
    };
    let refused = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("refused well before its 30 s wait")
        .unwrap();
    assert_eq!(
        refused,
        Err(Overloaded {
            retry_after_secs: 1
        })
    );
    let _ = shutdown.await;
    // And a new admission after shutdown began is refused too.
    assert!(sink.admit(1).await.is_err());
}
