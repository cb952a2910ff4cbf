//! The resolver (D3, D6): which published flow version a user sees for a placement.
//!
//! It reads only the immutable [`Catalog`](crate::catalog::Catalog) snapshot, performs no I/O
//! and allocates nothing proportional to the flow: a matched [`Resolution`] borrows the
//! pre-rendered [`PublishedVersion`] from the snapshot.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use time::OffsetDateTime;

use crate::bucketing::{choose_variation, hash};
use crate::catalog::{
    App, Experiment, ExperimentStatus, FlowTarget, Placement, PublishedVersion, StickySettings,
    Target, Variant,
};
use crate::conditions::{Attributes, Condition, SavedGroups};
use crate::events::{AnalyticsEvent, EventSource, EventType, NoFlowReason};
use crate::identity::Platform;
use crate::ids::AppId;
use crate::ids::EventId;
use crate::placement::{validate_placement_key, PlacementKeyError};
use crate::sticky::{
    lookup, Identifier, StickyDocs, StickyExperiment, StickyId, StickyLookup, StickyWrite,
};

/// Most distinct placement keys in one batch (D6).
pub const MAX_BATCH_KEYS: usize = 50;

/// Who is asking: the identity fields and targeting attributes of a resolve request.
pub struct ResolveRequest<'a> {
    user_id: &'a str,
    session_id: &'a str,
    /// `user_id` and `session_id` as JSON strings, each made the first time a condition reads
    /// it: a placement whose audiences never read one (`session_id` is rarely read) does not
    /// allocate it.
    user_id_value: OnceLock<Value>,
    session_id_value: OnceLock<Value>,
    platform: Platform,
    attributes: &'a (dyn Attributes + Sync),
}

impl std::fmt::Debug for ResolveRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolveRequest")
            .field("user_id", &self.user_id)
            .field("session_id", &self.session_id)
            .field("platform", &self.platform)
            .finish_non_exhaustive()
    }
}

/// `device_platform` as conditions read it: one JSON string per platform, made once (not
/// allocated per request).
fn platform_value(platform: Platform) -> &'static Value {
    static VALUES: std::sync::LazyLock<[Value; 3]> =
        std::sync::LazyLock::new(|| Platform::ALL.map(|p| Value::String(p.as_str().to_owned())));
    let index = match platform {
        Platform::Ios => 0,
        Platform::Android => 1,
        Platform::Web => 2,
    };
    &VALUES[index]
}

impl<'a> ResolveRequest<'a> {
    /// A request for one identity. The identity fields are visible to audience conditions as
    /// `user_id`, `session_id` and `device_platform`, and win over attributes of the same
    /// name (D3.6). `attributes` is any [`Attributes`] source: a JSON `Map`, or the caller's
    /// own (the HTTP adapter passes the members of the request body as it parsed them).
    pub fn new(
        user_id: &'a str,
        session_id: &'a str,
        platform: Platform,
        attributes: &'a (dyn Attributes + Sync),
    ) -> Self {
        Self {
            user_id,
            session_id,
            user_id_value: OnceLock::new(),
            session_id_value: OnceLock::new(),
            platform,
            attributes,
        }
    }

    /// The user id.
    pub fn user_id(&self) -> &'a str {
        self.user_id
    }

    /// The session id.
    pub fn session_id(&self) -> &'a str {
        self.session_id
    }

    /// The platform.
    pub fn platform(&self) -> Platform {
        self.platform
    }
}

impl Attributes for ResolveRequest<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        match key {
            "user_id" => Some(
                self.user_id_value
                    .get_or_init(|| Value::String(self.user_id.to_owned())),
            ),
            "session_id" => Some(
                self.session_id_value
                    .get_or_init(|| Value::String(self.session_id.to_owned())),
            ),
            "device_platform" => Some(platform_value(self.platform)),
            _ => self.attributes.get(key),
        }
    }
}

