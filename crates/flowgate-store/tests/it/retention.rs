//! The events table over time (D21): partitions ahead of the events, idempotency across
//! partitions, retention, concurrent maintenance, and the migration of a table with rows.

use std::time::Duration;

use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ports::{AppendOutcome, EventStore};
use flowgate_store::{Backend, EventRetention};
use flowgate_testkit::revert_through;
use time::format_description::well_known::Rfc3339;
use time::macros::datetime;
use time::OffsetDateTime;

use crate::support::TestDb;

const DAY: Duration = Duration::from_secs(86_400);

/// The default accepted window (events.max_past_secs, events.max_future_secs).
fn window(retention_days: u32) -> EventRetention {
    EventRetention {
        max_past: 31 * DAY,
        max_future: DAY,
        retention_days,
    }
}

fn at(n: u32, occurred_at: OffsetDateTime) -> AnalyticsEvent {
    let mut event = AnalyticsEvent::sample(n);
    event.occurred_at = occurred_at;
    event
}

/// An `INSERT` of `events` naming only the columns the events table had before it was
/// partitioned (migration 2026-11-25).
fn old_release_insert(events: &[AnalyticsEvent]) -> String {
    let text = |v: Option<&str>| v.map_or("NULL".to_owned(), |v| format!("'{v}'"));
    let rows: Vec<String> = events
        .iter()
        .map(|e| {
            let at = e.occurred_at.format(&Rfc3339).expect("a time");
            format!(
                "('{}', '{}', '{}', '{}', {}, {}, {}, '{}', '{}', '{}', '{at}', {}, '{{}}')",
                e.event_id.0,
                e.source.as_str(),
                e.event_type.as_str(),
                e.app_id.0,
                text(e.flow_id.map(|f| f.0.to_string()).as_deref()),
                text(e.flow_version_id.map(|v| v.0.to_string()).as_deref()),
                text(e.placement_key.as_deref()),
                e.user_id,
                e.session_id,
                e.device_platform.as_str(),
                text(e.sdk_version.as_deref()),
            )
        })
        .collect();
    format!(
        "INSERT INTO analytics_events (event_id, source, event_type, app_id, flow_id, \
         flow_version_id, placement_key, user_id, session_id, device_platform, occurred_at, \
         sdk_version, payload) VALUES {}",
        rows.join(", ")
    )
}

async fn partitions(db: &TestDb) -> i64 {
    db.count("SELECT count(*) AS n FROM pg_inherits WHERE inhparent = 'analytics_events'::regclass")
        .await
}

