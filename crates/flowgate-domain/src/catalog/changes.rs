//! The catalog changes an editor makes from the console (D28), as data: start, pause or stop
//! an experiment, change its weights and coverage, ship a variant, publish a flow version or
//! return to an earlier one, turn a rule on or off.
//!
//! A change does not write anything itself. [`CatalogChange::apply`] turns it, against the
//! stored catalog, into a catalog file that goes through the one write path every catalog
//! change takes (D28): [`plan_dry_run`](super::plan_dry_run) to show what it would do (users
//! moved per experiment, D19), then [`plan_import`](super::plan_import), which validates the
//! catalog it leaves and plans the store's write (revision, notification of replicas,
//! history). So a change can never leave a catalog an import would refuse.
//!
//! # What the file holds
//!
//! The file holds the one workspace and app the change is in, with only the placement or the
//! flow it changes (every other member of them as stored). An import keeps what a file leaves
//! out, so the catalog the import leaves is the stored catalog with exactly this change made,
//! and the store rewrites one placement or one flow rather than the whole catalog.
//!
//! # What each change does
//!
//! - [`SetExperimentStatus`](CatalogChange::SetExperimentStatus): start (`running`, also to
//!   resume a paused experiment), pause (`paused`) or stop (`concluded`). An experiment that
//!   has left `draft` cannot return to it.
//! - [`SetAllocation`](CatalogChange::SetAllocation): new weights, one for every variant of
//!   the experiment (each a number >= 0, adding up to more than 0; the variants keep their
//!   order, which bucketing follows, D5), and optionally a new coverage from 0 to 1.
//! - [`ShipVariant`](CatalogChange::ShipVariant): a new rule with the experiment rule's
//!   audience and the variant's flow as its target is inserted right before the experiment's
//!   rule, and the experiment becomes `concluded`. The experiment stays in the catalog (its
//!   rule is skipped from then on, D3.2), so its results stay readable. The new rule is on
//!   whether or not the experiment's rule is: shipping means serving. A variant that shows a
//!   version of its own (`flow_version`, D29) ships that version: its flow publishes it in the
//!   same change. A holdout variant (no flow) cannot be shipped, nor a variant whose flow
//!   publishes no version (its users would get no flow, D3.4).
//! - [`PublishFlowVersion`](CatalogChange::PublishFlowVersion): the flow serves that version,
//!   any version it has, newer or older than the one it serves.
//! - [`SetRuleEnabled`](CatalogChange::SetRuleEnabled): turns a rule, by its position in the
//!   placement's rules (from 0, as explain and the dry run count them), on or off. A rule that
//!   is off is skipped by resolve as one whose experiment is not running.
//!
//! - [`StartRollout`](CatalogChange::StartRollout) (D29): a rule that serves a flow (and is
//!   on) then runs a new sticky experiment, with the rule's audience, between that flow
//!   (variant `current`) and the rollout's (`new`: the version `version` of a flow, which may
//!   be the rule's own flow, or else the version its flow publishes), weighted
//!   `100 - share` and `share`, its `analysis` sequential with the guardrails (the first as its
//!   primary metric). The rollout's later steps are [`SetAllocation`](CatalogChange::SetAllocation),
//!   its end a [`ShipVariant`](CatalogChange::ShipVariant) of `new` (completed) or of `current`
//!   (rolled back).
//!
//! A change that would change nothing (pausing a paused experiment, publishing the published
//! version, shipping a variant already shipped) is refused as [`ChangeError::NoChange`], so
//! every applied change is a real one in the audit log.
//!
//! # Stored form
//!
//! A proposed change is stored until it is applied or withdrawn, so its JSON is a versioned
//! format (D26): [`CatalogChange::to_json`] writes the current version,
//! [`CatalogChange::from_json`] reads it and every earlier one. Golden samples of each version
//! are in `formats/flowgate.catalog-change/v<N>/`, read by the domain's integration tests
//! (`tests/it/catalog_changes.rs`).
//!
//! | `format` | written by | what changed |
//! |---|---|---|
//! | 1 | 0.3.0 and later | the first: `kind` and the change's members |
//!
//! `{"format": 1, "kind": "ship_variant", "experiment": "<uuid>", "variant": "<uuid>"}`; the
//! other kinds are `set_experiment_status` (`experiment`, `status`), `set_allocation`
//! (`experiment`, `weights`: `[{"variant", "weight"}]` in any order, optional `coverage`),
//! `publish_flow_version` (`flow`, `version`), `set_rule_enabled` (`app`, `placement`,
//! `rule`, `enabled`) and `start_rollout` (`app`, `placement`, `rule`, `experiment`, `name`,
//! `control`, `treatment`, `flow`, optional `version`, `share`, `guardrails`,
//! `minimum_users`). Members a reader does not know are ignored; a format or kind it does
//! not know is refused, quoting it (a change is never applied half understood).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::data::{
    AppData, CatalogData, ExperimentData, ExperimentStatus, FlowData, PlacementData, RuleData,
    VariantData, WorkspaceData,
};
use super::file::{CatalogFile, WorkspaceFile};
use crate::ids::{AppId, ExperimentId, FlowId, VariantId};
use crate::shown::shown;

/// A catalog change made from the console (D28).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CatalogChange {
    /// Start (`Running`, also to resume from `Paused`), pause (`Paused`) or stop
    /// (`Concluded`) an experiment.
    SetExperimentStatus {
        /// The experiment.
        experiment: ExperimentId,
        /// Its new status.
        status: ExperimentStatus,
    },
    /// New weights (every variant of the experiment, each >= 0, adding up to more than 0) and
    /// optionally a new coverage, 0..=1.
    SetAllocation {
        /// The experiment.
        experiment: ExperimentId,
        /// Each variant's new weight.
        weights: Vec<(VariantId, f64)>,
        /// The new coverage; `None` keeps it.
        coverage: Option<f64>,
    },
    /// The experiment's audience then gets the variant's flow from a rule of its own, and the
    /// experiment stops (see the module documentation).
    ShipVariant {
        /// The experiment.
        experiment: ExperimentId,
        /// The variant shipped.
        variant: VariantId,
    },
    /// Publish a flow version, or return to an earlier one (any version the flow has).
    PublishFlowVersion {
        /// The flow.
        flow: FlowId,
        /// The version number to serve.
        version: u32,
    },
    /// Turn a placement rule on or off.
    SetRuleEnabled {
        /// The app.
        app: AppId,
        /// The placement's key.
        placement: String,
        /// The rule's position in the placement's rules, from 0.
        rule: usize,
        /// On or off.
        enabled: bool,
    },
    /// Start a staged rollout (D29): the rule, which serves a flow, then runs a sticky
    /// experiment between that flow (the control) and `flow` (the treatment, at `share`
    /// percent), its guardrails in its `analysis` (see the module documentation).
    StartRollout {
        /// The app.
        app: AppId,
        /// The placement's key.
        placement: String,
        /// The rule's position in the placement's rules, from 0.
        rule: usize,
        /// The new experiment's id (and the rollout's, in its seed).
        experiment: ExperimentId,
        /// Its name.
        name: String,
        /// The control variant's id (the rule's flow).
        control: VariantId,
        /// The treatment variant's id (the new flow).
        treatment: VariantId,
        /// The new flow.
        flow: FlowId,
        /// The version of `flow` the new variant shows, whether published or not; `None`: the
        /// one it publishes. A stored member since 0.3.0, optional (D26).
        version: Option<u32>,
        /// The first step's share of users on the new flow, in percent (above 0, below 100).
        share: f64,
        /// The guardrails: the first is the experiment's primary metric, the rest its
        /// guardrail metrics.
        guardrails: Vec<String>,
        /// Users each variant needs before a verdict.
        minimum_users: u64,
        /// The rollout's plan, in a start proposed for review (D35): approving the change
        /// starts the rollout with it. `None` in a start applied at once (the rollout's own
        /// record holds its plan). A stored member since 0.3.0, optional (D26).
        plan: Option<Box<super::rollout_plan::RolloutPlan>>,
    },
    /// Import a catalog file (D13) proposed for review (D35: `flowgate import --author` with
    /// `catalog.require_review`): applying it imports the file as `flowgate import` does,
    /// against the catalog as it is then.
    ImportFile {
        /// The file's name as given, for people.
        name: String,
        /// The SHA-256 of the file's bytes, hex: what the import history records.
        sha256: String,
        /// The file as JSON (YAML files too: as parsed), read as a [`CatalogFile`] when applied.
        catalog: Box<Value>,
    },
}