/// Normal resolution, or export (D3.5): the placement's default flow, no audiences, no
/// experiments, no events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResolveMode {
    /// Rules, audiences and experiments apply.
    Normal,
    /// `?export=true`.
    Export,
}

/// The variant a user was assigned (D5).
#[derive(Clone, Copy, Debug)]
pub struct Assignment<'c> {
    /// The experiment.
    pub experiment: &'c Experiment,
    /// The assigned variant.
    pub variant: &'c Variant,
}

/// The outcome of resolving one placement.
#[derive(Clone, Copy, Debug)]
pub enum Resolution<'c> {
    /// A published version is served (D3.7).
    Flow {
        /// The version, pre-rendered.
        /// (The snapshot's `Arc`, so an adapter can hold on to the pre-rendered bytes beyond
        /// the borrow, e.g. to send them without copying.)
        version: &'c Arc<PublishedVersion>,
        /// Set when an experiment decided.
        assignment: Option<Assignment<'c>>,
    },
    /// No flow (D3.8), with the reason for `resolve_no_flow` (D8).
    NoFlow {
        /// Why.
        reason: NoFlowReason,
        /// Set for a holdout (and for an experiment variant whose flow is unpublished).
        assignment: Option<Assignment<'c>>,
    },
}

impl<'c> Resolution<'c> {
    /// The served version, if any.
    pub fn version(&self) -> Option<&'c Arc<PublishedVersion>> {
        match self {
            Resolution::Flow { version, .. } => Some(version),
            Resolution::NoFlow { .. } => None,
        }
    }

    /// The experiment assignment, if an experiment decided.
    pub fn assignment(&self) -> Option<&Assignment<'c>> {
        match self {
            Resolution::Flow { assignment, .. } | Resolution::NoFlow { assignment, .. } => {
                assignment.as_ref()
            }
        }
    }

    /// Why no flow was served; `None` when a flow was.
    pub fn no_flow_reason(&self) -> Option<NoFlowReason> {
        match self {
            Resolution::Flow { .. } => None,
            Resolution::NoFlow { reason, .. } => Some(*reason),
        }
    }

    /// The `resolve_no_flow` event for this outcome (D8), or `None` when a flow was served.
    /// `event_id` should be a fresh UUIDv7 ([`EventId::new_v7`]); `at` is the server time.
    pub fn no_flow_event(
        &self,
        app: &App,
        placement_key: &str,
        request: &ResolveRequest<'_>,
        event_id: EventId,
        at: OffsetDateTime,
    ) -> Option<AnalyticsEvent> {
        let reason = self.no_flow_reason()?;
        let assignment = self.assignment();
        let event = AnalyticsEvent::new(
            event_id,
            EventSource::Server,
            EventType::ResolveNoFlow,
            app.id,
            request.user_id(),
            request.session_id(),
            request.platform(),
            at,
        )
        .with_placement_key(Some(placement_key.to_owned()))
        .with_experiment_id(assignment.map(|a| a.experiment.id.to_string()))
        .with_variant_id(assignment.map(|a| a.variant.id.to_string()))
        .with_variant_name(assignment.map(|a| a.variant.name.clone()))
        .with_reason(Some(reason));
        Some(event)
    }
}

fn serve<'c>(target: &'c FlowTarget, assignment: Option<Assignment<'c>>) -> Resolution<'c> {
    match &target.published {
        Some(version) => Resolution::Flow {
            version,
            assignment,
        },
        None => Resolution::NoFlow {
            reason: NoFlowReason::FlowUnpublished,
            assignment,
        },
    }
}

