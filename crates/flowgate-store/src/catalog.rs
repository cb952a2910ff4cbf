//! [`CatalogSource`] on [`Store`]: loading the catalog in one read transaction, the revision and
//! change detection (D12), and the catalog's writers: [`Store::replace_catalog`] and the
//! import's read-plan-write transaction (D13).

use std::collections::HashMap;
use std::time::Duration;

use diesel::dsl::{Find, Select};
use diesel::prelude::*;
use diesel::upsert::excluded;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use flowgate_domain::catalog::{
    AppData, CatalogData, ExperimentData, ExperimentStatus, FlowData, FlowVersionData, Font,
    PlacementData, RuleData, VariantData, WorkspaceData,
};
use flowgate_domain::ids::{AppId, ExperimentId, FlowId, FlowVersionId, VariantId, WorkspaceId};
use flowgate_domain::ports::{BoxFuture, CatalogSource, Outage, StoreError};
use futures_util::StreamExt;
use serde_json::value::RawValue;
use tokio::time::Instant;

use crate::db::{columns, Conn, Db, Postgres};
use crate::error::{
    connection_error, corrupt, query_error, unavailable, unstorable, TransactionError,
};
use crate::history::ImportEntry;
use crate::keys::{KeyRow, NewKey};
use crate::schema::{
    api_keys, apps, catalog_imports, catalog_revision, experiments, flow_versions, flows,
    placements, rules, variants, workspaces,
};
use crate::store::Store;
use crate::types::{sql, DbUuid};

/// The PostgreSQL notification channel the revision triggers notify (migrations/postgres).
pub const CATALOG_CHANNEL: &str = "flowgate_catalog";

diesel::define_sql_function! {
    /// SQL `COALESCE` of two nullable timestamps.
    fn coalesce(a: diesel::sql_types::Nullable<sql::Instant>, b: diesel::sql_types::Nullable<sql::Instant>) -> diesel::sql_types::Nullable<sql::Instant>;
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = workspaces, treat_none_as_default_value = false)]
struct WorkspaceRow {
    id: DbUuid,
    name: String,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = apps, treat_none_as_default_value = false)]
struct AppRow {
    id: DbUuid,
    workspace_id: DbUuid,
    name: String,
    media_base_url: String,
    icon_base_url: String,
    cache_ttl_seconds: Option<i32>,
    saved_groups: String,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = flows, treat_none_as_default_value = false)]
struct FlowRow {
    id: DbUuid,
    app_id: DbUuid,
    name: String,
    published_version: Option<i32>,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = flow_versions, treat_none_as_default_value = false)]
struct VersionRow {
    id: DbUuid,
    flow_id: DbUuid,
    version: i32,
    schema_version: i32,
    flow_schema: String,
    fonts: String,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = placements)]
struct PlacementRow {
    id: i64,
    app_id: DbUuid,
    key: String,
    default_flow_id: Option<DbUuid>,
}

#[derive(Insertable)]
#[diesel(table_name = placements, treat_none_as_default_value = false)]
struct NewPlacement {
    app_id: DbUuid,
    key: String,
    default_flow_id: Option<DbUuid>,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = rules, treat_none_as_default_value = false)]
struct RuleRow {
    placement_id: i64,
    position: i32,
    audience: Option<String>,
    flow_id: Option<DbUuid>,
    experiment_id: Option<DbUuid>,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = experiments, treat_none_as_default_value = false)]
struct ExperimentRow {
    id: DbUuid,
    app_id: DbUuid,
    name: String,
    status: String,
    seed: Option<String>,
    coverage: Option<f64>,
    namespace_id: Option<String>,
    namespace_start: Option<f64>,
    namespace_end: Option<f64>,
    hash_version: Option<i32>,
    sticky: bool,
    bucket_version: i32,
    min_bucket_version: i32,
    fallback_attribute: Option<String>,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = variants, treat_none_as_default_value = false)]
struct VariantRow {
    id: DbUuid,
    experiment_id: DbUuid,
    position: i32,
    name: String,
    weight: f64,
    flow_id: Option<DbUuid>,
}

/// Everything `load_catalog` reads, as rows, before it becomes [`CatalogData`].
struct CatalogRows {
    revision: i64,
    workspaces: Vec<WorkspaceRow>,
    apps: Vec<AppRow>,
    flows: Vec<FlowRow>,
    versions: Vec<VersionRow>,
    placements: Vec<PlacementRow>,
    rules: Vec<RuleRow>,
    experiments: Vec<ExperimentRow>,
    variants: Vec<VariantRow>,
    keys: Vec<KeyRow>,
}