/// Why a change cannot be made (or read). Each has a stable [`code`](ChangeError::code); each
/// message quotes the id or value at fault.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ChangeError {
    /// No experiment with this id.
    #[error("no experiment {0} in the catalog")]
    UnknownExperiment(ExperimentId),
    /// The experiment has no variant with this id.
    #[error("experiment `{experiment}` has no variant {variant}")]
    UnknownVariant {
        /// The experiment's name.
        experiment: String,
        /// The variant asked for.
        variant: VariantId,
    },
    /// No flow with this id.
    #[error("no flow {0} in the catalog")]
    UnknownFlow(FlowId),
    /// The flow has no version with this number.
    #[error("flow `{flow}` has no version {version} (its versions: {versions})")]
    UnknownFlowVersion {
        /// The flow's name.
        flow: String,
        /// The version asked for.
        version: u32,
        /// The versions it has, for the message.
        versions: String,
    },
    /// No app with this id.
    #[error("no app {0} in the catalog")]
    UnknownApp(AppId),
    /// The app has no placement with this key.
    #[error("app `{app}` has no placement `{placement}`")]
    UnknownPlacement {
        /// The app's name.
        app: String,
        /// The key asked for.
        placement: String,
    },
    /// The placement has no rule at this position.
    #[error("placement `{placement}` has no rule {rule}: {detail}")]
    UnknownRule {
        /// The placement's key.
        placement: String,
        /// The position asked for.
        rule: usize,
        /// Which rules it has.
        detail: String,
    },
    /// The variant to ship is a holdout.
    #[error("variant `{variant}` of `{experiment}` is a holdout: it has no flow to ship")]
    HoldoutHasNoFlow {
        /// The experiment's name.
        experiment: String,
        /// The variant's name.
        variant: String,
    },
    /// The flow to serve publishes no version.
    #[error(
        "flow `{flow}` of variant `{variant}` publishes no version, so shipping it would serve \
         no flow (D3.4): publish a version of it first"
    )]
    FlowUnpublished {
        /// The flow's name.
        flow: String,
        /// The variant's name.
        variant: String,
    },
    /// New weights that are not one number >= 0 per variant adding up to more than 0.
    #[error("invalid weights for `{experiment}`: {detail}")]
    InvalidWeights {
        /// The experiment's name.
        experiment: String,
        /// What is wrong, quoting the value.
        detail: String,
    },
    /// A coverage outside 0..=1.
    #[error("coverage must be a number from 0 to 1, not {0}")]
    InvalidCoverage(f64),
    /// The change would change nothing.
    #[error("nothing to change: {0}")]
    NoChange(String),
    /// A change that cannot be made, or stored JSON that is no change.
    #[error("{0}")]
    InvalidChange(String),
    /// Stored JSON of a format this release does not read.
    #[error(
        "catalog change format {0} is not one this release reads (format {format}): apply it \
         with a release that reads it",
        format = CatalogChange::FORMAT
    )]
    UnsupportedFormat(String),
    /// Stored JSON of a kind this release does not know.
    #[error(
        "{0} is not a kind of catalog change this release knows (set_experiment_status, \
         set_allocation, ship_variant, publish_flow_version, set_rule_enabled, start_rollout)"
    )]
    UnknownKind(String),
}

impl ChangeError {
    /// The stable snake_case code.
    pub const fn code(&self) -> &'static str {
        match self {
            ChangeError::UnknownExperiment(_) => "unknown_experiment",
            ChangeError::UnknownVariant { .. } => "unknown_variant",
            ChangeError::UnknownFlow(_) => "unknown_flow",
            ChangeError::UnknownFlowVersion { .. } => "unknown_flow_version",
            ChangeError::UnknownApp(_) => "unknown_app",
            ChangeError::UnknownPlacement { .. } => "unknown_placement",
            ChangeError::UnknownRule { .. } => "unknown_rule",
            ChangeError::HoldoutHasNoFlow { .. } => "holdout_has_no_flow",
            ChangeError::FlowUnpublished { .. } => "flow_unpublished",
            ChangeError::InvalidWeights { .. } => "invalid_weights",
            ChangeError::InvalidCoverage(_) => "invalid_coverage",
            ChangeError::NoChange(_) => "no_change",
            ChangeError::InvalidChange(_) => "invalid_change",
            ChangeError::UnsupportedFormat(_) => "unsupported_format",
            ChangeError::UnknownKind(_) => "unknown_kind",
        }
    }
}

/// Where an experiment is in the stored catalog.
struct ExperimentAt<'a> {
    workspace: &'a WorkspaceData,
    app: &'a AppData,
    placement: &'a PlacementData,
    rule: usize,
    experiment: &'a ExperimentData,
}

impl<'a> ExperimentAt<'a> {
    fn find(stored: &'a CatalogData, id: ExperimentId) -> Option<Self> {
        for workspace in &stored.workspaces {
            for app in &workspace.apps {
                for placement in &app.placements {
                    for (rule, r) in placement.rules.iter().enumerate() {
                        if let Some(experiment) = r.experiment.as_ref().filter(|e| e.id == id) {
                            return Some(ExperimentAt {
                                workspace,
                                app,
                                placement,
                                rule,
                                experiment,
                            });
                        }
                    }
                }
            }
        }
        None
    }

    fn get(stored: &'a CatalogData, id: ExperimentId) -> Result<Self, ChangeError> {
        Self::find(stored, id).ok_or(ChangeError::UnknownExperiment(id))
    }

    /// `(placement, app name)`, as descriptions end.
    fn context(&self) -> String {
        format!("({}, {})", self.placement.key, self.app.name)
    }

    /// A copy of its placement with `edit` made to the experiment; the placement is returned
    /// with it for changes that edit the rule list too.
    fn edited(&self, edit: impl FnOnce(&mut ExperimentData)) -> PlacementData {
        let mut placement = self.placement.clone();
        if let Some(e) = placement.rules[self.rule].experiment.as_mut() {
            edit(e);
        }
        placement
    }

    fn file(&self, placement: PlacementData) -> CatalogFile {
        file_of(self.workspace, self.app, Some(placement), None)
    }
}

/// Where a flow is in the stored catalog.
fn find_flow(stored: &CatalogData, id: FlowId) -> Option<(&WorkspaceData, &AppData, &FlowData)> {
    stored.workspaces.iter().find_map(|ws| {
        ws.apps.iter().find_map(|app| {
            app.flows
                .iter()
                .find(|f| f.id == id)
                .map(|flow| (ws, app, flow))
        })
    })
}

/// A rule of a placement of an app, with its workspace, app and placement.
fn rule_at<'a>(
    stored: &'a CatalogData,
    app: AppId,
    placement: &str,
    rule: usize,
) -> Result<
    (
        &'a WorkspaceData,
        &'a AppData,
        &'a PlacementData,
        &'a RuleData,
    ),
    ChangeError,
> {
    let (ws, a) = find_app(stored, app).ok_or(ChangeError::UnknownApp(app))?;
    let p = a
        .placements
        .iter()
        .find(|p| p.key == placement)
        .ok_or_else(|| ChangeError::UnknownPlacement {
            app: a.name.clone(),
            placement: placement.to_owned(),
        })?;
    let r = p.rules.get(rule).ok_or_else(|| ChangeError::UnknownRule {
        placement: p.key.clone(),
        rule,
        detail: match p.rules.len() {
            0 => "it has none".to_owned(),
            1 => "it has one, rule 0".to_owned(),
            n => format!("it has {n}, rules 0 to {}", n - 1),
        },
    })?;
    Ok((ws, a, p, r))
}

/// Where an app is in the stored catalog.
fn find_app(stored: &CatalogData, id: AppId) -> Option<(&WorkspaceData, &AppData)> {
    stored
        .workspaces
        .iter()
        .find_map(|ws| ws.apps.iter().find(|a| a.id == id).map(|app| (ws, app)))
}

/// The catalog file of one changed placement or flow of `app` (see the module's "What the
/// file holds"), written as the lowest format its members need.
fn file_of(
    workspace: &WorkspaceData,
    app: &AppData,
    placement: Option<PlacementData>,
    flow: Option<FlowData>,
) -> CatalogFile {
    let app = AppData {
        flows: flow.into_iter().collect(),
        placements: placement.into_iter().collect(),
        ..app.clone_without_children()
    };
    let mut file = CatalogFile {
        format: CatalogFile::FORMAT,
        workspaces: vec![WorkspaceFile {
            id: workspace.id,
            name: workspace.name.clone(),
            api_keys: Vec::new(),
            apps: vec![app],
        }],
    };
    file.format = file.lowest_format();
    file
}

/// A share as people read it: `0.5` is `50%`, `1/3` is `33.33%`.
fn percent(share: f64) -> String {
    format!("{}%", (share * 10_000.0).round() / 100.0)
}

