//! A report past its time limit (D22) is a `Timeout`, on every runtime and both backends'
//! slowest case: a SQLite database locked by another process. Reads are never cancelled in
//! the middle of a statement (diesel-async blocks in place when one is, which panics on a
//! current-thread runtime such as each of actix's workers), so nothing panics and the reads
//! left running stay within the reader's connections.

use std::time::{Duration, Instant};

use diesel::connection::SimpleConnection;
use diesel::Connection;
use flowgate_contract_tests::fixtures::catalogs;
use flowgate_domain::ids::ExperimentId;
use flowgate_domain::ports::{Outage, ResultsSource, StoreError};
use flowgate_domain::results::ResultsQuery;
use flowgate_store::{ResultsReader, Store, StoreOptions};
use time::OffsetDateTime;

use crate::support::TestDb;

fn is_timeout<T: std::fmt::Debug>(result: &Result<T, StoreError>) -> bool {
    matches!(
        result,
        Err(StoreError::Unavailable {
            reason: Outage::Timeout,
            ..
        })
    )
}

// A current-thread runtime, as an actix worker's.
#[tokio::test]
async fn a_locked_sqlite_database_times_out_64_reports_at_100_ms_without_a_panic() {
    let db = TestDb::sqlite().await;
    let path = db.url.trim_start_matches("sqlite://").to_owned();
    // Another process's exclusive lock: taken while no other connection is open, kept after
    // the write's commit (`locking_mode = EXCLUSIVE`), so every reader waits for it.
    let mut locker = diesel::SqliteConnection::establish(&path).expect("connect");
    locker
        .batch_execute(
            "PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; \
             CREATE TABLE held_lock (x INTEGER); COMMIT;",
        )
        .expect("the exclusive lock");

    let store = Store::connect(&db.url, StoreOptions::default()).expect("lazy");
    let limit = Duration::from_millis(100);
    let reader = ResultsReader::new(store, limit, 4);
    let catalog = catalogs::build(&catalogs::catalog_json());
    let experiment_id = ExperimentId::from_uuid(catalogs::EXP.parse().expect("uuid"));
    let (app, experiment) = catalog.experiment(experiment_id).expect("the experiment");
    let query = ResultsQuery::new(
        app.id(),
        experiment,
        None,
        OffsetDateTime::now_utc(),
        &[],
        "USD",
        Default::default(),
    );

    let started = Instant::now();
    let reports =
        futures_util::future::join_all((0..64).map(|_| reader.experiment_results(&query))).await;
    let counted = flowgate_domain::results::ExposureCountQuery {
        app_id: app.id(),
        experiments: vec![(
            experiment.id(),
            experiment.variants().iter().map(|v| v.id()).collect(),
        )],
        to: OffsetDateTime::now_utc(),
    };
    let lists =
        futures_util::future::join_all((0..8).map(|_| reader.exposure_counts(&counted))).await;
    let elapsed = started.elapsed();
    for (i, report) in reports.iter().enumerate() {
        assert!(is_timeout(report), "report {i}: {report:?}");
    }
    for (i, list) in lists.iter().enumerate() {
        assert!(is_timeout(list), "list {i}: {list:?}");
    }
    // Each waited its own limit, side by side.
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");

    // The lock gone, the reads left running finish and the next report is read.
    drop(locker);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match reader.experiment_results(&query).await {
            Ok(data) => {
                assert!(data.variants.iter().all(|v| v.users == 0), "{data:?}");
                break;
            }
            Err(e) if is_timeout(&Err::<(), _>(e.clone())) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("after the lock: {e:?}"),
        }
    }
}
