//! Sticky assignment on the request path (D23): resolve reads the user's stored assignments
//! only for a placement with a sticky experiment, with a deadline of its own
//! (`sticky.read_timeout_ms`), and never waits on a write.
//!
//! - A read that fails or misses the deadline resolves as without stored assignments and
//!   records nothing (a write would replace assignments the request could not see); it is
//!   counted in `flowgate_sticky_reads_total{outcome="failed"|"timed_out"}`.
//! - New or changed assignments go to a bounded queue ([`StickyAssignments::write_behind`]);
//!   one writer task ([`run_writer`]) stores them in batches of up to `sticky.write_batch`,
//!   retrying a failed batch a few times. When the queue is full the assignment is dropped
//!   and counted (`outcome="dropped"`): the user was served, and is bucketed the same way next
//!   time as long as weights do not change, so a dropped write costs stickiness, never a
//!   response.

use std::sync::Arc;
use std::time::Duration;

use flowgate_domain::ids::AppId;
use flowgate_domain::ports::StickyStore;
use flowgate_domain::resolve::StickyState;
use flowgate_domain::sticky::{StickyDocs, StickyId, StickyWrite};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::mpsc;

/// `sticky.read_timeout_ms` by default.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_millis(20);
/// `sticky.write_queue` by default: assignments waiting to be stored.
pub const DEFAULT_WRITE_QUEUE: usize = 50_000;
/// `sticky.write_batch` by default: assignments stored per write.
pub const DEFAULT_WRITE_BATCH: usize = 500;
/// Attempts per batch before it is given up (counted as failed).
const WRITE_ATTEMPTS: u32 = 3;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// The metrics of sticky assignment, under the `flowgate_sticky` prefix.
#[derive(Clone, Debug, Default)]
pub struct StickyMetrics {
    reads: Family<OutcomeLabels, Counter>,
    writes: Family<OutcomeLabels, Counter>,
    queued: Gauge,
}

impl StickyMetrics {
    /// New metrics, registered in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::default();
        let r = registry.sub_registry_with_prefix("flowgate_sticky");
        r.register(
            "reads",
            "Reads of stored assignments by resolve, by outcome: read, failed (the store answered an error) or timed_out (past sticky.read_timeout_ms); failed and timed-out reads resolve as without stored assignments",
            m.reads.clone(),
        );
        r.register(
            "writes",
            "Assignment documents handed to the writer behind resolve, by outcome: stored, failed (given up after retries) or dropped (the write queue was full)",
            m.writes.clone(),
        );
        r.register(
            "write_queue",
            "Assignment documents waiting to be stored",
            m.queued.clone(),
        );
        m
    }

    fn read(&self, outcome: &'static str) {
        self.reads.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    fn wrote(&self, outcome: &'static str, count: usize) {
        self.writes
            .get_or_create(&OutcomeLabels { outcome })
            .inc_by(count as u64);
    }
}

/// How resolve reaches stored assignments.
#[derive(Clone)]
pub struct StickyAssignments {
    store: Arc<dyn StickyStore>,
    read_timeout: Duration,
    queue: mpsc::Sender<StickyWrite>,
    metrics: StickyMetrics,
}

impl std::fmt::Debug for StickyAssignments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StickyAssignments")
            .field("read_timeout", &self.read_timeout)
            .finish_non_exhaustive()
    }
}

/// Settings of [`StickyAssignments::new`]. They also deserialise with serde from the keys of
/// flowgate's `[sticky]` table (`read_timeout_ms`, `write_queue`, `write_batch`; missing keys
/// at their defaults), ignoring the keys they do not read: that table holds the store's
/// settings too, and flowgate's binary refuses a key that no component reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(from = "StickyKeys", into = "StickyKeys")]
pub struct StickySettings {
    /// The deadline of a read.
    pub read_timeout: Duration,
    /// Assignment documents the write queue holds at most.
    pub write_queue: usize,
    /// Documents stored per write.
    pub write_batch: usize,
}

impl Default for StickySettings {
    fn default() -> Self {
        Self {
            read_timeout: DEFAULT_READ_TIMEOUT,
            write_queue: DEFAULT_WRITE_QUEUE,
            write_batch: DEFAULT_WRITE_BATCH,
        }
    }
}

