//! Catalog export (D19): the stored catalog written as a catalog file imports into another
//! empty store as the same catalog, and exporting that store gives the same bytes; keys are
//! left out, so importing an export changes no key; at the benchmark catalog's scale too.

use flowgate_domain::ports::CatalogWriter as _;
use std::time::Instant;

use flowgate_contract_tests::fixtures;
use flowgate_contract_tests::fixtures::scale;
use flowgate_control::import::import_file;
use flowgate_domain::catalog::CatalogFile;
use flowgate_domain::ports::CatalogSource;
use flowgate_domain::CatalogData;
use flowgate_store::{Backend, Store};
use time::macros::datetime;

use crate::import::{d13, import, sdk_key, TempFile, IMPORTED_AT};
use crate::support::TestDb;

/// The stored catalog as `flowgate catalog export` writes it.
async fn export(store: &Store) -> String {
    let data = store.load_catalog().await.expect("load");
    CatalogFile::from_data(&data, None)
        .expect("export")
        .to_pretty_json()
        .expect("serialise")
}

/// Another fresh, migrated database of `db`'s backend.
pub(crate) async fn another(db: &TestDb) -> TestDb {
    match db.backend() {
        Backend::Postgres => TestDb::postgres()
            .await
            .expect("PostgreSQL served the first database"),
        Backend::Sqlite => TestDb::sqlite().await,
    }
}

/// The catalog's workspaces as JSON text: the whole catalog apart from keys and revision.
fn workspaces(data: &CatalogData) -> String {
    serde_json::to_string(&data.workspaces).expect("serialise")
}

/// Imports `text` into `store` from a file; returns the import's report.
async fn import_text(store: &Store, text: &str) -> flowgate_control::import::ImportReport {
    let tmp = TempFile::new("export.json", text);
    import_file(store, &tmp.path, IMPORTED_AT)
        .await
        .expect("the export imports")
}

/// Import `source` into `first`, export, import the export into `second` (empty), export
/// again: both exports must be the same bytes and both stores the same catalog. Returns the
/// first export.
pub(crate) async fn round_trip(first: &Store, second: &Store, source: &str) -> String {
    let tmp = TempFile::new("catalog.json", source);
    let report = import_file(first, &tmp.path, IMPORTED_AT)
        .await
        .expect("imports");
    assert!(report.changed);
    let exported = export(first).await;

    let into_second = import_text(second, &exported).await;
    assert!(into_second.changed);
    assert_eq!(
        (
            into_second.workspaces,
            into_second.apps,
            into_second.flows,
            into_second.versions,
            into_second.placements,
            into_second.keys
        ),
        (
            report.workspaces,
            report.apps,
            report.flows,
            report.versions,
            report.placements,
            0
        ),
        "the export holds every entity of the file and no key"
    );
    let again = export(second).await;
    assert!(
        again == exported,
        "the second store's export differs from the first's"
    );

    let one = first.load_catalog().await.expect("load");
    let two = second.load_catalog().await.expect("load");
    assert!(
        workspaces(&one) == workspaces(&two),
        "the stores hold different catalogs"
    );
    assert!(two.api_keys.is_empty());
    exported
}

backend_tests! {
    async fn an_export_imports_into_an_empty_store_as_the_same_catalog(db) {
        let other = another(&db).await;
        let exported = round_trip(&db.store, &other.store, &fixtures::catalog_json()).await;
        // D2: each flow_schema is written as its exact stored text.
        assert!(exported.contains(fixtures::EXACT_SCHEMA), "{exported}");

        // Importing the export where it came from changes nothing and records nothing.
        let before = db.store.catalog_history(10).await.expect("history");
        let report = import_text(&db.store, &exported).await;
        assert!(!report.changed, "{report:?}");
        assert_eq!(db.store.catalog_history(10).await.expect("history"), before);
    }

    async fn an_export_has_no_keys_and_importing_it_changes_no_key(db) {
        import(&db.store, &d13()).await.expect("imports");
        let keys = db.store.load_catalog().await.expect("load").api_keys;
        assert_eq!(keys.len(), 2);
        let exported = export(&db.store).await;
        assert!(!exported.contains("api_keys"), "{exported}");
        assert!(!exported.contains(sdk_key().expose()), "a key is never exported");

        let tmp = TempFile::new("export.json", &exported);
        let report = import_file(&db.store, &tmp.path, datetime!(2026-12-01 00:00 UTC))
            .await
            .expect("the export imports");
        assert!(!report.changed, "{report:?}");
        assert_eq!(report.keys, 0);
        let after = db.store.load_catalog().await.expect("load").api_keys;
        assert_eq!(after, keys, "no key changed");
    }
}

/// At the benchmark catalog's scale (100 apps, 5,000 placements, 2,000 flow versions of about
/// 20 KB), on SQLite only: each import of it takes about 10 s on SQLite and 20 s on PostgreSQL
/// in a debug build (one statement per row), and the PostgreSQL round trip runs the same code
/// as the small one above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_benchmark_catalog_round_trips_on_sqlite() {
    let db = TestDb::sqlite().await;
    let other = TestDb::sqlite().await;
    let started = Instant::now();
    let exported = round_trip(&db.store, &other.store, &scale::catalog_file()).await;
    let file = CatalogFile::parse(&exported).expect("the export parses");
    let apps: usize = file.workspaces.iter().map(|w| w.apps.len()).sum();
    let placements: usize = file
        .workspaces
        .iter()
        .flat_map(|w| &w.apps)
        .map(|a| a.placements.len())
        .sum();
    assert_eq!((apps, placements), (scale::APPS, scale::PLACEMENTS));
    eprintln!(
        "the benchmark catalog ({:.1} MB exported) round-tripped on SQLite in {:.1} s",
        exported.len() as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
}

backend_tests! {
    async fn a_rule_that_is_off_round_trips_as_the_golden_sample(db) {
        // D28: the contract suite's catalog with its first onboarding rule off, exported as the
        // catalog file's format-2 sample of it.
        let mut data = fixtures::catalog();
        let onboarding = data.workspaces[0].apps[0]
            .placements
            .iter_mut()
            .find(|p| p.key == "onboarding")
            .expect("placement");
        onboarding.rules[0].enabled = false;
        let source = CatalogFile::from_data(&data, None)
            .expect("export")
            .to_pretty_json()
            .expect("serialise");
        let other = another(&db).await;
        let exported = round_trip(&db.store, &other.store, &source).await;
        let sample = fixtures::formats_dir().join("flowgate.catalog/v2/catalog-rule-off.json");
        let golden = std::fs::read_to_string(&sample).expect("the sample");
        assert!(exported == golden, "the export differs from {}:\n{exported}", sample.display());
        let loaded = other.store.load_catalog().await.expect("load");
        let rules = &loaded.workspaces[0].apps[0]
            .placements
            .iter()
            .find(|p| p.key == "onboarding")
            .expect("placement")
            .rules;
        assert_eq!(rules.iter().map(|r| r.enabled).collect::<Vec<_>>(), [false, true, true]);
    }
}
