//! `EventStore`: idempotent batches (D7), server events (D8), large batches.

use flowgate_domain::ports::{AppendOutcome, EventStore};

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
}