/// How an experiment treated a user (D5), step by step: what [`Experiment::assign`] decides,
/// with the hash values explain (D18) shows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bucketing {
    /// The experiment is not running: its rule is skipped.
    NotRunning,
    /// There is no value to hash (an empty user id): the user is not in the experiment, as
    /// GrowthBook's SDKs decide.
    NoHashValue,
    /// The user's namespace hash is outside the experiment's namespace range.
    OutsideNamespace {
        /// The namespace hash.
        namespace_hash: f64,
    },
    /// The user's hash is in no variant's range: outside the experiment's coverage.
    OutsideCoverage {
        /// The namespace hash, when the experiment has a namespace.
        namespace_hash: Option<f64>,
        /// The user's hash.
        hash: f64,
    },
    /// The user is assigned the variant at `index`.
    Assigned {
        /// The namespace hash, when the experiment has a namespace.
        namespace_hash: Option<f64>,
        /// The user's hash.
        hash: f64,
        /// The variant's position.
        index: usize,
    },
    /// A stored assignment keeps the user in the variant at `index` (D23): audience,
    /// namespace, coverage and weights were not consulted.
    Stored {
        /// The variant's position.
        index: usize,
    },
    /// The user has a stored assignment of a version below the experiment's
    /// `min_bucket_version` (D23): not in the experiment.
    Excluded,
}

impl Experiment {
    /// How `user_id` is bucketed: not running, outside the namespace, outside the coverage,
    /// or assigned a variant (D3.2, D5).
    #[inline]
    pub fn bucket(&self, user_id: &str) -> Bucketing {
        self.bucket_value(user_id, user_id)
    }

    /// [`Experiment::bucket`] with the namespace checked on `user_id` and the variant chosen
    /// by the hash of `hash_value` (a sticky experiment's fallback attribute when the user id
    /// is empty, as GrowthBook's SDKs do).
    #[inline]
    fn bucket_value(&self, user_id: &str, hash_value: &str) -> Bucketing {
        if self.status != ExperimentStatus::Running {
            return Bucketing::NotRunning;
        }
        if hash_value.is_empty() {
            return Bucketing::NoHashValue;
        }
        let namespace_hash = match &self.namespace {
            Some(ns) => {
                let namespace_hash = ns.hash(user_id);
                if !ns.includes(namespace_hash) {
                    return Bucketing::OutsideNamespace { namespace_hash };
                }
                Some(namespace_hash)
            }
            None => None,
        };
        let hash = hash(&self.seed, hash_value, self.hash_version).unwrap_or(f64::NAN);
        match choose_variation(hash, &self.ranges) {
            Some(index) if index < self.variants.len() => Bucketing::Assigned {
                namespace_hash,
                hash,
                index,
            },
            _ => Bucketing::OutsideCoverage {
                namespace_hash,
                hash,
            },
        }
    }

    /// The variant `user_id` is assigned, or `None` when the experiment is not running, the
    /// user is outside its namespace, or outside its coverage (D3.2, D5).
    pub fn assign(&self, user_id: &str) -> Option<&Variant> {
        match self.bucket(user_id) {
            Bucketing::Assigned { index, .. } => self.variants.get(index),
            _ => None,
        }
    }
}

/// What an evaluation tells its observer (D18). Resolve uses `Untraced`, whose methods do
/// nothing and compile away; explain records every step. Both run `Placement::evaluate`, so
/// they cannot disagree.
pub(crate) trait Tracer {
    /// Rule `index` is off (D28): skipped before anything of it is read.
    fn off(&mut self, index: usize);
    /// Whether rule `index`'s audience (not `{}`) matches.
    fn audience(
        &mut self,
        index: usize,
        audience: &Condition,
        request: &ResolveRequest<'_>,
        groups: &SavedGroups,
    ) -> bool;
    /// Rule `index` (its audience matched) serves a flow.
    fn flow(&mut self, index: usize, target: &FlowTarget);
    /// Rule `index` (its audience matched) bucketed the user into its experiment.
    fn experiment(&mut self, index: usize, experiment: &Experiment, bucketing: Bucketing);
    /// No rule decided: the placement's default (if any) applies.
    fn reached_default(&mut self, target: Option<&FlowTarget>);
}

/// The resolve path: no trace.
pub(crate) struct Untraced;

