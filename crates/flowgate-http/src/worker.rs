//! What one API worker keeps for itself, so that a request writes no memory that the other
//! workers write too.
//!
//! actix-web runs each worker on its own thread and builds the application once per worker
//! (`api_app`). Everything every request used to touch in shared memory (the `Arc` of the
//! state, the `Arc` of the catalog snapshot, uuid's process-wide UUIDv7 context) made each
//! request move those cache lines between the cores: an atomic write to a line the other core
//! wrote last costs a transfer, on every request of every worker. Here a request only counts
//! references on its own worker's `Rc`s and records its latency in the worker's own
//! histograms. Rate limits stay one shared, exact GCRA check per request (`ratelimit.rs`):
//! per-worker leases on the buckets gain nothing measurable and could admit beyond the burst
//! (P10, P12).
//!
//! The snapshot stays the one the refresher publishes (D12): a worker compares the published
//! pointer with the one it holds on every request and takes the new one when they differ, so a
//! request never serves an older snapshot than before this cache. A worker that receives no
//! requests would keep a replaced snapshot alive; its sweeper lets go of it within
//! [`SWEEP_INTERVAL`], so reloads do not pile up snapshots in idle workers.

use std::cell::{Cell, RefCell};
use std::ops::Deref;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Duration;

use actix_web::web;
use flowgate_domain::Catalog;

use crate::metrics::LatencyRecorder;
use crate::state::ApiState;
use crate::sticky::WorkerReads;

/// How often an idle worker checks whether it holds a replaced snapshot.
pub(crate) const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// A published snapshot as one worker holds it: requests share it through the worker's `Rc`.
#[derive(Debug)]
pub(crate) struct WorkerSnapshot(Arc<Catalog>);

impl Deref for WorkerSnapshot {
    type Target = Catalog;

    fn deref(&self) -> &Catalog {
        &self.0
    }
}

/// One worker's own state, beside the [`ApiState`] all workers share.
pub(crate) struct Worker {
    /// What every worker shares: configuration, the published catalog handle, the sink, the
    /// rate limiters, the metrics.
    pub(crate) shared: web::Data<ApiState>,
    /// The snapshot this worker's requests use, as long as it is the published one.
    snapshot: RefCell<Option<Rc<WorkerSnapshot>>>,
    sweeping: Cell<bool>,
    /// This worker's request latencies (summed with the other workers' when scraped).
    pub(crate) latencies: LatencyRecorder,
    /// This worker's reads of stored assignments (D23), when sticky assignment is on.
    pub(crate) sticky: Option<Rc<WorkerReads>>,
}

impl Worker {
    pub(crate) fn new(state: web::Data<ApiState>) -> Self {
        Self {
            latencies: state.metrics.recorder(),
            sticky: state
                .sticky
                .clone()
                .map(|sticky| Rc::new(WorkerReads::new(sticky))),
            shared: state,
            snapshot: RefCell::new(None),
            sweeping: Cell::new(false),
        }
    }

    /// The published snapshot, for one request. Counts a reference on this worker's `Rc`
    /// only; the shared `Arc` is cloned once per published snapshot and worker.
    pub(crate) fn snapshot(&self) -> Rc<WorkerSnapshot> {
        let published = self.shared.published.load();
        let mut held = self.snapshot.borrow_mut();
        if let Some(snapshot) = held.as_ref() {
            if Arc::ptr_eq(&snapshot.0, &published) {
                return Rc::clone(snapshot);
            }
        }
        let fresh = Rc::new(WorkerSnapshot(arc_swap::Guard::into_inner(published)));
        *held = Some(Rc::clone(&fresh));
        fresh
    }

    /// Lets go of the held snapshot when the refresher replaced it; true when it did. Requests
    /// still running keep theirs.
    pub(crate) fn release_replaced(&self) -> bool {
        let published = self.shared.published.load();
        let mut held = self.snapshot.borrow_mut();
        let replaced = held
            .as_ref()
            .is_some_and(|snapshot| !Arc::ptr_eq(&snapshot.0, &published));
        if replaced {
            *held = None;
        }
        replaced
    }

