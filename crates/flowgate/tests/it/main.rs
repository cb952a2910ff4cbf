//! The binary end to end: what the README promises a newcomer, and the start-up rules.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use flowgate_contract_tests::fixtures::catalogs as fixtures;

mod abuse;
mod browser;
mod build_script;
mod cache;
mod catalog;
mod console;
mod console_comments;
mod console_roles;
mod console_rollouts;
mod console_schedule;
mod durability;
mod faults;
mod jetstream;
mod keys;
mod oidc;
mod operators;
mod people;
mod quickstart;
mod release;
mod reload;
mod results;
mod rollouts;
mod sign_in_security;
mod startup;
mod sticky;
mod support;
mod terminal;