/// A flow's versions for a message: `1, 2, 3`, or `none`.
fn versions_of(flow: &FlowData) -> String {
    let mut numbers: Vec<u32> = flow.versions.iter().map(|v| v.version).collect();
    numbers.sort_unstable();
    if numbers.is_empty() {
        return "none".to_owned();
    }
    numbers
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// [`CatalogChange::SetExperimentStatus`]: a status the experiment does not have, never draft
/// again.
fn set_experiment_status(
    stored: &CatalogData,
    experiment: ExperimentId,
    status: ExperimentStatus,
) -> Result<CatalogFile, ChangeError> {
    let at = ExperimentAt::get(stored, experiment)?;
    let e = at.experiment;
    if e.status == status {
        return Err(ChangeError::NoChange(format!(
            "`{}` is already {}",
            e.name,
            status.as_str()
        )));
    }
    if status == ExperimentStatus::Draft {
        return Err(ChangeError::InvalidChange(format!(
            "`{}` is {}: an experiment that has left draft cannot return to it; \
             pause or stop it",
            e.name,
            e.status.as_str()
        )));
    }
    Ok(at.file(at.edited(|e| e.status = status)))
}

/// [`CatalogChange::SetAllocation`]: new weights and coverage, not those the experiment has.
fn set_allocation(
    stored: &CatalogData,
    experiment: ExperimentId,
    weights: &[(VariantId, f64)],
    coverage: Option<f64>,
) -> Result<CatalogFile, ChangeError> {
    let at = ExperimentAt::get(stored, experiment)?;
    let new = allocation(at.experiment, weights, coverage)?;
    let e = at.experiment;
    let same_weights = e.variants.iter().zip(&new.0).all(|(v, w)| v.weight == *w);
    if same_weights && new.1 == e.coverage {
        return Err(ChangeError::NoChange(format!(
            "`{}` already has these weights and this coverage",
            e.name
        )));
    }
    Ok(at.file(at.edited(|e| {
        for (variant, weight) in e.variants.iter_mut().zip(new.0) {
            variant.weight = weight;
        }
        e.coverage = new.1;
    })))
}

/// [`CatalogChange::ShipVariant`]: the experiment concluded, and a rule serving the variant's
/// flow to the same audience put before it.
fn ship_variant(
    stored: &CatalogData,
    experiment: ExperimentId,
    variant: VariantId,
) -> Result<CatalogFile, ChangeError> {
    let at = ExperimentAt::get(stored, experiment)?;
    let e = at.experiment;
    let v =
        e.variants
            .iter()
            .find(|v| v.id == variant)
            .ok_or_else(|| ChangeError::UnknownVariant {
                experiment: e.name.clone(),
                variant,
            })?;
    let flow_id = v.flow_id.ok_or_else(|| ChangeError::HoldoutHasNoFlow {
        experiment: e.name.clone(),
        variant: v.name.clone(),
    })?;
    let publish = shipped_publication(&at, v, flow_id)?;
    let audience = at.placement.rules[at.rule].audience.clone();
    let shipped = RuleData {
        enabled: true,
        audience,
        flow_id: Some(flow_id),
        experiment: None,
    };
    let already = at.rule.checked_sub(1).is_some_and(|before| {
        let r = &at.placement.rules[before];
        r.enabled
            && r.experiment.is_none()
            && r.flow_id == shipped.flow_id
            && r.audience == shipped.audience
    });
    if already && e.status == ExperimentStatus::Concluded {
        if publish.is_some() {
            return Ok(file_of(at.workspace, at.app, None, publish));
        }
        return Err(ChangeError::NoChange(format!(
            "`{}` of `{}` is already shipped: the rule before the experiment's \
             serves its flow to the same audience",
            v.name, e.name
        )));
    }
    let mut placement = at.edited(|e| e.status = ExperimentStatus::Concluded);
    placement.rules.insert(at.rule, shipped);
    Ok(file_of(at.workspace, at.app, Some(placement), publish))
}

/// The flow that shipping variant `v` (showing flow `flow_id`) publishes anew, if any. A
/// variant showing a version of its own (D29) ships that version: the flow publishes it in the
/// same change. One showing the published version of a flow that publishes none is refused.
fn shipped_publication(
    at: &ExperimentAt<'_>,
    v: &VariantData,
    flow_id: FlowId,
) -> Result<Option<FlowData>, ChangeError> {
    let flow = at.app.flows.iter().find(|f| f.id == flow_id);
    match (flow, v.flow_version) {
        (Some(flow), Some(n)) if flow.published_version != Some(n) => {
            let mut flow = flow.clone();
            flow.published_version = Some(n);
            Ok(Some(flow))
        }
        (Some(flow), None) if flow.published_version.is_none() => {
            Err(ChangeError::FlowUnpublished {
                flow: flow.name.clone(),
                variant: v.name.clone(),
            })
        }
        _ => Ok(None),
    }
}

/// [`CatalogChange::PublishFlowVersion`]: a version the flow has and does not publish yet.
fn publish_flow_version(
    stored: &CatalogData,
    flow: FlowId,
    version: u32,
) -> Result<CatalogFile, ChangeError> {
    let (ws, app, f) = find_flow(stored, flow).ok_or(ChangeError::UnknownFlow(flow))?;
    if !f.versions.iter().any(|v| v.version == version) {
        return Err(ChangeError::UnknownFlowVersion {
            flow: f.name.clone(),
            version,
            versions: versions_of(f),
        });
    }
    if f.published_version == Some(version) {
        return Err(ChangeError::NoChange(format!(
            "`{}` already publishes version {version}",
            f.name
        )));
    }
    let mut f = f.clone();
    f.published_version = Some(version);
    Ok(file_of(ws, app, None, Some(f)))
}

/// [`CatalogChange::SetRuleEnabled`]: a rule turned on or off that is not so already.
fn set_rule_enabled(
    stored: &CatalogData,
    app: AppId,
    placement: &str,
    rule: usize,
    enabled: bool,
) -> Result<CatalogFile, ChangeError> {
    let (ws, a, p, r) = rule_at(stored, app, placement, rule)?;
    if r.enabled == enabled {
        return Err(ChangeError::NoChange(format!(
            "rule {rule} of placement `{}` is already {}",
            p.key,
            if enabled { "on" } else { "off" }
        )));
    }
    let mut p = p.clone();
    p.rules[rule].enabled = enabled;
    Ok(file_of(ws, a, Some(p), None))
}

/// The members of a [`CatalogChange::StartRollout`], borrowed, so that its checks and the
/// experiment it writes are functions of their own.
struct RolloutStart<'a> {
    app: AppId,
    placement: &'a str,
    rule: usize,
    experiment: ExperimentId,
    name: &'a str,
    control: VariantId,
    treatment: VariantId,
    flow: FlowId,
    version: Option<u32>,
    share: f64,
    guardrails: &'a [String],
    minimum_users: u64,
}

impl RolloutStart<'_> {
    /// The rule, which serves a flow and is on, runs a sticky two-variant experiment instead:
    /// its old flow against the new one at the first share.
    fn apply(&self, stored: &CatalogData) -> Result<CatalogFile, ChangeError> {
        let (rule, placement) = (self.rule, self.placement);
        let (ws, a, p, r) = rule_at(stored, self.app, placement, rule)?;
        let old = match (&r.experiment, r.flow_id) {
            (None, Some(old)) => old,
            _ => {
                return Err(ChangeError::InvalidChange(format!(
                    "rule {rule} of placement `{placement}` runs an experiment: a \
                     rollout starts from a rule that serves a flow"
                )))
            }
        };
        if !r.enabled {
            return Err(ChangeError::InvalidChange(format!(
                "rule {rule} of placement `{placement}` is off: turn it on first"
            )));
        }
        self.check_new_flow(a, old)?;
        if !(self.share.is_finite() && self.share > 0.0 && self.share < 100.0) {
            return Err(ChangeError::InvalidChange(format!(
                "a rollout's first share is above 0 and below 100, not {}",
                self.share
            )));
        }
        let Some((primary, rest)) = self.guardrails.split_first() else {
            return Err(ChangeError::InvalidChange(
                "a rollout needs at least one guardrail".to_owned(),
            ));
        };
        let mut p = p.clone();
        p.rules[rule] = RuleData {
            enabled: true,
            audience: r.audience.clone(),
            flow_id: None,
            experiment: Some(self.experiment_data(old, primary, rest)),
        };
        Ok(file_of(ws, a, Some(p), None))
    }

    /// The new flow is a flow of app `a` with the version named (or a published one when none
    /// is), and the rule, which serves flow `old`, does not serve it already.
    fn check_new_flow(&self, a: &AppData, old: FlowId) -> Result<(), ChangeError> {
        let new = a
            .flows
            .iter()
            .find(|f| f.id == self.flow)
            .ok_or(ChangeError::UnknownFlow(self.flow))?;
        match self.version {
            Some(n) if !new.versions.iter().any(|v| v.version == n) => {
                return Err(ChangeError::UnknownFlowVersion {
                    flow: new.name.clone(),
                    version: n,
                    versions: versions_of(new),
                })
            }
            Some(_) => {}
            None if new.published_version.is_none() => {
                return Err(ChangeError::FlowUnpublished {
                    flow: new.name.clone(),
                    variant: "new".to_owned(),
                })
            }
            None => {}
        }
        let serves = self
            .version
            .is_none_or(|n| new.published_version == Some(n));
        if old == self.flow && serves {
            return Err(ChangeError::NoChange(format!(
                "rule {} of placement `{}` serves this flow{} already",
                self.rule,
                self.placement,
                self.version
                    .map_or_else(String::new, |n| format!(" at version {n}"))
            )));
        }
        Ok(())
    }

    /// The rollout's experiment: running, sticky, `current` (flow `old`) against `new`, read
    /// sequentially on the `primary` guardrail with the `rest`.
    fn experiment_data(&self, old: FlowId, primary: &str, rest: &[String]) -> ExperimentData {
        let variant = |id, name: &str, weight, flow, flow_version| VariantData {
            id,
            name: name.to_owned(),
            weight,
            flow_id: Some(flow),
            flow_version,
        };
        ExperimentData {
            id: self.experiment,
            name: self.name.to_owned(),
            status: ExperimentStatus::Running,
            seed: None,
            coverage: None,
            namespace: None,
            hash_version: None,
            sticky: true,
            bucket_version: 0,
            min_bucket_version: 0,
            fallback_attribute: None,
            analysis: Some(super::data::AnalysisData {
                primary_metric: Some(primary.to_owned()),
                guardrail_metrics: rest.to_vec(),
                sequential: Some(true),
                minimum_users: Some(self.minimum_users),
            }),
            starts_at: None,
            ends_at: None,
            variants: vec![
                variant(self.control, "current", 100.0 - self.share, old, None),
                variant(self.treatment, "new", self.share, self.flow, self.version),
            ],
        }
    }
}

impl CatalogChange {
    /// The version of the stored JSON this release writes (see the module's "Stored form").
    pub const FORMAT: u32 = 1;

