//! Integration tests of the domain crate: one binary (link time matters on two cores).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use flowgate_contract_tests::fixtures::catalogs as fixtures;

mod bandits;
mod catalog;
mod catalog_changes;
mod catalog_file;
mod conformance;
mod corrections;
mod cuped;
mod diff;
mod explain;
mod formats;
mod memory;
mod properties;
mod resolve;
mod results;
mod sticky;
mod store_notifications;
mod webhook_keys;
