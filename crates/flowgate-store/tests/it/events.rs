//! `EventStore` beyond its contract suite (`flowgate_contract_tests::event_store`, run on both
//! backends): what the rows hold, the COPY path and its retries, the per-app key migration.

use std::time::{Duration, Instant};

use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ports::{AppendOutcome, EventStore, Outage, StoreError};
use flowgate_store::Backend;

use crate::support::{TestDb, APP1};

backend_tests! {
    async fn the_first_of_repeated_ids_is_the_one_kept(db) {
        // The contract suite counts what a batch with a repeated id inserts; which of the
        // copies is kept only shows in the rows.
        let a = AnalyticsEvent::sample(1);
        let mut a_again = a.clone();
        a_again.user_id = "someone-else".to_owned();
        let outcome = db.store.append_events(&[a, AnalyticsEvent::sample(2), a_again]).await.expect("append");
        assert_eq!(outcome, AppendOutcome { inserted: 2, duplicates: 1 });
        assert_eq!(
            db.count("SELECT count(*) AS n FROM analytics_events WHERE user_id = 'user-1'").await,
            1
        );
        assert_eq!(
            db.count("SELECT count(*) AS n FROM analytics_events WHERE user_id = 'someone-else'")
                .await,
            0
        );
    }

    async fn a_stored_event_id_sends_the_batch_again_with_on_conflict_only_on_postgres(db) {
        // New events go through the COPY on PostgreSQL: no retry.
        let batch: Vec<_> = (0..5).map(AnalyticsEvent::sample).collect();
        let outcome = db.store.append_events(&batch).await.expect("append");
        assert_eq!(outcome, AppendOutcome { inserted: 5, duplicates: 0 });
        assert_eq!(db.store.event_conflict_retries(), 0);
        // A batch holding one stored event_id: refused by the key, then written with
        // ON CONFLICT; the new events are stored, the stored one is not repeated.
        let mixed: Vec<_> = [batch[4].clone()].into_iter().chain((5..8).map(AnalyticsEvent::sample)).collect();
        let outcome = db.store.append_events(&mixed).await.expect("append mixed");
        assert_eq!(outcome, AppendOutcome { inserted: 3, duplicates: 1 });
        assert_eq!(db.count("SELECT count(*) AS n FROM analytics_events").await, 8);
        let expected = match db.store.backend() {
            Backend::Postgres => 1,
            Backend::Sqlite => 0,
        };
        assert_eq!(db.store.event_conflict_retries(), expected);
    }

    async fn every_column_is_stored_as_sent(db) {
        let sdk = AnalyticsEvent::sample(7);
        let server = AnalyticsEvent::sample_no_flow();
        let outcome = db.store.append_events(&[sdk.clone(), server]).await.expect("append");
        assert_eq!(outcome, AppendOutcome { inserted: 2, duplicates: 0 });
        assert_eq!(
            db.count(
                "SELECT count(*) AS n FROM analytics_events WHERE source = 'sdk' \
                 AND event_type = 'screen_view' AND placement_key = 'onboarding' \
                 AND user_id = 'user-7' AND session_id = 'session-1' \
                 AND device_platform = 'ios' AND sdk_version = '1.2.3' \
                 AND experiment_id IS NULL AND variant_id IS NULL AND reason IS NULL \
                 AND flow_id IS NOT NULL AND flow_version_id IS NOT NULL"
            )
            .await,
            1
        );
        assert_eq!(
            db.count(
                "SELECT count(*) AS n FROM analytics_events WHERE source = 'server' \
                 AND event_type = 'resolve_no_flow' AND reason = 'holdout' \
                 AND device_platform = 'web' AND sdk_version IS NULL \
                 AND flow_id IS NULL AND flow_version_id IS NULL \
                 AND experiment_id = '50000000-0000-4000-8000-000000000001' \
                 AND variant_id = '60000000-0000-4000-8000-000000000004' \
                 AND variant_name = 'control'"
            )
            .await,
            1
        );
        // The payload is the event's object, nested values included; the server event's is {}.
        let payload_matches = match db.store.backend() {
            Backend::Postgres => {
                "SELECT count(*) AS n FROM analytics_events WHERE user_id = 'user-7' AND \
                 payload = '{\"screen_index\": 7, \"properties\": {\"a\": [true, null], \"b\": 1}}'::jsonb"
            }
            Backend::Sqlite => {
                "SELECT count(*) AS n FROM analytics_events WHERE user_id = 'user-7' AND \
                 json(payload) = json('{\"properties\":{\"a\":[true,null],\"b\":1},\"screen_index\":7}')"
            }
        };
        assert_eq!(db.count(payload_matches).await, 1);
        let empty_payload = match db.store.backend() {
            Backend::Postgres => "payload = '{}'::jsonb",
            Backend::Sqlite => "json(payload) = json('{}')",
        };
        assert_eq!(
            db.count(&format!(
                "SELECT count(*) AS n FROM analytics_events WHERE source = 'server' AND {empty_payload}"
            ))
            .await,
            1
        );
    }

    async fn the_per_app_key_migration_keeps_every_row(db) {
        use flowgate_domain::delivery::dead_letter;
        use flowgate_domain::ids::AppId;
        use flowgate_domain::ports::DeadLetterStore;
        // Stored under today's key: 30 events, and a dead letter of an event.
        let batch: Vec<_> = (0..30).map(AnalyticsEvent::sample).collect();
        db.store.append_events(&batch).await.expect("append");
        let refused = StoreError::Conflict { detail: "refused".into() };
        let now = time::OffsetDateTime::now_utc();
        let letter = dead_letter(&batch[0], &refused, now).expect("letter");
        db.store.add_dead_letters(std::slice::from_ref(&letter)).await.expect("letter");
        // Down to ids unique across apps and up again: every row is still there.
        let reverted = flowgate_testkit::revert_through(&db.store, "20261127000000").await;
        assert_eq!(reverted.last().map(String::as_str), Some("20261127000000"));
        assert_eq!(db.count("SELECT count(*) AS n FROM analytics_events").await, 30);
        assert_eq!(db.store.migrate().await.expect("up").len(), reverted.len());
        assert_eq!(db.count("SELECT count(*) AS n FROM analytics_events").await, 30);
        // The letter's app was read from its payload: refused again, it stays one letter.
        let again = dead_letter(&batch[0], &refused, now).expect("letter");
        db.store.add_dead_letters(&[again]).await.expect("letter again");
        let letters = db.store.list_dead_letters(None, 10).await.expect("list");
        assert_eq!(letters.len(), 1);
        assert_eq!((letters[0].attempts, letters[0].app_id), (2, Some(batch[0].app_id)));
        // The same ids in another app are other events now; within an app still idempotent.
        let other: Vec<_> = batch
            .iter()
            .cloned()
            .map(|mut e| {
                e.app_id = AppId::from_uuid(uuid::Uuid::from_u128(0xB));
                e
            })
            .collect();
        let outcome = db.store.append_events(&other).await.expect("append");
        assert_eq!(outcome, AppendOutcome { inserted: 30, duplicates: 0 });
        let outcome = db.store.append_events(&[batch[1].clone(), other[1].clone()]).await.expect("retry");
        assert_eq!(outcome, AppendOutcome { inserted: 0, duplicates: 2 });
        assert_eq!(db.count("SELECT count(*) AS n FROM analytics_events").await, 60);
    }

    async fn ids_text_and_times_are_stored_exactly(db) {
        let mut event = AnalyticsEvent::sample(9);
        event.user_id = "ユーザー-9 \"quoted\" \\ tab\t".to_owned();
        event.occurred_at = time::macros::datetime!(2026-11-23 12:34:56.123_456_789 UTC);
        let id = event.event_id.0;
        let outcome = db.store.append_events(&[event]).await.expect("append");
        assert_eq!(outcome, AppendOutcome { inserted: 1, duplicates: 0 });
        let tab = match db.store.backend() {
            Backend::Postgres => "chr(9)",
            Backend::Sqlite => "char(9)",
        };
        let text = format!(
            "SELECT count(*) AS n FROM analytics_events \
             WHERE user_id = 'ユーザー-9 \"quoted\" \\ tab' || {tab}"
        );
        assert_eq!(db.count(&text).await, 1);
        // The ids as sent; both backends keep microseconds: the nanoseconds are cut, not
        // rounded. SQLite holds a UUID as its 16 bytes and a time as fixed-width UTC text.
        let uuid = |text: &str| match db.store.backend() {
            Backend::Postgres => format!("'{text}'"),
            Backend::Sqlite => format!("X'{}'", text.replace('-', "")),
        };
        let occurred_at = match db.store.backend() {
            Backend::Postgres => "'2026-11-23T12:34:56.123456Z'::timestamptz",
            Backend::Sqlite => "'2026-11-23T12:34:56.123456Z'",
        };
        let exact = format!(
            "SELECT count(*) AS n FROM analytics_events WHERE event_id = {} \
             AND app_id = {} AND flow_id = {} AND flow_version_id = {} \
             AND occurred_at = {occurred_at}",
            uuid(&id.to_string()),
            uuid(&crate::support::APP1.to_string()),
            uuid(&crate::support::FLOW_US.to_string()),
            uuid(&crate::support::V_US_2.to_string()),
        );
        assert_eq!(db.count(&exact).await, 1);
    }
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL's COPY clients: what happens to one when its COPY fails or is given up. SQLite has
// no such client: its insert runs on the blocking pool and completes even when the write is
// given up (the writer's retry then finds it stored, D7 idempotency).

/// A plain connection to the test database, beside the store's: to hold a row lock, or to
/// watch the store's backends.
async fn connection(db: &TestDb) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
}

