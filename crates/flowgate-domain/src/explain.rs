//! Explain (D18): why a user gets what resolve gives them.
//!
//! [`App::explain`] runs the resolver's own evaluation (`Placement::evaluate`) with a tracer
//! that records each step, so its [`Resolution`] is resolve's by construction. The trace names,
//! for each rule reached, whether its audience matched and, when not, the first clause that
//! failed with the attribute values it saw (identity fields first, D3.6; dotted keys literal
//! first, D4); for an experiment its status, namespace check, the user's hash, the variant
//! ranges and the variant, or why the rule was skipped; a rule that is off (D28) as one step
//! saying so (nothing of it is read); then the default, if reached.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::catalog::{App, Experiment, ExperimentStatus, FlowTarget, Placement};
use crate::conditions::{Condition, Mismatch, SavedGroups};
use crate::events::NoFlowReason;
use crate::ids::{ExperimentId, FlowId, FlowVersionId, VariantId};
use crate::resolve::{Bucketing, Resolution, ResolveMode, ResolveRequest, StickyState, Tracer};
use crate::shown::shown;

/// Why the outcome is what it is (D18).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reason {
    /// A rule with a flow target decided.
    Rule,
    /// An experiment assigned a variant with a flow.
    Experiment,
    /// An experiment assigned a holdout variant: no flow.
    Holdout,
    /// No rule decided; the placement's default flow is served.
    Default,
    /// No rule decided and the placement has no default flow.
    NoRuleMatched,
    /// The app has no placement with this key.
    UnknownPlacement,
    /// The deciding target's flow has no published version (D3.4).
    FlowUnpublished,
}

impl Reason {
    /// The stable snake_case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::Rule => "rule",
            Reason::Experiment => "experiment",
            Reason::Holdout => "holdout",
            Reason::Default => "default",
            Reason::NoRuleMatched => "no_rule_matched",
            Reason::UnknownPlacement => "unknown_placement",
            Reason::FlowUnpublished => "flow_unpublished",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A flow target as the trace shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowStep {
    /// The flow.
    pub flow_id: FlowId,
    /// Its published version; `None` when the flow publishes none (D3.4).
    pub flow_version_id: Option<FlowVersionId>,
}

impl FlowStep {
    fn of(target: &FlowTarget) -> Self {
        FlowStep {
            flow_id: target.flow_id,
            flow_version_id: target.published.as_ref().map(|v| v.id),
        }
    }
}

/// Whether a rule's audience matched.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AudienceStep {
    /// True when the audience matched (`{}` always does).
    pub matched: bool,
    /// When not: the first clause that failed and what it saw.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<Mismatch>,
}

/// A variant's share of the hash space.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RangeStep {
    /// The variant.
    pub variant_id: VariantId,
    /// Its name.
    pub variant_name: String,
    /// Inclusive start of its range.
    pub start: f64,
    /// Exclusive end of its range.
    pub end: f64,
}

/// The namespace check of an experiment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NamespaceStep {
    /// The namespace id.
    pub id: String,
    /// Inclusive start.
    pub start: f64,
    /// Exclusive end.
    pub end: f64,
    /// The user's namespace hash.
    pub hash: f64,
    /// Whether the hash is inside `[start, end)`.
    pub inside: bool,
}

/// Why an experiment rule did not decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Skipped {
    /// Paused.
    Paused,
    /// A draft.
    Draft,
    /// Concluded.
    Concluded,
    /// The user is outside the experiment's namespace.
    OutsideNamespace,
    /// The user's hash is in no variant's range.
    OutsideCoverage,
    /// There is no value to hash (an empty user id).
    NoHashValue,
    /// The user has a stored assignment of a version below `min_bucket_version` (D23).
    ExcludedByBucketVersion,
}

impl Skipped {
    /// Why, in words.
    pub const fn as_str(self) -> &'static str {
        match self {
            Skipped::Paused => "paused",
            Skipped::Draft => "draft",
            Skipped::Concluded => "concluded",
            Skipped::OutsideNamespace => "outside namespace",
            Skipped::OutsideCoverage => "outside coverage",
            Skipped::NoHashValue => "no user id to hash",
            Skipped::ExcludedByBucketVersion => {
                "excluded: a stored assignment of a version below min_bucket_version"
            }
        }
    }
}

/// An experiment as the trace shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExperimentStep {
    /// Its id.
    pub id: ExperimentId,
    /// Its name.
    pub name: String,
    /// Its status; only `running` assigns.
    pub status: ExperimentStatus,
    /// The hash seed.
    pub seed: String,
    /// Share of users in the experiment.
    pub coverage: f64,
    /// The namespace check, when the experiment has a namespace and is running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<NamespaceStep>,
    /// The user's hash (`hash_v2(seed, user_id)`), when it was computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash: Option<f64>,
    /// Each variant's range, in order.
    pub ranges: Vec<RangeStep>,
    /// The assigned variant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<VariantStep>,
    /// Why the rule did not decide.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<Skipped>,
    /// For a sticky experiment (D23): its versions and what stored assignments did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sticky: Option<StickyStep>,
}

