//! Sticky assignment on the request path (D23): resolve reads the user's stored assignments
//! only for a placement with a sticky experiment, with a deadline of its own
//! (`sticky.read_timeout_ms`), and never waits on a write.
//!
//! - A read that fails or misses the deadline resolves as without stored assignments and
//!   records nothing (a write would replace assignments the request could not see); it is
//!   counted in `flowgate_sticky_reads_total{outcome="failed"|"timed_out"}`.
//! - A store that is down is not waited for by every request: [`StickyHealth`] is a circuit
//!   that opens after [`FAILURES_TO_OPEN`] consecutive outages (errors of the
//!   `Unavailable` kind, or reads past the deadline). While it is open, reads are not sent and
//!   resolve at once as failed; after a pause (from [`OPEN_FIRST`], doubling up to
//!   [`OPEN_LONGEST`] while probes fail) one request probes the store, and an answer closes
//!   the circuit. `/readyz` reports it (`sticky`: degraded, still serving).
//! - New or changed assignments go to a bounded queue ([`StickyAssignments::write_behind`]);
//!   one writer task ([`run_writer`]) stores them in batches of up to `sticky.write_batch`.
//!   While the store is down the writer keeps its batch and tries again (backing off up to
//!   [`RETRY_LONGEST`]) until the store answers, so an outage of minutes loses no assignment;
//!   a batch the store refuses for another reason is tried [`WRITE_ATTEMPTS`] times. Past
//!   `sticky.write_queue` waiting documents, the oldest is dropped and counted
//!   (`outcome="dropped"`): the user was served, and is bucketed the same way next time as
//!   long as weights do not change, so a dropped write costs stickiness, never a response.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flowgate_domain::ids::AppId;
use flowgate_domain::ports::{StickyStore, StoreError};
use flowgate_domain::resolve::StickyState;
use flowgate_domain::sticky::{StickyDoc, StickyDocs, StickyId, StickyWrite};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::{oneshot, Notify};

/// `sticky.read_timeout_ms` by default.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_millis(20);
/// `sticky.write_queue` by default: assignments waiting to be stored.
pub const DEFAULT_WRITE_QUEUE: usize = 50_000;
/// `sticky.write_batch` by default: assignments stored per write.
pub const DEFAULT_WRITE_BATCH: usize = 500;
/// Attempts per batch the store refuses for a reason other than an outage (or at shutdown)
/// before it is given up (counted as failed).
pub const WRITE_ATTEMPTS: u32 = 3;
/// Consecutive outages (reads or writes) that open the circuit.
pub const FAILURES_TO_OPEN: u32 = 5;
/// The circuit's first pause: reads skipped this long before one probes the store.
pub const OPEN_FIRST: Duration = Duration::from_millis(500);
/// The longest pause, reached by doubling while probes fail.
pub const OPEN_LONGEST: Duration = Duration::from_secs(10);
/// The longest wait of the writer between two attempts at a batch while the store is down.
pub const RETRY_LONGEST: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// The metrics of sticky assignment, under the `flowgate_sticky` prefix.
#[derive(Clone, Debug)]
pub struct StickyMetrics {
    reads: Family<OutcomeLabels, Counter>,
    /// The series of `reads`, each taken once: a request counts its read without looking the
    /// label set up in the family.
    read: Counter,
    failed: Counter,
    timed_out: Counter,
    writes: Family<OutcomeLabels, Counter>,
    queued: Gauge,
    store_reads: Counter,
}

impl Default for StickyMetrics {
    fn default() -> Self {
        let reads = Family::<OutcomeLabels, Counter>::default();
        let series = |outcome| reads.get_or_create(&OutcomeLabels { outcome }).clone();
        Self {
            read: series("read"),
            failed: series("failed"),
            timed_out: series("timed_out"),
            reads,
            writes: Family::default(),
            queued: Gauge::default(),
            store_reads: Counter::default(),
        }
    }
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
            "store_reads",
            "Reads sent to the assignment store; one carries the reads of every request a worker took up in the same turn, so flowgate_sticky_reads_total over this is the requests per store read",
            m.store_reads.clone(),
        );
        r.register(
            "write_queue",
            "Assignment documents waiting to be stored",
            m.queued.clone(),
        );
        m
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
    queue: Producer,
    metrics: StickyMetrics,
    health: Arc<StickyHealth>,
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
pub struct StickyReadWriteSettings {
    /// The deadline of a read.
    pub read_timeout: Duration,
    /// Assignment documents the write queue holds at most.
    pub write_queue: usize,
    /// Documents stored per write.
    pub write_batch: usize,
}

impl Default for StickyReadWriteSettings {
    fn default() -> Self {
        Self {
            read_timeout: DEFAULT_READ_TIMEOUT,
            write_queue: DEFAULT_WRITE_QUEUE,
            write_batch: DEFAULT_WRITE_BATCH,
        }
    }
}

/// [`StickyReadWriteSettings`] as the `sticky.*` keys spell them: the deadline in whole milliseconds.
#[derive(Clone, Copy, serde::Serialize, serde::Deserialize)]
#[serde(default, rename = "StickyReadWriteSettings")]
struct StickyKeys {
    read_timeout_ms: u64,
    write_queue: usize,
    write_batch: usize,
}

impl Default for StickyKeys {
    fn default() -> Self {
        StickyReadWriteSettings::default().into()
    }
}

impl From<StickyReadWriteSettings> for StickyKeys {
    fn from(s: StickyReadWriteSettings) -> Self {
        Self {
            read_timeout_ms: u64::try_from(s.read_timeout.as_millis()).unwrap_or(u64::MAX),
            write_queue: s.write_queue,
            write_batch: s.write_batch,
        }
    }
}

