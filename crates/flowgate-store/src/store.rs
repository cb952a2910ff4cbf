//! [`Store`]: the database of one backend, chosen at run time from the URL, and the
//! migrations.

use std::fmt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use diesel_migrations::{embed_migrations, EmbeddedMigrations, MigrationHarness};
use flowgate_domain::ports::StoreError;

use crate::db::{Db, Postgres, Sqlite};
use crate::error::{config_error, connection_error, query_error};
use crate::options::StoreOptions;
use crate::tls::TlsMode;

/// The PostgreSQL migrations (`migrations/postgres`), embedded in the binary.
pub const POSTGRES_MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations/postgres");

/// The SQLite migrations (`migrations/sqlite`), embedded in the binary.
pub const SQLITE_MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite");

/// An arbitrary constant: the PostgreSQL advisory lock that serialises concurrent migrators
/// (several replicas starting at once).
const MIGRATION_LOCK_ID: i64 = 0x666c_6f77_6761_7465; // "flowgate"

/// Which database a [`Store`] talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// PostgreSQL (production): pooled `diesel-async` connections, change notification by
    /// `LISTEN/NOTIFY`.
    Postgres,
    /// SQLite (the embedded default): a file in WAL mode, change detection by polling.
    Sqlite,
}

impl Backend {
    /// The backend [`Store::connect`] opens for `url`: PostgreSQL for `postgres://` and
    /// `postgresql://`, SQLite for anything else (which `connect` then checks as a SQLite URL).
    pub fn of_url(url: &str) -> Self {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else {
            Backend::Sqlite
        }
    }

    /// `postgres` or `sqlite`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres",
            Backend::Sqlite => "sqlite",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The persistence adapter: implements [`CatalogSource`](flowgate_domain::ports::CatalogSource),
/// [`KeyStore`](flowgate_domain::ports::KeyStore) and
/// [`EventStore`](flowgate_domain::ports::EventStore) on PostgreSQL or SQLite, chosen by the
/// URL. Cheap to clone (the pools are shared).
///
/// Connections are made lazily: [`Store::connect`] succeeds with the database down, and each
/// operation then fails with [`StoreError::Unavailable`] until it is back (D12).
#[derive(Clone)]
pub struct Store {
    db: Arc<Db>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// A store for `url`:
    /// - `postgres://user:password@host:port/db` (or `postgresql://`): PostgreSQL. TLS follows
    ///   libpq's `sslmode` URL parameter (`disable`, `prefer` (the default), `require`,
    ///   `verify-ca`, `verify-full`; see [`TlsMode`]), with the trusted roots of the two
    ///   `verify-*` modes from `sslrootcert=PATH` (PEM, required) or `sslrootcert=system` (the
    ///   operating system's, with `verify-full` only), as libpq. Other parameters are
    ///   tokio-postgres's (`application_name`, `connect_timeout`, `options`, ...);
    /// - `sqlite://path/to/file.db` (relative to the working directory), `sqlite:///abs/path.db`
    ///   or `sqlite:path`: a SQLite file, created with its folder when missing.
    ///
    /// In-memory SQLite is refused: every pooled connection would see its own empty database.
    ///
    /// A malformed URL, an unknown `sslmode`, a verifying mode without `sslrootcert`, or an
    /// unreadable one fails here with [`StoreError::Config`]; the database itself is reached
    /// only by the first operation. No error message contains the URL's password.
    pub fn connect(url: &str, options: StoreOptions) -> Result<Store, StoreError> {
        let db = match Backend::of_url(url) {
            Backend::Postgres => Db::Postgres(Postgres::open(url, &options)?),
            Backend::Sqlite => Db::Sqlite(Sqlite::open(sqlite_path(url)?, &options)?),
        };
        Ok(Store { db: Arc::new(db) })
    }

    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    /// How many event batches, since this store was opened, held an `event_id` that was
    /// already stored, so that their `COPY` was refused and they were written again with
    /// `ON CONFLICT DO NOTHING` (PostgreSQL only; SQLite always uses `ON CONFLICT`). A steady
    /// rise means clients resend events the store already holds.
    pub fn event_conflict_retries(&self) -> u64 {
        match self.db() {
            Db::Postgres(pg) => pg.event_conflict_retries.load(Ordering::Relaxed),
            Db::Sqlite(_) => 0,
        }
    }