/// The query of the revision row.
fn revision_query() -> Select<Find<catalog_revision::table, i32>, catalog_revision::revision> {
    catalog_revision::table
        .find(1)
        .select(catalog_revision::revision)
}

/// Reads every catalog row (in the caller's transaction).
async fn load_rows(conn: &mut Conn<'_>) -> QueryResult<CatalogRows> {
    Ok(CatalogRows {
        revision: conn.row(revision_query()).await?,
        workspaces: conn
            .rows(
                workspaces::table
                    .select(columns::<WorkspaceRow>())
                    .order(workspaces::id),
            )
            .await?,
        apps: conn
            .rows(apps::table.select(columns::<AppRow>()).order(apps::id))
            .await?,
        flows: conn
            .rows(flows::table.select(columns::<FlowRow>()).order(flows::id))
            .await?,
        versions: conn
            .rows(
                flow_versions::table
                    .select(columns::<VersionRow>())
                    .order((flow_versions::flow_id, flow_versions::version)),
            )
            .await?,
        placements: conn
            .rows(
                placements::table
                    .select(columns::<PlacementRow>())
                    .order(placements::app_id),
            )
            .await?,
        rules: conn
            .rows(
                rules::table
                    .select(columns::<RuleRow>())
                    .order((rules::placement_id, rules::position)),
            )
            .await?,
        experiments: conn
            .rows(experiments::table.select(columns::<ExperimentRow>()))
            .await?,
        variants: conn
            .rows(
                variants::table
                    .select(columns::<VariantRow>())
                    .order((variants::experiment_id, variants::position)),
            )
            .await?,
        keys: conn
            .rows(
                api_keys::table
                    .select(columns::<KeyRow>())
                    .order((api_keys::created_at, api_keys::id)),
            )
            .await?,
    })
}

/// Writes [`WriteRows`] (in the caller's transaction): the upsert of
/// [`Store::replace_catalog`].
async fn write_rows(conn: &mut Conn<'_>, rows: &WriteRows) -> Result<(), TransactionError> {
    for row in &rows.workspaces {
        conn.run(
            diesel::insert_into(workspaces::table)
                .values(row)
                .on_conflict(workspaces::id)
                .do_update()
                .set(workspaces::name.eq(excluded(workspaces::name))),
        )
        .await?;
    }
    for row in &rows.apps {
        conn.run(
            diesel::insert_into(apps::table)
                .values(row)
                .on_conflict(apps::id)
                .do_update()
                .set((
                    apps::workspace_id.eq(excluded(apps::workspace_id)),
                    apps::name.eq(excluded(apps::name)),
                    apps::media_base_url.eq(excluded(apps::media_base_url)),
                    apps::icon_base_url.eq(excluded(apps::icon_base_url)),
                    apps::cache_ttl_seconds.eq(excluded(apps::cache_ttl_seconds)),
                    apps::saved_groups.eq(excluded(apps::saved_groups)),
                )),
        )
        .await?;
    }
    for row in &rows.flows {
        conn.run(
            diesel::insert_into(flows::table)
                .values(row)
                .on_conflict(flows::id)
                .do_update()
                .set((
                    flows::app_id.eq(excluded(flows::app_id)),
                    flows::name.eq(excluded(flows::name)),
                    flows::published_version.eq(excluded(flows::published_version)),
                )),
        )
        .await?;
    }
    for row in &rows.versions {
        conn.run(
            diesel::insert_into(flow_versions::table)
                .values(row)
                .on_conflict(flow_versions::id)
                .do_update()
                .set((
                    flow_versions::flow_id.eq(excluded(flow_versions::flow_id)),
                    flow_versions::version.eq(excluded(flow_versions::version)),
                    flow_versions::schema_version.eq(excluded(flow_versions::schema_version)),
                    flow_versions::flow_schema.eq(excluded(flow_versions::flow_schema)),
                    flow_versions::fonts.eq(excluded(flow_versions::fonts)),
                )),
        )
        .await?;
    }
    for placement in &rows.placements {
        write_placement(conn, placement).await?;
    }
    for row in &rows.keys {
        conn.run(
            diesel::insert_into(api_keys::table)
                .values(row)
                .on_conflict(api_keys::id)
                .do_update()
                .set((
                    api_keys::name.eq(excluded(api_keys::name)),
                    // Never un-revoke a key.
                    api_keys::revoked_at.eq(coalesce(
                        api_keys::revoked_at,
                        excluded(api_keys::revoked_at),
                    )),
                )),
        )
        .await?;
    }
    Ok(())
}