impl From<StickyKeys> for StickyReadWriteSettings {
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
    queue: Arc<WriteQueue>,
    batch: usize,
    metrics: StickyMetrics,
    health: Arc<StickyHealth>,
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
        settings: StickyReadWriteSettings,
        metrics: StickyMetrics,
    ) -> (Self, StickyWriter) {
        let queue = Arc::new(WriteQueue {
            pending: Mutex::new(Pending {
                docs: VecDeque::new(),
                producers: 1,
            }),
            wake: Notify::new(),
            bound: settings.write_queue.max(1),
        });
        let health = Arc::new(StickyHealth::new());
        (
            Self {
                store: Arc::clone(&store),
                read_timeout: settings.read_timeout,
                queue: Producer(Arc::clone(&queue)),
                metrics: metrics.clone(),
                health: Arc::clone(&health),
            },
            StickyWriter {
                store,
                queue,
                batch: settings.write_batch.max(1),
                metrics,
                health,
            },
        )
    }

    /// Whether the store answers, as reads and writes find it: for `/readyz`, and for the
    /// binary's check at start ([`StickyHealth::failed_at_start`]).
    pub fn health(&self) -> &Arc<StickyHealth> {
        &self.health
    }

    /// Probes the store whenever the circuit is open and its probe is due, so that it closes
    /// (and `/readyz` says so) when the store is back even if no request reads: a replica
    /// without sticky traffic, or one that failed its check at start. Runs until dropped.
    pub async fn probe_while_failing(&self) {
        let (app, probe) = probe_document();
        loop {
            tokio::time::sleep(OPEN_FIRST).await;
            if self.health.is_healthy() || !self.health.probe_due() {
                continue;
            }
            let _ = self.store_read(app, &probe).await;
        }
    }

    /// Reads the probe document within `deadline`, at start: a store that cannot be used
    /// (refusing connections, a database it does not have, a wrong password) opens the circuit
    /// at once ([`StickyHealth::failed_at_start`], with `shown_store` in the cause) and the
    /// failure is returned for the log; the service serves on, as without stored assignments.
    pub async fn check_at_start(
        &self,
        deadline: Duration,
        shown_store: &str,
    ) -> Result<(), String> {
        let (app, probe) = probe_document();
        let failure =
            match tokio::time::timeout(deadline, self.store.read_sticky(app, &probe)).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no answer within {} ms", deadline.as_millis()),
            };
        self.health
            .failed_at_start(format!("{shown_store}: {failure}"));
        Err(failure)
    }

    /// The stored documents of `ids` in `app`, or an unreadable state when the store fails or
    /// misses the deadline. One store read per call; the API's own workers read through a
    /// reader of their own that sends the reads of one turn of their event loop as one.
    pub async fn read(&self, app: AppId, ids: &[StickyId]) -> StickyState {
        if ids.is_empty() {
            return StickyState::new(StickyDocs::new());
        }
        self.metrics.store_reads.inc();
        let answer = self.store_read(app, ids).await;
        self.state_of(answer)
    }

    /// One read of the store, within the deadline; none while the circuit is open.
    async fn store_read(&self, app: AppId, ids: &[StickyId]) -> Answer {
        let Some(probe) = self.health.admit() else {
            return Err(ReadFailure::Failed);
        };
        match tokio::time::timeout(self.read_timeout, self.store.read_sticky(app, ids)).await {
            Ok(Ok(docs)) => {
                self.health.answered();
                Ok(docs)
            }
            Ok(Err(error)) => {
                tracing::debug!(%error, "stored assignments not read: resolving without them");
                self.health.read_error(&error, probe);
                Err(ReadFailure::Failed)
            }
            Err(_) => {
                self.health.timed_out(self.read_timeout, probe);
                Err(ReadFailure::TimedOut)
            }
        }
    }

    /// One read of the store for several apps' identifiers, within the deadline; an answer
    /// per read, in order.
    async fn store_read_many(
        &self,
        reads: &[(AppId, &[StickyId])],
    ) -> Result<Vec<StickyDocs>, ManyFailure> {
        let Some(probe) = self.health.admit() else {
            return Err(ManyFailure::Each(ReadFailure::Failed));
        };
        let read = self.store.read_sticky_many(reads);
        let answer = tokio::time::timeout(self.read_timeout, read).await;
        match &answer {
            Ok(Ok(_)) => self.health.answered(),
            Ok(Err(error)) => self.health.read_error(error, probe),
            Err(_) => self.health.timed_out(self.read_timeout, probe),
        }
        match answer {
            Ok(Ok(answers)) if answers.len() == reads.len() => Ok(answers),
            Ok(Ok(answers)) => {
                tracing::debug!(
                    answers = answers.len(),
                    reads = reads.len(),
                    "the store answered a combined read with the wrong number of answers: resolving without stored assignments"
                );
                Err(ManyFailure::Each(ReadFailure::Failed))
            }
            Ok(Err(error @ StoreError::Unavailable { .. })) => {
                tracing::debug!(%error, "stored assignments not read: resolving without them");
                Err(ManyFailure::Each(ReadFailure::Failed))
            }
            Ok(Err(error)) => {
                tracing::debug!(%error, "a combined read of stored assignments refused: reading each request's alone");
                Err(ManyFailure::Refused)
            }
            Err(_) => Err(ManyFailure::Each(ReadFailure::TimedOut)),
        }
    }

    /// What a request resolves with, counted by outcome.
    fn state_of(&self, answer: Answer) -> StickyState {
        match answer {
            Ok(docs) => {
                self.metrics.read.inc();
                StickyState::new(docs)
            }
            Err(ReadFailure::Failed) => {
                self.metrics.failed.inc();
                StickyState::unavailable()
            }
            Err(ReadFailure::TimedOut) => {
                self.metrics.timed_out.inc();
                StickyState::unavailable()
            }
        }
    }

    /// Queues the assignments `state` recorded for `app`; never waits. A full queue drops its
    /// oldest documents to make room (counted).
    pub fn write_behind(&self, app: AppId, state: &StickyState) {
        self.enqueue(state.writes(app));
    }

    /// Queues `writes` (see [`write_behind`](Self::write_behind)).
    fn enqueue(&self, writes: Vec<StickyWrite>) {
        if writes.is_empty() {
            return;
        }
        let queue = &self.queue.0;
        let (mut added, mut dropped) = (0_i64, 0_usize);
        {
            let mut pending = queue.pending.lock().unwrap_or_else(|e| e.into_inner());
            for write in writes {
                if pending.docs.len() >= queue.bound {
                    pending.docs.pop_front();
                    dropped += 1;
                } else {
                    added += 1;
                }
                pending.docs.push_back(write);
            }
        }
        queue.wake.notify_one();
        self.metrics.queued.inc_by(added);
        if dropped > 0 {
            self.metrics.wrote("dropped", dropped);
        }
    }
}

