//! The writer task: takes batches from the queue and stores them, retrying until they are
//! stored, and releases the requests that wait for them (D15).

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowgate_domain::delivery::store_batch;
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ports::{Outage, StoreError};

use crate::ack::Waiter;
use crate::queue::{Chunk, Inner};

/// Events taken from the queue for one write, with the requests waiting on them.
struct Batch {
    events: Vec<AnalyticsEvent>,
    /// Each waiting request and how many of its events this batch holds.
    waiters: Vec<(Arc<Waiter>, usize)>,
}

/// What a writer does next.
enum Step {
    /// Store this batch.
    Write(Batch),
    /// Wait for this long (the flush time of the oldest queued event) or a wake-up.
    WaitFor(Duration),
    /// Wait for a wake-up: the queue is empty.
    Wait,
    /// Shutdown began and the queue is empty.
    Exit,
}

/// Decides under the queue lock: a full batch is written at once, and so is whatever is queued
/// (up to a full batch) while no other write is in flight once it reaches `write_threshold` or
/// holds a request that waits for its events to be stored (D15: group commit, the requests
/// that arrive during a write share the next one); fewer events when the oldest has waited
/// `flush_interval`, or at once during shutdown. An idle store thus gets small batches soon,
/// and a busy one full batches.
fn next_step(inner: &Inner, id: usize) -> Step {
    let config = &inner.config;
    let mut s = inner.lock();
    let Some(oldest) = s.queue.front().map(|q| q.at) else {
        return if s.accepting { Step::Wait } else { Step::Exit };
    };
    let age = oldest.elapsed();
    let ready = s.queued >= config.batch_size
        || (s.in_flight == 0 && (s.queued >= config.ready_size() || s.queued_waiters > 0));
    if !ready && s.accepting && age < config.flush_interval {
        return Step::WaitFor(config.flush_interval - age);
    }
    let mut parts: Vec<Vec<AnalyticsEvent>> = Vec::new();
    let mut waiters = Vec::new();
    let mut taken = 0;
    while taken < config.batch_size {
        let Some(mut chunk) = s.queue.pop_front() else {
            break;
        };
        let space = config.batch_size - taken;
        if chunk.events.len() > space {
            // The rest of the request stays at the front, with its acceptance time and its
            // waiter.
            let rest = chunk.events.split_off(space);
            s.queue.push_front(Chunk {
                at: chunk.at,
                events: rest,
                waiter: chunk.waiter.clone(),
            });
        } else if chunk.waiter.is_some() {
            s.queued_waiters -= 1;
        }
        taken += chunk.events.len();
        if let Some(waiter) = chunk.waiter {
            waiters.push((waiter, chunk.events.len()));
        }
        parts.push(chunk.events);
    }
    s.queued -= taken;
    s.in_flight += taken;
    if let Some(slot) = s.in_flight_oldest.get_mut(id) {
        *slot = Some(oldest);
    }
    let more = s.queued >= config.batch_size;
    drop(s);
    if more {
        // Another full batch is waiting: hand it to another writer.
        inner.wake.notify_one();
    }
    // Joined outside the lock: the request path never waits for this copy.
    let events = if parts.len() == 1 {
        parts.pop().unwrap_or_default()
    } else {
        let mut events = Vec::with_capacity(taken);
        for part in parts {
            events.extend(part);
        }
        events
    };
    Step::Write(Batch { events, waiters })
}

/// A writer's loop; returns when shutdown began and the queue is empty.
pub(crate) async fn run(inner: Arc<Inner>, id: usize) {
    // Jitter needs spread between replicas and writers, not cryptographic quality: a
    // generator seeded from the process's own random state.
    let mut jitter = fastrand::Rng::new();
    loop {
        // Registered before the state is read, so a wake-up between the read and the wait is
        // not missed.
        let woken = inner.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        match next_step(&inner, id) {
            Step::Write(batch) => write(&inner, id, batch, &mut jitter).await,
            Step::WaitFor(d) => {
                let _ = tokio::time::timeout(d, woken).await;
            }
            Step::Wait => woken.await,
            Step::Exit => return,
        }
    }
}