backend_tests! {
    async fn events_at_both_edges_of_the_accepted_window_are_stored(db) {
        let now = OffsetDateTime::now_utc();
        // A window wider than the migration's, so maintenance has partitions to create.
        let wide = EventRetention { max_past: 60 * DAY, max_future: 3 * DAY, retention_days: 0 };
        let done = db.store.maintain_events(now, wide).await.expect("maintain");
        if db.backend() == Backend::Postgres {
            assert!(done.partitions_created >= 28, "{done:?}");
            let again = db.store.maintain_events(now, wide).await.expect("maintain again");
            assert_eq!(again.partitions_created, 0, "created once");
        }
        let oldest = now - time::Duration::days(60) + time::Duration::seconds(1);
        let newest = now + time::Duration::days(3) - time::Duration::seconds(1);
        let outcome = db
            .store
            .append_events(&[at(1, oldest), at(2, newest), at(3, now)])
            .await
            .expect("append");
        assert_eq!(outcome, AppendOutcome { inserted: 3, duplicates: 0 });
    }

    async fn an_event_without_its_partition_creates_it(db) {
        // Maintenance never covered these days (a replayed dead letter, a wider window):
        // the write creates the partitions and stores the events.
        let long_ago = datetime!(2025-01-15 12:00 UTC);
        let far_ahead = OffsetDateTime::now_utc() + time::Duration::days(90);
        let before = if db.backend() == Backend::Postgres { partitions(&db).await } else { 0 };
        let outcome = db
            .store
            .append_events(&[at(1, long_ago), at(2, far_ahead)])
            .await
            .expect("append");
        assert_eq!(outcome, AppendOutcome { inserted: 2, duplicates: 0 });
        if db.backend() == Backend::Postgres {
            // Every day from the first to the last event of the batch.
            assert!(partitions(&db).await > before + 300);
        }
        assert_eq!(db.count("SELECT count(*) AS n FROM analytics_events").await, 2);
    }

    async fn a_retried_event_near_a_partition_boundary_is_stored_once(db) {
        let midnight = OffsetDateTime::now_utc().replace_time(time::Time::MIDNIGHT);
        let batch = vec![
            at(1, midnight - time::Duration::microseconds(1)),
            at(2, midnight),
            at(3, midnight + time::Duration::microseconds(1)),
        ];
        let first = db.store.append_events(&batch).await.expect("append");
        assert_eq!(first, AppendOutcome { inserted: 3, duplicates: 0 });
        // The SDK's retry, alone and mixed with a new event.
        let again = db.store.append_events(&batch).await.expect("again");
        assert_eq!(again, AppendOutcome { inserted: 0, duplicates: 3 });
        let mixed = vec![batch[0].clone(), at(4, midnight)];
        let outcome = db.store.append_events(&mixed).await.expect("mixed");
        assert_eq!(outcome, AppendOutcome { inserted: 1, duplicates: 1 });
        assert_eq!(db.count("SELECT count(*) AS n FROM analytics_events").await, 4);
    }

    async fn retention_drops_only_expired_events(db) {
        let now = OffsetDateTime::now_utc();
        let old = at(1, now - time::Duration::days(40));
        let kept = at(2, now - time::Duration::days(29));
        let today = at(3, now);
        db.store.append_events(&[old, kept, today]).await.expect("append");
        // Expired: more than 30 days old.
        let done = db.store.maintain_events(now, window(30)).await.expect("maintain");
        match db.backend() {
            Backend::Postgres => {
                assert!(done.partitions_dropped >= 1, "{done:?}");
                assert_eq!(done.rows_deleted, 0);
                // Only partitions wholly before the cutoff went.
                assert_eq!(
                    db.count(
                        "SELECT count(*) AS n FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
                         WHERE i.inhparent = 'analytics_events'::regclass \
                         AND substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \\(''([^'']+)''\\)')::timestamptz \
                             <= now() - interval '30 days'"
                    )
                    .await,
                    0
                );
            }
            Backend::Sqlite => assert_eq!(done.rows_deleted, 1),
        }
        let left = db.texts("SELECT user_id AS t FROM analytics_events ORDER BY user_id").await;
        assert_eq!(left, ["user-2", "user-3"]);
        // Nothing more to drop.
        let again = db.store.maintain_events(now, window(30)).await.expect("again");
        assert_eq!((again.partitions_dropped, again.rows_deleted), (0, 0));
    }

    async fn sqlite_deletes_in_batches_and_keeps_newer_rows(db) {
        if db.backend() == Backend::Sqlite {
            let now = OffsetDateTime::now_utc();
            let n = flowgate_store::SQLITE_DELETE_BATCH as u32 * 2 + 7;
            let old: Vec<_> = (0..n).map(|i| at(i, now - time::Duration::days(50))).collect();
            for chunk in old.chunks(1_000) {
                db.store.append_events(chunk).await.expect("append");
            }
            // Other apps' old events go too; every app's newer ones stay.
            let other_app = |i: u32, when| {
                let mut event = at(i, when);
                event.app_id =
                    flowgate_domain::ids::AppId::from_uuid(uuid::Uuid::from_u128(0xB0 + u128::from(i % 3)));
                event
            };
            let others: Vec<_> = (0..30).map(|i| other_app(i, now - time::Duration::days(40))).collect();
            db.store.append_events(&others).await.expect("append");
            db.store.append_events(&[at(n, now), other_app(n + 1, now)]).await.expect("append");
            let (_, deleted) = db
                .store
                .drop_events_before(now - time::Duration::days(30))
                .await
                .expect("drop");
            assert_eq!(deleted, u64::from(n) + 30);
            assert_eq!(db.count("SELECT count(*) AS n FROM analytics_events").await, 2);
        }
    }
}