/// The assignments waiting to be stored: at most `bound`, the oldest dropped past it.
struct WriteQueue {
    pending: Mutex<Pending>,
    /// Told when documents arrive or the last producer goes.
    wake: Notify,
    bound: usize,
}

struct Pending {
    docs: VecDeque<StickyWrite>,
    /// The live [`StickyAssignments`] (every clone): at none, the writer drains and ends.
    producers: usize,
}

/// A [`StickyAssignments`]' hold on the queue, counted so that the writer knows when the
/// last one is gone (a shutdown that drops the API's state).
struct Producer(Arc<WriteQueue>);

impl Clone for Producer {
    fn clone(&self) -> Self {
        self.0
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .producers += 1;
        Self(Arc::clone(&self.0))
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        let last = {
            let mut pending = self.0.pending.lock().unwrap_or_else(|e| e.into_inner());
            pending.producers -= 1;
            pending.producers == 0
        };
        if last {
            self.0.wake.notify_one();
        }
    }
}

/// Whether the assignment store answers, as resolve's reads and the writer find it: a circuit
/// breaker shared by every worker (see the module documentation). Reading it costs an atomic
/// load; only changes of state write, and log.
#[derive(Debug)]
pub struct StickyHealth {
    epoch: Instant,
    /// Consecutive outages.
    failures: AtomicU32,
    /// Milliseconds after `epoch` until which reads are skipped; 0: closed.
    open_until: AtomicU64,
    /// The current pause, in milliseconds.
    open_for: AtomicU64,
    /// Whether a probe is out.
    probing: AtomicBool,
    /// Why the circuit opened, for `/readyz`.
    cause: Mutex<String>,
}

impl Default for StickyHealth {
    fn default() -> Self {
        Self::new()
    }
}

impl StickyHealth {
    /// Closed: every read goes to the store.
    pub fn new() -> Self {
        Self {
            epoch: Instant::now(),
            failures: AtomicU32::new(0),
            open_until: AtomicU64::new(0),
            open_for: AtomicU64::new(millis(OPEN_FIRST)),
            probing: AtomicBool::new(false),
            cause: Mutex::new(String::new()),
        }
    }

    fn now_ms(&self) -> u64 {
        // At least 1: 0 means closed.
        millis(self.epoch.elapsed()).max(1)
    }

