//! The one place where diesel, pool and connection errors become [`StoreError`]s.
//!
//! - cannot connect, connection lost: [`StoreError::Unavailable`] with [`Outage::Connection`];
//!   no pooled connection in time, a statement cancelled by `statement_timeout`:
//!   [`Outage::Timeout`]; a busy SQLite database and the server's transient refusals
//!   (serialization failure, deadlock, lock not available, insufficient resources such as a full
//!   disk): [`Outage::Busy`]. All transient: callers retry (D7, D12);
//! - unique, check, not-null, exclusion and restrict violations: [`StoreError::Conflict`];
//! - foreign-key violations: [`StoreError::NotFound`] (a referenced record does not exist);
//! - stored values that do not decode: [`StoreError::Corrupt`];
//! - anything else: [`StoreError::Other`].
//!
//! An error the database answered is classified by its SQLSTATE in one function,
//! [`database_error`], whether it came through diesel (whose error kinds stand for their
//! SQLSTATEs) or from the `COPY` client (`copy.rs`, which has the SQLSTATE itself).
//!
//! Messages carry the detail for the log; adapters above never show them to clients (D9).

use diesel::result::{ConnectionError, DatabaseErrorKind, Error as DieselError};
use diesel_async::pooled_connection::PoolError as ManagerError;
use flowgate_domain::ports::{Outage, StoreError};

/// The error of a transaction's body: a query's diesel error (so `?` works on queries, and
/// diesel rolls back) or the store's own (a stored value that does not decode rolls back too).
#[derive(Debug)]
pub(crate) enum TransactionError {
    Query(DieselError),
    Store(StoreError),
}

impl From<DieselError> for TransactionError {
    fn from(e: DieselError) -> Self {
        TransactionError::Query(e)
    }
}

impl From<StoreError> for TransactionError {
    fn from(e: StoreError) -> Self {
        TransactionError::Store(e)
    }
}

impl From<TransactionError> for StoreError {
    fn from(e: TransactionError) -> Self {
        match e {
            TransactionError::Query(e) => query_error(e),
            TransactionError::Store(e) => e,
        }
    }
}

/// A diesel error from a query or transaction.
pub(crate) fn query_error(error: DieselError) -> StoreError {
    match error {
        DieselError::DatabaseError(kind, info) => {
            let detail = match info.details() {
                Some(details) => format!("{} ({details})", info.message()),
                None => info.message().to_owned(),
            };
            match kind {
                DatabaseErrorKind::UnableToSendCommand | DatabaseErrorKind::ClosedConnection => {
                    unavailable(Outage::Connection, detail)
                }
                _ if is_busy(info.message()) => unavailable(Outage::Busy, detail),
                kind => match sqlstate_of(kind) {
                    Some(code) => database_error(code, detail),
                    None => StoreError::Other { detail },
                },
            }
        }
        DieselError::NotFound => StoreError::NotFound {
            entity: "record",
            which: "no row matched the query".to_owned(),
        },
        DieselError::DeserializationError(e) => {
            corrupt(format!("a stored value does not decode: {e}"))
        }
        DieselError::BrokenTransactionManager | DieselError::AlreadyInTransaction => {
            unavailable(Outage::Connection, format!("connection unusable: {error}"))
        }
        other => StoreError::Other {
            detail: other.to_string(),
        },
    }
}

/// The SQLSTATE a diesel error kind stands for. diesel-async reports only these codes by kind
/// and every other one as `Unknown` (its error keeps no code), so on the diesel path a deadlock
/// or a full disk is [`StoreError::Other`]; the `COPY` path sees every code.
fn sqlstate_of(kind: DatabaseErrorKind) -> Option<&'static str> {
    match kind {
        DatabaseErrorKind::UniqueViolation => Some("23505"),
        DatabaseErrorKind::ForeignKeyViolation => Some("23503"),
        DatabaseErrorKind::NotNullViolation => Some("23502"),
        DatabaseErrorKind::CheckViolation => Some("23514"),
        DatabaseErrorKind::ExclusionViolation => Some("23P01"),
        DatabaseErrorKind::RestrictViolation => Some("23001"),
        DatabaseErrorKind::SerializationFailure => Some("40001"),
        DatabaseErrorKind::ReadOnlyTransaction => Some("25006"),
        _ => None,
    }
}

/// An error the database answered, by its SQLSTATE (`code`): the one classification of server
/// errors, for diesel's queries and the `COPY` alike.
pub(crate) fn database_error(code: &str, detail: String) -> StoreError {
    match code {
        // A referenced record does not exist.
        "23503" => StoreError::NotFound {
            entity: "referenced record",
            which: detail,
        },
        // Other integrity constraint violations: unique, not null, check, exclusion, restrict.
        c if c.starts_with("23") => StoreError::Conflict { detail },
        // Transient, the same statement may pass when tried again: a serialization failure,
        // a deadlock, a lock not available (`lock_timeout`), insufficient resources (53: disk
        // full, out of memory, too many connections).
        "40001" | "40P01" | "55P03" => unavailable(Outage::Busy, detail),
        c if c.starts_with("53") => unavailable(Outage::Busy, detail),
        // `statement_timeout`, or a cancel request.
        "57014" => unavailable(Outage::Timeout, detail),
        // Connection exceptions (08) and operator intervention (57: a shutdown, a crash).
        c if c.starts_with("08") || c.starts_with("57") => unavailable(Outage::Connection, detail),
        _ => StoreError::Other { detail },
    }
}

