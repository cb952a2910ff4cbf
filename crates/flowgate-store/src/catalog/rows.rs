//! The catalog tables' rows, as diesel reads and writes them.

use diesel::prelude::*;

use crate::keys::KeyRow;
use crate::schema::{
    apps, experiments, flow_versions, flows, placements, rules, variants, workspaces,
};
use crate::types::{DbTimestamp, DbUuid};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = workspaces, treat_none_as_default_value = false)]
pub(super) struct WorkspaceRow {
    pub(super) id: DbUuid,
    pub(super) name: String,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = apps, treat_none_as_default_value = false)]
pub(super) struct AppRow {
    pub(super) id: DbUuid,
    pub(super) workspace_id: DbUuid,
    pub(super) name: String,
    pub(super) media_base_url: String,
    pub(super) icon_base_url: String,
    pub(super) cache_ttl_seconds: Option<i32>,
    pub(super) saved_groups: String,
    /// D30: NULL when the app has none.
    pub(super) apple_bundle_id: Option<String>,
    /// D30: a JSON array of strings; NULL when the catalog lists none (the default).
    pub(super) apple_environments: Option<String>,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = flows, treat_none_as_default_value = false)]
pub(super) struct FlowRow {
    pub(super) id: DbUuid,
    pub(super) app_id: DbUuid,
    pub(super) name: String,
    pub(super) published_version: Option<i32>,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = flow_versions, treat_none_as_default_value = false)]
pub(super) struct VersionRow {
    pub(super) id: DbUuid,
    pub(super) flow_id: DbUuid,
    pub(super) version: i32,
    pub(super) schema_version: i32,
    pub(super) flow_schema: String,
    pub(super) fonts: String,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = placements)]
pub(super) struct PlacementRow {
    pub(super) id: i64,
    pub(super) app_id: DbUuid,
    pub(super) key: String,
    pub(super) default_flow_id: Option<DbUuid>,
}

#[derive(Insertable)]
#[diesel(table_name = placements, treat_none_as_default_value = false)]
pub(super) struct NewPlacement {
    pub(super) app_id: DbUuid,
    pub(super) key: String,
    pub(super) default_flow_id: Option<DbUuid>,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = rules, treat_none_as_default_value = false)]
pub(super) struct RuleRow {
    pub(super) placement_id: i64,
    pub(super) position: i32,
    pub(super) audience: Option<String>,
    pub(super) flow_id: Option<DbUuid>,
    pub(super) experiment_id: Option<DbUuid>,
    /// D28: false for a rule that is off (the catalog file's `enabled`).
    pub(super) enabled: bool,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = experiments, treat_none_as_default_value = false)]
pub(super) struct ExperimentRow {
    pub(super) id: DbUuid,
    pub(super) app_id: DbUuid,
    pub(super) name: String,
    pub(super) status: String,
    pub(super) seed: Option<String>,
    pub(super) coverage: Option<f64>,
    pub(super) namespace_id: Option<String>,
    pub(super) namespace_start: Option<f64>,
    pub(super) namespace_end: Option<f64>,
    pub(super) hash_version: Option<i32>,
    pub(super) sticky: bool,
    pub(super) bucket_version: i32,
    pub(super) min_bucket_version: i32,
    pub(super) fallback_attribute: Option<String>,
    /// The catalog file's `analysis` member as JSON text (D27).
    pub(super) analysis: Option<String>,
    /// When the scheduler starts it, if still a draft (D29).
    pub(super) starts_at: Option<DbTimestamp>,
    /// When the scheduler concludes it (D29).
    pub(super) ends_at: Option<DbTimestamp>,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = variants, treat_none_as_default_value = false)]
pub(super) struct VariantRow {
    pub(super) id: DbUuid,
    pub(super) experiment_id: DbUuid,
    pub(super) position: i32,
    pub(super) name: String,
    pub(super) weight: f64,
    pub(super) flow_id: Option<DbUuid>,
    /// The version of the flow shown, when not the published one (D29).
    pub(super) flow_version: Option<i32>,
}

/// Everything `load_catalog` reads, as rows, before it becomes [`CatalogData`].
pub(super) struct CatalogRows {
    pub(super) revision: i64,
    pub(super) workspaces: Vec<WorkspaceRow>,
    pub(super) apps: Vec<AppRow>,
    pub(super) flows: Vec<FlowRow>,
    pub(super) versions: Vec<VersionRow>,
    pub(super) placements: Vec<PlacementRow>,
    pub(super) rules: Vec<RuleRow>,
    pub(super) experiments: Vec<ExperimentRow>,
    pub(super) variants: Vec<VariantRow>,
    pub(super) keys: Vec<KeyRow>,
    /// The rows of `webhook_keys` (D30), which read as [`KeyRow`]s too.
    pub(super) webhook_keys: Vec<KeyRow>,
}
