//! Test support shared by flowgate's crates (never used by the service itself).
//!
//! [`TestDb`] gives each test a fresh, migrated database of one backend with a store on it:
//!
//! - PostgreSQL: its own database `flowgate_test_<unix seconds>_<random>` on the server at
//!   `FLOWGATE_TEST_PG_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`), dropped
//!   when the `TestDb` is dropped, also when the test panics. Databases of crashed runs (older
//!   than an hour, by the time in their name) are swept before each test. A server that cannot
//!   be reached fails the test, unless `FLOWGATE_TEST_SKIP_PG=1` is set on purpose, which
//!   skips the PostgreSQL variants with a message.
//! - SQLite: a file in a fresh temporary folder, removed on drop.
//!
//! [`Proxy`] is a TCP proxy on 127.0.0.1 that a test cuts and restores, to take a store away
//! mid-test (fault tests of the sink and of resolve during a store outage).
//!
//! [`NatsServer`] and [`NatsCluster`] are `nats-server` processes with JetStream of the test's
//! own, on free ports, for the event bus (D16).
//!
//! [`revert_through`] steps a store's migrations back past one of them, for tests of that
//! migration on a database with data.
//!
//! [`per_backend!`] defines a test case once per backend.
//!
//!
//! [`TestCa`] and [`TlsProxy`] give TLS tests certificates of their own: a proxy in front of
//! PostgreSQL presents the certificate the test issued (another host, another authority).
//!
//! [`OidcProvider`] is a real OpenID Connect provider (Node's `oidc-provider`) for sign-in
//! tests.
//!
//! [`npm_ci`] installs a Node project of `reliability/` ([`node_project`]) once for all tests.
//!
//! Setup failures panic on purpose: this is test code, and a broken setup must stop the test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod matrix;
mod nats;
mod node;
mod oidc_provider;
mod proxy;
mod tls;

pub use nats::{NatsCluster, NatsServer};
pub use node::{node_project, npm_ci};
pub use oidc_provider::OidcProvider;

/// A port on 127.0.0.1 that was free a moment ago (bound, then released): for a server a test
/// starts, or as an address nothing listens on.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("its address")
        .port()
}
pub use proxy::Proxy;
pub use tls::{ServerCert, TestCa, TlsProxy};

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use diesel::sql_types::{BigInt, Text};
use diesel::QueryableByName;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use flowgate_store::{Backend, Store, StoreOptions};

const DB_PREFIX: &str = "flowgate_test_";
const STALE_AFTER_SECS: u64 = 3600;