/// Upserts a placement and replaces its rule list with the one given (D13), with the
/// experiments the rules target.
async fn write_placement(
    conn: &mut Conn<'_>,
    placement: &PlacementWrite,
) -> Result<(), TransactionError> {
    let placement_id: i64 = conn
        .row(
            diesel::insert_into(placements::table)
                .values(&placement.row)
                .on_conflict((placements::app_id, placements::key))
                .do_update()
                .set(placements::default_flow_id.eq(excluded(placements::default_flow_id)))
                .returning(placements::id),
        )
        .await?;
    conn.run(diesel::delete(
        rules::table.filter(rules::placement_id.eq(placement_id)),
    ))
    .await?;
    for (position, rule) in placement.rules.iter().enumerate() {
        if let Some((experiment, variant_rows)) = &rule.experiment {
            write_experiment(conn, experiment, variant_rows).await?;
        }
        conn.run(diesel::insert_into(rules::table).values(RuleRow {
            placement_id,
            position: to_i32(position, "rule position")?,
            audience: rule.audience.clone(),
            flow_id: rule.flow_id,
            experiment_id: rule.experiment.as_ref().map(|(e, _)| e.id),
        }))
        .await?;
    }
    Ok(())
}

/// Upserts an experiment and replaces its variants with the ones given.
async fn write_experiment(
    conn: &mut Conn<'_>,
    experiment: &ExperimentRow,
    variant_rows: &[VariantRow],
) -> QueryResult<()> {
    conn.run(
        diesel::insert_into(experiments::table)
            .values(experiment)
            .on_conflict(experiments::id)
            .do_update()
            .set((
                experiments::app_id.eq(excluded(experiments::app_id)),
                experiments::name.eq(excluded(experiments::name)),
                experiments::status.eq(excluded(experiments::status)),
                experiments::seed.eq(excluded(experiments::seed)),
                experiments::coverage.eq(excluded(experiments::coverage)),
                experiments::namespace_id.eq(excluded(experiments::namespace_id)),
                experiments::namespace_start.eq(excluded(experiments::namespace_start)),
                experiments::namespace_end.eq(excluded(experiments::namespace_end)),
                experiments::hash_version.eq(excluded(experiments::hash_version)),
                experiments::sticky.eq(excluded(experiments::sticky)),
                experiments::bucket_version.eq(excluded(experiments::bucket_version)),
                experiments::min_bucket_version.eq(excluded(experiments::min_bucket_version)),
                experiments::fallback_attribute.eq(excluded(experiments::fallback_attribute)),
            )),
    )
    .await?;
    conn.run(diesel::delete(
        variants::table.filter(variants::experiment_id.eq(experiment.id)),
    ))
    .await?;
    for variant in variant_rows {
        // A variant that moved from another experiment keeps its id.
        conn.run(
            diesel::insert_into(variants::table)
                .values(variant)
                .on_conflict(variants::id)
                .do_update()
                .set((
                    variants::experiment_id.eq(excluded(variants::experiment_id)),
                    variants::position.eq(excluded(variants::position)),
                    variants::name.eq(excluded(variants::name)),
                    variants::weight.eq(excluded(variants::weight)),
                    variants::flow_id.eq(excluded(variants::flow_id)),
                )),
        )
        .await?;
    }
    Ok(())
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

fn decode_revision(revision: i64) -> Result<u64, StoreError> {
    u64::try_from(revision).map_err(|_| corrupt(format!("negative catalog revision {revision}")))
}

impl Postgres {
    /// Waits for a notification on [`CATALOG_CHANNEL`] on the dedicated listening connection
    /// until the revision differs from `known` or the deadline passes; `None` when another
    /// waiter holds the connection until the deadline (the caller then reads the revision: it
    /// paces its own polling).
    ///
    /// The connection is made by the store's connector and handed to diesel-async with its
    /// connection future, so it receives notifications; it is not pooled, so it keeps
    /// listening between calls and notifications sent while nobody waits are buffered.
    /// `LISTEN` is issued before the revision is read, so a change committed between the read
    /// and the wait still wakes us. The connection is taken out of its slot while in use: if
    /// this future is dropped mid-way, the connection is dropped too and the next call makes
    /// a fresh one. Any failure drops it as well (a lost connection is
    /// [`StoreError::Unavailable`]).
    async fn wait_for_change(
        &self,
        known: u64,
        deadline: Instant,
    ) -> Result<Option<u64>, StoreError> {
        let Ok(mut slot) = tokio::time::timeout_at(deadline, self.listener.lock()).await else {
            return Ok(None);
        };
        let mut conn = match slot.take() {
            Some(conn) => conn,
            None => {
                let mut conn = self
                    .connector
                    .connect(self.connect_timeout)
                    .await
                    .map_err(connection_error)?;
                diesel::sql_query(format!("LISTEN {CATALOG_CHANNEL}"))
                    .execute(&mut conn)
                    .await
                    .map_err(query_error)?;
                conn
            }
        };
        let result = wait_on_listener(&mut conn, known, deadline).await;
        if result.is_ok() {
            *slot = Some(conn);
        }
        result.map(Some)
    }
}

impl Store {
    /// Writes `data` in one transaction: an idempotent upsert keyed by ids (workspaces, apps,
    /// flows, versions, experiments, variants, keys), placements keyed by `(app, key)`, and each
    /// placement's rule list replaced by the one given. Nothing absent from `data` is deleted,
    /// except rules (and the variants of the experiments given). Keys already revoked stay
    /// revoked. `data.revision` is ignored: the triggers bump the stored one.
    ///
    /// This is the writer of the catalog import (D13); it does not validate (call
    /// [`flowgate_domain::Catalog::build`] first), but the schema's constraints reject dangling
    /// references ([`StoreError::NotFound`]) and duplicates ([`StoreError::Conflict`]), and then
    /// nothing is written.
    pub async fn replace_catalog(&self, data: &CatalogData) -> Result<(), StoreError> {
        let rows = WriteRows::from_data(data)?;
        let rows = &rows;
        // One statement per row: diesel-async cannot run diesel's multi-row inserts on SQLite
        // (only synchronous diesel special-cases them), and a catalog write is rare and small
        // next to event writes. On SQLite the first statement is a write, so the transaction
        // takes the write lock at once (waiting up to busy_timeout) instead of failing when a
        // read snapshot would have to be upgraded.
        self.db()
            .transaction(async |conn| write_rows(conn, rows).await)
            .await
    }

    /// Reads the catalog as stored, lets `plan` decide what to write, and writes it, all in one
    /// transaction that holds the catalog write lock from its first statement: what `plan` saw
    /// is what the write lands on (the catalog import, D13). `plan` returns the data to write
    /// with [`Store::replace_catalog`]'s upsert together with the import's history entry
    /// (`None`: nothing is written), and a value, or an error that ends the transaction
    /// without writing. A write is recorded in `catalog_imports` with the revision it left, in
    /// the same transaction (D19). On success the revision after the write comes back with the
    /// value.
    pub(crate) async fn update_catalog<T, E, P>(
        &self,
        plan: P,
    ) -> Result<Result<(T, u64), E>, StoreError>
    where
        P: FnOnce(CatalogData) -> Result<(Option<(CatalogData, ImportEntry)>, T), E> + Send,
        T: Send,
        E: Send,
    {
        self.db()
            .transaction(async |conn| {
                conn.run(diesel::sql_query(LOCK_CATALOG)).await?;
                let data = assemble(load_rows(conn).await?)?;
                let (write, value) = match plan(data) {
                    Ok(planned) => planned,
                    Err(e) => return Ok(Err(e)),
                };
                let written = match write {
                    Some((data, entry)) => {
                        write_rows(conn, &WriteRows::from_data(&data)?).await?;
                        Some(entry)
                    }
                    None => None,
                };
                let revision = conn.row(revision_query()).await?;
                if let Some(entry) = written {
                    conn.run(
                        diesel::insert_into(catalog_imports::table).values(entry.row(revision)?),
                    )
                    .await?;
                }
                Ok(Ok((value, decode_revision(revision)?)))
            })
            .await
    }
}

/// Takes the catalog's write lock at the start of a transaction: on SQLite any write makes the
/// transaction the one writer; on PostgreSQL the revision row stays locked until commit, and
/// every other catalog writer needs that row (its triggers bump it), so none can commit in
/// between. No trigger watches this table, so the statement itself changes no revision.
const LOCK_CATALOG: &str = "UPDATE catalog_revision SET revision = revision WHERE id = 1";

/// Waits on an established listening connection until the revision differs from `known` or the
/// deadline passes.
async fn wait_on_listener(
    conn: &mut AsyncPgConnection,
    known: u64,
    deadline: Instant,
) -> Result<u64, StoreError> {
    loop {
        // Read after LISTEN (and after each wake-up): notifications buffered from earlier
        // changes only cost this one read.
        let current = read_revision(conn).await?;
        if current != known {
            return Ok(current);
        }
        let next = {
            let mut notifications = std::pin::pin!(conn.notifications_stream());
            tokio::time::timeout_at(deadline, notifications.next()).await
        };
        match next {
            // The deadline passed: report the revision as it is now.
            Err(_elapsed) => return read_revision(conn).await,
            Ok(Some(Ok(_notification))) => {}
            Ok(Some(Err(e))) => return Err(query_error(e)),
            Ok(None) => {
                return Err(unavailable(
                    Outage::Connection,
                    "the listening connection closed".to_owned(),
                ))
            }
        }
    }
}

/// The revision, read on the listening connection.
async fn read_revision(conn: &mut AsyncPgConnection) -> Result<u64, StoreError> {
    decode_revision(
        revision_query()
            .get_result(conn)
            .await
            .map_err(query_error)?,
    )
}

/// A placement to write, with its rules.
struct PlacementWrite {
    row: NewPlacement,
    rules: Vec<RuleWrite>,
}

/// A rule to write once its placement's id is known; an experiment target comes with its
/// variants.
struct RuleWrite {
    audience: Option<String>,
    flow_id: Option<DbUuid>,
    experiment: Option<(ExperimentRow, Vec<VariantRow>)>,
}

/// [`CatalogData`] flattened into insertable rows.
struct WriteRows {
    workspaces: Vec<WorkspaceRow>,
    apps: Vec<AppRow>,
    flows: Vec<FlowRow>,
    versions: Vec<VersionRow>,
    placements: Vec<PlacementWrite>,
    keys: Vec<NewKey>,
}

fn to_i32(
    value: impl TryInto<i32> + Copy + std::fmt::Display,
    what: &str,
) -> Result<i32, StoreError> {
    value
        .try_into()
        .map_err(|_| unstorable(format!("{what} {value} is out of range")))
}

fn to_json(value: &impl serde::Serialize, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| unstorable(format!("{what}: {e}")))
}

