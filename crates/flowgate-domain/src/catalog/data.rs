//! Raw catalog data (D2): what a store loads or a catalog file (D13) holds, before validation.
//! [`super::Catalog::build`] validates it whole and compiles it into the immutable snapshot.
//!
//! The shapes follow the D13 file format so a file can be read straight into them, except API
//! keys, which appear here as stored [`KeyRecord`]s (digests), never as plaintext.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use time::OffsetDateTime;

use crate::ids::{AppId, ExperimentId, FlowId, FlowVersionId, VariantId, WorkspaceId};
use crate::keys::KeyRecord;

/// Everything resolve, authentication and event validation read.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CatalogData {
    /// The store's revision this data was read at (D12 change detection); 0 when unknown.
    #[serde(default)]
    pub revision: u64,
    /// Workspaces with their apps.
    #[serde(default)]
    pub workspaces: Vec<WorkspaceData>,
    /// Key records of every workspace, revoked ones included (they are kept out of the
    /// snapshot's key table).
    #[serde(default)]
    pub api_keys: Vec<KeyRecord>,
}

impl CatalogData {
    /// Every experiment of the catalog, in the order of its workspaces, apps, placements and
    /// rules.
    pub fn experiments(&self) -> impl Iterator<Item = &ExperimentData> {
        self.workspaces
            .iter()
            .flat_map(|w| &w.apps)
            .flat_map(|a| &a.placements)
            .flat_map(|p| &p.rules)
            .filter_map(|r| r.experiment.as_ref())
    }
}

/// A workspace (D2).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkspaceData {
    /// Workspace id.
    pub id: WorkspaceId,
    /// Display name.
    pub name: String,
    /// Its apps.
    #[serde(default)]
    pub apps: Vec<AppData>,
}

/// An app (D2).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AppData {
    /// App id, the `appId` of the URLs.
    pub id: AppId,
    /// Display name.
    pub name: String,
    /// Base URL for relative media paths, served in every resolve result.
    pub media_base_url: String,
    /// Base URL for icon SVGs, served in every resolve result.
    pub icon_base_url: String,
    /// Freshness period; the configured default (300) applies when unset (D2, D3.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_ttl_seconds: Option<u32>,
    /// The app's bundle id on the App Store (D30), e.g. `com.example.app`: 1 to 155
    /// characters of `A-Za-z0-9.-`. App Store Server Notifications for the app must name it.
    /// A member of catalog format 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apple_bundle_id: Option<String>,
    /// The App Store environments whose notifications the app accepts (D30): `Production`
    /// and/or `Sandbox`, each once; empty: `["Production"]`. Only with `apple_bundle_id`. A
    /// member of catalog format 2.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apple_environments: Vec<String>,
    /// Saved groups for `$inGroup` / `$notInGroup` (D4).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub saved_groups: BTreeMap<String, Vec<Value>>,
    /// Flows with their versions.
    #[serde(default)]
    pub flows: Vec<FlowData>,
    /// Placements with their rules.
    #[serde(default)]
    pub placements: Vec<PlacementData>,
}

/// A flow (D2): points at its published version by number.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FlowData {
    /// Flow id.
    pub id: FlowId,
    /// Display name.
    pub name: String,
    /// The `version` number served by resolve; `None` while nothing is published.
    #[serde(default)]
    pub published_version: Option<u32>,
    /// Every version, published or not (all count as real versions for events, D2).
    #[serde(default)]
    pub versions: Vec<FlowVersionData>,
}

/// One version of a flow (D2).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FlowVersionData {
    /// Version id (`flow_version_id`).
    pub id: FlowVersionId,
    /// Version number, >= 1, unique per flow.
    pub version: u32,
    /// Wire-format version of the flow, >= 1.
    pub schema_version: u32,
    /// Fonts to download and register.
    #[serde(default)]
    pub fonts: Vec<Font>,
    /// The flow definition: any JSON object, kept as its exact text so it is served unchanged
    /// (D2: no key, string or number altered, integers beyond 2^53 included).
    pub flow_schema: Box<RawValue>,
}