    /// Starts the sweeper on the worker's own thread, once: every `every`, a replaced snapshot
    /// is let go of. It ends with the worker.
    ///
    /// Called from a request, so on the thread's local task set: actix-server runs each worker
    /// on a local runtime of its own, inside an actix `System` or not (`flowgate serve` runs
    /// it on a plain tokio runtime, where there is no `System`), and actix's services, which
    /// are not `Send`, are only ever driven there.
    pub(crate) fn start_sweeper(self: &Rc<Self>, every: Duration) {
        if self.sweeping.replace(true) {
            return;
        }
        let worker: Weak<Self> = Rc::downgrade(self);
        actix_web::rt::spawn(async move {
            loop {
                actix_web::rt::time::sleep(every).await;
                match worker.upgrade() {
                    Some(worker) => {
                        worker.release_replaced();
                    }
                    None => break,
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{HttpConfig, HttpMetrics};
    use arc_swap::ArcSwap;
    use flowgate_domain::catalog::CatalogData;
    use flowgate_domain::ports::{Admission, BoxFuture, EventSink, Overloaded, SystemClock};

    struct NoSink;

    impl EventSink for NoSink {
        fn try_enqueue(
            &self,
            _: Vec<flowgate_domain::events::AnalyticsEvent>,
        ) -> Result<(), Overloaded> {
            Ok(())
        }

        fn admit(&self, _: usize) -> BoxFuture<'_, Result<Box<dyn Admission + '_>, Overloaded>> {
            Box::pin(async {
                Err(Overloaded {
                    retry_after_secs: 1,
                })
            })
        }
    }

    fn snapshot() -> Arc<Catalog> {
        Arc::new(Catalog::build(CatalogData::default()).expect("an empty catalog builds"))
    }

    fn worker() -> (Rc<Worker>, crate::CatalogHandle) {
        let handle = Arc::new(ArcSwap::new(snapshot()));
        let state = web::Data::new(ApiState::new(
            HttpConfig::default(),
            Arc::clone(&handle),
            Arc::new(NoSink),
            Arc::new(SystemClock),
            HttpMetrics::default(),
        ));
        (Rc::new(Worker::new(state)), handle)
    }

    #[test]
    fn requests_share_the_held_snapshot_until_it_is_replaced() {
        let (worker, handle) = worker();
        let first = worker.snapshot();
        assert!(Arc::ptr_eq(&first.0, &handle.load()));
        let requests: Vec<_> = (0..10).map(|_| worker.snapshot()).collect();
        assert!(
            requests.iter().all(|r| Rc::ptr_eq(r, &first)),
            "no new Arc clone"
        );
        // The published Arc gains one reference per worker, not per request.
        assert_eq!(
            Arc::strong_count(&first.0),
            2,
            "the handle's and the worker's"
        );
        handle.store(snapshot());
        let second = worker.snapshot();
        assert!(
            Arc::ptr_eq(&second.0, &handle.load()),
            "the new snapshot at once"
        );
        assert!(!Arc::ptr_eq(&first.0, &second.0));
    }

    #[test]
    fn a_replaced_snapshot_is_released_without_a_request() {
        let (worker, handle) = worker();
        let old = Arc::clone(&worker.snapshot().0);
        assert!(!worker.release_replaced(), "still the published one");
        handle.store(snapshot());
        assert_eq!(Arc::strong_count(&old), 2, "this test and the worker");
        assert!(worker.release_replaced());
        assert_eq!(Arc::strong_count(&old), 1, "only this test holds it now");
    }

    #[actix_web::test]
    async fn the_sweeper_releases_a_replaced_snapshot() {
        let (worker, handle) = worker();
        let old = Arc::clone(&worker.snapshot().0);
        worker.start_sweeper(Duration::from_millis(5));
        handle.store(snapshot());
        for _ in 0..400 {
            if Arc::strong_count(&old) == 1 {
                break;
            }
            actix_web::rt::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(Arc::strong_count(&old), 1, "the idle worker let go of it");
        drop(worker);
    }
}