impl WriteRows {
    fn from_data(data: &CatalogData) -> Result<Self, StoreError> {
        let mut rows = WriteRows {
            workspaces: Vec::new(),
            apps: Vec::new(),
            flows: Vec::new(),
            versions: Vec::new(),
            placements: Vec::new(),
            keys: Vec::new(),
        };
        for ws in &data.workspaces {
            rows.workspaces.push(WorkspaceRow {
                id: DbUuid(ws.id.0),
                name: ws.name.clone(),
            });
            for app in &ws.apps {
                rows.push_app(ws.id, app)?;
            }
        }
        for key in &data.api_keys {
            rows.keys.push(NewKey::from_record(key));
        }
        Ok(rows)
    }

    fn push_app(&mut self, workspace: WorkspaceId, app: &AppData) -> Result<(), StoreError> {
        let app_id = DbUuid(app.id.0);
        self.apps.push(AppRow {
            id: app_id,
            workspace_id: DbUuid(workspace.0),
            name: app.name.clone(),
            media_base_url: app.media_base_url.clone(),
            icon_base_url: app.icon_base_url.clone(),
            cache_ttl_seconds: app
                .cache_ttl_seconds
                .map(|ttl| to_i32(ttl, "cache_ttl_seconds"))
                .transpose()?,
            saved_groups: to_json(&app.saved_groups, "saved_groups")?,
        });
        for flow in &app.flows {
            self.flows.push(FlowRow {
                id: DbUuid(flow.id.0),
                app_id,
                name: flow.name.clone(),
                published_version: flow
                    .published_version
                    .map(|v| to_i32(v, "published_version"))
                    .transpose()?,
            });
            for version in &flow.versions {
                self.versions.push(VersionRow {
                    id: DbUuid(version.id.0),
                    flow_id: DbUuid(flow.id.0),
                    version: to_i32(version.version, "version")?,
                    schema_version: to_i32(version.schema_version, "schema_version")?,
                    // D2: the text exactly as given, never re-encoded.
                    flow_schema: version.flow_schema.get().to_owned(),
                    fonts: to_json(&version.fonts, "fonts")?,
                });
            }
        }
        for placement in &app.placements {
            let rules = placement
                .rules
                .iter()
                .map(|rule| {
                    Ok(RuleWrite {
                        audience: rule
                            .audience
                            .as_ref()
                            .map(|a| to_json(a, "audience"))
                            .transpose()?,
                        flow_id: rule.flow_id.map(|f| DbUuid(f.0)),
                        experiment: rule
                            .experiment
                            .as_ref()
                            .map(|e| experiment_rows(app_id, e))
                            .transpose()?,
                    })
                })
                .collect::<Result<_, StoreError>>()?;
            self.placements.push(PlacementWrite {
                row: NewPlacement {
                    app_id,
                    key: placement.key.clone(),
                    default_flow_id: placement.default_flow_id.map(|f| DbUuid(f.0)),
                },
                rules,
            });
        }
        Ok(())
    }
}