/// A font file of a flow version (D2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Font {
    /// Font family name.
    pub family: String,
    /// Weight, 100..=900.
    pub weight: u16,
    /// `normal` or `italic`.
    pub style: FontStyle,
    /// Where to download it.
    pub url: String,
}

/// Font style (D2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FontStyle {
    /// Upright.
    Normal,
    /// Italic.
    Italic,
}

/// A placement (D2): identified within its app by `key`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlacementData {
    /// Human-readable key, 1..=128 characters of `A-Za-z0-9_.:-`.
    pub key: String,
    /// Flow served when no rule decides (D3.3) and by export (D3.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_flow_id: Option<FlowId>,
    /// Rules, walked in order (D3.2).
    #[serde(default)]
    pub rules: Vec<RuleData>,
}

/// A rule: an audience and exactly one target (D2).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RuleData {
    /// Whether the rule is on (default `true`). Resolve skips a rule that is off as it skips
    /// one whose experiment is not running (D3.2): the walk goes on to the next rule, then the
    /// default flow. The rule and its experiment stay in the catalog, so turning it on again
    /// restores it and the experiment's results stay readable (D28). Written only when
    /// `false`. A member of catalog format 2.
    #[serde(default = "on", skip_serializing_if = "is_on")]
    pub enabled: bool,
    /// Audience condition (D4); absent or `{}` matches everyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Value>,
    /// Target: a flow ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_id: Option<FlowId>,
    /// ... or an experiment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experiment: Option<ExperimentData>,
}

/// An experiment (D2).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExperimentData {
    /// Experiment id.
    pub id: ExperimentId,
    /// Name.
    pub name: String,
    /// Only `running` experiments assign users (D3.2).
    pub status: ExperimentStatus,
    /// Hash seed; defaults to the experiment id (D5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// Share of users in the experiment, 0.0..=1.0 (default 1.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<f64>,
    /// Mutual-exclusion namespace `[id, start, end]` (D5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<(String, f64, f64)>,
    /// GrowthBook's hash version, 1 or 2 (default 2, D5): 1 only to reproduce an experiment
    /// that GrowthBook SDKs bucket with version 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_version: Option<u32>,
    /// Sticky assignment (D23): a user keeps the variant stored for them when weights,
    /// coverage or audience change.
    #[serde(default, skip_serializing_if = "is_false")]
    pub sticky: bool,
    /// Sticky assignments are of this version; raising it buckets everyone again (D23).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bucket_version: u32,
    /// A user with a stored assignment of a version below this is not in the experiment
    /// (D23).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub min_bucket_version: u32,
    /// An attribute whose document is read beside the user's (GrowthBook's
    /// `fallbackAttribute`, D23), e.g. a device id kept across sign-in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_attribute: Option<String>,
    /// How its results are read (D27); `None`: the defaults. A member of catalog format 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<AnalysisData>,
    /// When a `draft` experiment starts (D29): the scheduler of `flowgate serve` sets it
    /// `running` then. A member of catalog format 2.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub starts_at: Option<OffsetDateTime>,
    /// When a `running` (or `paused`, or still `draft`) experiment ends (D29): the scheduler
    /// sets it `concluded` then; after `starts_at` when both are given. A member of catalog
    /// format 2.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub ends_at: Option<OffsetDateTime>,
    /// At least one variant.
    pub variants: Vec<VariantData>,
}

impl ExperimentData {
    /// The status its schedule (D29) gives it at `now`, when that differs from its status:
    /// `concluded` once `ends_at` has come (unless it already is), `running` for a `draft`
    /// once `starts_at` has come. What the scheduler applies; `None`: nothing is due.
    pub fn scheduled_status(&self, now: OffsetDateTime) -> Option<ExperimentStatus> {
        if self.ends_at.is_some_and(|at| at <= now) {
            return (self.status != ExperimentStatus::Concluded)
                .then_some(ExperimentStatus::Concluded);
        }
        let started = self.starts_at.is_some_and(|at| at <= now);
        (started && self.status == ExperimentStatus::Draft).then_some(ExperimentStatus::Running)
    }
}

