//! [`ResultsSource`] on [`Store`] (D22): the store reads an experiment's rows and the domain's
//! [`Folder`] adds them up, so the rules of `flowgate_domain::results` are written once for
//! every store (the contract suite holds both backends to the in-memory reference).
//!
//! The reads, each in user order on an index that holds just its rows (migration
//! `2026-11-28-000000_experiment_results`):
//!
//! - the experiment's exposures (`flow_open` and holdout `resolve_no_flow` events carrying it)
//!   up to the end: the `analytics_events_exposures` index;
//! - the app's `flow_complete` events, and its `purchase_complete` events with their `revenue`
//!   and `currency`, in the window: the `analytics_events_outcomes` index;
//! - the events of conversions asked for beyond those two, in the window (no index holds
//!   them: such a report reads and sorts more).
//!
//! "User order" is the bytes' order (`COLLATE "C"` on PostgreSQL, SQLite's `BINARY`), the order
//! of Rust's `str`, so the reads are merged as they arrive, one user at a time, without
//! holding any of them: [`merge`]. On PostgreSQL each read is a binary `COPY` on a connection
//! of its own, made for the report with the results store's TLS, under the report's time limit
//! (`statement_timeout`); the server's executor is the slow part of a per-user aggregation in
//! SQL, which streaming index-ordered rows to be folded here avoids (the approaches measured:
//! docs/benchmarks-method.md). On SQLite the reads run on the pool.
//! [`ResultsReader`] bounds a report's time and the connections all reports hold.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use diesel::sql_types::{BigInt, Double, Nullable, Text};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use flowgate_domain::events::EventType;
use flowgate_domain::ids::ExperimentId;
use flowgate_domain::ports::{BoxFuture, Outage, ResultsSource, StoreError};
use flowgate_domain::results::{
    Exposure, ExposureCountQuery, Folder, Outcome, ResultsData, ResultsQuery,
};
use flowgate_domain::store_notifications::StoreTransaction;
use futures_util::TryStreamExt;
use time::OffsetDateTime;
use tokio::sync::Semaphore;
use tokio_postgres::binary_copy::{BinaryCopyOutRow, BinaryCopyOutStream};
use tokio_postgres::types::Type;

use crate::db::{Db, Postgres, Sqlite};
use crate::error::{corrupt, pool_error, query_error, unavailable};
use crate::store::Store;
use crate::types::{sql, DbUuid};

/// The exposure events of an experiment, as both backends write the condition (the partial
/// index's, so the planners can use it).
const EXPOSURE: &str = "experiment_id IS NOT NULL \
    AND (event_type = 'flow_open' OR (event_type = 'resolve_no_flow' AND reason = 'holdout'))";

/// The conversion types the outcomes index holds, as its condition writes them.
const INDEXED_OUTCOMES: &str = "event_type IN ('flow_complete', 'purchase_complete')";

/// The conversions of `query` beyond the indexed ones, as SQL literals: the names are the
/// domain's fixed `[a-z_]` words, written into the text.
fn other_conversions(query: &ResultsQuery) -> Vec<String> {
    query
        .conversions
        .iter()
        .filter(|t| !matches!(t, EventType::FlowComplete | EventType::PurchaseComplete))
        .map(|t| {
            debug_assert!(t
                .as_str()
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'_'));
            format!("'{}'", t.as_str())
        })
        .collect()
}

/// A UTC instant from microseconds since the Unix epoch, as both reads return times.
fn instant(micros: i64) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1_000).map_err(|e| {
        StoreError::Corrupt {
            detail: format!("results: a time of {micros} µs: {e}"),
        }
    })
}

/// A `timestamptz` as PostgreSQL sends it in binary (microseconds since 2000-01-01 UTC), in
/// microseconds since the Unix epoch: read as is, the column costs the server nothing, where
/// `extract(epoch ...)` made every row a `numeric` (a third of the exposures read).
struct PgMicros(i64);

/// 2000-01-01 UTC in microseconds since the Unix epoch.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

