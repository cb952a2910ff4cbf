//! Sticky assignment (D23) in the store: an experiment's sticky settings survive import,
//! export and re-import exactly; the migration keeps existing experiments as they were; the
//! stored assignments are not catalog data; identifiers the schema cannot hold are skipped.
//! (The port's behaviour itself is the contract suite's, `flowgate-contract-tests`.)

use std::collections::BTreeMap;

use flowgate_domain::catalog::ExperimentData;
use flowgate_domain::ids::AppId;
use flowgate_domain::ports::{CatalogSource, StickyStore};
use flowgate_domain::sticky::{StickyDoc, StickyId, StickyWrite};
use flowgate_domain::{Catalog, CatalogData};
use flowgate_testkit::revert_through;
use serde_json::{json, Value};

use crate::catalog::normalized;
use crate::export::{another, round_trip};
use crate::import::{d13, import, text};

/// The migration under test.
const MIGRATION: &str = "20261129000000";

/// The experiment of [`d13`], as a JSON pointer into the file.
const EXPERIMENT: &str = "/workspaces/0/apps/0/placements/0/rules/1/experiment";
const EXPERIMENT_ID: &str = "50000000-0000-4000-8000-0000000000a1";

/// [`d13`] with its experiment sticky, with every setting away from its default.
fn sticky_file() -> Value {
    let mut file = d13();
    let experiment = file
        .pointer_mut(EXPERIMENT)
        .and_then(Value::as_object_mut)
        .expect("the experiment");
    for (name, value) in [
        ("sticky", json!(true)),
        ("bucket_version", json!(3)),
        ("min_bucket_version", json!(2)),
        ("hash_version", json!(1)),
    ] {
        experiment.insert(name.to_owned(), value);
    }
    file
}

/// The stored experiment of [`d13`].
fn experiment(data: &CatalogData) -> &ExperimentData {
    data.workspaces
        .iter()
        .flat_map(|w| &w.apps)
        .flat_map(|a| &a.placements)
        .flat_map(|p| &p.rules)
        .filter_map(|r| r.experiment.as_ref())
        .find(|e| e.id.to_string() == EXPERIMENT_ID)
        .expect("the experiment is stored")
}

/// (sticky, bucket_version, min_bucket_version, fallback_attribute, hash_version)
fn settings(e: &ExperimentData) -> (bool, u32, u32, Option<&str>, Option<u32>) {
    (
        e.sticky,
        e.bucket_version,
        e.min_bucket_version,
        e.fallback_attribute.as_deref(),
        e.hash_version,
    )
}

fn app() -> AppId {
    AppId::from_uuid(uuid::Uuid::from_u128(0xA1))
}

fn id(value: &str) -> StickyId {
    StickyId {
        attribute_name: "user_id".to_owned(),
        attribute_value: value.to_owned(),
    }
}

fn write(value: &str, variant: &str) -> StickyWrite {
    StickyWrite {
        app_id: app(),
        doc: StickyDoc {
            attribute_name: "user_id".to_owned(),
            attribute_value: value.to_owned(),
            assignments: BTreeMap::from([("exp__0".to_owned(), variant.to_owned())]),
        },
    }
}

backend_tests! {
    async fn sticky_settings_round_trip_through_import_and_export(db) {
        let other = another(&db).await;
        let exported = round_trip(&db.store, &other.store, &text(&sticky_file())).await;
        assert!(exported.contains("\"bucket_version\": 3"), "{exported}");
        for store in [&db.store, &other.store] {
            let loaded = store.load_catalog().await.expect("load");
            assert_eq!(settings(experiment(&loaded)), (true, 3, 2, None, Some(1)));
            Catalog::build(loaded).expect("the loaded catalog builds");
        }

        // A write of changed settings replaces the stored ones (the upsert's update list).
        let mut data = db.store.load_catalog().await.expect("load");
        let stored = data.workspaces[0].apps[0].placements[0].rules[1]
            .experiment
            .as_mut()
            .expect("the experiment");
        stored.bucket_version = 4;
        stored.min_bucket_version = 0;
        // Refused by the import (it would never be used), still stored and loaded as written
        // by an older release or an embedder.
        stored.fallback_attribute = Some("device_id".to_owned());
        stored.hash_version = Some(2);
        db.store.replace_catalog(&data).await.expect("write");
        let loaded = db.store.load_catalog().await.expect("load");
        assert_eq!(settings(experiment(&loaded)), (true, 4, 0, Some("device_id"), Some(2)));
        assert_eq!(normalized(loaded), normalized(data));
    }

    async fn the_import_refuses_a_fallback_attribute_with_its_reason(db) {
        let mut file = sticky_file();
        file.pointer_mut(EXPERIMENT)
            .and_then(Value::as_object_mut)
            .expect("the experiment")
            .insert("fallback_attribute".to_owned(), json!("device_id"));
        let error = import(&db.store, &file).await.expect_err("refused");
        let text = error.to_string();
        assert!(
            text.contains("fallback_attribute") && text.contains("\"device_id\"")
                && text.contains("never be used"),
            "{text}"
        );
        assert!(db.store.load_catalog().await.expect("load").workspaces.is_empty(), "nothing written");
    }

    async fn the_migration_keeps_existing_experiments(db) {
        import(&db.store, &d13()).await.expect("imports");
        let before = db.store.load_catalog().await.expect("load");
        // Down to the schema without sticky assignment, and up again.
        let reverted = revert_through(&db.store, MIGRATION).await;
        assert_eq!(reverted.last().map(String::as_str), Some(MIGRATION));
        assert_eq!(db.count("SELECT count(*) AS n FROM experiments").await, 1);
        assert_eq!(db.store.migrate().await.expect("up").len(), reverted.len());

        let after = db.store.load_catalog().await.expect("load");
        assert_eq!(settings(experiment(&after)), (false, 0, 0, None, None));
        assert_eq!(normalized(after), normalized(before));
        assert_eq!(db.count("SELECT count(*) AS n FROM sticky_assignments").await, 0);
    }

    async fn assignments_are_not_catalog_data(db) {
        // Neither the revision (D12) nor the catalog sees stored assignments, and they do not
        // depend on the app being in the catalog.
        let revision = db.store.revision().await.expect("revision");
        db.store.write_sticky(&[write("u1", "a")]).await.expect("write");
        db.store.write_sticky(&[write("u1", "b")]).await.expect("write again");
        assert_eq!(db.store.revision().await.expect("revision"), revision);
        let docs = db.store.read_sticky(app(), &[id("u1")]).await.expect("read");
        assert_eq!(docs.len(), 1);
        assert_eq!(db.count("SELECT count(*) AS n FROM sticky_assignments").await, 1);
    }

    async fn identifiers_the_schema_cannot_hold_are_skipped(db) {
        // PostgreSQL's text cannot hold NUL: such a document is left out on both backends,
        // and the rest of its batch is stored.
        db.store
            .write_sticky(&[write("a\0b", "x"), write("ok", "y"), write("c", "v\0")])
            .await
            .expect("the batch is stored");
        let docs = db
            .store
            .read_sticky(app(), &[id("a\0b"), id("ok"), id("c")])
            .await
            .expect("read");
        let read: Vec<_> = docs
            .iter()
            .map(|d| (d.attribute_name.as_str(), d.attribute_value.as_str()))
            .collect();
        assert_eq!(read, [("user_id", "ok")]);
        assert_eq!(db.count("SELECT count(*) AS n FROM sticky_assignments").await, 1);
    }
}
