//! How the store connects: [`StoreOptions`] (with SQLite's [`SqliteSynchronous`]) and the
//! connection pools built with their timeouts, for diesel's connections and the `COPY` clients
//! alike.

use std::time::Duration;

use flowgate_domain::ports::StoreError;

use crate::error::config_error;

/// Connection settings. The defaults suit a server; tests shorten the timeouts.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Pool size; `None` picks the backend's default (PostgreSQL 10, SQLite 4).
    pub max_connections: Option<usize>,
    /// PostgreSQL: the most clients writing event batches with `COPY` at once, beside the
    /// pool (made on first use). One per event writer (the binary passes `events.writers`).
    pub copy_connections: usize,
    /// Longest time to establish one connection. An unreachable server fails after at most
    /// this long with [`StoreError::Unavailable`].
    pub connect_timeout: Duration,
    /// Longest time to wait for a pooled connection when all are in use.
    pub acquire_timeout: Duration,
    /// SQLite's `busy_timeout`: how long a statement waits for another connection's lock.
    pub sqlite_busy_timeout: Duration,
    /// SQLite's `synchronous`: whether a commit survives a power loss, not only a crash of
    /// the process.
    pub sqlite_synchronous: SqliteSynchronous,
    /// How often [`CatalogSource::wait_for_change`](flowgate_domain::ports::CatalogSource) polls
    /// the revision on SQLite (PostgreSQL is notified instead).
    pub poll_interval: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_connections: None,
            copy_connections: 4,
            connect_timeout: Duration::from_secs(5),
            acquire_timeout: Duration::from_secs(5),
            sqlite_busy_timeout: Duration::from_secs(5),
            sqlite_synchronous: SqliteSynchronous::default(),
            poll_interval: Duration::from_millis(250),
        }
    }
}

/// SQLite's `synchronous` pragma, with the store's WAL journal (D15).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SqliteSynchronous {
    /// `FULL`: each commit waits until the write-ahead log is on disk (an `fsync`): a commit
    /// survives a power loss or an operating system crash.
    #[default]
    Full,
    /// `NORMAL`: the log is synced at checkpoints only: a commit survives a crash or a kill of
    /// the process, but the last commits before a power loss may be lost.
    Normal,
}

impl SqliteSynchronous {
    /// The pragma's value.
    pub const fn as_str(self) -> &'static str {
        match self {
            SqliteSynchronous::Full => "FULL",
            SqliteSynchronous::Normal => "NORMAL",
        }
    }
}

/// A pool of `max_size` connections (or clients) made by `manager`, with the store's timeouts.
pub(crate) fn pool<M: deadpool::managed::Manager>(
    manager: M,
    max_size: usize,
    options: &StoreOptions,
) -> Result<deadpool::managed::Pool<M>, StoreError> {
    deadpool::managed::Pool::builder(manager)
        .max_size(max_size)
        .wait_timeout(Some(options.acquire_timeout))
        .create_timeout(Some(options.connect_timeout))
        .recycle_timeout(Some(options.connect_timeout))
        .runtime(deadpool::Runtime::Tokio1)
        .build()
        .map_err(|e| config_error(format!("cannot build a connection pool: {e}")))
}
