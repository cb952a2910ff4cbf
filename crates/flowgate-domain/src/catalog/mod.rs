//! The catalog (D2): raw [`CatalogData`] and the immutable, validated [`Catalog`] snapshot that
//! resolve, authentication and event validation read.
//!
//! A snapshot is built once per store change, off the request path, and shared behind an
//! `Arc`; every lookup a request needs is a hash-map probe, conditions and regexes are compiled,
//! bucket ranges computed, and each published version's `flow_schema` and `fonts` are held as
//! serialised JSON bytes that responses splice in unchanged.

mod build;
mod data;
mod diff;
mod export;
mod file;
mod import;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::value::RawValue;

pub use build::{CatalogError, Problem};
pub use data::{
    AppData, CatalogData, ExperimentData, ExperimentStatus, FlowData, FlowVersionData, Font,
    FontStyle, PlacementData, RuleData, VariantData, WorkspaceData,
};
pub use diff::{
    diff_catalogs, CatalogDiff, Change, EntityChange, ExperimentShift, PlacementChange, RuleChange,
    StickyShift, VariantShare,
};
pub use export::ExportError;
pub use file::{CatalogFile, FileKey, WorkspaceFile};
pub use import::{imported_key_id, plan_dry_run, plan_import, DryRun, ImportPlan, ImportSummary};

use crate::bucketing::{BucketRange, Namespace};
use crate::conditions::{Condition, SavedGroups};
use crate::events::FlowVersionLookup;
use crate::ids::{AppId, ExperimentId, FlowId, FlowVersionId, VariantId, WorkspaceId};
use crate::keys::{ApiKey, AuthError, DigestMap, KeyDigest, KeyEnvironment, KeyRecord, KeyType};
use crate::FastMap;

/// An immutable, validated catalog snapshot with O(1) lookups.
#[derive(Debug)]
pub struct Catalog {
    revision: u64,
    workspaces: HashMap<WorkspaceId, Workspace>,
    apps: FastMap<AppId, App>,
    versions: HashMap<FlowVersionId, VersionRef>,
    keys: DigestMap<KeyRecord>,
}

impl Catalog {
    /// An empty catalog (no apps, no keys): what a server holds before its first load.
    pub fn empty() -> Self {
        Self {
            revision: 0,
            workspaces: HashMap::new(),
            apps: FastMap::default(),
            versions: HashMap::new(),
            keys: DigestMap::default(),
        }
    }

    /// The store revision the snapshot was built from.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// A workspace by id.
    pub fn workspace(&self, id: WorkspaceId) -> Option<&Workspace> {
        self.workspaces.get(&id)
    }

    /// All workspaces, in no particular order.
    pub fn workspaces(&self) -> impl Iterator<Item = &Workspace> {
        self.workspaces.values()
    }

    /// An app by id.
    pub fn app(&self, id: AppId) -> Option<&App> {
        self.apps.get(&id)
    }

    /// Number of apps.
    pub fn app_count(&self) -> usize {
        self.apps.len()
    }

    /// An experiment by id, with its app (experiment ids are unique across the catalog).
    pub fn experiment(&self, id: ExperimentId) -> Option<(&App, &Experiment)> {
        self.apps.values().find_map(|app| {
            app.experiments()
                .into_iter()
                .find(|(_, e)| e.id == id)
                .map(|(_, e)| (app, e))
        })
    }

    /// Where a flow version (published or not) lives.
    pub fn flow_version(&self, id: FlowVersionId) -> Option<&VersionRef> {
        self.versions.get(&id)
    }

    /// A key record by digest; revoked keys are not in the table.
    pub fn key(&self, digest: &KeyDigest) -> Option<&KeyRecord> {
        self.keys.get(digest)
    }

