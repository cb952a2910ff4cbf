//! Which message shape to publish events in (D16): one message per event with its
//! `Nats-Msg-Id`, or one message per request (up to 100 events, the shape `codec` uses).
//!
//! `cargo bench -p flowgate-jetstream --bench shapes` starts a `nats-server` of its own (file
//! storage, one replica, on a free port), and publishes the same 100,000 events in each shape,
//! alternating the shapes over three rounds with a fresh stream each time, with up to 1,000
//! acknowledgements in flight. It prints events acknowledged per second; the figures are in
//! docs/benchmarks.md.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{self, StorageType};
use flowgate_domain::events::{AnalyticsEvent, EventSource, EventType};
use flowgate_domain::ids::{AppId, EventId, FlowId, FlowVersionId};
use flowgate_domain::Platform;
use flowgate_jetstream::codec;
use flowgate_testkit::NatsServer;

const EVENTS: usize = 100_000;
const IN_FLIGHT: usize = 1_000;

fn event(n: usize) -> AnalyticsEvent {
    let mut payload = serde_json::Map::new();
    payload.insert("screen_index".to_owned(), serde_json::json!(n % 12));
    payload.insert("screen_id".to_owned(), serde_json::json!("paywall-1"));
    AnalyticsEvent::new(
        EventId::from_uuid(uuid::Uuid::new_v4()),
        EventSource::Sdk,
        EventType::ScreenView,
        AppId::from_uuid(uuid::Uuid::new_v4()),
        format!("user-{n}"),
        format!("session-{}", n / 10),
        Platform::Ios,
        time::OffsetDateTime::now_utc(),
    )
    .with_flow_id(Some(FlowId::from_uuid(uuid::Uuid::new_v4())))
    .with_flow_version_id(Some(FlowVersionId::from_uuid(uuid::Uuid::new_v4())))
    .with_placement_key(Some("onboarding".to_owned()))
    .with_sdk_version(Some("3.1.0".to_owned()))
    .with_payload(payload)
}

/// Publishes every message, keeping at most `IN_FLIGHT` acknowledgements pending.
async fn publish_all(js: &async_nats::jetstream::Context, messages: Vec<PublishMessage>) {
    let mut pending: VecDeque<PublishAckFuture> = VecDeque::with_capacity(IN_FLIGHT);
    for message in messages {
        if pending.len() == IN_FLIGHT {
            pending.pop_front().unwrap().await.unwrap();
        }
        pending.push_back(js.send_publish("bench.events", message).await.unwrap());
    }
    for ack in pending {
        ack.await.unwrap();
    }
}

/// One message per event, `Nats-Msg-Id` = the event id; encoding included.
async fn per_event(js: &async_nats::jetstream::Context, events: &[AnalyticsEvent]) -> Duration {
    let started = Instant::now();
    let messages = events
        .iter()
        .map(|e| {
            PublishMessage::build()
                .payload(serde_json::to_vec(e).unwrap().into())
                .header(codec::FORMAT_HEADER, "flowgate.event.v1+json")
                .message_id(e.event_id.to_string())
        })
        .collect();
    publish_all(js, messages).await;
    started.elapsed()
}

/// One message per 100 events (`codec::encode`); encoding included.
async fn per_request(js: &async_nats::jetstream::Context, events: &[AnalyticsEvent]) -> Duration {
    let started = Instant::now();
    let messages = codec::encode(events, 1 << 20)
        .unwrap()
        .into_iter()
        .map(|m| {
            PublishMessage::build()
                .payload(m.payload.clone())
                .headers(m.headers())
                .message_id(&m.id)
        })
        .collect();
    publish_all(js, messages).await;
    started.elapsed()
}

async fn fresh_stream(js: &async_nats::jetstream::Context) {
    let _ = js.delete_stream("BENCH").await;
    js.create_stream(stream::Config {
        name: "BENCH".to_owned(),
        subjects: vec!["bench.events".to_owned()],
        storage: StorageType::File,
        duplicate_window: Duration::from_secs(120),
        ..stream::Config::default()
    })
    .await
    .unwrap();
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = NatsServer::start();
    runtime.block_on(async {
        let client = async_nats::connect(server.url()).await.unwrap();
        let js = async_nats::jetstream::ContextBuilder::new()
            .max_ack_inflight(IN_FLIGHT * 2)
            .build(client);
        let events: Vec<AnalyticsEvent> = (0..EVENTS).map(event).collect();
        let mut rows = Vec::new();
        for round in 1..=3 {
            fresh_stream(&js).await;
            let event_time = per_event(&js, &events).await;
            fresh_stream(&js).await;
            let request_time = per_request(&js, &events).await;
            let rate = |d: Duration| EVENTS as f64 / d.as_secs_f64();
            println!(
                "round {round}: one message per event {:>9.0} events/s, one per request (100 events) {:>9.0} events/s: {:.1}x",
                rate(event_time),
                rate(request_time),
                rate(request_time) / rate(event_time)
            );
            rows.push((rate(event_time), rate(request_time)));
        }
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let per_event = median(rows.iter().map(|r| r.0).collect());
        let per_request = median(rows.iter().map(|r| r.1).collect());
        println!(
            "median: per event {per_event:.0} events/s, per request {per_request:.0} events/s ({:.1}x)",
            per_request / per_event
        );
    });
}