fn experiment_rows(
    app_id: DbUuid,
    e: &ExperimentData,
) -> Result<(ExperimentRow, Vec<VariantRow>), StoreError> {
    let id = DbUuid(e.id.0);
    let (namespace_id, namespace_start, namespace_end) = match &e.namespace {
        Some((ns, start, end)) => (Some(ns.clone()), Some(*start), Some(*end)),
        None => (None, None, None),
    };
    let experiment = ExperimentRow {
        id,
        app_id,
        name: e.name.clone(),
        status: e.status.as_str().to_owned(),
        seed: e.seed.clone(),
        coverage: e.coverage,
        namespace_id,
        namespace_start,
        namespace_end,
        hash_version: e
            .hash_version
            .map(|v| to_i32(v, "hash_version"))
            .transpose()?,
        sticky: e.sticky,
        bucket_version: to_i32(e.bucket_version, "bucket_version")?,
        min_bucket_version: to_i32(e.min_bucket_version, "min_bucket_version")?,
        fallback_attribute: e.fallback_attribute.clone(),
    };
    let variants = e
        .variants
        .iter()
        .enumerate()
        .map(|(position, v)| {
            Ok(VariantRow {
                id: DbUuid(v.id.0),
                experiment_id: id,
                position: to_i32(position, "variant position")?,
                name: v.name.clone(),
                weight: v.weight,
                flow_id: v.flow_id.map(|f| DbUuid(f.0)),
            })
        })
        .collect::<Result<_, StoreError>>()?;
    Ok((experiment, variants))
}

