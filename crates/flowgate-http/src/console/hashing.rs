//! The console's password work, bounded (issue 65): every argon2id hash or check (sign-in,
//! setting a password) runs here. argon2id is meant to cost 19 MiB and tens of milliseconds a
//! call; run on an unbounded queue, a flood of posts (answered or abandoned) held gigabytes and
//! made a real sign-in wait for seconds.
//!
//! At most [`CONCURRENT_HASHES`] run at once, on blocking threads of the admin listener's
//! background runtime, and at most [`QUEUED_HASHES`] more wait for their turn, each for at most
//! [`QUEUE_WAIT`]. Past that, or after that wait, the post is refused at once with 503
//! problem+json (`overloaded`) and `Retry-After` ([`BUSY_RETRY_AFTER_SECS`]), nothing hashed.
//! The wait for a turn is part of the request: a client that leaves drops it (the binary's
//! admin listener does not allow half-closed connections, so a client that closes its side
//! ends its request), and its turn is never taken, so abandoned posts do not pile up work. A hash that has started finishes (its
//! turn is held by the work itself, not by the request), so the memory of the hashes running
//! is bounded whatever the clients do.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::header;
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use tokio::sync::Semaphore;

use crate::background::Background;

/// Password hashes or checks running at once (each holds 19 MiB while it runs).
pub const CONCURRENT_HASHES: usize = 2;
/// Password hashes or checks that may wait for a turn beside the running ones.
pub const QUEUED_HASHES: usize = 8;
/// How long a post waits for its turn before it is refused.
pub const QUEUE_WAIT: Duration = Duration::from_secs(5);
/// The `Retry-After` of a refusal.
pub const BUSY_RETRY_AFTER_SECS: u32 = 2;

/// Why password work did not run.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WorkRefused {
    /// Every turn and every place in the queue is taken, or the wait for a turn was too long:
    /// nothing ran.
    Busy,
    /// The work did not finish (it panicked, or the runtime is shutting down).
    Failed,
}

/// The bounded password work of one console.
#[derive(Debug)]
pub(crate) struct PasswordWork {
    background: Background,
    /// Turns to run: [`CONCURRENT_HASHES`].
    running: Arc<Semaphore>,
    /// Places, running or waiting: [`CONCURRENT_HASHES`] + [`QUEUED_HASHES`].
    places: Arc<Semaphore>,
    /// Hashes started since this console began (for tests and the log).
    started: AtomicU64,
    wait: Duration,
}

impl PasswordWork {
    /// Password work on `background`'s blocking threads.
    pub(crate) fn new(background: Background) -> Self {
        Self::with_bounds(background, CONCURRENT_HASHES, QUEUED_HASHES, QUEUE_WAIT)
    }

    fn with_bounds(
        background: Background,
        concurrent: usize,
        queued: usize,
        wait: Duration,
    ) -> Self {
        Self {
            background,
            running: Arc::new(Semaphore::new(concurrent)),
            places: Arc::new(Semaphore::new(concurrent + queued)),
            started: AtomicU64::new(0),
            wait,
        }
    }

    /// How many hashes or checks have started.
    #[cfg(test)]
    pub(crate) fn started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }

    /// Runs `work` (a hash or a check) when a turn is free, or refuses it: [`WorkRefused::Busy`]
    /// at once when no place is free, or when no turn came within the wait.
    pub(crate) async fn run<T, F>(&self, work: F) -> Result<T, WorkRefused>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let place = Arc::clone(&self.places)
            .try_acquire_owned()
            .map_err(|_| WorkRefused::Busy)?;
        // Waiting here is waiting in the request: a client that leaves drops this future, and
        // its work never starts.
        let turn = tokio::time::timeout(self.wait, Arc::clone(&self.running).acquire_owned())
            .await
            .map_err(|_| WorkRefused::Busy)?
            .map_err(|_| WorkRefused::Failed)?;
        self.started.fetch_add(1, Ordering::Relaxed);
        self.background
            .run(async move {
                tokio::task::spawn_blocking(move || {
                    // Held until the work ends, even when the request has gone.
                    let _held = (place, turn);
                    work()
                })
                .await
                .ok()
            })
            .await
            .flatten()
            .ok_or(WorkRefused::Failed)
    }
}

/// The 503 of password work refused as [`WorkRefused::Busy`]: problem+json `overloaded` with
/// `Retry-After`.
pub(crate) fn busy(req: &HttpRequest) -> HttpResponse {
    let status = StatusCode::SERVICE_UNAVAILABLE;
    let body = crate::problem::problem_body(
        status,
        "overloaded",
        "Overloaded",
        &format!(
            "The console is checking as many passwords as it can right now; nothing was done. \
             Retry in {BUSY_RETRY_AFTER_SECS} s."
        ),
        &crate::middleware::request_id_of(req),
        crate::problem::NoExtra {},
    );
    crate::problem::problem_builder(status)
        .insert_header((header::RETRY_AFTER, BUSY_RETRY_AFTER_SECS.to_string()))
        .body(body)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Work that takes `hold` and records how many ran at once.
    fn slow(
        now: &Arc<AtomicUsize>,
        most: &Arc<AtomicUsize>,
        hold: Duration,
    ) -> impl FnOnce() -> bool + Send + 'static {
        let (now, most) = (Arc::clone(now), Arc::clone(most));
        move || {
            let running = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(running, Ordering::SeqCst);
            std::thread::sleep(hold);
            now.fetch_sub(1, Ordering::SeqCst);
            true
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flood_runs_a_bounded_number_and_refuses_the_rest_at_once() {
        let work = Arc::new(PasswordWork::with_bounds(
            Background::current(),
            2,
            3,
            Duration::from_secs(30),
        ));
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let tasks: Vec<_> = (0..40)
            .map(|_| {
                let work = Arc::clone(&work);
                let job = slow(&now, &most, Duration::from_millis(200));
                tokio::spawn(async move { work.run(job).await })
            })
            .collect();
        let mut ran = 0;
        let mut busy = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(true) => ran += 1,
                Err(WorkRefused::Busy) => busy += 1,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(ran, 5, "two running and three queued places");
        assert_eq!(busy, 35);
        assert_eq!(work.started(), 5, "nothing refused was started");
        assert!(most.load(Ordering::SeqCst) <= 2, "at most two at once");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wait_too_long_is_refused_and_a_client_that_leaves_starts_nothing() {
        let work = Arc::new(PasswordWork::with_bounds(
            Background::current(),
            1,
            4,
            Duration::from_millis(100),
        ));
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let first = {
            let work = Arc::clone(&work);
            let job = slow(&now, &most, Duration::from_millis(600));
            tokio::spawn(async move { work.run(job).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The turn is taken for 600 ms: a wait of 100 ms is refused.
        let waited = work.run(|| true).await;
        assert_eq!(waited, Err(WorkRefused::Busy));
        // A client that leaves while waiting (its request's future dropped) starts nothing.
        let left = tokio::time::timeout(Duration::from_millis(20), work.run(|| true)).await;
        assert!(left.is_err(), "it was still waiting");
        assert_eq!(first.await.unwrap(), Ok(true));
        assert_eq!(work.started(), 1, "only the first ran");
        assert_eq!(work.run(|| true).await, Ok(true), "the places came back");
    }
}
