//! Catalog at scale (issue 3): a generated catalog of 100 apps, 5,000 placements and 2,000 flow
//! versions of about 20 KB each is imported (`import_file`: parse, validation against the
//! store, one write transaction), imported again (nothing changes), then loaded
//! (`load_catalog`) and built (`Catalog::build`), each timed separately, on PostgreSQL and
//! SQLite. Run with `make bench-store` (needs PostgreSQL and `psql`). Prints Markdown tables.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fmt::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

use flowgate_domain::keys::{ApiKey, KeyEnvironment};
use flowgate_domain::ports::CatalogSource;
use flowgate_domain::Catalog;
use flowgate_store::{import_file, Store, StoreOptions};

const WORKSPACES: usize = 10;
const APPS_PER_WORKSPACE: usize = 10;
const FLOWS_PER_APP: usize = 10;
const VERSIONS_PER_FLOW: usize = 2;
const PLACEMENTS_PER_APP: usize = 50;
const SCHEMA_BYTES: usize = 20_000;
const RUNS: usize = 3;

fn uuid(kind: u128, n: usize) -> String {
    uuid::Uuid::from_u128((kind << 96) | 0x4000_8000_0000_0000 | n as u128)
        .hyphenated()
        .to_string()
}

/// A flow definition of about `SCHEMA_BYTES`: screens of text, image and button components.
fn flow_schema(out: &mut String, seed: usize) {
    let start = out.len();
    write!(out, r##"{{"id":"flow-{seed}","theme":{{"background":"#FFFFFF","accent":"#3355FF"}},"screens":["##).unwrap();
    let mut i = 0;
    while out.len() - start < SCHEMA_BYTES {
        if i > 0 {
            out.push(',');
        }
        write!(
            out,
            r##"{{"id":"screen-{i}","type":"page","components":[{{"type":"text","text":"Welcome to step {i} of flow {seed}: everything you need, nothing you do not.","style":{{"font":"Inter","size":17,"weight":600,"color":"#1A1A1A"}}}},{{"type":"image","url":"media/hero-{seed}-{i}.webp","aspect":1.777}},{{"type":"button","label":"Continue","action":{{"type":"next"}},"style":{{"radius":12}}}}]}}"##
        )
        .unwrap();
        i += 1;
    }
    out.push_str("]}");
}

/// The catalog file, in D13's JSON shape.
fn catalog_file() -> String {
    let mut out = String::with_capacity(45_000_000);
    out.push_str(r#"{"workspaces":["#);
    let mut app_n = 0;
    for w in 0..WORKSPACES {
        if w > 0 {
            out.push(',');
        }
        let key = ApiKey::from_random(KeyEnvironment::Live, &format!("{w:0>30}"));
        write!(
            out,
            r#"{{"id":"{}","name":"Workspace {w}","api_keys":[{{"key":"{}","type":"sdk","name":"sdk"}}],"apps":["#,
            uuid(1, w),
            key.expose()
        )
        .unwrap();
        for a in 0..APPS_PER_WORKSPACE {
            if a > 0 {
                out.push(',');
            }
            write!(
                out,
                r#"{{"id":"{}","name":"App {app_n}","media_base_url":"https://cdn.example.com/{app_n}/media/","icon_base_url":"https://cdn.example.com/{app_n}/icons/","saved_groups":{{"beta":["u-1","u-2","u-3"]}},"flows":["#,
                uuid(2, app_n)
            )
            .unwrap();
            for f in 0..FLOWS_PER_APP {
                let flow = app_n * FLOWS_PER_APP + f;
                if f > 0 {
                    out.push(',');
                }
                write!(
                    out,
                    r#"{{"id":"{}","name":"Flow {flow}","published_version":{VERSIONS_PER_FLOW},"versions":["#,
                    uuid(3, flow)
                )
                .unwrap();
                for v in 0..VERSIONS_PER_FLOW {
                    let version = flow * VERSIONS_PER_FLOW + v;
                    if v > 0 {
                        out.push(',');
                    }
                    write!(
                        out,
                        r#"{{"id":"{}","version":{},"schema_version":1,"fonts":[{{"family":"Inter","weight":400,"style":"normal","url":"https://cdn.example.com/inter.woff2"}}],"flow_schema":"#,
                        uuid(4, version),
                        v + 1
                    )
                    .unwrap();
                    flow_schema(&mut out, version);
                    out.push('}');
                }
                out.push_str("]}");
            }
            out.push_str(r#"],"placements":["#);
            for p in 0..PLACEMENTS_PER_APP {
                let placement = app_n * PLACEMENTS_PER_APP + p;
                if p > 0 {
                    out.push(',');
                }
                let flow = |k: usize| uuid(3, app_n * FLOWS_PER_APP + (p + k) % FLOWS_PER_APP);
                write!(
                    out,
                    r#"{{"key":"placement.{p}","default_flow_id":"{}","rules":[{{"audience":{{"country":{{"$in":["US","CA","GB"]}},"app.version":{{"$vgte":"2.1.0"}}}},"flow_id":"{}"}},{{"audience":{{"email":{{"$regex":"@example\\.(org|com)$"}}}},"flow_id":"{}"}}"#,
                    flow(0),
                    flow(1),
                    flow(2)
                )
                .unwrap();
                if p % 5 == 0 {
                    write!(
                        out,
                        r#",{{"audience":{{}},"experiment":{{"id":"{}","name":"test {placement}","status":"running","coverage":0.9,"variants":[{{"id":"{}","name":"control","weight":1,"flow_id":null}},{{"id":"{}","name":"new","weight":1,"flow_id":"{}"}}]}}}}"#,
                        uuid(5, placement),
                        uuid(6, placement * 2),
                        uuid(6, placement * 2 + 1),
                        flow(3)
                    )
                    .unwrap();
                }
                out.push_str("]}");
            }
            out.push_str("]}");
            app_n += 1;
        }
        out.push_str("]}");
    }
    out.push_str("]}");
    out
}

fn psql(db: &str, command: &str) {
    let out = Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            db,
            "-v",
            "ON_ERROR_STOP=1",
            "-qc",
            command,
        ])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql {command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

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
        (100, 5000, 2000)
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
        assert_eq!(catalog.app_count(), 100);
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
        WORKSPACES,
        WORKSPACES * APPS_PER_WORKSPACE,
        WORKSPACES * APPS_PER_WORKSPACE * PLACEMENTS_PER_APP,
        WORKSPACES * APPS_PER_WORKSPACE * FLOWS_PER_APP * VERSIONS_PER_FLOW,
        SCHEMA_BYTES / 1000,
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
