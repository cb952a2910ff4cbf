//! Event insert throughput: `EventStore::append_events` on PostgreSQL and SQLite (with
//! `synchronous` FULL and NORMAL) for batches of 10, 100 and 1,000, beside raw `COPY` of the
//! same number of rows through `psql` into the same table in the same run. Then the cost of
//! the partitioned events table (D21) and of event ids unique per app (D25): `append_events`
//! into the current schema and into the schema before each change (a second database with that
//! migration reverted), in alternating rounds. Run with `make bench-store` (needs PostgreSQL
//! and `psql`).
//! Prints a Markdown table.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::Write;
use std::time::{Duration, Instant};

use flowgate_domain::events::{AnalyticsEvent, EventSource, EventType};
use flowgate_domain::identity::Platform;
use flowgate_domain::ids::{AppId, EventId, FlowId, FlowVersionId};
use flowgate_domain::ports::EventStore;
use flowgate_store::{SqliteSynchronous, Store, StoreOptions};
use serde_json::json;

const ROWS: usize = 20_000;

fn events(count: usize, offset: u128) -> Vec<AnalyticsEvent> {
    let app = AppId::from_uuid(uuid::Uuid::from_u128(1));
    (0..count)
        .map(|i| {
            let mut payload = serde_json::Map::new();
            payload.insert("screen_id".into(), json!(format!("screen-{}", i % 7)));
            payload.insert("time_on_screen_ms".into(), json!(1200 + i % 500));
            AnalyticsEvent::new(
                EventId::from_uuid(uuid::Uuid::from_u128(offset + i as u128)),
                EventSource::Sdk,
                EventType::ScreenView,
                app,
                format!("user-{}", i % 5000),
                format!("session-{}", i % 9000),
                Platform::Ios,
                time::OffsetDateTime::now_utc(),
            )
            .with_flow_id(Some(FlowId::from_uuid(uuid::Uuid::from_u128(2))))
            .with_flow_version_id(Some(FlowVersionId::from_uuid(uuid::Uuid::from_u128(3))))
            .with_placement_key(Some("onboarding".into()))
            .with_sdk_version(Some("2.3.1".into()))
            .with_payload(payload)
        })
        .collect()
}

async fn append_all(store: &Store, rows: &[AnalyticsEvent], batch: usize) -> Duration {
    let start = Instant::now();
    for chunk in rows.chunks(batch) {
        let outcome = store.append_events(chunk).await.expect("append");
        assert_eq!(outcome.inserted, chunk.len());
    }
    start.elapsed()
}

/// `psql` on `db`, timed (process start included).
fn psql(db: &str, command: &str) -> Duration {
    let start = Instant::now();
    flowgate_testkit::psql(db, command);
    start.elapsed()
}

/// The same rows as CSV, in the columns `append_events` writes.
fn csv(rows: &[AnalyticsEvent], path: &std::path::Path) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for e in rows {
        let payload = serde_json::to_string(&e.payload)
            .unwrap()
            .replace('"', "\"\"");
        writeln!(
            f,
            "{},sdk,{},{},{},{},{},{},{},{},{},{},\"{}\"",
            e.event_id,
            e.event_type,
            e.app_id,
            e.flow_id.unwrap(),
            e.flow_version_id.unwrap(),
            e.placement_key.as_deref().unwrap(),
            e.user_id,
            e.session_id,
            e.device_platform,
            e.occurred_at
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap(),
            e.sdk_version.as_deref().unwrap(),
            payload
        )
        .unwrap();
    }
}

/// A new PostgreSQL database `name`, migrated and then stepped back through `migration` (and
/// every later one).
async fn postgres_at(name: &str, migration: &str) -> Store {
    psql("postgres", &format!("CREATE DATABASE {name}"));
    let store = Store::connect(
        &format!("postgres://postgres@127.0.0.1:5432/{name}"),
        StoreOptions::default(),
    )
    .unwrap();
    store.migrate().await.unwrap();
    flowgate_testkit::revert_through(&store, migration).await;
    store
}

