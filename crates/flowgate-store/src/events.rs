//! [`EventStore`] on [`Store`]: batched, idempotent analytics event writes (D7, D8).
//!
//! Event ids are unique per app (D25): an event is the same event only when its app and
//! `event_id` are. Both backends first drop repeats of an (`app_id`, `event_id`) within the
//! batch (the first occurrence is kept); one that is already stored is then skipped, so a batch
//! written twice is stored once. The rows the database reports as inserted are `inserted`, the
//! rest of the batch is `duplicates`.
//!
//! - PostgreSQL: one binary `COPY` per batch (`copy.rs`: PostgreSQL's bulk path, faster than
//!   any insert; `docs/benchmarks.md` has the figures), on a plain tokio-postgres client, since
//!   diesel-async cannot send `COPY`.
//!
//!   `COPY` has no `ON CONFLICT`, and a batch almost never meets a stored `event_id`, while an
//!   `ON CONFLICT` insert costs about twice a plain one per row. When a batch does meet one,
//!   the primary key refuses the whole statement, which is atomic, so nothing of it is
//!   stored; the batch is then written again with one
//!   `INSERT ... SELECT * FROM UNNEST($1::uuid[], ...) ON CONFLICT DO NOTHING` (one
//!   array parameter per column: no 65,535-parameter limit, the same text whatever the batch
//!   size, so each connection prepares it once, `UnnestInsert`) and counted in
//!   [`Store::event_conflict_retries`].
//! - SQLite: multi-row `INSERT ... VALUES ... ON CONFLICT DO NOTHING` in
//!   chunks of [`SQLITE_CHUNK`] rows, within one `BEGIN IMMEDIATE` transaction (SQLite commits
//!   are the expensive part, statements are cheap in-process).

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Array, Nullable, Text};
use diesel::sqlite::Sqlite as SqliteBackend;
use diesel::QueryResult;
use diesel_async::RunQueryDsl;
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ports::{AppendOutcome, BoxFuture, EventStore, StoreError};

use crate::copy::copy_events;
use crate::db::{Db, Postgres, Sqlite};
use crate::error::{is_missing_partition, PgWriteError};
use crate::error::{pool_error, query_error};
use crate::event_columns::{column_list, ColumnValues, EVENT_COLUMNS};
use crate::retention::day_span;
use crate::store::Store;
use crate::types::sql;

/// Rows per SQLite statement: 17 columns x 500 rows = 8,500 parameters (SQLite's limit is
/// 32,766).
pub const SQLITE_CHUNK: usize = 500;

const _: () = assert!(EVENT_COLUMNS.len() * SQLITE_CHUNK <= 32_766);

/// The batch without repeated (`app_id`, `event_id`)s, first occurrences kept, in order.
fn unique_events(events: &[AnalyticsEvent]) -> Vec<&AnalyticsEvent> {
    let mut seen = HashSet::with_capacity(events.len());
    events
        .iter()
        .filter(|e| seen.insert((e.app_id, e.event_id)))
        .collect()
}

impl EventStore for Store {
    fn append_events<'a>(
        &'a self,
        events: &'a [AnalyticsEvent],
    ) -> BoxFuture<'a, Result<AppendOutcome, StoreError>> {
        Box::pin(async move {
            let rows = unique_events(events);
            if rows.is_empty() {
                return Ok(AppendOutcome::default());
            }
            let inserted = match self.db() {
                Db::Postgres(pg) => pg.append_events(&rows).await?,
                Db::Sqlite(sqlite) => sqlite.append_events(&rows).await?,
            };
            Ok(AppendOutcome {
                inserted,
                duplicates: events.len().saturating_sub(inserted),
            })
        })
    }
}

impl Postgres {
    /// Writes `rows` (no `event_id` twice): how many were stored. A row whose day has no
    /// partition yet (D21) makes the write create the partitions of the batch's days and try
    /// once more.
    async fn append_events(&self, rows: &[&AnalyticsEvent]) -> Result<usize, StoreError> {
        let mut created = false;
        loop {
            match self.write_events(rows).await {
                Ok(n) => return Ok(n),
                Err(PgWriteError::NoPartition(_)) if !created => {
                    if let Some((first, last)) = day_span(rows.iter().copied()) {
                        self.ensure_event_partitions(first, last).await?;
                    }
                    created = true;
                }
                Err(PgWriteError::NoPartition(e) | PgWriteError::Store(e)) => return Err(e),
                Err(PgWriteError::AlreadyStored) => {
                    unreachable!("`write_events` writes a batch with stored events again")
                }
            }
        }
    }