/// SQLite reports a lock held longer than the busy timeout with these messages; they are
/// transient.
fn is_busy(message: &str) -> bool {
    message.contains("database is locked") || message.contains("database table is locked")
}

/// A connection that could not be established.
pub(crate) fn connection_error(error: ConnectionError) -> StoreError {
    unavailable(
        Outage::Connection,
        format!("cannot connect to the database: {error}"),
    )
}

/// A pool that could not hand out a connection.
pub(crate) fn pool_error(error: deadpool::managed::PoolError<ManagerError>) -> StoreError {
    use deadpool::managed::PoolError;
    match error {
        PoolError::Timeout(kind) => unavailable(
            Outage::Timeout,
            format!("no database connection in time ({kind:?})"),
        ),
        PoolError::Backend(ManagerError::ConnectionError(e)) => connection_error(e),
        PoolError::Backend(ManagerError::QueryError(e)) => unavailable(
            Outage::Connection,
            format!("database connection check failed: {e}"),
        ),
        other => unavailable(Outage::Connection, format!("database pool: {other}")),
    }
}

/// The store cannot serve the operation now.
pub(crate) fn unavailable(reason: Outage, detail: String) -> StoreError {
    StoreError::Unavailable { reason, detail }
}

/// A stored value that cannot be turned into the domain model.
pub(crate) fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        detail: what.to_string(),
    }
}

/// A value from the domain that the schema cannot hold (e.g. an integer out of range).
pub(crate) fn unstorable(what: impl std::fmt::Display) -> StoreError {
    StoreError::Unstorable {
        detail: what.to_string(),
    }
}

/// A setting of the store that cannot be used.
pub(crate) fn config_error(what: impl std::fmt::Display) -> StoreError {
    StoreError::Config {
        detail: what.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_missing_partition_error_is_told_from_other_check_violations() {
        assert!(is_missing_partition(
            Some("23514"),
            "no partition of relation \"analytics_events\" found for row"
        ));
        assert!(!is_missing_partition(
            Some("23514"),
            "new row violates check constraint \"payload_small\""
        ));
        assert!(!is_missing_partition(
            Some("23505"),
            "no partition of relation"
        ));
    }

    /// The variant, and for an outage its reason.
    fn category(error: &StoreError) -> &'static str {
        match error {
            StoreError::Unavailable {
                reason: Outage::Connection,
                ..
            } => "connection",
            StoreError::Unavailable {
                reason: Outage::Timeout,
                ..
            } => "timeout",
            StoreError::Unavailable { .. } => "busy",
            StoreError::Conflict { .. } => "conflict",
            StoreError::NotFound { .. } => "not found",
            StoreError::Corrupt { .. } => "corrupt",
            _ => "other",
        }
    }

    #[test]
    fn server_errors_are_classified_by_sqlstate() {
        for (code, expected) in [
            ("40001", "busy"),       // serialization failure
            ("40P01", "busy"),       // deadlock detected
            ("55P03", "busy"),       // lock not available
            ("53100", "busy"),       // disk full
            ("53200", "busy"),       // out of memory
            ("53300", "busy"),       // too many connections
            ("57014", "timeout"),    // query canceled
            ("57P01", "connection"), // admin shutdown
            ("08006", "connection"), // connection failure
            ("23505", "conflict"),
            ("23502", "conflict"),
            ("23514", "conflict"),
            ("23503", "not found"),
            ("22P02", "other"), // invalid text representation: bad data
            ("22001", "other"), // string data right truncation
            ("40002", "other"), // a deferred constraint: not transient
            ("42P01", "other"), // undefined table
            ("55000", "other"), // object not in prerequisite state
        ] {
            let error = database_error(code, "detail".to_owned());
            assert_eq!(category(&error), expected, "{code}");
        }
    }

    #[test]
    fn diesel_kinds_are_classified_as_their_sqlstates() {
        use DatabaseErrorKind as K;
        for (kind, expected) in [
            (K::UniqueViolation, "conflict"),
            (K::CheckViolation, "conflict"),
            (K::NotNullViolation, "conflict"),
            (K::ExclusionViolation, "conflict"),
            (K::RestrictViolation, "conflict"),
            (K::ForeignKeyViolation, "not found"),
            (K::SerializationFailure, "busy"),
            (K::UnableToSendCommand, "connection"),
            (K::ClosedConnection, "connection"),
            (K::ReadOnlyTransaction, "other"),
            (K::Unknown, "other"),
        ] {
            let error = query_error(DieselError::DatabaseError(kind, Box::new("x".to_owned())));
            assert_eq!(category(&error), expected, "{kind:?}");
        }
        let busy =
            DieselError::DatabaseError(K::Unknown, Box::new("database is locked".to_owned()));
        assert_eq!(category(&query_error(busy)), "busy");
    }
}

/// Why a PostgreSQL write of a batch failed.
#[derive(Debug)]
pub(crate) enum PgWriteError {
    /// An `event_id` of the batch is already stored (the `COPY` met the primary key): nothing
    /// of it was stored.
    AlreadyStored,
    /// No partition holds one of the rows (D21): nothing of it was stored.
    NoPartition(StoreError),
    /// Anything else, as the store reports it.
    Store(StoreError),
}

/// Whether a write failed because no partition holds one of its rows (PostgreSQL's check
/// violation "no partition of relation ... found for row").
pub(crate) fn is_missing_partition(code: Option<&str>, message: &str) -> bool {
    code == Some("23514") && message.contains("no partition of relation")
}
