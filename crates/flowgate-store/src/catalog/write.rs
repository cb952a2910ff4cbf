//! Writing the catalog: the rows of [`CatalogData`] upserted in the caller's transaction.

use diesel::prelude::*;
use diesel::upsert::excluded;
use flowgate_domain::catalog::{AppData, CatalogData, ExperimentData};
use flowgate_domain::ids::WorkspaceId;
use flowgate_domain::ports::StoreError;

use super::rows::*;
use crate::db::Conn;
use crate::error::{unstorable, TransactionError};
use crate::keys::{in_webhook_table, NewKey, NewWebhookKey};
use crate::schema::{
    api_keys, apps, experiments, flow_versions, flows, placements, rules, variants, webhook_keys,
    workspaces,
};
use crate::types::{sql, DbTimestamp, DbUuid};

diesel::define_sql_function! {
    /// SQL `COALESCE` of two nullable timestamps.
    fn coalesce(a: diesel::sql_types::Nullable<sql::Instant>, b: diesel::sql_types::Nullable<sql::Instant>) -> diesel::sql_types::Nullable<sql::Instant>;
}

/// Writes [`WriteRows`] (in the caller's transaction): the upsert of
/// [`Store::replace_catalog`].
pub(super) async fn write_rows(
    conn: &mut Conn<'_>,
    rows: &WriteRows,
) -> Result<(), TransactionError> {
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
                    apps::apple_bundle_id.eq(excluded(apps::apple_bundle_id)),
                    apps::apple_environments.eq(excluded(apps::apple_environments)),
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
    // Webhook keys (D30) go to their own table (crate::keys). A catalog file holds none; only
    // catalog data written whole (`replace_catalog`) may.
    for row in &rows.webhook_keys {
        conn.run(
            diesel::insert_into(webhook_keys::table)
                .values(row)
                .on_conflict(webhook_keys::id)
                .do_update()
                .set((
                    webhook_keys::name.eq(excluded(webhook_keys::name)),
                    webhook_keys::revoked_at.eq(coalesce(
                        webhook_keys::revoked_at,
                        excluded(webhook_keys::revoked_at),
                    )),
                )),
        )
        .await?;
    }
    Ok(())
}

/// Upserts a placement and replaces its rule list with the one given (D13), with the
/// experiments the rules target.
pub(super) async fn write_placement(
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
            enabled: rule.enabled,
        }))
        .await?;
    }
    Ok(())
}

/// Upserts an experiment and replaces its variants with the ones given.
pub(super) async fn write_experiment(
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
                experiments::analysis.eq(excluded(experiments::analysis)),
                experiments::starts_at.eq(excluded(experiments::starts_at)),
                experiments::ends_at.eq(excluded(experiments::ends_at)),
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
                    variants::flow_version.eq(excluded(variants::flow_version)),
                )),
        )
        .await?;
    }
    Ok(())
}

/// A placement to write, with its rules.
pub(super) struct PlacementWrite {
    pub(super) row: NewPlacement,
    pub(super) rules: Vec<RuleWrite>,
}

/// A rule to write once its placement's id is known; an experiment target comes with its
/// variants.
pub(super) struct RuleWrite {
    pub(super) enabled: bool,
    pub(super) audience: Option<String>,
    pub(super) flow_id: Option<DbUuid>,
    pub(super) experiment: Option<(ExperimentRow, Vec<VariantRow>)>,
}

/// [`CatalogData`] flattened into insertable rows.
pub(super) struct WriteRows {
    pub(super) workspaces: Vec<WorkspaceRow>,
    pub(super) apps: Vec<AppRow>,
    pub(super) flows: Vec<FlowRow>,
    pub(super) versions: Vec<VersionRow>,
    pub(super) placements: Vec<PlacementWrite>,
    pub(super) keys: Vec<NewKey>,
    pub(super) webhook_keys: Vec<NewWebhookKey>,
}

pub(super) fn to_i32(
    value: impl TryInto<i32> + Copy + std::fmt::Display,
    what: &str,
) -> Result<i32, StoreError> {
    value
        .try_into()
        .map_err(|_| unstorable(format!("{what} {value} is out of range")))
}

pub(super) fn to_json(value: &impl serde::Serialize, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| unstorable(format!("{what}: {e}")))
}

impl WriteRows {
    pub(super) fn from_data(data: &CatalogData) -> Result<Self, StoreError> {
        let mut rows = WriteRows {
            workspaces: Vec::new(),
            apps: Vec::new(),
            flows: Vec::new(),
            versions: Vec::new(),
            placements: Vec::new(),
            keys: Vec::new(),
            webhook_keys: Vec::new(),
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
            if in_webhook_table(key) {
                rows.webhook_keys.push(NewKey::from_record(key).into());
            } else {
                rows.keys.push(NewKey::from_record(key));
            }
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
            apple_bundle_id: app.apple_bundle_id.clone(),
            // NULL: the default (D30), as the catalog file leaves the member out.
            apple_environments: (!app.apple_environments.is_empty())
                .then(|| to_json(&app.apple_environments, "apple_environments"))
                .transpose()?,
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
                        enabled: rule.enabled,
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

pub(super) fn experiment_rows(
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
        analysis: e
            .analysis
            .as_ref()
            .map(|a| to_json(a, "analysis"))
            .transpose()?,
        starts_at: e.starts_at.map(DbTimestamp),
        ends_at: e.ends_at.map(DbTimestamp),
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
                flow_version: v
                    .flow_version
                    .map(|n| to_i32(n, "flow_version"))
                    .transpose()?,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    Ok((experiment, variants))
}
