//! The sink's integration tests: one binary (STYLE: link time on two cores).
//!
//! - `sink`: behaviour against the in-memory store and a fault-injecting wrapper (batching,
//!   refusal, retries, dead letters, drain, stats, the `resolve_no_flow` switch);
//! - `ack`: acknowledgements (D15): receipts resolve once stored, group commit, timeouts;
//! - `postgres`: against a real PostgreSQL through `flowgate_store::Store`, a database per
//!   test, including the loss test through a TCP proxy that is cut mid-load.
//!
//! Fault tests against the real binary (SIGTERM, SIGKILL) are the binary's own.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod ack;
mod postgres;
mod sink;
mod support;
