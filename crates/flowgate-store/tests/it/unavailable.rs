//! An unreachable database is `StoreError::Unavailable`, quickly: never a panic or a hang.

use flowgate_domain::events::AnalyticsEvent;
use std::time::{Duration, Instant};

use flowgate_domain::ports::{CatalogSource, EventStore, KeyStore, StoreError};
use flowgate_store::{Store, StoreOptions};

use crate::support::{ws, WS1};

fn short() -> StoreOptions {
    StoreOptions {
        connect_timeout: Duration::from_millis(500),
        acquire_timeout: Duration::from_millis(500),
        ..StoreOptions::default()
    }
}

async fn assert_unavailable(store: &Store) {
    let started = Instant::now();
    let results = [
        store.load_catalog().await.map(|_| ()),
        store.revision().await.map(|_| ()),
        store
            .wait_for_change(1, Duration::from_secs(30))
            .await
            .map(|_| ()),
        store
            .append_events(&[AnalyticsEvent::sample(1)])
            .await
            .map(|_| ()),
        store.list_keys(ws(WS1)).await.map(|_| ()),
        store.migrate().await.map(|_| ()),
    ];
    for (i, result) in results.into_iter().enumerate() {
        assert!(
            matches!(result, Err(StoreError::Unavailable { .. })),
            "operation {i}: {result:?}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_unavailable() {
    // Nothing listens on port 1.
    let store = Store::connect("postgres://postgres@127.0.0.1:1/postgres", short()).expect("lazy");
    assert_unavailable(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_is_unavailable_after_the_connect_timeout() {
    // Accepts TCP connections (the kernel's backlog) but never speaks PostgreSQL.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("addr").port();
    let store = Store::connect(
        &format!("postgres://postgres@127.0.0.1:{port}/postgres"),
        short(),
    )
    .expect("lazy");
    assert_unavailable(&store).await;
    drop(silent);
}

#[test]
fn unsupported_urls_are_refused() {
    for url in ["mysql://localhost/x", "sqlite::memory:", "sqlite://", ""] {
        let err = Store::connect(url, StoreOptions::default()).expect_err(url);
        assert!(matches!(err, StoreError::Config { .. }), "{url}: {err:?}");
    }
}

/// A store's identity names the database (D20's cache check): credentials and options do not
/// change it, another host, port or database does; libpq's defaults fill what a URL leaves out.
#[tokio::test]
async fn the_identity_names_host_port_and_database_only() {
    let identity = |url: &str| Store::connect(url, short()).unwrap().identity();
    let base = identity("postgres://fg:one@db.example.com:5433/flowgate?sslmode=require");
    assert_eq!(base, "postgres://db.example.com:5433/flowgate");
    assert_eq!(
        identity("postgresql://other:two@db.example.com:5433/flowgate?application_name=x"),
        base
    );
    assert_ne!(
        identity("postgres://fg@db.example.com:5433/flowgate2"),
        base
    );
    assert_ne!(
        identity("postgres://fg@db2.example.com:5433/flowgate"),
        base
    );
    assert_eq!(
        identity("postgres://fg@db.example.com/fg"),
        "postgres://db.example.com:5432/fg"
    );
    assert_eq!(
        identity("postgres://alice@db.example.com"),
        "postgres://db.example.com:5432/alice"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fg.db");
    let sqlite = identity(&format!("sqlite://{}", file.display()));
    assert!(
        sqlite.starts_with("sqlite:/") && sqlite.ends_with("/fg.db"),
        "{sqlite}"
    );
    assert_eq!(identity(&format!("sqlite:{}", file.display())), sqlite);
}
