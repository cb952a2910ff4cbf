//! The sink's integration tests: one binary (STYLE: link time on two cores).
//!
//! - `sink`: behaviour against the in-memory store and a fault-injecting wrapper (batching,
//!   refusal, retries, drain, stats, the `resolve_no_flow` switch);
//! - `postgres`: against a real PostgreSQL through `flowgate_store::Store`, a database per
//!   test, including the loss test through a TCP proxy that is cut mid-load.
//!
//! Fault tests against the real binary with SIGTERM come with the binary (issue 6).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod postgres;
mod sink;
mod support;
