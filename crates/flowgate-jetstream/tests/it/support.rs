//! Events, a store with faults, and a bus on a server of the test's own.

use std::time::{Duration, Instant};

use flowgate_domain::events::{AnalyticsEvent, EventSource, EventType};
use flowgate_domain::ids::{AppId, EventId, FlowId, FlowVersionId};
use flowgate_domain::Platform;
use flowgate_jetstream::{Bus, JetStreamConfig};
use flowgate_testkit::NatsServer;

pub fn event(n: usize) -> AnalyticsEvent {
    let mut payload = serde_json::Map::new();
    payload.insert("screen_index".to_owned(), serde_json::json!(n));
    AnalyticsEvent::new(
        EventId::from_uuid(uuid::Uuid::new_v4()),
        EventSource::Sdk,
        EventType::ScreenView,
        AppId::from_uuid(uuid::Uuid::from_u128(1)),
        format!("user-{n}"),
        "session",
        Platform::Web,
        time::OffsetDateTime::now_utc(),
    )
    .with_flow_id(Some(FlowId::from_uuid(uuid::Uuid::from_u128(2))))
    .with_flow_version_id(Some(FlowVersionId::from_uuid(uuid::Uuid::from_u128(3))))
    .with_placement_key(Some("onboarding".to_owned()))
    .with_sdk_version(Some("1.0.0".to_owned()))
    .with_payload(payload)
}

pub fn events(n: usize) -> Vec<AnalyticsEvent> {
    (0..n).map(event).collect()
}

/// A configuration for `url` with short waits, and a stream name of its own.
pub fn config(url: &str) -> JetStreamConfig {
    JetStreamConfig {
        url: url.to_owned(),
        ack_wait_ms: 2_000,
        connect_timeout_ms: 2_000,
        max_deliveries: 3,
        ..JetStreamConfig::default()
    }
}

/// A server with the stream and consumer created.
pub async fn ready_bus() -> (NatsServer, Bus) {
    let server = NatsServer::start();
    let bus = Bus::connect(&config(&server.url()), "test").await.unwrap();
    bus.ensure().await.unwrap();
    (server, bus)
}

/// The event and dead-letter store with faults a test switches (one definition for every
/// crate's tests).
pub use flowgate_contract_tests::fixtures::FaultStore;

/// Waits until `check` holds, up to `limit`.
pub async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}
