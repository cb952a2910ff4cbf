//! Reading the catalog: every row in the caller's transaction, assembled into [`CatalogData`]
//! in the stored orders.

use std::collections::HashMap;

use diesel::prelude::*;
use flowgate_domain::catalog::{
    AppData, CatalogData, ExperimentData, ExperimentStatus, FlowData, FlowVersionData, Font,
    PlacementData, RuleData, VariantData, WorkspaceData,
};
use flowgate_domain::ids::{AppId, ExperimentId, FlowId, FlowVersionId, VariantId, WorkspaceId};
use flowgate_domain::keys::KeyRecord;
use flowgate_domain::ports::StoreError;
use serde_json::value::RawValue;

use super::rows::*;
use super::{decode_revision, revision_query};
use crate::db::{columns, Conn};
use crate::error::corrupt;
use crate::keys::{sort_oldest_first, webhook_columns, KeyRow};
use crate::schema::{
    api_keys, apps, experiments, flow_versions, flows, placements, rules, variants, webhook_keys,
    workspaces,
};
use crate::types::DbUuid;

/// Reads every catalog row (in the caller's transaction).
pub(super) async fn load_rows(conn: &mut Conn<'_>) -> QueryResult<CatalogRows> {
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
        // D30: the webhook keys, in a table of their own (crate::keys); authenticated by the
        // snapshot like the others.
        webhook_keys: conn
            .rows(
                webhook_keys::table
                    .select(webhook_columns())
                    .order((webhook_keys::created_at, webhook_keys::id)),
            )
            .await?,
    })
}

pub(super) fn from_i32(value: i32, what: &str) -> Result<u32, StoreError> {
    u32::try_from(value).map_err(|_| corrupt(format!("{what} {value} is negative")))
}

pub(super) fn parse_json<T: serde::de::DeserializeOwned>(
    text: &str,
    what: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| corrupt(format!("stored {what} is not valid: {e}")))
}

