//! Ports: what the domain needs from the outside world, as traits the adapters implement
//! (`flowgate-store`, `flowgate-analytics`, the binary's clock).
//!
//! Asynchronous methods return a boxed `Send` future ([`BoxFuture`]) rather than using
//! `async fn` in traits, so the traits stay object-safe (`Arc<dyn EventStore>`) and the domain
//! needs no runtime and no macro crate.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
#[cfg(any(test, feature = "test-util"))]
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::Duration;

use time::OffsetDateTime;

use crate::catalog::CatalogData;
use crate::events::AnalyticsEvent;
use crate::ids::{AppId, DeadLetterId, EventId, ExperimentId, KeyId, WorkspaceId};
use crate::keys::KeyRecord;
use crate::results::{ResultsData, ResultsQuery};
use crate::sticky::{StickyDocs, StickyId, StickyWrite};

/// A boxed, `Send` future: the return type of asynchronous port methods.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A store failure, as the domain and adapters above the store need to see it. Each variant
/// says what kind of failure it is; `detail` is for the log, and none of it goes to clients
/// (D9).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store cannot be reached, did not answer in time or turned the operation away for
    /// now: retry later (events are kept, D7, D12).
    #[error("store unavailable: {detail}")]
    Unavailable {
        /// Which kind of outage.
        reason: Outage,
        /// What happened.
        detail: String,
    },
    /// The operation conflicts with what is stored (a duplicate key digest, a violated check).
    #[error("conflict: {detail}")]
    Conflict {
        /// Which record or constraint, as the store reports it.
        detail: String,
    },
    /// A record does not exist: the one the operation names, or one that a written row refers
    /// to.
    #[error("{entity} not found: {which}")]
    NotFound {
        /// The kind of record (`API key`, `dead letter`, `workspace`, `referenced record`).
        entity: &'static str,
        /// Which one: its id, or for a reference the store's description of it.
        which: String,
    },
    /// Stored data cannot be read back into the domain model.
    #[error("corrupt data: {detail}")]
    Corrupt {
        /// The value and why it does not decode.
        detail: String,
    },
    /// The store's settings cannot be used (a malformed URL, an unknown `sslmode`, an unreadable
    /// `sslrootcert`): nothing was tried, and retrying cannot help.
    #[error("invalid store configuration: {detail}")]
    Config {
        /// The setting and what is wrong with it.
        detail: String,
    },
    /// A value the store cannot hold (out of range, too large, not encodable), refused before
    /// anything was written.
    #[error("cannot store: {detail}")]
    Unstorable {
        /// The value and why.
        detail: String,
    },
    /// Anything else, e.g. a statement the database refused for a reason of its own, or a
    /// failed migration.
    #[error("store error: {detail}")]
    Other {
        /// What happened.
        detail: String,
    },
}

/// Why a store is [unavailable](StoreError::Unavailable). Every outage is transient.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outage {
    /// No connection could be made, or the one in use was lost.
    Connection,
    /// No answer, or no free connection, in time.
    Timeout,
    /// The store turned the operation away for now: a lock held too long, a serialization
    /// failure or deadlock, resources running out, an operator's shutdown or cancel.
    Busy,
}