    /// Authenticates the key a caller presented (D1, D9), as its bearer token: none, a
    /// malformed key (rejected without any lookup), an unknown or revoked key, a non-`sdk` key,
    /// and a key of another environment than `accepted` each give their own [`AuthError`].
    /// Reading the token out of a request (an `Authorization` header) is the transport's job.
    pub fn authenticate(
        &self,
        token: Option<&str>,
        accepted: KeyEnvironment,
    ) -> Result<&KeyRecord, AuthError> {
        let token = token.ok_or(AuthError::MissingApiKey)?;
        // Checked in place: the token is not copied (it is hashed once, below).
        ApiKey::check(token).map_err(|_| AuthError::InvalidApiKey)?;
        let record = self
            .keys
            .get(&KeyDigest::of(token))
            .ok_or(AuthError::InvalidApiKey)?;
        if record.key_type != KeyType::Sdk {
            return Err(AuthError::KeyTypeNotAllowed);
        }
        if record.environment != accepted {
            return Err(AuthError::KeyEnvironmentMismatch);
        }
        Ok(record)
    }

    /// The app named in a URL, as seen by a key of `workspace` (D9): 404 when no such app
    /// exists, 403 when it belongs to another workspace.
    pub fn app_for(&self, workspace: WorkspaceId, app: AppId) -> Result<&App, AppAccessError> {
        let found = self.apps.get(&app).ok_or(AppAccessError::NotFound)?;
        if found.workspace_id != workspace {
            return Err(AppAccessError::Forbidden);
        }
        Ok(found)
    }
}

impl Default for Catalog {
    fn default() -> Self {
        Self::empty()
    }
}

impl FlowVersionLookup for Catalog {
    fn flow_of_version(&self, app: AppId, version: FlowVersionId) -> Option<FlowId> {
        self.versions
            .get(&version)
            .filter(|v| v.app_id == app)
            .map(|v| v.flow_id)
    }
}

/// Why a key may not use an app (D9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AppAccessError {
    /// No such app: 404 `app_not_found`.
    #[error("app not found")]
    NotFound,
    /// The app belongs to another workspace: 403 `forbidden_app`.
    #[error("the app does not belong to this key's workspace")]
    Forbidden,
}

/// A workspace in the snapshot.
#[derive(Debug)]
pub struct Workspace {
    /// Id.
    pub id: WorkspaceId,
    /// Display name.
    pub name: String,
    /// Its apps, in catalog order (the legacy resolve route needs "exactly one app", D11).
    pub app_ids: Vec<AppId>,
}

/// Where a flow version lives (for event validation, D7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VersionRef {
    /// Owning app.
    pub app_id: AppId,
    /// Owning flow.
    pub flow_id: FlowId,
    /// Version number.
    pub version: u32,
}

/// An app in the snapshot.
#[derive(Debug)]
pub struct App {
    /// Id.
    pub id: AppId,
    /// Owning workspace.
    pub workspace_id: WorkspaceId,
    /// Display name.
    pub name: String,
    /// Served as `media_base_url`.
    pub media_base_url: String,
    /// Served as `icon_base_url`.
    pub icon_base_url: String,
    /// App-level freshness; the configured default applies when `None` (D3.9).
    pub cache_ttl_seconds: Option<u32>,
    /// Saved groups for `$inGroup` (D4).
    pub saved_groups: SavedGroups,
    pub(crate) flows: HashMap<FlowId, Flow>,
    pub(crate) placements: FastMap<String, Placement>,
    /// Whether a placement has a sticky experiment (D23).
    pub(crate) sticky: bool,
}

impl App {
    /// A placement by key.
    pub fn placement(&self, key: &str) -> Option<&Placement> {
        self.placements.get(key)
    }

    /// A flow by id.
    pub fn flow(&self, id: FlowId) -> Option<&Flow> {
        self.flows.get(&id)
    }

    /// Number of placements.
    pub fn placement_count(&self) -> usize {
        self.placements.len()
    }

    /// The keys of the app's placements, sorted.
    pub fn placement_keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = self.placements.keys().map(String::as_str).collect();
        keys.sort_unstable();
        keys
    }

    /// The app's experiments with the key of the placement whose rule holds each, ordered by
    /// placement key and rule.
    pub fn experiments(&self) -> Vec<(&str, &Experiment)> {
        let mut keys: Vec<&String> = self.placements.keys().collect();
        keys.sort();
        keys.into_iter()
            .flat_map(|key| {
                self.placements[key]
                    .rules
                    .iter()
                    .filter_map(move |rule| match &rule.target {
                        Target::Experiment(e) => Some((key.as_str(), &**e)),
                        Target::Flow(_) => None,
                    })
            })
            .collect()
    }
}

