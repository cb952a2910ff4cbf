#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod bucketing;
pub mod catalog;
pub mod conditions;
#[cfg(feature = "server")]
pub mod delivery;
pub mod engine;
pub mod events;
pub mod explain;
pub mod fields;
pub mod identity;
pub mod ids;
pub mod keys;
#[cfg(any(test, feature = "test-util"))]
pub mod memory;
#[cfg(feature = "server")]
pub mod people;
pub mod placement;
#[cfg(feature = "server")]
pub mod ports;
pub mod resolve;
#[cfg(feature = "server")]
pub mod results;
#[cfg(feature = "server")]
pub mod rollouts;
pub mod secrets;
pub(crate) mod shown;
pub mod sticky;
#[cfg(feature = "server")]
pub mod store_notifications;
pub mod text;

pub use catalog::{Catalog, CatalogData, CatalogError};
pub use engine::{Engine, EngineError, Snapshot};
pub use identity::Platform;
pub use resolve::{Resolution, ResolveMode, ResolveReason, ResolveRequest};

/// The hash tables a resolve looks up in (apps, placements, long `$in` lists): built once per
/// catalog from the operator's data and only read per request, so they hash with foldhash
/// (randomly seeded per process) instead of SipHash, which cost about a third of each lookup.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The set form of [`FastMap`].
pub(crate) type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;