    /// One `COPY` of `rows`, or when an `event_id` of theirs is already stored, the same rows
    /// with `ON CONFLICT`: how many were stored.
    async fn write_events(&self, rows: &[&AnalyticsEvent]) -> Result<usize, PgWriteError> {
        match copy_events(&self.copy, rows).await {
            Err(PgWriteError::AlreadyStored) => {}
            copied => return copied,
        }
        // An (app_id, event_id, occurred_at) of the batch is already stored (only the primary
        // key is unique), so nothing of it was: the same rows again, with `ON CONFLICT`.
        self.event_conflict_retries.fetch_add(1, Ordering::Relaxed);
        let mut conn = self
            .pool
            .get()
            .await
            .map_err(|e| PgWriteError::Store(pool_error(e)))?;
        match UnnestInsert::new(rows).execute(&mut conn).await {
            Ok(n) => Ok(n),
            Err(diesel::result::Error::DatabaseError(kind, info))
                if matches!(kind, diesel::result::DatabaseErrorKind::CheckViolation)
                    && is_missing_partition(Some("23514"), info.message()) =>
            {
                Err(PgWriteError::NoPartition(StoreError::Conflict {
                    detail: info.message().to_owned(),
                }))
            }
            Err(e) => Err(PgWriteError::Store(query_error(e))),
        }
    }
}

/// The PostgreSQL insert of a batch: every column an array parameter, zipped by `UNNEST`.
///
/// A query type of its own rather than `diesel::sql_query`: diesel never caches raw SQL as a
/// prepared statement, so PostgreSQL would parse, analyse and plan the statement again for
/// every batch. This one is safe to cache, so each connection prepares it once (diesel's
/// statement cache, keyed by its SQL text and bind types) and then only executes it.
struct UnnestInsert<'e> {
    columns: Vec<ColumnValues<'e>>,
}

impl<'e> UnnestInsert<'e> {
    /// The insert of `rows`, skipping those whose `event_id` is stored.
    fn new(rows: &[&'e AnalyticsEvent]) -> Self {
        Self {
            columns: ColumnValues::of(rows),
        }
    }
}

impl QueryFragment<Pg> for UnnestInsert<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("INSERT INTO analytics_events (");
        out.push_sql(&column_list());
        out.push_sql(") SELECT * FROM UNNEST(");
        // Each array as `$n::type[]`, in the columns' order.
        for (i, column) in self.columns.iter().enumerate() {
            if i > 0 {
                out.push_sql(", ");
            }
            match column {
                ColumnValues::Uuid(v) => {
                    out.push_bind_param::<Array<Nullable<sql::Uuid>>, _>(v)?;
                }
                ColumnValues::Text(v) => out.push_bind_param::<Array<Nullable<Text>>, _>(v)?,
                ColumnValues::Instant(v) => out.push_bind_param::<Array<sql::Instant>, _>(v)?,
                ColumnValues::Json(v) => out.push_bind_param::<Array<sql::Json>, _>(v)?,
            }
            out.push_sql("::");
            out.push_sql(column.pg_type());
            out.push_sql("[]");
        }
        // No conflict target: the key is the table's only unique constraint, and the statement
        // stays right on the key of every schema version (D25 changed it).
        out.push_sql(") ON CONFLICT DO NOTHING");
        Ok(())
    }
}

/// Cached by its SQL text (the same whatever the batch size), not by a static id.
impl QueryId for UnnestInsert<'_> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl Sqlite {
    /// Writes `rows` (no `event_id` twice) with multi-row inserts that skip stored
    /// `event_id`s, [`SQLITE_CHUNK`] rows a statement, in one `BEGIN IMMEDIATE` transaction
    /// (SQLite commits are the expensive part, statements are cheap in-process): how many were
    /// stored.
    async fn append_events(&self, rows: &[&AnalyticsEvent]) -> Result<usize, StoreError> {
        // The insert runs on the blocking pool, which needs owned data.
        let events: Vec<AnalyticsEvent> = rows.iter().map(|&e| e.clone()).collect();
        let mut conn = self.pool.get().await.map_err(pool_error)?;
        conn.spawn_blocking(move |conn| {
            let rows: Vec<&AnalyticsEvent> = events.iter().collect();
            conn.immediate_transaction(|conn| {
                let mut inserted = 0;
                for chunk in rows.chunks(SQLITE_CHUNK) {
                    inserted += diesel::RunQueryDsl::execute(SqliteInsert::new(chunk), conn)?;
                }
                Ok(inserted)
            })
        })
        .await
        .map_err(query_error)
    }
}

