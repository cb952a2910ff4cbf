//! TLS to PostgreSQL: the `sslmode` and `sslrootcert` URL parameters against the local server,
//! and, through a TLS proxy in front of it, against certificates of authorities the tests
//! make (another host, another authority, the system's roots).
//!
//! The tests that need TLS skip, with a message, only when the server reports `ssl = off`.
//! Debian's cluster (the one `make pg-up` starts) has `ssl = on` with the "snakeoil"
//! certificate: self-signed, `CN = localhost`, one name `DNS:localhost` and no IP address. So
//! with that file as `sslrootcert`, `verify-full` to `127.0.0.1` fails on the host name,
//! `verify-ca` to `127.0.0.1` passes (chain only), and `verify-full` to `localhost` passes.
//! The certificate is the server's own `ssl_cert_file`, read from disk (the server's
//! configuration is never changed).

use flowgate_domain::events::AnalyticsEvent;
use std::time::{Duration, Instant};

use diesel::sql_types::{Bool, Text};
use diesel::QueryableByName;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use flowgate_domain::ports::{CatalogSource, KeyStore, StoreError};
use flowgate_store::{Store, StoreOptions, TlsMode};
use flowgate_testkit::{pg_skip_allowed, test_options, TestCa, TlsProxy};
use time::OffsetDateTime;

use crate::support::{self, TestDb, WS1};

#[derive(QueryableByName)]
struct Setting {
    #[diesel(sql_type = Text)]
    value: String,
}

#[derive(QueryableByName)]
struct Ssl {
    #[diesel(sql_type = Bool)]
    ssl: bool,
}

/// A plain-text observer connection to the test database.
async fn observer(db: &TestDb) -> AsyncPgConnection {
    AsyncPgConnection::establish(&with(&db.url, "sslmode=disable"))
        .await
        .expect("observer connection")
}

async fn setting(db: &TestDb, name: &str) -> String {
    let rows: Vec<Setting> = diesel::sql_query(format!(
        "SELECT setting AS value FROM pg_settings WHERE name = '{name}'"
    ))
    .load(&mut observer(db).await)
    .await
    .expect("read a setting");
    rows.into_iter().next().expect("setting exists").value
}

/// A migrated PostgreSQL database on a server with `ssl = on`. A server that is not reachable,
/// or reports `ssl = off`, fails the test unless `FLOWGATE_TEST_SKIP_PG=1` allows skipping.
async fn tls_db() -> Option<TestDb> {
    let db = TestDb::postgres().await?;
    if setting(&db, "ssl").await != "on" {
        let why = "the PostgreSQL server reports `ssl = off`; these tests need a server with \
                   TLS (Debian's cluster has it on with the snakeoil certificate)";
        assert!(
            pg_skip_allowed(),
            "{why} (FLOWGATE_TEST_SKIP_PG=1 skips them)"
        );
        eprintln!("SKIPPED: {why}");
        return None;
    }
    Some(db)
}

/// The server's certificate (PEM file path), when this process can read it. A certificate it
/// cannot read (a remote `FLOWGATE_TEST_PG_URL`) fails the test unless
/// `FLOWGATE_TEST_SKIP_PG=1` allows skipping.
async fn server_cert(db: &TestDb) -> Option<(String, Vec<u8>)> {
    let mut path = setting(db, "ssl_cert_file").await;
    if !path.starts_with('/') {
        path = format!("{}/{path}", setting(db, "data_directory").await);
    }
    match std::fs::read(&path) {
        Ok(pem) => Some((path, pem)),
        Err(e) if pg_skip_allowed() => {
            eprintln!("SKIPPED: cannot read the server's certificate {path}: {e}");
            None
        }
        Err(e) => panic!(
            "cannot read the server's certificate {path}: {e} (FLOWGATE_TEST_SKIP_PG=1 skips)"
        ),
    }
}