/// `append_events` of 40,000 new events per round into `current` and into `earlier`, in
/// alternating order, 5 rounds per batch size: the medians and their ratio, as a table row.
/// The rows of one round: the benchmark's screen views, or the experiment mix of
/// `flowgate_contract_tests::fixtures::scale::experiment` (exposures, conversions, purchases among them).
#[derive(Clone, Copy)]
enum Mix {
    Screens,
    Experiment,
}

fn rows(mix: Mix, count: usize, offset: u128) -> Vec<AnalyticsEvent> {
    match mix {
        Mix::Screens => events(count, offset),
        Mix::Experiment => {
            // About ten events a user; users numbered from the offset, so ids never repeat.
            let first = (offset >> 4) as u64;
            let mut out = flowgate_contract_tests::fixtures::scale::experiment::events(
                first..first + count as u64 / 9,
                1 << 40,
                14,
                time::OffsetDateTime::now_utc() - time::Duration::days(1),
            );
            out.truncate(count);
            out
        }
    }
}

async fn compare(what: &str, backend: &str, current: &Store, earlier: &Store, offset: &mut u128) {
    compare_mix(what, backend, current, earlier, offset, Mix::Screens).await;
}

async fn compare_mix(
    what: &str,
    backend: &str,
    current: &Store,
    earlier: &Store,
    offset: &mut u128,
    mix: Mix,
) {
    const ROUNDS: usize = 5;
    for batch in [100usize, 1000] {
        let (mut now, mut before) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let order: [(&Store, &mut Vec<f64>); 2] = if round % 2 == 0 {
                [(current, &mut now), (earlier, &mut before)]
            } else {
                [(earlier, &mut before), (current, &mut now)]
            };
            for (store, out) in order {
                let rows = rows(mix, ROWS * 2, *offset);
                *offset += (ROWS * 2) as u128 * 16;
                let d = append_all(store, &rows, batch).await;
                out.push(rows.len() as f64 / d.as_secs_f64());
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (a, b) = (median(&mut now), median(&mut before));
        let mix = match mix {
            Mix::Screens => "screen views",
            Mix::Experiment => "experiment mix",
        };
        println!(
            "| {what} | {backend} | {mix} | {batch} | {ROUNDS} | {a:.0} | {b:.0} | {:.2} |",
            a / b
        );
    }
}

fn rate(rows: usize, d: Duration) -> String {
    format!("{:.0}", rows as f64 / d.as_secs_f64())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let db = format!("flowgate_bench_{}", std::process::id());
    psql("postgres", &format!("CREATE DATABASE {db}"));
    let dir = std::env::temp_dir().join(&db);
    std::fs::create_dir_all(&dir).unwrap();

    let pg = Store::connect(
        &format!("postgres://postgres@127.0.0.1:5432/{db}"),
        StoreOptions::default(),
    )
    .unwrap();
    pg.migrate().await.unwrap();
    // SQLite twice: `synchronous = FULL` (the default: commits survive a power loss) and
    // `NORMAL` (they survive a crash of the process only), each on its own file.
    let sqlite_store = |file: &str, synchronous| {
        Store::connect(
            &format!("sqlite://{}", dir.join(file).display()),
            StoreOptions {
                sqlite_synchronous: synchronous,
                ..StoreOptions::default()
            },
        )
        .unwrap()
    };
    let sqlite = sqlite_store("full.db", SqliteSynchronous::Full);
    sqlite.migrate().await.unwrap();
    let sqlite_normal = sqlite_store("normal.db", SqliteSynchronous::Normal);
    sqlite_normal.migrate().await.unwrap();

    println!("| backend | method | batch | rows | seconds | rows/s |");
    println!("|---|---|---|---|---|---|");
    let mut offset = 1u128 << 64;
    for batch in [10usize, 100, 1000] {
        for (name, store) in [
            ("PostgreSQL", &pg),
            ("SQLite (synchronous FULL)", &sqlite),
            ("SQLite (synchronous NORMAL)", &sqlite_normal),
        ] {
            let rows = events(ROWS, offset);
            offset += ROWS as u128;
            let d = append_all(store, &rows, batch).await;
            println!(
                "| {name} | append_events | {batch} | {ROWS} | {:.3} | {} |",
                d.as_secs_f64(),
                rate(ROWS, d)
            );
        }
        let rows = events(ROWS, offset);
        offset += ROWS as u128;
        let file = dir.join("rows.csv");
        csv(&rows, &file);
        let d = psql(
            &db,
            &format!(
                "\\copy analytics_events(event_id, source, event_type, app_id, flow_id, flow_version_id, placement_key, user_id, session_id, device_platform, occurred_at, sdk_version, payload) FROM '{}' WITH (FORMAT csv)",
                file.display()
            ),
        );
        println!("| PostgreSQL | psql \\copy (one command, process start included) | all | {ROWS} | {:.3} | {} |", d.as_secs_f64(), rate(ROWS, d));
    }

    // Schema against schema, same rows, alternating rounds: each case is a second store at an
    // earlier migration beside the current one.
    println!();
    println!("| comparison | backend | rows | batch | rounds | current rows/s (median) | earlier rows/s (median) | ratio |");
    println!("|---|---|---|---|---|---|---|---|");
    // The partitioned table (D21) against the one table it replaced.
    let flat_db = format!("{db}_flat");
    let flat = postgres_at(&flat_db, "20261125000000").await;
    compare(
        "partitioned / one table",
        "PostgreSQL",
        &pg,
        &flat,
        &mut offset,
    )
    .await;
    drop(flat);
    psql("postgres", &format!("DROP DATABASE {flat_db} WITH (FORCE)"));
    // Event ids per app (D25): the key (app_id, event_id[, occurred_at]) against (event_id[,
    // occurred_at]), both without the later results indexes.
    let (per_app_db, global_db) = (format!("{db}_per_app"), format!("{db}_global"));
    let per_app = postgres_at(&per_app_db, "20261128000000").await;
    let global = postgres_at(&global_db, "20261127000000").await;
    compare(
        "ids per app / across apps",
        "PostgreSQL",
        &per_app,
        &global,
        &mut offset,
    )
    .await;
    drop((per_app, global));
    psql(
        "postgres",
        &format!("DROP DATABASE {per_app_db} WITH (FORCE)"),
    );
    psql(
        "postgres",
        &format!("DROP DATABASE {global_db} WITH (FORCE)"),
    );
    let sqlite_at = |file: &str| sqlite_store(file, SqliteSynchronous::Full);
    let (per_app, global) = (sqlite_at("per_app.db"), sqlite_at("global.db"));
    per_app.migrate().await.unwrap();
    global.migrate().await.unwrap();
    flowgate_testkit::revert_through(&per_app, "20261128000000").await;
    flowgate_testkit::revert_through(&global, "20261127000000").await;
    compare(
        "ids per app / across apps",
        "SQLite (FULL)",
        &per_app,
        &global,
        &mut offset,
    )
    .await;
    // The indexes experiment results read (D22) against none, for the benchmark's screen views
    // and for the experiment mix (a tenth of its events are exposures, as many conversions).
    let plain_db = format!("{db}_plain");
    let plain = postgres_at(&plain_db, "20261128000000").await;
    for mix in [Mix::Screens, Mix::Experiment] {
        compare_mix(
            "results indexes / none",
            "PostgreSQL",
            &pg,
            &plain,
            &mut offset,
            mix,
        )
        .await;
    }
    drop(plain);
    psql(
        "postgres",
        &format!("DROP DATABASE {plain_db} WITH (FORCE)"),
    );
    for mix in [Mix::Screens, Mix::Experiment] {
        compare_mix(
            "results indexes / none",
            "SQLite (FULL)",
            &sqlite,
            &per_app,
            &mut offset,
            mix,
        )
        .await;
    }

    drop(pg);
    psql("postgres", &format!("DROP DATABASE {db} WITH (FORCE)"));
    std::fs::remove_dir_all(&dir).ok();
}
