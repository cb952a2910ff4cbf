//! [`ResultsSource`] on [`Store`] (D22): one experiment's events aggregated in SQL, by the rules
//! of `flowgate_domain::results` (whose `aggregate` is the reference the contract suite holds
//! both backends to).
//!
//! One statement per report, the same shape on both backends (only functions differ):
//!
//! 1. `exposure`: per user, the first exposure in the window, the variant and how many
//!    variants were seen (the experiment's `flow_open` and holdout `resolve_no_flow` events);
//! 2. `per_user`: the users of one variant, joined to their app's events of the metrics' types
//!    at or after their first exposure and up to the end: the first event of each conversion
//!    metric, the converted revenue (rates as a `VALUES` list), purchases without a rate;
//! 3. `marks`: one row per user and thing that happened (exposure, first conversion of each
//!    metric), so totals and daily counts are two `GROUP BY`s of the same rows;
//! 4. the result, in long form (`kind`: 0 totals, 1 daily, 2 revenue, 3 multiple exposures),
//!    so its columns are the same whatever the number of metrics.
//!
//! A [`ResultsReader`] runs it with a time limit (PostgreSQL's `statement_timeout`, so the
//! server stops the work; on SQLite, where a statement cannot be cut from outside, the wait is
//! bounded and the query finishes on its own connection).

use std::collections::BTreeMap;
use std::time::Duration;

use diesel::pg::Pg;
use diesel::query_builder::BoxedSqlQuery;
use diesel::sql_types::{BigInt, Double, Integer, Nullable, Text};
use diesel::sqlite::Sqlite as SqliteBackend;
use diesel::QueryableByName;
use diesel_async::{AsyncConnection, RunQueryDsl};
use flowgate_domain::ids::{AppId, ExperimentId};
use flowgate_domain::ports::{BoxFuture, Outage, ResultsSource, StoreError};
use flowgate_domain::results::{
    DailyCounts, ResultsData, ResultsQuery, VariantCounts, VariantSums,
};
use time::format_description::well_known::Iso8601;

use crate::db::Db;
use crate::error::{pool_error, query_error, unavailable};
use crate::store::Store;
use crate::types::{sql, DbTimestamp, DbUuid};

/// A parameter of the statement.
enum Param {
    Uuid(DbUuid),
    Text(String),
    Instant(DbTimestamp),
    Float(f64),
}

/// The statement's text for one backend and its parameters in order.
struct Statement {
    postgres: bool,
    text: String,
    params: Vec<Param>,
}

impl Statement {
    /// A numbered placeholder for `param` (`$n` on PostgreSQL, `?n` on SQLite), so the text
    /// may use it anywhere and more than once.
    fn param(&mut self, param: Param) -> String {
        self.params.push(param);
        let sign = if self.postgres { '$' } else { '?' };
        format!("{sign}{}", self.params.len())
    }
}

