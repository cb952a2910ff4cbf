//! Catalog import (D13): valid files, idempotence, YAML, every problem with its pointer and
//! nothing written, immutable published versions, warnings, keys that authenticate.

use std::path::{Path, PathBuf};

use flowgate_control::import::{
    dry_run_file, import_file, DryRunReport, ImportError, ImportReport,
};
use flowgate_domain::catalog::imported_key_id;
use flowgate_domain::catalog::Change;
use flowgate_domain::ids::FlowId;
use flowgate_domain::keys::{ApiKey, AuthError, KeyEnvironment, KeyType};
use flowgate_domain::ports::CatalogSource;
use flowgate_domain::Catalog;
use flowgate_store::Store;
use serde_json::{json, Value};
use time::macros::datetime;
use time::OffsetDateTime;

use crate::catalog::normalized;
use crate::support::EXACT_SCHEMA;

const WS: &str = "10000000-0000-4000-8000-0000000000a1";
const APP: &str = "20000000-0000-4000-8000-0000000000a1";
const FLOW: &str = "30000000-0000-4000-8000-0000000000a1";
const FLOW_NEW: &str = "30000000-0000-4000-8000-0000000000a2";
const V1: &str = "40000000-0000-4000-8000-0000000000a1";
const V2: &str = "40000000-0000-4000-8000-0000000000a2";
const V_NEW: &str = "40000000-0000-4000-8000-0000000000a3";
pub(crate) const IMPORTED_AT: OffsetDateTime = datetime!(2026-11-20 10:00 UTC);

pub(crate) fn sdk_key() -> ApiKey {
    ApiKey::from_random(KeyEnvironment::Test, &"k".repeat(30))
}

fn secret_key() -> ApiKey {
    ApiKey::from_random(KeyEnvironment::Test, &"s".repeat(30))
}

/// D13's example file with real UUIDs. Version 1's `flow_schema` is a placeholder that
/// [`text`] replaces by [`EXACT_SCHEMA`], so the file carries text a re-encoder would change.
pub(crate) fn d13() -> Value {
    json!({
      "workspaces": [{
        "id": WS, "name": "Acme",
        "api_keys": [{"key": sdk_key().expose(), "type": "sdk", "name": "ios"},
                     {"key": secret_key().expose(), "type": "secret", "name": "dashboard"}],
        "apps": [{
          "id": APP, "name": "Acme iOS",
          "media_base_url": "https://cdn.example.com/media/",
          "icon_base_url": "https://cdn.example.com/icons/",
          "cache_ttl_seconds": 300,
          "saved_groups": {"beta_testers": ["user-1", "user-2"]},
          "flows": [{
            "id": FLOW, "name": "Onboarding", "published_version": 2,
            "versions": [{"id": V1, "version": 1, "schema_version": 1, "fonts": [],
                          "flow_schema": "EXACT"},
                         {"id": V2, "version": 2, "schema_version": 1,
                          "fonts": [], "flow_schema": {"screens": []}}]
          }, {
            "id": FLOW_NEW, "name": "Paywall", "published_version": 1,
            "versions": [{"id": V_NEW, "version": 1, "schema_version": 1,
                          "fonts": [{"family": "Inter", "weight": 400, "style": "normal",
                                     "url": "https://cdn.example.com/inter.woff2"}],
                          "flow_schema": {"screens": ["paywall"]}}]
          }],
          "placements": [{
            "key": "onboarding", "default_flow_id": FLOW,
            "rules": [
              {"audience": {"country": {"$in": ["US", "CA"]}}, "flow_id": FLOW},
              {"audience": {}, "experiment": {
                "id": "50000000-0000-4000-8000-0000000000a1", "name": "paywall-test",
                "status": "running", "coverage": 1.0,
                "variants": [{"id": "60000000-0000-4000-8000-0000000000a1", "name": "control",
                              "weight": 1, "flow_id": null},
                             {"id": "60000000-0000-4000-8000-0000000000a2", "name": "new",
                              "weight": 1, "flow_id": FLOW_NEW}]}}
            ]
          }]
        }]
      }]
    })
}

pub(crate) fn text(file: &Value) -> String {
    serde_json::to_string_pretty(file)
        .expect("serialise")
        .replace("\"EXACT\"", EXACT_SCHEMA)
}

