//! Acknowledgements (D15): a request that waits until every one of its events is stored.
//!
//! A request's events may be split across batches that different writers store in any order,
//! so its [`Waiter`] counts the events still to store; the writer that stores the last of
//! them releases the request. Writers group whatever waiting requests are queued into one
//! write (group commit): no transaction per request. The request's side, its receipt, is the
//! sink's (`sink.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

/// One request waiting for its events to be stored.
#[derive(Debug)]
pub(crate) struct Waiter {
    /// Events of the request not stored yet.
    remaining: AtomicUsize,
    release: Mutex<Option<oneshot::Sender<()>>>,
}

impl Waiter {
    /// A waiter for `events` events and the receiver its request waits on.
    pub(crate) fn new(events: usize) -> (Arc<Self>, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let waiter = Arc::new(Self {
            remaining: AtomicUsize::new(events),
            release: Mutex::new(Some(tx)),
        });
        (waiter, rx)
    }

    /// `events` more of the request's events are stored; the call that stores the last one
    /// releases the request.
    pub(crate) fn stored(&self, events: usize) {
        if self.remaining.fetch_sub(events, Ordering::AcqRel) == events {
            let release = self
                .release
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(tx) = release {
                // The request may have stopped waiting (timed out, or its client left).
                let _ = tx.send(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_stored_part_releases_the_request() {
        let (waiter, mut rx) = Waiter::new(10);
        waiter.stored(4);
        assert!(rx.try_recv().is_err(), "6 events still to store");
        waiter.stored(6);
        assert_eq!(rx.try_recv(), Ok(()));
    }

    #[test]
    fn a_request_that_stopped_waiting_is_not_an_error() {
        let (waiter, rx) = Waiter::new(1);
        drop(rx);
        waiter.stored(1);
    }
}
