//! The [`Sink`]: a bounded queue in front of writer tasks.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use flowgate_domain::events::{AnalyticsEvent, EventType};
use flowgate_domain::ports::{
    Admission, BoxFuture, DeadLetterStore, EventSink, EventStore, Overloaded, Receipt,
};
use tokio::sync::{oneshot, Notify, Semaphore};
use tokio::task::JoinHandle;

use crate::ack::Waiter;
use crate::config::{AckMode, ConfigError, SinkConfig};
use crate::queue::{Chunk, Inner, State, RETRY_AFTER_MIN_SECS};
use crate::stats::{Counters, SinkStats};
use crate::writer;

/// Why a sink could not start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartError {
    /// A setting is out of range.
    Config(ConfigError),
    /// [`Sink::start`] was called outside a tokio runtime.
    NoRuntime,
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Config(e) => e.fmt(f),
            StartError::NoRuntime => {
                f.write_str("the analytics sink must be started inside a tokio runtime")
            }
        }
    }
}

impl std::error::Error for StartError {}

impl From<ConfigError> for StartError {
    fn from(e: ConfigError) -> Self {
        StartError::Config(e)
    }
}

/// What a graceful shutdown achieved ([`Sink::shutdown`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainReport {
    /// Events stored between the start of the shutdown and its end.
    pub written: u64,
    /// Events not stored when the shutdown returned (queued or in flight); 0 when `completed`.
    /// If the process exits now, these are lost.
    pub remaining: usize,
    /// True when everything accepted was stored before the deadline.
    pub completed: bool,
    /// How long the drain took.
    pub elapsed: Duration,
}