impl StoreError {
    /// True when retrying the same operation later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
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

/// What a catalog write records beside the catalog, in the write's own transaction: the import
/// history's row (D19), the audit entry (D28, its revisions before and after filled in by the
/// writer), the reviewed change it applies (D28, decided in the same transaction) and the
/// rollout it starts or steps (D29).
#[derive(Clone, Debug)]
pub struct CatalogRecord {
    /// When the write was made.
    pub at: OffsetDateTime,
    /// SHA-256 (lowercase hex) of what was written: a file's bytes, a change's JSON.
    pub sha256: String,
    /// What the history names: a file's path, `console: <description> (by <actor>)`.
    pub file: String,
    /// What the catalog held after the write.
    pub summary: crate::catalog::ImportSummary,
    /// The audit entry of the write.
    pub audit: Option<crate::people::NewAuditEntry>,
    /// The reviewed change this write applies: one decided meanwhile undoes the whole write
    /// ([`CatalogWriteError::Decided`]).
    pub decision: Option<(crate::ids::ChangeId, crate::people::ChangeDecision)>,
    /// The rollout this write starts or steps: a step recorded meanwhile, or a rollout no
    /// longer in the state the write expects, undoes the whole write
    /// ([`CatalogWriteError::RolloutMoved`]).
    pub rollout: Option<RolloutWrite>,
}

/// One catalog write as the history keeps it (D19): an import, or a console, CLI, schedule or
/// rollout change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportRecord {
    /// The catalog revision after the write.
    pub revision: u64,
    /// When it was made (UTC; microseconds, as stored).
    pub imported_at: OffsetDateTime,
    /// SHA-256 of what was written, lowercase hex (64 characters).
    pub sha256: String,
    /// What the history names: a file's path, `console: <description> (by <actor>)`.
    pub file: String,
    /// What the catalog held after the write.
    pub summary: crate::catalog::ImportSummary,
}

/// What a catalog write records of a rollout (D29).
#[derive(Clone, Debug)]
pub enum RolloutWrite {
    /// A new rollout, its first step applied by this write (each step's revision is set to
    /// the write's).
    Start(Box<crate::rollouts::Rollout>),
    /// A step of a rollout applied by this write (its revision set to the write's), and the
    /// rollout's change of state, if any.
    Step {
        /// The rollout.
        id: crate::ids::RolloutId,
        /// The step.
        step: crate::rollouts::AppliedStep,
        /// From, to, why.
        change: Option<StateChange>,
    },
    /// A rollout's change of state made by this write (a rollback: from, to, why).
    State {
        /// The rollout.
        id: crate::ids::RolloutId,
        /// From, to, why.
        change: StateChange,
    },
}

/// Why a catalog write wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum CatalogWriteError {
    /// The stored revision is no longer the one the write was planned on.
    #[error("the catalog is at revision {current}, not {base}")]
    Stale {
        /// The revision the write was planned on.
        base: u64,
        /// The stored revision.
        current: u64,
    },
    /// The reviewed change the write applies was decided meanwhile.
    #[error("change {0} was decided meanwhile")]
    Decided(crate::ids::ChangeId),
    /// The rollout's step was recorded meanwhile, or the rollout left the state the write
    /// expected: the detail says which.
    #[error("{0}")]
    RolloutMoved(String),
    /// The store failed (dangling references and duplicates are [`StoreError::NotFound`] and
    /// [`StoreError::Conflict`]).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CatalogWriteError {
    /// Step `index` (from 0) of rollout `id` was recorded meanwhile, or the rollout left the
    /// state the step moves it from: what every writer says.
    pub fn step_taken(id: crate::ids::RolloutId, index: u32) -> Self {
        Self::RolloutMoved(format!(
            "step {} of rollout {id} was applied meanwhile, or the rollout left the state it \
             was in",
            index + 1
        ))
    }

    /// Rollout `id` is no longer in state `from`, which the write moves it from.
    pub fn state_moved(id: crate::ids::RolloutId, from: crate::rollouts::RolloutState) -> Self {
        Self::RolloutMoved(format!(
            "the state of rollout {id} changed meanwhile (it is no longer {from})"
        ))
    }
}

/// The catalog's one write path (D13, D28, D29): imports, console and CLI changes, schedules'
/// and rollouts' steps all write through it.
pub trait CatalogWriter: CatalogSource {
    /// Writes `data` (the catalog import's upsert: keyed by ids, placements by `(app, key)`,
    /// each placement's rules and each given experiment's variants replaced, nothing else
    /// deleted, revoked keys kept revoked) if the stored revision is still `base`, with
    /// `record`, all in one transaction that holds the catalog's write lock. Returns the
    /// revision the write left. Nothing is written on any error.
    fn write_catalog(
        &self,
        base: u64,
        data: CatalogData,
        record: CatalogRecord,
    ) -> BoxFuture<'_, Result<u64, CatalogWriteError>>;

