//! Experiment results at scale (D22, docs/benchmarks.md): one experiment with RESULTS_USERS
//! exposed users (default 1,000,000; about ten events each, `flowgate_contract_tests::fixtures::scale::experiment`)
//! written with `append_events` (`COPY` on PostgreSQL), then the report's query: cold (the
//! database restarted and the OS page cache dropped, when RESULTS_COLD=1 and this process may),
//! warm (median of 10, with the sequential test and with the fixed-horizon one in turns, D27,
//! and the domain's report alone with each),
//! and for a three-day `from`/`to` window. On PostgreSQL by default, and
//! on SQLite with a tenth of the users (RESULTS_BACKENDS=postgres,sqlite). The PostgreSQL
//! database is kept for the next run when RESULTS_KEEP=1 (loading 10,000,000 events takes about
//! a minute). Prints a Markdown table. Run with `make bench-results` (needs PostgreSQL and psql).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;
use std::time::{Duration, Instant};

use flowgate_contract_tests::fixtures::scale::experiment as scale;
use flowgate_domain::ids::ExperimentId;
use flowgate_domain::ports::{EventStore, ResultsSource};
use flowgate_domain::results::{report, Method, ResultsQuery, SequentialConfig};
use flowgate_domain::Catalog;
use flowgate_store::{Store, StoreOptions};
use flowgate_testkit::psql;
use time::macros::datetime;
use time::OffsetDateTime;

const DAYS: u32 = 14;
const START: OffsetDateTime = datetime!(2026-10-01 00:00 UTC);
const BATCH_USERS: u64 = 2_000;

/// Restarts PostgreSQL and drops the OS page cache, when allowed: the cold run.
fn make_cold() -> bool {
    let cluster = std::fs::read_dir("/etc/postgresql")
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned());
    let Some(cluster) = cluster else { return false };
    let restarted = Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &cluster, "main", "restart"])
        .status()
        .is_ok_and(|s| s.success());
    let _ = Command::new("sync").status();
    let dropped = std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok();
    for _ in 0..50 {
        if Command::new("pg_isready")
            .args(["-h", "127.0.0.1", "-q"])
            .status()
            .is_ok_and(|s| s.success())
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    restarted && dropped
}

/// Writes the events of `users` users: how long it took, and how many.
async fn load(store: &Store, users: u64) -> (Duration, usize) {
    let start = Instant::now();
    let mut written = 0;
    let mut first = 0;
    while first < users {
        let last = (first + BATCH_USERS).min(users);
        let events = scale::events(first..last, users, DAYS, START);
        for chunk in events.chunks(10_000) {
            store.append_events(chunk).await.expect("append");
        }
        written += events.len();
        first = last;
    }
    (start.elapsed(), written)
}

fn query(catalog: &Catalog, window: Option<(OffsetDateTime, OffsetDateTime)>) -> ResultsQuery {
    let (app, experiment) = catalog
        .experiment(ExperimentId::from_uuid(uuid::Uuid::from_u128(
            scale::EXPERIMENT,
        )))
        .expect("the experiment");
    let (from, to) = match window {
        Some((from, to)) => (Some(from), to),
        None => (None, START + time::Duration::days(i64::from(DAYS) + 1)),
    };
    ResultsQuery::new(
        app.id(),
        experiment,
        from,
        to,
        &[],
        "USD",
        [("EUR".to_owned(), 1.08)].into_iter().collect(),
    )
}

