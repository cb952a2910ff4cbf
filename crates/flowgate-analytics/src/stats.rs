//! Metrics of the sink, kept in atomics and read as a [`SinkStats`] snapshot at any time; its
//! histograms are prometheus-client's (the workspace's one histogram type), which the binary
//! encodes on `/metrics` (D11) with the rest of the snapshot.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use prometheus_client::metrics::histogram::Histogram;

/// Upper bounds of the batch size histogram's buckets, in events (the last bucket is open).
pub const BATCH_SIZE_BOUNDS: &[f64] = &[
    1.0, 10.0, 50.0, 100.0, 250.0, 500.0, 1_000.0, 2_500.0, 5_000.0, 10_000.0,
];

/// Upper bounds of the write latency histogram's buckets, in seconds (the last bucket is open).
pub const WRITE_LATENCY_BOUNDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The write rate, measured over windows of [`RATE_WINDOW`]: the rate of the last complete
/// window, or of the current one once it is a second old. Updated once per written batch.
#[derive(Debug)]
pub(crate) struct RateMeter {
    state: Mutex<RateState>,
}

/// Length of a write rate window.
pub(crate) const RATE_WINDOW: Duration = Duration::from_secs(5);

#[derive(Debug)]
struct RateState {
    window_start: Instant,
    count: u64,
    last_rate: Option<f64>,
}

impl RateMeter {
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(RateState {
                window_start: Instant::now(),
                count: 0,
                last_rate: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RateState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn record(&self, events: u64) {
        let mut s = self.lock();
        let now = Instant::now();
        let elapsed = now.duration_since(s.window_start);
        if elapsed >= RATE_WINDOW {
            s.last_rate = Some(s.count as f64 / elapsed.as_secs_f64());
            s.window_start = now;
            s.count = 0;
        }
        s.count += events;
    }

    /// Events per second, or `None` before anything was measured.
    pub(crate) fn rate(&self) -> Option<f64> {
        let s = self.lock();
        let elapsed = s.window_start.elapsed();
        if elapsed >= RATE_WINDOW * 2 {
            // Nothing written for a whole window: the rate is zero now.
            return Some(0.0);
        }
        if elapsed >= Duration::from_secs(1) && s.count > 0 {
            let current = s.count as f64 / elapsed.as_secs_f64();
            return Some(s.last_rate.map_or(current, |last| last.max(current)));
        }
        s.last_rate
    }
}

/// The counters the sink updates; all relaxed atomics (they are statistics, not
/// synchronisation).
#[derive(Debug)]
pub(crate) struct Counters {
    pub(crate) enqueued: AtomicU64,
    pub(crate) requests_accepted: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) requests_refused: AtomicU64,
    pub(crate) server_events_skipped: AtomicU64,
    pub(crate) written: AtomicU64,
    pub(crate) duplicates: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) last_batch_size: AtomicU64,
    pub(crate) failed_attempts: AtomicU64,
    pub(crate) failing: AtomicBool,
    /// Unix milliseconds of the last failed write, 0 for never.
    pub(crate) last_failure_ms: AtomicU64,
    pub(crate) batch_sizes: Histogram,
    pub(crate) write_latency: Histogram,
    /// How long acknowledged requests waited for their events to be stored (D15).
    pub(crate) ack_wait: Histogram,
    pub(crate) acks_timed_out: AtomicU64,
    pub(crate) dead_lettered: AtomicU64,
    pub(crate) rate: RateMeter,
    pub(crate) last_error: Mutex<Option<String>>,
}

impl Counters {
    pub(crate) fn new() -> Self {
        Self {
            enqueued: AtomicU64::new(0),
            requests_accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            requests_refused: AtomicU64::new(0),
            server_events_skipped: AtomicU64::new(0),
            written: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            last_batch_size: AtomicU64::new(0),
            failed_attempts: AtomicU64::new(0),
            failing: AtomicBool::new(false),
            last_failure_ms: AtomicU64::new(0),
            batch_sizes: Histogram::new(BATCH_SIZE_BOUNDS.iter().copied()),
            write_latency: Histogram::new(WRITE_LATENCY_BOUNDS.iter().copied()),
            ack_wait: Histogram::new(WRITE_LATENCY_BOUNDS.iter().copied()),
            acks_timed_out: AtomicU64::new(0),
            dead_lettered: AtomicU64::new(0),
            rate: RateMeter::new(),
            last_error: Mutex::new(None),
        }
    }