    /// The catalog writes, newest first, at most `limit` of them (D19): each write that landed
    /// has exactly one, with the revision it left.
    fn catalog_history(&self, limit: usize)
        -> BoxFuture<'_, Result<Vec<ImportRecord>, StoreError>>;
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

/// Stored sticky assignments (D23): GrowthBook's assignment documents, kept per app and
/// identifier. Resolve reads them only for placements with a sticky experiment, with a
/// deadline of its own, and writes new or changed documents behind the response, batched.
pub trait StickyStore: Send + Sync {
    /// The stored documents of `ids` in `app`, one per identifier; an
    /// identifier with nothing stored is simply absent.
    fn read_sticky<'a>(
        &'a self,
        app: AppId,
        ids: &'a [StickyId],
    ) -> BoxFuture<'a, Result<StickyDocs, StoreError>>;

    /// The stored documents of several apps' identifiers: one answer per read, in order, each
    /// holding only documents of its own app (as [`read_sticky`](Self::read_sticky) would
    /// answer it). For a caller that combines the reads of many requests; by default one
    /// `read_sticky` per read in turn, and adapters that can answer them in one round trip
    /// do. A failure fails the whole call.
    fn read_sticky_many<'a>(
        &'a self,
        reads: &'a [(AppId, &'a [StickyId])],
    ) -> BoxFuture<'a, Result<Vec<StickyDocs>, StoreError>> {
        Box::pin(async move {
            let mut answers = Vec::with_capacity(reads.len());
            for (app, ids) in reads {
                answers.push(self.read_sticky(*app, ids).await?);
            }
            Ok(answers)
        })
    }

    /// Merges each write's assignments into its stored document, in order (a later write of
    /// the same assignment key wins), creating documents as needed. All or nothing is not
    /// required: a failed batch may have stored some of its writes, and writing again is
    /// harmless.
    fn write_sticky<'a>(
        &'a self,
        writes: &'a [StickyWrite],
    ) -> BoxFuture<'a, Result<(), StoreError>>;
}

/// Where experiment results come from (D22): the stored events of one experiment aggregated
/// into per-variant counts, by the rules of [`crate::results`]. Read-only; adapters run it
/// apart from the request path (their own pool, a statement timeout, possibly a replica).
pub trait ResultsSource: Send + Sync {
    /// The counts of `query`'s experiment.
    fn experiment_results<'a>(
        &'a self,
        query: &'a ResultsQuery,
    ) -> BoxFuture<'a, Result<ResultsData, StoreError>>;

    /// Per experiment of the query's app, the users a report without a window counts as
    /// exposed (`exposed_users`: exposures to its known variants up to `to`, users of two
    /// variants left out; [`crate::results::exposure_counts`]): the list of experiments' figure.
    fn exposure_counts<'a>(
        &'a self,
        query: &'a crate::results::ExposureCountQuery,
    ) -> BoxFuture<'a, Result<BTreeMap<ExperimentId, u64>, StoreError>>;
}

/// Where store notifications are kept (D30): each once per app, source and notification id.
pub trait NotificationStore: Send + Sync {
    /// Stores `notification` unless one of its app, source and id is stored already: `true`
    /// when it was new, `false` for a replay (nothing changed). Only once this answers may the
    /// sender be told it was received (D15).
    fn record_notification<'a>(
        &'a self,
        notification: &'a crate::store_notifications::StoreNotification,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
}