/// A backend of the test database whose last statement was the store's `COPY`.
#[derive(Debug, PartialEq)]
struct CopyBackend {
    pid: i32,
    state: Option<String>,
    wait_event_type: Option<String>,
}

async fn copy_backends(monitor: &tokio_postgres::Client) -> Vec<CopyBackend> {
    monitor
        .query(
            "SELECT pid, state, wait_event_type FROM pg_stat_activity \
             WHERE datname = current_database() AND query LIKE 'COPY analytics_events%'",
            &[],
        )
        .await
        .expect("pg_stat_activity")
        .iter()
        .map(|row| CopyBackend {
            pid: row.get(0),
            state: row.get(1),
            wait_event_type: row.get(2),
        })
        .collect()
}

/// Polls the `COPY` backends until `done` holds, for at most 5 s.
async fn wait_for(
    monitor: &tokio_postgres::Client,
    what: &str,
    done: impl Fn(&[CopyBackend]) -> bool,
) -> Vec<CopyBackend> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let backends = copy_backends(monitor).await;
        if done(&backends) {
            return backends;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within 5 s ({backends:?})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The one `COPY` client's backend.
async fn the_copy_backend(monitor: &tokio_postgres::Client) -> i32 {
    match &copy_backends(monitor).await[..] {
        [one] => one.pid,
        other => panic!("expected one COPY client: {other:?}"),
    }
}

/// Starts a transaction on `observer` that inserts a row with `event_id` and stays open: a
/// `COPY` of the same `event_id` waits on the primary key until it ends.
async fn hold_event_id(observer: &tokio_postgres::Client, event: &AnalyticsEvent) {
    // The store keeps microseconds, cut (not rounded as PostgreSQL's text input would).
    let at = event.occurred_at;
    let (event_id, occurred_at) = (
        event.event_id.0,
        at.replace_nanosecond(at.nanosecond() / 1_000 * 1_000)
            .unwrap()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap(),
    );
    observer
        .batch_execute(&format!(
            "BEGIN; INSERT INTO analytics_events (event_id, source, event_type, app_id, \
             user_id, session_id, device_platform, occurred_at) VALUES ('{event_id}', 'sdk', \
             'screen_view', '{APP1}', 'observer', 's', 'ios', '{occurred_at}')"
        ))
        .await
        .expect("insert, transaction left open");
}

/// Appends `batch` again after a write of it was refused or given up: every event is stored,
/// none counted as a duplicate (nothing of the earlier write was stored).
async fn stores_every_event_once_more(db: &TestDb, batch: &[AnalyticsEvent]) {
    let outcome = db
        .store
        .append_events(batch)
        .await
        .expect("the batch again");
    assert_eq!(
        outcome,
        AppendOutcome {
            inserted: batch.len(),
            duplicates: 0
        }
    );
}

async fn count_events(db: &TestDb) -> i64 {
    db.count("SELECT count(*) AS n FROM analytics_events").await
}

/// The sink's writer gives a write up after `events.write_timeout` by dropping it. A `COPY`
/// dropped midway is cancelled on the server and stores nothing, and its client leaves the
/// pool, so the next write gets a new client instead of queueing behind the aborted `COPY`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_given_up_midway_stores_nothing_of_it() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let observer = connection(&db).await;
    let monitor = connection(&db).await;
    // A first write makes the pool's client (connected, statement prepared): the write below
    // takes it and starts its COPY at once.
    let warm = db
        .store
        .append_events(&[AnalyticsEvent::sample(0)])
        .await
        .expect("warm-up");
    assert_eq!(warm.inserted, 1);
    let copying = the_copy_backend(&monitor).await;

    // About 700 KB, several CopyData chunks. The COPY stores the rows before the last one, then
    // waits on the primary key for the observer's transaction, which holds the last event_id.
    let batch: Vec<_> = (1..=2_000).map(AnalyticsEvent::sample).collect();
    hold_event_id(&observer, &batch[batch.len() - 1]).await;
    let give_up = tokio::time::timeout(Duration::from_secs(2), db.store.append_events(&batch));
    let blocked = wait_for(&monitor, "the COPY waiting on the observer", |backends| {
        backends.iter().any(|b| {
            b.pid == copying
                && b.state.as_deref() == Some("active")
                && b.wait_event_type.as_deref() == Some("Lock")
        })
    });
    // The COPY cannot end while the observer's transaction is open: seen waiting, it was under
    // way when the timeout dropped the write.
    let (given_up, _) = tokio::join!(give_up, blocked);
    assert!(given_up.is_err(), "the write ended: {given_up:?}");

    // Given up, the COPY is cancelled on the server at once, while the observer's transaction
    // is still open: its backend does not wait for the lock, and its connection closes (the
    // client left the pool). Without the cancel the COPY would wait, then commit the batch.
    wait_for(
        &monitor,
        "the given-up COPY's connection closing",
        |backends| !backends.iter().any(|b| b.pid == copying),
    )
    .await;
    // Writes go on meanwhile, on a new client.
    let during = tokio::time::timeout(
        Duration::from_secs(5),
        db.store.append_events(&[AnalyticsEvent::sample(3_000)]),
    )
    .await
    .expect("a write while the observer holds its row")
    .expect("a write while the observer holds its row");
    assert_eq!(
        during,
        AppendOutcome {
            inserted: 1,
            duplicates: 0
        }
    );

    // Nothing of the given-up batch stays, not even the rows the COPY stored before it waited.
    observer.batch_execute("ROLLBACK").await.expect("rollback");
    assert_eq!(
        count_events(&db).await,
        2,
        "the warm-up and the write during, only"
    );

    // The same batch again: a plain COPY (nothing of it is stored), every event once.
    stores_every_event_once_more(&db, &batch).await;
    assert_eq!(db.store.event_conflict_retries(), 0);
    assert_eq!(count_events(&db).await, 2_002);
    assert_eq!(
        db.count("SELECT count(DISTINCT user_id) AS n FROM analytics_events")
            .await,
        2_002
    );
}