impl<'a> tokio_postgres::types::FromSql<'a> for PgMicros {
    fn from_sql(
        _: &tokio_postgres::types::Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let bytes: [u8; 8] = raw
            .try_into()
            .map_err(|_| format!("a timestamptz of {} bytes", raw.len()))?;
        i64::from_be_bytes(bytes)
            .checked_add(PG_EPOCH_MICROS)
            .map(PgMicros)
            .ok_or_else(|| "a timestamptz out of range".into())
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        *ty == tokio_postgres::types::Type::TIMESTAMPTZ
    }
}

fn timed_out(limit: Option<Duration>) -> StoreError {
    unavailable(
        Outage::Timeout,
        format!(
            "the results query took longer than experiments.query_timeout_ms ({} ms)",
            limit.map_or(0, |l| l.as_millis())
        ),
    )
}

fn pg_error(e: tokio_postgres::Error, limit: Option<Duration>) -> StoreError {
    match e.as_db_error() {
        Some(db) if db.code() == &tokio_postgres::error::SqlState::QUERY_CANCELED => {
            timed_out(limit)
        }
        Some(db) => {
            crate::error::database_error(db.code().code(), format!("results: {}", db.message()))
        }
        None => unavailable(Outage::Connection, format!("results: {e}")),
    }
}

/// A read in user order with its next row decoded ahead: the user in `user`, the row's item
/// in `item` (`None` at the end).
struct Ahead<S, T, D> {
    rows: S,
    decode: D,
    user: String,
    previous: String,
    item: Option<T>,
    /// Which read, for the error when rows come out of order.
    name: &'static str,
}

impl<S, R, T, D> Ahead<S, T, D>
where
    S: futures_util::Stream<Item = Result<R, StoreError>> + Unpin,
    D: FnMut(&R, &mut String) -> Result<Option<T>, StoreError>,
{
    /// Reads the first row of `rows`; `decode` writes a row's user into its `String` and gives
    /// its item, or `None` to skip the row.
    async fn new(name: &'static str, rows: S, decode: D) -> Result<Self, StoreError> {
        let mut ahead = Self {
            rows,
            decode,
            user: String::new(),
            previous: String::new(),
            item: None,
            name,
        };
        ahead.advance().await?;
        Ok(ahead)
    }

    /// Reads the next row, failing if its user comes before the last one's.
    async fn advance(&mut self) -> Result<(), StoreError> {
        std::mem::swap(&mut self.user, &mut self.previous);
        let had = self.item.is_some() || !self.previous.is_empty();
        while let Some(row) = self.rows.try_next().await? {
            if let Some(item) = (self.decode)(&row, &mut self.user)? {
                if had && self.user < self.previous {
                    return Err(StoreError::Corrupt {
                        detail: format!(
                            "results: the {} came out of user order ({:?} after {:?})",
                            self.name, self.user, self.previous
                        ),
                    });
                }
                self.item = Some(item);
                return Ok(());
            }
        }
        self.item = None;
        Ok(())
    }

    /// The items of `user` (the reads' users before it are skipped) into `out`.
    async fn take(&mut self, user: &str, out: &mut Vec<T>) -> Result<(), StoreError> {
        while self.item.is_some() && self.user.as_str() < user {
            self.advance().await?;
        }
        while self.item.is_some() && self.user == user {
            out.extend(self.item.take());
            self.advance().await?;
        }
        Ok(())
    }
}

/// The app's store transactions by user (D30), read whole before the merge: a few per buyer,
/// far fewer than the events.
type Transactions = std::collections::HashMap<String, Vec<StoreTransaction>>;