/// An event, or a message of the event bus, that the store refused for good (D17), kept aside
/// with the error so that nothing is dropped silently and it can be tried again (replayed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetter {
    /// Its own id: a UUIDv7, so letters list in the order they came.
    pub id: DeadLetterId,
    /// The refused event's id; `None` for a bus message that could not be decoded.
    pub event_id: Option<EventId>,
    /// The refused event's app; `None` for a bus message that could not be decoded. Event ids
    /// are unique per app (D25), so a letter is one per app and event id.
    pub app_id: Option<AppId>,
    /// How `payload` is encoded: [`EVENT_JSON_FORMAT`](crate::delivery::EVENT_JSON_FORMAT) for
    /// one event, or the format a bus message named.
    pub format: String,
    /// The event or the message, as received.
    pub payload: Vec<u8>,
    /// Why it was refused, as the store or the decoder said it.
    pub error: String,
    /// When it was refused first.
    pub first_attempt_at: OffsetDateTime,
    /// When it was refused last (by a write or a replay).
    pub last_attempt_at: OffsetDateTime,
    /// How often it was refused.
    pub attempts: u32,
}

/// Where dead letters are kept (D17): beside the events, never subject to retention.
pub trait DeadLetterStore: Send + Sync {
    /// Adds letters. A letter for an app and `event_id` that already have one updates that one
    /// instead (attempts added, last attempt and error replaced): an event refused again, say
    /// after an SDK's retry, stays one letter. The same `event_id` of another app is another
    /// letter (D25).
    fn add_dead_letters<'a>(
        &'a self,
        letters: &'a [DeadLetter],
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Up to `limit` letters in the order they came (by id), after `after` when given: a page.
    fn list_dead_letters(
        &self,
        after: Option<DeadLetterId>,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<DeadLetter>, StoreError>>;

    /// Records one more failed attempt at a letter (a replay refused again). An unknown id is
    /// [`StoreError::NotFound`].
    fn record_dead_letter_attempt<'a>(
        &'a self,
        id: DeadLetterId,
        error: &'a str,
        at: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Removes a letter (once its events are stored); false when there was none.
    fn remove_dead_letter(&self, id: DeadLetterId) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// How many letters there are.
    fn count_dead_letters(&self) -> BoxFuture<'_, Result<u64, StoreError>>;
}

/// The request path's hand-off to the analytics sink (D7): all of a request's events are taken,
/// or none.
pub trait EventSink: Send + Sync {
    /// Enqueues every event or refuses them all; never blocks and never waits for the events
    /// to be stored (for the server's own events, D8, which no request waits for).
    fn try_enqueue(&self, events: Vec<AnalyticsEvent>) -> Result<(), Overloaded>;

    /// Reserves sink capacity for up to `max_events` events of one request before its body is
    /// read, so an overloaded sink refuses for the price of the bytes instead of parsing and
    /// validating events it would then refuse, and a request that arrives while the queue is
    /// full can wait (bounded by the sink's own setting) for the writers to free capacity
    /// instead of being refused at once. Refused with [`Overloaded`] when no capacity came free
    /// in time.
    ///
    /// The default holds nothing, hands the events to [`EventSink::try_enqueue`] and gives a
    /// [`Receipt::ready`]: a sink that can tell when events are durable overrides it (D15).
    fn admit(
        &self,
        max_events: usize,
    ) -> BoxFuture<'_, Result<Box<dyn Admission + '_>, Overloaded>> {
        let _ = max_events;
        let direct: Box<dyn Admission + '_> = Box::new(Direct(self));
        Box::pin(std::future::ready(Ok(direct)))
    }
}

/// A capacity reservation in a sink for one request's events ([`EventSink::admit`]); dropping
/// it unused gives the capacity back.
pub trait Admission: Send {
    /// Enqueues the events, all or none, and returns the [`Receipt`] the request waits on
    /// before it answers 202 (D15). Within the admitted count this is never refused unless
    /// the sink began shutting down; beyond it the sink decides as [`EventSink::try_enqueue`]
    /// does.
    fn enqueue(self: Box<Self>, events: Vec<AnalyticsEvent>) -> Result<Receipt, Overloaded>;
}

/// The default [`Admission`]: nothing held, the sink's `try_enqueue` decides.
struct Direct<'a, S: ?Sized>(&'a S);

impl<S: EventSink + ?Sized> Admission for Direct<'_, S> {
    fn enqueue(self: Box<Self>, events: Vec<AnalyticsEvent>) -> Result<Receipt, Overloaded> {
        self.0.try_enqueue(events).map(|()| Receipt::ready())
    }
}

