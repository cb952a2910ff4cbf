//! Events, a fault-injecting store, a PostgreSQL database per test and a TCP proxy.

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use diesel::sql_types::Text;
use diesel::QueryableByName;
use diesel_async::{AsyncConnection, AsyncPgConnection};
use flowgate_analytics::{AckMode, SinkConfig};
use flowgate_domain::events::{AnalyticsEvent, EventSource, EventType, NoFlowReason};
use flowgate_domain::ids::DeadLetterId;
use flowgate_domain::ids::{AppId, EventId, FlowId, FlowVersionId};
use flowgate_domain::memory::InMemoryStore;
use flowgate_domain::ports::{
    AppendOutcome, BoxFuture, DeadLetter, DeadLetterStore, EventStore, Outage, StoreError,
};
use flowgate_domain::Platform;
use flowgate_store::StoreOptions;
use time::OffsetDateTime;

pub const APP: &str = "20000000-0000-4000-8000-000000000001";

/// An SDK event with a fresh id.
pub fn sdk_event(n: usize) -> AnalyticsEvent {
    let mut payload = serde_json::Map::new();
    payload.insert("screen_index".to_owned(), serde_json::json!(n));
    AnalyticsEvent::new(
        EventId::from_uuid(uuid::Uuid::new_v4()),
        EventSource::Sdk,
        EventType::ScreenView,
        APP.parse::<AppId>().unwrap(),
        format!("user-{n}"),
        "session-1",
        Platform::Ios,
        OffsetDateTime::now_utc(),
    )
    .with_flow_id(Some(FlowId::from_uuid(uuid::Uuid::new_v4())))
    .with_flow_version_id(Some(FlowVersionId::from_uuid(uuid::Uuid::new_v4())))
    .with_placement_key(Some("onboarding".to_owned()))
    .with_sdk_version(Some("1.2.3".to_owned()))
    .with_payload(payload)
}

/// `n` SDK events: one request.
pub fn request(n: usize) -> Vec<AnalyticsEvent> {
    (0..n).map(sdk_event).collect()
}

/// A server `resolve_no_flow` event (D8).
pub fn no_flow_event() -> AnalyticsEvent {
    let at = OffsetDateTime::now_utc();
    AnalyticsEvent::new(
        EventId::new_v7(at),
        EventSource::Server,
        EventType::ResolveNoFlow,
        APP.parse::<AppId>().unwrap(),
        "user-s",
        "session-s",
        Platform::Web,
        at,
    )
    .with_placement_key(Some("missing".to_owned()))
    .with_reason(Some(NoFlowReason::UnknownPlacement))
}

pub fn ids(events: &[AnalyticsEvent]) -> Vec<EventId> {
    events.iter().map(|e| e.event_id).collect()
}

/// Small, fast settings for tests.
pub fn config() -> SinkConfig {
    SinkConfig {
        ack: AckMode::Stored,
        ack_timeout: Duration::from_secs(5),
        queue_capacity: 1_000,
        batch_size: 100,
        write_threshold: 100,
        flush_interval: Duration::from_millis(20),
        drain_deadline: Duration::from_secs(10),
        writers: 2,
        record_resolve_no_flow: true,
        write_timeout: Duration::from_secs(5),
        admission_wait: Duration::from_millis(250),
        backoff: flowgate_analytics::Backoff {
            base: Duration::from_millis(20),
            max: Duration::from_millis(200),
        },
    }
}

/// Waits until `check` holds, up to `limit`.
pub async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    check()
}

/// Asserts that the store holds exactly `accepted`, each once.
pub fn assert_stored_exactly_once(store: &[AnalyticsEvent], accepted: &[EventId]) {
    let stored: Vec<EventId> = ids(store);
    let distinct: HashSet<EventId> = stored.iter().copied().collect();
    assert_eq!(stored.len(), distinct.len(), "an event was stored twice");
    let expected: HashSet<EventId> = accepted.iter().copied().collect();
    assert_eq!(expected.len(), accepted.len(), "test bug: repeated ids");
    assert_eq!(
        distinct, expected,
        "stored events differ from the accepted ones"
    );
}