/// The analytics sink (D7, D8, D15): a bounded in-memory queue that the request path fills
/// without ever blocking, and writer tasks that store it in batches through an [`EventStore`],
/// retrying failed batches until they are stored and setting aside, as dead letters, events
/// the store refuses for good (D17). With [`AckMode::Stored`] a request's [`Receipt`]
/// resolves once its events are committed.
///
/// Cheap to clone: clones share one queue and one set of writers.
#[derive(Clone)]
pub struct Sink {
    inner: Arc<Inner>,
    writers: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl fmt::Debug for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sink")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Sink {
    /// Validates `config` and starts `config.writers` writer tasks on the current tokio
    /// runtime, writing to `store`, with refused events going to `dead_letters`.
    pub fn start(
        config: SinkConfig,
        store: Arc<dyn EventStore>,
        dead_letters: Arc<dyn DeadLetterStore>,
    ) -> Result<Sink, StartError> {
        config.validate()?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| StartError::NoRuntime)?;
        let capacity = config.queue_capacity;
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                queued: 0,
                queued_waiters: 0,
                in_flight: 0,
                in_flight_oldest: vec![None; config.writers],
                accepting: true,
            }),
            config,
            store,
            dead_letters,
            wake: Notify::new(),
            progress: Notify::new(),
            free_capacity: Semaphore::new(capacity),
            counters: Counters::new(),
        });
        let writers = (0..inner.config.writers)
            .map(|id| runtime.spawn(writer::run(Arc::clone(&inner), id)))
            .collect();
        Ok(Sink {
            inner,
            writers: Arc::new(Mutex::new(writers)),
        })
    }

    /// The settings the sink runs with.
    pub fn config(&self) -> &SinkConfig {
        &self.inner.config
    }

    /// A snapshot of the metrics. Takes the queue lock briefly.
    pub fn stats(&self) -> SinkStats {
        let (queue_depth, in_flight, oldest, shutting_down) = {
            let s = self.inner.lock();
            let oldest = s
                .queue
                .front()
                .map(|q| q.at)
                .into_iter()
                .chain(s.in_flight_oldest.iter().flatten().copied())
                .min();
            (s.queued, s.in_flight, oldest, !s.accepting)
        };
        let c = &self.inner.counters;
        SinkStats {
            queue_capacity: self.inner.config.queue_capacity,
            queue_depth,
            in_flight,
            oldest_event_age: oldest.map(|at| at.elapsed()),
            events_enqueued: c.enqueued.load(Ordering::Relaxed),
            requests_accepted: c.requests_accepted.load(Ordering::Relaxed),
            events_refused: c.refused.load(Ordering::Relaxed),
            requests_refused: c.requests_refused.load(Ordering::Relaxed),
            server_events_skipped: c.server_events_skipped.load(Ordering::Relaxed),
            events_written: c.written.load(Ordering::Relaxed),
            events_duplicate: c.duplicates.load(Ordering::Relaxed),
            batches_written: c.batches.load(Ordering::Relaxed),
            last_batch_size: usize::try_from(c.last_batch_size.load(Ordering::Relaxed))
                .unwrap_or(usize::MAX),
            batch_sizes: c.batch_sizes.clone(),
            write_latency: c.write_latency.clone(),
            write_retries: c.failed_attempts.load(Ordering::Relaxed),
            events_dead_lettered: c.dead_lettered.load(Ordering::Relaxed),
            ack_wait: c.ack_wait.clone(),
            acks_timed_out: c.acks_timed_out.load(Ordering::Relaxed),
            write_rate: c.rate.rate(),
            store_healthy: !c.failing.load(Ordering::Relaxed),
            last_failure: c.last_failure(),
            last_error: c
                .last_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            shutting_down,
        }
    }

    /// Graceful drain: stops accepting (every later `try_enqueue` is refused, the HTTP adapter
    /// answers 503), lets the writers store everything queued and in flight, and returns when
    /// all of it is stored or when `deadline` has passed, whichever comes first. The binary
    /// passes [`SinkConfig::drain_deadline`].
    ///
    /// Past the deadline the writers are not stopped: they keep writing (and retrying) for as
    /// long as the runtime runs, so an embedding process that stays up loses nothing. The
    /// report's `remaining` is what the process loses if it exits now.
    pub async fn shutdown(&self, deadline: Duration) -> DrainReport {
        let started = Instant::now();
        let end = tokio::time::Instant::now() + deadline;
        let written_before = self.inner.counters.written.load(Ordering::Relaxed);
        self.inner.lock().accepting = false;
        self.inner.free_capacity.close();
        // Writers waiting for a flush time or for events re-check the state: while shutting
        // down they flush partial batches at once and exit when nothing is left.
        self.inner.wake.notify_waiters();
        let remaining = loop {
            let progress = self.inner.progress.notified();
            tokio::pin!(progress);
            progress.as_mut().enable();
            let remaining = {
                let s = self.inner.lock();
                s.queued + s.in_flight
            };
            if remaining == 0 {
                break 0;
            }
            if tokio::time::timeout_at(end, progress).await.is_err() {
                let s = self.inner.lock();
                break s.queued + s.in_flight;
            }
        };
        if remaining == 0 {
            // The writers exit once the queue is empty; wait for them so the store is no
            // longer used when this returns.
            let handles: Vec<JoinHandle<()>> =
                std::mem::take(&mut *self.writers.lock().unwrap_or_else(PoisonError::into_inner));
            for handle in handles {
                let _ = tokio::time::timeout_at(end, handle).await;
            }
        }
        let written = self
            .inner
            .counters
            .written
            .load(Ordering::Relaxed)
            .saturating_sub(written_before);
        let report = DrainReport {
            written,
            remaining,
            completed: remaining == 0,
            elapsed: started.elapsed(),
        };
        if report.completed {
            tracing::info!(
                written = report.written,
                elapsed_ms = report.elapsed.as_millis() as u64,
                "analytics sink drained"
            );
        } else {
            tracing::error!(
                written = report.written,
                remaining = report.remaining,
                deadline_ms = deadline.as_millis() as u64,
                "analytics drain deadline passed; events not yet stored are lost if the process exits"
            );
        }
        report
    }

    fn refuse(&self, events: usize, retry_after_secs: u32) -> Overloaded {
        let c = &self.inner.counters;
        c.refused.fetch_add(events as u64, Ordering::Relaxed);
        c.requests_refused.fetch_add(1, Ordering::Relaxed);
        Overloaded { retry_after_secs }
    }
}

