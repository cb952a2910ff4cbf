//! Catalog at scale: a generated catalog of 100 apps, 5,000 placements and 2,000 flow
//! versions of about 20 KB each is imported (`import_file`: parse, validation against the
//! store, one write transaction), imported again (nothing changes), then loaded
//! (`load_catalog`) and built (`Catalog::build`), each timed separately, on PostgreSQL and
//! SQLite. Run with `make bench-store` (needs PostgreSQL and `psql`). Prints Markdown tables.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use flowgate_contract_tests::fixtures::scale::{self, catalog_file};
use flowgate_control::import::import_file;
use flowgate_domain::ports::CatalogSource;
use flowgate_domain::Catalog;
use flowgate_store::{Store, StoreOptions};
use flowgate_testkit::psql;

const RUNS: usize = 3;

fn secs(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn measure(name: &str, store: &Store, file: &std::path::Path) {
    let now = time::OffsetDateTime::now_utc();
    let start = Instant::now();
    let report = import_file(store, file, now).await.expect("import");
    let import = start.elapsed();
    assert!(report.changed);
    assert_eq!(
        (report.apps, report.placements, report.versions),
        (scale::APPS, scale::PLACEMENTS, scale::VERSIONS)
    );
    println!(
        "| {name} | import_file (new catalog, one transaction) | {} |",
        secs(import)
    );

    let start = Instant::now();
    let report = import_file(store, file, now).await.expect("re-import");
    let reimport = start.elapsed();
    assert!(!report.changed);
    println!(
        "| {name} | import_file again (no change, nothing written) | {} |",
        secs(reimport)
    );

    let mut loads = Vec::new();
    let mut builds = Vec::new();
    let mut size = 0;
    for _ in 0..RUNS {
        let start = Instant::now();
        let data = store.load_catalog().await.expect("load");
        loads.push(start.elapsed());
        size = serde_json::to_string(&data).expect("serialise").len();
        let start = Instant::now();
        let catalog = Catalog::build(data).expect("build");
        builds.push(start.elapsed());
        assert_eq!(catalog.app_count(), scale::APPS);
    }
    println!(
        "| {name} | load_catalog (median of {RUNS}) | {} |",
        secs(median(loads))
    );
    println!(
        "| {name} | Catalog::build (median of {RUNS}) | {} |",
        secs(median(builds))
    );
    println!(
        "| {name} | loaded CatalogData as JSON | {:.1} MB |",
        size as f64 / 1e6
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let db = format!("flowgate_bench_catalog_{}", std::process::id());
    psql("postgres", &format!("CREATE DATABASE {db}"));
    let dir = std::env::temp_dir().join(&db);
    std::fs::create_dir_all(&dir).unwrap();

    let start = Instant::now();
    let text = catalog_file();
    let generated = start.elapsed();
    let file = dir.join("catalog.json");
    std::fs::write(&file, &text).unwrap();
    println!(
        "catalog file: {:.1} MB ({} workspaces, {} apps, {} placements, {} versions of ~{} KB), generated in {} s\n",
        text.len() as f64 / 1e6,
        scale::WORKSPACES,
        scale::APPS,
        scale::PLACEMENTS,
        scale::VERSIONS,
        scale::SCHEMA_BYTES / 1000,
        secs(generated)
    );
    drop(text);

    let pg = Store::connect(
        &format!("postgres://postgres@127.0.0.1:5432/{db}"),
        StoreOptions::default(),
    )
    .unwrap();
    pg.migrate().await.unwrap();
    let sqlite = Store::connect(
        &format!("sqlite://{}", dir.join("bench.db").display()),
        StoreOptions::default(),
    )
    .unwrap();
    sqlite.migrate().await.unwrap();

    println!("| backend | step | seconds |");
    println!("|---|---|---|");
    measure("PostgreSQL", &pg, &file).await;
    measure("SQLite", &sqlite, &file).await;

    drop(pg);
    psql("postgres", &format!("DROP DATABASE {db} WITH (FORCE)"));
    std::fs::remove_dir_all(&dir).ok();
}
