//! The events table over time (D21): partitions ahead of the events, and retention.
//!
//! On PostgreSQL `analytics_events` is partitioned by UTC day of `occurred_at` (the migration
//! `2026-11-25-000000_events_partitioned` has the layout and the two SQL functions used here).
//! [`Store::maintain_events`] creates the day partitions of the accepted window and a few days
//! beyond it, and drops those wholly older than the retention; every process connected to the
//! store calls it now and then, and the functions serialise the callers with an advisory lock.
//! An event whose partition is missing all the same (a window larger than the maintenance
//! covered, a dead letter replayed after its day was dropped) makes the write create it and
//! try again: an event never fails for a missing partition.
//!
//! On SQLite the table is one table; retention deletes old rows in batches of
//! [`SQLITE_DELETE_BATCH`], each its own short transaction, so writers wait for one batch at
//! most.

use std::time::Duration;

use diesel::sql_types::{BigInt, Binary, Integer, Text};
use diesel::QueryableByName;
use diesel_async::methods::LoadQuery;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use flowgate_domain::ports::StoreError;
use time::{Date, OffsetDateTime};

use crate::db::{Db, Postgres, Sqlite};
use crate::error::{pool_error, query_error, TransactionError};
use crate::store::Store;
use crate::types::{sql, DbTimestamp};

/// Rows deleted per SQLite statement and transaction.
pub const SQLITE_DELETE_BATCH: i64 = 5_000;

/// Days of partitions created beyond the accepted window's future edge, so that a day's
/// partition exists well before its first event even when maintenance stalls for a while.
pub const PARTITION_DAYS_AHEAD: i64 = 3;

/// Longest wait for the table locks partition changes take; past it the round gives up and
/// the next one tries again (writers are never queued behind a long wait).
const LOCK_TIMEOUT: &str = "SET LOCAL lock_timeout = '5s'";

/// What maintenance is asked to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRetention {
    /// The oldest event timestamp accepted (`events.max_past_secs`).
    pub max_past: Duration,
    /// The newest event timestamp accepted (`events.max_future_secs`).
    pub max_future: Duration,
    /// Events older than this many days are dropped; 0 keeps everything
    /// (`events.retention_days`).
    pub retention_days: u32,
}

/// What one maintenance round did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Maintenance {
    /// Day partitions created (PostgreSQL).
    pub partitions_created: u32,
    /// Partitions dropped by retention (PostgreSQL).
    pub partitions_dropped: u32,
    /// Rows deleted by retention (SQLite).
    pub rows_deleted: u64,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = Integer)]
    n: i32,
}

/// The UTC day of `at`.
fn utc_day(at: OffsetDateTime) -> Date {
    at.to_offset(time::UtcOffset::UTC).date()
}

fn days(duration: Duration) -> time::Duration {
    time::Duration::try_from(duration).unwrap_or(time::Duration::MAX)
}

impl Store {
    /// One maintenance round at `now`: the partitions of the accepted window exist (from the
    /// day of `now - max_past` to `PARTITION_DAYS_AHEAD` days past `now + max_future`), and
    /// with a retention, the events older than `retention_days` are gone (whole partitions
    /// on PostgreSQL, rows in batches on SQLite).
    pub async fn maintain_events(
        &self,
        now: OffsetDateTime,
        policy: EventRetention,
    ) -> Result<Maintenance, StoreError> {
        let mut done = Maintenance::default();
        let cutoff = (policy.retention_days > 0)
            .then(|| now.saturating_sub(time::Duration::days(i64::from(policy.retention_days))));
        if let Db::Postgres(pg) = self.db() {
            // Never a partition that retention would drop at once.
            let first = utc_day(now.saturating_sub(days(policy.max_past)))
                .max(cutoff.map_or(Date::MIN, utc_day));
            let last = utc_day(now.saturating_add(days(policy.max_future)))
                .saturating_add(time::Duration::days(PARTITION_DAYS_AHEAD));
            done.partitions_created = pg.ensure_event_partitions(first, last).await?;
        }
        if let Some(cutoff) = cutoff {
            let (partitions, rows) = self.drop_events_before(cutoff).await?;
            done.partitions_dropped = partitions;
            done.rows_deleted = rows;
        }
        Ok(done)
    }

    /// Creates the missing day partitions from `first` to `last` (UTC days, inclusive) on
    /// PostgreSQL; how many it created. Nothing to do on SQLite.
    pub async fn ensure_event_partitions(
        &self,
        first: Date,
        last: Date,
    ) -> Result<u32, StoreError> {
        match self.db() {
            Db::Postgres(pg) => pg.ensure_event_partitions(first, last).await,
            Db::Sqlite(_) => Ok(0),
        }
    }