/// A flow in the snapshot, with its published version resolved.
#[derive(Debug)]
pub struct Flow {
    /// Id.
    pub id: FlowId,
    /// Display name.
    pub name: String,
    /// The published version, if any.
    pub published: Option<Arc<PublishedVersion>>,
}

/// A published flow version, pre-rendered for responses.
#[derive(Debug)]
pub struct PublishedVersion {
    /// `flow_version_id`.
    pub id: FlowVersionId,
    /// `flow_id`.
    pub flow_id: FlowId,
    /// `flow_version`.
    pub version: u32,
    /// `schema_version`.
    pub schema_version: u32,
    /// `flow_schema` exactly as published: splice these bytes into the response.
    pub flow_schema: Box<RawValue>,
    /// The fonts.
    pub fonts: Vec<Font>,
    /// `fonts` serialised once, to splice into responses.
    pub fonts_json: Box<RawValue>,
}

/// A placement in the snapshot.
#[derive(Debug)]
pub struct Placement {
    /// Key.
    pub key: String,
    /// Default flow (D3.3, D3.5).
    pub default: Option<FlowTarget>,
    /// Compiled rules, in order.
    pub rules: Vec<Rule>,
    /// Whether a rule has a sticky experiment (D23).
    pub(crate) sticky: bool,
}

/// A flow target with its published version looked up at build time, so resolve needs no
/// second lookup.
#[derive(Clone, Debug)]
pub struct FlowTarget {
    /// The flow.
    pub flow_id: FlowId,
    /// Its published version; `None` is a configuration fault (D3.4).
    pub published: Option<Arc<PublishedVersion>>,
}

/// A compiled rule.
#[derive(Debug)]
pub struct Rule {
    /// Compiled audience.
    pub audience: Condition,
    /// What the rule serves when it decides.
    pub target: Target,
}

/// A rule's target (D2).
#[derive(Debug)]
pub enum Target {
    /// Serve a flow.
    Flow(FlowTarget),
    /// Assign a variant of an experiment.
    Experiment(Box<Experiment>),
}

/// A compiled experiment: seed resolved, weights normalised, bucket ranges computed (D5).
#[derive(Debug)]
pub struct Experiment {
    /// Id.
    pub id: ExperimentId,
    /// Name.
    pub name: String,
    /// Status; only `Running` assigns.
    pub status: ExperimentStatus,
    /// Hash seed (the id when none was given).
    pub seed: String,
    /// Coverage, 0.0..=1.0.
    pub coverage: f64,
    /// Optional mutual-exclusion namespace.
    pub namespace: Option<Namespace>,
    /// Variants, in order.
    pub variants: Vec<Variant>,
    /// One range per variant.
    pub ranges: Vec<BucketRange>,
    /// GrowthBook's hash version: 2 (D5), or 1 when the experiment says so.
    pub hash_version: u32,
    /// Sticky assignment (D23); `None` for an experiment that does no sticky work at all.
    pub sticky: Option<StickySettings>,
}

/// A sticky experiment's settings (D23), with the keys its assignment documents use.
#[derive(Debug)]
pub struct StickySettings {
    /// Assignments are of this version; raising it buckets everyone again.
    pub bucket_version: u32,
    /// A stored assignment of a version below this keeps the user out of the experiment.
    pub min_bucket_version: u32,
    /// The attribute whose document is read beside the user's, if any.
    pub fallback_attribute: Option<String>,
    /// The experiment's key in the documents: its id.
    pub key: String,
    /// Each variant's key in the documents, in order: its id.
    pub variant_keys: Vec<String>,
}

/// A variant of a compiled experiment.
#[derive(Debug)]
pub struct Variant {
    /// Id.
    pub id: VariantId,
    /// Name.
    pub name: String,
    /// Normalised weight.
    pub weight: f64,
    /// The flow, or `None` for a holdout.
    pub flow: Option<FlowTarget>,
}