    /// The change's `kind` in its stored JSON: `set_experiment_status`, `set_allocation`,
    /// `ship_variant`, `publish_flow_version`, `set_rule_enabled`, `start_rollout` or
    /// `import_file`.
    pub const fn kind(&self) -> &'static str {
        match self {
            CatalogChange::SetExperimentStatus { .. } => "set_experiment_status",
            CatalogChange::SetAllocation { .. } => "set_allocation",
            CatalogChange::ShipVariant { .. } => "ship_variant",
            CatalogChange::PublishFlowVersion { .. } => "publish_flow_version",
            CatalogChange::SetRuleEnabled { .. } => "set_rule_enabled",
            CatalogChange::StartRollout { .. } => "start_rollout",
            CatalogChange::ImportFile { .. } => "import_file",
        }
    }

    /// The catalog file that makes this change to `stored` (the catalog as loaded), ready for
    /// [`plan_import`](super::plan_import) and [`plan_dry_run`](super::plan_dry_run): the
    /// changed placement or flow with its workspace and app, so that the catalog the import
    /// leaves is the whole stored catalog with this change made (see the module's "What the
    /// file holds"). Refused when it names something `stored` does not hold, would change
    /// nothing, or is not a change the console may make.
    pub fn apply(&self, stored: &CatalogData) -> Result<CatalogFile, ChangeError> {
        match self {
            CatalogChange::SetExperimentStatus { experiment, status } => {
                set_experiment_status(stored, *experiment, *status)
            }
            CatalogChange::SetAllocation {
                experiment,
                weights,
                coverage,
            } => set_allocation(stored, *experiment, weights, *coverage),
            CatalogChange::ShipVariant {
                experiment,
                variant,
            } => ship_variant(stored, *experiment, *variant),
            CatalogChange::PublishFlowVersion { flow, version } => {
                publish_flow_version(stored, *flow, *version)
            }
            CatalogChange::SetRuleEnabled {
                app,
                placement,
                rule,
                enabled,
            } => set_rule_enabled(stored, *app, placement, *rule, *enabled),
            CatalogChange::StartRollout {
                app,
                placement,
                rule,
                experiment,
                name,
                control,
                treatment,
                flow,
                version,
                share,
                guardrails,
                minimum_users,
                plan: _,
            } => RolloutStart {
                app: *app,
                placement,
                rule: *rule,
                experiment: *experiment,
                name,
                control: *control,
                treatment: *treatment,
                flow: *flow,
                version: *version,
                share: *share,
                guardrails,
                minimum_users: *minimum_users,
            }
            .apply(stored),
            // The file is the change: the import takes it against the catalog as it is.
            CatalogChange::ImportFile { name, catalog, .. } => {
                CatalogFile::deserialize(catalog.as_ref()).map_err(|e| {
                    ChangeError::InvalidChange(format!(
                        "the catalog file `{name}` of this change does not read: {e}"
                    ))
                })
            }
        }
    }

    /// One line for people, naming what the change is about as `stored` calls it, e.g. "ship
    /// `trial` of `paywall-price-test` (paywall, Demo app)", "pause `x` (paywall, Demo app)",
    /// "publish version 2 of `Paywall A` (Demo app)", "turn off rule 1 of placement
    /// `paywall` (Demo app)". Ids stand in for names `stored` does not hold.
    pub fn describe(&self, stored: &CatalogData) -> String {
        match self {
            CatalogChange::ImportFile {
                name,
                sha256,
                catalog,
            } => describe_import(name, sha256, catalog),
            CatalogChange::SetExperimentStatus { experiment, status } => {
                let Some(at) = ExperimentAt::find(stored, *experiment) else {
                    return format!("set experiment {experiment} to {}", status.as_str());
                };
                let e = at.experiment;
                let context = at.context();
                match status {
                    ExperimentStatus::Running if e.status == ExperimentStatus::Paused => {
                        format!("resume `{}` {context}", e.name)
                    }
                    ExperimentStatus::Running => format!("start `{}` {context}", e.name),
                    ExperimentStatus::Paused => format!("pause `{}` {context}", e.name),
                    ExperimentStatus::Concluded => format!("stop `{}` {context}", e.name),
                    ExperimentStatus::Draft => {
                        format!("return `{}` to draft {context}", e.name)
                    }
                }
            }
            CatalogChange::SetAllocation {
                experiment,
                weights,
                coverage,
            } => {
                let total: f64 = weights.iter().map(|(_, w)| w).sum();
                let at = ExperimentAt::find(stored, *experiment);
                let name_of = |id: &VariantId| {
                    at.as_ref()
                        .and_then(|at| at.experiment.variants.iter().find(|v| v.id == *id))
                        .map_or_else(|| id.to_string(), |v| v.name.clone())
                };
                let shares: Vec<String> = weights
                    .iter()
                    .map(|(id, w)| {
                        let share = if total > 0.0 { w / total } else { 0.0 };
                        format!("{} {}", name_of(id), percent(share))
                    })
                    .collect();
                let coverage = coverage
                    .map(|c| format!(" and its coverage to {}", percent(c)))
                    .unwrap_or_default();
                match at {
                    Some(at) => format!(
                        "set the weights of `{}` to {}{coverage} {}",
                        at.experiment.name,
                        shares.join(", "),
                        at.context()
                    ),
                    None => format!(
                        "set the weights of experiment {experiment} to {}{coverage}",
                        shares.join(", ")
                    ),
                }
            }
            CatalogChange::ShipVariant {
                experiment,
                variant,
            } => {
                let Some(at) = ExperimentAt::find(stored, *experiment) else {
                    return format!("ship variant {variant} of experiment {experiment}");
                };
                let e = at.experiment;
                let v = e
                    .variants
                    .iter()
                    .find(|v| v.id == *variant)
                    .map_or_else(|| variant.to_string(), |v| v.name.clone());
                format!("ship `{v}` of `{}` {}", e.name, at.context())
            }
            CatalogChange::PublishFlowVersion { flow, version } => {
                let Some((_, app, f)) = find_flow(stored, *flow) else {
                    return format!("publish version {version} of flow {flow}");
                };
                match f.published_version {
                    Some(now) if now > *version => {
                        format!("return `{}` to version {version} ({})", f.name, app.name)
                    }
                    _ => format!("publish version {version} of `{}` ({})", f.name, app.name),
                }
            }
            CatalogChange::SetRuleEnabled {
                app,
                placement,
                rule,
                enabled,
            } => {
                let onoff = if *enabled { "on" } else { "off" };
                let app = find_app(stored, *app)
                    .map_or_else(|| format!("app {app}"), |(_, a)| a.name.clone());
                format!("turn {onoff} rule {rule} of placement `{placement}` ({app})")
            }
            CatalogChange::StartRollout {
                app,
                placement,
                flow,
                version,
                share,
                ..
            } => {
                let flow = find_flow(stored, *flow).map_or_else(
                    || format!("flow {flow}"),
                    |(_, _, f)| format!("`{}`", f.name),
                );
                let flow = match version {
                    Some(n) => format!("version {n} of {flow}"),
                    None => flow,
                };
                let app = find_app(stored, *app)
                    .map_or_else(|| format!("app {app}"), |(_, a)| a.name.clone());
                format!("start rolling out {flow} on placement `{placement}` at {share}% ({app})")
            }
        }
    }

    /// Its stored JSON, of the current format ([`CatalogChange::FORMAT`], D26): `format`,
    /// `kind` and the change's members (see the module's "Stored form").
    pub fn to_json(&self) -> Value {
        let wire = match self {
            CatalogChange::SetExperimentStatus { experiment, status } => {
                Wire::SetExperimentStatus {
                    experiment: *experiment,
                    status: *status,
                }
            }
            CatalogChange::SetAllocation {
                experiment,
                weights,
                coverage,
            } => Wire::SetAllocation {
                experiment: *experiment,
                weights: weights
                    .iter()
                    .map(|&(variant, weight)| WireWeight { variant, weight })
                    .collect(),
                coverage: *coverage,
            },
            CatalogChange::ShipVariant {
                experiment,
                variant,
            } => Wire::ShipVariant {
                experiment: *experiment,
                variant: *variant,
            },
            CatalogChange::PublishFlowVersion { flow, version } => Wire::PublishFlowVersion {
                flow: *flow,
                version: *version,
            },
            CatalogChange::SetRuleEnabled {
                app,
                placement,
                rule,
                enabled,
            } => Wire::SetRuleEnabled {
                app: *app,
                placement: placement.clone(),
                rule: *rule,
                enabled: *enabled,
            },
            CatalogChange::StartRollout {
                app,
                placement,
                rule,
                experiment,
                name,
                control,
                treatment,
                flow,
                version,
                share,
                guardrails,
                minimum_users,
                plan,
            } => Wire::StartRollout {
                app: *app,
                placement: placement.clone(),
                rule: *rule,
                experiment: *experiment,
                name: name.clone(),
                control: *control,
                treatment: *treatment,
                flow: *flow,
                version: *version,
                share: *share,
                guardrails: guardrails.clone(),
                minimum_users: *minimum_users,
                plan: plan.clone(),
            },
            CatalogChange::ImportFile {
                name,
                sha256,
                catalog,
            } => Wire::ImportFile {
                name: name.clone(),
                sha256: sha256.clone(),
                catalog: catalog.clone(),
            },
        };
        // Ids, strings, integers, booleans and numbers only: serialising cannot fail (a
        // weight that is not finite, which no change applies, is written as null).
        let Ok(Value::Object(members)) = serde_json::to_value(wire) else {
            return Value::Null;
        };
        let mut members: Vec<(String, Value)> = members.into_iter().collect();
        members.push(("format".to_owned(), Value::from(Self::FORMAT)));
        // Members by name, whichever map serde_json was built with (`preserve_order` keeps
        // insertion order): the stored bytes of a change never depend on a cargo feature.
        members.sort_by(|a, b| a.0.cmp(&b.0));
        Value::Object(members.into_iter().collect())
    }

    /// Reads a stored change of any format this release reads (format 1): a missing,
    /// unknown or newer `format` and an unknown `kind` are refused quoting the value; a
    /// member missing or of the wrong type is [`ChangeError::InvalidChange`] naming it.
    /// Members it does not know are ignored (D26).
    pub fn from_json(value: &Value) -> Result<CatalogChange, ChangeError> {
        let Some(object) = value.as_object() else {
            return Err(ChangeError::InvalidChange(format!(
                "a stored catalog change is a JSON object, not {}",
                shown(value)
            )));
        };
        match object.get("format") {
            None => {
                return Err(ChangeError::InvalidChange(
                    "a stored catalog change says its `format`; this one does not".to_owned(),
                ))
            }
            Some(format) if format.as_u64() == Some(u64::from(Self::FORMAT)) => {}
            Some(format) => return Err(ChangeError::UnsupportedFormat(shown(format))),
        }
        let kind = match object.get("kind") {
            Some(Value::String(kind)) => kind,
            Some(other) => return Err(ChangeError::UnknownKind(shown(other))),
            None => {
                return Err(ChangeError::InvalidChange(
                    "a stored catalog change says its `kind`; this one does not".to_owned(),
                ))
            }
        };
        if !KINDS.contains(&kind.as_str()) {
            return Err(ChangeError::UnknownKind(shown(&Value::String(
                kind.clone(),
            ))));
        }
        let wire: Wire = serde_json::from_value(value.clone())
            .map_err(|e| ChangeError::InvalidChange(format!("a stored `{kind}` change: {e}")))?;
        Ok(match wire {
            Wire::SetExperimentStatus { experiment, status } => {
                CatalogChange::SetExperimentStatus { experiment, status }
            }
            Wire::SetAllocation {
                experiment,
                weights,
                coverage,
            } => CatalogChange::SetAllocation {
                experiment,
                weights: weights.into_iter().map(|w| (w.variant, w.weight)).collect(),
                coverage,
            },
            Wire::ShipVariant {
                experiment,
                variant,
            } => CatalogChange::ShipVariant {
                experiment,
                variant,
            },
            Wire::PublishFlowVersion { flow, version } => {
                CatalogChange::PublishFlowVersion { flow, version }
            }
            Wire::SetRuleEnabled {
                app,
                placement,
                rule,
                enabled,
            } => CatalogChange::SetRuleEnabled {
                app,
                placement,
                rule,
                enabled,
            },
            Wire::StartRollout {
                app,
                placement,
                rule,
                experiment,
                name,
                control,
                treatment,
                flow,
                version,
                share,
                guardrails,
                minimum_users,
                plan,
            } => CatalogChange::StartRollout {
                app,
                placement,
                rule,
                experiment,
                name,
                control,
                treatment,
                flow,
                version,
                share,
                guardrails,
                minimum_users,
                plan,
            },
            Wire::ImportFile {
                name,
                sha256,
                catalog,
            } => CatalogChange::ImportFile {
                name,
                sha256,
                catalog,
            },
        })
    }
}

