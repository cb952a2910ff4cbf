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
    data.experiments()
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

/// A row of `formats/flowgate.sticky/v1/sql-rows.json`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize)]
struct SampleRow {
    app_id: String,
    attribute_name: String,
    attribute_value: String,
    assignment_key: String,
    variant_key: String,
}

/// The rows of the version 1 sample, in the sample's order.
fn v1_rows() -> Vec<SampleRow> {
    #[derive(serde::Deserialize)]
    struct Sample {
        rows: Vec<SampleRow>,
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../formats/flowgate.sticky/v1/sql-rows.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let sample: Sample =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    sample.rows
}

/// A text literal of SQL.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A UUID literal of `db`'s backend.
fn uuid_literal(db: &flowgate_testkit::TestDb, id: &str) -> String {
    match db.backend() {
        flowgate_store::Backend::Postgres => format!("{}::uuid", literal(id)),
        flowgate_store::Backend::Sqlite => format!("X'{}'", id.replace('-', "")),
    }
}

/// Every row of `sticky_assignments` of the sample's app, as sample rows, sorted.
async fn stored_rows(db: &flowgate_testkit::TestDb, app_id: &str) -> Vec<SampleRow> {
    let sql = format!(
        "SELECT attribute_name || char(31) || attribute_value || char(31) || assignment_key \
         || char(31) || variant_key AS t FROM sticky_assignments WHERE app_id = {}",
        uuid_literal(db, app_id)
    );
    let sql = match db.backend() {
        flowgate_store::Backend::Postgres => sql.replace("char(31)", "chr(31)"),
        flowgate_store::Backend::Sqlite => sql,
    };
    let mut rows: Vec<SampleRow> = db
        .texts(&sql)
        .await
        .into_iter()
        .map(|t| {
            let parts: Vec<&str> = t.split('\u{1f}').collect();
            SampleRow {
                app_id: app_id.to_owned(),
                attribute_name: parts[0].to_owned(),
                attribute_value: parts[1].to_owned(),
                assignment_key: parts[2].to_owned(),
                variant_key: parts[3].to_owned(),
            }
        })
        .collect();
    rows.sort();
    rows
}

/// The documents the sample's rows hold, as writes.
fn v1_writes(rows: &[SampleRow]) -> Vec<StickyWrite> {
    let mut docs: BTreeMap<(String, String, String), BTreeMap<String, String>> = BTreeMap::new();
    for row in rows {
        docs.entry((
            row.app_id.clone(),
            row.attribute_name.clone(),
            row.attribute_value.clone(),
        ))
        .or_default()
        .insert(row.assignment_key.clone(), row.variant_key.clone());
    }
    docs.into_iter()
        .map(|((app_id, name, value), assignments)| StickyWrite {
            app_id: app_id.parse().expect("an app id"),
            doc: StickyDoc {
                attribute_name: name,
                attribute_value: value,
                assignments,
            },
        })
        .collect()
}

backend_tests! {
    async fn the_v1_samples_rows_read_and_are_what_this_release_writes(db) {
        // Version 1 of the documents (the Versions section of `flowgate_domain::sticky`): rows
        // as a release stored them read as their documents, and this release writes them so.
        let rows = v1_rows();
        assert_eq!(rows.len(), 3);
        for row in &rows {
            db.execute(&format!(
                "INSERT INTO sticky_assignments (app_id, attribute_name, attribute_value, \
                 assignment_key, variant_key) VALUES ({}, {}, {}, {}, {})",
                uuid_literal(&db, &row.app_id),
                literal(&row.attribute_name),
                literal(&row.attribute_value),
                literal(&row.assignment_key),
                literal(&row.variant_key),
            ))
            .await;
        }
        let writes = v1_writes(&rows);
        for write in &writes {
            let docs = db
                .store
                .read_sticky(
                    write.app_id,
                    &[StickyId {
                        attribute_name: write.doc.attribute_name.clone(),
                        attribute_value: write.doc.attribute_value.clone(),
                    }],
                )
                .await
                .expect("read");
            assert_eq!(
                docs.get(&write.doc.attribute_name, &write.doc.attribute_value),
                Some(&write.doc)
            );
        }
        let mut sorted = rows.clone();
        sorted.sort();
        assert_eq!(stored_rows(&db, &rows[0].app_id).await, sorted);

        db.execute("DELETE FROM sticky_assignments").await;
        db.store.write_sticky(&writes).await.expect("write");
        assert_eq!(stored_rows(&db, &rows[0].app_id).await, sorted, "what this release writes");
    }

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