/// An error the server answered leaves the COPY client in step (tokio-postgres ends the COPY
/// with `Sync`): the client stays in the pool. A lock timeout (55P03) is transient.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_the_server_refuses_keeps_its_client_and_a_lock_timeout_is_transient() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let observer = connection(&db).await;
    let monitor = connection(&db).await;
    // For the sessions that start from now on: the store's COPY client is made below.
    observer
        .batch_execute(
            "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET lock_timeout = ''200ms''', \
             current_database()); END $$",
        )
        .await
        .expect("lock_timeout");

    // Today's events: the row inserted by hand needs a partition the migration made.
    let now = time::OffsetDateTime::now_utc();
    let batch: Vec<_> = (0..10)
        .map(|n| {
            let mut event = AnalyticsEvent::sample(n);
            event.occurred_at = now;
            event
        })
        .collect();
    hold_event_id(&observer, &batch[9]).await;
    let err = db
        .store
        .append_events(&batch)
        .await
        .expect_err("the key is locked");
    assert!(
        matches!(
            err,
            StoreError::Unavailable {
                reason: Outage::Busy,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("lock timeout"), "{err}");
    let copying = the_copy_backend(&monitor).await;

    observer.batch_execute("ROLLBACK").await.expect("rollback");
    stores_every_event_once_more(&db, &batch).await;
    assert_eq!(
        the_copy_backend(&monitor).await,
        copying,
        "the same client wrote it"
    );
}