    /// `None` when the circuit is open (do not read); `Some(true)` for the one read that
    /// probes a store the circuit has paused; `Some(false)` for an ordinary read.
    fn admit(&self) -> Option<bool> {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            return Some(false);
        }
        if self.now_ms() < until || self.probing.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(true)
    }

    /// Whether the circuit is open and its pause is over: the next read probes.
    fn probe_due(&self) -> bool {
        let until = self.open_until.load(Ordering::Acquire);
        until != 0 && self.now_ms() >= until && !self.probing.load(Ordering::Acquire)
    }

    /// Whether reads are paused now (and the next probe is not due yet).
    fn paused(&self) -> bool {
        let until = self.open_until.load(Ordering::Acquire);
        until != 0 && self.now_ms() < until
    }

    /// Whether the store answered its last reads and writes (the circuit is closed).
    pub fn is_healthy(&self) -> bool {
        self.open_until.load(Ordering::Acquire) == 0
    }

    /// Why the circuit is open, when it is.
    pub fn problem(&self) -> Option<String> {
        (!self.is_healthy()).then(|| self.cause.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// The store answered: the circuit closes.
    fn answered(&self) {
        if self.failures.load(Ordering::Relaxed) != 0 {
            self.failures.store(0, Ordering::Relaxed);
        }
        if self.open_until.load(Ordering::Acquire) != 0 {
            self.open_until.store(0, Ordering::Release);
            self.open_for.store(millis(OPEN_FIRST), Ordering::Relaxed);
            self.probing.store(false, Ordering::Release);
            tracing::info!("the sticky assignment store answers again: reads resume");
        }
    }

    /// A write was stored: consecutive outages start again from none while the circuit is
    /// closed. An open circuit stays open: a store that takes writes but misses the read
    /// deadline is closed by a read or a probe in time, not by a write.
    fn write_answered(&self) {
        if self.open_until.load(Ordering::Acquire) == 0
            && self.failures.load(Ordering::Relaxed) != 0
        {
            self.failures.store(0, Ordering::Relaxed);
        }
    }

    /// A read failed with `error`: an outage counts toward opening the circuit; any other
    /// error is an answer (the store is up; one document is the matter).
    fn read_error(&self, error: &StoreError, probe: bool) {
        if matches!(error, StoreError::Unavailable { .. }) {
            self.outage(|| error.to_string(), probe);
        } else {
            self.answered();
        }
    }

    /// A read missed its deadline.
    fn timed_out(&self, deadline: Duration, probe: bool) {
        self.outage(
            || {
                format!(
                    "reads take longer than sticky.read_timeout_ms ({} ms)",
                    deadline.as_millis()
                )
            },
            probe,
        );
    }

    /// The store could not be reached at start: the circuit opens at once (reads probe it
    /// after the first pause), and `/readyz` says degraded from the first answer.
    pub fn failed_at_start(&self, cause: String) {
        self.failures.store(FAILURES_TO_OPEN, Ordering::Relaxed);
        *self.cause.lock().unwrap_or_else(|e| e.into_inner()) = cause;
        self.open_until
            .store(self.now_ms() + millis(OPEN_FIRST), Ordering::Release);
    }

    fn outage(&self, cause: impl FnOnce() -> String, probe: bool) {
        let failures = self
            .failures
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        if probe {
            let pause = self
                .open_for
                .load(Ordering::Relaxed)
                .saturating_mul(2)
                .min(millis(OPEN_LONGEST));
            self.open_for.store(pause, Ordering::Relaxed);
            self.open_until
                .store(self.now_ms() + pause, Ordering::Release);
            self.probing.store(false, Ordering::Release);
            tracing::debug!(
                pause_ms = pause,
                "the sticky assignment store is still failing"
            );
        } else if failures >= FAILURES_TO_OPEN && self.open_until.load(Ordering::Acquire) == 0 {
            let cause = cause();
            let pause = self.open_for.load(Ordering::Relaxed);
            tracing::warn!(
                failures,
                pause_ms = pause,
                cause = %cause,
                "the sticky assignment store is failing: resolving without stored assignments, \
                 without reading them, until a probe read answers"
            );
            *self.cause.lock().unwrap_or_else(|e| e.into_inner()) = cause;
            self.open_until
                .store(self.now_ms() + pause, Ordering::Release);
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The document health checks read: nobody's (an app that does not exist).
fn probe_document() -> (AppId, [StickyId; 1]) {
    let probe = StickyId {
        attribute_name: "user_id".to_owned(),
        attribute_value: "flowgate-health-probe".to_owned(),
    };
    (AppId(uuid::Uuid::nil()), [probe])
}

/// What one request's read came to.
type Answer = Result<StickyDocs, ReadFailure>;

/// Why a request resolves without its stored assignments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadFailure {
    /// The store answered an error, or the read ended without an answer.
    Failed,
    /// Past `sticky.read_timeout_ms`.
    TimedOut,
}

/// Why a combined read has no answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ManyFailure {
    /// Every request of it fails so (the store is down, the deadline passed).
    Each(ReadFailure),
    /// The store answered an error that is not an outage: a document it cannot read back, an
    /// identifier it cannot hold. It may be one request's, so each is read alone.
    Refused,
}

/// A request waiting for its documents.
struct Waiting {
    app: AppId,
    ids: Vec<StickyId>,
    answer: oneshot::Sender<Answer>,
}

/// One API worker's reads of stored assignments: the reads its requests make in one turn of
/// its event loop go to the store as one read ([`StickyStore::read_sticky_many`]: one Redis
/// pipeline, one SQL statement), in the manner of ioredis' auto-pipelining. A lone request
/// waits for nothing more than a task switch; under load, the requests that became ready
/// together share the round trip, the system calls and the client's per-command work.
///
/// Apps stay apart inside the combined read: each app's identifiers are read as that app's
/// (the port answers per app), and each request receives the documents of its own app and
/// identifiers only. Every request keeps its own deadline and its own outcome in
/// `flowgate_sticky_reads_total`; a combined read that fails for an outage or misses the
/// deadline fails each of its requests, one the store refuses otherwise (a document it cannot
/// give back) is read again request by request, so only the requests it is about fail.
///
/// Lives on its worker's thread: actix runs each worker on a single-threaded runtime, and the
/// read is spawned there.
pub(crate) struct WorkerReads {
    sticky: StickyAssignments,
    waiting: RefCell<Vec<Waiting>>,
    /// Whether a task is spawned that will send what is waiting.
    scheduled: Cell<bool>,
}

impl std::fmt::Debug for WorkerReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerReads")
            .field("waiting", &self.waiting.borrow().len())
            .finish_non_exhaustive()
    }
}

impl WorkerReads {
    /// Reads through `sticky`, on the calling worker's thread.
    pub(crate) fn new(sticky: StickyAssignments) -> Self {
        Self {
            sticky,
            waiting: RefCell::new(Vec::new()),
            scheduled: Cell::new(false),
        }
    }

    /// Queues `assignments` behind the response ([`StickyAssignments::write_behind`]).
    pub(crate) fn write_behind(&self, app: AppId, state: &StickyState) {
        self.sticky.write_behind(app, state);
    }

    /// The stored documents of `ids` in `app`, read together with the other requests of this
    /// turn; an unreadable state when that read fails or this request's deadline passes.
    pub(crate) async fn read(self: &Rc<Self>, app: AppId, ids: Vec<StickyId>) -> StickyState {
        if ids.is_empty() {
            return StickyState::new(StickyDocs::new());
        }
        if self.sticky.health.paused() {
            return self.sticky.state_of(Err(ReadFailure::Failed));
        }
        let (answer, waiting) = oneshot::channel();
        self.waiting.borrow_mut().push(Waiting { app, ids, answer });
        if !self.scheduled.replace(true) {
            actix_web::rt::spawn(Rc::clone(self).send());
        }
        let answer = match tokio::time::timeout(self.sticky.read_timeout, waiting).await {
            Ok(Ok(answer)) => answer,
            // The read's task ended without answering: the worker is stopping.
            Ok(Err(_)) => Err(ReadFailure::Failed),
            Err(_) => Err(ReadFailure::TimedOut),
        };
        self.sticky.state_of(answer)
    }

    /// Sends what is waiting as one store read.
    async fn send(self: Rc<Self>) {
        self.scheduled.set(false);
        let waiting = self.waiting.take();
        read_together(&self.sticky, waiting).await;
    }
}

