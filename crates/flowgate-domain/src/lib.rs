#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod bucketing;
pub mod catalog;
pub mod conditions;
pub mod events;
pub mod explain;
pub mod fields;
pub mod identity;
pub mod ids;
pub mod keys;
pub mod memory;
pub mod placement;
pub mod ports;
pub mod resolve;
pub mod results;
pub mod shown;
pub mod sticky;

pub use catalog::{Catalog, CatalogData, CatalogError};
pub use identity::Platform;
pub use resolve::{Resolution, ResolveMode, ResolveRequest};
