//! The catalog (D2): raw [`CatalogData`] and the immutable, validated [`Catalog`] snapshot that
//! resolve, authentication and event validation read.
//!
//! A snapshot is built once per store change, off the request path, and shared behind an
//! `Arc`; every lookup a request needs is a hash-map probe, conditions and regexes are compiled,
//! bucket ranges computed, and each published version's `flow_schema` and `fonts` are held as
//! serialised JSON bytes that responses splice in unchanged.
//!
//! The compiled types ([`App`], [`Placement`], [`Rule`], [`Experiment`], [`Variant`], ...) are
//! made only by [`Catalog::build`] and read through getters, so what the build checked (D2, D5:
//! weights normalised, one bucket range per variant, every reference resolved) holds for every
//! value a caller meets; a caller cannot assemble one the build would refuse:
//!
//! ```compile_fail,E0451
//! use flowgate_domain::catalog::Variant;
//! // A weight the build would normalise, set by hand: the fields are private.
//! let variant = Variant { id: "2f5bc21c-2bd4-4d2a-93f3-7a1f2f0b8f43".parse().unwrap(),
//!     name: "control".to_owned(), weight: 2.0, flow: None };
//! ```

mod build;
#[cfg(feature = "server")]
pub mod changes;
mod data;
#[cfg(feature = "server")]
mod diff;
#[cfg(feature = "server")]
mod export;
mod file;
mod import;
#[cfg(feature = "server")]
pub(crate) mod rollout_plan;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::value::RawValue;
use time::OffsetDateTime;