/// Merges the exposures (in user order) with each user's outcomes (reads in user order) and
/// folds them one user at a time.
async fn merge<S, R, D, O, Q, E>(
    query: &ResultsQuery,
    mut exposures: Ahead<S, Exposure, D>,
    outcomes: &mut [Ahead<O, Outcome, E>],
    transactions: &Transactions,
) -> Result<ResultsData, StoreError>
where
    S: futures_util::Stream<Item = Result<R, StoreError>> + Unpin,
    D: FnMut(&R, &mut String) -> Result<Option<Exposure>, StoreError>,
    O: futures_util::Stream<Item = Result<Q, StoreError>> + Unpin,
    E: FnMut(&Q, &mut String) -> Result<Option<Outcome>, StoreError>,
{
    let mut folder = Folder::new(query);
    let (mut user, mut seen, mut theirs) = (String::new(), Vec::new(), Vec::new());
    while exposures.item.is_some() {
        user.clone_from(&exposures.user);
        seen.clear();
        exposures.take(&user, &mut seen).await?;
        theirs.clear();
        for read in outcomes.iter_mut() {
            read.take(&user, &mut theirs).await?;
        }
        let bought = transactions.get(&user).map_or(&[][..], Vec::as_slice);
        folder.user_with(&seen, &theirs, bought);
    }
    Ok(folder.finish())
}

/// An [`Outcome`] of a read's columns.
fn outcome(
    at: i64,
    event_type: &str,
    revenue: Option<f64>,
    currency: Option<String>,
) -> Result<Option<Outcome>, StoreError> {
    let Some(event_type) = EventType::parse(event_type) else {
        return Ok(None);
    };
    Ok(Some(Outcome {
        at: instant(at)?,
        event_type,
        revenue: revenue.zip(currency),
    }))
}

/// A SQL string literal of `value`, one of ours (a UUID, an RFC 3339 time): quoted, with any
/// quote doubled all the same.
fn literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// The rows of a binary `COPY`, errors as the store's.
type CopyRows = std::pin::Pin<
    Box<
        futures_util::stream::MapErr<
            BinaryCopyOutStream,
            Box<dyn FnMut(tokio_postgres::Error) -> StoreError + Send>,
        >,
    >,
>;

impl Postgres {
    /// A connection of the report's own, under its time limit.
    async fn results_client(
        &self,
        limit: Option<Duration>,
    ) -> Result<tokio_postgres::Client, StoreError> {
        let client = self
            .connector
            .connect_client(self.connect_timeout)
            .await
            .map_err(|e| unavailable(Outage::Connection, format!("results: {e}")))?;
        let ms = limit.map_or(0, |l| l.as_millis().max(1));
        client
            .batch_execute(&format!(
                "SET statement_timeout = {ms}; SET default_transaction_read_only = on"
            ))
            .await
            .map_err(|e| pg_error(e, limit))?;
        Ok(client)
    }

    /// The rows of `select` as PostgreSQL's binary `COPY` sends them, columns of `types`, on
    /// a connection of their own: one stream of bytes, cheaper to send and read than a query's
    /// rows (docs/benchmarks-method.md). `COPY` takes no parameters: `select` holds its values
    /// as [`literal`]s.
    async fn copy_out(
        &self,
        select: &str,
        types: &[Type],
        limit: Option<Duration>,
    ) -> Result<CopyRows, StoreError> {
        let client = self.results_client(limit).await?;
        let stream = client
            .copy_out(&format!("COPY ({select}) TO STDOUT (FORMAT binary)"))
            .await
            .map_err(|e| pg_error(e, limit))?;
        // The stream holds the connection open while it is read; the client may go.
        drop(client);
        let error: Box<dyn FnMut(tokio_postgres::Error) -> StoreError + Send> =
            Box::new(move |e| pg_error(e, limit));
        Ok(Box::pin(
            BinaryCopyOutStream::new(stream, types).map_err(error),
        ))
    }