/// Seconds of one report: the store's query and the domain's report.
async fn timed(store: &Store, catalog: &Catalog, q: &ResultsQuery) -> (f64, u64) {
    let start = Instant::now();
    let data = store.experiment_results(q).await.expect("results");
    let (app, experiment) = catalog.experiment(q.experiment_id).expect("experiment");
    let r = report(app.id(), experiment, q, &data);
    (start.elapsed().as_secs_f64(), r.exposed_users)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn run(backend: &str, url: &str, users: u64, fresh: bool, cold: bool) {
    let store = Store::connect(url, StoreOptions::default()).unwrap();
    let catalog = Catalog::build(scale::catalog()).expect("the scale catalog builds");
    let events = if fresh {
        store.migrate().await.unwrap();
        store.replace_catalog(&scale::catalog()).await.unwrap();
        let (took, written) = load(&store, users).await;
        if url.starts_with("postgres") {
            psql(
                url.rsplit('/').next().unwrap(),
                "VACUUM ANALYZE analytics_events",
            );
        }
        format!("{written} events loaded in {:.1} s", took.as_secs_f64())
    } else {
        "kept from an earlier run".to_owned()
    };
    println!("{backend}: {users} users, {events}");
    let full = query(&catalog, None);
    let window = query(
        &catalog,
        Some((
            START + time::Duration::days(3),
            START + time::Duration::days(6),
        )),
    );
    let cold_row = if cold && backend == "PostgreSQL" {
        drop(store);
        let made = make_cold();
        let store = Store::connect(url, StoreOptions::default()).unwrap();
        let (s, exposed) = timed(&store, &catalog, &full).await;
        Some((s, exposed, made, store))
    } else {
        None
    };
    let store = match cold_row {
        Some((s, exposed, made, store)) => {
            println!(
                "| {backend} | whole experiment, cold{} | {exposed} | {s:.3} |",
                if made {
                    ""
                } else {
                    " (restart or cache drop refused: first run only)"
                }
            );
            store
        }
        None => {
            let store = Store::connect(url, StoreOptions::default()).unwrap();
            let (s, exposed) = timed(&store, &catalog, &full).await;
            println!("| {backend} | whole experiment, first run | {exposed} | {s:.3} |");
            store
        }
    };
    for (what, q) in [
        ("whole experiment, warm", &full),
        ("three days (from/to), warm", &window),
    ] {
        // Both methods (D27) in turns, so drift in the machine falls on both alike.
        let fixed = q.clone().with_method(Method::FixedHorizon);
        let sequential = q
            .clone()
            .with_method(Method::Sequential(SequentialConfig::default()));
        let (mut times, mut fixed_times) = (Vec::new(), Vec::new());
        let mut exposed = 0;
        // The store runs the same query for both (the method is the domain's); which goes
        // first in a pair alternates, since the first of two back-to-back reads is the slower.
        for i in 0..10 {
            if i % 2 == 1 {
                fixed_times.push(timed(&store, &catalog, &fixed).await.0);
            }
            let (s, e) = timed(&store, &catalog, &sequential).await;
            times.push(s);
            exposed = e;
            if i % 2 == 0 {
                fixed_times.push(timed(&store, &catalog, &fixed).await.0);
            }
        }
        let (s, f) = (median(times), median(fixed_times));
        // The method's own cost, apart from the query's noise: the domain's report alone on
        // the data of the last read, each method 200 times in turns.
        let data = store.experiment_results(q).await.expect("results");
        let (app, experiment) = catalog.experiment(q.experiment_id).expect("experiment");
        let (mut s_report, mut f_report) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..200 {
            let start = Instant::now();
            std::hint::black_box(report(app.id(), experiment, &sequential, &data));
            s_report += start.elapsed();
            let start = Instant::now();
            std::hint::black_box(report(app.id(), experiment, &fixed, &data));
            f_report += start.elapsed();
        }
        println!(
            "| {backend} | {what}: the report alone, sequential / fixed horizon (200 each) | {exposed} | {:.1} µs / {:.1} µs |",
            s_report.as_secs_f64() * 1e6 / 200.0,
            f_report.as_secs_f64() * 1e6 / 200.0
        );
        println!("| {backend} | {what}, sequential (median of 10) | {exposed} | {s:.3} |");
        println!(
            "| {backend} | {what}, fixed horizon (median of 10) | {exposed} | {f:.3} (sequential / fixed: {:.3}) |",
            s / f
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let users: u64 = std::env::var("RESULTS_USERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let backends = std::env::var("RESULTS_BACKENDS").unwrap_or_else(|_| "postgres".to_owned());
    let keep = std::env::var("RESULTS_KEEP").is_ok_and(|v| v == "1");
    let cold = std::env::var("RESULTS_COLD").is_ok_and(|v| v == "1");
    println!("| backend | report | exposed users | seconds |");
    println!("|---|---|---|---|");
    if backends.contains("postgres") {
        let db = format!("flowgate_results_bench_{users}");
        let exists = psql(
            "postgres",
            &format!("SELECT count(*) FROM pg_database WHERE datname = '{db}'"),
        ) == "1";
        let fresh = !(keep && exists);
        if fresh {
            if exists {
                psql("postgres", &format!("DROP DATABASE {db} WITH (FORCE)"));
            }
            psql("postgres", &format!("CREATE DATABASE {db}"));
        }
        run(
            "PostgreSQL",
            &format!("postgres://postgres@127.0.0.1:5432/{db}"),
            users,
            fresh,
            cold,
        )
        .await;
        if !keep {
            psql("postgres", &format!("DROP DATABASE {db} WITH (FORCE)"));
        }
    }
    if backends.contains("sqlite") {
        let dir =
            std::env::temp_dir().join(format!("flowgate-results-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("results.db").display());
        run("SQLite", &url, users / 10, true, false).await;
        std::fs::remove_dir_all(&dir).ok();
    }
}
