//! [`SinkConfig`]: the sink's settings, their defaults and their validation.
//!
//! [`SinkConfig`] deserialises itself from the `events.*` configuration keys (D14), durations
//! as whole milliseconds; every validation error names the key it is about, so an operator
//! knows what to fix.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The most events one request may carry (D7). A queue smaller than this could refuse a valid
/// request forever, so [`SinkConfig::validate`] rejects it.
pub const MAX_EVENTS_PER_REQUEST: usize = 100;

/// When an events request is answered 202 (`events.ack`, D15).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AckMode {
    /// `stored` (the default): once every event the request counts as accepted is durable
    /// (committed by the store, or acknowledged by the event bus). A request that waits
    /// longer than `events.ack_timeout_ms` gets 503 `overloaded`; its events stay queued.
    #[default]
    Stored,
    /// `buffered`: as soon as the events are in the sink's memory. Faster to answer, but a
    /// hard kill of the process loses what is queued (at most `events.queue_capacity`).
    Buffered,
}

impl AckMode {
    /// The configuration value: `stored` or `buffered`.
    pub const fn as_str(self) -> &'static str {
        match self {
            AckMode::Stored => "stored",
            AckMode::Buffered => "buffered",
        }
    }
}

/// Settings of a [`Sink`](crate::Sink). Start from [`SinkConfig::default`] and override fields,
/// or deserialise it from the `events.*` keys each field's doc names (missing keys keep their
/// defaults). Keys it does not read are ignored: the `[events]` table also holds other
/// components' settings, so refusing a key no component reads is the caller's job (the binary
/// does).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "SinkKeys", into = "SinkKeys")]
pub struct SinkConfig {
    /// `events.ack`: when a request's events count as accepted (D15). Default
    /// [`AckMode::Stored`].
    pub ack: AckMode,
    /// `events.ack_timeout_ms`: in [`AckMode::Stored`], the longest a request waits for its
    /// events to be stored before it gets 503 `overloaded` (its events stay queued and are
    /// stored later; the SDK's retry is counted once). Default 5 s.
    pub ack_timeout: Duration,
    /// `events.queue_capacity`: how many events the sink holds at most, queued plus being
    /// written. A request that does not fit whole is refused (D7). It is also the most a hard
    /// kill can lose (`docs/operations.md`). Default 100,000.
    pub queue_capacity: usize,
    /// `events.batch_size`: most events per store write; a writer flushes as soon as this many
    /// are queued. Default 1,000.
    pub batch_size: usize,
    /// `events.flush_interval_ms`: the longest an event waits in the queue before a writer
    /// flushes a partial batch. Default 200 ms.
    pub flush_interval: Duration,
    /// `events.write_threshold`: when no write is in flight, a writer writes as soon as this
    /// many events are queued (up to `batch_size` in one write), without waiting for
    /// `flush_interval`. At moderate rates this keeps batches near this size instead of one
    /// large write per interval: the database works in small steps, less is held in memory
    /// (what a hard kill loses), and events are stored sooner. While a write is in flight the
    /// others wait for a full batch (or the interval), so under heavy load batches still grow
    /// to `batch_size`. Values above `batch_size` act as `batch_size`. Default 100.
    pub write_threshold: usize,
    /// `events.drain_deadline_ms`: how long a graceful shutdown may spend writing what is
    /// queued (the binary passes it to [`Sink::shutdown`](crate::Sink::shutdown)). Default
    /// 20 s, which fits in Kubernetes' default 30 s termination grace period.
    pub drain_deadline: Duration,
    /// `events.writers`: writer tasks, each writing one batch at a time. Default 2.
    pub writers: usize,
    /// `events.record_resolve_no_flow`: record the server's `resolve_no_flow` events (D8).
    /// When off, the sink drops them on enqueue (counted in
    /// [`SinkStats::server_events_skipped`](crate::SinkStats::server_events_skipped)).
    /// Default on.
    pub record_resolve_no_flow: bool,
    /// `events.write_timeout_ms`: the longest one store write may take before it counts as
    /// failed and is retried (a network partition without a reset could otherwise hold a
    /// writer for as long as TCP keeps the connection). Retrying is safe: writes are
    /// idempotent on `event_id`. Default 30 s.
    pub write_timeout: Duration,
    /// `events.admission_wait_ms`: how long an events request that finds the queue full
    /// waits for the writers to free capacity before it is refused with 503 `overloaded` (D7).
    /// The request waits before its body is read, holding nothing but its connection; waiting
    /// requests are admitted in arrival order. 0 refuses at once. Default 250 ms.
    pub admission_wait: Duration,
    /// Delays between attempts at a batch that failed.
    pub backoff: Backoff,
}