    async fn experiment_results(
        &self,
        query: &ResultsQuery,
        limit: Option<Duration>,
        transactions: &Transactions,
    ) -> Result<ResultsData, StoreError> {
        let rfc3339 = |t: OffsetDateTime| {
            t.format(&time::format_description::well_known::Rfc3339)
                .map(|t| literal(&t))
                .map_err(|e| StoreError::Unstorable {
                    detail: format!("results: the time {t}: {e}"),
                })
        };
        let to = rfc3339(query.to)?;
        // A user's outcomes count from their first exposure, which is in the window: none
        // before its start matters.
        let from = rfc3339(query.from.unwrap_or(OffsetDateTime::UNIX_EPOCH))?;
        let app = literal(&query.app_id.to_string());
        let variants: Vec<String> = query.variants.iter().map(ToString::to_string).collect();
        let exposures = format!(
            "SELECT user_id, occurred_at, variant_id FROM analytics_events \
             WHERE app_id = {app}::uuid AND experiment_id = {} AND {EXPOSURE} \
             AND variant_id IN ({}) AND occurred_at <= {to}::timestamptz \
             ORDER BY user_id COLLATE \"C\"",
            literal(&query.experiment_id.to_string()),
            variants
                .iter()
                .map(|v| literal(v))
                .collect::<Vec<_>>()
                .join(", "),
        );
        let window = format!(
            "app_id = {app}::uuid AND occurred_at >= {from}::timestamptz \
             AND occurred_at <= {to}::timestamptz"
        );
        let outcomes = |types: &str, revenue: &str| {
            format!(
                "SELECT user_id, occurred_at, event_type, {revenue} FROM analytics_events \
                 WHERE {types} AND {window} ORDER BY user_id COLLATE \"C\""
            )
        };
        let mut reads = vec![
            outcomes(
                &format!("{INDEXED_OUTCOMES} AND event_type = 'flow_complete'"),
                "NULL::float8, NULL::text",
            ),
            outcomes(
                &format!("{INDEXED_OUTCOMES} AND event_type = 'purchase_complete'"),
                "(payload->>'revenue')::float8, payload->>'currency'",
            ),
        ];
        let others = other_conversions(query);
        if !others.is_empty() {
            reads.push(outcomes(
                &format!("event_type IN ({})", others.join(", ")),
                "NULL::float8, NULL::text",
            ));
        }
        // Every read starts at once, each on its connection; the merge takes their rows as
        // they come.
        let exposure_types = [Type::TEXT, Type::TIMESTAMPTZ, Type::TEXT];
        let outcome_types = [
            Type::TEXT,
            Type::TIMESTAMPTZ,
            Type::TEXT,
            Type::FLOAT8,
            Type::TEXT,
        ];
        let (exposure_rows, outcome_rows) = futures_util::future::try_join(
            self.copy_out(&exposures, &exposure_types, limit),
            futures_util::future::try_join_all(
                reads
                    .iter()
                    .map(|select| self.copy_out(select, &outcome_types, limit)),
            ),
        )
        .await?;
        let field = move |e: tokio_postgres::Error| pg_error(e, limit);
        let exposures = Ahead::new(
            "exposures",
            exposure_rows,
            |row: &BinaryCopyOutRow, user: &mut String| {
                let variant: &str = row.try_get(2).map_err(field)?;
                let Some(index) = variants.iter().position(|v| v == variant) else {
                    return Ok(None);
                };
                user.clear();
                user.push_str(row.try_get(0).map_err(field)?);
                let at: PgMicros = row.try_get(1).map_err(field)?;
                Ok(Some(Exposure {
                    at: instant(at.0)?,
                    variant: index,
                }))
            },
        )
        .await?;
        let mut outcomes = Vec::with_capacity(outcome_rows.len());
        for rows in outcome_rows {
            let read = Ahead::new(
                "outcomes",
                rows,
                |row: &BinaryCopyOutRow, user: &mut String| {
                    user.clear();
                    user.push_str(row.try_get(0).map_err(field)?);
                    let at: PgMicros = row.try_get(1).map_err(field)?;
                    outcome(
                        at.0,
                        row.try_get(2).map_err(field)?,
                        row.try_get(3).map_err(field)?,
                        row.try_get(4).map_err(field)?,
                    )
                },
            )
            .await?;
            outcomes.push(read);
        }
        merge(query, exposures, &mut outcomes, transactions).await
    }
}

