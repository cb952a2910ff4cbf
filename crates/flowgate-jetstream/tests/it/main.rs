//! The bus against real `nats-server` processes (each test starts its own): the stream's
//! set-up and checks, publishing, ingestion with its acknowledgements, redeliveries and dead
//! letters. The store behind ingest is the in-memory one with faults injected; the database
//! adapters are tested on their own and end to end through the binary.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod bus;
mod format;
mod support;
