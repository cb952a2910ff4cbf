//! Black-box tests of the public API and the admin listener: a real actix server on
//! 127.0.0.1, a real store (a SQLite file; a PostgreSQL database too for the cases whose
//! answer carries what the store loaded back, see `support::on_both_stores`), real HTTP requests.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use flowgate_contract_tests::fixtures::catalogs as fixtures;

mod support;

mod admin;
mod auth;
mod batch;
mod conventions;
mod events;
mod fuzz;
mod legacy;
mod ofrep;
mod ofrep_providers;
mod oidc;
mod openapi;
mod resolve;
mod store_notifications;
mod webhook_keys;
mod worker;