/// One row of a SQLite read: user, µs, and the rest by read.
#[derive(QueryableByName)]
struct SqliteRow {
    #[diesel(sql_type = Text)]
    user_id: String,
    #[diesel(sql_type = BigInt)]
    at: i64,
    #[diesel(sql_type = Text)]
    kind: String,
    #[diesel(sql_type = Nullable<Double>)]
    revenue: Option<f64>,
    #[diesel(sql_type = Nullable<Text>)]
    currency: Option<String>,
}

impl Sqlite {
    async fn experiment_results(
        &self,
        query: &ResultsQuery,
        transactions: &Transactions,
    ) -> Result<ResultsData, StoreError> {
        // Microseconds from the stored RFC 3339 UTC text (fixed width, six fractional digits).
        let micros = "(CAST(strftime('%s', substr(occurred_at, 1, 19)) AS INTEGER) * 1000000 \
                      + CAST(substr(occurred_at, 21, 6) AS INTEGER))";
        let app = DbUuid(*query.app_id.as_uuid());
        let to = crate::types::DbTimestamp(query.to);
        // As on PostgreSQL: no outcome before the window's start counts.
        let from = crate::types::DbTimestamp(query.from.unwrap_or(OffsetDateTime::UNIX_EPOCH));
        let mut types = vec![
            "'flow_complete'".to_owned(),
            "'purchase_complete'".to_owned(),
        ];
        types.extend(other_conversions(query));
        let outcome_sql = format!(
            "SELECT user_id, {micros} AS at, event_type AS kind, \
               CASE WHEN event_type = 'purchase_complete' \
                 THEN CAST(json_extract(payload, '$.revenue') AS REAL) END AS revenue, \
               CASE WHEN event_type = 'purchase_complete' \
                 THEN json_extract(payload, '$.currency') END AS currency \
             FROM analytics_events WHERE app_id = ?1 AND event_type IN ({}) \
               AND occurred_at <= ?2 AND occurred_at >= ?3 ORDER BY user_id",
            types.join(", ")
        );
        let variants: Vec<String> = query.variants.iter().map(ToString::to_string).collect();
        let placeholders: Vec<String> =
            (0..variants.len()).map(|i| format!("?{}", i + 5)).collect();
        let exposure_sql = format!(
            "SELECT user_id, {micros} AS at, variant_id AS kind, NULL AS revenue, NULL AS currency \
             FROM analytics_events WHERE app_id = ?1 AND experiment_id = ?4 AND {EXPOSURE} \
               AND occurred_at <= ?2 AND variant_id IN ({}) ORDER BY user_id",
            placeholders.join(", ")
        );
        let mut conn = self.pool.get().await.map_err(pool_error)?;
        let outcome_rows: Vec<SqliteRow> = diesel::sql_query(outcome_sql)
            .bind::<sql::Uuid, _>(app)
            .bind::<sql::Instant, _>(to)
            .bind::<sql::Instant, _>(from)
            .load(&mut conn)
            .await
            .map_err(query_error)?;
        let mut q = diesel::sql_query(exposure_sql)
            .into_boxed::<diesel::sqlite::Sqlite>()
            .bind::<sql::Uuid, _>(app)
            .bind::<sql::Instant, _>(to)
            .bind::<sql::Instant, _>(from)
            .bind::<Text, _>(query.experiment_id.to_string());
        for v in &variants {
            q = q.bind::<Text, _>(v.clone());
        }
        let exposure_rows: Vec<SqliteRow> = q.load(&mut conn).await.map_err(query_error)?;
        drop(conn);
        let rows = |list: Vec<SqliteRow>| futures_util::stream::iter(list.into_iter().map(Ok));
        let exposures = Ahead::new(
            "exposures",
            rows(exposure_rows),
            |r: &SqliteRow, user: &mut String| {
                let Some(index) = variants.iter().position(|v| *v == r.kind) else {
                    return Ok(None);
                };
                user.clone_from(&r.user_id);
                Ok(Some(Exposure {
                    at: instant(r.at)?,
                    variant: index,
                }))
            },
        )
        .await?;
        let outcomes = Ahead::new(
            "outcomes",
            rows(outcome_rows),
            |r: &SqliteRow, user: &mut String| {
                user.clone_from(&r.user_id);
                outcome(r.at, &r.kind, r.revenue, r.currency.clone())
            },
        )
        .await?;
        merge(query, exposures, &mut [outcomes], transactions).await
    }
}

