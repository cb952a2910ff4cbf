//! The Redis adapter against real Redis servers: the port's contract suite, and what the
//! adapter adds (passwords kept out of errors, fast failure when Redis is unreachable, replicas
//! sharing documents, recovery after a restart).
//!
//! Tests use the Redis at `FLOWGATE_TEST_REDIS_URL` (default `redis://127.0.0.1:6379`, which
//! `make redis-up` starts), each under a key prefix of its own whose keys it deletes at the
//! end, even after a panic. A Redis that cannot be reached fails the tests: nothing is skipped.
//! The restart test starts its own `redis-server`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod adapter;
mod contract;
mod support;