pub(super) fn parse_status(status: &str) -> Result<ExperimentStatus, StoreError> {
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
pub(super) fn assemble(rows: CatalogRows) -> Result<CatalogData, StoreError> {
    // Each level is grouped by its parent's id, children first, and each list keeps the order
    // of its rows: the queries of `load_rows` read them in the stored orders.
    let versions = versions_by_flow(rows.versions)?;
    let flows = flows_by_app(rows.flows, versions)?;
    let variants = variants_by_experiment(rows.variants)?;
    let experiments = experiments_by_id(rows.experiments, variants)?;
    let rules = rules_by_placement(rows.rules, &experiments)?;
    let placements = placements_by_app(rows.placements, rules);
    let mut apps = apps_by_workspace(rows.apps, flows, placements)?;
    let workspaces = rows
        .workspaces
        .into_iter()
        .map(|w| WorkspaceData {
            id: WorkspaceId(w.id.0),
            name: w.name,
            apps: apps.remove(&w.id).unwrap_or_default(),
        })
        .collect();
    let api_keys = merged_keys(rows.keys, rows.webhook_keys)?;
    Ok(CatalogData {
        revision: decode_revision(rows.revision)?,
        workspaces,
        api_keys,
    })
}

/// The flows' versions, by flow id, in the rows' order (by number).
fn versions_by_flow(
    rows: Vec<VersionRow>,
) -> Result<HashMap<DbUuid, Vec<FlowVersionData>>, StoreError> {
    let mut versions = HashMap::<DbUuid, Vec<FlowVersionData>>::new();
    for v in rows {
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
    Ok(versions)
}

/// The apps' flows with their versions, by app id, in the rows' order (by id).
fn flows_by_app(
    rows: Vec<FlowRow>,
    mut versions: HashMap<DbUuid, Vec<FlowVersionData>>,
) -> Result<HashMap<DbUuid, Vec<FlowData>>, StoreError> {
    let mut flows = HashMap::<DbUuid, Vec<FlowData>>::new();
    for f in rows {
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
    Ok(flows)
}

/// The experiments' variants, by experiment id, in the rows' order (by position).
fn variants_by_experiment(
    rows: Vec<VariantRow>,
) -> Result<HashMap<DbUuid, Vec<VariantData>>, StoreError> {
    let mut variants = HashMap::<DbUuid, Vec<VariantData>>::new();
    for v in rows {
        variants
            .entry(v.experiment_id)
            .or_default()
            .push(VariantData {
                id: VariantId(v.id.0),
                name: v.name,
                weight: v.weight,
                flow_id: v.flow_id.map(|f| FlowId(f.0)),
                flow_version: v
                    .flow_version
                    .map(|n| from_i32(n, "flow_version"))
                    .transpose()?,
            });
    }
    Ok(variants)
}

/// The experiments with their variants, by id.
fn experiments_by_id(
    rows: Vec<ExperimentRow>,
    mut variants: HashMap<DbUuid, Vec<VariantData>>,
) -> Result<HashMap<DbUuid, ExperimentData>, StoreError> {
    let mut experiments = HashMap::<DbUuid, ExperimentData>::new();
    for e in rows {
        let id = e.id;
        let experiment = experiment_data(e, variants.remove(&id).unwrap_or_default())?;
        experiments.insert(id, experiment);
    }
    Ok(experiments)
}

/// One experiment from its row and its variants. A namespace is stored whole or not at all.
fn experiment_data(
    e: ExperimentRow,
    variants: Vec<VariantData>,
) -> Result<ExperimentData, StoreError> {
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
    Ok(ExperimentData {
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
        analysis: e
            .analysis
            .map(|text| {
                serde_json::from_str(&text).map_err(|err| {
                    corrupt(format!(
                        "experiment {} has analysis {text:?}: {err}",
                        e.id.0
                    ))
                })
            })
            .transpose()?,
        starts_at: e.starts_at.map(|t| t.0),
        ends_at: e.ends_at.map(|t| t.0),
        variants,
    })
}

/// The placements' rules with their experiments, by placement id, in the rows' order (by
/// position).
fn rules_by_placement(
    rows: Vec<RuleRow>,
    experiments: &HashMap<DbUuid, ExperimentData>,
) -> Result<HashMap<i64, Vec<RuleData>>, StoreError> {
    let mut rules = HashMap::<i64, Vec<RuleData>>::new();
    for r in rows {
        let experiment =
            match r.experiment_id {
                Some(id) => Some(experiments.get(&id).cloned().ok_or_else(|| {
                    corrupt(format!("a rule targets missing experiment {}", id.0))
                })?),
                None => None,
            };
        rules.entry(r.placement_id).or_default().push(RuleData {
            enabled: r.enabled,
            audience: r.audience.map(|a| parse_json(&a, "audience")).transpose()?,
            flow_id: r.flow_id.map(|f| FlowId(f.0)),
            experiment,
        });
    }
    Ok(rules)
}

/// The apps' placements with their rules, by app id, each list by key in byte order whatever
/// the database's collation.
fn placements_by_app(
    rows: Vec<PlacementRow>,
    mut rules: HashMap<i64, Vec<RuleData>>,
) -> HashMap<DbUuid, Vec<PlacementData>> {
    let mut placements = HashMap::<DbUuid, Vec<PlacementData>>::new();
    for p in rows {
        placements.entry(p.app_id).or_default().push(PlacementData {
            key: p.key,
            default_flow_id: p.default_flow_id.map(|f| FlowId(f.0)),
            rules: rules.remove(&p.id).unwrap_or_default(),
        });
    }
    for list in placements.values_mut() {
        list.sort_by(|a, b| a.key.cmp(&b.key));
    }
    placements
}

/// The workspaces' apps with their flows and placements, by workspace id, in the rows' order
/// (by id).
fn apps_by_workspace(
    rows: Vec<AppRow>,
    mut flows: HashMap<DbUuid, Vec<FlowData>>,
    mut placements: HashMap<DbUuid, Vec<PlacementData>>,
) -> Result<HashMap<DbUuid, Vec<AppData>>, StoreError> {
    let mut apps = HashMap::<DbUuid, Vec<AppData>>::new();
    for a in rows {
        apps.entry(a.workspace_id).or_default().push(AppData {
            id: AppId(a.id.0),
            name: a.name,
            media_base_url: a.media_base_url,
            icon_base_url: a.icon_base_url,
            cache_ttl_seconds: a
                .cache_ttl_seconds
                .map(|t| from_i32(t, "cache_ttl_seconds"))
                .transpose()?,
            apple_bundle_id: a.apple_bundle_id,
            apple_environments: a
                .apple_environments
                .map(|text| parse_json(&text, "apple_environments"))
                .transpose()?
                .unwrap_or_default(),
            saved_groups: parse_json(&a.saved_groups, "saved_groups")?,
            flows: flows.remove(&a.id).unwrap_or_default(),
            placements: placements.remove(&a.id).unwrap_or_default(),
        });
    }
    Ok(apps)
}

/// The API keys and the webhook keys (D30), merged into one list by creation (each query is
/// in that order already).
fn merged_keys(keys: Vec<KeyRow>, webhook_keys: Vec<KeyRow>) -> Result<Vec<KeyRecord>, StoreError> {
    let merge = !webhook_keys.is_empty();
    let mut api_keys = keys
        .into_iter()
        .chain(webhook_keys)
        .map(KeyRow::into_record)
        .collect::<Result<Vec<_>, _>>()?;
    if merge {
        sort_oldest_first(&mut api_keys);
    }
    Ok(api_keys)
}
