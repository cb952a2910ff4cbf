//! `flowgate ingest`: reads the stream with the durable pull consumer and writes the events to
//! the store in batches, acknowledging each message only after the batch holding it committed
//! (D16). Any number of processes share the consumer; each runs `loops` fetch-and-write loops.
//!
//! - A message delivered twice (an ingest process killed before its acknowledgement, an
//!   acknowledgement lost) is stored once: the store is idempotent on `event_id`.
//! - A message in a format this release does not read (a later release's, D26) is never
//!   set aside: it is handed back (`NAK`) with [`IngestConfig::unreadable_retry`]'s delay, so
//!   that the durable consumer delivers it again, possibly to an ingest process of a release
//!   that reads it. The consumer never stops delivering a message (`max_deliver` = -1, see
//!   `setup`), so it waits in the stream as long as it takes. Each delivery is counted by
//!   format ([`IngestStats::unreadable_messages`],
//!   `flowgate_ingest_unreadable_messages_total{format}`) and logged, at most once a minute per
//!   format.
//! - A message no release can read (no format header, or a body that is not events in a format
//!   this release reads: corrupt) is a dead letter at once, with the bytes as received; it is
//!   then acknowledged as terminated.
//! - Events the store refuses for good are isolated and become dead letters, the rest of the
//!   batch is stored ([`store_batch`], D17).
//! - When the store fails transiently, the batch's messages are handed back (`NAK`) with a
//!   delay that grows with their deliveries; once a message has been delivered
//!   `max_deliveries` times and still cannot be stored, it is set aside as a dead letter if
//!   the dead letters can be written (a store that is down entirely keeps every message in
//!   the stream until it returns).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::pull;
use async_nats::jetstream::consumer::Consumer;
use async_nats::jetstream::{AckKind, Message};
use flowgate_domain::delivery::store_batch;
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ids::DeadLetterId;
use flowgate_domain::ports::{DeadLetter, DeadLetterStore, EventStore, Outage, StoreError};
use futures_util::StreamExt;
use time::OffsetDateTime;
use tokio::sync::watch;

use crate::codec::{decode, DecodeError, FORMAT_HEADER};
use crate::setup::{Bus, SetupError};

/// Settings of the ingest loops (from `events.*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IngestConfig {
    /// Fetch-and-write loops in this process (`events.writers`).
    pub loops: usize,
    /// Most messages fetched for one store write: with messages of up to 100 events, a
    /// write of `events.batch_size` events takes `batch_size / 100` full messages.
    pub messages_per_write: usize,
    /// The longest one store write may take (`events.write_timeout_ms`).
    pub write_timeout: Duration,
    /// How long a fetch waits for messages when the stream is empty.
    pub fetch_wait: Duration,
    /// Delay before a message handed back after a store failure is delivered again, doubled
    /// per delivery up to `retry_max` (`events.retry_base_ms`, `events.retry_max_ms`).
    pub retry_base: Duration,
    /// See `retry_base`.
    pub retry_max: Duration,
    /// Delay before a message in a format this release does not read is delivered again
    /// (to this process or another one, perhaps of a release that reads it).
    pub unreadable_retry: Duration,
}

/// The default of [`IngestConfig::unreadable_retry`]: long enough that a stream holding many
/// such messages costs little, short enough that a newer ingest process gets them soon.
pub const UNREADABLE_RETRY: Duration = Duration::from_secs(30);

/// Most distinct formats counted by name in [`IngestStats::unreadable_messages`]; the header
/// is the publisher's, so the rest are counted as `other`.
const MAX_UNREADABLE_FORMATS: usize = 16;
/// Longest format name kept as a label.
const MAX_FORMAT_LABEL_CHARS: usize = 64;
/// One log line per format at most this often.
const UNREADABLE_LOG_EVERY: Duration = Duration::from_secs(60);

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            loops: 4,
            messages_per_write: 10,
            write_timeout: Duration::from_secs(30),
            fetch_wait: Duration::from_secs(1),
            retry_base: Duration::from_millis(100),
            retry_max: Duration::from_secs(10),
            unreadable_retry: UNREADABLE_RETRY,
        }
    }
}