fn from_i32(value: i32, what: &str) -> Result<u32, StoreError> {
    u32::try_from(value).map_err(|_| corrupt(format!("{what} {value} is negative")))
}

fn parse_json<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| corrupt(format!("stored {what} is not valid: {e}")))
}

fn parse_status(status: &str) -> Result<ExperimentStatus, StoreError> {
    Ok(match status {
        "running" => ExperimentStatus::Running,
        "paused" => ExperimentStatus::Paused,
        "draft" => ExperimentStatus::Draft,
        "concluded" => ExperimentStatus::Concluded,
        other => return Err(corrupt(format!("unknown experiment status `{other}`"))),
    })
}

/// Builds [`CatalogData`] from the rows, in the stored orders: workspaces, apps and flows by id,
/// versions by number, placements by key (byte order), rules and variants by position, keys
/// by creation.
fn assemble(rows: CatalogRows) -> Result<CatalogData, StoreError> {
    let mut versions = HashMap::<DbUuid, Vec<FlowVersionData>>::new();
    for v in rows.versions {
        let flow_schema = RawValue::from_string(v.flow_schema).map_err(|e| {
            corrupt(format!(
                "stored flow_schema of version {} is not JSON: {e}",
                v.id.0
            ))
        })?;
        versions
            .entry(v.flow_id)
            .or_default()
            .push(FlowVersionData {
                id: FlowVersionId(v.id.0),
                version: from_i32(v.version, "version")?,
                schema_version: from_i32(v.schema_version, "schema_version")?,
                fonts: parse_json::<Vec<Font>>(&v.fonts, "fonts")?,
                flow_schema,
            });
    }
    let mut flows = HashMap::<DbUuid, Vec<FlowData>>::new();
    for f in rows.flows {
        flows.entry(f.app_id).or_default().push(FlowData {
            id: FlowId(f.id.0),
            name: f.name,
            published_version: f
                .published_version
                .map(|v| from_i32(v, "published_version"))
                .transpose()?,
            versions: versions.remove(&f.id).unwrap_or_default(),
        });
    }
    let mut variants = HashMap::<DbUuid, Vec<VariantData>>::new();
    for v in rows.variants {
        variants
            .entry(v.experiment_id)
            .or_default()
            .push(VariantData {
                id: VariantId(v.id.0),
                name: v.name,
                weight: v.weight,
                flow_id: v.flow_id.map(|f| FlowId(f.0)),
            });
    }
    let mut experiments = HashMap::<DbUuid, ExperimentData>::new();
    for e in rows.experiments {
        let namespace = match (e.namespace_id, e.namespace_start, e.namespace_end) {
            (Some(ns), Some(start), Some(end)) => Some((ns, start, end)),
            (None, None, None) => None,
            _ => {
                return Err(corrupt(format!(
                    "experiment {} has a partial namespace",
                    e.id.0
                )))
            }
        };
        experiments.insert(
            e.id,
            ExperimentData {
                id: ExperimentId(e.id.0),
                name: e.name,
                status: parse_status(&e.status)?,
                seed: e.seed,
                coverage: e.coverage,
                namespace,
                hash_version: e
                    .hash_version
                    .map(|v| from_i32(v, "hash_version"))
                    .transpose()?,
                sticky: e.sticky,
                bucket_version: from_i32(e.bucket_version, "bucket_version")?,
                min_bucket_version: from_i32(e.min_bucket_version, "min_bucket_version")?,
                fallback_attribute: e.fallback_attribute,
                variants: variants.remove(&e.id).unwrap_or_default(),
            },
        );
    }
    let mut rules = HashMap::<i64, Vec<RuleData>>::new();
    for r in rows.rules {
        let experiment =
            match r.experiment_id {
                Some(id) => Some(experiments.get(&id).cloned().ok_or_else(|| {
                    corrupt(format!("a rule targets missing experiment {}", id.0))
                })?),
                None => None,
            };
        rules.entry(r.placement_id).or_default().push(RuleData {
            audience: r.audience.map(|a| parse_json(&a, "audience")).transpose()?,
            flow_id: r.flow_id.map(|f| FlowId(f.0)),
            experiment,
        });
    }
    let mut placements = HashMap::<DbUuid, Vec<PlacementData>>::new();
    for p in rows.placements {
        placements.entry(p.app_id).or_default().push(PlacementData {
            key: p.key,
            default_flow_id: p.default_flow_id.map(|f| FlowId(f.0)),
            rules: rules.remove(&p.id).unwrap_or_default(),
        });
    }
    // By key in byte order whatever the database's collation.
    for list in placements.values_mut() {
        list.sort_by(|a, b| a.key.cmp(&b.key));
    }
    let mut apps = HashMap::<DbUuid, Vec<AppData>>::new();
    for a in rows.apps {
        apps.entry(a.workspace_id).or_default().push(AppData {
            id: AppId(a.id.0),
            name: a.name,
            media_base_url: a.media_base_url,
            icon_base_url: a.icon_base_url,
            cache_ttl_seconds: a
                .cache_ttl_seconds
                .map(|t| from_i32(t, "cache_ttl_seconds"))
                .transpose()?,
            saved_groups: parse_json(&a.saved_groups, "saved_groups")?,
            flows: flows.remove(&a.id).unwrap_or_default(),
            placements: placements.remove(&a.id).unwrap_or_default(),
        });
    }
    let workspaces = rows
        .workspaces
        .into_iter()
        .map(|w| WorkspaceData {
            id: WorkspaceId(w.id.0),
            name: w.name,
            apps: apps.remove(&w.id).unwrap_or_default(),
        })
        .collect();
    let api_keys = rows
        .keys
        .into_iter()
        .map(KeyRow::into_record)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CatalogData {
        revision: decode_revision(rows.revision)?,
        workspaces,
        api_keys,
    })
}
