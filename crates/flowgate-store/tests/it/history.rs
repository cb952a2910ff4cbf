//! The catalog import history (D19): an applied import is recorded in its own transaction with
//! its revision, time, the file's SHA-256 and name, and its summary; an import that writes
//! nothing (the same file again, a rejected file) records nothing; newest first.

use flowgate_control::import::{import_file, ImportError};
use flowgate_domain::catalog::ImportSummary;
use flowgate_domain::ports::CatalogSource;
use flowgate_domain::ports::CatalogWriter as _;
use flowgate_store::{ImportRecord, Store};
use serde_json::json;
use sha2::{Digest, Sha256};
use time::macros::datetime;
use time::UtcOffset;

use crate::import::{d13, import, set, text, TempFile, IMPORTED_AT};

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn history(store: &Store) -> Vec<ImportRecord> {
    store.catalog_history(100).await.expect("history")
}

/// The D13 file with its `onboarding` placement's default flow changed: another applied import.
fn d13_changed() -> serde_json::Value {
    let mut file = d13();
    set(
        &mut file,
        "/workspaces/0/apps/0/placements/0/default_flow_id",
        json!("30000000-0000-4000-8000-0000000000a2"),
    );
    file
}

backend_tests! {
    async fn an_applied_import_is_recorded_with_its_revision_hash_and_summary(db) {
        assert!(history(&db.store).await.is_empty(), "a fresh store has no history");
        let content = text(&d13());
        let tmp = TempFile::new("catalog.json", &content);
        // A time with an offset is recorded in UTC.
        let at = datetime!(2026-11-20 12:00:00.123456 +02:00);
        let report = import_file(&db.store, &tmp.path, at).await.expect("imports");
        assert!(report.changed);
        assert_eq!(report.sha256, sha256(content.as_bytes()));

        let records = history(&db.store).await;
        assert_eq!(records.len(), 1, "{records:?}");
        let record = &records[0];
        assert_eq!(record.revision, report.revision);
        assert_eq!(record.revision, db.store.load_catalog().await.expect("load").revision);
        assert_eq!(record.sha256, sha256(content.as_bytes()));
        assert_eq!(record.file, tmp.path.display().to_string());
        assert_eq!(record.imported_at, datetime!(2026-11-20 10:00:00.123456 UTC));
        assert_eq!(record.imported_at.offset(), UtcOffset::UTC);
        assert_eq!(
            record.summary,
            ImportSummary { workspaces: 1, apps: 1, flows: 2, versions: 3, placements: 1, keys: 2 }
        );
        // Recording the import changed no revision of its own: the catalog did not change.
        assert_eq!(db.store.load_catalog().await.expect("load").revision, report.revision);
    }

    async fn an_import_that_writes_nothing_records_nothing(db) {
        let first = import(&db.store, &d13()).await.expect("imports");
        assert_eq!(history(&db.store).await.len(), 1);

        // The same file again: nothing written, nothing recorded.
        let again = import(&db.store, &d13()).await.expect("imports again");
        assert!(!again.changed);
        assert_eq!(again.sha256, first.sha256, "the same bytes, the same hash");
        assert_eq!(history(&db.store).await.len(), 1);

        // A file rejected by the validation inside the transaction.
        let mut bad = d13_changed();
        set(&mut bad, "/workspaces/0/apps/0/placements/0/rules/0/flow_id", json!("30000000-0000-4000-8000-0000000000ff"));
        assert!(matches!(import(&db.store, &bad).await, Err(ImportError::Invalid(_))));
        // A file that does not even parse.
        let tmp = TempFile::new("catalog.json", "{\"workspaces\": [");
        assert!(matches!(
            import_file(&db.store, &tmp.path, IMPORTED_AT).await,
            Err(ImportError::Invalid(_))
        ));

        let records = history(&db.store).await;
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0].revision, first.revision);
        assert_eq!(records[0].sha256, first.sha256);
    }

    async fn the_history_lists_the_newest_first(db) {
        let first = import(&db.store, &d13()).await.expect("first");
        let second = import(&db.store, &d13_changed()).await.expect("second");
        // Back to the first file: it changes the store again, so it is recorded again.
        let third = import(&db.store, &d13()).await.expect("third");
        assert!(first.changed && second.changed && third.changed);
        assert!(first.revision < second.revision && second.revision < third.revision);

        let records = history(&db.store).await;
        let seen: Vec<(u64, &str)> = records.iter().map(|r| (r.revision, r.sha256.as_str())).collect();
        assert_eq!(
            seen,
            [
                (third.revision, third.sha256.as_str()),
                (second.revision, second.sha256.as_str()),
                (first.revision, first.sha256.as_str()),
            ]
        );
        assert_eq!(first.sha256, third.sha256);
        assert_ne!(first.sha256, second.sha256);

        let limited = db.store.catalog_history(2).await.expect("history");
        assert_eq!(limited, records[..2]);
        assert!(db.store.catalog_history(0).await.expect("history").is_empty());
    }
}
