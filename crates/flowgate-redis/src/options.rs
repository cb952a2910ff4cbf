//! How the store names its keys and how long it waits for Redis.

use std::time::Duration;

use flowgate_domain::ports::StoreError;

/// Settings of a [`RedisStickyStore`](crate::RedisStickyStore), besides its URL.
///
/// The waits bound what a call costs while Redis is away: a call takes at most about
/// `(reconnect_retries + 1) * connect_timeout` plus the backoff between attempts (tens of
/// milliseconds) when no connection can be made, and `response_timeout` when Redis does not
/// answer on a connection it accepted. Callers apply their own deadline on top
/// (`sticky.read_timeout_ms`, D23).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisStickyOptions {
    /// The first part of every key (`<key_prefix>:<app>:<attribute>:<value>`): separates
    /// flowgate's documents from other data in a shared Redis, and tests from each other.
    /// Default `flowgate:sticky`; not empty.
    pub key_prefix: String,
    /// How long one attempt to open a connection (TCP, then `HELLO`/`AUTH`/`SELECT`) may take.
    /// Default 1 s.
    pub connect_timeout: Duration,
    /// How long a command, or a whole pipeline, may wait for its answer. Default 1 s.
    pub response_timeout: Duration,
    /// How many times a failed connection attempt is repeated (with a short exponential backoff,
    /// 50 ms doubling, at most 500 ms) before the waiting calls fail. Default 0: a refused
    /// connection fails the call at once (resolve counts it `failed` rather than waiting out
    /// its deadline), and the caller paces its own retries (flowgate's sticky circuit).
    pub reconnect_retries: usize,
}

/// The default key prefix.
pub const DEFAULT_KEY_PREFIX: &str = "flowgate:sticky";

impl Default for RedisStickyOptions {
    fn default() -> Self {
        Self {
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            reconnect_retries: 0,
        }
    }
}

impl RedisStickyOptions {
    /// Settings that cannot work are a [`StoreError::Config`].
    pub(crate) fn validate(&self) -> Result<(), StoreError> {
        let problem = if self.key_prefix.is_empty() {
            Some("the sticky key prefix must not be empty")
        } else if self.connect_timeout.is_zero() {
            Some("the Redis connect timeout must be above zero")
        } else if self.response_timeout.is_zero() {
            Some("the Redis response timeout must be above zero")
        } else {
            None
        };
        match problem {
            Some(detail) => Err(StoreError::Config {
                detail: detail.to_owned(),
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_documented() {
        let o = RedisStickyOptions::default();
        assert_eq!(o.validate(), Ok(()));
        // The field docs name these values.
        assert_eq!(o.key_prefix, "flowgate:sticky");
        assert_eq!(o.connect_timeout, Duration::from_secs(1));
        assert_eq!(o.response_timeout, Duration::from_secs(1));
        assert_eq!(o.reconnect_retries, 0);
    }

    #[test]
    fn unusable_settings_are_config_errors() {
        for o in [
            RedisStickyOptions {
                key_prefix: String::new(),
                ..RedisStickyOptions::default()
            },
            RedisStickyOptions {
                connect_timeout: Duration::ZERO,
                ..RedisStickyOptions::default()
            },
            RedisStickyOptions {
                response_timeout: Duration::ZERO,
                ..RedisStickyOptions::default()
            },
        ] {
            assert!(
                matches!(o.validate(), Err(StoreError::Config { .. })),
                "{o:?}"
            );
        }
    }
}