impl Store {
    /// The counts of `query`; on PostgreSQL with `limit` as each read's `statement_timeout`.
    async fn experiment_results_within(
        &self,
        query: &ResultsQuery,
        limit: Option<Duration>,
    ) -> Result<ResultsData, StoreError> {
        let transactions = self.store_transactions(query).await?;
        match self.db() {
            Db::Postgres(pg) => pg.experiment_results(query, limit, &transactions).await,
            Db::Sqlite(sqlite) => sqlite.experiment_results(query, &transactions).await,
        }
    }

    /// The connections a report of `query` holds while it runs: on PostgreSQL one per read
    /// (the exposures, `flow_complete`, `purchase_complete`, and one more for conversions
    /// beyond those), on SQLite one.
    pub fn results_connections(&self, query: &ResultsQuery) -> u32 {
        match self.db() {
            Db::Postgres(_) => 3 + u32::from(!other_conversions(query).is_empty()),
            Db::Sqlite(_) => 1,
        }
    }
}

/// One experiment's exposed users (`exposure_counts`).
#[derive(QueryableByName)]
struct ExposureRow {
    #[diesel(sql_type = Text)]
    experiment_id: String,
    #[diesel(sql_type = BigInt)]
    n: i64,
}

impl Store {
    /// Per experiment of the query, the users a report counts as exposed (exposures to its
    /// variants up to the end; users of two variants left out, as `Folder` leaves them out);
    /// on PostgreSQL with `limit` as the `statement_timeout`.
    async fn exposure_counts_within(
        &self,
        query: &ExposureCountQuery,
        limit: Option<Duration>,
    ) -> Result<BTreeMap<ExperimentId, u64>, StoreError> {
        if query.experiments.iter().all(|(_, v)| v.is_empty()) {
            return Ok(BTreeMap::new());
        }
        // Validated ids (an id's text is hex digits and hyphens), quoted as literals.
        let known = query
            .experiments
            .iter()
            .filter(|(_, variants)| !variants.is_empty())
            .map(|(id, variants)| {
                let variants: Vec<String> =
                    variants.iter().map(|v| literal(&v.to_string())).collect();
                format!(
                    "(experiment_id = {} AND variant_id IN ({}))",
                    literal(&id.to_string()),
                    variants.join(", ")
                )
            })
            .collect::<Vec<_>>()
            .join(" OR ");
        let sql = format!(
            "SELECT experiment_id, count(*) AS n FROM (\
               SELECT experiment_id, user_id FROM analytics_events \
               WHERE app_id = {{app}} AND {EXPOSURE} AND occurred_at <= {{to}} AND ({known}) \
               GROUP BY experiment_id, user_id HAVING count(DISTINCT variant_id) = 1\
             ) AS exposed GROUP BY experiment_id"
        );
        let app = query.app_id;
        let rows: Vec<ExposureRow> = match self.db() {
            // A connection of its own, as a report's: when the time limit ends the wait, the
            // connection goes with it, never back to a pool in the middle of a transaction.
            Db::Postgres(pg) => {
                let client = pg.results_client(limit).await?;
                let to = query
                    .to
                    .format(&time::format_description::well_known::Rfc3339)
                    .map_err(|e| StoreError::Unstorable {
                        detail: format!("results: the time {}: {e}", query.to),
                    })?;
                let sql = sql
                    .replacen("SELECT experiment_id", "SELECT experiment_id::text", 1)
                    .replace("{app}", &format!("{}::uuid", literal(&app.to_string())))
                    .replace("{to}", &format!("{}::timestamptz", literal(&to)));
                let mut rows = Vec::new();
                for message in client
                    .simple_query(&sql)
                    .await
                    .map_err(|e| pg_error(e, limit))?
                {
                    if let tokio_postgres::SimpleQueryMessage::Row(row) = message {
                        let (Some(experiment_id), Some(n)) = (row.get(0), row.get(1)) else {
                            return Err(corrupt("results: an exposure count without a value"));
                        };
                        rows.push(ExposureRow {
                            experiment_id: experiment_id.to_owned(),
                            n: n.parse().map_err(|_| {
                                corrupt(format!(
                                    "results: the exposure count {n:?} is not a number"
                                ))
                            })?,
                        });
                    }
                }
                rows
            }
            Db::Sqlite(sqlite) => {
                let app = DbUuid(*app.as_uuid());
                let q = diesel::sql_query(sql.replace("{app}", "?1").replace("{to}", "?2"))
                    .bind::<sql::Uuid, _>(app)
                    .bind::<sql::Instant, _>(crate::types::DbTimestamp(query.to));
                let mut conn = sqlite.pool.get().await.map_err(pool_error)?;
                q.load(&mut conn).await.map_err(query_error)?
            }
        };
        Ok(rows
            .into_iter()
            .filter_map(|r| {
                let id: ExperimentId = r.experiment_id.parse().ok()?;
                (id.to_string() == r.experiment_id).then_some((id, u64::try_from(r.n).unwrap_or(0)))
            })
            .collect())
    }
}

