//! [`JetStreamConfig`]: the `events.jetstream.*` settings (D16), their defaults and their
//! validation. Every error names the key it is about. The service reads the `[events.jetstream]`
//! table of its configuration file straight into this type: its fields are the keys.

use std::fmt;
use std::time::Duration;

use flowgate_domain::secrets::redact_url;
use serde::{Deserialize, Serialize};

/// Settings of the event bus. Start from [`JetStreamConfig::default`] and override fields.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JetStreamConfig {
    /// `events.jetstream.url`: the NATS server(s), comma-separated (`nats://host:4222`,
    /// `tls://host:4222` for TLS, `nats://user:password@host:4222` with credentials). May hold
    /// a password: never logged as is ([`JetStreamConfig::redacted_url`]). Default
    /// `nats://127.0.0.1:4222`.
    pub url: String,
    /// `events.jetstream.stream`: the stream's name. Default `FLOWGATE_EVENTS`.
    pub stream: String,
    /// `events.jetstream.subject`: the subject events are published on (the stream's only
    /// subject). Default `flowgate.events`.
    pub subject: String,
    /// `events.jetstream.replicas`: copies of each message in a cluster (1, 3 or 5). A message
    /// counts as stored once a majority of them has it. Default 1; 3 in production.
    pub replicas: usize,
    /// `events.jetstream.consumer`: the durable pull consumer `flowgate ingest` reads with
    /// (all ingest processes share it). Default `flowgate-ingest`.
    pub consumer: String,
    /// `events.jetstream.max_deliveries`: deliveries of a message after which ingest sets it
    /// aside as a dead letter when it still cannot be stored (D17). Enforced by ingest: the
    /// consumer itself redelivers without limit, so a message is never dropped by the server.
    /// Default 10.
    pub max_deliveries: u32,
    /// `events.jetstream.ack_wait_ms`: how long the server waits for ingest to acknowledge a
    /// delivered message before it delivers it again (to any ingest process), in milliseconds
    /// ([`JetStreamConfig::ack_wait`]). Longer than a store write may take. Default 60 s.
    pub ack_wait_ms: u64,
    /// `events.jetstream.connect_timeout_ms`: the longest a connection or a JetStream API call
    /// (stream and consumer checks) may take, in milliseconds
    /// ([`JetStreamConfig::connect_timeout`]). Default 5 s.
    pub connect_timeout_ms: u64,
    /// `events.jetstream.ingest_batch_size`: about how many events `flowgate ingest` writes
    /// to the store at once (whole messages of up to 100 events). Larger than the sink's
    /// `events.batch_size`: nothing waits on an ingest write, and larger batches come closer
    /// to a raw `COPY`'s rows/s (docs/benchmarks.md, event bus). Default 5,000.
    pub ingest_batch_size: usize,
}

impl Default for JetStreamConfig {
    fn default() -> Self {
        Self {
            url: "nats://127.0.0.1:4222".to_owned(),
            stream: "FLOWGATE_EVENTS".to_owned(),
            subject: "flowgate.events".to_owned(),
            replicas: 1,
            consumer: "flowgate-ingest".to_owned(),
            max_deliveries: 10,
            ack_wait_ms: 60_000,
            connect_timeout_ms: 5_000,
            ingest_batch_size: 5_000,
        }
    }
}

impl fmt::Debug for JetStreamConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JetStreamConfig")
            .field("url", &self.redacted_url())
            .field("stream", &self.stream)
            .field("subject", &self.subject)
            .field("replicas", &self.replicas)
            .field("consumer", &self.consumer)
            .field("max_deliveries", &self.max_deliveries)
            .field("ack_wait_ms", &self.ack_wait_ms)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .field("ingest_batch_size", &self.ingest_batch_size)
            .finish()
    }
}

/// A setting out of its range; the message names the configuration key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {problem}")]
pub struct ConfigError {
    /// The configuration key, e.g. `events.jetstream.replicas`.
    pub key: &'static str,
    /// What is wrong, quoting the value.
    pub problem: String,
}

fn invalid(key: &'static str, problem: String) -> ConfigError {
    ConfigError { key, problem }
}

/// A stream or consumer name: what NATS accepts in an API subject.
fn check_name(key: &'static str, name: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(invalid(
            key,
            format!(
                "`{name}` is not a valid name: 1 to 64 characters of A-Z, a-z, 0-9, `_` and `-`"
            ),
        ))
    }
}

impl JetStreamConfig {
    /// `ack_wait_ms` as a duration.
    pub fn ack_wait(&self) -> Duration {
        Duration::from_millis(self.ack_wait_ms)
    }

    /// `connect_timeout_ms` as a duration.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }

    /// The URL with every password replaced by `***`, for logs and messages.
    pub fn redacted_url(&self) -> String {
        redact_url(&self.url)
    }

