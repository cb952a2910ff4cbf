//! Rough cost of `try_enqueue` (no criterion: one number per case is enough here).
//!
//! `cargo bench -p flowgate-analytics --bench enqueue`. A store that accepts instantly sits
//! behind the sink, so the writers compete for the queue lock as in production.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowgate_analytics::{Sink, SinkConfig};
use flowgate_domain::events::{AnalyticsEvent, EventSource, EventType};
use flowgate_domain::ids::{AppId, EventId, FlowId, FlowVersionId};
use flowgate_domain::memory::InMemoryStore;
use flowgate_domain::ports::{AppendOutcome, BoxFuture, EventSink, EventStore, StoreError};
use flowgate_domain::Platform;

struct NullStore;

impl EventStore for NullStore {
    fn append_events<'a>(
        &'a self,
        events: &'a [AnalyticsEvent],
    ) -> BoxFuture<'a, Result<AppendOutcome, StoreError>> {
        Box::pin(std::future::ready(Ok(AppendOutcome {
            inserted: events.len(),
            duplicates: 0,
        })))
    }
}

fn event(n: u64) -> AnalyticsEvent {
    let mut payload = serde_json::Map::new();
    payload.insert("screen_index".to_owned(), serde_json::json!(n));
    AnalyticsEvent::new(
        EventId::from_uuid(uuid::Uuid::new_v4()),
        EventSource::Sdk,
        EventType::ScreenView,
        AppId::from_uuid(uuid::Uuid::new_v4()),
        format!("user-{n}"),
        "session-1",
        Platform::Ios,
        time::OffsetDateTime::now_utc(),
    )
    .with_flow_id(Some(FlowId::from_uuid(uuid::Uuid::new_v4())))
    .with_flow_version_id(Some(FlowVersionId::from_uuid(uuid::Uuid::new_v4())))
    .with_placement_key(Some("onboarding".to_owned()))
    .with_sdk_version(Some("1.2.3".to_owned()))
    .with_payload(payload)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "size_of::<AnalyticsEvent>() = {} bytes",
        std::mem::size_of::<AnalyticsEvent>()
    );
    for per_request in [1usize, 100] {
        let requests = 200_000 / per_request;
        // Build the events first: the measurement is the enqueue, not the allocation.
        let batches: Vec<Vec<AnalyticsEvent>> = (0..requests)
            .map(|r| {
                (0..per_request)
                    .map(|i| event((r * per_request + i) as u64))
                    .collect()
            })
            .collect();
        let sink = runtime.block_on(async {
            Sink::start(
                SinkConfig {
                    queue_capacity: 1_000_000,
                    ..SinkConfig::default()
                },
                Arc::new(NullStore),
                Arc::new(InMemoryStore::new()),
            )
            .unwrap()
        });
        let started = Instant::now();
        for batch in batches {
            sink.try_enqueue(batch).unwrap();
        }
        let elapsed = started.elapsed();
        let report = runtime.block_on(sink.shutdown(Duration::from_secs(30)));
        assert!(report.completed);
        println!(
            "try_enqueue, {per_request:>3} events per request: {:>7.0} ns per request, {:>5.0} ns per event ({} requests)",
            elapsed.as_nanos() as f64 / requests as f64,
            elapsed.as_nanos() as f64 / (requests * per_request) as f64,
            requests
        );
    }
}