impl Tracer for Untraced {
    #[inline(always)]
    fn off(&mut self, _: usize) {}
    #[inline(always)]
    fn audience(
        &mut self,
        _: usize,
        audience: &Condition,
        request: &ResolveRequest<'_>,
        groups: &SavedGroups,
    ) -> bool {
        audience.eval(request, groups)
    }
    #[inline(always)]
    fn flow(&mut self, _: usize, _: &FlowTarget) {}
    #[inline(always)]
    fn experiment(&mut self, _: usize, _: &Experiment, _: Bucketing) {}
    #[inline(always)]
    fn reached_default(&mut self, _: Option<&FlowTarget>) {}
}

impl Placement {
    /// Resolves this placement for a request (D3.2 to D3.5), without stored assignments: a
    /// sticky experiment buckets as a non-sticky one ([`Placement::resolve_sticky`] applies
    /// them, D23).
    #[inline]
    pub fn resolve<'c>(
        &'c self,
        app: &App,
        request: &ResolveRequest<'_>,
        mode: ResolveMode,
    ) -> Resolution<'c> {
        self.evaluate(app, request, mode, &mut Untraced, None)
    }

    /// Resolves this placement with the user's stored assignments (D23): `sticky` holds the
    /// documents read for [`Placement::sticky_ids`] and collects the assignments to store.
    pub fn resolve_sticky<'c>(
        &'c self,
        app: &App,
        request: &ResolveRequest<'_>,
        mode: ResolveMode,
        sticky: &mut StickyState,
    ) -> Resolution<'c> {
        self.evaluate(app, request, mode, &mut Untraced, Some(sticky))
    }

    /// Whether a rule of this placement that is on has a sticky experiment (D23): only then
    /// does resolve need stored assignments. Fixed when the catalog is built.
    pub fn is_sticky(&self) -> bool {
        self.sticky
    }

    /// The identifiers whose documents a sticky resolve of this placement reads (D23): the
    /// user's, and for each sticky experiment with a `fallback_attribute` the request's value
    /// of it, when it has one. Empty for a placement without sticky experiments.
    pub fn sticky_ids(&self, request: &ResolveRequest<'_>) -> Vec<StickyId> {
        let mut ids = Vec::new();
        if self.sticky {
            self.push_sticky_ids(request, &mut ids);
        }
        ids
    }

    fn push_sticky_ids(&self, request: &ResolveRequest<'_>, ids: &mut Vec<StickyId>) {
        let mut push = |name: &str, value: &str| {
            if !ids
                .iter()
                .any(|id| id.attribute_name == name && id.attribute_value == value)
            {
                ids.push(StickyId {
                    attribute_name: name.to_owned(),
                    attribute_value: value.to_owned(),
                });
            }
        };
        for rule in self.rules.iter().filter(|r| r.enabled) {
            let Target::Experiment(experiment) = &rule.target else {
                continue;
            };
            let Some(settings) = &experiment.sticky else {
                continue;
            };
            if !request.user_id().is_empty() {
                push(USER_ID, request.user_id());
            }
            if let Some(name) = &settings.fallback_attribute {
                if let Some(value) = identifier_value(request, name) {
                    push(name, &value);
                }
            }
        }
    }

    /// The one evaluation behind resolve and explain: rules in order, skipping a rule that is
    /// off (D28) as one whose experiment is not running; a stored assignment of a sticky
    /// experiment decides before the rule's audience is checked (D23); otherwise the first rule
    /// whose audience matches and that decides wins; an experiment decides when it assigns a
    /// variant.
    #[inline(always)]
    pub(crate) fn evaluate<'c, T: Tracer>(
        &'c self,
        app: &App,
        request: &ResolveRequest<'_>,
        mode: ResolveMode,
        tracer: &mut T,
        mut sticky: Option<&mut StickyState>,
    ) -> Resolution<'c> {
        if mode == ResolveMode::Normal {
            for (index, rule) in self.rules.iter().enumerate() {
                // D28: nothing of a rule that is off is read, not even a stored assignment of
                // its experiment (kept, and used again once the rule is on).
                if !rule.enabled {
                    tracer.off(index);
                    continue;
                }
                let stored = match (&rule.target, sticky.as_deref_mut()) {
                    (Target::Experiment(experiment), Some(state)) => {
                        state.stored(experiment, request)
                    }
                    _ => None,
                };
                if let Some((experiment, bucketing)) = stored {
                    tracer.experiment(index, experiment, bucketing);
                    if let Bucketing::Stored { index: chosen } = bucketing {
                        if let Some(state) = sticky.as_deref_mut() {
                            state.record(experiment, request, chosen);
                        }
                        if let Some(resolution) = assigned(experiment, chosen) {
                            return resolution;
                        }
                    }
                    continue;
                }
                if !rule.audience.is_always_true()
                    && !tracer.audience(index, &rule.audience, request, &app.saved_groups)
                {
                    continue;
                }
                match &rule.target {
                    Target::Flow(target) => {
                        tracer.flow(index, target);
                        return serve(target, None);
                    }
                    Target::Experiment(experiment) => {
                        let bucketing = match (&experiment.sticky, sticky.as_deref()) {
                            (Some(settings), Some(_)) => match hash_value(settings, request) {
                                Some(value) => experiment.bucket_value(request.user_id(), &value),
                                None => continue,
                            },
                            _ => experiment.bucket(request.user_id()),
                        };
                        tracer.experiment(index, experiment, bucketing);
                        let Bucketing::Assigned { index: chosen, .. } = bucketing else {
                            continue;
                        };
                        if experiment.sticky.is_some() {
                            if let Some(state) = sticky.as_deref_mut() {
                                state.record(experiment, request, chosen);
                            }
                        }
                        if let Some(resolution) = assigned(experiment, chosen) {
                            return resolution;
                        }
                    }
                }
            }
        }
        tracer.reached_default(self.default.as_ref());
        match &self.default {
            Some(target) => serve(target, None),
            None => Resolution::NoFlow {
                reason: NoFlowReason::NoRuleMatched,
                assignment: None,
            },
        }
    }
}