/// Jittered exponential backoff between attempts at a failed batch: attempt `n` (from 0)
/// waits a uniformly random time in `[d/2, d]` where `d = min(max, base * 2^n)`. The floor
/// keeps a failing store from being hammered, the jitter spreads replicas apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// `events.retry_base_ms`: the ceiling of the first delay. Default 100 ms.
    pub base: Duration,
    /// `events.retry_max_ms`: the largest delay. Default 10 s.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(100),
            max: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// The delay ceiling `d` of attempt `attempt` (0-based) before jitter.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// The delay of attempt `attempt`, given a uniform random number `unit` in `[0, 1)`.
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        let ceiling = self.ceiling(attempt);
        let half = ceiling / 2;
        half + half.mul_f64(unit.clamp(0.0, 1.0))
    }
}

impl Default for SinkConfig {
    fn default() -> Self {
        Self {
            ack: AckMode::Stored,
            ack_timeout: Duration::from_secs(5),
            queue_capacity: 100_000,
            batch_size: 1_000,
            flush_interval: Duration::from_millis(200),
            write_threshold: 100,
            drain_deadline: Duration::from_secs(20),
            writers: 2,
            record_resolve_no_flow: true,
            write_timeout: Duration::from_secs(30),
            admission_wait: Duration::from_millis(250),
            backoff: Backoff::default(),
        }
    }
}

/// [`SinkConfig`] as the `events.*` keys spell it: durations in whole milliseconds (a
/// fraction of a millisecond is not kept), the backoff flat.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, rename = "SinkConfig")]
struct SinkKeys {
    ack: AckMode,
    ack_timeout_ms: u64,
    queue_capacity: usize,
    batch_size: usize,
    flush_interval_ms: u64,
    write_threshold: usize,
    drain_deadline_ms: u64,
    writers: usize,
    record_resolve_no_flow: bool,
    write_timeout_ms: u64,
    admission_wait_ms: u64,
    retry_base_ms: u64,
    retry_max_ms: u64,
}

impl Default for SinkKeys {
    fn default() -> Self {
        SinkConfig::default().into()
    }
}

impl From<SinkConfig> for SinkKeys {
    fn from(c: SinkConfig) -> Self {
        Self {
            ack: c.ack,
            ack_timeout_ms: millis(c.ack_timeout),
            queue_capacity: c.queue_capacity,
            batch_size: c.batch_size,
            flush_interval_ms: millis(c.flush_interval),
            write_threshold: c.write_threshold,
            drain_deadline_ms: millis(c.drain_deadline),
            writers: c.writers,
            record_resolve_no_flow: c.record_resolve_no_flow,
            write_timeout_ms: millis(c.write_timeout),
            admission_wait_ms: millis(c.admission_wait),
            retry_base_ms: millis(c.backoff.base),
            retry_max_ms: millis(c.backoff.max),
        }
    }
}