/// One store read for every request of `waiting`, each answered with the documents of its own
/// app and identifiers.
async fn read_together(sticky: &StickyAssignments, mut waiting: Vec<Waiting>) {
    sticky.metrics.store_reads.inc();
    if let [one] = waiting.as_mut_slice() {
        let answer = sticky.store_read(one.app, &one.ids).await;
        if let Some(one) = waiting.pop() {
            let _ = one.answer.send(answer);
        }
        return;
    }
    // Each app's requests side by side (a stable sort: in the order they came), their
    // identifiers in one list; `ends[i]` is where request `i`'s identifiers end.
    waiting.sort_by_key(|w| w.app);
    let mut ids = Vec::with_capacity(waiting.iter().map(|w| w.ids.len()).sum());
    let mut ends = Vec::with_capacity(waiting.len());
    for w in &mut waiting {
        ids.append(&mut w.ids);
        ends.push(ids.len());
    }
    // Per app: its first and past-the-last request.
    let mut apps: Vec<(AppId, usize, usize)> = Vec::new();
    for (i, w) in waiting.iter().enumerate() {
        match apps.last_mut() {
            Some((app, _, end)) if *app == w.app => *end = i + 1,
            _ => apps.push((w.app, i, i + 1)),
        }
    }
    let first_id = |request: usize| if request == 0 { 0 } else { ends[request - 1] };
    let reads: Vec<(AppId, &[StickyId])> = apps
        .iter()
        .map(|&(app, first, end)| (app, &ids[first_id(first)..ends[end - 1]]))
        .collect();
    let answers = sticky.store_read_many(&reads).await;
    let mut waiting = waiting.into_iter();
    match answers {
        Err(ManyFailure::Refused) => {
            // Each request alone, so that only those whose own documents the store refuses
            // fail, as without combined reads.
            let waiting: Vec<Waiting> = waiting.collect();
            sticky.metrics.store_reads.inc_by(waiting.len() as u64);
            let alone = futures_util::future::join_all(
                waiting
                    .iter()
                    .enumerate()
                    .map(|(i, w)| sticky.store_read(w.app, &ids[first_id(i)..ends[i]])),
            )
            .await;
            for (w, answer) in waiting.into_iter().zip(alone) {
                let _ = w.answer.send(answer);
            }
        }
        Ok(answers) => {
            for (docs, &(_, first, end)) in answers.into_iter().zip(&apps) {
                let base = first_id(first);
                let own_ends: Vec<usize> = ends[first..end].iter().map(|e| e - base).collect();
                let split = split(docs, &ids[base..ends[end - 1]], &own_ends);
                for (w, docs) in waiting.by_ref().take(end - first).zip(split) {
                    let _ = w.answer.send(Ok(docs));
                }
            }
        }
        Err(ManyFailure::Each(failure)) => {
            for w in waiting {
                let _ = w.answer.send(Err(failure));
            }
        }
    }
}

/// `docs`, read for `ids`, as the documents of each request: request `i` asked for
/// `ids[ends[i - 1]..ends[i]]`. A document two requests share is cloned for all but the last.
fn split(docs: StickyDocs, ids: &[StickyId], ends: &[usize]) -> Vec<StickyDocs> {
    let mut read: Vec<StickyDoc> = docs.into_iter().collect();
    read.sort_unstable_by(|a, b| {
        (&a.attribute_name, &a.attribute_value).cmp(&(&b.attribute_name, &b.attribute_value))
    });
    let found: Vec<Option<usize>> = ids
        .iter()
        .map(|id| {
            read.binary_search_by(|d| {
                (d.attribute_name.as_str(), d.attribute_value.as_str())
                    .cmp(&(id.attribute_name.as_str(), id.attribute_value.as_str()))
            })
            .ok()
        })
        .collect();
    let mut uses = vec![0_u32; read.len()];
    for i in found.iter().flatten() {
        uses[*i] += 1;
    }
    let mut read: Vec<Option<StickyDoc>> = read.into_iter().map(Some).collect();
    let mut start = 0;
    ends.iter()
        .map(|&end| {
            let mut docs = StickyDocs::new();
            for i in found[start..end].iter().flatten() {
                uses[*i] -= 1;
                let doc = if uses[*i] == 0 {
                    read[*i].take()
                } else {
                    read[*i].clone()
                };
                if let Some(doc) = doc {
                    docs.insert(doc);
                }
            }
            start = end;
            docs
        })
        .collect()
}

/// Stores queued assignments in batches until every [`StickyAssignments`] is dropped and the
/// queue is empty (so a shutdown that drops the API state drains it).
pub async fn run_writer(writer: StickyWriter) {
    let mut batch = Vec::with_capacity(writer.batch);
    loop {
        let last = {
            let mut pending = writer
                .queue
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let take = pending.docs.len().min(writer.batch);
            batch.extend(pending.docs.drain(..take));
            pending.producers == 0
        };
        if batch.is_empty() {
            if last {
                return;
            }
            writer.queue.wake.notified().await;
            continue;
        }
        writer.metrics.queued.dec_by(batch.len() as i64);
        store_batch(&writer, &batch).await;
        batch.clear();
    }
}

/// Whether every [`StickyAssignments`] is gone: the process is stopping.
fn stopping(writer: &StickyWriter) -> bool {
    writer
        .queue
        .pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .producers
        == 0
}