    /// Checks every setting; the first one out of range is reported with its key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.url.trim().is_empty() {
            return Err(invalid(
                "events.jetstream.url",
                "is empty: give the NATS server, e.g. nats://127.0.0.1:4222".to_owned(),
            ));
        }
        for server in self.url.split(',') {
            let server = server.trim();
            let known = ["nats://", "tls://", "ws://", "wss://"]
                .iter()
                .any(|scheme| server.starts_with(scheme));
            if !known {
                return Err(invalid(
                    "events.jetstream.url",
                    format!("`{}` must start with nats:// or tls://", redact_url(server)),
                ));
            }
        }
        check_name("events.jetstream.stream", &self.stream)?;
        check_name("events.jetstream.consumer", &self.consumer)?;
        let subject_ok = !self.subject.is_empty()
            && self
                .subject
                .split('.')
                .all(|token| !token.is_empty() && !token.contains([' ', '*', '>', '\t']));
        if !subject_ok {
            return Err(invalid(
                "events.jetstream.subject",
                format!(
                    "`{}` is not a subject: dot-separated tokens without spaces or wildcards",
                    self.subject
                ),
            ));
        }
        if ![1, 3, 5].contains(&self.replicas) {
            return Err(invalid(
                "events.jetstream.replicas",
                format!("must be 1, 3 or 5 (got {})", self.replicas),
            ));
        }
        if !(1..=1000).contains(&self.max_deliveries) {
            return Err(invalid(
                "events.jetstream.max_deliveries",
                format!("must be between 1 and 1000 (got {})", self.max_deliveries),
            ));
        }
        let ack_wait = self.ack_wait_ms;
        if !(1_000..=3_600_000).contains(&ack_wait) {
            return Err(invalid(
                "events.jetstream.ack_wait_ms",
                format!("must be between 1000 and 3600000 (got {ack_wait})"),
            ));
        }
        if !(1..=100_000).contains(&self.ingest_batch_size) {
            return Err(invalid(
                "events.jetstream.ingest_batch_size",
                format!(
                    "must be between 1 and 100000 (got {})",
                    self.ingest_batch_size
                ),
            ));
        }
        let connect = self.connect_timeout_ms;
        if !(100..=60_000).contains(&connect) {
            return Err(invalid(
                "events.jetstream.connect_timeout_ms",
                format!("must be between 100 and 60000 (got {connect})"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_documented() {
        let c = JetStreamConfig::default();
        assert_eq!(c.validate(), Ok(()));
        // D16 names these defaults.
        assert_eq!(c.url, "nats://127.0.0.1:4222");
        assert_eq!(c.stream, "FLOWGATE_EVENTS");
        assert_eq!(c.subject, "flowgate.events");
        assert_eq!(c.replicas, 1);
        assert_eq!(c.consumer, "flowgate-ingest");
        assert_eq!(c.max_deliveries, 10);
        assert_eq!(c.ingest_batch_size, 5_000);
    }

    #[test]
    fn errors_name_the_key_and_quote_the_value() {
        let bad = |f: fn(&mut JetStreamConfig)| {
            let mut c = JetStreamConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        let e = bad(|c| c.replicas = 2);
        assert_eq!(
            e.to_string(),
            "events.jetstream.replicas: must be 1, 3 or 5 (got 2)"
        );
        let e = bad(|c| c.stream = "my stream".to_owned());
        assert_eq!(e.key, "events.jetstream.stream");
        assert!(e.problem.contains("`my stream`"), "{e}");
        assert_eq!(
            bad(|c| c.subject = "a.*".to_owned()).key,
            "events.jetstream.subject"
        );
        assert_eq!(
            bad(|c| c.subject = "a..b".to_owned()).key,
            "events.jetstream.subject"
        );
        assert_eq!(
            bad(|c| c.consumer = String::new()).key,
            "events.jetstream.consumer"
        );
        assert_eq!(
            bad(|c| c.max_deliveries = 0).key,
            "events.jetstream.max_deliveries"
        );
        assert_eq!(
            bad(|c| c.ack_wait_ms = 10).key,
            "events.jetstream.ack_wait_ms"
        );
        let e = bad(|c| c.url = "http://u:secret@host".to_owned());
        assert_eq!(e.key, "events.jetstream.url");
        assert!(!e.to_string().contains("secret"), "{e}");
    }

    #[test]
    fn passwords_never_show() {
        let c = JetStreamConfig {
            url: "nats://flowgate:s3cret@a:4222,tls://token@b:4222,nats://c:4222".to_owned(),
            ..JetStreamConfig::default()
        };
        assert_eq!(
            c.redacted_url(),
            "nats://flowgate:***@a:4222,tls://***@b:4222,nats://c:4222"
        );
        assert!(!format!("{c:?}").contains("s3cret"));
    }
}