    /// Drops the events wholly older than `cutoff`: the partitions whose every instant is
    /// before it (PostgreSQL: events of the cutoff's own day stay until their whole day
    /// passes), or the rows, in batches (SQLite). Returns (partitions dropped, rows deleted).
    pub async fn drop_events_before(
        &self,
        cutoff: OffsetDateTime,
    ) -> Result<(u32, u64), StoreError> {
        match self.db() {
            Db::Postgres(pg) => {
                let query = diesel::sql_query("SELECT flowgate_drop_event_partitions($1) AS n")
                    .bind::<sql::Instant, _>(DbTimestamp(cutoff));
                Ok((pg.change_partitions(query).await?, 0))
            }
            Db::Sqlite(sqlite) => Ok((0, sqlite.delete_events_before(cutoff).await?)),
        }
    }
}

impl Postgres {
    /// [`Store::ensure_event_partitions`] on PostgreSQL.
    pub(crate) async fn ensure_event_partitions(
        &self,
        first: Date,
        last: Date,
    ) -> Result<u32, StoreError> {
        let query =
            diesel::sql_query("SELECT flowgate_ensure_event_partitions($1::date, $2::date) AS n")
                .bind::<Text, _>(first.to_string())
                .bind::<Text, _>(last.to_string());
        self.change_partitions(query).await
    }

    /// Runs `call`, one of the partition functions (`SELECT flowgate_..._event_partitions(...)
    /// AS n`), in a transaction with [`LOCK_TIMEOUT`]; how many partitions it created or
    /// dropped.
    async fn change_partitions<Q>(&self, call: Q) -> Result<u32, StoreError>
    where
        Q: for<'q> LoadQuery<'q, AsyncPgConnection, Count> + Send,
    {
        let mut conn = self.pool.get().await.map_err(pool_error)?;
        let changed = conn
            .transaction::<_, TransactionError, _>(async |conn| {
                diesel::sql_query(LOCK_TIMEOUT).execute(conn).await?;
                let count: Count = call.get_result(conn).await?;
                Ok(count.n)
            })
            .await?;
        Ok(u32::try_from(changed).unwrap_or(0))
    }
}

impl Sqlite {
    /// Deletes the events older than `cutoff` in batches of [`SQLITE_DELETE_BATCH`] rows, each
    /// its own transaction; how many it deleted. App by app, on the `(app_id, occurred_at)`
    /// index: an index on `occurred_at` alone would cost every event write one more index
    /// insert for a sweep that runs once an hour.
    async fn delete_events_before(&self, cutoff: OffsetDateTime) -> Result<u64, StoreError> {
        let mut conn = self.pool.get().await.map_err(pool_error)?;
        // The apps with events, one index probe each (a loose index scan).
        let apps: Vec<AppRow> = diesel::sql_query(
            "WITH RECURSIVE a(id) AS (\
               SELECT min(app_id) FROM analytics_events \
               UNION ALL \
               SELECT (SELECT min(app_id) FROM analytics_events WHERE app_id > a.id) \
               FROM a WHERE a.id IS NOT NULL) \
             SELECT id FROM a WHERE id IS NOT NULL",
        )
        .load(&mut conn)
        .await
        .map_err(query_error)?;
        drop(conn);
        let mut deleted: u64 = 0;
        for app in apps {
            loop {
                let mut conn = self.pool.get().await.map_err(pool_error)?;
                let n = diesel::sql_query(
                    "DELETE FROM analytics_events WHERE rowid IN \
                     (SELECT rowid FROM analytics_events \
                      WHERE app_id = ? AND occurred_at < ? LIMIT ?)",
                )
                .bind::<Binary, _>(&app.id)
                .bind::<sql::Instant, _>(DbTimestamp(cutoff))
                .bind::<BigInt, _>(SQLITE_DELETE_BATCH)
                .execute(&mut conn)
                .await
                .map_err(query_error)?;
                deleted += n as u64;
                if (n as i64) < SQLITE_DELETE_BATCH {
                    break;
                }
            }
        }
        Ok(deleted)
    }
}

/// An app id of the SQLite events table, as stored.
#[derive(QueryableByName)]
struct AppRow {
    #[diesel(sql_type = Binary)]
    id: Vec<u8>,
}

/// The UTC days of the batch's first and last event.
pub(crate) fn day_span<'a>(
    events: impl IntoIterator<Item = &'a flowgate_domain::events::AnalyticsEvent>,
) -> Option<(Date, Date)> {
    events.into_iter().fold(None, |span, e| {
        let day = utc_day(e.occurred_at);
        Some(match span {
            None => (day, day),
            Some((first, last)) => (first.min(day), last.max(day)),
        })
    })
}
