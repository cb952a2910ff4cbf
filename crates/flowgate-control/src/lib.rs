#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
//! Flowgate's control plane (D39): what operators do, over the domain's ports.
//!
//! The console and the admin API (`flowgate-http`) and the command line (the binary) call these
//! use cases; each takes the ports it needs (the database store, or the domain's in-memory one
//! in tests) and holds no state of its own.
//!
//! - [`import`]: import a catalog file, or see what it would change (D13, D19).
//! - [`changes`]: preview and apply a change to the catalog (D28), the write every schedule,
//!   review and rollout step goes through.

pub mod changes;
pub mod import;
