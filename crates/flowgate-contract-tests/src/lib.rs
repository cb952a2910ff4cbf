//! The port contract suite of flowgate: what every implementation of the domain's storage
//! ports ([`CatalogSource`], [`CatalogWriter`](flowgate_domain::ports::CatalogWriter), [`KeyStore`], [`EventStore`], [`DeadLetterStore`],
//! [`ResultsSource`], [`StickyStore`], [`PeopleStore`], [`AuditLog`], [`ChangeStore`],
//! [`RolloutStore`]) must do, written once and run against each implementation (the in-memory
//! reference, the store on SQLite, the store on PostgreSQL).
//!
//! The public functions of [`catalog_source`], [`key_store`], [`event_store`],
//! [`dead_letter_store`], [`results_source`], [`sticky_store`], [`people_store`], [`audit_log`],
//! [`change_store`] and [`rollout_store`] *are* the cases: each is an `async fn` generic over
//! the implementation that panics when the implementation breaks the contract. A runner (this
//! crate's `tests/it`) implements [`Harness`] for every adapter and calls every case once per
//! adapter. Cases that need catalog data (keys belong to workspaces, which a database
//! enforces) take the harness; the others take the port alone.
//!
//! Assertions compare whole values: a store returns exactly what was written, with timestamps
//! at microsecond precision (the fixtures use no finer ones).

use std::future::Future;

use flowgate_domain::catalog::CatalogData;
use flowgate_domain::ports::{
    AuditLog, CatalogSource, ChangeStore, DeadLetterStore, EventStore, KeyStore, PeopleStore,
    ResultsSource, RolloutStore, StickyStore, StoreError,
};

pub mod audit_log;
pub mod catalog_source;
pub mod catalog_writer;
pub mod change_store;
pub mod dead_letter_store;
pub mod event_store;
pub mod fixtures;
pub mod key_store;
pub mod people_store;
pub mod results_source;
pub mod rollout_store;
pub mod sticky_store;

/// One implementation of the storage ports under test, as the runner provides it.
pub trait Harness: Sized {
    /// The implementation of the ports.
    type Store: CatalogSource
        + KeyStore
        + EventStore
        + DeadLetterStore
        + ResultsSource
        + StickyStore
        + flowgate_domain::ports::NotificationStore
        + PeopleStore
        + AuditLog
        + ChangeStore
        + RolloutStore
        + flowgate_domain::ports::CatalogWriter
        + ?Sized;

    /// Creates a fresh, empty instance that shares nothing with any other. `None` means the
    /// backend is not available here and the case is skipped (the runner decides when that
    /// is allowed, e.g. never in CI).
    fn create() -> impl Future<Output = Option<Self>>;

    /// The implementation under test.
    fn store(&self) -> &Self::Store;

    /// Writes catalog data (workspaces and apps; `api_keys` is left empty by the cases, keys
    /// go through [`KeyStore`]) the way this implementation's catalog is maintained: the
    /// in-memory store's `set_catalog`, the database store's catalog import writer.
    fn write_catalog(&self, data: &CatalogData) -> impl Future<Output = Result<(), StoreError>>;
}