fn admin_url() -> String {
    std::env::var("FLOWGATE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// `admin_url` with its database replaced by `db`.
fn url_for(db: &str) -> String {
    let admin = admin_url();
    match admin.rfind('/') {
        Some(i) if i > "postgres://".len() => format!("{}/{db}", &admin[..i]),
        _ => format!("{admin}/{db}"),
    }
}

/// Splits `postgres://user@host:port/db` into (`postgres://user@`, `host:port`, `/db...`).
fn split_url(url: &str) -> (String, String, String) {
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[scheme_end..];
    let path_start = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..path_start];
    let host_start = authority.rfind('@').map_or(0, |i| i + 1);
    (
        format!("{}{}", &url[..scheme_end], &authority[..host_start]),
        authority[host_start..].to_owned(),
        rest[path_start..].to_owned(),
    )
}

/// Runs `command` with `psql` on database `db` of the benchmarks' PostgreSQL (127.0.0.1:5432,
/// user `postgres`), stopping at the first error; its output, unaligned and without headers.
/// Panics with psql's message when it fails.
pub fn psql(db: &str, command: &str) -> String {
    let out = std::process::Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            db,
            "-v",
            "ON_ERROR_STOP=1",
            "-Atqc",
            command,
        ])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql {command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Whether tests may skip what needs PostgreSQL when it cannot be used: only when
/// `FLOWGATE_TEST_SKIP_PG=1` says so on purpose. Otherwise a test that cannot reach its
/// database fails, it never passes silently.
pub fn pg_skip_allowed() -> bool {
    std::env::var("FLOWGATE_TEST_SKIP_PG").is_ok_and(|v| v == "1" || v == "true")
}

/// Short timeouts: a broken setup fails fast instead of hanging the suite.
pub fn test_options() -> StoreOptions {
    StoreOptions {
        max_connections: Some(4),
        copy_connections: 4,
        connect_timeout: Duration::from_secs(5),
        acquire_timeout: Duration::from_secs(5),
        sqlite_busy_timeout: Duration::from_secs(5),
        poll_interval: Duration::from_millis(50),
        ..StoreOptions::default()
    }
}

/// Reverts the newest migrations one at a time until `version` is reverted too; returns the
/// reverted versions, newest first. For a test or benchmark of one migration on a database with
/// data, whatever migrations came after it.
pub async fn revert_through(store: &Store, version: &str) -> Vec<String> {
    let mut reverted = Vec::new();
    while reverted.last().map(String::as_str) != Some(version) {
        let step = store
            .revert_last_migration()
            .await
            .expect("revert a migration");
        assert!(!step.is_empty(), "migration {version} was never applied");
        reverted.extend(step);
    }
    reverted
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[derive(QueryableByName)]
struct DbName {
    #[diesel(sql_type = Text)]
    datname: String,
}

/// The result of a `SELECT count(*) AS n` query.
#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

async fn admin_connection() -> Result<AsyncPgConnection, String> {
    match tokio::time::timeout(
        Duration::from_secs(5),
        AsyncPgConnection::establish(&admin_url()),
    )
    .await
    {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out".to_owned()),
    }
}

/// Drops test databases left by crashed runs. Databases of tests running right now are
/// younger than the cut-off, so concurrent test processes are never disturbed.
async fn sweep(conn: &mut AsyncPgConnection) {
    let names: Vec<DbName> = diesel::sql_query("SELECT datname FROM pg_database")
        .load(conn)
        .await
        .expect("list databases");
    let cutoff = now_secs().saturating_sub(STALE_AFTER_SECS);
    for DbName { datname } in names {
        let Some(rest) = datname.strip_prefix(DB_PREFIX) else {
            continue;
        };
        let created = rest.split('_').next().and_then(|s| s.parse::<u64>().ok());
        if created.is_some_and(|t| t < cutoff) {
            let _ = diesel::sql_query(format!(
                "DROP DATABASE IF EXISTS \"{datname}\" WITH (FORCE)"
            ))
            .execute(conn)
            .await;
        }
    }
}

enum Cleanup {
    Postgres { name: String },
    Sqlite { dir: std::path::PathBuf },
}

/// A fresh database of one backend, with a store on it; removed on drop.
pub struct TestDb {
    /// The store on the database.
    pub store: Store,
    /// Its URL (for a second store, or a raw connection).
    pub url: String,
    cleanup: Cleanup,
}

impl TestDb {
    /// A migrated PostgreSQL database, or `None` when the server is down and
    /// `FLOWGATE_TEST_SKIP_PG=1` allows skipping (else the test fails).
    pub async fn postgres() -> Option<TestDb> {
        let db = Self::postgres_unmigrated().await?;
        db.store.migrate().await.expect("migrations apply");
        Some(db)
    }

    /// A migrated SQLite file.
    pub async fn sqlite() -> TestDb {
        let db = Self::sqlite_unmigrated();
        db.store.migrate().await.expect("migrations apply");
        db
    }

    /// An empty PostgreSQL database, or `None` when the server is down and
    /// `FLOWGATE_TEST_SKIP_PG=1` allows skipping (else the test fails).
    pub async fn postgres_unmigrated() -> Option<TestDb> {
        let mut admin = match admin_connection().await {
            Ok(conn) => conn,
            Err(e) if pg_skip_allowed() => {
                eprintln!(
                    "SKIPPED (FLOWGATE_TEST_SKIP_PG=1): PostgreSQL at {} is not reachable ({e})",
                    admin_url()
                );
                return None;
            }
            Err(e) => panic!(
                "PostgreSQL at {} is not reachable ({e}): start it with `make pg-up`, point \
                 FLOWGATE_TEST_PG_URL at one, or set FLOWGATE_TEST_SKIP_PG=1 to skip these tests",
                admin_url()
            ),
        };
        sweep(&mut admin).await;
        let name = format!(
            "{DB_PREFIX}{}_{}",
            now_secs(),
            uuid::Uuid::new_v4().simple()
        );
        // A linguistic default collation (ICU's en-US), as production databases usually have,
        // so that code relying on the default order of text fails here.
        diesel::sql_query(format!(
            "CREATE DATABASE \"{name}\" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"
        ))
        .execute(&mut admin)
        .await
        .expect("create the test database");
        let url = url_for(&name);
        let store = Store::connect(&url, test_options()).expect("store");
        Some(TestDb {
            store,
            url,
            cleanup: Cleanup::Postgres { name },
        })
    }

    /// An empty SQLite file in a fresh temporary folder.
    pub fn sqlite_unmigrated() -> TestDb {
        let dir = std::env::temp_dir().join(format!(
            "flowgate-store-test-{}",
            uuid::Uuid::new_v4().simple()
        ));
        // The store creates the folder itself (D14's default path must work on a fresh machine).
        let url = format!("sqlite://{}", dir.join("flowgate.db").display());
        let store = Store::connect(&url, test_options()).expect("store");
        TestDb {
            store,
            url,
            cleanup: Cleanup::Sqlite { dir },
        }
    }

    /// The PostgreSQL server's `host:port` (for a [`Proxy`] in front of it).
    pub fn server_authority(&self) -> String {
        split_url(&self.url).1
    }

    /// This database's URL with the server replaced by `authority` (a [`Proxy`]).
    pub fn url_via(&self, authority: &str) -> String {
        let (prefix, _, path) = split_url(&self.url);
        format!("{prefix}{authority}{path}")
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.store.backend()
    }

    /// A second store on the same database: its own pool, as another replica would have.
    pub fn open_another(&self) -> Store {
        Store::connect(&self.url, test_options()).expect("second store")
    }

    /// Runs a `SELECT count(*) AS n ...` query.
    pub async fn count(&self, sql: &str) -> i64 {
        let query = diesel::sql_query(sql);
        let rows: Vec<Count> = match self.connect().await {
            Conn::Pg(mut conn) => query.load(&mut *conn).await.expect("count"),
            Conn::Sqlite(mut conn) => query.load(&mut conn).await.expect("count"),
        };
        <[Count]>::first(&rows).map(|c| c.n).expect("one row")
    }

    /// Runs a query returning one text column named `t`; its values, in the order returned.
    pub async fn texts(&self, sql: &str) -> Vec<String> {
        let query = diesel::sql_query(sql);
        let rows: Vec<TextRow> = match self.connect().await {
            Conn::Pg(mut conn) => query.load(&mut *conn).await.expect("query"),
            Conn::Sqlite(mut conn) => query.load(&mut conn).await.expect("query"),
        };
        rows.into_iter().map(|r| r.t).collect()
    }

    /// The `event_id` of every stored SDK event, one entry per row, in the hyphenated form.
    pub async fn sdk_event_ids(&self) -> Vec<String> {
        let sql = match self.backend() {
            Backend::Postgres => {
                "SELECT event_id::text AS t FROM analytics_events WHERE source = 'sdk'"
            }
            Backend::Sqlite => {
                "SELECT lower(substr(hex(event_id), 1, 8) || '-' || substr(hex(event_id), 9, 4) \
                 || '-' || substr(hex(event_id), 13, 4) || '-' || substr(hex(event_id), 17, 4) \
                 || '-' || substr(hex(event_id), 21)) AS t FROM analytics_events \
                 WHERE source = 'sdk'"
            }
        };
        self.texts(sql).await
    }

    /// Runs statements on a connection of its own.
    pub async fn execute(&self, sql: &str) {
        match self.connect().await {
            Conn::Pg(mut conn) => conn.batch_execute(sql).await.expect("execute"),
            Conn::Sqlite(mut conn) => conn.batch_execute(sql).await.expect("execute"),
        }
    }

    /// Stalls event writes: a connection of its own holds a lock that blocks every write to
    /// `analytics_events` (PostgreSQL: `LOCK TABLE ... ACCESS EXCLUSIVE`; SQLite: an
    /// exclusive transaction on the file) until [`HeldLock::release`] or drop.
    pub async fn lock_events(&self) -> HeldLock {
        let mut conn = self.connect().await;
        match &mut conn {
            Conn::Pg(conn) => conn
                .batch_execute("BEGIN; LOCK TABLE analytics_events IN ACCESS EXCLUSIVE MODE")
                .await
                .expect("lock"),
            Conn::Sqlite(conn) => conn.batch_execute("BEGIN EXCLUSIVE").await.expect("lock"),
        }
        HeldLock(conn)
    }

    /// PostgreSQL: a connection of its own holds `LOCK TABLE table IN ACCESS EXCLUSIVE MODE`
    /// (say, one partition of the events) until [`HeldLock::release`] or drop.
    pub async fn lock_table(&self, table: &str) -> HeldLock {
        let mut conn = self.connect().await;
        match &mut conn {
            Conn::Pg(conn) => conn
                .batch_execute(&format!(
                    "BEGIN; LOCK TABLE \"{table}\" IN ACCESS EXCLUSIVE MODE"
                ))
                .await
                .expect("lock"),
            Conn::Sqlite(_) => panic!("lock_table locks a PostgreSQL table"),
        }
        HeldLock(conn)
    }

    async fn connect(&self) -> Conn {
        match self.backend() {
            Backend::Postgres => Conn::Pg(Box::new(
                AsyncPgConnection::establish(&self.url)
                    .await
                    .expect("connect"),
            )),
            Backend::Sqlite => {
                let path = self.url.trim_start_matches("sqlite://");
                let mut conn = SqliteConn::establish(path).await.expect("connect");
                // Wait for the server's own transactions rather than fail at once.
                conn.batch_execute("PRAGMA busy_timeout = 10000")
                    .await
                    .expect("busy timeout");
                Conn::Sqlite(conn)
            }
        }
    }
}

type SqliteConn =
    diesel_async::sync_connection_wrapper::SyncConnectionWrapper<diesel::SqliteConnection>;

/// A raw connection to a test database.
enum Conn {
    Pg(Box<AsyncPgConnection>),
    Sqlite(SqliteConn),
}

/// A lock held on the events table ([`TestDb::lock_events`]).
pub struct HeldLock(Conn);

impl HeldLock {
    /// Rolls the locking transaction back: writes go on.
    pub async fn release(mut self) {
        match &mut self.0 {
            Conn::Pg(conn) => conn.batch_execute("ROLLBACK").await.expect("unlock"),
            Conn::Sqlite(conn) => conn.batch_execute("ROLLBACK").await.expect("unlock"),
        }
    }
}

#[derive(QueryableByName)]
struct TextRow {
    #[diesel(sql_type = Text)]
    t: String,
}

impl Drop for TestDb {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::Postgres { name } => {
                // Drop runs inside the test's runtime, which cannot block on a future: the drop
                // gets a thread and a runtime of its own. FORCE ends the store's connections.
                let name = name.clone();
                let dropped = std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("runtime");
                    runtime.block_on(async {
                        let mut admin = admin_connection().await?;
                        diesel::sql_query(format!(
                            "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                        ))
                        .execute(&mut admin)
                        .await
                        .map_err(|e| e.to_string())
                    })
                })
                .join();
                if !matches!(dropped, Ok(Ok(_))) {
                    eprintln!("could not drop a test database; the next run sweeps it");
                }
            }
            Cleanup::Sqlite { dir } => {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}
