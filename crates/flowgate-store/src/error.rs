//! The one place where diesel, pool and connection errors become [`StoreError`]s.
//!
//! - cannot connect, pool exhausted or timed out, connection lost, serialization failure or a
//!   busy SQLite database: [`StoreError::Unavailable`] (transient: callers retry, D7, D12);
//! - unique, check and not-null violations: [`StoreError::Conflict`];
//! - foreign-key violations: [`StoreError::NotFound`] (a referenced record does not exist);
//! - stored values that do not decode: [`StoreError::Corrupt`];
//! - anything else: [`StoreError::Other`].
//!
//! Messages carry the detail for the log; adapters above never show them to clients (D9).

use diesel::result::{ConnectionError, DatabaseErrorKind, Error as DieselError};
use diesel_async::pooled_connection::PoolError as ManagerError;
use flowgate_domain::ports::StoreError;

/// A diesel error from a query or transaction.
pub(crate) fn query_error(error: DieselError) -> StoreError {
    match error {
        DieselError::DatabaseError(kind, info) => {
            let detail = match info.details() {
                Some(details) => format!("{} ({details})", info.message()),
                None => info.message().to_owned(),
            };
            match kind {
                DatabaseErrorKind::UniqueViolation
                | DatabaseErrorKind::CheckViolation
                | DatabaseErrorKind::NotNullViolation
                | DatabaseErrorKind::ExclusionViolation
                | DatabaseErrorKind::RestrictViolation => StoreError::Conflict(detail),
                DatabaseErrorKind::ForeignKeyViolation => StoreError::NotFound(detail),
                DatabaseErrorKind::UnableToSendCommand
                | DatabaseErrorKind::ClosedConnection
                | DatabaseErrorKind::SerializationFailure => StoreError::Unavailable(detail),
                _ if is_busy(info.message()) => StoreError::Unavailable(detail),
                _ => StoreError::Other(detail),
            }
        }
        DieselError::NotFound => StoreError::NotFound("no such record".to_owned()),
        DieselError::DeserializationError(e) => {
            StoreError::Corrupt(format!("a stored value does not decode: {e}"))
        }
        DieselError::BrokenTransactionManager | DieselError::AlreadyInTransaction => {
            StoreError::Unavailable(format!("connection unusable: {error}"))
        }
        other => StoreError::Other(other.to_string()),
    }
}

/// SQLite reports a lock held longer than the busy timeout with these messages; they are
/// transient.
fn is_busy(message: &str) -> bool {
    message.contains("database is locked") || message.contains("database table is locked")
}

/// A connection that could not be established.
pub(crate) fn connection_error(error: ConnectionError) -> StoreError {
    StoreError::Unavailable(format!("cannot connect to the database: {error}"))
}

/// A pool that could not hand out a connection.
pub(crate) fn pool_error(error: deadpool::managed::PoolError<ManagerError>) -> StoreError {
    use deadpool::managed::PoolError;
    match error {
        PoolError::Timeout(kind) => {
            StoreError::Unavailable(format!("no database connection in time ({kind:?})"))
        }
        PoolError::Backend(ManagerError::ConnectionError(e)) => connection_error(e),
        PoolError::Backend(ManagerError::QueryError(e)) => {
            StoreError::Unavailable(format!("database connection check failed: {e}"))
        }
        other => StoreError::Unavailable(format!("database pool: {other}")),
    }
}

/// A stored value that cannot be turned into the domain model.
pub(crate) fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

/// A value from the domain that the schema cannot hold (e.g. an integer out of range).
pub(crate) fn unstorable(what: impl std::fmt::Display) -> StoreError {
    StoreError::Other(format!("cannot store: {what}"))
}