impl From<SinkKeys> for SinkConfig {
    fn from(k: SinkKeys) -> Self {
        Self {
            ack: k.ack,
            ack_timeout: Duration::from_millis(k.ack_timeout_ms),
            queue_capacity: k.queue_capacity,
            batch_size: k.batch_size,
            flush_interval: Duration::from_millis(k.flush_interval_ms),
            write_threshold: k.write_threshold,
            drain_deadline: Duration::from_millis(k.drain_deadline_ms),
            writers: k.writers,
            record_resolve_no_flow: k.record_resolve_no_flow,
            write_timeout: Duration::from_millis(k.write_timeout_ms),
            admission_wait: Duration::from_millis(k.admission_wait_ms),
            backoff: Backoff {
                base: Duration::from_millis(k.retry_base_ms),
                max: Duration::from_millis(k.retry_max_ms),
            },
        }
    }
}

/// A setting out of its range; the message names the configuration key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The configuration key, e.g. `events.batch_size`.
    pub key: &'static str,
    /// What is wrong, as a full sentence that starts with the key.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

fn range_u64(key: &'static str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError {
            key,
            message: format!("{key} must be between {min} and {max} (got {value})"),
        })
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl SinkConfig {
    /// Queued events at which a writer writes without waiting for the flush interval.
    pub(crate) fn ready_size(&self) -> usize {
        self.write_threshold.min(self.batch_size)
    }

    /// Checks every setting; the first one out of range is reported with its key.
    ///
    /// Ranges: `queue_capacity` 100..=10,000,000 (a request of 100 events must fit, D7);
    /// `batch_size` 1..=10,000; `write_threshold` 1..=10,000; `flush_interval_ms` 1..=60,000;
    /// `drain_deadline_ms` 0..=3,600,000; `writers` 1..=64; `write_timeout_ms` 1..=600,000;
    /// `admission_wait_ms` 0..=60,000; `ack_timeout_ms` 1..=600,000; `retry_base_ms`
    /// 1..=60,000; `retry_max_ms` from `retry_base_ms` to 600,000.
    pub fn validate(&self) -> Result<(), ConfigError> {
        range_u64(
            "events.ack_timeout_ms",
            millis(self.ack_timeout),
            1,
            600_000,
        )?;
        range_u64(
            "events.queue_capacity",
            self.queue_capacity as u64,
            MAX_EVENTS_PER_REQUEST as u64,
            10_000_000,
        )?;
        range_u64("events.batch_size", self.batch_size as u64, 1, 10_000)?;
        range_u64(
            "events.write_threshold",
            self.write_threshold as u64,
            1,
            10_000,
        )?;
        range_u64(
            "events.flush_interval_ms",
            millis(self.flush_interval),
            1,
            60_000,
        )?;
        range_u64(
            "events.drain_deadline_ms",
            millis(self.drain_deadline),
            0,
            3_600_000,
        )?;
        range_u64("events.writers", self.writers as u64, 1, 64)?;
        range_u64(
            "events.write_timeout_ms",
            millis(self.write_timeout),
            1,
            600_000,
        )?;
        range_u64(
            "events.admission_wait_ms",
            millis(self.admission_wait),
            0,
            60_000,
        )?;
        range_u64("events.retry_base_ms", millis(self.backoff.base), 1, 60_000)?;
        range_u64(
            "events.retry_max_ms",
            millis(self.backoff.max),
            millis(self.backoff.base),
            600_000,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_documented() {
        let c = SinkConfig::default();
        assert_eq!(c.validate(), Ok(()));
        // docs/operations.md and the field docs quote these numbers.
        assert_eq!(c.ack, AckMode::Stored);
        assert_eq!(c.ack_timeout, Duration::from_secs(5));
        assert_eq!(c.queue_capacity, 100_000);
        assert_eq!(c.batch_size, 1_000);
        assert_eq!(c.flush_interval, Duration::from_millis(200));
        assert_eq!(c.write_threshold, 100);
        assert_eq!(c.drain_deadline, Duration::from_secs(20));
        assert_eq!(c.writers, 2);
        assert!(c.record_resolve_no_flow);
        assert_eq!(c.write_timeout, Duration::from_secs(30));
        assert_eq!(c.admission_wait, Duration::from_millis(250));
        assert_eq!(c.backoff.base, Duration::from_millis(100));
        assert_eq!(c.backoff.max, Duration::from_secs(10));
    }

    #[test]
    fn errors_name_the_key() {
        let bad = |f: fn(&mut SinkConfig)| {
            let mut c = SinkConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        let e = bad(|c| c.batch_size = 0);
        assert_eq!(e.key, "events.batch_size");
        assert_eq!(
            e.to_string(),
            "events.batch_size must be between 1 and 10000 (got 0)"
        );
        assert_eq!(bad(|c| c.queue_capacity = 99).key, "events.queue_capacity");
        assert_eq!(
            bad(|c| c.ack_timeout = Duration::ZERO).key,
            "events.ack_timeout_ms"
        );
        assert_eq!(bad(|c| c.write_threshold = 0).key, "events.write_threshold");
        assert_eq!(
            bad(|c| c.flush_interval = Duration::ZERO).key,
            "events.flush_interval_ms"
        );
        assert_eq!(
            bad(|c| c.drain_deadline = Duration::from_secs(7200)).key,
            "events.drain_deadline_ms"
        );
        assert_eq!(bad(|c| c.writers = 0).key, "events.writers");
        assert_eq!(
            bad(|c| c.write_timeout = Duration::ZERO).key,
            "events.write_timeout_ms"
        );
        assert_eq!(
            bad(|c| c.admission_wait = Duration::from_secs(61)).key,
            "events.admission_wait_ms"
        );
        assert_eq!(
            bad(|c| c.backoff.base = Duration::ZERO).key,
            "events.retry_base_ms"
        );
        assert_eq!(
            bad(|c| c.backoff.max = Duration::from_millis(50)).key,
            "events.retry_max_ms"
        );
    }

    /// The `events.*` keys: milliseconds for durations, the backoff flat, missing keys at
    /// their defaults, other components' keys of the shared table ignored.
    #[test]
    fn reads_the_events_keys() {
        let c: SinkConfig = serde_json::from_value(serde_json::json!({
            "ack": "buffered",
            "ack_timeout_ms": 1500,
            "flush_interval_ms": 50,
            "writers": 3,
            "record_resolve_no_flow": false,
            "retry_base_ms": 20,
            "retry_max_ms": 400,
            "sink": "jetstream",
            "jetstream": { "url": "nats://bus:4222" },
        }))
        .unwrap();
        let expected = SinkConfig {
            ack: AckMode::Buffered,
            ack_timeout: Duration::from_millis(1500),
            flush_interval: Duration::from_millis(50),
            writers: 3,
            record_resolve_no_flow: false,
            backoff: Backoff {
                base: Duration::from_millis(20),
                max: Duration::from_millis(400),
            },
            ..SinkConfig::default()
        };
        assert_eq!(c, expected);
        let keys = serde_json::to_value(SinkConfig::default()).unwrap();
        let mut keys: Vec<&str> = keys
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "ack",
                "ack_timeout_ms",
                "admission_wait_ms",
                "batch_size",
                "drain_deadline_ms",
                "flush_interval_ms",
                "queue_capacity",
                "record_resolve_no_flow",
                "retry_base_ms",
                "retry_max_ms",
                "write_threshold",
                "write_timeout_ms",
                "writers",
            ]
        );
        let err = serde_json::from_value::<SinkConfig>(serde_json::json!({"ack": "later"}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("later") && err.contains("buffered"), "{err}");
    }

    #[test]
    fn backoff_doubles_up_to_the_max_with_a_floor() {
        let b = Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        assert_eq!(b.ceiling(0), Duration::from_millis(100));
        assert_eq!(b.ceiling(1), Duration::from_millis(200));
        assert_eq!(b.ceiling(3), Duration::from_millis(800));
        assert_eq!(b.ceiling(4), Duration::from_secs(1));
        assert_eq!(b.ceiling(500), Duration::from_secs(1));
        assert_eq!(b.delay(1, 0.0), Duration::from_millis(100));
        assert_eq!(b.delay(1, 0.5), Duration::from_millis(150));
        assert!(b.delay(1, 0.999_999) <= Duration::from_millis(200));
    }
}
