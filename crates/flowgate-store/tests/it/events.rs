//! `EventStore`: idempotent batches (D7), server events (D8), large batches.

use flowgate_domain::ports::{AppendOutcome, EventStore};
use flowgate_store::Backend;

use crate::support::{sdk_event, server_event};

backend_tests! {
    async fn appending_the_same_batch_twice_stores_it_once(db) {
        let batch: Vec<_> = (0..10).map(sdk_event).chain([server_event()]).collect();
        let first = db.store.append_events(&batch).await.expect("append");
        assert_eq!(first, AppendOutcome { inserted: 11, duplicates: 0 });
        let second = db.store.append_events(&batch).await.expect("append again");
        assert_eq!(second, AppendOutcome { inserted: 0, duplicates: 11 });
        assert_eq!(db.count("SELECT count(*) AS n FROM analytics_events").await, 11);
        assert_eq!(
            db.count(
                "SELECT count(*) AS n FROM analytics_events WHERE source = 'server' \
                 AND event_type = 'resolve_no_flow' AND reason = 'holdout' \
                 AND variant_name = 'control' AND flow_id IS NULL"
            )
            .await,
            1
        );
    }

    async fn duplicates_within_a_batch_are_stored_once(db) {
        let a = sdk_event(1);
        let b = sdk_event(2);
        let mut a_again = a.clone();
        a_again.user_id = "someone-else".to_owned();
        let outcome = db.store.append_events(&[a.clone(), b, a_again]).await.expect("append");
        assert_eq!(outcome, AppendOutcome { inserted: 2, duplicates: 1 });
        // The first occurrence is the one kept.
        assert_eq!(
            db.count("SELECT count(*) AS n FROM analytics_events WHERE user_id = 'user-1'").await,
            1
        );
        // A later batch mixing a stored and a new event.
        let outcome = db.store.append_events(&[a, sdk_event(3)]).await.expect("append");
        assert_eq!(outcome, AppendOutcome { inserted: 1, duplicates: 1 });
        assert_eq!(db.count("SELECT count(*) AS n FROM analytics_events").await, 3);
    }

    async fn a_batch_of_a_thousand_events(db) {
        let batch: Vec<_> = (0..1000).map(sdk_event).collect();
        let outcome = db.store.append_events(&batch).await.expect("append");
        assert_eq!(outcome, AppendOutcome { inserted: 1000, duplicates: 0 });
        assert_eq!(db.count("SELECT count(*) AS n FROM analytics_events").await, 1000);
        assert_eq!(db.store.append_events(&[]).await.expect("empty"), AppendOutcome::default());
    }

    async fn a_stored_event_id_sends_the_batch_again_with_on_conflict_only_on_postgres(db) {
        // New events go through the COPY on PostgreSQL: no retry.
        let batch: Vec<_> = (0..5).map(sdk_event).collect();
        let outcome = db.store.append_events(&batch).await.expect("append");
        assert_eq!(outcome, AppendOutcome { inserted: 5, duplicates: 0 });
        assert_eq!(db.store.event_conflict_retries(), 0);
        // A batch holding one stored event_id: refused by the key, then written with
        // ON CONFLICT; the new events are stored, the stored one is not repeated.
        let mixed: Vec<_> = [batch[4].clone()].into_iter().chain((5..8).map(sdk_event)).collect();
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
        let sdk = sdk_event(7);
        let server = server_event();
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
                 AND device_platform = 'web' AND sdk_version IS NULL \
                 AND experiment_id = '50000000-0000-4000-8000-000000000001' \
                 AND variant_id = '60000000-0000-4000-8000-000000000001'"
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

    async fn ids_text_and_times_are_stored_exactly(db) {
        let mut event = sdk_event(9);
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
        if db.store.backend() == Backend::Postgres {
            // The ids as sent; PostgreSQL keeps microseconds: the nanoseconds are cut, not
            // rounded.
            let exact = format!(
                "SELECT count(*) AS n FROM analytics_events WHERE event_id = '{id}' \
                 AND app_id = '{}' AND flow_id = '{}' AND flow_version_id = '{}' \
                 AND occurred_at = '2026-11-23T12:34:56.123456Z'",
                crate::support::APP1,
                crate::support::FLOW_US,
                crate::support::V_US_2,
            );
            assert_eq!(db.count(&exact).await, 1);
        }
    }

    async fn a_write_given_up_midway_stores_nothing_of_it(db) {
        // The sink's writer gives a write up after `events.write_timeout` by dropping it. On
        // PostgreSQL the COPY is aborted, nothing of it is stored, and its client leaves the
        // pool; the next write goes through. (SQLite's insert runs on the blocking pool and
        // completes anyway; the writer's retry then finds it stored, D7 idempotency.)
        if db.store.backend() != Backend::Postgres {
            return;
        }
        let big: Vec<_> = (0..50_000).map(sdk_event).collect();
        let given_up =
            tokio::time::timeout(std::time::Duration::from_millis(5), db.store.append_events(&big))
                .await;
        assert!(given_up.is_err(), "50,000 rows take longer than 5 ms");
        let small: Vec<_> = (0..3).map(sdk_event).collect();
        let outcome = db.store.append_events(&small).await.expect("the next write");
        assert_eq!(outcome, AppendOutcome { inserted: 3, duplicates: 0 });
        // Nothing of the given-up batch, even later.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert_eq!(db.count("SELECT count(*) AS n FROM analytics_events").await, 3);
    }
}