impl ResultsSource for Store {
    fn experiment_results<'a>(
        &'a self,
        query: &'a ResultsQuery,
    ) -> BoxFuture<'a, Result<ResultsData, StoreError>> {
        Box::pin(self.experiment_results_within(query, None))
    }

    fn exposure_counts<'a>(
        &'a self,
        query: &'a ExposureCountQuery,
    ) -> BoxFuture<'a, Result<BTreeMap<ExperimentId, u64>, StoreError>> {
        Box::pin(self.exposure_counts_within(query, None))
    }
}

/// Results read with a time limit (D22: `experiments.query_timeout_ms`), on a store of their
/// own (a small pool, possibly on a replica: `experiments.database_url`), holding at most
/// `max_connections` connections at once (a report waits for its turn, within its time limit),
/// so a heavy report never slows resolve or event writes.
#[derive(Clone)]
pub struct ResultsReader {
    store: Store,
    limit: Duration,
    connections: Arc<Semaphore>,
    max_connections: u32,
}

impl ResultsReader {
    /// Reads from `store`, each report or list limited to `limit`, all of them together to
    /// `max_connections` connections (a report on PostgreSQL holds
    /// [`Store::results_connections`]; given fewer, it takes them all).
    pub fn new(store: Store, limit: Duration, max_connections: usize) -> Self {
        let max_connections = u32::try_from(max_connections.max(1)).unwrap_or(u32::MAX);
        Self {
            store,
            limit,
            connections: Arc::new(Semaphore::new(max_connections as usize)),
            max_connections,
        }
    }

