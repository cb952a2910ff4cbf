//! The queue state that the [`Sink`](crate::Sink) fills and the writers drain: the queued
//! requests, the counts the capacity check reads, and the free capacity shared by both.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ports::{DeadLetterStore, EventStore};
use tokio::sync::{Notify, Semaphore};

use crate::ack::Waiter;
use crate::config::SinkConfig;
use crate::stats::Counters;

/// Bounds of the `Retry-After` the sink suggests when it refuses, in seconds.
pub const RETRY_AFTER_MIN_SECS: u32 = 1;
/// See [`RETRY_AFTER_MIN_SECS`].
pub const RETRY_AFTER_MAX_SECS: u32 = 30;

/// The events of one accepted request and when they were accepted (for the flush timer and
/// the oldest-event age). The queue holds whole requests, so an enqueue moves one `Vec`
/// instead of copying each event; writers split a request across batches when needed.
pub(crate) struct Chunk {
    pub(crate) at: Instant,
    pub(crate) events: Vec<AnalyticsEvent>,
    /// The request waiting for these events to be stored (D15), if one waits.
    pub(crate) waiter: Option<Arc<Waiter>>,
}

/// What the queue lock guards: everything the capacity check reads, so the check and the
/// insertion are one atomic step and a request is taken whole or not at all (D7).
pub(crate) struct State {
    pub(crate) queue: VecDeque<Chunk>,
    /// Events in `queue`.
    pub(crate) queued: usize,
    /// Chunks in `queue` that a request waits on (D15): an idle writer writes them at once.
    pub(crate) queued_waiters: usize,
    /// Events taken by writers and not yet stored. They count against the capacity, so the
    /// capacity bounds everything a hard kill can lose.
    pub(crate) in_flight: usize,
    /// Per writer: when the oldest event of its batch was accepted.
    pub(crate) in_flight_oldest: Vec<Option<Instant>>,
    pub(crate) accepting: bool,
}

/// What the sink and its writers share.
pub(crate) struct Inner {
    pub(crate) config: SinkConfig,
    pub(crate) store: Arc<dyn EventStore>,
    /// Where events the store refuses for good go (D17).
    pub(crate) dead_letters: Arc<dyn DeadLetterStore>,
    pub(crate) state: Mutex<State>,
    /// Wakes writers: a first event in an empty queue, a full batch, shutdown.
    pub(crate) wake: Notify,
    /// Writers signal every stored batch (the drain waits on it).
    pub(crate) progress: Notify,
    /// Free capacity, in events: `queue_capacity` minus what is queued, in flight or reserved
    /// by an admission (a capacity reservation). Every enqueue takes its events' permits under
    /// the queue lock; writers give them back when a batch is stored. Waiting admissions are
    /// served in arrival order. Closed when shutdown begins, which refuses waiting admissions
    /// at once.
    pub(crate) free_capacity: Semaphore,
    pub(crate) counters: Counters,
}

impl Inner {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the state consistent before anything can panic, so a
        // poisoned lock still guards valid data; refusing events forever would be worse.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Events held: queued and in flight.
    pub(crate) fn occupancy(&self) -> usize {
        let s = self.lock();
        s.queued + s.in_flight
    }

    /// The `Retry-After` for a refusal: the time the writers need, at the recent write rate, to
    /// store the `backlog` already held (queued and in flight), clamped to 1..=30 s. Sending
    /// clients back when the backlog is written, rather than when the first free slot opens,
    /// keeps refused clients from retrying in a herd against a still-full queue. While the
    /// store is failing: the maximum. With no measurement yet: the minimum.
    pub(crate) fn retry_after(&self, backlog: usize) -> u32 {
        let c = &self.counters;
        if c.failing.load(Ordering::Relaxed) {
            return RETRY_AFTER_MAX_SECS;
        }
        let secs = match c.rate.rate() {
            None => f64::from(RETRY_AFTER_MIN_SECS),
            Some(rate) if rate <= 0.0 => f64::from(RETRY_AFTER_MAX_SECS),
            Some(rate) => (backlog as f64 / rate).ceil(),
        };
        // `as` saturates on floats; the clamp does the rest.
        (secs as u32).clamp(RETRY_AFTER_MIN_SECS, RETRY_AFTER_MAX_SECS)
    }
}