/// A sticky experiment's part in the trace (D23).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StickyStep {
    /// The current bucket version.
    pub bucket_version: u32,
    /// Stored assignments of versions below this exclude their users.
    pub min_bucket_version: u32,
    /// What the user's stored assignments did.
    pub assignment: StickyAssignment,
}

/// What a user's stored assignments did for a sticky experiment (D23).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StickyAssignment {
    /// A stored assignment decided the variant; audience, namespace, coverage and weights
    /// were not consulted.
    Stored,
    /// No stored assignment applied: the user was bucketed, and resolve would store the variant
    /// (explain stores nothing).
    New,
    /// No stored assignment applied, and the user is in no variant: nothing is recorded.
    None,
    /// A stored assignment of a version below `min_bucket_version` excludes the user.
    Excluded,
    /// The stored assignments were not read (unavailable, or explain was asked without
    /// them): bucketed as a non-sticky experiment.
    NotRead,
}

/// The assigned variant.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VariantStep {
    /// Its id.
    pub id: VariantId,
    /// Its name.
    pub name: String,
    /// Its flow; `None` for a holdout.
    pub flow: Option<FlowStep>,
}

/// One rule reached by the evaluation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleStep {
    /// Position of the rule in the placement.
    pub rule: usize,
    /// Its audience.
    pub audience: AudienceStep,
    /// Its flow target, when the audience matched and the target is a flow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow: Option<FlowStep>,
    /// Its experiment, when the audience matched and the target is an experiment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experiment: Option<Box<ExperimentStep>>,
    /// True for the rule that decided the outcome.
    pub decided: bool,
}

/// A rule that is off (D28): skipped as a rule whose experiment is not running is, without
/// reading its audience or its experiment. Its JSON is `{"rule": N, "off": true}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffStep {
    /// Position of the rule in the placement.
    pub rule: usize,
}

impl Serialize for OffStep {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut step = serializer.serialize_struct("OffStep", 2)?;
        step.serialize_field("rule", &self.rule)?;
        step.serialize_field("off", &true)?;
        step.end()
    }
}

/// One step of the trace: a rule, a rule that is off, or the placement's default.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Step {
    /// A rule.
    Rule(RuleStep),
    /// A rule that is off (D28): the walk went on to the next rule.
    Off(OffStep),
    /// No rule decided: the default flow, or `null` when the placement has none.
    Default {
        /// The default.
        default: Option<FlowStep>,
    },
}

/// What explain returns: resolve's outcome, the trace and the reason.
#[derive(Debug)]
pub struct Explanation<'c> {
    /// Exactly what resolve returns for the same request.
    pub resolution: Resolution<'c>,
    /// The steps, in evaluation order.
    pub trace: Vec<Step>,
    /// Why.
    pub reason: Reason,
}

/// The recording tracer.
struct Recorder {
    steps: Vec<Step>,
    /// Whether the default was reached.
    default: bool,
    /// Whether stored assignments were read (D23).
    sticky_read: bool,
}

impl Recorder {
    /// The step of rule `index`, created (audience matched) when the tracer first hears of it.
    fn rule(&mut self, index: usize) -> &mut RuleStep {
        let known = matches!(self.steps.last(), Some(Step::Rule(r)) if r.rule == index);
        if !known {
            self.steps.push(Step::Rule(RuleStep {
                rule: index,
                audience: AudienceStep {
                    matched: true,
                    mismatch: None,
                },
                flow: None,
                experiment: None,
                decided: false,
            }));
        }
        match self.steps.last_mut() {
            Some(Step::Rule(r)) => r,
            // Just pushed above.
            _ => unreachable!("the last step is a rule"),
        }
    }
}

impl Tracer for Recorder {
    fn off(&mut self, index: usize) {
        self.steps.push(Step::Off(OffStep { rule: index }));
    }

    fn audience(
        &mut self,
        index: usize,
        audience: &Condition,
        request: &ResolveRequest<'_>,
        groups: &SavedGroups,
    ) -> bool {
        let outcome = audience.explain(request, groups);
        let step = self.rule(index);
        step.audience = AudienceStep {
            matched: outcome.is_ok(),
            mismatch: outcome.err(),
        };
        step.audience.matched
    }

    fn flow(&mut self, index: usize, target: &FlowTarget) {
        let step = self.rule(index);
        step.flow = Some(FlowStep::of(target));
        step.decided = true;
    }

