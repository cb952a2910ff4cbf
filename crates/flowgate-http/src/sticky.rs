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

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use flowgate_domain::ids::AppId;
use flowgate_domain::ports::{StickyStore, StoreError};
use flowgate_domain::resolve::StickyState;
use flowgate_domain::sticky::{StickyDoc, StickyDocs, StickyId, StickyWrite};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, oneshot};

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

    /// One read of the store, within the deadline.
    async fn store_read(&self, app: AppId, ids: &[StickyId]) -> Answer {
        match tokio::time::timeout(self.read_timeout, self.store.read_sticky(app, ids)).await {
            Ok(Ok(docs)) => Ok(docs),
            Ok(Err(error)) => {
                tracing::debug!(%error, "stored assignments not read: resolving without them");
                Err(ReadFailure::Failed)
            }
            Err(_) => Err(ReadFailure::TimedOut),
        }
    }

    /// One read of the store for several apps' identifiers, within the deadline; an answer
    /// per read, in order.
    async fn store_read_many(
        &self,
        reads: &[(AppId, &[StickyId])],
    ) -> Result<Vec<StickyDocs>, ManyFailure> {
        let read = self.store.read_sticky_many(reads);
        match tokio::time::timeout(self.read_timeout, read).await {
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

    fn reads_of(store: &Arc<Recording>, timeout_ms: u64) -> (Rc<WorkerReads>, Registry) {
        let mut registry = Registry::default();
        let (sticky, _writer) = StickyAssignments::new(
            Arc::clone(store) as Arc<dyn StickyStore>,
            StickySettings {
                read_timeout: Duration::from_millis(timeout_ms),
                ..StickySettings::default()
            },
            StickyMetrics::new(&mut registry),
        );
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
}