/// The SQLite insert of a chunk: `INSERT ... VALUES (...), (...) ON CONFLICT DO NOTHING` (the
/// key, `(app_id, event_id)`, is the table's only unique constraint), one parameter per value.
struct SqliteInsert<'e> {
    columns: Vec<ColumnValues<'e>>,
    rows: usize,
}

impl<'e> SqliteInsert<'e> {
    fn new(rows: &[&'e AnalyticsEvent]) -> Self {
        Self {
            columns: ColumnValues::of(rows),
            rows: rows.len(),
        }
    }
}

impl QueryFragment<SqliteBackend> for SqliteInsert<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, SqliteBackend>) -> QueryResult<()> {
        // One text per chunk size: not worth a prepared statement each (as diesel's own
        // multi-row inserts).
        out.unsafe_to_cache_prepared();
        out.push_sql("INSERT INTO analytics_events (");
        out.push_sql(&column_list());
        out.push_sql(") VALUES ");
        for row in 0..self.rows {
            out.push_sql(if row == 0 { "(" } else { ", (" });
            for (i, column) in self.columns.iter().enumerate() {
                if i > 0 {
                    out.push_sql(", ");
                }
                match column {
                    ColumnValues::Uuid(v) => {
                        out.push_bind_param::<Nullable<sql::Uuid>, _>(&v[row])?;
                    }
                    ColumnValues::Text(v) => out.push_bind_param::<Nullable<Text>, _>(&v[row])?,
                    ColumnValues::Instant(v) => out.push_bind_param::<sql::Instant, _>(&v[row])?,
                    ColumnValues::Json(v) => out.push_bind_param::<sql::Json, _>(&v[row])?,
                }
            }
            out.push_sql(")");
        }
        out.push_sql(" ON CONFLICT DO NOTHING");
        Ok(())
    }
}

impl<Conn> diesel::RunQueryDsl<Conn> for SqliteInsert<'_> {}

impl QueryId for SqliteInsert<'_> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

#[cfg(test)]
mod tests {
    use diesel::pg::PgQueryBuilder;
    use diesel::query_builder::QueryBuilder;
    fn event(n: u32) -> AnalyticsEvent {
        AnalyticsEvent::sample(n)
    }

    use super::*;

    fn sql(query: &UnnestInsert<'_>) -> String {
        let mut builder = PgQueryBuilder::new();
        query.to_sql(&mut builder, &Pg).expect("sql");
        builder.finish()
    }

    /// The insert may be prepared once per connection: diesel caches it (`sql_query` is never
    /// cached), and its text is the same whatever the batch size.
    #[test]
    fn the_insert_is_one_cacheable_statement() {
        let events: Vec<AnalyticsEvent> = (1..=3).map(event).collect();
        let rows: Vec<&AnalyticsEvent> = events.iter().collect();
        let one = UnnestInsert::new(&rows[..1]);
        let three = UnnestInsert::new(&rows);
        assert!(one.is_safe_to_cache_prepared(&Pg).expect("check"));
        assert!(three.is_safe_to_cache_prepared(&Pg).expect("check"));
        assert_eq!(sql(&one), sql(&three));
        assert_eq!(
            sql(&one),
            "INSERT INTO analytics_events (event_id, source, event_type, app_id, flow_id, \
             flow_version_id, placement_key, user_id, session_id, device_platform, \
             occurred_at, sdk_version, experiment_id, variant_id, variant_name, reason, \
             payload) SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::uuid[], \
             $5::uuid[], $6::uuid[], $7::text[], $8::text[], $9::text[], $10::text[], \
             $11::timestamptz[], $12::text[], $13::text[], $14::text[], $15::text[], \
             $16::text[], $17::jsonb[]) ON CONFLICT DO NOTHING"
        );
    }

    /// One row of parameters per event, in the columns' order, skipping stored `event_id`s.
    #[test]
    fn the_sqlite_insert_lists_every_row() {
        use diesel::sqlite::SqliteQueryBuilder;
        let events: Vec<AnalyticsEvent> = (1..=2).map(event).collect();
        let rows: Vec<&AnalyticsEvent> = events.iter().collect();
        let mut builder = SqliteQueryBuilder::new();
        SqliteInsert::new(&rows)
            .to_sql(&mut builder, &SqliteBackend)
            .expect("sql");
        let row = format!("({})", vec!["?"; EVENT_COLUMNS.len()].join(", "));
        assert_eq!(
            builder.finish(),
            format!(
                "INSERT INTO analytics_events ({}) VALUES {row}, {row} \
                 ON CONFLICT DO NOTHING",
                column_list()
            )
        );
    }
}