/// Counters of an ingest process, read at any time.
#[derive(Debug, Default)]
pub struct IngestStats {
    /// Messages received (redeliveries included).
    pub messages: AtomicU64,
    /// Messages received again after an earlier delivery.
    pub redeliveries: AtomicU64,
    /// Messages acknowledged after their events were stored.
    pub messages_acknowledged: AtomicU64,
    /// Events written.
    pub events_stored: AtomicU64,
    /// Events the store already had (a redelivery, or the SDK's retry).
    pub events_duplicate: AtomicU64,
    /// Events the store refused for good, now dead letters.
    pub events_dead_lettered: AtomicU64,
    /// Messages set aside as dead letters (no release can read them, or past
    /// `max_deliveries`).
    pub messages_dead_lettered: AtomicU64,
    /// Deliveries of messages in a format this release does not read, handed back to the
    /// stream (by format: [`IngestStats::unreadable_messages`]).
    pub messages_unreadable: AtomicU64,
    /// Store writes that failed (their messages handed back).
    pub write_failures: AtomicU64,
    /// Fetches that failed (NATS unreachable).
    pub fetch_failures: AtomicU64,
    /// Store writes that succeeded.
    pub writes: AtomicU64,
    /// Sum of store write durations, in microseconds.
    pub write_micros: AtomicU64,
    /// False while the last store write failed.
    pub store_failing: AtomicBool,
    /// False while the last fetch failed.
    pub bus_failing: AtomicBool,
    last_error: Mutex<Option<String>>,
    unreadable: Mutex<BTreeMap<String, Unreadable>>,
}

/// Deliveries of one unreadable format, and when one was last logged.
#[derive(Debug)]
struct Unreadable {
    deliveries: u64,
    logged_at: Option<Instant>,
    since_logged: u64,
}

impl IngestStats {
    /// The last error of a write or a fetch.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Deliveries of messages in a format this release does not read, by format (the label
    /// of `flowgate_ingest_unreadable_messages_total`), in the order of their names.
    pub fn unreadable_messages(&self) -> Vec<(String, u64)> {
        self.unreadable
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(format, u)| (format.clone(), u.deliveries))
            .collect()
    }

    /// Counts one delivery of an unreadable message in `format`; returns the deliveries to
    /// report when this one should be logged (the first, then at most once a minute).
    fn count_unreadable(&self, format: &str, now: Instant) -> Option<u64> {
        self.messages_unreadable.fetch_add(1, Ordering::Relaxed);
        let mut formats = self
            .unreadable
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut label: String = format.chars().take(MAX_FORMAT_LABEL_CHARS).collect();
        if !formats.contains_key(&label) && formats.len() >= MAX_UNREADABLE_FORMATS {
            label = "other".to_owned();
        }
        let entry = formats.entry(label).or_insert(Unreadable {
            deliveries: 0,
            logged_at: None,
            since_logged: 0,
        });
        entry.deliveries += 1;
        entry.since_logged += 1;
        let due = entry
            .logged_at
            .is_none_or(|at| now.saturating_duration_since(at) >= UNREADABLE_LOG_EVERY);
        if due {
            entry.logged_at = Some(now);
            Some(std::mem::take(&mut entry.since_logged))
        } else {
            None
        }
    }

    fn failed(&self, error: String) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(error);
    }
}

/// The ingest process's work: see the module documentation.
pub struct Ingest {
    bus: Bus,
    events: Arc<dyn EventStore>,
    dead_letters: Arc<dyn DeadLetterStore>,
    config: IngestConfig,
    stats: Arc<IngestStats>,
}

impl Ingest {
    /// Ingest from `bus` into `events`, dead letters into `dead_letters`.
    pub fn new(
        bus: Bus,
        events: Arc<dyn EventStore>,
        dead_letters: Arc<dyn DeadLetterStore>,
        config: IngestConfig,
    ) -> Self {
        Self {
            bus,
            events,
            dead_letters,
            config,
            stats: Arc::new(IngestStats::default()),
        }
    }

    /// The counters (shared with the running loops).
    pub fn stats(&self) -> Arc<IngestStats> {
        Arc::clone(&self.stats)
    }

    /// Runs the loops until `stop` turns true; each loop finishes the batch it holds (stores
    /// and acknowledges it) before it returns. Messages delivered and not acknowledged by
    /// then are delivered again after the consumer's `ack_wait`.
    pub async fn run(self, stop: watch::Receiver<bool>) -> Result<(), SetupError> {
        let consumer = self.bus.consumer().await?;
        let shared = Arc::new(self);
        let loops: Vec<_> = (0..shared.config.loops.max(1))
            .map(|_| {
                let (me, consumer, stop) = (Arc::clone(&shared), consumer.clone(), stop.clone());
                tokio::spawn(async move { me.run_loop(consumer, stop).await })
            })
            .collect();
        for handle in loops {
            let _ = handle.await;
        }
        Ok(())
    }

