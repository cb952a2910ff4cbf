//! Integration tests of the store: every case runs on a real PostgreSQL (a fresh database per
//! test, see `support`) and on a real SQLite file (a fresh temporary folder per test).
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// Defines each test twice, as `<name>::postgres` and `<name>::sqlite`, with `$db` bound to a
/// migrated [`support::TestDb`] of that backend (`flowgate_testkit::per_backend!`).
macro_rules! backend_tests {
    ($($cases:tt)*) => {
        flowgate_testkit::per_backend! {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            [
                postgres => crate::support::TestDb::postgres().await,
                sqlite => Some(crate::support::TestDb::sqlite().await),
            ]
            $($cases)*
        }
    };
}

mod catalog;
mod change;
mod events;
mod export;
mod history;
mod import;
mod keys;
mod migrations;
mod results_limit;
mod retention;
mod rollout_states;
mod sticky;
mod support;
mod tls;
mod unavailable;