/// Every replica maintains the partitions: two at once both succeed, and each day is created
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_creating_partitions_at_once_do_not_fail() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let (a, b) = (db.open_another(), db.open_another());
    let now = OffsetDateTime::now_utc() + time::Duration::days(400);
    let wide = EventRetention {
        max_past: 20 * DAY,
        max_future: DAY,
        retention_days: 0,
    };
    let (ra, rb) = tokio::join!(a.maintain_events(now, wide), b.maintain_events(now, wide));
    let (ra, rb) = (ra.expect("first"), rb.expect("second"));
    // From 20 days before to 1 + PARTITION_DAYS_AHEAD after: 25 days.
    assert_eq!(ra.partitions_created + rb.partitions_created, 25);
    let (ra, rb) = tokio::join!(a.maintain_events(now, wide), b.maintain_events(now, wide));
    assert_eq!(
        ra.unwrap().partitions_created + rb.unwrap().partitions_created,
        0
    );
}

/// The migration converts a table that holds events in place: every row is kept, is found
/// by its id, and a retried one is stored once; new days get their own partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_migration_converts_a_table_with_rows() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let reverted = revert_through(&db.store, "20261125000000").await;
    assert_eq!(partitions(&db).await, 0, "one plain table again");
    // In microseconds, as stored: PostgreSQL rounds a literal's nanoseconds, the writer
    // truncates them, and a retry must be the same row.
    let now = OffsetDateTime::now_utc();
    let now = now
        .replace_microsecond(now.microsecond())
        .expect("a microsecond");
    let rows: Vec<_> = (0..2_000)
        .map(|i| at(i, now - time::Duration::hours(i64::from(i))))
        .collect();
    // Written as a release of that time wrote them: its columns only, so a column added
    // since (absent from the reverted table) changes nothing here.
    for chunk in rows.chunks(500) {
        db.execute(&old_release_insert(chunk)).await;
    }
    let applied = db.store.migrate().await.expect("up");
    assert_eq!(applied.len(), reverted.len());
    assert_eq!(
        db.count("SELECT count(*) AS n FROM analytics_events").await,
        2_000
    );
    assert_eq!(
        db.count("SELECT count(*) AS n FROM analytics_events_legacy")
            .await,
        2_000,
        "the old table is a partition now, not a copy"
    );
    assert!(
        partitions(&db).await >= 4,
        "the legacy partition and the days after it"
    );
    // Retried events, old and new, are stored once; a new one is stored.
    let retry = vec![rows[0].clone(), rows[1_999].clone(), at(5_000, now)];
    let outcome = db.store.append_events(&retry).await.expect("append");
    assert_eq!(
        outcome,
        AppendOutcome {
            inserted: 1,
            duplicates: 2
        }
    );
    // Tomorrow's events go to a day partition.
    let tomorrow = at(5_001, now + time::Duration::days(2));
    db.store.append_events(&[tomorrow]).await.expect("append");
    assert_eq!(
        db.count(
            "SELECT count(*) AS n FROM analytics_events WHERE user_id = 'user-5001' \
             AND tableoid::regclass::text LIKE 'analytics_events_p%'"
        )
        .await,
        1
    );
    // Retention drops the converted table once all of it has expired.
    let (dropped, _) = db
        .store
        .drop_events_before(now + time::Duration::days(2))
        .await
        .expect("drop");
    assert!(dropped >= 1);
    assert_eq!(
        db.count("SELECT count(*) AS n FROM pg_class WHERE relname = 'analytics_events_legacy'")
            .await,
        0
    );
}
