//! Acknowledgements (D15): with `ack = "stored"` a request's receipt resolves once the batch
//! holding its last event committed, requests share writes, and a store that does not answer
//! in time gets the request a 503 while its events stay queued.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use flowgate_analytics::{AckMode, Sink, SinkConfig};
use flowgate_domain::ids::EventId;
use flowgate_domain::ports::{EventSink, Receipt};

use crate::support::*;

const LONG: Duration = Duration::from_secs(60);

/// Admits and enqueues `events` as the events endpoint does, returning the receipt.
async fn send(sink: &Sink, events: Vec<flowgate_domain::events::AnalyticsEvent>) -> Receipt {
    let admission = sink.admit(events.len()).await.expect("admitted");
    admission.enqueue(events).expect("enqueued")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_resolves_once_its_events_are_stored() {
    let store = FaultStore::new();
    store.delay_ms.store(300, Ordering::SeqCst);
    let sink = Sink::start(config(), store.clone(), store.clone()).unwrap();
    let events = request(20);
    let accepted = ids(&events);
    let receipt = tokio::spawn(send_owned(sink.clone(), events));
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!receipt.is_finished(), "the write is still running");
    assert!(store.events().is_empty());
    receipt.await.unwrap().expect("stored in time");
    // Resolved after the commit, not before.
    assert_stored_exactly_once(&store.events(), &accepted);
    let stats = sink.stats();
    assert_eq!(stats.ack_wait.count(), 1);
    assert!(stats.ack_wait.sum() >= 0.25, "{:?}", stats.ack_wait);
    sink.shutdown(Duration::from_secs(5)).await;
}

async fn send_owned(
    sink: Sink,
    events: Vec<flowgate_domain::events::AnalyticsEvent>,
) -> Result<(), flowgate_domain::ports::Overloaded> {
    send(&sink, events).await.await
}

/// An idle writer writes a waiting request at once: it does not wait for `write_threshold`
/// events or for the flush interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_waiting_request_is_written_without_waiting_for_the_interval() {
    let store = FaultStore::new();
    let sink = Sink::start(
        SinkConfig {
            flush_interval: LONG,
            write_threshold: 100,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(2), send(&sink, request(1)).await)
        .await
        .expect("written without waiting for the 60 s interval")
        .expect("stored");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(store.batches(), vec![1]);
    sink.shutdown(Duration::from_secs(5)).await;
}

/// Group commit: requests that arrive while a write runs share the next write, instead of a
/// write (a transaction) each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_requests_share_writes() {
    let store = FaultStore::new();
    store.delay_ms.store(200, Ordering::SeqCst);
    // No flush timer: only the acknowledgement rule starts partial writes.
    let sink = Sink::start(
        SinkConfig {
            flush_interval: LONG,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let mut accepted = Vec::new();
    let mut receipts = Vec::new();
    for _ in 0..30 {
        let events = request(3);
        accepted.extend(ids(&events));
        receipts.push(tokio::spawn(send_owned(sink.clone(), events)));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for receipt in receipts {
        receipt.await.unwrap().expect("stored");
    }
    assert_stored_exactly_once(&store.events(), &accepted);
    let batches = store.batches();
    assert!(
        batches.len() <= 4,
        "30 requests in about 300 ms, one write of 200 ms at a time: {batches:?}"
    );
    sink.shutdown(Duration::from_secs(5)).await;
}

/// A request larger than a batch is released by the last of its batches, not the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_split_across_batches_waits_for_all_of_them() {
    let store = FaultStore::new();
    store.delay_ms.store(100, Ordering::SeqCst);
    let sink = Sink::start(
        SinkConfig {
            batch_size: 10,
            writers: 1,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let events = request(25);
    let accepted = ids(&events);
    send(&sink, events).await.await.expect("stored");
    assert_eq!(store.batches(), vec![10, 10, 5]);
    assert_stored_exactly_once(&store.events(), &accepted);
    sink.shutdown(Duration::from_secs(5)).await;
}

/// D15: past `ack_timeout` the request gets `Overloaded` (503) and its events stay queued;
/// they are stored once the store is back, and the SDK's retry of the same events is then
/// acknowledged and stored once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_not_stored_in_time_is_refused_and_its_retry_is_stored_once() {
    let store = FaultStore::new();
    store.down.store(true, Ordering::SeqCst);
    let sink = Sink::start(
        SinkConfig {
            ack_timeout: Duration::from_millis(300),
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let events = request(10);
    let accepted = ids(&events);
    let started = Instant::now();
    let refused = send(&sink, events.clone()).await.await.unwrap_err();
    let waited = started.elapsed();
    assert!(
        (Duration::from_millis(300)..Duration::from_millis(1500)).contains(&waited),
        "{waited:?}"
    );
    assert!(refused.retry_after_secs >= 1);
    assert_eq!(sink.stats().acks_timed_out, 1);
    assert!(store.events().is_empty());
    // The store returns; the SDK sends the same request again.
    store.down.store(false, Ordering::SeqCst);
    send(&sink, events)
        .await
        .await
        .expect("the retry is stored");
    let report = sink.shutdown(Duration::from_secs(5)).await;
    assert!(report.completed);
    assert_stored_exactly_once(&store.events(), &accepted);
}

/// A request whose event the store refused for good is acknowledged: the event is durable, as
/// a dead letter (D17), and the rest of the request is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_lettered_event_is_acknowledged() {
    let store = FaultStore::new();
    store.poison("user-2");
    let sink = Sink::start(config(), store.clone(), store.clone()).unwrap();
    let events = request(5);
    let bad = events[2].event_id;
    send(&sink, events.clone())
        .await
        .await
        .expect("acknowledged");
    let stored: Vec<EventId> = ids(&store.events());
    assert_eq!(stored.len(), 4);
    assert!(!stored.contains(&bad));
    assert_eq!(store.dead_letters()[0].event_id, Some(bad));
    sink.shutdown(Duration::from_secs(5)).await;
}

/// `ack = "buffered"`: the receipt is ready as soon as the events are queued, even with the
/// store down (what a hard kill then loses is bounded by the queue).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffered_receipts_are_ready_at_once() {
    let store = FaultStore::new();
    store.down.store(true, Ordering::SeqCst);
    let sink = Sink::start(
        SinkConfig {
            ack: AckMode::Buffered,
            ..config()
        },
        store.clone(),
        store.clone(),
    )
    .unwrap();
    let events = request(10);
    let accepted = ids(&events);
    tokio::time::timeout(Duration::from_millis(100), send(&sink, events).await)
        .await
        .expect("ready at once")
        .expect("accepted");
    assert!(store.events().is_empty(), "nothing is stored yet");
    store.down.store(false, Ordering::SeqCst);
    let report = sink.shutdown(Duration::from_secs(5)).await;
    assert!(report.completed);
    assert_stored_exactly_once(&store.events(), &accepted);
    assert_eq!(sink.stats().ack_wait.count(), 0);
}

/// Server events (`try_enqueue`) never wait, in either mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_events_do_not_wait() {
    let store = FaultStore::new();
    store.down.store(true, Ordering::SeqCst);
    let sink = Sink::start(config(), store.clone(), store.clone()).unwrap();
    let started = Instant::now();
    sink.try_enqueue(vec![no_flow_event()]).unwrap();
    assert!(started.elapsed() < Duration::from_millis(100));
    store.down.store(false, Ordering::SeqCst);
    assert!(sink.shutdown(Duration::from_secs(5)).await.completed);
    assert_eq!(store.events().len(), 1);
}
