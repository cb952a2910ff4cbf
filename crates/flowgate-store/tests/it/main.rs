//! Integration tests of the store: every case runs on a real PostgreSQL (a fresh database per
//! test, see `support`) and on a real SQLite file (a fresh temporary folder per test).
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// Defines each test twice, as `<name>::postgres` and `<name>::sqlite`, with `$db` bound to a
/// migrated [`support::TestDb`] of that backend. The body is written once.
macro_rules! backend_tests {
    ($(async fn $name:ident($db:ident) $body:block)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some($db) = crate::support::TestDb::postgres().await else { return };
                $body
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let $db = crate::support::TestDb::sqlite().await;
                $body
            }
        }
    )*};
}

mod catalog;
mod change;
mod events;
mod export;
mod history;
mod import;
mod keys;
mod migrations;
mod retention;
mod sticky;
mod support;
mod tls;
mod unavailable;