/// An imported file's change in words: its name, its workspaces, the start of its SHA-256.
fn describe_import(name: &str, sha256: &str, catalog: &Value) -> String {
    format!(
        "import `{name}` ({} workspace(s), sha256 {})",
        catalog["workspaces"].as_array().map_or(0, Vec::len),
        sha256.chars().take(12).collect::<String>()
    )
}

/// Checks new weights (one per variant, in any order) and coverage against `e`: the weights
/// in the variants' order, and the coverage to store (the stored one when unchanged, so a
/// coverage of 1 given for an experiment that leaves it to the default changes nothing).
fn allocation(
    e: &ExperimentData,
    weights: &[(VariantId, f64)],
    coverage: Option<f64>,
) -> Result<(Vec<f64>, Option<f64>), ChangeError> {
    let invalid = |detail: String| ChangeError::InvalidWeights {
        experiment: e.name.clone(),
        detail,
    };
    let mut ordered: Vec<Option<f64>> = vec![None; e.variants.len()];
    for &(id, weight) in weights {
        let Some(i) = e.variants.iter().position(|v| v.id == id) else {
            return Err(ChangeError::UnknownVariant {
                experiment: e.name.clone(),
                variant: id,
            });
        };
        let name = &e.variants[i].name;
        if ordered[i].is_some() {
            return Err(invalid(format!("variant `{name}` is given twice")));
        }
        if !weight.is_finite() || weight < 0.0 {
            return Err(invalid(format!(
                "the weight of variant `{name}` must be a number >= 0, not {weight}"
            )));
        }
        ordered[i] = Some(weight);
    }
    let mut new = Vec::with_capacity(ordered.len());
    for (weight, variant) in ordered.into_iter().zip(&e.variants) {
        new.push(weight.ok_or_else(|| {
            invalid(format!(
                "variant `{}` has no weight: give each variant of the experiment one",
                variant.name
            ))
        })?);
    }
    let total: f64 = new.iter().sum();
    if total <= 0.0 {
        return Err(invalid(format!(
            "the weights add up to {total}: at least one must be above 0"
        )));
    }
    let coverage = match coverage {
        None => e.coverage,
        Some(c) if !(0.0..=1.0).contains(&c) => return Err(ChangeError::InvalidCoverage(c)),
        Some(c) if c == e.coverage.unwrap_or(1.0) => e.coverage,
        Some(c) => Some(c),
    };
    Ok((new, coverage))
}

/// The kinds [`CatalogChange::from_json`] knows.
const KINDS: [&str; 7] = [
    "set_experiment_status",
    "set_allocation",
    "ship_variant",
    "publish_flow_version",
    "set_rule_enabled",
    "start_rollout",
    "import_file",
];

/// The stored JSON of a change, format 1 (without `format`, which is checked and written
/// apart).
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Wire {
    SetExperimentStatus {
        experiment: ExperimentId,
        status: ExperimentStatus,
    },
    SetAllocation {
        experiment: ExperimentId,
        weights: Vec<WireWeight>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        coverage: Option<f64>,
    },
    ShipVariant {
        experiment: ExperimentId,
        variant: VariantId,
    },
    PublishFlowVersion {
        flow: FlowId,
        version: u32,
    },
    SetRuleEnabled {
        app: AppId,
        placement: String,
        rule: usize,
        enabled: bool,
    },
    StartRollout {
        app: AppId,
        placement: String,
        rule: usize,
        experiment: ExperimentId,
        name: String,
        control: VariantId,
        treatment: VariantId,
        flow: FlowId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<u32>,
        share: f64,
        guardrails: Vec<String>,
        minimum_users: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        plan: Option<Box<super::rollout_plan::RolloutPlan>>,
    },
    ImportFile {
        name: String,
        sha256: String,
        catalog: Box<Value>,
    },
}