    /// The backend this store talks to.
    pub fn backend(&self) -> Backend {
        match self.db() {
            Db::Postgres(_) => Backend::Postgres,
            Db::Sqlite(_) => Backend::Sqlite,
        }
    }

    /// Which database this store is, without credentials or options: `postgres://HOST:PORT/DB`
    /// (hosts and ports as the URL lists them, libpq's defaults for those it leaves out:
    /// port 5432, the user's name as the database), or `sqlite:PATH` with the file's absolute
    /// path. Two URLs of one database give the same identity (D20: a cached catalog is used
    /// only for the database it was read from).
    pub fn identity(&self) -> String {
        match self.db() {
            Db::Postgres(pg) => pg.connector.identity(),
            Db::Sqlite(sqlite) => {
                let path = Path::new(&sqlite.path);
                let absolute = std::fs::canonicalize(path)
                    .or_else(|_| std::path::absolute(path))
                    .unwrap_or_else(|_| path.to_owned());
                format!("sqlite:{}", absolute.display())
            }
        }
    }

    /// The TLS mode of a PostgreSQL store (`require` with `sslrootcert` reads as
    /// `verify-ca`); `None` on SQLite. For a start-up log line.
    pub fn tls_mode(&self) -> Option<TlsMode> {
        match self.db() {
            Db::Postgres(pg) => Some(pg.connector.mode()),
            Db::Sqlite(_) => None,
        }
    }

    /// Whether a pooled connection is encrypted (PostgreSQL's `pg_stat_ssl` for its own
    /// backend); always `false` on SQLite (a local file). With the default `sslmode=prefer`
    /// this tells whether the server took up TLS: worth a start-up log line.
    pub async fn uses_tls(&self) -> Result<bool, StoreError> {
        #[derive(diesel::QueryableByName)]
        struct Ssl {
            #[diesel(sql_type = diesel::sql_types::Bool)]
            ssl: bool,
        }
        match self.db() {
            Db::Postgres(_) => {
                let row: Ssl = self
                    .db()
                    .row(diesel::sql_query(
                        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                    ))
                    .await?;
                Ok(row.ssl)
            }
            Db::Sqlite(_) => Ok(false),
        }
    }

    /// Applies every pending migration of this backend and returns the versions applied (empty
    /// when the schema is current: applying twice changes nothing). On PostgreSQL an advisory
    /// lock serialises replicas that migrate at the same time.
    pub async fn migrate(&self) -> Result<Vec<String>, StoreError> {
        self.run_migrations(Direction::Up).await
    }

    /// Reverts every applied migration: **drops every table and all data**. For tests of the
    /// migrations (up, down, up) and for operators tearing a database down.
    pub async fn revert_all_migrations(&self) -> Result<Vec<String>, StoreError> {
        self.run_migrations(Direction::DownAll).await
    }

    /// Reverts the newest applied migration (its `down.sql`): for tests of one migration on a
    /// database with data, and for an operator stepping back one release.
    pub async fn revert_last_migration(&self) -> Result<Vec<String>, StoreError> {
        self.run_migrations(Direction::DownLast).await
    }

    /// The versions of the applied migrations, oldest first.
    pub async fn applied_migrations(&self) -> Result<Vec<String>, StoreError> {
        self.run_migrations(Direction::List).await
    }