    fn experiment(&mut self, index: usize, experiment: &Experiment, bucketing: Bucketing) {
        let ranges = experiment
            .variants
            .iter()
            .zip(&experiment.ranges)
            .map(|(v, r)| RangeStep {
                variant_id: v.id,
                variant_name: v.name.clone(),
                start: r.start,
                end: r.end,
            })
            .collect();
        let namespace = |hash: f64| {
            experiment.namespace.as_ref().map(|ns| NamespaceStep {
                id: ns.id.clone(),
                start: ns.start,
                end: ns.end,
                hash,
                inside: ns.includes(hash),
            })
        };
        let variant_step = |index: usize| {
            experiment.variants.get(index).map(|v| VariantStep {
                id: v.id,
                name: v.name.clone(),
                flow: v.flow.as_ref().map(FlowStep::of),
            })
        };
        let (namespace, hash, variant, skipped) = match bucketing {
            Bucketing::Stored { index } => (None, None, variant_step(index), None),
            Bucketing::Excluded => (None, None, None, Some(Skipped::ExcludedByBucketVersion)),
            Bucketing::NoHashValue => (None, None, None, Some(Skipped::NoHashValue)),
            Bucketing::NotRunning => {
                let skipped = match experiment.status {
                    ExperimentStatus::Draft => Skipped::Draft,
                    ExperimentStatus::Concluded => Skipped::Concluded,
                    ExperimentStatus::Paused | ExperimentStatus::Running => Skipped::Paused,
                };
                (None, None, None, Some(skipped))
            }
            Bucketing::OutsideNamespace { namespace_hash } => (
                namespace(namespace_hash),
                None,
                None,
                Some(Skipped::OutsideNamespace),
            ),
            Bucketing::OutsideCoverage {
                namespace_hash,
                hash,
            } => (
                namespace_hash.and_then(namespace),
                Some(hash),
                None,
                Some(Skipped::OutsideCoverage),
            ),
            Bucketing::Assigned {
                namespace_hash,
                hash,
                index,
            } => (
                namespace_hash.and_then(namespace),
                Some(hash),
                variant_step(index),
                None,
            ),
        };
        let sticky = experiment.sticky.as_ref().map(|settings| StickyStep {
            bucket_version: settings.bucket_version,
            min_bucket_version: settings.min_bucket_version,
            assignment: match bucketing {
                _ if !self.sticky_read => StickyAssignment::NotRead,
                Bucketing::Stored { .. } => StickyAssignment::Stored,
                Bucketing::Excluded => StickyAssignment::Excluded,
                Bucketing::Assigned { .. } => StickyAssignment::New,
                _ => StickyAssignment::None,
            },
        });
        let step = self.rule(index);
        step.decided = variant.is_some();
        step.experiment = Some(Box::new(ExperimentStep {
            id: experiment.id,
            name: experiment.name.clone(),
            status: experiment.status,
            seed: experiment.seed.clone(),
            coverage: experiment.coverage,
            namespace,
            hash,
            ranges,
            variant,
            skipped,
            sticky,
        }));
    }

    fn reached_default(&mut self, target: Option<&FlowTarget>) {
        self.default = true;
        self.steps.push(Step::Default {
            default: target.map(FlowStep::of),
        });
    }
}

impl App {
    /// Explains resolving `placement_key` for `request` (D18): the same evaluation as
    /// [`App::resolve`] in normal mode, with its trace and reason. Records nothing.
    pub fn explain<'c>(
        &'c self,
        placement_key: &str,
        request: &ResolveRequest<'_>,
    ) -> Explanation<'c> {
        let Some(placement) = self.placement(placement_key) else {
            return Explanation {
                resolution: self.resolve(placement_key, request, ResolveMode::Normal),
                trace: Vec::new(),
                reason: Reason::UnknownPlacement,
            };
        };
        explain_placement(self, placement, request, None)
    }

    /// [`App::explain`] with the user's stored assignments (D23), as
    /// [`App::resolve_sticky`] would use them: the trace says, for each sticky experiment,
    /// whether a stored assignment decided. `sticky` is not changed (explain records nothing).
    pub fn explain_sticky<'c>(
        &'c self,
        placement_key: &str,
        request: &ResolveRequest<'_>,
        sticky: &StickyState,
    ) -> Explanation<'c> {
        let Some(placement) = self.placement(placement_key) else {
            return self.explain(placement_key, request);
        };
        explain_placement(self, placement, request, Some(sticky))
    }
}

