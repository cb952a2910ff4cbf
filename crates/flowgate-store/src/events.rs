//! [`EventStore`] on [`Store`]: batched, idempotent analytics event writes (D7, D8).
//!
//! Both backends first drop repeats of an `event_id` within the batch (the first occurrence is
//! kept); an `event_id` that is already stored is then skipped, so a batch written twice is
//! stored once. The rows the database reports as inserted are `inserted`, the rest of the batch
//! is `duplicates`.
//!
//! - PostgreSQL: one `INSERT ... SELECT * FROM UNNEST($1::uuid[], ...)` statement per batch,
//!   one array parameter per column. Its cost does not grow with statement parsing, it has no
//!   65,535-parameter limit (a multi-row `VALUES` of 17 columns caps at 3,855 rows), and the
//!   statement text is the same for every batch size, so the server can reuse its plan.
//!   (`COPY` has no `ON CONFLICT`, and diesel-async cannot issue it: TECH-NOTES.)
//!
//!   The statement is first sent as a plain `INSERT`. `ON CONFLICT` makes PostgreSQL insert
//!   each row speculatively (probe the key, insert, confirm), which doubled its cost per row
//!   (300,000 rows: 1.69 s against 0.82 s, `docs/benchmarks.md`), and a batch almost never
//!   meets a stored `event_id`. When one does, the primary key refuses the whole statement,
//!   which is atomic, so nothing of it is stored; the batch is then sent again with
//!   `ON CONFLICT (event_id) DO NOTHING` and counted in [`Store::event_conflict_retries`].
//! - SQLite: multi-row `INSERT ... VALUES ... ON CONFLICT (event_id) DO NOTHING` in chunks of
//!   [`SQLITE_CHUNK`] rows, within one `BEGIN IMMEDIATE` transaction (SQLite commits are the
//!   expensive part, statements are cheap in-process).

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel::sql_types::{Array, Nullable, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ports::{AppendOutcome, BoxFuture, EventStore, StoreError};

use crate::error::{pool_error, query_error};
use crate::schema::analytics_events;
use crate::store::{Pools, SqliteConn, Store};
use crate::types::{sql, DbJson, DbJsonObject, DbTimestamp, DbUuid};

/// Rows per SQLite statement: 17 columns x 500 rows = 8,500 parameters (limit 32,766).
pub const SQLITE_CHUNK: usize = 500;

/// One event as a row for SQLite. Owned: the SQLite insert runs on the blocking pool, which
/// needs `'static` data. (PostgreSQL binds its columns from the events themselves.)
#[derive(Insertable)]
#[diesel(table_name = analytics_events, treat_none_as_default_value = false)]
struct EventRow {
    event_id: DbUuid,
    source: &'static str,
    event_type: &'static str,
    app_id: DbUuid,
    flow_id: Option<DbUuid>,
    flow_version_id: Option<DbUuid>,
    placement_key: Option<String>,
    user_id: String,
    session_id: String,
    device_platform: &'static str,
    occurred_at: DbTimestamp,
    sdk_version: Option<String>,
    experiment_id: Option<String>,
    variant_id: Option<String>,
    variant_name: Option<String>,
    reason: Option<&'static str>,
    payload: DbJson,
}

impl EventRow {
    fn new(e: &AnalyticsEvent) -> Self {
        Self {
            event_id: DbUuid(e.event_id.0),
            source: e.source.as_str(),
            event_type: e.event_type.as_str(),
            app_id: DbUuid(e.app_id.0),
            flow_id: e.flow_id.map(|f| DbUuid(f.0)),
            flow_version_id: e.flow_version_id.map(|v| DbUuid(v.0)),
            placement_key: e.placement_key.clone(),
            user_id: e.user_id.clone(),
            session_id: e.session_id.clone(),
            device_platform: e.device_platform.as_str(),
            occurred_at: DbTimestamp(e.occurred_at),
            sdk_version: e.sdk_version.clone(),
            experiment_id: e.experiment_id.clone(),
            variant_id: e.variant_id.clone(),
            variant_name: e.variant_name.clone(),
            reason: e.reason.map(|r| r.as_str()),
            payload: DbJson(serde_json::Value::Object(e.payload.clone())),
        }
    }
}

/// The batch without repeated `event_id`s, first occurrences kept, in order.
fn unique_events(events: &[AnalyticsEvent]) -> Vec<&AnalyticsEvent> {
    let mut seen = HashSet::with_capacity(events.len());
    events.iter().filter(|e| seen.insert(e.event_id)).collect()
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
            let inserted = match self.pools() {
                Pools::Pg(pool) => {
                    let mut conn = pool.get().await.map_err(pool_error)?;
                    match insert_pg(&mut conn, &rows, PG_PLAIN_INSERT).await {
                        Err(DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => {
                            // Only the primary key is unique: an event_id is already stored.
                            self.inner
                                .event_conflict_retries
                                .fetch_add(1, Ordering::Relaxed);
                            insert_pg(&mut conn, &rows, PG_IDEMPOTENT_INSERT).await
                        }
                        other => other,
                    }
                    .map_err(query_error)?
                }
                Pools::Sqlite(pool) => {
                    let mut conn = pool.get().await.map_err(pool_error)?;
                    insert_sqlite(&mut conn, rows.into_iter().map(EventRow::new).collect()).await?
                }
            };
            Ok(AppendOutcome {
                inserted,
                duplicates: events.len().saturating_sub(inserted),
            })
        })
    }
}