/// Stores `batch`: while the store is down (an `Unavailable` error), again and again, backing
/// off up to [`RETRY_LONGEST`], unless the process is stopping; otherwise at most
/// [`WRITE_ATTEMPTS`] times.
async fn store_batch(writer: &StickyWriter, batch: &[StickyWrite]) {
    let mut attempt = 1;
    let mut wait = Duration::from_millis(100);
    let mut outage_logged = false;
    loop {
        match writer.store.write_sticky(batch).await {
            Ok(()) => {
                writer.health.write_answered();
                writer.metrics.wrote("stored", batch.len());
                if outage_logged {
                    tracing::info!(
                        documents = batch.len(),
                        attempt,
                        "assignments held through the store's outage are stored"
                    );
                }
                return;
            }
            Err(error @ StoreError::Unavailable { .. }) if !stopping(writer) => {
                writer.health.outage(|| error.to_string(), false);
                if !outage_logged {
                    tracing::warn!(
                        %error,
                        documents = batch.len(),
                        "storing assignments failed: holding them and trying again until the store answers"
                    );
                    outage_logged = true;
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(RETRY_LONGEST);
                attempt += 1;
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
                    attempt,
                    "assignments not stored: those users are bucketed again next time"
                );
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    use flowgate_domain::memory::InMemoryStore;
    use flowgate_domain::ports::{BoxFuture, Outage, StoreError};

    use super::*;

    fn id(name: &str, value: &str) -> StickyId {
        StickyId {
            attribute_name: name.to_owned(),
            attribute_value: value.to_owned(),
        }
    }

    fn doc(name: &str, value: &str, variant: &str) -> StickyDoc {
        StickyDoc {
            attribute_name: name.to_owned(),
            attribute_value: value.to_owned(),
            assignments: [("exp__0".to_owned(), variant.to_owned())].into(),
        }
    }

    fn app(n: u128) -> AppId {
        AppId(uuid::Uuid::from_u128(n))
    }

    /// One read as the store was sent it.
    type Read = (AppId, Vec<StickyId>);

    /// The in-memory store, recording every read it is sent; reads fail while `failing` is set
    /// and wait `delay` first.
    #[derive(Default)]
    struct Recording {
        inner: InMemoryStore,
        reads: Mutex<Vec<Read>>,
        /// The combined reads: each a list of (app, identifiers).
        many: Mutex<Vec<Vec<Read>>>,
        failing: std::sync::atomic::AtomicBool,
        /// A user whose document the store cannot read back (any read of it fails).
        refuse: Mutex<Option<String>>,
        delay: Mutex<Duration>,
        calls: AtomicUsize,
        write_attempts: AtomicUsize,
    }

    impl StickyStore for Recording {
        fn read_sticky<'a>(
            &'a self,
            app: AppId,
            ids: &'a [StickyId],
        ) -> BoxFuture<'a, Result<StickyDocs, StoreError>> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            self.reads.lock().unwrap().push((app, ids.to_vec()));
            let delay = *self.delay.lock().unwrap();
            let failing = self.failing.load(Ordering::Relaxed);
            Box::pin(async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                if failing {
                    return Err(StoreError::Unavailable {
                        reason: Outage::Connection,
                        detail: "down for the test".to_owned(),
                    });
                }
                let refused = self.refuse.lock().unwrap().clone();
                if let Some(bad) =
                    refused.filter(|bad| ids.iter().any(|id| id.attribute_value == *bad))
                {
                    return Err(StoreError::Corrupt {
                        detail: format!("the document of {bad} does not decode"),
                    });
                }
                self.inner.read_sticky(app, ids).await
            })
        }

        fn read_sticky_many<'a>(
            &'a self,
            reads: &'a [(AppId, &'a [StickyId])],
        ) -> BoxFuture<'a, Result<Vec<StickyDocs>, StoreError>> {
            self.many.lock().unwrap().push(
                reads
                    .iter()
                    .map(|(app, ids)| (*app, ids.to_vec()))
                    .collect(),
            );
            // Each read as read_sticky (recorded there too), all at once.
            Box::pin(futures_util::future::try_join_all(
                reads.iter().map(|(app, ids)| self.read_sticky(*app, ids)),
            ))
        }

        fn write_sticky<'a>(
            &'a self,
            writes: &'a [StickyWrite],
        ) -> BoxFuture<'a, Result<(), StoreError>> {
            if self.failing.load(Ordering::Relaxed) {
                self.write_attempts.fetch_add(1, Ordering::Relaxed);
                return Box::pin(async {
                    Err(StoreError::Unavailable {
                        reason: Outage::Connection,
                        detail: "down for the test".to_owned(),
                    })
                });
            }
            self.inner.write_sticky(writes)
        }
    }

    async fn store_with(docs: &[(AppId, StickyDoc)]) -> Arc<Recording> {
        let store = Arc::new(Recording::default());
        let writes: Vec<StickyWrite> = docs
            .iter()
            .map(|(app, d)| StickyWrite {
                app_id: *app,
                doc: d.clone(),
            })
            .collect();
        store.write_sticky(&writes).await.unwrap();
        store
    }

    /// Assignments over `store` with `settings`, their writer, and the registry of their
    /// metrics.
    fn assignments_on(
        store: &Arc<Recording>,
        settings: StickyReadWriteSettings,
    ) -> (StickyAssignments, StickyWriter, Registry) {
        let mut registry = Registry::default();
        let (sticky, writer) = StickyAssignments::new(
            Arc::clone(store) as Arc<dyn StickyStore>,
            settings,
            StickyMetrics::new(&mut registry),
        );
        (sticky, writer, registry)
    }

    fn reads_of(store: &Arc<Recording>, timeout_ms: u64) -> (Rc<WorkerReads>, Registry) {
        let settings = StickyReadWriteSettings {
            read_timeout: Duration::from_millis(timeout_ms),
            ..StickyReadWriteSettings::default()
        };
        let (sticky, _writer, registry) = assignments_on(store, settings);
        (Rc::new(WorkerReads::new(sticky)), registry)
    }

    fn metric(registry: &Registry, series: &str) -> f64 {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    #[test]
    fn split_gives_each_request_the_documents_of_its_own_identifiers() {
        let docs: StickyDocs = [
            doc("user_id", "b", "treatment"),
            doc("user_id", "a", "control"),
            doc("device_id", "d", "treatment"),
        ]
        .into_iter()
        .collect();
        // Requests: [a, d], [c (nothing stored)], [b], [a again].
        let ids = [
            id("user_id", "a"),
            id("device_id", "d"),
            id("user_id", "c"),
            id("user_id", "b"),
            id("user_id", "a"),
        ];
        let out = split(docs, &ids, &[2, 3, 4, 5]);
        let names = |d: &StickyDocs| -> Vec<(String, String)> {
            d.iter()
                .map(|d| (d.attribute_value.clone(), d.assignments["exp__0"].clone()))
                .collect()
        };
        assert_eq!(out.len(), 4);
        assert_eq!(
            names(&out[0]),
            [
                ("d".into(), "treatment".into()),
                ("a".into(), "control".into())
            ]
        );
        assert!(out[1].is_empty(), "nothing stored for c: {:?}", out[1]);
        assert_eq!(names(&out[2]), [("b".into(), "treatment".into())]);
        assert_eq!(
            names(&out[3]),
            [("a".into(), "control".into())],
            "a document two requests share reaches both"
        );
    }

    #[actix_web::test]
    async fn reads_of_one_turn_go_to_the_store_as_one_read_apps_apart() {
        let (one, two) = (app(1), app(2));
        let store = store_with(&[
            (one, doc("user_id", "u1", "control")),
            (one, doc("user_id", "u2", "treatment")),
            // The same user id in another app: never handed to app one's requests.
            (two, doc("user_id", "u1", "treatment")),
        ])
        .await;
        let (reads, registry) = reads_of(&store, 1_000);
        let requests = [
            (one, "u1"),
            (one, "u2"),
            (one, "u3"),
            (two, "u1"),
            (two, "u2"),
        ];
        let states = futures_util::future::join_all(
            requests
                .iter()
                .map(|(app, user)| reads.read(*app, vec![id("user_id", user)])),
        )
        .await;
        assert_eq!(
            *store.many.lock().unwrap(),
            [vec![
                (
                    one,
                    vec![
                        id("user_id", "u1"),
                        id("user_id", "u2"),
                        id("user_id", "u3")
                    ]
                ),
                (two, vec![id("user_id", "u1"), id("user_id", "u2")]),
            ]],
            "one combined read, each app's identifiers as that app's"
        );
        let variant = |i: usize| {
            Some(&states[i])
                .filter(|s| s.is_readable())
                .and_then(|s| s.docs().get("user_id", requests[i].1))
                .map(|d| d.assignments["exp__0"].clone())
        };
        assert_eq!(variant(0).as_deref(), Some("control"));
        assert_eq!(variant(1).as_deref(), Some("treatment"));
        assert_eq!(variant(2), None, "u3 has nothing stored");
        assert_eq!(variant(3).as_deref(), Some("treatment"), "app two's u1");
        assert_eq!(variant(4), None, "u2 has nothing stored in app two");
        for state in &states {
            assert!(state.is_readable() && state.docs().len() <= 1, "{state:?}");
        }
        assert_eq!(metric(&registry, "flowgate_sticky_store_reads_total"), 1.0);
        assert_eq!(
            metric(&registry, "flowgate_sticky_reads_total{outcome=\"read\"}"),
            5.0,
            "each request counted"
        );
        // A later turn is a read of its own.
        let later = reads.read(one, vec![id("user_id", "u2")]).await;
        assert!(later.is_readable() && later.docs().len() == 1);
        assert_eq!(metric(&registry, "flowgate_sticky_store_reads_total"), 2.0);
        assert_eq!(
            store.many.lock().unwrap().len(),
            1,
            "a lone read is a plain one"
        );
        assert_eq!(store.calls.load(Ordering::Relaxed), 3);
    }

    #[actix_web::test]
    async fn a_failed_read_fails_every_request_of_it_and_each_is_counted() {
        let store = store_with(&[(app(1), doc("user_id", "u1", "control"))]).await;
        store.failing.store(true, Ordering::Relaxed);
        let (reads, registry) = reads_of(&store, 1_000);
        let states = futures_util::future::join_all(
            ["u1", "u2", "u3"].map(|u| reads.read(app(1), vec![id("user_id", u)])),
        )
        .await;
        assert!(states.iter().all(|s| !s.is_readable()), "{states:?}");
        assert_eq!(store.calls.load(Ordering::Relaxed), 1);
        assert_eq!(
            metric(&registry, "flowgate_sticky_reads_total{outcome=\"failed\"}"),
            3.0
        );
    }

    #[actix_web::test]
    async fn a_refused_combined_read_fails_only_the_request_it_is_about() {
        let (one, two) = (app(1), app(2));
        let store = store_with(&[
            (one, doc("user_id", "u1", "control")),
            (one, doc("user_id", "bad", "control")),
            (two, doc("user_id", "u3", "treatment")),
        ])
        .await;
        *store.refuse.lock().unwrap() = Some("bad".to_owned());
        let (reads, registry) = reads_of(&store, 1_000);
        let requests = [(one, "u1"), (one, "bad"), (one, "u2"), (two, "u3")];
        let states = futures_util::future::join_all(
            requests
                .iter()
                .map(|(app, user)| reads.read(*app, vec![id("user_id", user)])),
        )
        .await;
        let readable: Vec<bool> = states.iter().map(StickyState::is_readable).collect();
        assert_eq!(readable, [true, false, true, true], "{states:?}");
        assert_eq!(states[0].docs().len(), 1);
        assert!(states[2].docs().is_empty(), "u2 has nothing stored");
        assert_eq!(states[3].docs().len(), 1);
        assert_eq!(
            metric(&registry, "flowgate_sticky_reads_total{outcome=\"failed\"}"),
            1.0
        );
        assert_eq!(
            metric(&registry, "flowgate_sticky_reads_total{outcome=\"read\"}"),
            3.0
        );
        assert_eq!(
            metric(&registry, "flowgate_sticky_store_reads_total"),
            5.0,
            "the combined read, then each request's alone"
        );
    }

    #[actix_web::test]
    async fn a_slow_read_times_out_every_request_at_its_deadline() {
        let store = store_with(&[(app(1), doc("user_id", "u1", "control"))]).await;
        *store.delay.lock().unwrap() = Duration::from_millis(500);
        let (reads, registry) = reads_of(&store, 30);
        let start = std::time::Instant::now();
        let states = futures_util::future::join_all(
            ["u1", "u2"].map(|u| reads.read(app(1), vec![id("user_id", u)])),
        )
        .await;
        let waited = start.elapsed();
        assert!(states.iter().all(|s| !s.is_readable()), "{states:?}");
        assert!(waited < Duration::from_millis(400), "waited {waited:?}");
        assert_eq!(
            metric(
                &registry,
                "flowgate_sticky_reads_total{outcome=\"timed_out\"}"
            ),
            2.0
        );
    }

    fn assignments(store: &StickyAssignments, app: AppId, users: &[&str]) {
        for user in users {
            store.enqueue(vec![StickyWrite {
                app_id: app,
                doc: doc("user_id", user, "control"),
            }]);
        }
    }

    #[actix_web::test]
    async fn a_store_that_keeps_failing_opens_the_circuit_and_a_probe_closes_it() {
        let store = store_with(&[(app(1), doc("user_id", "u1", "control"))]).await;
        store.failing.store(true, Ordering::Relaxed);
        let (reads, registry) = reads_of(&store, 1_000);
        for _ in 0..FAILURES_TO_OPEN {
            assert!(!reads
                .read(app(1), vec![id("user_id", "u1")])
                .await
                .is_readable());
        }
        let sent = store.calls.load(Ordering::Relaxed);
        assert_eq!(sent, FAILURES_TO_OPEN as usize);
        assert!(!reads.sticky.health().is_healthy());
        assert!(reads
            .sticky
            .health()
            .problem()
            .unwrap()
            .contains("down for the test"));
        // Open: answered at once, nothing sent, counted as failed.
        for _ in 0..20 {
            assert!(!reads
                .read(app(1), vec![id("user_id", "u1")])
                .await
                .is_readable());
        }
        assert_eq!(
            store.calls.load(Ordering::Relaxed),
            sent,
            "no read sent while open"
        );
        assert_eq!(
            metric(&registry, "flowgate_sticky_reads_total{outcome=\"failed\"}"),
            f64::from(FAILURES_TO_OPEN) + 20.0
        );
        // Back: after the pause, one request probes and closes the circuit.
        store.failing.store(false, Ordering::Relaxed);
        tokio::time::sleep(OPEN_FIRST + Duration::from_millis(50)).await;
        assert!(reads
            .read(app(1), vec![id("user_id", "u1")])
            .await
            .is_readable());
        assert!(reads.sticky.health().is_healthy());
        assert!(reads
            .read(app(1), vec![id("user_id", "u1")])
            .await
            .is_readable());
    }

    #[actix_web::test]
    async fn a_failed_probe_pauses_longer() {
        let store = Arc::new(Recording::default());
        store.failing.store(true, Ordering::Relaxed);
        let (reads, _registry) = reads_of(&store, 1_000);
        reads.sticky.health().failed_at_start("refused".to_owned());
        assert!(!reads.sticky.health().is_healthy());
        assert_eq!(reads.sticky.health().problem().as_deref(), Some("refused"));
        assert!(!reads
            .read(app(1), vec![id("user_id", "u1")])
            .await
            .is_readable());
        assert_eq!(
            store.calls.load(Ordering::Relaxed),
            0,
            "paused from the start"
        );
        tokio::time::sleep(OPEN_FIRST + Duration::from_millis(50)).await;
        assert!(!reads
            .read(app(1), vec![id("user_id", "u1")])
            .await
            .is_readable());
        assert_eq!(store.calls.load(Ordering::Relaxed), 1, "one probe");
        // The next pause is twice the first: nothing is sent after the first pause's length.
        tokio::time::sleep(OPEN_FIRST + Duration::from_millis(50)).await;
        assert!(!reads
            .read(app(1), vec![id("user_id", "u1")])
            .await
            .is_readable());
        assert_eq!(store.calls.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn writes_during_an_outage_are_held_until_the_store_answers() {
        let store = Arc::new(Recording::default());
        store.failing.store(true, Ordering::Relaxed);
        let (sticky, writer, registry) = assignments_on(&store, StickyReadWriteSettings::default());
        let task = tokio::spawn(run_writer(writer));
        let users: Vec<String> = (0..50).map(|i| format!("u{i}")).collect();
        let names: Vec<&str> = users.iter().map(String::as_str).collect();
        assignments(&sticky, app(1), &names);
        // Well past the attempts a refused batch gets.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while store.write_attempts.load(Ordering::Relaxed) <= WRITE_ATTEMPTS as usize + 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer stopped trying"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            metric(
                &registry,
                "flowgate_sticky_writes_total{outcome=\"failed\"}"
            ),
            0.0
        );
        store.failing.store(false, Ordering::Relaxed);
        drop(sticky);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the writer ends once stored")
            .unwrap();
        let read = store
            .inner
            .read_sticky(
                app(1),
                &users.iter().map(|u| id("user_id", u)).collect::<Vec<_>>(),
            )
            .await
            .unwrap();
        assert_eq!(
            read.len(),
            50,
            "every assignment held through the outage is stored"
        );
        assert_eq!(
            metric(
                &registry,
                "flowgate_sticky_writes_total{outcome=\"stored\"}"
            ),
            50.0
        );
    }

    #[tokio::test]
    async fn past_the_bound_the_oldest_waiting_assignment_is_dropped() {
        let store = Arc::new(Recording::default());
        let settings = StickyReadWriteSettings {
            write_queue: 3,
            ..StickyReadWriteSettings::default()
        };
        let (sticky, writer, registry) = assignments_on(&store, settings);
        assignments(&sticky, app(1), &["a", "b", "c", "d", "e"]);
        assert_eq!(
            metric(
                &registry,
                "flowgate_sticky_writes_total{outcome=\"dropped\"}"
            ),
            2.0
        );
        assert_eq!(metric(&registry, "flowgate_sticky_write_queue"), 3.0);
        drop(sticky);
        run_writer(writer).await;
        let all: Vec<StickyId> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|u| id("user_id", u))
            .collect();
        let read = store.inner.read_sticky(app(1), &all).await.unwrap();
        let mut kept: Vec<&str> = read.iter().map(|d| d.attribute_value.as_str()).collect();
        kept.sort_unstable();
        assert_eq!(kept, ["c", "d", "e"], "the newest kept");
    }

    #[tokio::test]
    async fn the_circuit_closes_without_requests_when_the_store_is_back() {
        let store = Arc::new(Recording::default());
        let (sticky, _writer, _registry) =
            assignments_on(&store, StickyReadWriteSettings::default());
        sticky
            .health()
            .failed_at_start("refused at start".to_owned());
        let prober = tokio::spawn({
            let sticky = sticky.clone();
            async move { sticky.probe_while_failing().await }
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !sticky.health().is_healthy() {
            assert!(std::time::Instant::now() < deadline, "never probed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            store.calls.load(Ordering::Relaxed) >= 1,
            "a probe read was sent"
        );
        prober.abort();
    }
}