    /// Runs diesel's synchronous migration harness on a dedicated connection, on tokio's
    /// blocking pool: it blocks, and on PostgreSQL it drives the async connection with
    /// `block_in_place`, which panics on a runtime worker of a current-thread runtime.
    async fn run_migrations(&self, direction: Direction) -> Result<Vec<String>, StoreError> {
        let outcome = match self.db() {
            Db::Postgres(pg) => {
                let mut conn = pg
                    .connector
                    .connect(pg.connect_timeout)
                    .await
                    .map_err(connection_error)?;
                if direction != Direction::List {
                    // Released when the dedicated connection closes, whatever happens below.
                    let lock =
                        diesel::sql_query(format!("SELECT pg_advisory_lock({MIGRATION_LOCK_ID})"));
                    diesel_async::RunQueryDsl::execute(lock, &mut conn)
                        .await
                        .map_err(query_error)?;
                }
                tokio::task::spawn_blocking(move || {
                    let mut harness = diesel_async::AsyncMigrationHarness::new(conn);
                    direction.run(&mut harness, POSTGRES_MIGRATIONS)
                })
                .await
                .map_err(|e| StoreError::Other {
                    detail: format!("migration task failed: {e}"),
                })?
            }
            Db::Sqlite(sqlite) => {
                let mut conn = Sqlite::establish(&sqlite.path, sqlite.setup)
                    .await
                    .map_err(connection_error)?;
                // The wrapper runs this on the blocking pool with the synchronous connection.
                conn.spawn_blocking(
                    move |sync_conn| Ok(direction.run(sync_conn, SQLITE_MIGRATIONS)),
                )
                .await
                .map_err(query_error)?
            }
        };
        outcome.map_err(|e| StoreError::Other {
            detail: format!("migration failed: {e}"),
        })
    }
}

/// The file path of a `sqlite:` URL.
fn sqlite_path(url: &str) -> Result<&str, StoreError> {
    let Some(rest) = url.strip_prefix("sqlite:") else {
        return Err(config_error(
            "unsupported database URL: expected postgres://... or sqlite://PATH",
        ));
    };
    let path = rest.strip_prefix("//").unwrap_or(rest);
    if path.is_empty() || path.contains(":memory:") || path.starts_with("file:") {
        return Err(config_error(format!(
            "unsupported SQLite URL `{url}`: give a file path (sqlite://data/flowgate.db)"
        )));
    }
    Ok(path)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Up,
    DownAll,
    DownLast,
    List,
}

impl Direction {
    fn run<DB: diesel::backend::Backend>(
        self,
        harness: &mut impl MigrationHarness<DB>,
        migrations: EmbeddedMigrations,
    ) -> Result<Vec<String>, String> {
        let versions = match self {
            Direction::Up => harness.run_pending_migrations(migrations),
            Direction::DownAll => harness.revert_all_migrations(migrations),
            Direction::DownLast => harness
                .revert_last_migration(migrations)
                .map(|version| vec![version]),
            Direction::List => harness.applied_migrations(),
        }
        .map_err(|e| e.to_string())?;
        Ok(versions.iter().map(ToString::to_string).collect())
    }
}

#[cfg(test)]
mod tests {
    use diesel::sql_types::Integer;

    use super::*;
    use crate::options::SqliteSynchronous;

    #[derive(diesel::QueryableByName)]
    struct Synchronous {
        #[diesel(sql_type = Integer)]
        synchronous: i32,
    }

    /// Every pooled SQLite connection runs with the configured `synchronous` (SQLite numbers
    /// it: NORMAL 1, FULL 2).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_connections_use_the_configured_synchronous() {
        let dir = std::env::temp_dir().join(format!("flowgate-sync-{}", uuid::Uuid::new_v4()));
        for (setting, expected) in [(SqliteSynchronous::Full, 2), (SqliteSynchronous::Normal, 1)] {
            let url = format!("sqlite://{}/{}.db", dir.display(), setting.as_str());
            let store = Store::connect(
                &url,
                StoreOptions {
                    sqlite_synchronous: setting,
                    ..StoreOptions::default()
                },
            )
            .unwrap();
            assert_eq!(store.backend(), Backend::Sqlite);
            let row: Synchronous = store
                .db()
                .row(diesel::sql_query("PRAGMA synchronous"))
                .await
                .unwrap();
            assert_eq!(row.synchronous, expected, "{setting:?}");
        }
        assert_eq!(
            StoreOptions::default().sqlite_synchronous,
            SqliteSynchronous::Full
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