#[derive(Serialize, Deserialize)]
struct WireWeight {
    variant: VariantId,
    weight: f64,
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Map};
    use time::OffsetDateTime;

    use super::*;
    use crate::catalog::{plan_dry_run, plan_import, Catalog, Change, DryRun};
    use crate::identity::Platform;
    use crate::resolve::{ResolveMode, ResolveRequest};

    const NOW: OffsetDateTime = time::macros::datetime!(2026-12-05 00:00 UTC);
    const APP: &str = "20000000-0000-4000-8000-000000000001";
    const FLOW_A: &str = "30000000-0000-4000-8000-000000000001";
    const FLOW_B: &str = "30000000-0000-4000-8000-000000000002";
    const FLOW_DRAFT: &str = "30000000-0000-4000-8000-000000000003";
    const EXP: &str = "50000000-0000-4000-8000-000000000001";
    const CONTROL: &str = "60000000-0000-4000-8000-000000000001";
    const TRIAL: &str = "60000000-0000-4000-8000-000000000002";
    const HOLDOUT: &str = "60000000-0000-4000-8000-000000000003";
    const UNSHIPPABLE: &str = "60000000-0000-4000-8000-000000000004";

    fn id<T: std::str::FromStr>(text: &str) -> T
    where
        T::Err: std::fmt::Debug,
    {
        text.parse().expect("an id")
    }

    fn exp() -> ExperimentId {
        id(EXP)
    }

    /// One app: the paywall's first rule runs a 50/50 experiment for the US (a holdout and a
    /// variant of an unpublished flow weigh 0), its second serves `Paywall A` to everyone;
    /// onboarding serves `Paywall B` to the US, then has a rule that is off, then defaults to
    /// `Paywall A`.
    fn stored() -> CatalogData {
        let version = |n: u32, v: u32| {
            json!({"id": format!("40000000-0000-4000-8000-00000000000{n}"),
            "version": v, "schema_version": 1, "flow_schema": {"n": n}})
        };
        let file = json!({"format": 2, "workspaces": [{
            "id": "10000000-0000-4000-8000-000000000001", "name": "Demo",
            "apps": [{"id": APP, "name": "Demo app",
              "media_base_url": "https://m/", "icon_base_url": "https://i/",
              "flows": [
                {"id": FLOW_A, "name": "Paywall A", "published_version": 1,
                 "versions": [version(1, 1), version(2, 2)]},
                {"id": FLOW_B, "name": "Paywall B", "published_version": 1,
                 "versions": [version(3, 1)]},
                {"id": FLOW_DRAFT, "name": "Draft", "versions": [version(4, 1)]}],
              "placements": [
                {"key": "paywall", "rules": [
                  {"audience": {"country": "US"}, "experiment": {
                    "id": EXP, "name": "paywall-price-test", "status": "running",
                    "variants": [
                      {"id": CONTROL, "name": "control", "weight": 1, "flow_id": FLOW_A},
                      {"id": TRIAL, "name": "trial", "weight": 1, "flow_id": FLOW_B},
                      {"id": HOLDOUT, "name": "holdout", "weight": 0, "flow_id": null},
                      {"id": UNSHIPPABLE, "name": "draft", "weight": 0,
                       "flow_id": FLOW_DRAFT}]}},
                  {"flow_id": FLOW_A}]},
                {"key": "onboarding", "default_flow_id": FLOW_A, "rules": [
                  {"audience": {"country": "US"}, "flow_id": FLOW_B},
                  {"enabled": false, "flow_id": FLOW_DRAFT}]}]}]}]});
        let file = CatalogFile::parse(&file.to_string()).expect("the fixture parses");
        plan_import(file, &CatalogData::default(), NOW)
            .expect("the fixture is valid")
            .write
    }

    /// `stored` with its experiment edited.
    fn with_experiment(edit: impl FnOnce(&mut ExperimentData)) -> CatalogData {
        let mut data = stored();
        let rule = &mut data.workspaces[0].apps[0].placements[0].rules[0];
        edit(rule.experiment.as_mut().expect("the experiment"));
        data
    }

    /// The catalog an import of `file` leaves: `stored` with the file's flows and placements
    /// laid over it (the file holds one app, as every change's file does).
    fn merged(stored: &CatalogData, file: &CatalogFile) -> CatalogData {
        let mut data = stored.clone();
        for app in file.workspaces.iter().flat_map(|w| &w.apps) {
            let target = data
                .workspaces
                .iter_mut()
                .flat_map(|w| &mut w.apps)
                .find(|a| a.id == app.id)
                .expect("a stored app");
            for flow in &app.flows {
                let slot = target.flows.iter_mut().find(|f| f.id == flow.id);
                *slot.expect("a stored flow") = flow.clone();
            }
            for placement in &app.placements {
                let slot = target
                    .placements
                    .iter_mut()
                    .find(|p| p.key == placement.key);
                *slot.expect("a stored placement") = placement.clone();
            }
        }
        data
    }

    /// Applies `change` to `stored`: the file must pass the import; returns it with its dry
    /// run and the catalog it leaves.
    fn apply(change: &CatalogChange, stored: &CatalogData) -> (CatalogFile, DryRun, CatalogData) {
        let file = change.apply(stored).expect("applies");
        let plan = plan_import(file.clone(), stored, NOW).expect("the import takes the file");
        assert!(plan.changed, "{change:?} changes the store");
        let dry = plan_dry_run(file.clone(), stored, NOW).expect("the dry run takes the file");
        let after = merged(stored, &file);
        Catalog::build(after.clone()).expect("the catalog it leaves builds");
        (file, dry, after)
    }

    fn error(change: &CatalogChange, stored: &CatalogData) -> ChangeError {
        change.apply(stored).expect_err("refused")
    }

    /// The flow `user` (with `country`) is served for `key`, and the variant's name when an
    /// experiment decided.
    fn served(
        data: &CatalogData,
        key: &str,
        user: &str,
        country: &str,
    ) -> (Option<FlowId>, Option<String>) {
        let catalog = Catalog::build(data.clone()).expect("builds");
        let app = catalog.app(id(APP)).expect("the app");
        let attributes: Map<String, Value> = [("country".to_owned(), json!(country))]
            .into_iter()
            .collect();
        let request = ResolveRequest::new(user, "s", Platform::Ios, &attributes);
        let resolution = app.resolve(key, &request, ResolveMode::Normal);
        (
            resolution.version().map(|v| v.flow_id()),
            resolution.assignment().map(|a| a.variant.name().to_owned()),
        )
    }

    fn status(to: ExperimentStatus) -> CatalogChange {
        CatalogChange::SetExperimentStatus {
            experiment: exp(),
            status: to,
        }
    }

    fn weights(w: [f64; 4]) -> Vec<(VariantId, f64)> {
        [CONTROL, TRIAL, HOLDOUT, UNSHIPPABLE]
            .iter()
            .zip(w)
            .map(|(v, w)| (id(v), w))
            .collect()
    }

    #[test]
    fn pausing_a_running_experiment_takes_everyone_out_of_it() {
        let data = stored();
        let change = status(ExperimentStatus::Paused);
        assert_eq!(
            change.describe(&data),
            "pause `paywall-price-test` (paywall, Demo app)"
        );
        let (file, dry, after) = apply(&change, &data);
        // The file holds the one placement, nothing else of the catalog.
        let app = &file.workspaces[0].apps[0];
        assert_eq!((app.flows.len(), app.placements.len()), (0, 1));
        assert_eq!(app.placements[0].key, "paywall");
        let shift = &dry.diff.experiments[0];
        assert_eq!(shift.id, exp());
        assert_eq!(
            (shift.status_before, shift.status_after),
            (
                Some(ExperimentStatus::Running),
                Some(ExperimentStatus::Paused)
            )
        );
        assert_eq!((shift.leave, shift.keep_variant), (1.0, 0.0));
        // Its US users get the next rule's flow.
        assert_eq!(
            served(&after, "paywall", "u1", "US"),
            (Some(id(FLOW_A)), None)
        );
    }

    #[test]
    fn resuming_starting_and_stopping() {
        let paused = with_experiment(|e| e.status = ExperimentStatus::Paused);
        let resume = status(ExperimentStatus::Running);
        assert_eq!(
            resume.describe(&paused),
            "resume `paywall-price-test` (paywall, Demo app)"
        );
        let (_, dry, _) = apply(&resume, &paused);
        assert_eq!(dry.diff.experiments[0].enter, 1.0, "everyone enters");

        let draft = with_experiment(|e| e.status = ExperimentStatus::Draft);
        assert_eq!(
            resume.describe(&draft),
            "start `paywall-price-test` (paywall, Demo app)"
        );
        apply(&resume, &draft);

        let stop = status(ExperimentStatus::Concluded);
        assert_eq!(
            stop.describe(&stored()),
            "stop `paywall-price-test` (paywall, Demo app)"
        );
        let (file, dry, _) = apply(&stop, &stored());
        let e = file.workspaces[0].apps[0].placements[0].rules[0]
            .experiment
            .as_ref()
            .expect("kept");
        assert_eq!(e.status, ExperimentStatus::Concluded);
        assert_eq!(dry.diff.experiments[0].leave, 1.0);
    }

    #[test]
    fn a_status_it_has_or_draft_again_is_refused() {
        let e = error(&status(ExperimentStatus::Running), &stored());
        assert_eq!(e.code(), "no_change");
        assert_eq!(
            e.to_string(),
            "nothing to change: `paywall-price-test` is already running"
        );
        let e = error(&status(ExperimentStatus::Draft), &stored());
        assert_eq!(e.code(), "invalid_change");
        assert!(e.to_string().contains("cannot return to it"), "{e}");
        let unknown = CatalogChange::SetExperimentStatus {
            experiment: id("50000000-0000-4000-8000-0000000000ff"),
            status: ExperimentStatus::Paused,
        };
        let e = error(&unknown, &stored());
        assert_eq!(e.code(), "unknown_experiment");
        assert_eq!(
            e.to_string(),
            "no experiment 50000000-0000-4000-8000-0000000000ff in the catalog"
        );
        assert_eq!(
            unknown.describe(&stored()),
            "set experiment 50000000-0000-4000-8000-0000000000ff to paused"
        );
    }

    #[test]
    fn a_reweight_moves_the_users_the_dry_run_says() {
        let data = stored();
        let change = CatalogChange::SetAllocation {
            experiment: exp(),
            // In another order than the variants': they keep theirs.
            weights: weights([7.0, 3.0, 0.0, 0.0]).into_iter().rev().collect(),
            coverage: None,
        };
        assert_eq!(
            change.describe(&data),
            "set the weights of `paywall-price-test` to draft 0%, holdout 0%, trial 30%, \
             control 70% (paywall, Demo app)"
        );
        let (file, dry, _) = apply(&change, &data);
        let e = file.workspaces[0].apps[0].placements[0].rules[0]
            .experiment
            .as_ref()
            .expect("the experiment");
        let written: Vec<(&str, f64)> = e
            .variants
            .iter()
            .map(|v| (v.name.as_str(), v.weight))
            .collect();
        assert_eq!(
            written,
            [
                ("control", 7.0),
                ("trial", 3.0),
                ("holdout", 0.0),
                ("draft", 0.0)
            ]
        );
        assert_eq!(e.coverage, None, "kept");
        // 50/50 to 70/30: exactly a fifth of the users change variant (D19).
        let shift = &dry.diff.experiments[0];
        assert!((shift.change_variant - 0.2).abs() < 1e-12, "{shift:?}");
        assert_eq!(shift.leave, 0.0);
        assert!(
            dry.plan.warnings[0].message.contains("is running"),
            "{:?}",
            dry.plan.warnings
        );
    }

    #[test]
    fn a_coverage_alone_and_its_no_change() {
        let data = stored();
        let change = CatalogChange::SetAllocation {
            experiment: exp(),
            weights: weights([1.0, 1.0, 0.0, 0.0]),
            coverage: Some(0.25),
        };
        assert!(change.describe(&data).ends_with(
            "trial 50%, holdout 0%, draft 0% and its coverage to 25% (paywall, Demo app)"
        ));
        let (_, dry, _) = apply(&change, &data);
        assert!((dry.diff.experiments[0].leave - 0.75).abs() < 1e-12);
        // The same weights, with the default coverage written out: nothing changes.
        for coverage in [None, Some(1.0)] {
            let same = CatalogChange::SetAllocation {
                experiment: exp(),
                weights: weights([1.0, 1.0, 0.0, 0.0]),
                coverage,
            };
            assert_eq!(error(&same, &data).code(), "no_change", "{coverage:?}");
        }
    }

    #[test]
    fn weights_that_are_not_one_number_per_variant_are_refused() {
        let data = stored();
        let refused = |w: Vec<(VariantId, f64)>, coverage: Option<f64>| {
            error(
                &CatalogChange::SetAllocation {
                    experiment: exp(),
                    weights: w,
                    coverage,
                },
                &data,
            )
        };
        let cases: [(Vec<(VariantId, f64)>, &str); 5] = [
            (
                weights([1.0, -1.0, 0.0, 0.0]),
                "invalid weights for `paywall-price-test`: the weight of variant `trial` must be \
                 a number >= 0, not -1",
            ),
            (
                weights([1.0, f64::NAN, 0.0, 0.0]),
                "invalid weights for `paywall-price-test`: the weight of variant `trial` must be \
                 a number >= 0, not NaN",
            ),
            (
                weights([0.0; 4]),
                "invalid weights for `paywall-price-test`: the weights add up to 0: at least one \
                 must be above 0",
            ),
            (
                weights([1.0, 1.0, 0.0, 0.0])[..3].to_vec(),
                "invalid weights for `paywall-price-test`: variant `draft` has no weight: give \
                 each variant of the experiment one",
            ),
            (
                [weights([1.0, 1.0, 0.0, 0.0]), vec![(id(TRIAL), 2.0)]].concat(),
                "invalid weights for `paywall-price-test`: variant `trial` is given twice",
            ),
        ];
        for (w, message) in cases {
            let e = refused(w, None);
            assert_eq!(e.code(), "invalid_weights");
            assert_eq!(e.to_string(), message);
        }
        let stranger = [
            weights([1.0, 1.0, 0.0, 0.0]),
            vec![(id("60000000-0000-4000-8000-0000000000ff"), 1.0)],
        ]
        .concat();
        let e = refused(stranger, None);
        assert_eq!(e.code(), "unknown_variant");
        assert_eq!(
            e.to_string(),
            "experiment `paywall-price-test` has no variant 60000000-0000-4000-8000-0000000000ff"
        );
        for bad in [1.5, -0.1, f64::NAN] {
            let e = refused(weights([1.0, 2.0, 0.0, 0.0]), Some(bad));
            assert_eq!(e.code(), "invalid_coverage");
            assert_eq!(
                e.to_string(),
                format!("coverage must be a number from 0 to 1, not {bad}")
            );
        }
    }

    #[test]
    fn shipping_a_variant_serves_its_flow_to_the_audience_and_stops_the_experiment() {
        let data = stored();
        let change = CatalogChange::ShipVariant {
            experiment: exp(),
            variant: id(TRIAL),
        };
        assert_eq!(
            change.describe(&data),
            "ship `trial` of `paywall-price-test` (paywall, Demo app)"
        );
        // A US user of each variant before.
        let user_in = |variant: &str| {
            (0..1000)
                .map(|i| format!("user-{i}"))
                .find(|u| served(&data, "paywall", u, "US").1.as_deref() == Some(variant))
                .expect("a user in the variant")
        };
        let (control, trial) = (user_in("control"), user_in("trial"));
        assert_eq!(served(&data, "paywall", &control, "US").0, Some(id(FLOW_A)));

        let (file, dry, after) = apply(&change, &data);
        let rules = &file.workspaces[0].apps[0].placements[0].rules;
        assert_eq!(rules.len(), 3, "one rule inserted");
        assert_eq!(rules[0].flow_id, Some(id(FLOW_B)));
        assert_eq!(rules[0].audience, Some(json!({"country": "US"})));
        assert!(rules[0].enabled && rules[0].experiment.is_none());
        let kept = rules[1].experiment.as_ref().expect("the experiment stays");
        assert_eq!(kept.status, ExperimentStatus::Concluded);
        assert_eq!(rules[2].flow_id, Some(id(FLOW_A)));

        // The dry run: everyone leaves the experiment, and the rule list changes.
        let shift = &dry.diff.experiments[0];
        assert_eq!(shift.status_after, Some(ExperimentStatus::Concluded));
        assert_eq!(shift.leave, 1.0);
        let shares: Vec<(&str, f64, f64)> = shift
            .variants
            .iter()
            .map(|v| (v.name.as_str(), v.before, v.after))
            .collect();
        assert_eq!(shares, [("control", 0.5, 0.0), ("trial", 0.5, 0.0)]);
        let placement = &dry.diff.placements[0];
        assert_eq!((placement.rules_before, placement.rules_after), (2, 3));
        assert_eq!(placement.rules[2].change, ["added"]);

        // The control group now gets the trial's flow, from the new rule; outside the US
        // nothing changes.
        assert_eq!(
            served(&after, "paywall", &control, "US"),
            (Some(id(FLOW_B)), None)
        );
        assert_eq!(
            served(&after, "paywall", &trial, "US"),
            (Some(id(FLOW_B)), None)
        );
        assert_eq!(
            served(&after, "paywall", &control, "DE"),
            (Some(id(FLOW_A)), None)
        );

        // Shipped is shipped.
        let e = error(&change, &after);
        assert_eq!(e.code(), "no_change");
        assert!(e.to_string().contains("already shipped"), "{e}");
    }

    #[test]
    fn what_cannot_be_shipped() {
        let data = stored();
        let ship = |variant: &str| CatalogChange::ShipVariant {
            experiment: exp(),
            variant: id(variant),
        };
        let e = error(&ship(HOLDOUT), &data);
        assert_eq!(e.code(), "holdout_has_no_flow");
        assert_eq!(
            e.to_string(),
            "variant `holdout` of `paywall-price-test` is a holdout: it has no flow to ship"
        );
        let e = error(&ship(UNSHIPPABLE), &data);
        assert_eq!(e.code(), "flow_unpublished");
        assert!(e
            .to_string()
            .starts_with("flow `Draft` of variant `draft` publishes no version"));
        let e = error(&ship("60000000-0000-4000-8000-0000000000ff"), &data);
        assert_eq!(e.code(), "unknown_variant");
        // A concluded experiment can still be shipped (its results read after stopping it).
        let concluded = with_experiment(|e| e.status = ExperimentStatus::Concluded);
        let (file, dry, _) = apply(&ship(CONTROL), &concluded);
        assert_eq!(
            file.workspaces[0].apps[0].placements[0].rules[0].flow_id,
            Some(id(FLOW_A))
        );
        assert!(dry.diff.experiments.is_empty(), "nobody was in it");
    }

    #[test]
    fn publishing_a_version_and_returning_to_the_earlier_one() {
        let data = stored();
        let publish = |version: u32| CatalogChange::PublishFlowVersion {
            flow: id(FLOW_A),
            version,
        };
        assert_eq!(
            publish(2).describe(&data),
            "publish version 2 of `Paywall A` (Demo app)"
        );
        let (file, dry, after) = apply(&publish(2), &data);
        let app = &file.workspaces[0].apps[0];
        assert_eq!((app.flows.len(), app.placements.len()), (1, 0));
        assert_eq!(app.flows[0].published_version, Some(2));
        assert_eq!(app.flows[0].versions.len(), 2, "every version kept");
        let published: Vec<(&str, Change, &str)> = dry
            .diff
            .entities
            .iter()
            .map(|c| (c.name.as_str(), c.change, c.detail.as_str()))
            .collect();
        assert_eq!(
            published,
            [("Paywall A", Change::Published, "version 1 -> version 2")]
        );

        assert_eq!(
            publish(1).describe(&after),
            "return `Paywall A` to version 1 (Demo app)"
        );
        let (_, back, _) = apply(&publish(1), &after);
        assert_eq!(back.diff.entities[0].detail, "version 2 -> version 1");

        let e = error(&publish(1), &data);
        assert_eq!(e.code(), "no_change");
        assert_eq!(
            e.to_string(),
            "nothing to change: `Paywall A` already publishes version 1"
        );
        let e = error(&publish(7), &data);
        assert_eq!(e.code(), "unknown_flow_version");
        assert_eq!(
            e.to_string(),
            "flow `Paywall A` has no version 7 (its versions: 1, 2)"
        );
        let unknown = CatalogChange::PublishFlowVersion {
            flow: id("30000000-0000-4000-8000-0000000000ff"),
            version: 1,
        };
        let e = error(&unknown, &data);
        assert_eq!(e.code(), "unknown_flow");
        assert_eq!(
            e.to_string(),
            "no flow 30000000-0000-4000-8000-0000000000ff in the catalog"
        );
    }

    fn rule(placement: &str, rule: usize, enabled: bool) -> CatalogChange {
        CatalogChange::SetRuleEnabled {
            app: id(APP),
            placement: placement.to_owned(),
            rule,
            enabled,
        }
    }

    #[test]
    fn turning_a_rule_off_and_on() {
        let data = stored();
        let off = rule("onboarding", 0, false);
        assert_eq!(
            off.describe(&data),
            "turn off rule 0 of placement `onboarding` (Demo app)"
        );
        assert_eq!(served(&data, "onboarding", "u1", "US").0, Some(id(FLOW_B)));
        let (file, dry, after) = apply(&off, &data);
        assert!(!file.workspaces[0].apps[0].placements[0].rules[0].enabled);
        assert_eq!(file.format, 2, "a rule that is off is written as format 2");
        assert_eq!(dry.diff.placements[0].key, "onboarding");
        assert_eq!(dry.diff.placements[0].rules[0].change, ["off"]);
        // The walk goes on past the rule that is off to the default.
        assert_eq!(served(&after, "onboarding", "u1", "US").0, Some(id(FLOW_A)));

        let on = rule("onboarding", 1, true);
        assert_eq!(
            on.describe(&data),
            "turn on rule 1 of placement `onboarding` (Demo app)"
        );
        let (_, dry, _) = apply(&on, &data);
        assert_eq!(dry.diff.placements[0].rules[0].rule, 1);
        assert_eq!(dry.diff.placements[0].rules[0].change, ["on"]);

        // The experiment's rule: its users leave it, and the dry run says why.
        let (_, dry, _) = apply(&rule("paywall", 0, false), &data);
        let shift = &dry.diff.experiments[0];
        assert_eq!(shift.rule_enabled, (true, false));
        assert_eq!(shift.leave, 1.0);
    }

    #[test]
    fn a_rule_that_is_not_there_or_already_so() {
        let data = stored();
        let e = error(&rule("onboarding", 1, false), &data);
        assert_eq!(e.code(), "no_change");
        assert_eq!(
            e.to_string(),
            "nothing to change: rule 1 of placement `onboarding` is already off"
        );
        let e = error(&rule("onboarding", 2, false), &data);
        assert_eq!(e.code(), "unknown_rule");
        assert_eq!(
            e.to_string(),
            "placement `onboarding` has no rule 2: it has 2, rules 0 to 1"
        );
        let e = error(&rule("checkout", 0, false), &data);
        assert_eq!(e.code(), "unknown_placement");
        assert_eq!(e.to_string(), "app `Demo app` has no placement `checkout`");
        let stranger = CatalogChange::SetRuleEnabled {
            app: id("20000000-0000-4000-8000-0000000000ff"),
            placement: "paywall".to_owned(),
            rule: 0,
            enabled: false,
        };
        let e = error(&stranger, &data);
        assert_eq!(e.code(), "unknown_app");
        assert_eq!(
            e.to_string(),
            "no app 20000000-0000-4000-8000-0000000000ff in the catalog"
        );
    }

    /// One change of each kind.
    fn one_of_each() -> Vec<CatalogChange> {
        vec![
            status(ExperimentStatus::Paused),
            CatalogChange::SetAllocation {
                experiment: exp(),
                weights: vec![(id(CONTROL), 0.7), (id(TRIAL), 0.3)],
                coverage: Some(0.5),
            },
            CatalogChange::ShipVariant {
                experiment: exp(),
                variant: id(TRIAL),
            },
            CatalogChange::PublishFlowVersion {
                flow: id(FLOW_A),
                version: 2,
            },
            rule("paywall", 1, false),
            start_rollout(5.0),
            CatalogChange::ImportFile {
                name: "catalog.json".to_owned(),
                sha256: "ab".repeat(32),
                catalog: Box::new(json!({"workspaces": []})),
            },
        ]
    }

    const ROLLOUT_EXP: &str = "50000000-0000-4000-8000-000000000071";
    const CURRENT: &str = "60000000-0000-4000-8000-000000000071";
    const NEW: &str = "60000000-0000-4000-8000-000000000072";

    /// A rollout of Paywall A on the onboarding placement's first rule (which serves B).
    fn start_rollout(share: f64) -> CatalogChange {
        CatalogChange::StartRollout {
            app: id(APP),
            placement: "onboarding".to_owned(),
            rule: 0,
            experiment: id(ROLLOUT_EXP),
            name: "Rollout of Paywall A".to_owned(),
            control: id(CURRENT),
            treatment: id(NEW),
            flow: id(FLOW_A),
            version: None,
            share,
            guardrails: vec!["flow_complete".into(), "revenue".into()],
            minimum_users: 100,
            plan: None,
        }
    }

    #[test]
    fn a_rollout_turns_the_rule_into_a_sticky_experiment_at_its_first_share() {
        let data = stored();
        let change = start_rollout(5.0);
        assert_eq!(
            change.describe(&data),
            "start rolling out `Paywall A` on placement `onboarding` at 5% (Demo app)"
        );
        let (file, dry, after) = apply(&change, &data);
        let rule = &file.workspaces[0].apps[0].placements[0].rules[0];
        let e = rule.experiment.as_ref().expect("an experiment");
        assert!(e.sticky && e.status == ExperimentStatus::Running);
        assert_eq!(
            rule.audience,
            Some(json!({"country": "US"})),
            "its audience kept"
        );
        let analysis = e.analysis.as_ref().expect("analysis");
        assert_eq!(analysis.primary_metric.as_deref(), Some("flow_complete"));
        assert_eq!(analysis.guardrail_metrics, ["revenue"]);
        assert_eq!(analysis.sequential, Some(true));
        // 5% of US users get the new flow; the rest keep the rule's flow.
        assert_eq!(dry.diff.experiments.len(), 1);
        let mut new = 0;
        for i in 0..2000 {
            let (flow, variant) = served(&after, "onboarding", &format!("u{i}"), "US");
            match variant.as_deref() {
                Some("new") => {
                    new += 1;
                    assert_eq!(flow, Some(id(FLOW_A)));
                }
                Some("current") => assert_eq!(flow, Some(id(FLOW_B))),
                other => panic!("{other:?}"),
            }
        }
        assert!((60..=140).contains(&new), "about 5% of 2000: {new}");
        // Not from an experiment's rule, a rule that is off, the same flow or a bad share.
        let mut from_experiment = start_rollout(5.0);
        if let CatalogChange::StartRollout { placement, .. } = &mut from_experiment {
            *placement = "paywall".to_owned();
        }
        assert_eq!(error(&from_experiment, &data).code(), "invalid_change");
        let mut same = start_rollout(5.0);
        if let CatalogChange::StartRollout { flow, .. } = &mut same {
            *flow = id(FLOW_B);
        }
        assert_eq!(error(&same, &data).code(), "no_change");
        assert_eq!(error(&start_rollout(100.0), &data).code(), "invalid_change");
        let mut draft = start_rollout(5.0);
        if let CatalogChange::StartRollout { flow, .. } = &mut draft {
            *flow = id(FLOW_DRAFT);
        }
        assert_eq!(error(&draft, &data).code(), "flow_unpublished");
    }

    /// A rollout to version `version` of `flow` on onboarding's first rule (which serves B).
    fn version_rollout(flow: &str, version: u32) -> CatalogChange {
        let mut change = start_rollout(10.0);
        if let CatalogChange::StartRollout {
            flow: to,
            version: v,
            ..
        } = &mut change
        {
            *to = id(flow);
            *v = Some(version);
        }
        change
    }

    /// The flow version `user` (a US user) is served on onboarding.
    fn served_version(data: &CatalogData, user: &str) -> (FlowId, u32) {
        let catalog = Catalog::build(data.clone()).expect("builds");
        let app = catalog.app(id(APP)).expect("the app");
        let attributes: Map<String, Value> =
            [("country".to_owned(), json!("US"))].into_iter().collect();
        let request = ResolveRequest::new(user, "s", Platform::Ios, &attributes);
        let resolution = app.resolve("onboarding", &request, ResolveMode::Normal);
        let version = resolution.version().expect("a flow");
        (version.flow_id(), version.version())
    }

    #[test]
    fn a_rollout_of_a_version_pins_it_and_shipping_it_publishes_it() {
        let data = stored();
        // Version 2 of Paywall A, which publishes 1: the new variant shows 2.
        let (file, _, after) = apply(&version_rollout(FLOW_A, 2), &data);
        let e = file.workspaces[0].apps[0].placements[0].rules[0]
            .experiment
            .as_ref()
            .expect("an experiment");
        assert_eq!(e.variants[1].flow_version, Some(2));
        assert_eq!(
            e.variants[0].flow_version, None,
            "the rule's flow as it serves"
        );
        let shown: std::collections::HashSet<(FlowId, u32)> = (0..300)
            .map(|i| served_version(&after, &format!("u{i}")))
            .collect();
        assert_eq!(
            shown,
            [(id(FLOW_B), 1), (id(FLOW_A), 2)].into_iter().collect(),
            "the pinned version, never the published one"
        );
        // Shipping the new variant publishes its version in the same change.
        let ship = CatalogChange::ShipVariant {
            experiment: id(ROLLOUT_EXP),
            variant: id(NEW),
        };
        let (file, _, shipped) = apply(&ship, &after);
        assert_eq!(
            file.workspaces[0].apps[0].flows.len(),
            1,
            "the flow, changed"
        );
        assert!((0..50).all(|i| served_version(&shipped, &format!("u{i}")) == (id(FLOW_A), 2)));
        // A version of a flow that publishes none may be rolled out; the rule's own flow at
        // the version it publishes is no change; a version the flow lacks is named.
        apply(&version_rollout(FLOW_DRAFT, 1), &data);
        assert_eq!(
            error(&version_rollout(FLOW_B, 1), &data).code(),
            "no_change"
        );
        let missing = error(&version_rollout(FLOW_A, 9), &data);
        assert_eq!(missing.code(), "unknown_flow_version");
        assert!(missing.to_string().contains('9'), "{missing}");
    }

    #[test]
    fn the_json_of_each_kind_reads_back_as_the_change() {
        let kinds: Vec<&str> = one_of_each().iter().map(CatalogChange::kind).collect();
        assert_eq!(kinds, KINDS);
        for change in one_of_each() {
            let value = change.to_json();
            assert_eq!(value["format"], json!(1));
            assert_eq!(value["kind"], json!(change.kind()));
            assert_eq!(CatalogChange::from_json(&value), Ok(change));
        }
        assert_eq!(
            CatalogChange::SetAllocation {
                experiment: exp(),
                weights: vec![(id(CONTROL), 1.0)],
                coverage: None,
            }
            .to_json(),
            json!({"format": 1, "kind": "set_allocation", "experiment": EXP,
                   "weights": [{"variant": CONTROL, "weight": 1.0}]}),
            "no coverage: left out"
        );
    }

    #[test]
    fn json_that_is_no_change_of_this_release_is_refused_quoting_it() {
        let read = |v: Value| CatalogChange::from_json(&v).expect_err("refused");
        let ship = json!({"format": 1, "kind": "ship_variant", "experiment": EXP,
                          "variant": TRIAL});
        // Members it does not know are ignored.
        let mut extra = ship.clone();
        extra["reviewed_by"] = json!("someone");
        assert!(CatalogChange::from_json(&extra).is_ok());

        let with = |key: &str, value: Value| {
            let mut v = ship.clone();
            v[key] = value;
            v
        };
        let e = read(with("format", json!(2)));
        assert_eq!(e.code(), "unsupported_format");
        assert_eq!(
            e.to_string(),
            "catalog change format 2 is not one this release reads (format 1): apply it with a \
             release that reads it"
        );
        assert_eq!(
            read(with("format", json!("1"))).code(),
            "unsupported_format"
        );
        assert!(read(with("format", json!("1")))
            .to_string()
            .contains("format \"1\""));
        let e = read(with("kind", json!("rename_flow")));
        assert_eq!(e.code(), "unknown_kind");
        assert!(
            e.to_string().starts_with("\"rename_flow\" is not a kind"),
            "{e}"
        );
        assert_eq!(read(with("kind", json!(3))).code(), "unknown_kind");

        let mut no_format = ship.clone();
        no_format.as_object_mut().unwrap().remove("format");
        assert_eq!(read(no_format).code(), "invalid_change");
        let mut no_variant = ship.clone();
        no_variant.as_object_mut().unwrap().remove("variant");
        let e = read(no_variant);
        assert_eq!(e.code(), "invalid_change");
        assert!(e.to_string().contains("missing field `variant`"), "{e}");
        let e = read(with("variant", json!("not-a-uuid")));
        assert_eq!(e.code(), "invalid_change");
        assert!(
            e.to_string()
                .starts_with("a stored `ship_variant` change: "),
            "{e}"
        );
        let e = read(json!([1]));
        assert_eq!(e.code(), "invalid_change");
        assert_eq!(
            e.to_string(),
            "a stored catalog change is a JSON object, not [1]"
        );
    }

    #[test]
    fn descriptions_name_ids_where_the_catalog_has_no_name() {
        let empty = CatalogData::default();
        let described: Vec<String> = one_of_each().iter().map(|c| c.describe(&empty)).collect();
        assert_eq!(
            described,
            [
                format!("set experiment {EXP} to paused"),
                format!(
                    "set the weights of experiment {EXP} to {CONTROL} 70%, {TRIAL} 30% and its \
                     coverage to 50%"
                ),
                format!("ship variant {TRIAL} of experiment {EXP}"),
                format!("publish version 2 of flow {FLOW_A}"),
                format!("turn off rule 1 of placement `paywall` (app {APP})"),
                format!(
                    "start rolling out flow {FLOW_A} on placement `onboarding` at 5% (app {APP})"
                ),
                "import `catalog.json` (0 workspace(s), sha256 abababababab)".to_owned(),
            ]
        );
    }
}