/// An experiment's analysis settings as written (D27); a missing member takes its default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnalysisData {
    /// The metric that decides: an event type or `revenue` (default `purchase_complete`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_metric: Option<String>,
    /// Metrics that must not get worse (default none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guardrail_metrics: Vec<String>,
    /// Sequential testing (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequential: Option<bool>,
    /// Users per variant before any verdict (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_users: Option<u64>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// A rule is on unless it says otherwise.
fn on() -> bool {
    true
}

fn is_on(value: &bool) -> bool {
    *value
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// Experiment status (D2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExperimentStatus {
    /// Assigning users.
    Running,
    /// Temporarily not assigning; the rule is skipped.
    Paused,
    /// Not started; the rule is skipped.
    Draft,
    /// Finished; the rule is skipped.
    Concluded,
}

impl ExperimentStatus {
    /// The stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            ExperimentStatus::Running => "running",
            ExperimentStatus::Paused => "paused",
            ExperimentStatus::Draft => "draft",
            ExperimentStatus::Concluded => "concluded",
        }
    }
}

/// A variant of an experiment (D2).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VariantData {
    /// Variant id.
    pub id: VariantId,
    /// Name, served as `variant_name`.
    pub name: String,
    /// Relative weight, >= 0; weights are normalised by their sum.
    pub weight: f64,
    /// The flow shown, or `None` for a holdout (in the experiment, sees no flow).
    #[serde(default)]
    pub flow_id: Option<FlowId>,
    /// The version of `flow_id` shown, whether published or not; `None`: the published one.
    /// A staged rollout of another version of a flow pins it (D29). A member of catalog
    /// format 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_version: Option<u32>,
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    #[test]
    fn a_schedule_starts_a_draft_and_concludes_whatever_has_not_ended() {
        let experiment = |status, starts_at, ends_at| ExperimentData {
            id: ExperimentId(uuid::Uuid::from_u128(1)),
            name: "e".to_owned(),
            status,
            seed: None,
            coverage: None,
            namespace: None,
            hash_version: None,
            sticky: false,
            bucket_version: 0,
            min_bucket_version: 0,
            fallback_attribute: None,
            analysis: None,
            starts_at,
            ends_at,
            variants: Vec::new(),
        };
        let (start, end) = (
            datetime!(2026-12-01 9:00 UTC),
            datetime!(2026-12-02 9:00 UTC),
        );
        let (before, between, after) = (
            datetime!(2026-12-01 8:59 UTC),
            datetime!(2026-12-01 9:00 UTC),
            datetime!(2026-12-02 9:00 UTC),
        );
        use ExperimentStatus::*;
        let draft = experiment(Draft, Some(start), Some(end));
        assert_eq!(draft.scheduled_status(before), None);
        assert_eq!(
            draft.scheduled_status(between),
            Some(Running),
            "at its start"
        );
        assert_eq!(
            draft.scheduled_status(after),
            Some(Concluded),
            "never ran: ends"
        );
        let running = experiment(Running, Some(start), Some(end));
        assert_eq!(running.scheduled_status(between), None, "already running");
        assert_eq!(running.scheduled_status(after), Some(Concluded));
        let paused = experiment(Paused, Some(start), None);
        assert_eq!(
            paused.scheduled_status(after),
            None,
            "a pause is a person's"
        );
        assert_eq!(
            experiment(Paused, None, Some(end)).scheduled_status(after),
            Some(Concluded)
        );
        assert_eq!(
            experiment(Concluded, Some(start), Some(end)).scheduled_status(after),
            None
        );
        assert_eq!(experiment(Draft, None, None).scheduled_status(after), None);
    }
}
