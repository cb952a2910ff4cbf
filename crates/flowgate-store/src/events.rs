//! [`EventStore`] on [`Store`]: batched, idempotent analytics event writes (D7, D8).
//!
//! Both backends first drop repeats of an `event_id` within the batch (the first occurrence is
//! kept), then insert with `ON CONFLICT (event_id) DO NOTHING` in one transaction; the rows the
//! database reports as inserted are `inserted`, the rest of the batch is `duplicates`.
//!
//! - PostgreSQL: one `INSERT ... SELECT * FROM UNNEST($1::uuid[], ...)` statement per batch,
//!   one array parameter per column. Its cost does not grow with statement parsing, it has no
//!   65,535-parameter limit (a multi-row `VALUES` of 17 columns caps at 3,855 rows), and the
//!   statement text is the same for every batch size, so the server can reuse its plan.
//!   (`COPY` has no `ON CONFLICT`, and diesel-async cannot issue it: TECH-NOTES.)
//! - SQLite: multi-row `INSERT ... VALUES` in chunks of [`SQLITE_CHUNK`] rows, within one
//!   `BEGIN IMMEDIATE` transaction (SQLite commits are the expensive part, statements are cheap
//!   in-process).

use std::collections::HashSet;

use diesel::prelude::*;
use diesel::sql_types::{Array, Nullable, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ports::{AppendOutcome, BoxFuture, EventStore, StoreError};

use crate::error::{pool_error, query_error};
use crate::schema::analytics_events;
use crate::store::{Pools, SqliteConn, Store};
use crate::types::{sql, DbJson, DbTimestamp, DbUuid};

/// Rows per SQLite statement: 17 columns x 500 rows = 8,500 parameters (limit 32,766).
pub const SQLITE_CHUNK: usize = 500;

/// One event as a row. Owned: the SQLite insert runs on the blocking pool, which needs
/// `'static` data.
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
fn unique_rows(events: &[AnalyticsEvent]) -> Vec<EventRow> {
    let mut seen = HashSet::with_capacity(events.len());
    events
        .iter()
        .filter(|e| seen.insert(e.event_id))
        .map(EventRow::new)
        .collect()
}

impl EventStore for Store {
    fn append_events<'a>(
        &'a self,
        events: &'a [AnalyticsEvent],
    ) -> BoxFuture<'a, Result<AppendOutcome, StoreError>> {
        Box::pin(async move {
            let rows = unique_rows(events);
            if rows.is_empty() {
                return Ok(AppendOutcome::default());
            }
            let inserted = match self.pools() {
                Pools::Pg(pool) => {
                    let mut conn = pool.get().await.map_err(pool_error)?;
                    insert_pg(&mut conn, &rows).await?
                }
                Pools::Sqlite(pool) => {
                    let mut conn = pool.get().await.map_err(pool_error)?;
                    insert_sqlite(&mut conn, rows).await?
                }
            };
            Ok(AppendOutcome {
                inserted,
                duplicates: events.len().saturating_sub(inserted),
            })
        })
    }
}

/// The PostgreSQL statement: every column an array parameter, zipped by `UNNEST`.
const PG_UNNEST_INSERT: &str = "\
INSERT INTO analytics_events (event_id, source, event_type, app_id, flow_id, flow_version_id, \
placement_key, user_id, session_id, device_platform, occurred_at, sdk_version, experiment_id, \
variant_id, variant_name, reason, payload) \
SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::uuid[], $6::uuid[], \
$7::text[], $8::text[], $9::text[], $10::text[], $11::timestamptz[], $12::text[], $13::text[], \
$14::text[], $15::text[], $16::text[], $17::jsonb[]) \
ON CONFLICT (event_id) DO NOTHING";

async fn insert_pg(conn: &mut AsyncPgConnection, rows: &[EventRow]) -> Result<usize, StoreError> {
    fn column<'r, T>(rows: &'r [EventRow], f: impl Fn(&'r EventRow) -> T) -> Vec<T> {
        rows.iter().map(f).collect()
    }
    // One statement is atomic on its own: no explicit transaction needed.
    diesel::sql_query(PG_UNNEST_INSERT)
        .bind::<Array<sql::Uuid>, _>(column(rows, |r| r.event_id))
        .bind::<Array<Text>, _>(column(rows, |r| r.source))
        .bind::<Array<Text>, _>(column(rows, |r| r.event_type))
        .bind::<Array<sql::Uuid>, _>(column(rows, |r| r.app_id))
        .bind::<Array<Nullable<sql::Uuid>>, _>(column(rows, |r| r.flow_id))
        .bind::<Array<Nullable<sql::Uuid>>, _>(column(rows, |r| r.flow_version_id))
        .bind::<Array<Nullable<Text>>, _>(column(rows, |r| r.placement_key.as_deref()))
        .bind::<Array<Text>, _>(column(rows, |r| r.user_id.as_str()))
        .bind::<Array<Text>, _>(column(rows, |r| r.session_id.as_str()))
        .bind::<Array<Text>, _>(column(rows, |r| r.device_platform))
        .bind::<Array<sql::Instant>, _>(column(rows, |r| r.occurred_at))
        .bind::<Array<Nullable<Text>>, _>(column(rows, |r| r.sdk_version.as_deref()))
        .bind::<Array<Nullable<Text>>, _>(column(rows, |r| r.experiment_id.as_deref()))
        .bind::<Array<Nullable<Text>>, _>(column(rows, |r| r.variant_id.as_deref()))
        .bind::<Array<Nullable<Text>>, _>(column(rows, |r| r.variant_name.as_deref()))
        .bind::<Array<Nullable<Text>>, _>(column(rows, |r| r.reason))
        .bind::<Array<sql::Json>, _>(column(rows, |r| &r.payload))
        .execute(conn)
        .await
        .map_err(query_error)
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