/// Permits for `n` events (`n` is at most the queue capacity, at most 10,000,000).
fn permits(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Sink {
    /// Puts a request's events in the queue; the caller took their permits.
    fn push(
        &self,
        s: &mut MutexGuard<'_, State>,
        events: Vec<AnalyticsEvent>,
        waiter: Option<Arc<Waiter>>,
    ) {
        let n = events.len();
        let before = s.queued;
        let waits = waiter.is_some();
        s.queue.push_back(Chunk {
            at: Instant::now(),
            events,
            waiter,
        });
        s.queued += n;
        s.queued_waiters += usize::from(waits);
        // Wake a writer when it has something new to do: start the flush timer of a queue
        // that was empty, or write what just reached `write_threshold` (if no write is in
        // flight) or a full batch.
        let crossed = |level: usize| before < level && before + n >= level;
        let config = &self.inner.config;
        let wake =
            before == 0 || waits || crossed(config.ready_size()) || crossed(config.batch_size);
        let c = &self.inner.counters;
        c.enqueued.fetch_add(n as u64, Ordering::Relaxed);
        c.requests_accepted.fetch_add(1, Ordering::Relaxed);
        if wake {
            self.inner.wake.notify_one();
        }
    }

    /// The one enqueue path (`try_enqueue` reserves nothing, an admission holds a capacity
    /// reservation): all or none under one short lock (D7). The events use the `reserved`
    /// permits first and take the rest from the free capacity; refused when the rest is not
    /// free, or after shutdown began (`Retry-After` 1 s: another replica can take the
    /// request). Permits still reserved afterwards stay in `reserved` (an admission gives them
    /// back when dropped).
    ///
    /// With `wait` and [`AckMode::Stored`] the receipt resolves once the events are stored
    /// (D15); otherwise it is ready at once.
    fn enqueue_reserved(
        &self,
        reserved: &mut u32,
        mut events: Vec<AnalyticsEvent>,
        wait: bool,
    ) -> Result<Receipt, Overloaded> {
        self.skip_unrecorded(&mut events);
        let n = events.len();
        if n == 0 {
            return Ok(Receipt::ready());
        }
        let need = permits(n);
        let mut s = self.inner.lock();
        if !s.accepting {
            drop(s);
            return Err(self.refuse(n, RETRY_AFTER_MIN_SECS));
        }
        if need > *reserved {
            match self.inner.free_capacity.try_acquire_many(need - *reserved) {
                Ok(p) => {
                    p.forget();
                    *reserved = need;
                }
                Err(_) => {
                    let occupancy = s.queued + s.in_flight;
                    drop(s);
                    return Err(self.refuse(n, self.inner.retry_after(occupancy)));
                }
            }
        }
        // The used permits now stand for queued events.
        *reserved -= need;
        if wait && self.inner.config.ack == AckMode::Stored {
            let (waiter, stored) = Waiter::new(n);
            self.push(&mut s, events, Some(waiter));
            drop(s);
            Ok(receipt(Arc::clone(&self.inner), stored))
        } else {
            self.push(&mut s, events, None);
            Ok(Receipt::ready())
        }
    }

    /// Drops `resolve_no_flow` events when they are not recorded (counted).
    fn skip_unrecorded(&self, events: &mut Vec<AnalyticsEvent>) {
        if self.inner.config.record_resolve_no_flow {
            return;
        }
        let before = events.len();
        events.retain(|e| e.event_type != EventType::ResolveNoFlow);
        let skipped = before - events.len();
        if skipped > 0 {
            self.inner
                .counters
                .server_events_skipped
                .fetch_add(skipped as u64, Ordering::Relaxed);
        }
    }
}

impl EventSink for Sink {
    /// Takes every event or none (D7), without blocking: one short lock for the capacity check
    /// and the insertion. Refused when the events do not fit in the remaining capacity, and
    /// after shutdown began (with `Retry-After` 1 s: another replica can take the request).
    ///
    /// `resolve_no_flow` events (D8) are dropped here when `record_resolve_no_flow` is off. The
    /// HTTP adapter enqueues them after answering the resolve and ignores a refusal: a resolve
    /// never fails because of analytics (the refusal is counted in the stats).
    fn try_enqueue(&self, events: Vec<AnalyticsEvent>) -> Result<(), Overloaded> {
        self.enqueue_reserved(&mut 0, events, false).map(drop)
    }

    /// Reserves capacity for `max_events` at once when it is free; otherwise waits for it,
    /// behind earlier waiters, for at most `admission_wait`, and then reserves what is free (a
    /// request with fewer events may still fit; [`Admission::enqueue`] refuses it when it does
    /// not).
    /// Refused after shutdown began (`Retry-After` 1 s) and when nothing at all is free after
    /// the wait (the usual `Retry-After`). A refused admission counts as one refused request;
    /// its events were never read, so they are not in `events_refused`.
    fn admit(
        &self,
        max_events: usize,
    ) -> BoxFuture<'_, Result<Box<dyn Admission + '_>, Overloaded>> {
        Box::pin(async move {
            let n = permits(max_events.min(self.inner.config.queue_capacity));
            let wait = self.inner.config.admission_wait;
            let acquired = match self.inner.free_capacity.try_acquire_many(n) {
                Ok(p) => Ok(p),
                Err(tokio::sync::TryAcquireError::Closed) => {
                    return Err(self.refuse(0, RETRY_AFTER_MIN_SECS))
                }
                Err(tokio::sync::TryAcquireError::NoPermits) if wait.is_zero() => Err(()),
                Err(tokio::sync::TryAcquireError::NoPermits) => {
                    match tokio::time::timeout(wait, self.inner.free_capacity.acquire_many(n)).await
                    {
                        Ok(Ok(p)) => Ok(p),
                        Ok(Err(_closed)) => return Err(self.refuse(0, RETRY_AFTER_MIN_SECS)),
                        Err(_elapsed) => Err(()),
                    }
                }
            };
            let reserved = match acquired {
                Ok(p) => {
                    p.forget();
                    n
                }
                Err(()) => {
                    // No capacity for a full request in time: reserve what is free, so a
                    // smaller request that fits is still taken (refused only when its events do
                    // not fit, D7). Nothing free: refused unread.
                    let free = permits(self.inner.free_capacity.available_permits()).min(n);
                    match self.inner.free_capacity.try_acquire_many(free) {
                        Ok(p) if free > 0 => {
                            p.forget();
                            free
                        }
                        _ => {
                            return Err(
                                self.refuse(0, self.inner.retry_after(self.inner.occupancy()))
                            )
                        }
                    }
                }
            };
            let admission: Box<dyn Admission + '_> = Box::new(CapacityReservation {
                sink: self,
                reserved,
            });
            Ok(admission)
        })
    }
}