/// Why a placement resolved as it did, in OpenFeature's words (D32): inside an experiment
/// (`SPLIT`, a holdout included), by a rule whose audience matched (`TARGETING_MATCH`), or by
/// the placement's default or nothing at all (`DEFAULT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResolveReason {
    /// An experiment assigned the user a variant.
    Split,
    /// A rule's audience matched and the rule served its flow.
    TargetingMatch,
    /// No rule decided: the default flow, or no flow.
    Default,
}

impl ResolveReason {
    /// OpenFeature's name of the reason.
    pub fn as_str(self) -> &'static str {
        match self {
            ResolveReason::Split => "SPLIT",
            ResolveReason::TargetingMatch => "TARGETING_MATCH",
            ResolveReason::Default => "DEFAULT",
        }
    }
}

/// A tracer that notes only whether the walk reached the default.
struct ReachedDefault(bool);

impl Tracer for ReachedDefault {
    fn off(&mut self, _: usize) {}
    fn audience(
        &mut self,
        _: usize,
        audience: &Condition,
        request: &ResolveRequest<'_>,
        groups: &SavedGroups,
    ) -> bool {
        audience.eval(request, groups)
    }
    fn flow(&mut self, _: usize, _: &FlowTarget) {}
    fn experiment(&mut self, _: usize, _: &Experiment, _: Bucketing) {}
    fn reached_default(&mut self, _: Option<&FlowTarget>) {
        self.0 = true;
    }
}