/// Stores one batch, retrying with jittered exponential backoff until it is stored, then
/// releases the requests waiting on it. A batch is never dropped (D7: an accepted event must
/// reach the store). Retrying is safe because the store is idempotent on `event_id`: a write
/// that failed ambiguously (committed, but the answer was lost) stores nothing twice when
/// repeated.
///
/// Events the store refuses with a non-transient error are isolated by splitting the batch and
/// become dead letters, the rest is stored ([`store_batch`], D17), so no event holds a writer.
/// What is retried is a transient failure, or dead letters that could not be written.
async fn write(inner: &Inner, id: usize, batch: Batch, jitter: &mut fastrand::Rng) {
    let counters = &inner.counters;
    let backoff = inner.config.backoff;
    let events = &batch.events;
    let mut attempt: u32 = 0;
    loop {
        let started = Instant::now();
        let result = match tokio::time::timeout(
            inner.config.write_timeout,
            store_batch(
                &*inner.store,
                &*inner.dead_letters,
                events,
                time::OffsetDateTime::now_utc(),
            ),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(StoreError::Unavailable {
                reason: Outage::Timeout,
                detail: format!(
                    "the write took longer than {} ms",
                    inner.config.write_timeout.as_millis()
                ),
            }),
        };
        match result {
            Ok(outcome) => {
                counters.record_success(events.len(), outcome.duplicates, started.elapsed());
                if outcome.dead_lettered > 0 {
                    counters.record_dead_letters(outcome.dead_lettered);
                    tracing::error!(
                        events = events.len(),
                        dead_lettered = outcome.dead_lettered,
                        writes = outcome.writes,
                        "the store refused events for good: they are dead letters \
                         (`flowgate events dead-letters list`), the rest of the batch is stored"
                    );
                }
                if attempt > 0 {
                    tracing::info!(
                        events = events.len(),
                        failed_attempts = attempt,
                        "analytics batch stored after retries"
                    );
                }
                break;
            }
            Err(error) => {
                let delay = backoff.delay(attempt, jitter.f64());
                counters.record_failure(error.to_string());
                attempt = attempt.saturating_add(1);
                if error.is_transient() {
                    tracing::warn!(
                        %error,
                        events = events.len(),
                        attempt,
                        retry_in_ms = delay.as_millis() as u64,
                        "analytics batch write failed; retrying"
                    );
                } else {
                    tracing::error!(
                        %error,
                        events = events.len(),
                        attempt,
                        retry_in_ms = delay.as_millis() as u64,
                        "analytics dead letters could not be written; retrying, \
                         the batch is kept (it is never dropped)"
                    );
                }
                tokio::time::sleep(delay).await;
            }
        }
    }
    for (waiter, stored) in &batch.waiters {
        waiter.stored(*stored);
    }
    {
        let mut s = inner.lock();
        s.in_flight -= events.len();
        if let Some(slot) = s.in_flight_oldest.get_mut(id) {
            *slot = None;
        }
    }
    // The stored events' capacity is free again (waiting admissions take it in arrival
    // order).
    inner.free_capacity.add_permits(events.len());
    inner.progress.notify_waiters();
}

#[cfg(test)]
mod tests {
    use crate::config::Backoff;

    #[test]
    fn jittered_delays_stay_within_the_policy_and_vary() {
        // Each writer's generator: delays of one attempt fill [d/2, d], not one point of it.
        let backoff = Backoff::default();
        let mut jitter = fastrand::Rng::new();
        let ceiling = backoff.ceiling(3);
        let delays: Vec<_> = (0..1000).map(|_| backoff.delay(3, jitter.f64())).collect();
        assert!(delays.iter().all(|d| (ceiling / 2..=ceiling).contains(d)));
        let mean = delays.iter().sum::<std::time::Duration>() / 1000;
        assert!(
            (ceiling * 7 / 10..ceiling * 8 / 10).contains(&mean),
            "mean {mean:?} of [{:?}, {ceiling:?}]",
            ceiling / 2
        );
        assert_ne!(
            fastrand::Rng::new().u64(..),
            fastrand::Rng::new().u64(..),
            "writers' generators start apart"
        );
    }
}
