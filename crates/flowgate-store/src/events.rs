//! [`EventStore`] on [`Store`]: batched, idempotent analytics event writes (D7, D8).
//!
//! Both backends first drop repeats of an `event_id` within the batch (the first occurrence is
//! kept); an `event_id` that is already stored is then skipped, so a batch written twice is
//! stored once. The rows the database reports as inserted are `inserted`, the rest of the batch
//! is `duplicates`.
//!
//! - PostgreSQL: one binary `COPY` per batch (`copy.rs`: PostgreSQL's bulk path; 15-37% more
//!   rows/s than the prepared `UNNEST` insert it replaced for batches of 100, 24-36% for
//!   batches of 1,000, docs/benchmarks.md 2026-11-23), on a plain tokio-postgres client, since
//!   diesel-async cannot send `COPY` (TECH-NOTES).
//!
//!   `COPY` has no `ON CONFLICT`, and a batch almost never meets a stored `event_id` (an
//!   `ON CONFLICT` insert costs about twice a plain one per row: 300,000 rows in 1.69 s
//!   against 0.82 s). When one does, the primary key refuses the whole statement, which is
//!   atomic, so nothing of it is stored; the batch is then written again with one
//!   `INSERT ... SELECT * FROM UNNEST($1::uuid[], ...) ON CONFLICT (event_id) DO NOTHING` (one
//!   array parameter per column: no 65,535-parameter limit, the same text whatever the batch
//!   size, so each connection prepares it once, `UnnestInsert`) and counted in
//!   [`Store::event_conflict_retries`].
//! - SQLite: multi-row `INSERT ... VALUES ... ON CONFLICT (event_id) DO NOTHING` in chunks of
//!   [`SQLITE_CHUNK`] rows, within one `BEGIN IMMEDIATE` transaction (SQLite commits are the
//!   expensive part, statements are cheap in-process).

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Array, Nullable, Text};
use diesel_async::RunQueryDsl;
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::ports::{AppendOutcome, BoxFuture, EventStore, StoreError};

use crate::copy::{copy_events, CopyError};
use crate::error::{pool_error, query_error};
use crate::retention::{day_span, is_missing_partition};
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
                Pools::Pg { .. } => {
                    let mut created = false;
                    loop {
                        match self.write_pg(&rows).await {
                            Ok(n) => break n,
                            // A day without its partition (D21): create it, write again.
                            Err(PgWrite::NoPartition(_)) if !created => {
                                if let Some((first, last)) = day_span(rows.iter().copied()) {
                                    self.ensure_event_partitions(first, last).await?;
                                }
                                created = true;
                            }
                            Err(PgWrite::NoPartition(e) | PgWrite::Store(e)) => return Err(e),
                        }
                    }
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

/// Why a PostgreSQL write of a batch failed.
enum PgWrite {
    /// No partition holds one of the rows (nothing was stored).
    NoPartition(StoreError),
    /// Anything else.
    Store(StoreError),
}

impl From<StoreError> for PgWrite {
    fn from(e: StoreError) -> Self {
        PgWrite::Store(e)
    }
}

impl Store {
    /// One `COPY` of `rows`, or when an `event_id` of theirs is already stored, the same rows
    /// with `ON CONFLICT`: how many were stored.
    async fn write_pg(&self, rows: &[&AnalyticsEvent]) -> Result<usize, PgWrite> {
        let Pools::Pg { pool, copy } = self.pools() else {
            return Err(PgWrite::Store(StoreError::Other(
                "a PostgreSQL write on another backend".to_owned(),
            )));
        };
        match copy_events(copy, rows).await {
            Ok(n) => Ok(n),
            Err(CopyError::NoPartition(e)) => Err(PgWrite::NoPartition(e)),
            Err(CopyError::Store(e)) => Err(PgWrite::Store(e)),
            Err(CopyError::AlreadyStored) => {
                // An (event_id, occurred_at) of the batch is already stored (only the primary
                // key is unique), so nothing of it was: the same rows again, with
                // `ON CONFLICT`.
                self.inner
                    .event_conflict_retries
                    .fetch_add(1, Ordering::Relaxed);
                let mut conn = pool.get().await.map_err(pool_error)?;
                match (&UnnestInsert::new(rows)).execute(&mut conn).await {
                    Ok(n) => Ok(n),
                    Err(diesel::result::Error::DatabaseError(kind, info))
                        if matches!(kind, diesel::result::DatabaseErrorKind::CheckViolation)
                            && is_missing_partition(Some("23514"), info.message()) =>
                    {
                        Err(PgWrite::NoPartition(StoreError::Conflict(
                            info.message().to_owned(),
                        )))
                    }
                    Err(e) => Err(PgWrite::Store(query_error(e))),
                }
            }
        }
    }
}

/// The PostgreSQL insert of a batch: every column an array parameter, zipped by `UNNEST`.
///
/// A query type of its own rather than `diesel::sql_query`: diesel never caches raw SQL as a
/// prepared statement, so PostgreSQL parsed, analysed and planned the statement again for
/// every batch. This one is safe to cache, so each connection prepares it once (diesel's
/// statement cache, keyed by its SQL text and bind types) and then only executes it.
struct UnnestInsert<'r> {
    event_id: Vec<DbUuid>,
    source: Vec<&'r str>,
    event_type: Vec<&'r str>,
    app_id: Vec<DbUuid>,
    flow_id: Vec<Option<DbUuid>>,
    flow_version_id: Vec<Option<DbUuid>>,
    placement_key: Vec<Option<&'r str>>,
    user_id: Vec<&'r str>,
    session_id: Vec<&'r str>,
    device_platform: Vec<&'r str>,
    occurred_at: Vec<DbTimestamp>,
    sdk_version: Vec<Option<&'r str>>,
    experiment_id: Vec<Option<&'r str>>,
    variant_id: Vec<Option<&'r str>>,
    variant_name: Vec<Option<&'r str>>,
    reason: Vec<Option<&'r str>>,
    payload: Vec<DbJsonObject<'r>>,
}