/// `url` with one more query parameter.
fn with(url: &str, param: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

/// `db.url` with the password `secret` added to its user (trust authentication ignores it).
fn with_password(db: &TestDb, secret: &str) -> String {
    let (scheme, rest) = db.url.split_once("://").expect("scheme");
    match rest.split_once('@') {
        Some((user, host)) if !user.contains(':') => format!("{scheme}://{user}:{secret}@{host}"),
        _ => db.url.clone(),
    }
}

fn connect(url: &str) -> Store {
    Store::connect(url, test_options()).expect("store")
}

fn message(err: &StoreError) -> String {
    err.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_encrypts_and_disable_does_not() {
    let Some(db) = tls_db().await else { return };
    let store = connect(&with(&db.url, "sslmode=require"));
    assert_eq!(store.tls_mode(), Some(TlsMode::Require));
    assert!(store.uses_tls().await.expect("query"), "require: no TLS");

    let store = connect(&with(&db.url, "sslmode=disable"));
    assert_eq!(store.tls_mode(), Some(TlsMode::Disable));
    assert!(!store.uses_tls().await.expect("query"), "disable: TLS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_sslmode_tls_is_preferred() {
    let Some(db) = tls_db().await else { return };
    assert_eq!(db.store.tls_mode(), Some(TlsMode::Prefer));
    assert!(db.store.uses_tls().await.expect("query"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_checks_the_host_name_and_verify_ca_does_not() {
    let Some(db) = tls_db().await else { return };
    let Some((cert, pem)) = server_cert(&db).await else {
        return;
    };
    let root = format!("sslrootcert={cert}");
    let authority = db.server_authority();
    let port = authority.rsplit_once(':').map_or("5432", |(_, port)| port);
    let on_ip = db.url_via(&format!("127.0.0.1:{port}"));

    // The certificate names no IP address (snakeoil: DNS:localhost only).
    let store = connect(&with(&with(&on_ip, "sslmode=verify-full"), &root));
    let err = store
        .revision()
        .await
        .expect_err("verify-full to 127.0.0.1");
    assert!(matches!(err, StoreError::Unavailable { .. }), "{err:?}");
    assert!(
        message(&err).contains("not valid for the host `127.0.0.1`"),
        "{err}"
    );

    // The chain is good: verify-ca passes, and so does require with a root (libpq: verify-ca).
    let store = connect(&with(&with(&on_ip, "sslmode=verify-ca"), &root));
    assert!(store.uses_tls().await.expect("verify-ca to 127.0.0.1"));
    let store = connect(&with(&with(&on_ip, "sslmode=require"), &root));
    assert_eq!(store.tls_mode(), Some(TlsMode::VerifyCa));
    assert!(store.uses_tls().await.expect("require + sslrootcert"));

    // By the name the certificate carries (connecting to 127.0.0.1 all the same).
    if pem_names_localhost(&pem) {
        let by_name = db.url_via(&format!("localhost:{port}"));
        let url = with(
            &with(&with(&by_name, "hostaddr=127.0.0.1"), "sslmode=verify-full"),
            &root,
        );
        let store = connect(&url);
        assert!(store.uses_tls().await.expect("verify-full to localhost"));
    } else {
        eprintln!("the server certificate does not name localhost: verify-full by name not run");
    }
}

/// Whether the PEM certificate's DER holds the string `localhost` (its CN or DNS name).
fn pem_names_localhost(pem: &[u8]) -> bool {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .flatten()
        .any(|der| der.windows(9).any(|w| w == b"localhost"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_batches_are_copied_over_the_same_tls() {
    use flowgate_domain::ports::EventStore;
    let Some(db) = tls_db().await else { return };
    for (mode, encrypted) in [("require", true), ("disable", false)] {
        // A store of its own, named by its round: the previous round's connections may still
        // be closing, so only this store's COPY client is counted.
        let app = format!("flowgate-copy-tls-{mode}");
        let url = with(
            &with(&db.url, &format!("sslmode={mode}")),
            &format!("application_name={app}"),
        );
        let store = connect(&url);
        store
            .append_events(&[AnalyticsEvent::sample(1)])
            .await
            .expect("append");
        let copying: Vec<Ssl> = diesel::sql_query(format!(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.datname = current_database() AND a.application_name = '{app}' \
             AND a.query LIKE 'COPY analytics_events%'"
        ))
        .load(&mut observer(&db).await)
        .await
        .expect("connections");
        assert_eq!(copying.len(), 1, "{mode}: one COPY client");
        assert_eq!(copying[0].ssl, encrypted, "{mode}");
        diesel::sql_query("DELETE FROM analytics_events")
            .execute(&mut observer(&db).await)
            .await
            .expect("clean");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_notify_works_over_tls() {
    let Some(db) = tls_db().await else { return };
    let store = connect(&with(&db.url, "sslmode=require"));
    store
        .replace_catalog(&support::catalog())
        .await
        .expect("write");
    let known = store.revision().await.expect("revision");
    let waiter = {
        let store = store.clone();
        tokio::spawn(async move { store.wait_for_change(known, Duration::from_secs(20)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "returned before any change");

    // Every connection of the store, the listening one too, is encrypted.
    let plain: Vec<Ssl> = diesel::sql_query(
        "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
         WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()",
    )
    .load(&mut observer(&db).await)
    .await
    .expect("connections");
    assert!(plain.len() >= 2, "{} connections", plain.len());
    assert!(plain.iter().all(|c| c.ssl), "a connection without TLS");

    let written = Instant::now();
    db.store
        .insert_key(support::key_record(WS1, 'z', OffsetDateTime::now_utc()))
        .await
        .expect("write from another store");
    let revision = waiter.await.expect("waiter").expect("wait_for_change");
    assert!(revision > known);
    assert!(written.elapsed() < Duration::from_secs(2), "woke late");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_run_over_tls() {
    let Some(db) = tls_db().await else { return };
    let store = connect(&with(&db.url, "sslmode=require"));
    assert!(store.migrate().await.expect("migrate").is_empty());
    assert!(!store.applied_migrations().await.expect("list").is_empty());
}

// ---------------------------------------------------------------------------------------------
// Errors: clear, and never the password

#[test]
fn bad_tls_parameters_fail_at_connect_naming_the_parameter() {
    let err = Store::connect(
        "postgres://u:pw-XYZZY@127.0.0.1/db?sslmode=always",
        StoreOptions::default(),
    )
    .expect_err("unknown sslmode");
    assert!(matches!(err, StoreError::Config { .. }), "{err:?}");
    assert!(message(&err).contains("sslmode=always"), "{err}");
    assert!(!message(&err).contains("pw-XYZZY"), "{err}");

    let err = Store::connect(
        "postgres://u:pw-XYZZY@127.0.0.1/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
        StoreOptions::default(),
    )
    .expect_err("missing root");
    assert!(
        message(&err).contains("sslrootcert=/nonexistent/ca.pem"),
        "{err}"
    );

    let err = Store::connect(
        "postgres://u:pw-XYZZY@127.0.0.1:port/db",
        StoreOptions::default(),
    )
    .expect_err("bad port");
    assert!(!message(&err).contains("pw-XYZZY"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_errors_never_contain_the_password() {
    let options = StoreOptions {
        connect_timeout: Duration::from_millis(500),
        acquire_timeout: Duration::from_millis(500),
        ..StoreOptions::default()
    };
    // Refused, every mode.
    let ca = TestCa::new("any");
    for mode in ["disable", "prefer", "require", "verify-full"] {
        let mut url = format!("postgres://flowgate:pw-XYZZY@127.0.0.1:1/db?sslmode={mode}");
        if mode == "verify-full" {
            url = with(&url, &ca.sslrootcert());
        }
        let store = Store::connect(&url, options.clone()).expect("lazy");
        for err in [
            store.revision().await.expect_err("refused"),
            store.migrate().await.expect_err("refused"),
            store
                .wait_for_change(1, Duration::from_secs(5))
                .await
                .expect_err("refused"),
        ] {
            let text = format!("{err} {err:?}");
            assert!(!text.contains("pw-XYZZY"), "{mode}: {text}");
        }
        assert!(!format!("{store:?}").contains("pw-XYZZY"));
    }

    // A TLS failure against the real server (trust authentication ignores the password): its
    // certificate is not from the authority named.
    let Some(db) = tls_db().await else { return };
    let url = with(
        &with(&with_password(&db, "pw-XYZZY"), "sslmode=verify-full"),
        &ca.sslrootcert(),
    );
    let store = Store::connect(&url, options).expect("lazy");
    let err = store.revision().await.expect_err("self-signed");
    let text = format!("{err} {err:?}");
    assert!(!text.contains("pw-XYZZY"), "{text}");
    assert!(text.contains("certificate"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// libpq's rules, against certificates the tests issue: a proxy in front of the server presents
// them (testkit::TlsProxy), so every case is exact whatever the server's own certificate.

/// A proxy presenting a certificate of `ca` for `names`; the database's URL through it with
/// the host `host` and the parameters `params`.
async fn through_proxy(
    db: &TestDb,
    ca: &TestCa,
    names: &[&str],
    host: &str,
    params: &[&str],
) -> (TlsProxy, String) {
    let proxy = TlsProxy::start(db.server_authority(), &ca.issue(names)).await;
    let mut url = db.url_via(&format!("{host}:{}", proxy.addr.port()));
    if host == "localhost" {
        // The proxy listens on IPv4 only.
        url = with(&url, "hostaddr=127.0.0.1");
    }
    for param in params {
        url = with(&url, param);
    }
    (proxy, url)
}

async fn refused(url: &str) -> String {
    let store = Store::connect(url, test_options()).expect("the URL is valid");
    message(
        &store
            .revision()
            .await
            .expect_err("the certificate is refused"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_named_authority_and_host_are_accepted() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let ca = TestCa::new("ours");
    for mode in ["sslmode=verify-full", "sslmode=verify-ca"] {
        let (_proxy, url) = through_proxy(
            &db,
            &ca,
            &["localhost"],
            "localhost",
            &[mode, &ca.sslrootcert()],
        )
        .await;
        connect(&url).revision().await.expect(mode);
    }
    // An IP address the certificate names.
    let (_proxy, url) = through_proxy(
        &db,
        &ca,
        &["127.0.0.1"],
        "127.0.0.1",
        &["sslmode=verify-full", &ca.sslrootcert()],
    )
    .await;
    connect(&url)
        .revision()
        .await
        .expect("verify-full to a named IP");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_refuses_a_certificate_for_another_host_naming_the_setting() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let ca = TestCa::new("ours");
    let (_proxy, url) = through_proxy(
        &db,
        &ca,
        &["db.example.com"],
        "localhost",
        &["sslmode=verify-full", &ca.sslrootcert()],
    )
    .await;
    let err = refused(&url).await;
    assert!(
        err.contains("not valid for the host `localhost`") && err.contains("sslmode=verify-full"),
        "{err}"
    );
    // verify-ca checks the chain only: the same certificate passes.
    let (_proxy, url) = through_proxy(
        &db,
        &ca,
        &["db.example.com"],
        "localhost",
        &["sslmode=verify-ca", &ca.sslrootcert()],
    )
    .await;
    connect(&url)
        .revision()
        .await
        .expect("verify-ca ignores the host");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_of_another_authority_is_refused_naming_sslrootcert() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let theirs = TestCa::new("theirs");
    let ours = TestCa::new("ours");
    for mode in [
        "sslmode=verify-full",
        "sslmode=verify-ca",
        "sslmode=require",
    ] {
        let (_proxy, url) = through_proxy(
            &db,
            &theirs,
            &["localhost"],
            "localhost",
            &[mode, &ours.sslrootcert()],
        )
        .await;
        let err = refused(&url).await;
        assert!(
            err.contains("not trusted") && err.contains(&ours.sslrootcert()),
            "{mode}: {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_encrypts_without_checking_the_certificate() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let theirs = TestCa::new("theirs");
    let (_proxy, url) = through_proxy(
        &db,
        &theirs,
        &["db.example.com"],
        "localhost",
        &["sslmode=require"],
    )
    .await;
    let store = connect(&url);
    assert_eq!(store.tls_mode(), Some(TlsMode::Require));
    store
        .revision()
        .await
        .expect("require checks no certificate");
}

#[test]
fn verifying_modes_need_a_root_and_a_missing_file_is_named() {
    for mode in ["verify-ca", "verify-full"] {
        let err = Store::connect(
            &format!("postgres://u@127.0.0.1/db?sslmode={mode}"),
            StoreOptions::default(),
        )
        .expect_err("no sslrootcert");
        let text = message(&err);
        assert!(
            text.contains(&format!("sslmode={mode} needs sslrootcert")),
            "{text}"
        );
        let err = Store::connect(
            &format!("postgres://u@127.0.0.1/db?sslmode={mode}&sslrootcert=/nonexistent/root.pem"),
            StoreOptions::default(),
        )
        .expect_err("missing file");
        assert!(
            message(&err).contains("sslrootcert=/nonexistent/root.pem")
                && message(&err).contains("cannot read it"),
            "{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslrootcert_system_needs_verify_full_and_trusts_the_system_roots_only() {
    for mode in ["disable", "prefer", "require", "verify-ca"] {
        let err = Store::connect(
            &format!("postgres://u@127.0.0.1/db?sslmode={mode}&sslrootcert=system"),
            StoreOptions::default(),
        )
        .expect_err("system with a weaker mode");
        assert!(
            message(&err).contains(&format!(
                "sslrootcert=system needs sslmode=verify-full, not sslmode={mode}"
            )),
            "{err}"
        );
    }
    // Without sslmode it means verify-full (PostgreSQL 16's libpq).
    let store = Store::connect(
        "postgres://u@127.0.0.1/db?sslrootcert=system",
        StoreOptions::default(),
    )
    .expect("system roots");
    assert_eq!(store.tls_mode(), Some(TlsMode::VerifyFull));
    // A private authority is not among the system's roots.
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let ca = TestCa::new("private");
    let (_proxy, url) = through_proxy(
        &db,
        &ca,
        &["localhost"],
        "localhost",
        &["sslrootcert=system"],
    )
    .await;
    let err = refused(&url).await;
    assert!(
        err.contains("not trusted") && err.contains("sslrootcert=system"),
        "{err}"
    );
}
