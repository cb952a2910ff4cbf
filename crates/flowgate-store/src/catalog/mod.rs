//! [`CatalogSource`] on [`Store`]: loading the catalog in one read transaction, the revision and
//! change detection (D12), and the catalog's writers: [`Store::replace_catalog`] and the
//! import's read-plan-write transaction (D13). By job: `rows.rs` (the tables' rows),
//! `read.rs` (reading them and assembling [`CatalogData`]), `write.rs` (the upsert),
//! `listen.rs` (PostgreSQL's notifications), `transaction.rs` (the writers' transactions).

mod listen;
mod read;
mod rows;
mod transaction;
mod write;

use std::time::Duration;

use diesel::dsl::{Find, Select};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use flowgate_domain::catalog::CatalogData;
use flowgate_domain::ports::{BoxFuture, CatalogSource, StoreError};
use tokio::time::Instant;

use crate::db::{Conn, Db};
use crate::error::corrupt;
use crate::schema::catalog_revision;
use crate::store::Store;
use read::{assemble, load_rows};

/// The PostgreSQL notification channel the revision triggers notify (migrations/postgres).
pub const CATALOG_CHANNEL: &str = "flowgate_catalog";

/// The query of the revision row.
pub(super) fn revision_query(
) -> Select<Find<catalog_revision::table, i32>, catalog_revision::revision> {
    catalog_revision::table
        .find(1)
        .select(catalog_revision::revision)
}

impl CatalogSource for Store {
    fn load_catalog(&self) -> BoxFuture<'_, Result<CatalogData, StoreError>> {
        Box::pin(async move {
            let rows = self
                .db()
                .transaction(async |conn| {
                    if let Conn::Postgres(pg) = conn {
                        // One snapshot for every table; read-only, so it never waits on
                        // writers. (SQLite in WAL mode reads one snapshot per transaction by
                        // itself.)
                        diesel::sql_query(
                            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY",
                        )
                        .execute(&mut **pg)
                        .await?;
                    }
                    Ok(load_rows(conn).await?)
                })
                .await?;
            assemble(rows)
        })
    }

    fn revision(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { decode_revision(self.db().row(revision_query()).await?) })
    }

    fn wait_for_change(
        &self,
        known: u64,
        max_wait: Duration,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let deadline = Instant::now() + max_wait;
            match self.db() {
                Db::Postgres(pg) => match pg.wait_for_change(known, deadline).await? {
                    Some(revision) => Ok(revision),
                    None => self.revision().await,
                },
                Db::Sqlite(sqlite) => {
                    // One indexed single-row read per poll.
                    loop {
                        let current = self.revision().await?;
                        let now = Instant::now();
                        if current != known || now >= deadline {
                            return Ok(current);
                        }
                        tokio::time::sleep_until((now + sqlite.poll_interval).min(deadline)).await;
                    }
                }
            }
        })
    }
}

pub(super) fn decode_revision(revision: i64) -> Result<u64, StoreError> {
    u64::try_from(revision).map_err(|_| corrupt(format!("negative catalog revision {revision}")))
}