/// [`StickySettings`] as the `sticky.*` keys spell them: the deadline in whole milliseconds.
#[derive(Clone, Copy, serde::Serialize, serde::Deserialize)]
#[serde(default, rename = "StickySettings")]
struct StickyKeys {
    read_timeout_ms: u64,
    write_queue: usize,
    write_batch: usize,
}

impl Default for StickyKeys {
    fn default() -> Self {
        StickySettings::default().into()
    }
}

impl From<StickySettings> for StickyKeys {
    fn from(s: StickySettings) -> Self {
        Self {
            read_timeout_ms: u64::try_from(s.read_timeout.as_millis()).unwrap_or(u64::MAX),
            write_queue: s.write_queue,
            write_batch: s.write_batch,
        }
    }
}

impl From<StickyKeys> for StickySettings {
    fn from(k: StickyKeys) -> Self {
        Self {
            read_timeout: Duration::from_millis(k.read_timeout_ms),
            write_queue: k.write_queue,
            write_batch: k.write_batch,
        }
    }
}

/// The write queue's far end: give it to [`run_writer`].
pub struct StickyWriter {
    store: Arc<dyn StickyStore>,
    queue: mpsc::Receiver<StickyWrite>,
    batch: usize,
    metrics: StickyMetrics,
}

impl std::fmt::Debug for StickyWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StickyWriter")
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

impl StickyAssignments {
    /// Reads and writes through `store`; the returned writer must run ([`run_writer`]) for
    /// anything to be stored.
    pub fn new(
        store: Arc<dyn StickyStore>,
        settings: StickySettings,
        metrics: StickyMetrics,
    ) -> (Self, StickyWriter) {
        let (tx, rx) = mpsc::channel(settings.write_queue.max(1));
        (
            Self {
                store: Arc::clone(&store),
                read_timeout: settings.read_timeout,
                queue: tx,
                metrics: metrics.clone(),
            },
            StickyWriter {
                store,
                queue: rx,
                batch: settings.write_batch.max(1),
                metrics,
            },
        )
    }

    /// The stored documents of `ids` in `app`, or an unreadable state when the store fails or
    /// misses the deadline.
    pub async fn read(&self, app: AppId, ids: &[StickyId]) -> StickyState {
        if ids.is_empty() {
            return StickyState::new(StickyDocs::new());
        }
        match tokio::time::timeout(self.read_timeout, self.store.read_sticky(app, ids)).await {
            Ok(Ok(docs)) => {
                self.metrics.read("read");
                StickyState::new(docs)
            }
            Ok(Err(error)) => {
                self.metrics.read("failed");
                tracing::debug!(%error, "stored assignments not read: resolving without them");
                StickyState::unavailable()
            }
            Err(_) => {
                self.metrics.read("timed_out");
                StickyState::unavailable()
            }
        }
    }

    /// Queues the assignments `state` recorded for `app`; never waits. A full queue drops them
    /// (counted).
    pub fn write_behind(&self, app: AppId, state: &StickyState) {
        for write in state.writes(app) {
            match self.queue.try_send(write) {
                Ok(()) => {
                    self.metrics.queued.inc();
                }
                Err(_) => self.metrics.wrote("dropped", 1),
            }
        }
    }
}

/// Stores queued assignments in batches until every [`StickyAssignments`] is dropped and the
/// queue is empty (so a shutdown that drops the API state drains it).
pub async fn run_writer(mut writer: StickyWriter) {
    let mut batch = Vec::with_capacity(writer.batch);
    while writer.queue.recv_many(&mut batch, writer.batch).await > 0 {
        writer.metrics.queued.dec_by(batch.len() as i64);
        let mut attempt = 1;
        loop {
            match writer.store.write_sticky(&batch).await {
                Ok(()) => {
                    writer.metrics.wrote("stored", batch.len());
                    break;
                }
                Err(error) if attempt < WRITE_ATTEMPTS => {
                    tracing::debug!(%error, attempt, "storing assignments failed; retrying");
                    tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                    attempt += 1;
                }
                Err(error) => {
                    writer.metrics.wrote("failed", batch.len());
                    tracing::warn!(
                        %error,
                        documents = batch.len(),
                        "assignments not stored after {WRITE_ATTEMPTS} attempts: those users are bucketed again next time"
                    );
                    break;
                }
            }
        }
        batch.clear();
    }
}
