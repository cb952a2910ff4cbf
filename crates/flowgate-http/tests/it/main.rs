//! Black-box tests of the public API and the admin listener: a real actix server on
//! 127.0.0.1, a real store (a SQLite file, and a PostgreSQL database), real HTTP requests.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../../../flowgate-domain/tests/it/fixtures.rs"]
mod fixtures;

mod support;

mod admin;
mod auth;
mod batch;
mod conventions;
mod events;
mod fuzz;
mod legacy;
mod openapi;
mod resolve;
mod worker;