/// Resolves once the events of one request are durable (D15: committed in the store, or
/// acknowledged by the event bus), or with [`Overloaded`] when they are not within the sink's
/// acknowledgement timeout. The events stay queued either way: a request answered 503 after a
/// timeout is sent again by its SDK, and the store counts the repeat once (D7 idempotency).
pub struct Receipt(BoxFuture<'static, Result<(), Overloaded>>);

impl Receipt {
    /// A receipt that resolves with `wait`.
    pub fn new(wait: impl Future<Output = Result<(), Overloaded>> + Send + 'static) -> Self {
        Self(Box::pin(wait))
    }

    /// A receipt that is already settled: the events are durable, or the sink promises no more
    /// than having queued them (`events.ack = "buffered"`).
    pub fn ready() -> Self {
        Self::new(std::future::ready(Ok(())))
    }
}

impl Future for Receipt {
    type Output = Result<(), Overloaded>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

impl fmt::Debug for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Receipt")
    }
}

/// The sink refused, or did not store the events in time: the whole request gets 503
/// `overloaded` with `Retry-After` (D7, D15).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the events were not accepted or not stored in time; retry after {retry_after_secs} s")]
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

/// A clock that only moves when told: for tests and replays (feature `test-util`).
#[cfg(any(test, feature = "test-util"))]
#[derive(Debug)]
pub struct ManualClock(Mutex<OffsetDateTime>);

#[cfg(any(test, feature = "test-util"))]
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

#[cfg(any(test, feature = "test-util"))]
impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// People of the console, their one-time sign-in links and sessions, and the key the console
/// signs its forms with (D28). Every replica shares them, so any replica serves any session.
///
/// Email addresses are compared in the form [`normalize_email`](crate::people::normalize_email)
/// gives; times given as `now` decide what has expired (a link or session expires at its
/// `expires_at`: from then on it is gone).
pub trait PeopleStore: Send + Sync {
    /// Adds a person, its email normalised. An email another person has is
    /// [`StoreError::Conflict`], as is a taken id; an email that does not normalise is
    /// [`StoreError::Unstorable`]. Nothing is written then.
    fn add_person(&self, person: crate::people::Person) -> BoxFuture<'_, Result<(), StoreError>>;

    /// The person with this id, if any.
    fn person(
        &self,
        id: crate::ids::PersonId,
    ) -> BoxFuture<'_, Result<Option<crate::people::Person>, StoreError>>;

