//! Events, a fault-injecting store, a PostgreSQL database per test and a TCP proxy.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use diesel::sql_types::Text;
use diesel::QueryableByName;
use diesel_async::{AsyncConnection, AsyncPgConnection};
use flowgate_analytics::{AckMode, SinkConfig};
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ids::EventId;
use flowgate_store::StoreOptions;
use time::OffsetDateTime;

/// An SDK event with a fresh id, now: the test event of every crate with this sink's needs
/// (ids never seen before, a time inside the accepted window).
pub fn sdk_event(n: usize) -> AnalyticsEvent {
    let mut event = AnalyticsEvent::sample(u32::try_from(n).expect("a small n"));
    event.event_id = EventId::from_uuid(uuid::Uuid::new_v4());
    event.occurred_at = OffsetDateTime::now_utc();
    event
}

/// `n` SDK events: one request.
pub fn request(n: usize) -> Vec<AnalyticsEvent> {
    (0..n).map(sdk_event).collect()
}

/// A server `resolve_no_flow` event (D8) with a fresh id, now.
pub fn no_flow_event() -> AnalyticsEvent {
    let at = OffsetDateTime::now_utc();
    let mut event = AnalyticsEvent::sample_no_flow();
    event.event_id = EventId::new_v7(at);
    event.occurred_at = at;
    event
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

/// The event and dead-letter store with faults a test switches (one definition for every
/// crate's tests).
pub use flowgate_contract_tests::fixtures::FaultStore;

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