impl<'r> UnnestInsert<'r> {
    /// The insert of `rows`, skipping those whose `event_id` is stored.
    fn new(rows: &[&'r AnalyticsEvent]) -> Self {
        fn column<'r, T>(
            rows: &[&'r AnalyticsEvent],
            f: impl Fn(&'r AnalyticsEvent) -> T,
        ) -> Vec<T> {
            rows.iter().map(|&e| f(e)).collect()
        }
        Self {
            event_id: column(rows, |e| DbUuid(e.event_id.0)),
            source: column(rows, |e| e.source.as_str()),
            event_type: column(rows, |e| e.event_type.as_str()),
            app_id: column(rows, |e| DbUuid(e.app_id.0)),
            flow_id: column(rows, |e| e.flow_id.map(|f| DbUuid(f.0))),
            flow_version_id: column(rows, |e| e.flow_version_id.map(|v| DbUuid(v.0))),
            placement_key: column(rows, |e| e.placement_key.as_deref()),
            user_id: column(rows, |e| e.user_id.as_str()),
            session_id: column(rows, |e| e.session_id.as_str()),
            device_platform: column(rows, |e| e.device_platform.as_str()),
            occurred_at: column(rows, |e| DbTimestamp(e.occurred_at)),
            sdk_version: column(rows, |e| e.sdk_version.as_deref()),
            experiment_id: column(rows, |e| e.experiment_id.as_deref()),
            variant_id: column(rows, |e| e.variant_id.as_deref()),
            variant_name: column(rows, |e| e.variant_name.as_deref()),
            reason: column(rows, |e| e.reason.map(|r| r.as_str())),
            payload: column(rows, |e| DbJsonObject(&e.payload)),
        }
    }
}

impl QueryFragment<Pg> for UnnestInsert<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO analytics_events (event_id, source, event_type, app_id, flow_id, \
             flow_version_id, placement_key, user_id, session_id, device_platform, occurred_at, \
             sdk_version, experiment_id, variant_id, variant_name, reason, payload) \
             SELECT * FROM UNNEST(",
        );
        // Each array as `$n::type[]`, in the columns' order.
        let mut first = true;
        macro_rules! arrays {
            ($($field:ident: $sql_type:ty as $cast:literal,)+) => {$(
                if !std::mem::take(&mut first) {
                    out.push_sql(", ");
                }
                out.push_bind_param::<$sql_type, _>(&self.$field)?;
                out.push_sql(concat!("::", $cast, "[]"));
            )+};
        }
        arrays! {
            event_id: Array<sql::Uuid> as "uuid",
            source: Array<Text> as "text",
            event_type: Array<Text> as "text",
            app_id: Array<sql::Uuid> as "uuid",
            flow_id: Array<Nullable<sql::Uuid>> as "uuid",
            flow_version_id: Array<Nullable<sql::Uuid>> as "uuid",
            placement_key: Array<Nullable<Text>> as "text",
            user_id: Array<Text> as "text",
            session_id: Array<Text> as "text",
            device_platform: Array<Text> as "text",
            occurred_at: Array<sql::Instant> as "timestamptz",
            sdk_version: Array<Nullable<Text>> as "text",
            experiment_id: Array<Nullable<Text>> as "text",
            variant_id: Array<Nullable<Text>> as "text",
            variant_name: Array<Nullable<Text>> as "text",
            reason: Array<Nullable<Text>> as "text",
            payload: Array<sql::Json> as "jsonb",
        }
        out.push_sql(") ON CONFLICT (event_id, occurred_at) DO NOTHING");
        Ok(())
    }
}

/// Cached by its SQL text (two texts: with and without `ON CONFLICT`), not by a static id.
impl QueryId for UnnestInsert<'_> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
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

#[cfg(test)]
mod tests {
    use diesel::pg::PgQueryBuilder;
    use diesel::query_builder::QueryBuilder;
    use flowgate_domain::events::{EventSource, EventType};
    use flowgate_domain::ids::{AppId, EventId};
    use flowgate_domain::Platform;

    use super::*;

    fn event(n: u128) -> AnalyticsEvent {
        AnalyticsEvent {
            event_id: EventId::from_uuid(uuid::Uuid::from_u128(n)),
            source: EventSource::Sdk,
            event_type: EventType::ScreenView,
            app_id: AppId::from_uuid(uuid::Uuid::from_u128(1)),
            flow_id: None,
            flow_version_id: None,
            placement_key: None,
            user_id: format!("user-{n}"),
            session_id: "s".to_owned(),
            device_platform: Platform::Ios,
            occurred_at: time::OffsetDateTime::UNIX_EPOCH,
            sdk_version: None,
            experiment_id: None,
            variant_id: None,
            variant_name: None,
            reason: None,
            payload: serde_json::Map::new(),
        }
    }

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
             $16::text[], $17::jsonb[]) ON CONFLICT (event_id, occurred_at) DO NOTHING"
        );
    }
}
