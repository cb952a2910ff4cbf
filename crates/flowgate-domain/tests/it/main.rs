//! Integration tests of the domain crate: one binary (link time matters on two cores).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod catalog;
mod conformance;
mod diff;
mod explain;
mod fixtures;
mod memory;
mod properties;
mod resolve;