/// The SQL of `query` for PostgreSQL (`postgres`) or SQLite.
fn statement(query: &ResultsQuery, postgres: bool) -> Statement {
    let mut s = Statement {
        postgres,
        text: String::new(),
        params: Vec::new(),
    };
    let (revenue, currency, day, text_null, instant_null) = if postgres {
        (
            "(e.payload->>'revenue')::float8",
            "e.payload->>'currency'",
            "to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
            "NULL::text",
            "NULL::timestamptz",
        )
    } else {
        (
            "CAST(json_extract(e.payload, '$.revenue') AS REAL)",
            "json_extract(e.payload, '$.currency')",
            "substr(at, 1, 10)",
            "NULL",
            "NULL",
        )
    };
    let app = s.param(Param::Uuid(DbUuid(*query.app_id.as_uuid())));
    let experiment = s.param(Param::Text(query.experiment_id.to_string()));
    let variants: Vec<String> = query
        .variants
        .iter()
        .map(|v| s.param(Param::Text(v.to_string())))
        .collect();
    let to = s.param(Param::Instant(DbTimestamp(query.to)));
    let from = query
        .from
        .map(|from| {
            format!(
                "AND occurred_at >= {}",
                s.param(Param::Instant(DbTimestamp(from)))
            )
        })
        .unwrap_or_default();
    let metrics: Vec<String> = query
        .conversions
        .iter()
        .map(|t| s.param(Param::Text(t.as_str().to_owned())))
        .collect();
    let mut rates: Vec<(String, f64)> = vec![(query.currency.clone(), 1.0)];
    rates.extend(
        query
            .exchange_rates
            .iter()
            .filter(|(c, _)| **c != query.currency)
            .map(|(c, r)| (c.clone(), *r)),
    );
    let rates: Vec<String> = rates
        .into_iter()
        .map(|(c, r)| {
            let c = s.param(Param::Text(c));
            let r = s.param(Param::Float(r));
            if postgres {
                format!("({c}::text, {r}::float8)")
            } else {
                format!("({c}, {r})")
            }
        })
        .collect();
    let firsts: String = metrics
        .iter()
        .enumerate()
        .map(|(i, m)| format!("min(e.occurred_at) FILTER (WHERE e.event_type = {m}) AS c{i},\n"))
        .collect();
    let marks: String = (0..metrics.len())
        .map(|i| format!("UNION ALL SELECT variant, {i} AS metric, c{i} AS at FROM per_user WHERE c{i} IS NOT NULL\n"))
        .collect();
    s.text = format!(
        "WITH rates(currency, rate) AS (VALUES {rates}),
exposure AS (
  SELECT user_id, min(occurred_at) AS first_at, min(variant_id) AS variant,
         count(DISTINCT variant_id) AS variants
  FROM analytics_events
  WHERE app_id = {app} AND experiment_id = {experiment} AND variant_id IN ({variants})
    AND (event_type = 'flow_open' OR (event_type = 'resolve_no_flow' AND reason = 'holdout'))
    AND occurred_at <= {to} {from}
  GROUP BY user_id
),
per_user AS (
  SELECT x.user_id, x.variant, x.first_at,
    {firsts}    coalesce(sum({revenue} * r.rate) FILTER (WHERE e.event_type = 'purchase_complete'), 0.0) AS revenue,
    count(*) FILTER (WHERE e.event_type = 'purchase_complete' AND {revenue} IS NOT NULL
                     AND {currency} IS NOT NULL AND r.rate IS NULL) AS unconverted
  FROM exposure x
  LEFT JOIN analytics_events e ON e.app_id = {app} AND e.user_id = x.user_id
    AND e.occurred_at >= x.first_at AND e.occurred_at <= {to}
    AND e.event_type IN ({metrics}, 'purchase_complete')
  LEFT JOIN rates r ON r.currency = {currency}
  WHERE x.variants = 1
  GROUP BY x.user_id, x.variant, x.first_at
),
marks AS (
  SELECT variant, -1 AS metric, first_at AS at FROM per_user
{marks})
SELECT 0 AS kind, variant, metric, {text_null} AS day, count(*) AS n,
       NULL AS revenue, NULL AS revenue_squares, NULL AS unconverted, {instant_null} AS first_at
  FROM marks GROUP BY variant, metric
UNION ALL
SELECT 1, variant, metric, {day}, count(*), NULL, NULL, NULL, {instant_null}
  FROM marks GROUP BY variant, metric, {day}
UNION ALL
SELECT 2, variant, NULL, {text_null}, count(*), sum(revenue), sum(revenue * revenue),
       sum(unconverted), min(first_at)
  FROM per_user GROUP BY variant
UNION ALL
SELECT 3, {text_null}, NULL, {text_null}, count(*), NULL, NULL, NULL, {instant_null}
  FROM exposure WHERE variants > 1",
        variants = variants.join(", "),
        metrics = metrics.join(", "),
        rates = rates.join(", "),
    );
    if postgres {
        // PostgreSQL types the NULL columns of the first branch by the others; say so.
        s.text = s.text.replacen(
            "NULL AS revenue, NULL AS revenue_squares, NULL AS unconverted",
            "NULL::float8 AS revenue, NULL::float8 AS revenue_squares, NULL::bigint AS unconverted",
            1,
        );
        s.text = s.text.replacen(
            "sum(unconverted), min(first_at)",
            "sum(unconverted)::bigint, min(first_at)",
            1,
        );
    }
    s
}

/// One row of the statement's long-form result.
#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Integer)]
    kind: i32,
    #[diesel(sql_type = Nullable<Text>)]
    variant: Option<String>,
    #[diesel(sql_type = Nullable<Integer>)]
    metric: Option<i32>,
    #[diesel(sql_type = Nullable<Text>)]
    day: Option<String>,
    #[diesel(sql_type = BigInt)]
    n: i64,
    #[diesel(sql_type = Nullable<Double>)]
    revenue: Option<f64>,
    #[diesel(sql_type = Nullable<Double>)]
    revenue_squares: Option<f64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    unconverted: Option<i64>,
    #[diesel(sql_type = Nullable<sql::Instant>)]
    first_at: Option<DbTimestamp>,
}