    async fn run_loop(&self, consumer: Consumer<pull::Config>, mut stop: watch::Receiver<bool>) {
        let mut fetch_failures: u32 = 0;
        while !*stop.borrow() {
            let fetched = tokio::select! {
                fetched = self.fetch(&consumer) => fetched,
                _ = stop.changed() => break,
            };
            match fetched {
                Ok(messages) => {
                    fetch_failures = 0;
                    self.stats.bus_failing.store(false, Ordering::Relaxed);
                    if !messages.is_empty() {
                        self.ingest(messages).await;
                    }
                }
                Err(error) => {
                    fetch_failures = fetch_failures.saturating_add(1);
                    self.stats.fetch_failures.fetch_add(1, Ordering::Relaxed);
                    self.stats.bus_failing.store(true, Ordering::Relaxed);
                    tracing::warn!(%error, "fetching from JetStream failed; retrying");
                    self.stats.failed(error.clone());
                    let pause = self.retry_delay(fetch_failures);
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = stop.changed() => break,
                    }
                }
            }
        }
    }

    /// Up to `messages_per_write` messages, waiting at most `fetch_wait` for the first.
    async fn fetch(&self, consumer: &Consumer<pull::Config>) -> Result<Vec<Message>, String> {
        let mut batch = consumer
            .fetch()
            .max_messages(self.config.messages_per_write.max(1))
            .expires(self.config.fetch_wait)
            .messages()
            .await
            .map_err(|e| e.to_string())?;
        let mut messages = Vec::new();
        while let Some(message) = batch.next().await {
            match message {
                Ok(message) => messages.push(message),
                Err(e) => {
                    if messages.is_empty() {
                        return Err(e.to_string());
                    }
                    break;
                }
            }
        }
        Ok(messages)
    }

    fn retry_delay(&self, attempt: u32) -> Duration {
        let factor = 1u32
            .checked_shl(attempt.saturating_sub(1).min(31))
            .unwrap_or(u32::MAX);
        self.config
            .retry_base
            .saturating_mul(factor)
            .min(self.config.retry_max)
    }

    /// Decodes, stores and acknowledges one fetched batch.
    async fn ingest(&self, messages: Vec<Message>) {
        let stats = &self.stats;
        let now = OffsetDateTime::now_utc();
        let mut events: Vec<AnalyticsEvent> = Vec::new();
        let mut decoded: Vec<Message> = Vec::with_capacity(messages.len());
        let mut undecodable: Vec<(Message, String)> = Vec::new();
        let mut unreadable: Vec<Message> = Vec::new();
        for message in messages {
            stats.messages.fetch_add(1, Ordering::Relaxed);
            if delivered(&message) > 1 {
                stats.redeliveries.fetch_add(1, Ordering::Relaxed);
            }
            let format = format_of(&message);
            match decode(format.as_deref(), &message.payload) {
                Ok(mut more) => {
                    events.append(&mut more);
                    decoded.push(message);
                }
                Err(DecodeError::Unreadable(format)) => {
                    if let Some(deliveries) = stats.count_unreadable(&format, Instant::now()) {
                        tracing::warn!(
                            format = %format,
                            deliveries,
                            reason = %DecodeError::Unreadable(format.clone()),
                            "a message in a format this release does not read goes back to the stream for a release that reads it (D26); logged at most once a minute per format, deliveries since the last line"
                        );
                    }
                    unreadable.push(message);
                }
                Err(e) => undecodable.push((message, e.to_string())),
            }
        }
        for message in &unreadable {
            acknowledge(message, AckKind::Nak(Some(self.config.unreadable_retry))).await;
        }
        if !undecodable.is_empty() {
            self.set_aside(undecodable, now).await;
        }
        if decoded.is_empty() {
            return;
        }
        let started = Instant::now();
        let result = match tokio::time::timeout(
            self.config.write_timeout,
            store_batch(&*self.events, &*self.dead_letters, &events, now),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(StoreError::Unavailable {
                reason: Outage::Timeout,
                detail: format!(
                    "the write took longer than {} ms",
                    self.config.write_timeout.as_millis()
                ),
            }),
        };
        match result {
            Ok(outcome) => {
                stats.store_failing.store(false, Ordering::Relaxed);
                stats.writes.fetch_add(1, Ordering::Relaxed);
                stats.write_micros.fetch_add(
                    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
                    Ordering::Relaxed,
                );
                stats
                    .events_stored
                    .fetch_add(outcome.inserted as u64, Ordering::Relaxed);
                stats
                    .events_duplicate
                    .fetch_add(outcome.duplicates as u64, Ordering::Relaxed);
                if outcome.dead_lettered > 0 {
                    stats
                        .events_dead_lettered
                        .fetch_add(outcome.dead_lettered as u64, Ordering::Relaxed);
                    tracing::error!(
                        dead_lettered = outcome.dead_lettered,
                        "the store refused events for good: they are dead letters, the rest of the batch is stored"
                    );
                }
                for message in &decoded {
                    acknowledge(message, AckKind::Ack).await;
                }
                stats
                    .messages_acknowledged
                    .fetch_add(decoded.len() as u64, Ordering::Relaxed);
            }
            Err(error) => {
                stats.store_failing.store(true, Ordering::Relaxed);
                stats.write_failures.fetch_add(1, Ordering::Relaxed);
                stats.failed(error.to_string());
                tracing::warn!(%error, messages = decoded.len(), events = events.len(), "storing ingested events failed; the messages go back to the stream");
                let max = i64::from(self.bus.config().max_deliveries);
                let (exhausted, retry): (Vec<Message>, Vec<Message>) =
                    decoded.into_iter().partition(|m| delivered(m) >= max);
                for message in retry {
                    let attempt = u32::try_from(delivered(&message)).unwrap_or(u32::MAX);
                    let delay = self.retry_delay(attempt);
                    acknowledge(&message, AckKind::Nak(Some(delay))).await;
                }
                if !exhausted.is_empty() {
                    let reason = format!(
                        "not stored after {} deliveries: {error}",
                        self.bus.config().max_deliveries
                    );
                    let letters = exhausted.into_iter().map(|m| (m, reason.clone())).collect();
                    self.set_aside(letters, now).await;
                }
            }
        }
    }

    /// Keeps messages as dead letters, as received, then terminates them on the stream; if
    /// the dead letters cannot be written, hands them back for a later delivery instead.
    async fn set_aside(&self, messages: Vec<(Message, String)>, now: OffsetDateTime) {
        let letters: Vec<DeadLetter> = messages
            .iter()
            .map(|(message, error)| DeadLetter {
                id: DeadLetterId::new_v7(now),
                event_id: None,
                app_id: None,
                format: format_of(message).unwrap_or_default(),
                payload: message.payload.to_vec(),
                error: error.clone(),
                first_attempt_at: now,
                last_attempt_at: now,
                attempts: u32::try_from(delivered(message)).unwrap_or(1).max(1),
            })
            .collect();
        match self.dead_letters.add_dead_letters(&letters).await {
            Ok(()) => {
                self.stats
                    .messages_dead_lettered
                    .fetch_add(letters.len() as u64, Ordering::Relaxed);
                for (message, error) in &messages {
                    tracing::error!(%error, "a JetStream message is a dead letter (`flowgate events dead-letters list`)");
                    acknowledge(message, AckKind::Term).await;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "dead letters cannot be written; the messages go back to the stream");
                self.stats.failed(e.to_string());
                for (message, _) in &messages {
                    let attempt = u32::try_from(delivered(message)).unwrap_or(u32::MAX);
                    acknowledge(message, AckKind::Nak(Some(self.retry_delay(attempt)))).await;
                }
            }
        }
    }
}

/// How often the message was delivered, this time included (1 when unknown).
fn delivered(message: &Message) -> i64 {
    message.info().map_or(1, |info| info.delivered)
}

fn format_of(message: &Message) -> Option<String> {
    message
        .headers
        .as_ref()
        .and_then(|h| h.get(FORMAT_HEADER))
        .map(|v| v.as_str().to_owned())
}

/// Sends an acknowledgement. A lost one is harmless: the message is delivered again after
/// `ack_wait` and stored once.
async fn acknowledge(message: &Message, kind: AckKind) {
    if let Err(e) = message.ack_with(kind).await {
        tracing::debug!(error = %e, "acknowledgement not sent; the message will be delivered again");
    }
}