pub(crate) fn set(file: &mut Value, pointer: &str, value: Value) {
    *file
        .pointer_mut(pointer)
        .unwrap_or_else(|| panic!("{pointer}")) = value;
}

/// A file in a fresh temporary folder, removed on drop.
pub(crate) struct TempFile {
    dir: PathBuf,
    pub(crate) path: PathBuf,
}

impl TempFile {
    pub(crate) fn new(name: &str, content: &str) -> TempFile {
        let dir = std::env::temp_dir().join(format!(
            "flowgate-import-test-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(name);
        std::fs::write(&path, content).expect("write the file");
        TempFile { dir, path }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) async fn import(store: &Store, file: &Value) -> Result<ImportReport, ImportError> {
    let tmp = TempFile::new("catalog.json", &text(file));
    import_file(store, &tmp.path, IMPORTED_AT).await
}

/// The problems of a rejected import as `pointer: message`, with the path checked.
fn problems(result: Result<ImportReport, ImportError>) -> Vec<String> {
    match result {
        Err(ImportError::Invalid(problems)) => problems
            .iter()
            .map(|p| {
                assert_eq!(
                    p.path.file_name().and_then(|n| n.to_str()),
                    Some("catalog.json")
                );
                format!("{}: {}", p.pointer, p.message)
            })
            .collect(),
        other => panic!("expected an invalid file, got {other:?}"),
    }
}

fn pointers(problems: &[String]) -> Vec<&str> {
    problems
        .iter()
        .map(|p| {
            p.split_once(": ")
                .map_or(p.as_str(), |(pointer, _)| pointer)
        })
        .collect()
}

fn flow_schema_text(data: &flowgate_domain::CatalogData, version: &str) -> String {
    data.workspaces
        .iter()
        .flat_map(|w| &w.apps)
        .flat_map(|a| &a.flows)
        .flat_map(|f| &f.versions)
        .find(|v| v.id.to_string() == version)
        .map(|v| v.flow_schema.get().to_owned())
        .expect("the version is stored")
}

/// The stored catalog (normalised) and revision.
async fn state(store: &Store) -> (String, u64) {
    let data = store.load_catalog().await.expect("load");
    let revision = data.revision;
    (normalized(data), revision)
}

fn assert_is(path: &Path, problems: &[String], expected: &[&str]) {
    assert_eq!(
        pointers(problems),
        expected,
        "{}: {problems:#?}",
        path.display()
    );
}

backend_tests! {
    async fn a_d13_file_imports_and_its_keys_authenticate(db) {
        let report = import(&db.store, &d13()).await.expect("imports");
        assert_eq!(
            (report.workspaces, report.apps, report.flows, report.versions, report.placements, report.keys),
            (1, 1, 2, 3, 1, 2)
        );
        assert!(report.changed);
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);

        let data = db.store.load_catalog().await.expect("load");
        assert_eq!(report.revision, data.revision);
        // D2: flow_schema stored exactly as written in the file.
        assert_eq!(flow_schema_text(&data, V1), EXACT_SCHEMA);
        // Keys are stored as digests, with ids derived from them and the import time.
        let stored = data.api_keys.iter().find(|k| k.digest == sdk_key().digest()).expect("key");
        assert_eq!(stored.id, imported_key_id(&sdk_key().digest()));
        assert_eq!(stored.created_at, IMPORTED_AT);
        assert_eq!(stored.name, "ios");

        let catalog = Catalog::build(data).expect("builds");
        let record = catalog.authenticate(Some(sdk_key().expose()), KeyEnvironment::Test).expect("authenticates");
        assert_eq!(record.workspace_id.to_string(), WS);
        assert_eq!(record.key_type, KeyType::Sdk);
        assert_eq!(
            catalog.authenticate(Some(secret_key().expose()), KeyEnvironment::Test).map(|r| r.id),
            Err(AuthError::KeyTypeNotAllowed)
        );
        let app = catalog.app(APP.parse().expect("uuid")).expect("app");
        let flow = app.flow(FLOW.parse().expect("uuid")).expect("flow");
        assert_eq!(flow.published().map(|v| v.id().to_string()), Some(V2.to_owned()));
    }

    async fn reimporting_the_same_file_changes_nothing(db) {
        import(&db.store, &d13()).await.expect("first import");
        let before = state(&db.store).await;
        // A later import time changes nothing either: known keys keep their creation time.
        let tmp = TempFile::new("catalog.json", &text(&d13()));
        let report = import_file(&db.store, &tmp.path, datetime!(2026-12-01 00:00 UTC))
            .await
            .expect("second import");
        assert!(!report.changed);
        assert_eq!(report.revision, before.1);
        assert_eq!(state(&db.store).await, before);
    }

    async fn the_yaml_equivalent_imports_identically(db) {
        // No placeholder and no integer beyond 2^53: YAML numbers are f64 or 64-bit integers.
        let mut file = d13();
        set(&mut file, "/workspaces/0/apps/0/flows/0/versions/0/flow_schema", json!({"screens": ["old"], "n": 1.5}));
        let tmp = TempFile::new("catalog.yaml", &serde_norway::to_string(&file).expect("yaml"));
        let report = import_file(&db.store, &tmp.path, IMPORTED_AT).await.expect("yaml imports");
        assert!(report.changed);
        assert_eq!((report.flows, report.versions, report.placements, report.keys), (2, 3, 1, 2));
        let from_yaml = state(&db.store).await;
        // The JSON file holds the same catalog: importing it changes nothing.
        let report = import(&db.store, &file).await.expect("json imports");
        assert!(!report.changed, "{report:?}");
        assert_eq!(state(&db.store).await, from_yaml);
    }

    async fn an_invalid_file_lists_every_problem_and_writes_nothing(db) {
        import(&db.store, &d13()).await.expect("valid import");
        let before = state(&db.store).await;

        let mut file = d13();
        let placement = "/workspaces/0/apps/0/placements/0";
        set(&mut file, &format!("{placement}/rules/0/flow_id"), json!("30000000-0000-4000-8000-0000000000ff"));
        set(&mut file, &format!("{placement}/rules/1/experiment/variants/0/weight"), json!(-1));
        let mut bad_key = sdk_key().expose().to_owned();
        bad_key.replace_range(10..11, "x");
        set(&mut file, "/workspaces/0/api_keys/0/key", json!(bad_key));
        set(&mut file, "/workspaces/0/api_keys/1/type", json!("admin"));
        file.pointer_mut("/workspaces/0/apps/0/placements").and_then(Value::as_array_mut).expect("list").push(json!(
            {"key": "bad key!", "rules": [{"audience": {"email": {"$regex": "(?=x)"}}, "flow_id": FLOW}]}
        ));

        let found = problems(import(&db.store, &file).await);
        assert_is(Path::new("catalog.json"), &found, &[
            "/workspaces/0/api_keys/0/key",
            "/workspaces/0/api_keys/1/type",
            "/workspaces/0/apps/0/placements/0/rules/0/flow_id",
            "/workspaces/0/apps/0/placements/0/rules/1/experiment/variants",
            "/workspaces/0/apps/0/placements/0/rules/1/experiment/variants/0/weight",
            "/workspaces/0/apps/0/placements/1/key",
            "/workspaces/0/apps/0/placements/1/rules/0/audience/email/$regex",
        ]);
        assert!(found[0].contains("checksum"), "{found:?}");
        assert!(found[1].contains("`admin` is not a key type"), "{found:?}");
        assert!(found[2].contains("30000000-0000-4000-8000-0000000000ff"), "{found:?}");
        assert!(found[6].contains("look-ahead"), "{found:?}");
        // Each problem about a value quotes it.
        assert_eq!(found[3], "/workspaces/0/apps/0/placements/0/rules/1/experiment/variants: variant weights must sum to a positive finite number, not 0");
        assert_eq!(found[4], "/workspaces/0/apps/0/placements/0/rules/1/experiment/variants/0/weight: must be a finite number >= 0, not -1");
        assert_eq!(found[5], "/workspaces/0/apps/0/placements/1/key: a placement key has only the characters A-Z a-z 0-9 _ . : -, not \"bad key!\"");
        assert!(found[6].contains("\"(?=x)\""), "{found:?}");
        assert!(!found.iter().any(|p| p.contains(&bad_key)), "a key is never echoed");
        assert_eq!(state(&db.store).await, before, "nothing written, revision unchanged");
    }

    async fn structural_problems_are_listed_with_pointers(db) {
        let mut file = d13();
        set(&mut file, "/workspaces/0/apps/0/flows/0/versions/1/version", json!("2"));
        set(&mut file, "/workspaces/0/apps/0/placements/0/rules/1/experiment/status", json!("live"));
        file.pointer_mut("/workspaces/0/apps/0").and_then(Value::as_object_mut).expect("app").remove("name");
        file.pointer_mut("/workspaces/0/apps/0/flows/1").and_then(Value::as_object_mut).expect("flow")
            .insert("publised_version".to_owned(), json!(1));
        let found = problems(import(&db.store, &file).await);
        assert_is(Path::new("catalog.json"), &found, &[
            "/workspaces/0/apps/0",
            "/workspaces/0/apps/0/flows/0/versions/1/version",
            "/workspaces/0/apps/0/flows/1/publised_version",
            "/workspaces/0/apps/0/placements/0/rules/1/experiment/status",
        ]);
        assert!(found[0].ends_with("missing field `name`"), "{found:?}");
        assert_eq!(state(&db.store).await.1, 1, "nothing written");
    }

    async fn changing_a_published_version_is_rejected(db) {
        import(&db.store, &d13()).await.expect("valid import");
        let before = state(&db.store).await;
        let mut file = d13();
        set(&mut file, "/workspaces/0/apps/0/flows/0/versions/1/flow_schema", json!({"screens": ["changed"]}));
        set(&mut file, "/workspaces/0/apps/0/flows/1/versions/0/schema_version", json!(2));
        let found = problems(import(&db.store, &file).await);
        assert_is(Path::new("catalog.json"), &found, &[
            "/workspaces/0/apps/0/flows/0/versions/1",
            "/workspaces/0/apps/0/flows/1/versions/0",
        ]);
        assert!(found[0].contains("immutable") && found[0].contains("flow_schema"), "{found:?}");
        assert!(found[1].contains("schema_version"), "{found:?}");
        assert_eq!(state(&db.store).await, before);

        // An unpublished version may change while it stays unpublished...
        let mut file = d13();
        set(&mut file, "/workspaces/0/apps/0/flows/0/versions/0/flow_schema", json!({"draft": 2}));
        assert!(import(&db.store, &file).await.expect("draft edit").changed);
        // ... but not in the import that publishes it.
        set(&mut file, "/workspaces/0/apps/0/flows/0/versions/0/flow_schema", json!({"draft": 3}));
        set(&mut file, "/workspaces/0/apps/0/flows/0/published_version", json!(1));
        let found = problems(import(&db.store, &file).await);
        assert_is(Path::new("catalog.json"), &found, &["/workspaces/0/apps/0/flows/0/versions/0"]);
        assert!(found[0].contains("published by this file"), "{found:?}");
    }

    async fn adding_and_publishing_a_new_version_is_accepted(db) {
        import(&db.store, &d13()).await.expect("valid import");
        let before = state(&db.store).await;
        let mut file = d13();
        file.pointer_mut("/workspaces/0/apps/0/flows/0/versions").and_then(Value::as_array_mut).expect("versions").push(json!(
            {"id": "40000000-0000-4000-8000-0000000000b3", "version": 3, "schema_version": 2, "flow_schema": {"screens": [3]}}
        ));
        set(&mut file, "/workspaces/0/apps/0/flows/0/published_version", json!(3));
        let report = import(&db.store, &file).await.expect("accepted");
        assert!(report.changed && report.revision > before.1);
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        let catalog = Catalog::build(db.store.load_catalog().await.expect("load")).expect("builds");
        let flow = catalog
            .app(APP.parse().expect("uuid"))
            .and_then(|a| a.flow(FLOW.parse::<FlowId>().expect("uuid")))
            .expect("flow");
        let published = flow.published().expect("published");
        let schema: Value = serde_json::from_str(published.flow_schema().get()).expect("json");
        assert_eq!((published.version(), schema), (3, json!({"screens": [3]})));
    }

    async fn a_weight_change_on_a_running_experiment_warns(db) {
        import(&db.store, &d13()).await.expect("valid import");
        let mut file = d13();
        let variants = "/workspaces/0/apps/0/placements/0/rules/1/experiment/variants";
        // Same normalised weights: no warning.
        set(&mut file, &format!("{variants}/0/weight"), json!(2));
        set(&mut file, &format!("{variants}/1/weight"), json!(2));
        let report = import(&db.store, &file).await.expect("accepted");
        assert!(report.changed && report.warnings.is_empty(), "{report:?}");
        // 2:1 moves users (D5).
        set(&mut file, &format!("{variants}/1/weight"), json!(1));
        let report = import(&db.store, &file).await.expect("accepted with a warning");
        assert!(report.changed);
        let warnings: Vec<String> = report.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains(&format!("catalog.json#{variants}: experiment `paywall-test` is running")), "{warnings:?}");
    }

    async fn problems_in_stored_entities_point_at_the_nearest_file_ancestor(db) {
        import(&db.store, &d13()).await.expect("valid import");
        let before = state(&db.store).await;
        // Moving the onboarding flow to a new app leaves the stored placement of the old app
        // pointing at a flow of another app.
        let file = json!({"workspaces": [{"id": WS, "name": "Acme", "apps": [{
            "id": "20000000-0000-4000-8000-0000000000b1", "name": "Acme Android",
            "media_base_url": "https://cdn.example.com/media/",
            "icon_base_url": "https://cdn.example.com/icons/",
            "flows": [{"id": FLOW, "name": "Onboarding", "published_version": 2, "versions": []}]
        }]}]});
        let found = problems(import(&db.store, &file).await);
        assert_eq!(pointers(&found), vec!["/workspaces/0", "/workspaces/0"], "{found:#?}");
        assert!(
            found[0].contains(&format!("stored app {APP} (not in this file) at /placements/0/default_flow_id")),
            "{found:#?}"
        );
        assert_eq!(state(&db.store).await, before);
    }

    // D19: a dry run validates like the import, reports what would change with the share of
    // users who move, and writes nothing.
    async fn a_dry_run_reports_the_change_and_writes_nothing(db) {
        import(&db.store, &d13()).await.expect("valid import");
        let before = state(&db.store).await;
        let mut file = d13();
        let variants = "/workspaces/0/apps/0/placements/0/rules/1/experiment/variants";
        set(&mut file, &format!("{variants}/0/weight"), json!(7));
        set(&mut file, &format!("{variants}/1/weight"), json!(3));
        set(&mut file, "/workspaces/0/apps/0/flows/1/published_version", Value::Null);
        let tmp = TempFile::new("catalog.json", &text(&file));
        let DryRunReport { report, diff } =
            dry_run_file(&db.store, &tmp.path, IMPORTED_AT).await.expect("valid");
        assert!(report.changed);
        assert_eq!(report.revision, before.1, "the stored revision");
        assert_eq!(report.warnings.len(), 2, "{:?}", report.warnings);
        let shift = &diff.experiments[0];
        assert_eq!((shift.change_variant, shift.enter, shift.leave), (0.2, 0.0, 0.0));
        let unpublished: Vec<_> = diff.entities.iter().filter(|e| e.change == Change::Unpublished).map(|e| e.name.as_str()).collect();
        assert_eq!(unpublished, ["Paywall"]);
        assert_eq!(state(&db.store).await, before, "nothing written");

        // The stored file itself: no change.
        let same = TempFile::new("catalog.json", &text(&d13()));
        let DryRunReport { report, diff } =
            dry_run_file(&db.store, &same.path, IMPORTED_AT).await.expect("valid");
        assert!(!report.changed);
        assert!(diff.is_empty(), "{diff:?}");

        // A file the import refuses is refused with the same problems.
        set(&mut file, "/workspaces/0/apps/0/placements/0/rules/0/flow_id", json!("30000000-0000-4000-8000-0000000000ff"));
        let bad = TempFile::new("catalog.json", &text(&file));
        let imported = problems(import_file(&db.store, &bad.path, IMPORTED_AT).await);
        let dry = match dry_run_file(&db.store, &bad.path, IMPORTED_AT).await {
            Err(ImportError::Invalid(p)) => p.iter().map(|p| format!("{}: {}", p.pointer, p.message)).collect::<Vec<_>>(),
            other => panic!("expected problems, got {other:?}"),
        };
        assert_eq!(dry, imported);
        assert_eq!(state(&db.store).await, before);
    }
}