fn bind_pg(statement: Statement) -> BoxedSqlQuery<'static, Pg, diesel::query_builder::SqlQuery> {
    let mut q = diesel::sql_query(statement.text).into_boxed::<Pg>();
    for p in statement.params {
        q = match p {
            Param::Uuid(v) => q.bind::<sql::Uuid, _>(v),
            Param::Text(v) => q.bind::<Text, _>(v),
            Param::Instant(v) => q.bind::<sql::Instant, _>(v),
            Param::Float(v) => q.bind::<Double, _>(v),
        };
    }
    q
}

fn bind_sqlite(
    statement: Statement,
) -> BoxedSqlQuery<'static, SqliteBackend, diesel::query_builder::SqlQuery> {
    let mut q = diesel::sql_query(statement.text).into_boxed::<SqliteBackend>();
    for p in statement.params {
        q = match p {
            Param::Uuid(v) => q.bind::<sql::Uuid, _>(v),
            Param::Text(v) => q.bind::<Text, _>(v),
            Param::Instant(v) => q.bind::<sql::Instant, _>(v),
            Param::Float(v) => q.bind::<Double, _>(v),
        };
    }
    q
}

/// The counts of `query` from the statement's rows.
fn counts(query: &ResultsQuery, rows: Vec<Row>) -> Result<ResultsData, StoreError> {
    let metrics = query.conversions.len();
    let variant_of = |text: Option<&str>| {
        query
            .variants
            .iter()
            .copied()
            .find(|v| Some(v.to_string().as_str()) == text)
    };
    let mut data = ResultsData::default();
    let variant = |data: &mut ResultsData, id| -> usize {
        match data
            .variants
            .iter()
            .position(|v: &VariantCounts| v.variant_id == id)
        {
            Some(i) => i,
            None => {
                data.variants.push(VariantCounts::new(
                    id,
                    0,
                    vec![0; metrics],
                    VariantSums::default(),
                ));
                data.variants.len() - 1
            }
        }
    };
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    for row in rows {
        match row.kind {
            0 => {
                let Some(id) = variant_of(row.variant.as_deref()) else {
                    continue;
                };
                let i = variant(&mut data, id);
                match usize::try_from(row.metric.unwrap_or(-1)) {
                    Ok(m) if m < metrics => data.variants[i].conversions[m] = count(row.n),
                    _ => data.variants[i].users = count(row.n),
                }
            }
            1 => {
                let Some(id) = variant_of(row.variant.as_deref()) else {
                    continue;
                };
                let Some(day) = row.day.as_deref() else {
                    continue;
                };
                let date =
                    time::Date::parse(day, &Iso8601::DATE).map_err(|e| StoreError::Corrupt {
                        detail: format!("results: day {day:?}: {e}"),
                    })?;
                let entry = match data
                    .daily
                    .iter()
                    .position(|d| d.date == date && d.variant_id == id)
                {
                    Some(i) => i,
                    None => {
                        data.daily
                            .push(DailyCounts::new(date, id, 0, vec![0; metrics]));
                        data.daily.len() - 1
                    }
                };
                match usize::try_from(row.metric.unwrap_or(-1)) {
                    Ok(m) if m < metrics => data.daily[entry].conversions[m] = count(row.n),
                    _ => data.daily[entry].users = count(row.n),
                }
            }
            2 => {
                let Some(id) = variant_of(row.variant.as_deref()) else {
                    continue;
                };
                let i = variant(&mut data, id);
                data.variants[i].revenue = VariantSums {
                    users: count(row.n),
                    sum: row.revenue.unwrap_or(0.0),
                    sum_squares: row.revenue_squares.unwrap_or(0.0),
                };
                data.unconverted_purchases += row.unconverted.map_or(0, count);
                let first = row.first_at.map(|t| t.0);
                data.first_exposure = match (data.first_exposure, first) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            3 => data.multiple_exposures = count(row.n),
            _ => {}
        }
    }
    Ok(data)
}

impl Store {
    /// The counts of `query`; with `limit`, failing with [`Outage::Timeout`] past it.
    pub async fn experiment_results_within(
        &self,
        query: &ResultsQuery,
        limit: Option<Duration>,
    ) -> Result<ResultsData, StoreError> {
        let rows: Vec<Row> = match self.db() {
            Db::Postgres(pg) => {
                let statement = bind_pg(statement(query, true));
                let mut conn = pg.pool.get().await.map_err(pool_error)?;
                let result: Result<Vec<Row>, diesel::result::Error> = conn
                    .transaction(async |conn| {
                        diesel::sql_query("SET TRANSACTION READ ONLY")
                            .execute(conn)
                            .await?;
                        if let Some(limit) = limit {
                            diesel::sql_query(format!(
                                "SET LOCAL statement_timeout = {}",
                                limit.as_millis().max(1)
                            ))
                            .execute(conn)
                            .await?;
                        }
                        statement.load(conn).await
                    })
                    .await;
                result.map_err(|e| match &e {
                    diesel::result::Error::DatabaseError(_, info)
                        if info.message().contains("statement timeout") =>
                    {
                        timed_out(limit)
                    }
                    _ => query_error(e),
                })?
            }
            Db::Sqlite(sqlite) => {
                let statement = bind_sqlite(statement(query, false));
                let mut conn = sqlite.pool.get().await.map_err(pool_error)?;
                let load = async move { statement.load::<Row>(&mut conn).await };
                match limit {
                    Some(limit) => tokio::time::timeout(limit, load)
                        .await
                        .map_err(|_| timed_out(Some(limit)))?,
                    None => load.await,
                }
                .map_err(query_error)?
            }
        };
        counts(query, rows)
    }
}

fn timed_out(limit: Option<Duration>) -> StoreError {
    unavailable(
        Outage::Timeout,
        format!(
            "the results query took longer than experiments.query_timeout_ms ({} ms) and was \
             stopped",
            limit.map_or(0, |l| l.as_millis())
        ),
    )
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
    /// Per experiment of `app`, the users with an exposure; with `limit` as for reports.
    pub async fn exposure_counts_within(
        &self,
        app: AppId,
        limit: Option<Duration>,
    ) -> Result<BTreeMap<ExperimentId, u64>, StoreError> {
        const SQL: &str = "SELECT experiment_id, count(DISTINCT user_id) AS n FROM analytics_events \
             WHERE app_id = {app} AND experiment_id IS NOT NULL \
             AND (event_type = 'flow_open' OR (event_type = 'resolve_no_flow' AND reason = 'holdout')) \
             GROUP BY experiment_id";
        let app = DbUuid(*app.as_uuid());
        let rows: Vec<ExposureRow> = match self.db() {
            Db::Postgres(pg) => {
                let q = diesel::sql_query(SQL.replace("{app}", "$1")).bind::<sql::Uuid, _>(app);
                let mut conn = pg.pool.get().await.map_err(pool_error)?;
                conn.transaction(async |conn| {
                    if let Some(limit) = limit {
                        diesel::sql_query(format!(
                            "SET LOCAL statement_timeout = {}",
                            limit.as_millis().max(1)
                        ))
                        .execute(conn)
                        .await?;
                    }
                    q.load(conn).await
                })
                .await
                .map_err(query_error)?
            }
            Db::Sqlite(sqlite) => {
                let q = diesel::sql_query(SQL.replace("{app}", "?1")).bind::<sql::Uuid, _>(app);
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

    fn exposure_counts(
        &self,
        app: AppId,
    ) -> BoxFuture<'_, Result<BTreeMap<ExperimentId, u64>, StoreError>> {
        Box::pin(self.exposure_counts_within(app, None))
    }
}

/// Results read with a time limit (D22: `experiments.query_timeout_ms`), on a store of their
/// own (a small pool, possibly on a replica: `experiments.database_url`), so a heavy report
/// never slows resolve or event writes.
#[derive(Clone)]
pub struct ResultsReader {
    store: Store,
    limit: Duration,
}

impl ResultsReader {
    /// Reads from `store`, each query limited to `limit`.
    pub fn new(store: Store, limit: Duration) -> Self {
        Self { store, limit }
    }
}

impl ResultsSource for ResultsReader {
    fn experiment_results<'a>(
        &'a self,
        query: &'a ResultsQuery,
    ) -> BoxFuture<'a, Result<ResultsData, StoreError>> {
        Box::pin(
            self.store
                .experiment_results_within(query, Some(self.limit)),
        )
    }

    fn exposure_counts(
        &self,
        app: AppId,
    ) -> BoxFuture<'_, Result<BTreeMap<ExperimentId, u64>, StoreError>> {
        Box::pin(self.store.exposure_counts_within(app, Some(self.limit)))
    }
}