/// The capacity [`Sink::admit`] reserved for one request, in permits (events); what the
/// request does not use goes back on drop.
struct CapacityReservation<'a> {
    sink: &'a Sink,
    reserved: u32,
}

impl Admission for CapacityReservation<'_> {
    fn enqueue(mut self: Box<Self>, events: Vec<AnalyticsEvent>) -> Result<Receipt, Overloaded> {
        self.sink.enqueue_reserved(&mut self.reserved, events, true)
    }
}

impl Drop for CapacityReservation<'_> {
    fn drop(&mut self) {
        if self.reserved > 0 {
            self.sink
                .inner
                .free_capacity
                .add_permits(self.reserved as usize);
        }
    }
}
/// The receipt of a request whose events are queued with a [`Waiter`]: resolves when they are
/// stored, or with [`Overloaded`] after `events.ack_timeout_ms` (the events stay queued), or
/// at once if the writers are gone without storing them (the runtime is shutting down).
fn receipt(inner: Arc<Inner>, stored: oneshot::Receiver<()>) -> Receipt {
    let started = Instant::now();
    Receipt::new(async move {
        let counters = &inner.counters;
        match tokio::time::timeout(inner.config.ack_timeout, stored).await {
            Ok(Ok(())) => {
                counters.ack_wait.observe(started.elapsed().as_secs_f64());
                Ok(())
            }
            Ok(Err(_writers_gone)) => Err(Overloaded {
                retry_after_secs: RETRY_AFTER_MIN_SECS,
            }),
            Err(_elapsed) => {
                counters.acks_timed_out.fetch_add(1, Ordering::Relaxed);
                Err(Overloaded {
                    retry_after_secs: inner.retry_after(inner.occupancy()),
                })
            }
        }
    })
}