/// An [`EventStore`] wrapper around [`InMemoryStore`] that fails on command.
#[derive(Default)]
pub struct FaultStore {
    pub inner: InMemoryStore,
    /// Fail this many more attempts.
    pub fail_next: AtomicU32,
    /// Fail every attempt while set.
    pub down: AtomicBool,
    /// Failures are non-transient (`StoreError::Other`) instead of `Unavailable`.
    pub non_transient: AtomicBool,
    /// Any batch holding an event of one of these users is refused for good, whole
    /// (`StoreError::Conflict`, as a check constraint would).
    pub poisoned: Mutex<HashSet<String>>,
    /// Dead letters cannot be written while set (`StoreError::Unavailable`).
    pub dead_letters_down: AtomicBool,
    /// Failures are ambiguous: the batch is stored, then the error is returned (a lost
    /// commit acknowledgement).
    pub ambiguous: AtomicBool,
    /// Each attempt first sleeps this long (milliseconds).
    pub delay_ms: AtomicU64,
    pub attempts: AtomicU64,
    pub attempt_times: Mutex<Vec<Instant>>,
    /// Sizes of the batches stored successfully, in order.
    pub batches: Mutex<Vec<usize>>,
}

impl FaultStore {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn events(&self) -> Vec<AnalyticsEvent> {
        self.inner.events()
    }

    pub fn batches(&self) -> Vec<usize> {
        self.batches.lock().unwrap().clone()
    }

    fn should_fail(&self) -> bool {
        if self.down.load(Ordering::SeqCst) {
            return true;
        }
        self.fail_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

impl EventStore for FaultStore {
    fn append_events<'a>(
        &'a self,
        events: &'a [AnalyticsEvent],
    ) -> BoxFuture<'a, Result<AppendOutcome, StoreError>> {
        Box::pin(async move {
            self.attempts.fetch_add(1, Ordering::SeqCst);
            self.attempt_times.lock().unwrap().push(Instant::now());
            let delay = self.delay_ms.load(Ordering::SeqCst);
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            if self.should_fail() {
                if self.ambiguous.load(Ordering::SeqCst) {
                    self.inner.append_events(events).await?;
                }
                return Err(if self.non_transient.load(Ordering::SeqCst) {
                    StoreError::Other {
                        detail: "injected non-transient failure".to_owned(),
                    }
                } else {
                    StoreError::Unavailable {
                        reason: Outage::Connection,
                        detail: "injected outage".to_owned(),
                    }
                });
            }
            let poisoned = {
                let poisoned = self.poisoned.lock().unwrap();
                events
                    .iter()
                    .find(|e| poisoned.contains(&e.user_id))
                    .map(|e| e.user_id.clone())
            };
            if let Some(user) = poisoned {
                return Err(StoreError::Conflict {
                    detail: format!("check constraint refuses user {user}"),
                });
            }
            let outcome = self.inner.append_events(events).await?;
            self.batches.lock().unwrap().push(events.len());
            Ok(outcome)
        })
    }
}

impl FaultStore {
    /// Refuse every batch holding an event of `user` for good.
    pub fn poison(&self, user: &str) {
        self.poisoned.lock().unwrap().insert(user.to_owned());
    }

    pub fn dead_letters(&self) -> Vec<DeadLetter> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        // The in-memory store answers at once.
        match std::pin::pin!(self.inner.list_dead_letters(None, usize::MAX)).poll(&mut cx) {
            std::task::Poll::Ready(letters) => letters.unwrap(),
            std::task::Poll::Pending => unreachable!("the in-memory store never waits"),
        }
    }
}

impl DeadLetterStore for FaultStore {
    fn add_dead_letters<'a>(
        &'a self,
        letters: &'a [DeadLetter],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        if self.dead_letters_down.load(Ordering::SeqCst) {
            return Box::pin(std::future::ready(Err(StoreError::Unavailable {
                reason: Outage::Connection,
                detail: "dead letters unreachable".to_owned(),
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

// ---------------------------------------------------------------------------------------------
// PostgreSQL: a database per test and a cuttable TCP proxy come from flowgate-testkit.

pub use flowgate_testkit::{Proxy, TestDb};

/// Short timeouts for stores behind the proxy: a cut fails fast and is retried.
pub fn test_options() -> StoreOptions {
    StoreOptions {
        max_connections: Some(4),
        copy_connections: 4,
        connect_timeout: Duration::from_secs(2),
        acquire_timeout: Duration::from_secs(2),
        sqlite_busy_timeout: Duration::from_secs(5),
        poll_interval: Duration::from_millis(50),
        ..StoreOptions::default()
    }
}

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = Text)]
    id: String,
}

/// Every stored `event_id` of a PostgreSQL test database, one entry per row.
pub async fn event_ids(db: &TestDb) -> Vec<EventId> {
    use diesel_async::RunQueryDsl;
    let mut conn = AsyncPgConnection::establish(&db.url)
        .await
        .expect("connect");
    let rows: Vec<IdRow> = diesel::sql_query("SELECT event_id::text AS id FROM analytics_events")
        .load(&mut conn)
        .await
        .expect("select ids");
    rows.iter()
        .map(|r| EventId::from_uuid(r.id.parse().expect("uuid")))
        .collect()
}
