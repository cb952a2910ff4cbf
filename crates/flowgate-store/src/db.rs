//! The two backends. [`Db`] is one of them, each variant owning its pools and what it connects
//! to ([`Postgres`], [`Sqlite`]); [`Conn`] is a connection of either, on which the store's
//! queries are written once.
//!
//! A diesel query is a value of the same type whichever the backend; only running it needs the
//! connection's type. [`Conn`]'s methods take such a value and run it on the connection the
//! variant holds, so a query body is plain code over `&mut Conn`, type-checked against both
//! backends. (Code generic over the connection type instead would need a trait bound for every
//! query shape, and diesel's `MultiConnection` does not support diesel-async connections.)
//! Backend-specific work (`COPY`, `LISTEN`, partitions, migrations) is written as methods of
//! [`Postgres`] or [`Sqlite`], next to the feature it serves.

use std::future::Future;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use diesel::pg::Pg;
use diesel::{QueryResult, Selectable, SqliteConnection};
use diesel_async::methods::{ExecuteDsl, LoadQuery};
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig};
use diesel_async::sync_connection_wrapper::SyncConnectionWrapper;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use flowgate_domain::ports::{BoxFuture, Outage, StoreError};

use crate::copy::CopyPool;
use crate::error::{pool_error, query_error, unavailable, TransactionError};
use crate::options::{pool, SqliteSynchronous, StoreOptions};
use crate::tls::PgConnector;

/// The SQLite connection type: diesel's synchronous connection, run on tokio's blocking pool.
pub(crate) type SqliteConn = SyncConnectionWrapper<SqliteConnection>;

/// The database of a [`Store`](crate::Store).
#[allow(clippy::large_enum_variant, reason = "one per store, behind its `Arc`")]
pub(crate) enum Db {
    Postgres(Postgres),
    Sqlite(Sqlite),
}

/// A PostgreSQL database: its pools and how to connect to it.
pub(crate) struct Postgres {
    /// Makes every connection (with the URL's TLS): the pools' and the dedicated ones
    /// (migrations, `LISTEN`). Never logged: it holds the password.
    pub(crate) connector: Arc<PgConnector>,
    /// diesel-async connections, for every query.
    pub(crate) pool: Pool<AsyncPgConnection>,
    /// The clients that write event batches with `COPY` (`copy.rs`), made on first use, one per
    /// writer at a time.
    pub(crate) copy: CopyPool,
    /// The connection that `LISTEN`s for catalog changes, made on first use and kept while it
    /// works (`catalog.rs`).
    pub(crate) listener: tokio::sync::Mutex<Option<AsyncPgConnection>>,
    /// Event batches that met an already stored `event_id` on the `COPY` and were written
    /// again with `ON CONFLICT` (`events.rs`).
    pub(crate) event_conflict_retries: AtomicU64,
    pub(crate) connect_timeout: Duration,
    /// This database's number in the process (each `open` takes the next): what per-thread
    /// connections of its own are found by (`sticky.rs`).
    pub(crate) id: u64,
}

/// The next [`Postgres::id`].
static NEXT_POSTGRES_ID: AtomicU64 = AtomicU64::new(1);

/// A SQLite file: its pool and how every connection to it is set up.
pub(crate) struct Sqlite {
    /// The file, as the URL names it.
    pub(crate) path: String,
    pub(crate) pool: Pool<SqliteConn>,
    pub(crate) setup: SqliteSetup,
    /// How often `wait_for_change` reads the revision (SQLite has no notifications).
    pub(crate) poll_interval: Duration,
}

/// What every SQLite connection of a store is set up with (`Sqlite::establish`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SqliteSetup {
    pub(crate) busy_timeout: Duration,
    pub(crate) synchronous: SqliteSynchronous,
}