impl Placement {
    /// Resolves this placement as [`Placement::resolve`] or, with `sticky`,
    /// [`Placement::resolve_sticky`] do, and says why ([`ResolveReason`]): the same
    /// evaluation, for protocols that report the reason (OpenFeature's, D32).
    pub fn resolve_with_reason<'c>(
        &'c self,
        app: &App,
        request: &ResolveRequest<'_>,
        sticky: Option<&mut StickyState>,
    ) -> (Resolution<'c>, ResolveReason) {
        let mut tracer = ReachedDefault(false);
        let resolution = self.evaluate(app, request, ResolveMode::Normal, &mut tracer, sticky);
        let reason = if resolution.assignment().is_some() {
            ResolveReason::Split
        } else if tracer.0 {
            ResolveReason::Default
        } else {
            ResolveReason::TargetingMatch
        };
        (resolution, reason)
    }
}

/// The outcome of assigning variant `chosen`, or `None` when there is no such variant.
#[inline(always)]
fn assigned(experiment: &Experiment, chosen: usize) -> Option<Resolution<'_>> {
    let variant = experiment.variants.get(chosen)?;
    let assignment = Some(Assignment {
        experiment,
        variant,
    });
    Some(match &variant.flow {
        Some(target) => serve(target, assignment),
        None => Resolution::NoFlow {
            reason: NoFlowReason::Holdout,
            assignment,
        },
    })
}

/// The attribute every experiment hashes: the request's user id (D5).
pub const USER_ID: &str = "user_id";

/// Longest attribute value sticky assignment keys a document by (D23); a longer value of a
/// fallback attribute counts as absent, so a client cannot make the store keep large keys.
pub const MAX_IDENTIFIER_VALUE: usize = 256;

/// The request's value of an identifier attribute as GrowthBook's SDKs turn it into text: a
/// non-empty string, or a non-zero number in JavaScript's form. Anything else (absent, empty,
/// `0`, `false`, objects) is no value, as GrowthBook treats a falsy hash attribute.
fn identifier_value<'r>(request: &'r ResolveRequest<'_>, name: &str) -> Option<Cow<'r, str>> {
    let value = match request.get(name)? {
        Value::String(s) if !s.is_empty() => Cow::Borrowed(s.as_str()),
        number @ Value::Number(_) if crate::conditions::truthy(number) => {
            crate::conditions::to_js_string(number)
        }
        _ => return None,
    };
    (value.len() <= MAX_IDENTIFIER_VALUE).then_some(value)
}

/// What a sticky experiment hashes (GrowthBook's `getHashAttribute` with sticky bucketing
/// on): the user id, or when it is empty the fallback attribute's value; `None` when neither
/// has one (the user is not in the experiment).
fn hash_value<'r>(
    settings: &StickySettings,
    request: &'r ResolveRequest<'_>,
) -> Option<Cow<'r, str>> {
    if !request.user_id().is_empty() {
        return Some(Cow::Borrowed(request.user_id()));
    }
    identifier_value(request, settings.fallback_attribute.as_deref()?)
}

/// One request's stored assignments (D23): the documents read for it and the assignments its
/// resolves add, to be written behind the response.
#[derive(Clone, Debug, Default)]
pub struct StickyState {
    docs: StickyDocs,
    /// False when the documents could not be read: nothing is looked up and nothing recorded
    /// (a write would replace assignments this request could not see).
    readable: bool,
    /// New or changed assignments, a document per identifier.
    changes: StickyDocs,
}

impl StickyState {
    /// The documents read for the request (missing ones are not stored).
    pub fn new(docs: StickyDocs) -> Self {
        Self {
            docs,
            readable: true,
            changes: StickyDocs::new(),
        }
    }

    /// The documents could not be read (an error, or past the deadline): resolve as without
    /// stored assignments, and record none.
    pub fn unavailable() -> Self {
        Self::default()
    }

    /// Whether the documents were read.
    pub fn is_readable(&self) -> bool {
        self.readable
    }

    /// The assignments to store: one write per changed document, holding only its new or
    /// changed assignments (the store merges them into what it has).
    pub fn writes(&self, app_id: AppId) -> Vec<StickyWrite> {
        self.changes
            .iter()
            .map(|doc| StickyWrite {
                app_id,
                doc: doc.clone(),
            })
            .collect()
    }

