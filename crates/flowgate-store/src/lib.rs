#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

use flowgate_domain::ports::StoreError;

/// Runs one query body against a pooled connection of whichever backend the store uses.
///
/// `with_conn!(store, |conn| body)` expands `body` once per backend, with `conn` bound to
/// `&mut AsyncPgConnection` in one copy and `&mut SyncConnectionWrapper<SqliteConnection>` in
/// the other, so each copy is type-checked against its own connection type and the query code
/// is written once. This is the shape TECH-NOTES found to work: diesel's `MultiConnection` does
/// not support diesel-async connections, and code generic over the connection type needs
/// higher-ranked trait bounds for every query shape. The macro only picks the connection; it
/// hides no SQL. A checkout failure returns [`StoreError::Unavailable`] from the enclosing
/// function with `?`.
macro_rules! with_conn {
    ($store:expr, |$conn:ident| $body:expr) => {
        match $store.pools() {
            $crate::store::Pools::Pg { pool, .. } => {
                let mut pooled = pool.get().await.map_err($crate::error::pool_error)?;
                let $conn: &mut ::diesel_async::AsyncPgConnection = &mut pooled;
                $body
            }
            $crate::store::Pools::Sqlite(pool) => {
                let mut pooled = pool.get().await.map_err($crate::error::pool_error)?;
                let $conn: &mut $crate::store::SqliteConn = &mut pooled;
                $body
            }
        }
    };
}

mod catalog;
mod copy;
mod dead_letters;
mod error;
mod events;
mod history;
pub mod import;
mod keys;
mod retention;
pub mod schema;
mod store;
mod tls;
pub mod types;

pub use catalog::CATALOG_CHANNEL;
pub use events::SQLITE_CHUNK;
pub use history::ImportRecord;
pub use import::{
    dry_run_file, dry_run_text, import_file, DryRunReport, FileProblem, ImportError, ImportReport,
};
pub use keys::CreatedKey;
pub use retention::{EventRetention, Maintenance, PARTITION_DAYS_AHEAD, SQLITE_DELETE_BATCH};
pub use store::{
    Backend, SqliteSynchronous, Store, StoreOptions, POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS,
};
pub use tls::{url_tls, TlsMode, UrlTls};

/// The error type inside transactions: diesel's errors (so `?` works on queries and diesel can
/// roll back) and the store's own (a decode failure aborts the transaction too).
#[derive(Debug)]
pub(crate) enum Failure {
    Diesel(diesel::result::Error),
    Store(StoreError),
}

impl From<diesel::result::Error> for Failure {
    fn from(e: diesel::result::Error) -> Self {
        Failure::Diesel(e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Store(e)
    }
}

impl From<Failure> for StoreError {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Diesel(e) => error::query_error(e),
            Failure::Store(e) => e,
        }
    }
}
