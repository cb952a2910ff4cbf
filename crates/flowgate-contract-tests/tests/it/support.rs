//! The three implementations under test, as [`Harness`]es.
//!
//! - [`Memory`]: the domain's `InMemoryStore`.
//! - [`Sqlite`]: the store on a SQLite file in a fresh temporary folder, removed on drop.
//! - [`Postgres`]: the store on its own PostgreSQL database `flowgate_contract_<unix
//!   seconds>_<uuid>` on the server at `FLOWGATE_TEST_PG_URL` (default
//!   `postgres://postgres@127.0.0.1:5432/postgres`), dropped on drop (also after a panic).
//!   Databases of crashed runs (older than an hour, by the time in their name) are swept before
//!   each test. An unreachable server skips the case with a message, except in CI (`CI=true`),
//!   where it fails. The approach is the store crate's `tests/it/support.rs`.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use diesel::sql_types::Text;
use diesel::QueryableByName;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use flowgate_contract_tests::Harness;
use flowgate_domain::catalog::CatalogData;
use flowgate_domain::memory::InMemoryStore;
use flowgate_domain::ports::StoreError;
use flowgate_store::{Store, StoreOptions};

const DB_PREFIX: &str = "flowgate_contract_";
const STALE_AFTER_SECS: u64 = 3600;

/// Short timeouts: a broken setup fails fast instead of hanging the suite.
fn options() -> StoreOptions {
    StoreOptions {
        max_connections: Some(4),
        connect_timeout: Duration::from_secs(5),
        acquire_timeout: Duration::from_secs(5),
        sqlite_busy_timeout: Duration::from_secs(5),
        poll_interval: Duration::from_millis(50),
    }
}

async fn migrated(url: &str) -> Store {
    let store = Store::connect(url, options()).expect("store");
    store.migrate().await.expect("migrations apply");
    store
}

pub struct Memory(InMemoryStore);

impl Harness for Memory {
    type Store = InMemoryStore;

    async fn create() -> Option<Self> {
        Some(Memory(InMemoryStore::new()))
    }

    fn store(&self) -> &InMemoryStore {
        &self.0
    }

    async fn write_catalog(&self, data: &CatalogData) -> Result<(), StoreError> {
        self.0.set_catalog(data.clone());
        Ok(())
    }
}

pub struct Sqlite {
    store: Store,
    dir: PathBuf,
}

impl Harness for Sqlite {
    type Store = Store;

    async fn create() -> Option<Self> {
        let dir = std::env::temp_dir().join(format!(
            "flowgate-contract-{}",
            uuid::Uuid::new_v4().simple()
        ));
        // The store creates the folder itself.
        let store = migrated(&format!("sqlite://{}", dir.join("flowgate.db").display())).await;
        Some(Sqlite { store, dir })
    }

    fn store(&self) -> &Store {
        &self.store
    }

    async fn write_catalog(&self, data: &CatalogData) -> Result<(), StoreError> {
        self.store.replace_catalog(data).await
    }
}

impl Drop for Sqlite {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub struct Postgres {
    store: Store,
    name: String,
}

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

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn admin_connection() -> Result<AsyncPgConnection, String> {
    let url = admin_url();
    match tokio::time::timeout(Duration::from_secs(5), AsyncPgConnection::establish(&url)).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(_) => Err("timed out".to_owned()),
    }
}

async fn drop_database(conn: &mut AsyncPgConnection, name: &str) -> Result<usize, String> {
    // FORCE ends the connections the store's pool still holds.
    diesel::sql_query(format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .execute(conn)
        .await
        .map_err(|e| e.to_string())
}

#[derive(QueryableByName)]
struct DbName {
    #[diesel(sql_type = Text)]
    datname: String,
}

/// Drops databases left by crashed runs. Databases of tests running now are younger than the
/// cut-off, so concurrent test processes are never disturbed.
async fn sweep(conn: &mut AsyncPgConnection) {
    let names: Vec<DbName> = diesel::sql_query("SELECT datname FROM pg_database")
        .load(conn)
        .await
        .expect("list databases");
    let cutoff = now_secs().saturating_sub(STALE_AFTER_SECS);
    for DbName { datname } in names {
        let created = datname
            .strip_prefix(DB_PREFIX)
            .and_then(|rest| rest.split('_').next())
            .and_then(|secs| secs.parse::<u64>().ok());
        if created.is_some_and(|t| t < cutoff) {
            let _ = drop_database(conn, &datname).await;
        }
    }
}

impl Harness for Postgres {
    type Store = Store;

    async fn create() -> Option<Self> {
        let mut admin = match admin_connection().await {
            Ok(conn) => conn,
            Err(e) if in_ci() => panic!("PostgreSQL is required in CI ({}): {e}", admin_url()),
            Err(e) => {
                eprintln!(
                    "SKIPPED: PostgreSQL at {} is not reachable ({e}); start it with `make pg-up`",
                    admin_url()
                );
                return None;
            }
        };
        sweep(&mut admin).await;
        let name = format!(
            "{DB_PREFIX}{}_{}",
            now_secs(),
            uuid::Uuid::new_v4().simple()
        );
        diesel::sql_query(format!("CREATE DATABASE \"{name}\""))
            .execute(&mut admin)
            .await
            .expect("create the test database");
        // From here on the guard exists, so a failing migration still drops the database.
        let store = Store::connect(&url_for(&name), options()).expect("store");
        let db = Postgres { store, name };
        db.store.migrate().await.expect("migrations apply");
        Some(db)
    }

    fn store(&self) -> &Store {
        &self.store
    }

    async fn write_catalog(&self, data: &CatalogData) -> Result<(), StoreError> {
        self.store.replace_catalog(data).await
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // Drop runs inside the test's runtime, which cannot block on a future: the drop gets a
        // thread and a runtime of its own.
        let name = self.name.clone();
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let mut admin = admin_connection().await?;
                drop_database(&mut admin, &name).await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(_))) {
            eprintln!(
                "could not drop test database {}; the next run sweeps it",
                self.name
            );
        }
    }
}