    /// The documents as they are after this request's resolves (the read ones with the new
    /// assignments merged in).
    pub fn docs(&self) -> &StickyDocs {
        &self.docs
    }

    /// What the stored documents say of a running sticky experiment, as its bucketing, or
    /// `None` when they do not decide (not sticky, not running, unreadable, no assignment).
    fn stored<'e>(
        &self,
        experiment: &'e Experiment,
        request: &ResolveRequest<'_>,
    ) -> Option<(&'e Experiment, Bucketing)> {
        let settings = experiment.sticky.as_ref()?;
        if !self.readable || experiment.status != ExperimentStatus::Running {
            return None;
        }
        let fallback_value = settings
            .fallback_attribute
            .as_deref()
            .and_then(|name| Some((name, identifier_value(request, name)?)));
        let found = lookup(
            &self.docs,
            Identifier {
                name: USER_ID,
                value: request.user_id(),
            },
            fallback_value
                .as_ref()
                .map(|(name, value)| Identifier { name, value }),
            &sticky_experiment(settings),
        );
        match found {
            StickyLookup::None => None,
            StickyLookup::Variant(index) => Some((experiment, Bucketing::Stored { index })),
            StickyLookup::Blocked => Some((experiment, Bucketing::Excluded)),
        }
    }

    /// Records that the user is in variant `chosen` of a sticky experiment, in the document of
    /// the attribute that was hashed (GrowthBook keeps it there even when the fallback's
    /// document decided), when that changes the document.
    fn record(&mut self, experiment: &Experiment, request: &ResolveRequest<'_>, chosen: usize) {
        let Some(settings) = &experiment.sticky else {
            return;
        };
        if !self.readable {
            return;
        }
        let Some(variant_key) = settings.variant_keys.get(chosen) else {
            return;
        };
        let (name, value) = if request.user_id().is_empty() {
            let Some(name) = settings.fallback_attribute.as_deref() else {
                return;
            };
            let Some(value) = identifier_value(request, name) else {
                return;
            };
            (name, value)
        } else {
            (USER_ID, Cow::Borrowed(request.user_id()))
        };
        let hashed = Identifier {
            name,
            value: &value,
        };
        let sticky = sticky_experiment(settings);
        if crate::sticky::record(&mut self.docs, hashed, &sticky, variant_key).is_some() {
            let key = crate::sticky::assignment_key(sticky.key, sticky.bucket_version);
            self.changes
                .assignments_mut(name, &value)
                .insert(key, variant_key.clone());
        }
    }
}

fn sticky_experiment(settings: &StickySettings) -> StickyExperiment<'_> {
    StickyExperiment {
        key: &settings.key,
        bucket_version: settings.bucket_version,
        min_bucket_version: settings.min_bucket_version,
        variant_keys: &settings.variant_keys,
    }
}

