//! Change detection (D12): `wait_for_change` wakes promptly on a write made through another
//! connection (PostgreSQL: LISTEN/NOTIFY; SQLite: polling), and waits out `max_wait` otherwise.

use std::time::{Duration, Instant};

use flowgate_domain::ports::{CatalogSource, KeyStore};
use time::OffsetDateTime;

use crate::support::{self, catalog, WS1};

backend_tests! {
    async fn wait_for_change_wakes_on_a_write_from_another_connection(db) {
        db.store.replace_catalog(&catalog()).await.expect("write");
        let known = db.store.revision().await.expect("revision");
        let writer = db.open_another();

        // Twice: the second wait reuses the PostgreSQL listening connection.
        for (round, fill) in [(0, 'x'), (1, 'y')] {
            let known = if round == 0 { known } else { db.store.revision().await.expect("revision") };
            let waiter = {
                let store = db.store.clone();
                tokio::spawn(async move {
                    let started = Instant::now();
                    let result = store.wait_for_change(known, Duration::from_secs(20)).await;
                    (result, started.elapsed())
                })
            };
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(!waiter.is_finished(), "round {round}: returned before any change");

            let written = Instant::now();
            writer
                .insert_key(support::key_record(WS1, fill, OffsetDateTime::now_utc()))
                .await
                .expect("write from the other store");
            let (result, _) = waiter.await.expect("waiter task");
            let woke_after = written.elapsed();
            let revision = result.expect("wait_for_change");
            assert!(revision > known, "round {round}: {revision} after {known}");
            assert!(
                woke_after < Duration::from_secs(2),
                "round {round}: woke {woke_after:?} after the write"
            );
        }
    }

    async fn wait_for_change_times_out_without_a_change(db) {
        let known = db.store.revision().await.expect("revision");
        let started = Instant::now();
        let revision = db
            .store
            .wait_for_change(known, Duration::from_millis(400))
            .await
            .expect("wait");
        let waited = started.elapsed();
        assert_eq!(revision, known);
        assert!(waited >= Duration::from_millis(350), "waited only {waited:?}");
        assert!(waited < Duration::from_secs(3), "waited {waited:?}");
    }

    async fn wait_for_change_returns_at_once_when_behind(db) {
        let started = Instant::now();
        let revision = db.store.wait_for_change(0, Duration::from_secs(20)).await.expect("wait");
        assert_eq!(revision, 1);
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