    pub(crate) fn record_failure(&self, message: String) {
        self.failed_attempts.fetch_add(1, Ordering::Relaxed);
        self.failing.store(true, Ordering::Relaxed);
        let now_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.last_failure_ms.store(now_ms, Ordering::Relaxed);
        *self
            .last_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(message);
    }

    pub(crate) fn record_success(&self, events: usize, duplicates: usize, latency: Duration) {
        self.failing.store(false, Ordering::Relaxed);
        self.written.fetch_add(events as u64, Ordering::Relaxed);
        self.duplicates
            .fetch_add(duplicates as u64, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.last_batch_size.store(events as u64, Ordering::Relaxed);
        self.batch_sizes.observe(events as f64);
        self.write_latency.observe(latency.as_secs_f64());
        self.rate.record(events as u64);
    }

    pub(crate) fn record_dead_letters(&self, events: usize) {
        self.dead_lettered
            .fetch_add(events as u64, Ordering::Relaxed);
    }

    pub(crate) fn last_failure(&self) -> Option<SystemTime> {
        match self.last_failure_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(SystemTime::UNIX_EPOCH + Duration::from_millis(ms)),
        }
    }
}

/// A snapshot of the sink's metrics ([`Sink::stats`](crate::Sink::stats)). Counters count
/// since the sink started. The histograms are handles on the sink's own (they read what has
/// been observed when they are read or encoded, not when the snapshot was taken).
#[derive(Clone, Debug)]
pub struct SinkStats {
    /// The configured capacity, in events (queued plus in flight).
    pub queue_capacity: usize,
    /// Events waiting in the queue.
    pub queue_depth: usize,
    /// Events taken by writers and not yet stored (being written or waiting for a retry).
    pub in_flight: usize,
    /// Age of the oldest event not yet stored (queued or in flight); `None` when there is none.
    pub oldest_event_age: Option<Duration>,
    /// Events accepted by `try_enqueue`.
    pub events_enqueued: u64,
    /// Requests (calls of `try_enqueue`) whose events were accepted.
    pub requests_accepted: u64,
    /// Events refused (their requests got 503 `overloaded`, D7).
    pub events_refused: u64,
    /// Requests refused.
    pub requests_refused: u64,
    /// `resolve_no_flow` events dropped because `record_resolve_no_flow` is off (D8).
    pub server_events_skipped: u64,
    /// Events stored (including ones the store already had: `events_duplicate`).
    pub events_written: u64,
    /// Written events whose `event_id` the store already had (a retried SDK request, or a
    /// batch retried after an ambiguous failure).
    pub events_duplicate: u64,
    /// Batches stored.
    pub batches_written: u64,
    /// Size of the last stored batch.
    pub last_batch_size: usize,
    /// Sizes of stored batches ([`BATCH_SIZE_BOUNDS`]).
    pub batch_sizes: Histogram,
    /// Duration of successful store writes, in seconds ([`WRITE_LATENCY_BOUNDS`]).
    pub write_latency: Histogram,
    /// Failed write attempts, each followed by a retry of the same batch.
    pub write_retries: u64,
    /// Events the store refused for good, set aside as dead letters (D17). They count in
    /// `events_written`: they are durable, in the dead letters.
    pub events_dead_lettered: u64,
    /// How long requests waited for their events to be stored before their 202, in seconds
    /// ([`WRITE_LATENCY_BOUNDS`]; `events.ack = "stored"`, D15).
    pub ack_wait: Histogram,
    /// Requests that waited `events.ack_timeout_ms` without their events being stored and got
    /// 503 (their events stay queued).
    pub acks_timed_out: u64,
    /// Events per second written recently (over windows of 5 s); `None` before the first
    /// measurement.
    pub write_rate: Option<f64>,
    /// False while the store is failing: the last write attempt failed (D12: `/readyz`
    /// reports degraded).
    pub store_healthy: bool,
    /// When a write last failed.
    pub last_failure: Option<SystemTime>,
    /// The last write error, for the log and operators (never shown to clients, D9).
    pub last_error: Option<String>,
    /// True once shutdown began: new events are refused.
    pub shutting_down: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_unknown_before_writes() {
        let r = RateMeter::new();
        assert_eq!(r.rate(), None);
    }
}