    /// `read` with `connections` of the budget, answered within the time limit.
    ///
    /// The read runs in a task of its own that holds its connections to its end: the caller
    /// stops waiting at the limit (a `Timeout` outage, D22's 503 `results_timeout`), but a
    /// statement already running is never dropped in the middle. On SQLite that would drop
    /// diesel-async's blocking task mid-statement, which blocks in place (a panic on a
    /// current-thread runtime, as actix's workers are) and leaves the pooled connection shared
    /// (a second panic when the pool recycles it). PostgreSQL's reads end by themselves at
    /// the limit (`statement_timeout`); SQLite's run to their end, and because they keep their
    /// connections until then, the reports after them wait within `max_connections` instead
    /// of piling up. A read whose caller has gone before it got its connections never starts.
    async fn limited<T, F>(&self, connections: u32, read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let budget = Arc::clone(&self.connections);
        let wanted = connections.min(self.max_connections);
        let (answer, waiting) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let mut answer = answer;
            let held = {
                let acquire = std::pin::pin!(budget.acquire_many_owned(wanted));
                let gone = std::pin::pin!(answer.closed());
                match futures_util::future::select(gone, acquire).await {
                    futures_util::future::Either::Left(_) => return,
                    futures_util::future::Either::Right((held, _)) => held,
                }
            };
            let result = match held {
                Ok(_held) => read.await,
                Err(_) => Err(unavailable(
                    Outage::Busy,
                    "results: the reader is closed".into(),
                )),
            };
            let _ = answer.send(result);
        });
        match tokio::time::timeout(self.limit, waiting).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(StoreError::Other {
                detail: "results: the read ended without an answer".to_owned(),
            }),
            Err(_) => Err(timed_out(Some(self.limit))),
        }
    }
}

impl ResultsSource for ResultsReader {
    fn experiment_results<'a>(
        &'a self,
        query: &'a ResultsQuery,
    ) -> BoxFuture<'a, Result<ResultsData, StoreError>> {
        let (store, query, limit) = (self.store.clone(), query.clone(), self.limit);
        Box::pin(
            self.limited(self.store.results_connections(&query), async move {
                store.experiment_results_within(&query, Some(limit)).await
            }),
        )
    }

    fn exposure_counts<'a>(
        &'a self,
        query: &'a ExposureCountQuery,
    ) -> BoxFuture<'a, Result<BTreeMap<ExperimentId, u64>, StoreError>> {
        let (store, query, limit) = (self.store.clone(), query.clone(), self.limit);
        Box::pin(self.limited(1, async move {
            store.exposure_counts_within(&query, Some(limit)).await
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Rows =
        futures_util::stream::Iter<std::vec::IntoIter<Result<(&'static str, u32), StoreError>>>;

    async fn read(
        rows: &[(&'static str, u32)],
    ) -> Ahead<
        Rows,
        u32,
        impl FnMut(&(&'static str, u32), &mut String) -> Result<Option<u32>, StoreError>,
    > {
        let rows: Vec<_> = rows.iter().copied().map(Ok).collect();
        Ahead::new(
            "rows",
            futures_util::stream::iter(rows),
            |r: &(&str, u32), user: &mut String| {
                user.clear();
                user.push_str(r.0);
                // Odd items are skipped, as a read skips rows of no interest.
                Ok(r.1.is_multiple_of(2).then_some(r.1))
            },
        )
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn a_read_gives_each_users_items_and_skips_users_before() {
        let mut ahead = read(&[("a", 2), ("b", 4), ("b", 5), ("b", 6), ("c", 8), ("e", 10)]).await;
        let mut out = Vec::new();
        ahead.take("b", &mut out).await.unwrap();
        assert_eq!(out, [4, 6]);
        out.clear();
        ahead.take("d", &mut out).await.unwrap();
        assert!(out.is_empty());
        ahead.take("e", &mut out).await.unwrap();
        assert_eq!(out, [10]);
        assert!(ahead.item.is_none());
    }

    #[tokio::test]
    async fn users_in_the_bytes_order_not_another() {
        // "Z" (0x5a) before "a" (0x61) by bytes; "é" (0xc3 0xa9) after "z".
        let mut ahead = read(&[("Z", 2), ("a", 4), ("z", 6), ("é", 8)]).await;
        let mut out = Vec::new();
        ahead.take("é", &mut out).await.unwrap();
        assert_eq!(out, [8]);
        // A read in another order fails rather than miscounting.
        let mut ahead = read(&[("a", 2), ("Z", 4)]).await;
        let error = ahead.take("zz", &mut Vec::new()).await.unwrap_err();
        assert!(
            matches!(&error, StoreError::Corrupt { detail } if detail.contains("\"Z\" after \"a\"")),
            "{error:?}"
        );
    }
}