    /// The person with this email (normalised first: case and surrounding whitespace do not
    /// matter), if any; an email that does not normalise finds nobody.
    fn person_by_email<'a>(
        &'a self,
        email: &'a str,
    ) -> BoxFuture<'a, Result<Option<crate::people::Person>, StoreError>>;

    /// Every person, by email.
    fn list_people(&self) -> BoxFuture<'_, Result<Vec<crate::people::Person>, StoreError>>;

    /// Sets the fields `update` gives and `updated_at` to `at`; returns the person as updated,
    /// or `None` (nothing written) when there is no such person. Disabling a person, or
    /// changing its role, also deletes all its sessions in the same transaction: a session
    /// acts with the role it began with, so it must not outlive a change of it.
    fn update_person(
        &self,
        id: crate::ids::PersonId,
        update: crate::people::PersonUpdate,
        at: OffsetDateTime,
    ) -> BoxFuture<'_, Result<Option<crate::people::Person>, StoreError>>;

    /// Stores a sign-in link. A taken `token_hash` is [`StoreError::Conflict`]; an unknown
    /// person is [`StoreError::NotFound`].
    fn create_sign_in_link(
        &self,
        link: crate::people::SignInLink,
    ) -> BoxFuture<'_, Result<(), StoreError>>;

    /// The person of the link with this hash when it has not expired at `now`, else `None`;
    /// the link is not taken (the console checks a link before it hashes a password for it).
    fn sign_in_link<'a>(
        &'a self,
        token_hash: &'a str,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<crate::ids::PersonId>, StoreError>>;

    /// Takes the link with this hash: its person when it has not expired at `now`, else
    /// `None`. Atomic: a link is deleted when taken (expired or not), so of any number of
    /// takes, however concurrent, at most one gets its person.
    fn take_sign_in_link<'a>(
        &'a self,
        token_hash: &'a str,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<crate::ids::PersonId>, StoreError>>;

    /// Stores a session. A taken `id_hash` is [`StoreError::Conflict`]; an unknown person is
    /// [`StoreError::NotFound`]; a disabled person is [`StoreError::Conflict`] (checked in the
    /// same transaction as the write, so a sign-in that raced a disable stores nothing).
    fn create_session(
        &self,
        session: crate::people::SessionRecord,
    ) -> BoxFuture<'_, Result<(), StoreError>>;

    /// The session with this id hash, if it has not expired at `now` and its person (if any)
    /// still exists and is not disabled; its `role` is the person's role now, not the one the
    /// session was opened with (a sign-in that raced a demotion or a disable gains nothing).
    fn session<'a>(
        &'a self,
        id_hash: &'a str,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<crate::people::SessionRecord>, StoreError>>;

    /// The sessions of a person that have not expired at `now`, newest first (by `created_at`,
    /// then `id_hash`), as [`PeopleStore::session`] reads each: none of a disabled person, and
    /// with the person's role now.
    fn sessions_of(
        &self,
        person: crate::ids::PersonId,
        now: OffsetDateTime,
    ) -> BoxFuture<'_, Result<Vec<crate::people::SessionRecord>, StoreError>>;

    /// Every session that has not expired at `now` (the admin token's too), newest first, as
    /// [`PeopleStore::session`] reads each.
    fn all_sessions(
        &self,
        now: OffsetDateTime,
    ) -> BoxFuture<'_, Result<Vec<crate::people::SessionRecord>, StoreError>>;

    /// Deletes a session (signs it out); false when there was none.
    fn delete_session<'a>(&'a self, id_hash: &'a str) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Deletes every session of a person; returns how many there were.
    fn delete_sessions_of(
        &self,
        person: crate::ids::PersonId,
    ) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Deletes the sessions expired at `now`, and the sign-in links too; returns how many
    /// sessions were deleted.
    fn delete_expired_sessions(
        &self,
        now: OffsetDateTime,
    ) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// The console's signing key for its sign-in forms: `candidate` stored when no key is
    /// stored yet, and the stored one returned. Every caller, on every replica and however
    /// concurrent, gets the first candidate stored.
    fn console_secret(&self, candidate: [u8; 32]) -> BoxFuture<'_, Result<[u8; 32], StoreError>>;
}

/// The audit log (D28): who did what, when. Nothing deletes entries but retention.
pub trait AuditLog: Send + Sync {
    /// Appends an entry in this release's format; returns it as stored, with its id (greater
    /// than every id before it).
    fn append_audit(
        &self,
        entry: crate::people::NewAuditEntry,
    ) -> BoxFuture<'_, Result<crate::people::AuditEntry, StoreError>>;

    /// The entries the query selects, newest first (by id, descending), at most its limit.
    fn list_audit<'a>(
        &'a self,
        query: &'a crate::people::AuditQuery,
    ) -> BoxFuture<'a, Result<Vec<crate::people::AuditEntry>, StoreError>>;

    /// How many entries of `action` with this exact `target` are at or after `since` (e.g.
    /// failed sign-ins of one account, to limit them).
    fn count_audit<'a>(
        &'a self,
        action: crate::people::AuditAction,
        target: &'a str,
        since: OffsetDateTime,
    ) -> BoxFuture<'a, Result<u64, StoreError>>;

    /// Deletes the entries before `cutoff` (retention, `audit.retention_days`); returns how
    /// many.
    fn delete_audit_before(&self, cutoff: OffsetDateTime)
        -> BoxFuture<'_, Result<u64, StoreError>>;
}

