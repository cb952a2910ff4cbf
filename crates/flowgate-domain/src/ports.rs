//! Ports: what the domain needs from the outside world, as traits the adapters implement
//! (`flowgate-store`, `flowgate-analytics`, the binary's clock).
//!
//! Asynchronous methods return a boxed `Send` future ([`BoxFuture`]) rather than using
//! `async fn` in traits, so the traits stay object-safe (`Arc<dyn EventStore>`) and the domain
//! needs no runtime and no macro crate.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use time::OffsetDateTime;

use crate::catalog::CatalogData;
use crate::events::AnalyticsEvent;
use crate::ids::{KeyId, WorkspaceId};
use crate::keys::KeyRecord;

/// A boxed, `Send` future: the return type of asynchronous port methods.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A store failure, as the domain and adapters above the store need to see it. Details for the
/// log are in the message; none of it goes to clients (D9).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store cannot be reached or timed out: retry later (events are kept, D7, D12).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The operation conflicts with what is stored (e.g. a duplicate key digest).
    #[error("conflict: {0}")]
    Conflict(String),
    /// A referenced record does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// Stored data cannot be read back into the domain model.
    #[error("corrupt data: {0}")]
    Corrupt(String),
    /// Anything else.
    #[error("store error: {0}")]
    Other(String),
}

impl StoreError {
    /// True when retrying the same operation later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

/// Where catalog snapshots come from, and how changes are noticed (D12).
pub trait CatalogSource: Send + Sync {
    /// Reads the whole catalog with its revision, consistently (one transaction).
    fn load_catalog(&self) -> BoxFuture<'_, Result<CatalogData, StoreError>>;

    /// The store's current catalog revision; it changes whenever anything resolve,
    /// authentication or event validation reads changes (keys included). Cheap.
    fn revision(&self) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Resolves with the current revision once it differs from `known`, or after at most
    /// `max_wait`, whichever comes first. Implementations that cannot wait (no notifications,
    /// no timer) may resolve at once: callers compare revisions and pace their own polling.
    fn wait_for_change(
        &self,
        known: u64,
        max_wait: Duration,
    ) -> BoxFuture<'_, Result<u64, StoreError>>;
}

/// Key management for the command line (D1, D13). The request path never calls this: it reads
/// the key table of the catalog snapshot.
pub trait KeyStore: Send + Sync {
    /// Stores a new key record (digest and metadata only).
    fn insert_key(&self, record: KeyRecord) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Marks a key revoked at `at`; returns the updated record. Revoking twice keeps the first
    /// time. An unknown id is [`StoreError::NotFound`].
    fn revoke_key(
        &self,
        id: KeyId,
        at: OffsetDateTime,
    ) -> BoxFuture<'_, Result<KeyRecord, StoreError>>;

    /// Every key of a workspace, revoked ones included, oldest first.
    fn list_keys(
        &self,
        workspace: WorkspaceId,
    ) -> BoxFuture<'_, Result<Vec<KeyRecord>, StoreError>>;
}

/// What an append stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AppendOutcome {
    /// Rows written.
    pub inserted: usize,
    /// Events whose `event_id` was already stored (or repeated in the batch): not written
    /// again (D7 idempotency).
    pub duplicates: usize,
}

/// Durable storage of analytics events (the analytics sink writes through it).
pub trait EventStore: Send + Sync {
    /// Appends a batch atomically and idempotently on `event_id`: after success every event of
    /// the batch is stored exactly once, however often the same batch was appended before.
    fn append_events<'a>(
        &'a self,
        events: &'a [AnalyticsEvent],
    ) -> BoxFuture<'a, Result<AppendOutcome, StoreError>>;
}

/// The request path's hand-off to the analytics sink (D7): all of a request's events are taken,
/// or none.
pub trait EventSink: Send + Sync {
    /// Enqueues every event or refuses them all; never blocks.
    fn try_enqueue(&self, events: Vec<AnalyticsEvent>) -> Result<(), Overloaded>;

    /// Holds room for up to `max_events` events of one request before its body is read, so
    /// an overloaded sink refuses for the price of the bytes instead of parsing and validating
    /// events it would then refuse, and a request that arrives while the queue is full can
    /// wait (bounded by the sink's own setting) for the writers to make room instead of being
    /// refused at once. Refused with [`Overloaded`] when no room came in time.
    ///
    /// The default holds nothing and hands the events to [`EventSink::try_enqueue`].
    fn admit(
        &self,
        max_events: usize,
    ) -> BoxFuture<'_, Result<Box<dyn Admission + '_>, Overloaded>> {
        let _ = max_events;
        let direct: Box<dyn Admission + '_> = Box::new(Direct(self));
        Box::pin(std::future::ready(Ok(direct)))
    }
}

/// Room held in a sink for one request's events ([`EventSink::admit`]); dropping it unused
/// gives the room back.
pub trait Admission: Send {
    /// Enqueues the events, all or none. Within the admitted count this is never refused
    /// unless the sink began shutting down; beyond it the sink decides as
    /// [`EventSink::try_enqueue`] does.
    fn enqueue(self: Box<Self>, events: Vec<AnalyticsEvent>) -> Result<(), Overloaded>;
}

/// The default [`Admission`]: nothing held, the sink's `try_enqueue` decides.
struct Direct<'a, S: ?Sized>(&'a S);

impl<S: EventSink + ?Sized> Admission for Direct<'_, S> {
    fn enqueue(self: Box<Self>, events: Vec<AnalyticsEvent>) -> Result<(), Overloaded> {
        self.0.try_enqueue(events)
    }
}

/// The sink refused: the whole request gets 503 `overloaded` with `Retry-After` (D7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the event buffer is full; retry after {retry_after_secs} s")]
pub struct Overloaded {
    /// Suggested `Retry-After`, in seconds.
    pub retry_after_secs: u32,
}

/// The time source, so validation windows (D7) and server event times (D8) are testable.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> OffsetDateTime;
}

/// The operating system's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// A clock that only moves when told: for tests and replays.
#[derive(Debug)]
pub struct ManualClock(Mutex<OffsetDateTime>);

impl ManualClock {
    /// A clock standing at `at`.
    pub fn new(at: OffsetDateTime) -> Self {
        Self(Mutex::new(at))
    }

    /// Moves the clock to `at`.
    pub fn set(&self, at: OffsetDateTime) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = at;
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: time::Duration) {
        let mut now = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
