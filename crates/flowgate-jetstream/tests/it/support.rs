//! Events, a store with faults, and a bus on a server of the test's own.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flowgate_domain::events::{AnalyticsEvent, EventSource, EventType};
use flowgate_domain::ids::{AppId, DeadLetterId, EventId, FlowId, FlowVersionId};
use flowgate_domain::memory::InMemoryStore;
use flowgate_domain::ports::{
    AppendOutcome, BoxFuture, DeadLetter, DeadLetterStore, EventStore, Outage, StoreError,
};
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

/// The in-memory store, with: events of poisoned users refused for good, every event write
/// failing transiently while `down`, dead letter writes failing while `letters_down`.
#[derive(Default)]
pub struct TestStore {
    pub inner: InMemoryStore,
    pub poisoned: Mutex<HashSet<String>>,
    pub down: AtomicBool,
    pub letters_down: AtomicBool,
}

impl TestStore {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn ids(&self) -> Vec<EventId> {
        self.inner.events().iter().map(|e| e.event_id).collect()
    }

    pub async fn letters(&self) -> Vec<DeadLetter> {
        self.inner.list_dead_letters(None, 10_000).await.unwrap()
    }
}

impl EventStore for TestStore {
    fn append_events<'a>(
        &'a self,
        events: &'a [AnalyticsEvent],
    ) -> BoxFuture<'a, Result<AppendOutcome, StoreError>> {
        if self.down.load(Ordering::SeqCst) {
            return Box::pin(std::future::ready(Err(StoreError::Unavailable {
                reason: Outage::Connection,
                detail: "injected outage".to_owned(),
            })));
        }
        let poisoned = self.poisoned.lock().unwrap();
        if let Some(bad) = events.iter().find(|e| poisoned.contains(&e.user_id)) {
            return Box::pin(std::future::ready(Err(StoreError::Conflict {
                detail: format!("check constraint refuses {}", bad.user_id),
            })));
        }
        self.inner.append_events(events)
    }
}

impl DeadLetterStore for TestStore {
    fn add_dead_letters<'a>(
        &'a self,
        letters: &'a [DeadLetter],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        if self.letters_down.load(Ordering::SeqCst) {
            return Box::pin(std::future::ready(Err(StoreError::Unavailable {
                reason: Outage::Connection,
                detail: "injected outage".to_owned(),
            })));
        }
        self.inner.add_dead_letters(letters)
    }
    fn list_dead_letters(
        &self,
        after: Option<DeadLetterId>,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<DeadLetter>, StoreError>> {
        self.inner.list_dead_letters(after, limit)
    }
    fn record_dead_letter_attempt<'a>(
        &'a self,
        id: DeadLetterId,
        error: &'a str,
        at: time::OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.record_dead_letter_attempt(id, error, at)
    }
    fn remove_dead_letter(&self, id: DeadLetterId) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.inner.remove_dead_letter(id)
    }
    fn count_dead_letters(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.inner.count_dead_letters()
    }
}

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
