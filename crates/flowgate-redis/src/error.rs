//! The one place Redis errors become [`StoreError`]s.

use flowgate_domain::ports::{Outage, StoreError};
use redis::{ErrorKind, RedisError, ServerErrorKind};

use flowgate_domain::secrets::Secrets;

/// `error`, met while doing `what` (which names the redacted URL), as the domain sees it; the
/// detail never holds a password.
///
/// - a URL or setting redis-rs refuses: [`StoreError::Config`];
/// - no answer in time (connecting or waiting for a reply): [`Outage::Timeout`];
/// - any other I/O failure (refused, reset, closed, name resolution): [`Outage::Connection`];
/// - Redis turning the command away for now (loading its data set, a failover under way, out of
///   memory, a busy script): [`Outage::Busy`];
/// - anything else (a wrong password, a key of another type): [`StoreError::Other`].
pub(crate) fn store_error(error: &RedisError, what: &str, secrets: &Secrets) -> StoreError {
    let detail = secrets.scrub(&format!("{what}: {error}"));
    if error.kind() == ErrorKind::InvalidClientConfig {
        return StoreError::Config { detail };
    }
    let reason = if error.is_timeout() {
        Some(Outage::Timeout)
    } else if error.is_io_error() {
        Some(Outage::Connection)
    } else if is_busy(error) {
        Some(Outage::Busy)
    } else {
        None
    };
    match reason {
        Some(reason) => StoreError::Unavailable { reason, detail },
        None => StoreError::Other { detail },
    }
}

/// Redis refused the command for a reason that passes: worth trying again later.
fn is_busy(error: &RedisError) -> bool {
    match error.kind() {
        ErrorKind::Server(
            ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly,
        ) => true,
        _ => matches!(error.code(), Some("BUSY" | "OOM")),
    }
}

/// A failure of the connection itself (refused, dropped), after which the connection manager
/// has started a new connection: the one case worth one immediate retry.
pub(crate) fn is_connection_loss(error: &RedisError) -> bool {
    error.is_connection_refusal() || error.is_connection_dropped()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(error: RedisError) -> StoreError {
        store_error(
            &error,
            "reading from redis://u:***@h",
            &Secrets::of("redis://u:pw@h"),
        )
    }

    #[test]
    fn kinds_map_to_the_domain() {
        let io = |kind| RedisError::from(std::io::Error::new(kind, "pw in the message"));
        match map(io(std::io::ErrorKind::ConnectionRefused)) {
            StoreError::Unavailable {
                reason: Outage::Connection,
                detail,
            } => assert!(!detail.contains("pw"), "{detail}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            map(io(std::io::ErrorKind::TimedOut)),
            StoreError::Unavailable {
                reason: Outage::Timeout,
                ..
            }
        ));
        assert!(matches!(
            map(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "Redis URL did not parse"
            ))),
            StoreError::Config { .. }
        ));
        assert!(matches!(
            map(RedisError::from((
                ErrorKind::AuthenticationFailed,
                "Password authentication failed"
            ))),
            StoreError::Other { .. }
        ));
    }
}