pub use build::{check_metric, CatalogError, Problem};
#[cfg(feature = "server")]
pub use changes::{CatalogChange, ChangeError};
pub use data::{
    AnalysisData, AppData, CatalogData, ExperimentData, ExperimentStatus, FlowData,
    FlowVersionData, Font, FontStyle, PlacementData, RuleData, VariantData, WorkspaceData,
};
#[cfg(feature = "server")]
pub use diff::{
    diff_catalogs, CatalogDiff, Change, EntityChange, ExperimentShift, PlacementChange, RuleChange,
    StickyShift, VariantShare,
};
#[cfg(feature = "server")]
pub use export::ExportError;
pub use file::{CatalogFile, FileKey, WorkspaceFile};
pub use import::{imported_key_id, plan_import, ImportPlan, ImportSummary};
#[cfg(feature = "server")]
pub use import::{plan_dry_run, DryRun};

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

    /// Whether the experiments of `app` report the store metrics (D30): the app has an
    /// `apple_bundle_id`, or its workspace an active webhook key.
    pub fn reports_store_revenue(&self, app: AppId) -> bool {
        let Some(app) = self.apps.get(&app) else {
            return false;
        };
        app.apple_bundle_id.is_some()
            || self.keys.values().any(|k| {
                k.workspace_id == app.workspace_id && k.key_type == crate::keys::KeyType::Webhook
            })
    }

    /// Authenticates the key a caller of an SDK route presented (D1, D9), as its bearer token:
    /// none, a malformed key (rejected without any lookup), an unknown or revoked key, a
    /// non-`sdk` key (`secret`, or `webhook`: D30), and a key of another environment than
    /// `accepted` each give their own [`AuthError`].
    /// Reading the token out of a request (an `Authorization` header) is the transport's job.
    pub fn authenticate(
        &self,
        token: Option<&str>,
        accepted: KeyEnvironment,
    ) -> Result<&KeyRecord, AuthError> {
        self.key_of_type(token, accepted, KeyType::Sdk)
    }

    /// A bearer token's key record when it is an active key of type `wanted` and environment
    /// `accepted`; the checks of [`Catalog::authenticate`], in its order.
    #[inline]
    fn key_of_type(
        &self,
        token: Option<&str>,
        accepted: KeyEnvironment,
        wanted: KeyType,
    ) -> Result<&KeyRecord, AuthError> {
        let token = token.ok_or(AuthError::MissingApiKey)?;
        // Checked in place: the token is not copied (it is hashed once, below).
        ApiKey::check(token).map_err(|_| AuthError::InvalidApiKey)?;
        let record = self
            .keys
            .get(&KeyDigest::of(token))
            .ok_or(AuthError::InvalidApiKey)?;
        if record.key_type != wanted {
            return Err(AuthError::KeyTypeNotAllowed);
        }
        if record.environment != accepted {
            return Err(AuthError::KeyEnvironmentMismatch);
        }
        Ok(record)
    }

    /// Authenticates the key a store's notification presented for `app` (D30), as its bearer
    /// token: only a `webhook` key of the app's workspace passes. The key is checked as
    /// [`Catalog::authenticate`] checks an SDK key and refused with the same [`AuthError`]s
    /// (none, malformed, unknown or revoked, another environment than `accepted`), except
    /// that here every type but `webhook` is [`AuthError::KeyTypeNotAllowed`]; then the app,
    /// as [`Catalog::app_for`] (D9's order: the key, then the app).
    pub fn authenticate_webhook(
        &self,
        token: Option<&str>,
        accepted: KeyEnvironment,
        app: AppId,
    ) -> Result<(&KeyRecord, &App), WebhookAuthError> {
        let record = self.key_of_type(token, accepted, KeyType::Webhook)?;
        let app = self.app_for(record.workspace_id, app)?;
        Ok((record, app))
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

/// Why a store notification's key may not post for an app (D30): the key (401) or the app
/// (404, 403), in D9's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WebhookAuthError {
    /// The key is missing, malformed, unknown, revoked, not a `webhook` key or of another
    /// environment: 401 with the error's code.
    #[error(transparent)]
    Key(#[from] AuthError),
    /// A valid webhook key, for an app that does not exist or is another workspace's.
    #[error(transparent)]
    App(#[from] AppAccessError),
}

/// A workspace in the snapshot.
#[derive(Debug)]
pub struct Workspace {
    /// Id.
    pub(crate) id: WorkspaceId,
    /// Display name.
    pub(crate) name: String,
    /// Its apps, in catalog order (the legacy resolve route needs "exactly one app", D11).
    pub(crate) app_ids: Vec<AppId>,
}

impl Workspace {
    /// Id.
    pub fn id(&self) -> WorkspaceId {
        self.id
    }

    /// Display name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its apps, in catalog order (the legacy resolve route needs "exactly one app", D11).
    pub fn app_ids(&self) -> &[AppId] {
        &self.app_ids
    }
}

/// Where a flow version lives (for event validation, D7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VersionRef {
    /// Owning app.
    pub(crate) app_id: AppId,
    /// Owning flow.
    pub(crate) flow_id: FlowId,
    /// Version number.
    pub(crate) version: u32,
}

impl VersionRef {
    /// Owning app.
    pub fn app_id(&self) -> AppId {
        self.app_id
    }

    /// Owning flow.
    pub fn flow_id(&self) -> FlowId {
        self.flow_id
    }

    /// Version number.
    pub fn version(&self) -> u32 {
        self.version
    }
}

/// An app in the snapshot.
#[derive(Debug)]
pub struct App {
    /// Id.
    pub(crate) id: AppId,
    /// Owning workspace.
    pub(crate) workspace_id: WorkspaceId,
    /// Display name.
    pub(crate) name: String,
    /// Served as `media_base_url`.
    pub(crate) media_base_url: String,
    /// Served as `icon_base_url`.
    pub(crate) icon_base_url: String,
    /// App-level freshness; the configured default applies when `None` (D3.9).
    pub(crate) cache_ttl_seconds: Option<u32>,
    /// The App Store bundle id (D30).
    pub(crate) apple_bundle_id: Option<String>,
    /// The App Store environments accepted, the default filled in (D30).
    pub(crate) apple_environments: Vec<String>,
    /// Saved groups for `$inGroup` (D4).
    pub(crate) saved_groups: SavedGroups,
    pub(crate) flows: HashMap<FlowId, Flow>,
    pub(crate) placements: FastMap<String, Placement>,
    /// Whether a placement has a sticky experiment (D23).
    pub(crate) sticky: bool,
}

impl App {
    /// The App Store environments an app may accept (D30), as Apple names them in a
    /// notification's `environment`.
    pub const APPLE_ENVIRONMENTS: [&'static str; 2] = ["Production", "Sandbox"];

    /// The environments of an app with an `apple_bundle_id` that lists none (D30).
    pub const DEFAULT_APPLE_ENVIRONMENTS: [&'static str; 1] = ["Production"];

    /// Id.
    pub fn id(&self) -> AppId {
        self.id
    }

    /// Owning workspace.
    pub fn workspace_id(&self) -> WorkspaceId {
        self.workspace_id
    }

    /// Display name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Served as `media_base_url`.
    pub fn media_base_url(&self) -> &str {
        &self.media_base_url
    }

    /// Served as `icon_base_url`.
    pub fn icon_base_url(&self) -> &str {
        &self.icon_base_url
    }

    /// App-level freshness; the configured default applies when `None` (D3.9).
    pub fn cache_ttl_seconds(&self) -> Option<u32> {
        self.cache_ttl_seconds
    }

    /// The app's App Store bundle id (D30): App Store Server Notifications for the app must
    /// name it. `None`: the app takes no App Store notifications.
    pub fn apple_bundle_id(&self) -> Option<&str> {
        self.apple_bundle_id.as_deref()
    }

    /// The App Store environments whose notifications the app accepts (D30), among
    /// [`App::APPLE_ENVIRONMENTS`]: as the catalog lists them, [`App::DEFAULT_APPLE_ENVIRONMENTS`]
    /// when it lists none, and empty when the app has no [`App::apple_bundle_id`].
    pub fn apple_environments(&self) -> &[String] {
        &self.apple_environments
    }

    /// Saved groups for `$inGroup` (D4).
    pub fn saved_groups(&self) -> &SavedGroups {
        &self.saved_groups
    }

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
    pub(crate) id: FlowId,
    /// Display name.
    pub(crate) name: String,
    /// The published version, if any.
    pub(crate) published: Option<Arc<PublishedVersion>>,
}

impl Flow {
    /// Id.
    pub fn id(&self) -> FlowId {
        self.id
    }

    /// Display name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The published version, if any.
    pub fn published(&self) -> Option<&Arc<PublishedVersion>> {
        self.published.as_ref()
    }
}

/// A published flow version, pre-rendered for responses.
#[derive(Debug)]
pub struct PublishedVersion {
    /// `flow_version_id`.
    pub(crate) id: FlowVersionId,
    /// `flow_id`.
    pub(crate) flow_id: FlowId,
    /// `flow_version`.
    pub(crate) version: u32,
    /// `schema_version`.
    pub(crate) schema_version: u32,
    /// `flow_schema` exactly as published: splice these bytes into the response.
    pub(crate) flow_schema: Box<RawValue>,
    /// The fonts.
    pub(crate) fonts: Vec<Font>,
    /// `fonts` serialised once, to splice into responses.
    pub(crate) fonts_json: Box<RawValue>,
}

impl PublishedVersion {
    /// `flow_version_id`.
    pub fn id(&self) -> FlowVersionId {
        self.id
    }

    /// `flow_id`.
    pub fn flow_id(&self) -> FlowId {
        self.flow_id
    }

    /// `flow_version`.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// `schema_version`.
    pub fn schema_version(&self) -> u32 {
        self.schema_version
    }

    /// `flow_schema` exactly as published: splice these bytes into the response.
    pub fn flow_schema(&self) -> &RawValue {
        &self.flow_schema
    }

    /// The fonts.
    pub fn fonts(&self) -> &[Font] {
        &self.fonts
    }

    /// `fonts` serialised once, to splice into responses.
    pub fn fonts_json(&self) -> &RawValue {
        &self.fonts_json
    }
}

/// A placement in the snapshot.
#[derive(Debug)]
pub struct Placement {
    /// Key.
    pub(crate) key: String,
    /// Default flow (D3.3, D3.5).
    pub(crate) default: Option<FlowTarget>,
    /// Compiled rules, in order.
    pub(crate) rules: Vec<Rule>,
    /// Whether a rule that is on has a sticky experiment (D23).
    pub(crate) sticky: bool,
}

impl Placement {
    /// Key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The default flow (D3.3, D3.5), served when no rule decides.
    pub fn default_flow(&self) -> Option<&FlowTarget> {
        self.default.as_ref()
    }

    /// The compiled rules, in order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }
}

/// A flow target with its published version looked up at build time, so resolve needs no
/// second lookup.
#[derive(Clone, Debug)]
pub struct FlowTarget {
    /// The flow.
    pub(crate) flow_id: FlowId,
    /// Its published version; `None` is a configuration fault (D3.4).
    pub(crate) published: Option<Arc<PublishedVersion>>,
}

impl FlowTarget {
    /// The flow.
    pub fn flow_id(&self) -> FlowId {
        self.flow_id
    }

    /// Its published version; `None` is a configuration fault (D3.4).
    pub fn published(&self) -> Option<&Arc<PublishedVersion>> {
        self.published.as_ref()
    }
}

/// A compiled rule.
#[derive(Debug)]
pub struct Rule {
    /// Whether the rule is on; resolve skips one that is off (D3.2, D28).
    pub(crate) enabled: bool,
    /// Compiled audience.
    pub(crate) audience: Condition,
    /// What the rule serves when it decides.
    pub(crate) target: Target,
}

impl Rule {
    /// Whether the rule is on. Resolve skips a rule that is off, as one whose experiment is
    /// not running: the walk goes on to the next rule (D3.2, D28).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The compiled audience.
    pub fn audience(&self) -> &Condition {
        &self.audience
    }

    /// What the rule serves when it decides.
    pub fn target(&self) -> &Target {
        &self.target
    }
}

/// A rule's target (D2).
#[derive(Debug)]
#[non_exhaustive]
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
    pub(crate) id: ExperimentId,
    /// Name.
    pub(crate) name: String,
    /// Status; only `Running` assigns.
    pub(crate) status: ExperimentStatus,
    /// Hash seed (the id when none was given).
    pub(crate) seed: String,
    /// Coverage, 0.0..=1.0.
    pub(crate) coverage: f64,
    /// Optional mutual-exclusion namespace.
    pub(crate) namespace: Option<Namespace>,
    /// Variants, in order.
    pub(crate) variants: Vec<Variant>,
    /// One range per variant.
    pub(crate) ranges: Vec<BucketRange>,
    /// GrowthBook's hash version: 2 (D5), or 1 when the experiment says so.
    pub(crate) hash_version: u32,
    /// Sticky assignment (D23); `None` for an experiment that does no sticky work at all.
    pub(crate) sticky: Option<StickySettings>,
    /// How its results are read (D27).
    pub(crate) analysis: AnalysisSettings,
    /// When the scheduler starts it, if it is still a draft (D29).
    pub(crate) starts_at: Option<OffsetDateTime>,
    /// When the scheduler concludes it (D29).
    pub(crate) ends_at: Option<OffsetDateTime>,
}

impl Experiment {
    /// Id.
    pub fn id(&self) -> ExperimentId {
        self.id
    }

    /// Name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Status; only `Running` assigns.
    pub fn status(&self) -> ExperimentStatus {
        self.status
    }

    /// Hash seed (the id when none was given).
    pub fn seed(&self) -> &str {
        &self.seed
    }

    /// Coverage, 0.0..=1.0.
    pub fn coverage(&self) -> f64 {
        self.coverage
    }

    /// The mutual-exclusion namespace, if any.
    pub fn namespace(&self) -> Option<&Namespace> {
        self.namespace.as_ref()
    }

    /// The variants, in order.
    pub fn variants(&self) -> &[Variant] {
        &self.variants
    }

    /// One bucket range per variant, in the variants' order.
    pub fn ranges(&self) -> &[BucketRange] {
        &self.ranges
    }

    /// GrowthBook's hash version: 2 (D5), or 1 when the experiment says so.
    pub fn hash_version(&self) -> u32 {
        self.hash_version
    }

    /// Sticky assignment's settings (D23); `None` for an experiment that does no sticky work.
    pub fn sticky(&self) -> Option<&StickySettings> {
        self.sticky.as_ref()
    }

    /// How its results are read (D27): the catalog's `analysis`, or the defaults.
    pub fn analysis(&self) -> &AnalysisSettings {
        &self.analysis
    }

    /// When the scheduler starts it, if it is still `draft` then (D29).
    pub fn starts_at(&self) -> Option<OffsetDateTime> {
        self.starts_at
    }

    /// When the scheduler concludes it (D29).
    pub fn ends_at(&self) -> Option<OffsetDateTime> {
        self.ends_at
    }
}

/// An experiment's analysis settings (D27), with their defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AnalysisSettings {
    /// The metric that decides: an event type (a conversion) or `revenue`.
    pub primary_metric: String,
    /// Metrics that must not get worse.
    pub guardrail_metrics: Vec<String>,
    /// Whether the comparisons are sequential (valid at any number of looks). Chooses the
    /// report's method; [`decide`](crate::results::decide) reads whatever intervals the report has.
    pub sequential: bool,
    /// Users every variant needs before any verdict.
    pub minimum_users: u64,
}

impl Default for AnalysisSettings {
    /// `purchase_complete`, no guardrails, sequential, 100 users per variant (D27).
    fn default() -> Self {
        Self {
            primary_metric: crate::events::EventType::PurchaseComplete
                .as_str()
                .to_owned(),
            guardrail_metrics: Vec::new(),
            sequential: true,
            minimum_users: 100,
        }
    }
}

/// The metric name of store proceeds per user (reported by the stores, D30).
pub const PROCEEDS_METRIC: &str = "proceeds";

/// The store metrics' names, in report order: each may be an experiment's primary or guardrail
/// metric (D27).
pub const STORE_METRICS: [&str; 5] = [
    "trial_started",
    "trial_converted",
    "paid",
    "refunded",
    PROCEEDS_METRIC,
];

impl AnalysisSettings {
    /// The metric name of revenue per user, beside the event types.
    pub const REVENUE: &'static str = "revenue";

    /// The event types among the primary and guardrail metrics (the conversions a report of
    /// the experiment must count), in that order, each once.
    pub fn conversion_metrics(&self) -> Vec<crate::events::EventType> {
        let mut types = Vec::new();
        for name in std::iter::once(&self.primary_metric).chain(&self.guardrail_metrics) {
            if let Some(t) = crate::events::EventType::parse(name) {
                if !types.contains(&t) {
                    types.push(t);
                }
            }
        }
        types
    }
}

/// A sticky experiment's settings (D23), with the keys its assignment documents use.
#[derive(Debug)]
pub struct StickySettings {
    /// Assignments are of this version; raising it buckets everyone again.
    pub(crate) bucket_version: u32,
    /// A stored assignment of a version below this keeps the user out of the experiment.
    pub(crate) min_bucket_version: u32,
    /// The attribute whose document is read beside the user's, if any.
    pub(crate) fallback_attribute: Option<String>,
    /// The experiment's key in the documents: its id.
    pub(crate) key: String,
    /// Each variant's key in the documents, in order: its id.
    pub(crate) variant_keys: Vec<String>,
}

impl StickySettings {
    /// Assignments are of this version; raising it buckets everyone again.
    pub fn bucket_version(&self) -> u32 {
        self.bucket_version
    }

    /// A stored assignment of a version below this keeps the user out of the experiment.
    pub fn min_bucket_version(&self) -> u32 {
        self.min_bucket_version
    }

    /// The attribute whose document is read beside the user's, if any.
    pub fn fallback_attribute(&self) -> Option<&str> {
        self.fallback_attribute.as_deref()
    }

    /// The experiment's key in the documents: its id.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Each variant's key in the documents, in order: its id.
    pub fn variant_keys(&self) -> &[String] {
        &self.variant_keys
    }
}

/// A variant of a compiled experiment.
#[derive(Debug)]
pub struct Variant {
    /// Id.
    pub(crate) id: VariantId,
    /// Name.
    pub(crate) name: String,
    /// Normalised weight.
    pub(crate) weight: f64,
    /// The flow, or `None` for a holdout.
    pub(crate) flow: Option<FlowTarget>,
}

impl Variant {
    /// Id.
    pub fn id(&self) -> VariantId {
        self.id
    }

    /// Name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Normalised weight.
    pub fn weight(&self) -> f64 {
        self.weight
    }

    /// The flow, or `None` for a holdout.
    pub fn flow(&self) -> Option<&FlowTarget> {
        self.flow.as_ref()
    }
}