impl Postgres {
    /// The pools for a `postgres://` URL; no connection is made yet.
    pub(crate) fn open(url: &str, options: &StoreOptions) -> Result<Postgres, StoreError> {
        let connector = Arc::new(PgConnector::parse(url)?);
        let mut config = ManagerConfig::<AsyncPgConnection>::default();
        let connect_timeout = options.connect_timeout;
        let for_pool = Arc::clone(&connector);
        config.custom_setup = Box::new(move |_url| {
            let connector = Arc::clone(&for_pool);
            Box::pin(async move { connector.connect(connect_timeout).await })
        });
        // The manager's URL is unused (the setup above connects): keep the password out of it.
        let manager = AsyncDieselConnectionManager::new_with_config("postgres://", config);
        let pool = pool(manager, options.max_connections.unwrap_or(10), options)?;
        let copy = crate::copy::pool(
            Arc::clone(&connector),
            options.copy_connections.max(1),
            options,
        )?;
        Ok(Postgres {
            connector,
            pool,
            copy,
            listener: tokio::sync::Mutex::new(None),
            event_conflict_retries: AtomicU64::new(0),
            connect_timeout,
            id: NEXT_POSTGRES_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }
}

impl Sqlite {
    /// The pool for a SQLite file path (its folder is created when missing); no connection is
    /// made yet.
    pub(crate) fn open(path: &str, options: &StoreOptions) -> Result<Sqlite, StoreError> {
        if let Some(parent) = Path::new(path).parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent).map_err(|e| {
                    unavailable(
                        Outage::Connection,
                        format!(
                            "cannot create the database folder {}: {e}",
                            parent.display()
                        ),
                    )
                })?;
            }
        }
        let setup = SqliteSetup {
            busy_timeout: options.sqlite_busy_timeout,
            synchronous: options.sqlite_synchronous,
        };
        let mut config = ManagerConfig::<SqliteConn>::default();
        config.custom_setup = Box::new(move |path| {
            let path = path.to_owned();
            Box::pin(async move { Sqlite::establish(&path, setup).await })
        });
        let manager = AsyncDieselConnectionManager::new_with_config(path, config);
        Ok(Sqlite {
            path: path.to_owned(),
            pool: pool(manager, options.max_connections.unwrap_or(4), options)?,
            setup,
            poll_interval: options.poll_interval,
        })
    }

    /// A SQLite connection set up as every connection of the store must be: a busy timeout
    /// (wait for another connection's lock instead of failing at once), WAL (readers never
    /// block the writer), `synchronous` as configured ([`SqliteSynchronous`]) and foreign keys
    /// enforced.
    pub(crate) async fn establish(
        path: &str,
        setup: SqliteSetup,
    ) -> diesel::ConnectionResult<SqliteConn> {
        use diesel_async::SimpleAsyncConnection;
        let mut conn = SqliteConn::establish(path).await?;
        conn.batch_execute(&format!(
            "PRAGMA busy_timeout = {}; PRAGMA journal_mode = WAL; PRAGMA synchronous = {}; \
             PRAGMA foreign_keys = ON;",
            setup.busy_timeout.as_millis(),
            setup.synchronous.as_str()
        ))
        .await
        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
        Ok(conn)
    }
}

impl Db {
    /// A pooled connection.
    pub(crate) async fn checkout(&self) -> Result<Pooled, StoreError> {
        Ok(match self {
            Db::Postgres(pg) => Pooled::Postgres(pg.pool.get().await.map_err(pool_error)?),
            Db::Sqlite(sqlite) => Pooled::Sqlite(sqlite.pool.get().await.map_err(pool_error)?),
        })
    }

    /// Runs a query on a pooled connection and returns its rows.
    pub(crate) async fn rows<'q, Q, U>(&self, query: Q) -> Result<Vec<U>, StoreError>
    where
        Q: LoadQuery<'q, AsyncPgConnection, U> + LoadQuery<'q, SqliteConn, U> + 'q,
        U: Send + 'static,
    {
        let mut pooled = self.checkout().await?;
        pooled.conn().rows(query).await.map_err(query_error)
    }

    /// Runs a query on a pooled connection and returns its first row.
    pub(crate) async fn row<'q, Q, U>(&self, query: Q) -> Result<U, StoreError>
    where
        Q: LoadQuery<'q, AsyncPgConnection, U> + LoadQuery<'q, SqliteConn, U> + 'q,
        U: Send + 'static,
    {
        let mut pooled = self.checkout().await?;
        pooled.conn().row(query).await.map_err(query_error)
    }

    /// Runs a statement on a pooled connection and returns how many rows it changed.
    pub(crate) async fn run<Q>(&self, query: Q) -> Result<usize, StoreError>
    where
        Q: ExecuteDsl<AsyncPgConnection> + ExecuteDsl<SqliteConn>,
    {
        let mut pooled = self.checkout().await?;
        pooled.conn().run(query).await.map_err(query_error)
    }

    /// Runs `body` in a transaction on a pooled connection ([`Conn::transaction`]).
    pub(crate) async fn transaction<T, F>(&self, body: F) -> Result<T, StoreError>
    where
        T: Send,
        F: for<'t> TransactionBody<'t, T> + Send,
    {
        let mut pooled = self.checkout().await?;
        pooled.conn().transaction(body).await
    }
}