/// Proposed catalog changes (D28), kept until decided and after.
pub trait ChangeStore: Send + Sync {
    /// Stores a change. A taken id is [`StoreError::Conflict`].
    fn insert_change(
        &self,
        change: crate::people::ChangeRecord,
    ) -> BoxFuture<'_, Result<(), StoreError>>;

    /// The change with this id, if any.
    fn change(
        &self,
        id: crate::ids::ChangeId,
    ) -> BoxFuture<'_, Result<Option<crate::people::ChangeRecord>, StoreError>>;

    /// Up to `limit` changes, of `state` when given, newest first (by `created_at`, then id).
    fn list_changes(
        &self,
        state: Option<crate::people::ChangeState>,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<crate::people::ChangeRecord>, StoreError>>;

    /// Up to `limit` pending changes whose `apply_at` is at or before `now`, the earliest first
    /// (by `apply_at`, then id): what the scheduler applies (D29).
    fn due_changes(
        &self,
        now: OffsetDateTime,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<crate::people::ChangeRecord>, StoreError>>;

    /// Records the decision on a pending change, compare-and-set: `true` when the change was
    /// pending and now stands as decided; `false` when there is no such change or it was
    /// decided already, and then nothing is written. A decision to `Pending` is
    /// [`StoreError::Unstorable`].
    fn decide_change(
        &self,
        id: crate::ids::ChangeId,
        decision: crate::people::ChangeDecision,
    ) -> BoxFuture<'_, Result<bool, StoreError>>;
}

/// Staged rollouts (D29) and the scheduler's lease. A step is applied with the catalog change
/// it makes, in the store's catalog transaction; [`RolloutStore::apply_step`] is the same
/// record without a catalog write, and both are keyed by `(rollout, step)`: a step is recorded
/// at most once.
pub trait RolloutStore: Send + Sync {
    /// Stores a new rollout (its applied steps too). A taken id is [`StoreError::Conflict`].
    fn insert_rollout(
        &self,
        rollout: crate::rollouts::Rollout,
    ) -> BoxFuture<'_, Result<(), StoreError>>;

    /// The rollout with this id, with its applied steps in order, if any.
    fn rollout(
        &self,
        id: crate::ids::RolloutId,
    ) -> BoxFuture<'_, Result<Option<crate::rollouts::Rollout>, StoreError>>;

    /// Every rollout, of `state` when given, newest first (by `created_at`, then id).
    fn list_rollouts(
        &self,
        state: Option<crate::rollouts::RolloutState>,
    ) -> BoxFuture<'_, Result<Vec<crate::rollouts::Rollout>, StoreError>>;

    /// Records `step` of the rollout and, when given, moves it from state `.0` to `.1` with
    /// reason `.2`, at `step.applied_at`: `true` when both were written; `false` (nothing
    /// written) when the step is recorded already, the rollout is not in state `.0`, or there
    /// is no such rollout.
    fn apply_step(
        &self,
        id: crate::ids::RolloutId,
        step: crate::rollouts::AppliedStep,
        state: Option<StateChange>,
    ) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// Moves the rollout from one state to another (with the reason) at `at`, compare-and-set:
    /// `true` when it was in `change.0`; `false` (nothing written) otherwise.
    fn set_rollout_state(
        &self,
        id: crate::ids::RolloutId,
        change: StateChange,
        at: OffsetDateTime,
    ) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// Takes the lease `name` for `holder` until `now + ttl`, or renews it: `true` when
    /// `holder` holds it afterwards (it was free, expired at `now`, or `holder`'s); `false`
    /// when another holder's lease runs past `now`.
    fn take_lease<'a>(
        &'a self,
        name: &'a str,
        holder: &'a str,
        now: OffsetDateTime,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Gives the lease `name` up when `holder` holds it (so another replica need not wait
    /// for it to expire).
    fn release_lease<'a>(
        &'a self,
        name: &'a str,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
}

/// A rollout's change of state: from, to, and why (in words).
pub type StateChange = (
    crate::rollouts::RolloutState,
    crate::rollouts::RolloutState,
    Option<String>,
);