fn explain_placement<'c>(
    app: &App,
    placement: &'c Placement,
    request: &ResolveRequest<'_>,
    sticky: Option<&StickyState>,
) -> Explanation<'c> {
    let mut recorder = Recorder {
        steps: Vec::new(),
        default: false,
        sticky_read: sticky.is_some_and(StickyState::is_readable),
    };
    let mut state = sticky.cloned();
    let resolution = placement.evaluate(
        app,
        request,
        ResolveMode::Normal,
        &mut recorder,
        state.as_mut(),
    );
    let reason = match resolution.no_flow_reason() {
        Some(NoFlowReason::UnknownPlacement) => Reason::UnknownPlacement,
        Some(NoFlowReason::NoRuleMatched) => Reason::NoRuleMatched,
        Some(NoFlowReason::Holdout) => Reason::Holdout,
        Some(NoFlowReason::FlowUnpublished) => Reason::FlowUnpublished,
        None if resolution.assignment().is_some() => Reason::Experiment,
        None if recorder.default => Reason::Default,
        None => Reason::Rule,
    };
    Explanation {
        resolution,
        trace: recorder.steps,
        reason,
    }
}

fn range(start: f64, end: f64) -> String {
    format!("[{start}, {end})")
}

fn flow_text(flow: &FlowStep) -> String {
    match flow.flow_version_id {
        Some(v) => format!("flow {} (version {v})", flow.flow_id),
        None => format!("flow {} (no published version)", flow.flow_id),
    }
}

fn seen_text(mismatch: &Mismatch) -> String {
    if mismatch.seen.is_empty() {
        return "it reads no attribute".to_owned();
    }
    let values: Vec<String> = mismatch
        .seen
        .iter()
        .map(|(k, v)| format!("{k} = {}", value_text(v)))
        .collect();
    format!("saw {}", values.join(", "))
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Null => "null (missing)".to_owned(),
        other => shown(other),
    }
}

impl fmt::Display for Step {
    /// One line (more for an experiment) for people: `flowgate explain` prints these.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Default {
                default: Some(flow),
            } => {
                write!(f, "default: {}", flow_text(flow))
            }
            Step::Default { default: None } => f.write_str("default: none"),
            Step::Off(off) => write!(f, "rule {}: off; skipped", off.rule),
            Step::Rule(rule) => {
                write!(f, "rule {}: ", rule.rule)?;
                if let Some(m) = &rule.audience.mismatch {
                    let how = if m.aborted {
                        "stopped (the condition throws in GrowthBook's JavaScript)"
                    } else {
                        "did not match"
                    };
                    return write!(
                        f,
                        "audience {how} at clause {} {}: {}",
                        m.index,
                        m.clause,
                        seen_text(m)
                    );
                }
                let stored = rule
                    .experiment
                    .as_ref()
                    .and_then(|e| e.sticky.as_ref())
                    .is_some_and(|s| {
                        matches!(
                            s.assignment,
                            StickyAssignment::Stored | StickyAssignment::Excluded
                        )
                    });
                f.write_str(if stored {
                    "audience not checked (a stored assignment applies)"
                } else {
                    "audience matched"
                })?;
                if let Some(flow) = &rule.flow {
                    write!(f, "; serves {}", flow_text(flow))?;
                }
                if let Some(e) = &rule.experiment {
                    write!(
                        f,
                        "; experiment `{}` ({}, seed `{}`, coverage {})",
                        e.name,
                        e.status.as_str(),
                        e.seed,
                        e.coverage
                    )?;
                    if let Some(ns) = &e.namespace {
                        write!(
                            f,
                            "\n    namespace `{}` {}: hash {} is {}",
                            ns.id,
                            range(ns.start, ns.end),
                            ns.hash,
                            if ns.inside { "inside" } else { "outside" }
                        )?;
                    }
                    if let Some(sticky) = &e.sticky {
                        let what = match sticky.assignment {
                            StickyAssignment::Stored => "a stored assignment decided the variant",
                            StickyAssignment::New => {
                                "no stored assignment; resolve would store this variant"
                            }
                            StickyAssignment::None => "no stored assignment",
                            StickyAssignment::Excluded => {
                                "a stored assignment of an earlier version excludes the user"
                            }
                            StickyAssignment::NotRead => {
                                "stored assignments not read; bucketed as without them"
                            }
                        };
                        write!(
                            f,
                            "\n    sticky (bucket_version {}, min_bucket_version {}): {what}",
                            sticky.bucket_version, sticky.min_bucket_version
                        )?;
                    }
                    if let Some(hash) = e.hash {
                        write!(f, "\n    hash {hash}; ranges:")?;
                        for r in &e.ranges {
                            write!(f, " {} {}", r.variant_name, range(r.start, r.end))?;
                        }
                    }
                    match (&e.variant, e.skipped) {
                        (Some(v), _) => {
                            let shows = match &v.flow {
                                Some(flow) => flow_text(flow),
                                None => "no flow (holdout)".to_owned(),
                            };
                            write!(f, "\n    variant `{}`: {shows}", v.name)?;
                        }
                        (None, Some(skipped)) => {
                            write!(f, "\n    skipped: {}", skipped.as_str())?;
                        }
                        (None, None) => {}
                    }
                }
                Ok(())
            }
        }
    }
}