/// The PostgreSQL insert: every column an array parameter, zipped by `UNNEST`.
macro_rules! unnest_insert {
    () => {
        "INSERT INTO analytics_events (event_id, source, event_type, app_id, flow_id, \
         flow_version_id, placement_key, user_id, session_id, device_platform, occurred_at, \
         sdk_version, experiment_id, variant_id, variant_name, reason, payload) \
         SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::uuid[], \
         $6::uuid[], $7::text[], $8::text[], $9::text[], $10::text[], $11::timestamptz[], \
         $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], $17::jsonb[])"
    };
}

/// The insert tried first: refused whole by the primary key when an `event_id` is stored.
const PG_PLAIN_INSERT: &str = unnest_insert!();

/// The same insert skipping stored `event_id`s: the retry after a refused plain insert.
const PG_IDEMPOTENT_INSERT: &str = concat!(unnest_insert!(), " ON CONFLICT (event_id) DO NOTHING");

/// Runs `statement` (one of the two above) for `rows`; the number of rows inserted.
async fn insert_pg(
    conn: &mut AsyncPgConnection,
    rows: &[&AnalyticsEvent],
    statement: &'static str,
) -> Result<usize, DieselError> {
    fn column<'r, T>(rows: &[&'r AnalyticsEvent], f: impl Fn(&'r AnalyticsEvent) -> T) -> Vec<T> {
        rows.iter().map(|&e| f(e)).collect()
    }
    // One statement is atomic on its own: no explicit transaction needed.
    diesel::sql_query(statement)
        .bind::<Array<sql::Uuid>, _>(column(rows, |e| DbUuid(e.event_id.0)))
        .bind::<Array<Text>, _>(column(rows, |e| e.source.as_str()))
        .bind::<Array<Text>, _>(column(rows, |e| e.event_type.as_str()))
        .bind::<Array<sql::Uuid>, _>(column(rows, |e| DbUuid(e.app_id.0)))
        .bind::<Array<Nullable<sql::Uuid>>, _>(column(rows, |e| e.flow_id.map(|f| DbUuid(f.0))))
        .bind::<Array<Nullable<sql::Uuid>>, _>(column(rows, |e| {
            e.flow_version_id.map(|v| DbUuid(v.0))
        }))
        .bind::<Array<Nullable<Text>>, _>(column(rows, |e| e.placement_key.as_deref()))
        .bind::<Array<Text>, _>(column(rows, |e| e.user_id.as_str()))
        .bind::<Array<Text>, _>(column(rows, |e| e.session_id.as_str()))
        .bind::<Array<Text>, _>(column(rows, |e| e.device_platform.as_str()))
        .bind::<Array<sql::Instant>, _>(column(rows, |e| DbTimestamp(e.occurred_at)))
        .bind::<Array<Nullable<Text>>, _>(column(rows, |e| e.sdk_version.as_deref()))
        .bind::<Array<Nullable<Text>>, _>(column(rows, |e| e.experiment_id.as_deref()))
        .bind::<Array<Nullable<Text>>, _>(column(rows, |e| e.variant_id.as_deref()))
        .bind::<Array<Nullable<Text>>, _>(column(rows, |e| e.variant_name.as_deref()))
        .bind::<Array<Nullable<Text>>, _>(column(rows, |e| e.reason.map(|r| r.as_str())))
        .bind::<Array<sql::Json>, _>(column(rows, |e| DbJsonObject(&e.payload)))
        .execute(conn)
        .await
}

/// Runs the whole batch in one call to the blocking pool with synchronous diesel, which turns
/// each chunk into one multi-row `INSERT` (diesel-async cannot: it lacks diesel's SQLite-only
/// batch-insert path).
async fn insert_sqlite(conn: &mut SqliteConn, rows: Vec<EventRow>) -> Result<usize, StoreError> {
    conn.spawn_blocking(move |conn| {
        conn.immediate_transaction(|conn| {
            let mut inserted = 0;
            for chunk in rows.chunks(SQLITE_CHUNK) {
                let statement = diesel::insert_into(analytics_events::table)
                    .values(chunk)
                    .on_conflict(analytics_events::event_id)
                    .do_nothing();
                inserted += diesel::RunQueryDsl::execute(statement, conn)?;
            }
            Ok(inserted)
        })
    })
    .await
    .map_err(query_error)
}