impl App {
    /// Resolves a placement of this app (D3). An unknown key is not an error: it is "no
    /// flow" with reason `unknown_placement` (D3.1). The key's format is the caller's to check
    /// first ([`validate_placement_key`]); a malformed key simply matches nothing here.
    pub fn resolve<'c>(
        &'c self,
        placement_key: &str,
        request: &ResolveRequest<'_>,
        mode: ResolveMode,
    ) -> Resolution<'c> {
        match self.placement(placement_key) {
            Some(placement) => placement.resolve(self, request, mode),
            None => Resolution::NoFlow {
                reason: NoFlowReason::UnknownPlacement,
                assignment: None,
            },
        }
    }

    /// Resolves a placement with the user's stored assignments (D23); see
    /// [`Placement::resolve_sticky`].
    pub fn resolve_sticky<'c>(
        &'c self,
        placement_key: &str,
        request: &ResolveRequest<'_>,
        mode: ResolveMode,
        sticky: &mut StickyState,
    ) -> Resolution<'c> {
        match self.placement(placement_key) {
            Some(placement) => placement.resolve_sticky(self, request, mode, sticky),
            None => Resolution::NoFlow {
                reason: NoFlowReason::UnknownPlacement,
                assignment: None,
            },
        }
    }

    /// The identifiers whose documents a sticky resolve of these placements reads (D23), each
    /// once; empty when none of them has a sticky experiment.
    pub fn sticky_ids<'k>(
        &self,
        placement_keys: impl IntoIterator<Item = &'k str>,
        request: &ResolveRequest<'_>,
    ) -> Vec<StickyId> {
        let mut ids = Vec::new();
        if !self.sticky {
            return ids;
        }
        for key in placement_keys {
            if let Some(placement) = self.placement(key).filter(|p| p.sticky) {
                placement.push_sticky_ids(request, &mut ids);
            }
        }
        ids
    }

    /// Batch resolve (D6): de-duplicates keys keeping first occurrences, then resolves each.
    pub fn resolve_batch<'c, 'k, K: AsRef<str>>(
        &'c self,
        placement_keys: &'k [K],
        request: &ResolveRequest<'_>,
    ) -> Result<Vec<BatchEntry<'c, 'k>>, BatchError> {
        let keys = dedup_keys(placement_keys)?;
        Ok(keys
            .into_iter()
            .map(|key| BatchEntry {
                placement_key: key,
                resolution: self.resolve(key, request, ResolveMode::Normal),
            })
            .collect())
    }
}

/// De-duplicates batch keys keeping first occurrences and checks D6's limits: at least one key,
/// at most [`MAX_BATCH_KEYS`] distinct keys, every key well-formed.
pub fn dedup_keys<K: AsRef<str>>(placement_keys: &[K]) -> Result<Vec<&str>, BatchError> {
    if placement_keys.is_empty() {
        return Err(BatchError::Empty);
    }
    let mut seen = HashSet::with_capacity(placement_keys.len().min(MAX_BATCH_KEYS + 1));
    let mut keys = Vec::with_capacity(placement_keys.len().min(MAX_BATCH_KEYS));
    for (index, key) in placement_keys.iter().enumerate() {
        let key = key.as_ref();
        validate_placement_key(key).map_err(|error| BatchError::InvalidKey { index, error })?;
        if seen.insert(key) {
            keys.push(key);
        }
    }
    if keys.len() > MAX_BATCH_KEYS {
        return Err(BatchError::TooManyPlacements {
            distinct: keys.len(),
        });
    }
    Ok(keys)
}

/// One entry of a batch result (D6).
#[derive(Clone, Copy, Debug)]
pub struct BatchEntry<'c, 'k> {
    /// The key this entry is for.
    pub placement_key: &'k str,
    /// Its resolution.
    pub resolution: Resolution<'c>,
}

impl BatchEntry<'_, '_> {
    /// The per-entry `error` code (D3.4, D6): `flow_unpublished` when the target flow has no
    /// published version; `None` on success and on plain no-flow.
    pub fn error(&self) -> Option<&'static str> {
        match self.resolution.no_flow_reason() {
            Some(NoFlowReason::FlowUnpublished) => Some(NoFlowReason::FlowUnpublished.as_str()),
            _ => None,
        }
    }
}

/// Why a whole batch request is refused (400, D6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// `placement_keys` is empty.
    #[error("placement_keys must not be empty")]
    Empty,
    /// More than 50 distinct keys: `too_many_placements`.
    #[error("{distinct} distinct placement keys; at most 50 are allowed")]
    TooManyPlacements {
        /// How many distinct keys were sent.
        distinct: usize,
    },
    /// A key with invalid characters or length.
    #[error("placement_keys[{index}]: {error}")]
    InvalidKey {
        /// Position in the request.
        index: usize,
        /// What is wrong.
        error: PlacementKeyError,
    },
}