/// The columns of the row type `T`, as a select clause that serves both backends (diesel's
/// `T::as_select()` is a clause of the one backend the query is first run on).
pub(crate) fn columns<T: Selectable<Pg>>() -> T::SelectExpression {
    T::construct_selection()
}

/// A connection taken from one of the pools; back to its pool when dropped.
#[allow(
    clippy::large_enum_variant,
    reason = "held for one operation; boxing would allocate for every query"
)]
pub(crate) enum Pooled {
    Postgres(Object<AsyncPgConnection>),
    Sqlite(Object<SqliteConn>),
}

impl Pooled {
    pub(crate) fn conn(&mut self) -> Conn<'_> {
        match self {
            Pooled::Postgres(conn) => Conn::Postgres(conn),
            Pooled::Sqlite(conn) => Conn::Sqlite(conn),
        }
    }
}

/// A connection of either backend, for queries written once.
pub(crate) enum Conn<'c> {
    Postgres(&'c mut AsyncPgConnection),
    Sqlite(&'c mut SqliteConn),
}

impl<'c> Conn<'c> {
    /// Runs a query and returns its rows.
    pub(crate) fn rows<'a, 'q, Q, U>(&'a mut self, query: Q) -> BoxFuture<'a, QueryResult<Vec<U>>>
    where
        Q: LoadQuery<'q, AsyncPgConnection, U> + LoadQuery<'q, SqliteConn, U> + 'q,
        U: Send + 'static,
        'q: 'a,
    {
        match self {
            Conn::Postgres(conn) => Box::pin(query.load(&mut **conn)),
            Conn::Sqlite(conn) => Box::pin(query.load(&mut **conn)),
        }
    }

    /// Runs a query of one row and returns it ([`diesel::result::Error::NotFound`] when there
    /// is none).
    pub(crate) fn row<'a, 'q, Q, U>(&'a mut self, query: Q) -> BoxFuture<'a, QueryResult<U>>
    where
        Q: LoadQuery<'q, AsyncPgConnection, U> + LoadQuery<'q, SqliteConn, U> + 'q,
        U: Send + 'static,
        'q: 'a,
    {
        let rows = self.rows(query);
        Box::pin(async move {
            let first = rows.await?.into_iter().next();
            first.ok_or(diesel::result::Error::NotFound)
        })
    }

    /// Runs a statement and returns how many rows it changed.
    pub(crate) fn run<'a, Q>(&'a mut self, query: Q) -> BoxFuture<'a, QueryResult<usize>>
    where
        Q: ExecuteDsl<AsyncPgConnection> + ExecuteDsl<SqliteConn> + 'a,
    {
        match self {
            Conn::Postgres(conn) => Box::pin(query.execute(&mut **conn)),
            Conn::Sqlite(conn) => Box::pin(query.execute(&mut **conn)),
        }
    }

    /// Runs `body` in a transaction: committed when it returns `Ok`, rolled back when it
    /// returns an error (diesel's or the store's) or its future is dropped. On SQLite the
    /// transaction is deferred: it takes the write lock with its first write.
    pub(crate) async fn transaction<T, F>(&mut self, body: F) -> Result<T, StoreError>
    where
        T: Send,
        F: for<'t> TransactionBody<'t, T> + Send,
    {
        let result = match self {
            Conn::Postgres(conn) => {
                conn.transaction(async move |conn| body(&mut Conn::Postgres(conn)).await)
                    .await
            }
            Conn::Sqlite(conn) => {
                conn.transaction(async move |conn| body(&mut Conn::Sqlite(conn)).await)
                    .await
            }
        };
        result.map_err(StoreError::from)
    }
}

/// The body of a [`Conn::transaction`]: an async closure over the transaction's connection.
///
/// A trait of its own only to require that its future is `Send`, as every future of the store
/// is: an async closure's future has no name to put in a bound. Every such closure implements
/// it.
pub(crate) trait TransactionBody<'t, T>:
    AsyncFnOnce(&'t mut Conn<'t>) -> Result<T, TransactionError>
    + FnOnce(&'t mut Conn<'t>) -> <Self as TransactionBody<'t, T>>::Future
{
    type Future: Future<Output = Result<T, TransactionError>> + Send;
}

impl<'t, T, F, Fut> TransactionBody<'t, T> for F
where
    F: AsyncFnOnce(&'t mut Conn<'t>) -> Result<T, TransactionError>
        + FnOnce(&'t mut Conn<'t>) -> Fut,
    Fut: Future<Output = Result<T, TransactionError>> + Send,
{
    type Future = Fut;
}
