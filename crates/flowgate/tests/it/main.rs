//! The binary end to end: what the README promises a newcomer, and the start-up rules.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod quickstart;
mod startup;
