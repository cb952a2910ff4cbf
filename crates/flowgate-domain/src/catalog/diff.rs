//! What a catalog change does (D19): the entities it adds, changes, publishes or unpublishes,
//! the rule lists it rewrites, and for each experiment whose assignment changes, the exact
//! share of users who keep, change, gain or lose a variant.
//!
//! The shares are computed from the bucket ranges, not sampled. The assignment hash takes one
//! of 10,000 values (`hash_v2`, four decimals) and the namespace hash one of 1,000
//! (`hash_v1`, three decimals); both are taken as uniform over their values, and as
//! independent of each other and across different seeds or namespace ids. Every hash value
//! is enumerated, so a reweight from 50/50 to 70/30 moves exactly 2,000 of the 10,000 values:
//! 20% of the users who reach the rule.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::Value;

use super::data::{
    CatalogData, ExperimentData, ExperimentStatus, FlowData, PlacementData, RuleData,
};
use super::{AnalysisSettings, Catalog, Experiment, Target};
use crate::bucketing::choose_variation;
use crate::ids::{AppId, ExperimentId, VariantId};

/// Values of the assignment hash (`hash_v2`: `% 10000 / 10000`).
const HASH_VALUES: u32 = 10_000;
/// Values of the namespace hash (`hash_v1`: `% 1000 / 1000`).
const NAMESPACE_VALUES: u32 = 1_000;

/// What changes between two catalogs.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CatalogDiff {
    /// Entities added, changed, published or unpublished, in catalog order.
    pub entities: Vec<EntityChange>,
    /// Placements whose rule lists change.
    pub placements: Vec<PlacementChange>,
    /// Experiments whose assignment changes for some users.
    pub experiments: Vec<ExperimentShift>,
}

impl CatalogDiff {
    /// True when nothing changes.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty() && self.placements.is_empty() && self.experiments.is_empty()
    }
}

/// How an entity changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Change {
    /// New.
    Added,
    /// Its fields differ.
    Changed,
    /// A flow that published a version publishes another, or one that published none now does.
    Published,
    /// A flow that published a version publishes none: its targets resolve to no flow (D3.4).
    Unpublished,
}

/// One entity's change.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EntityChange {
    /// `workspace`, `app`, `flow`, `version`, `placement`, `experiment` (its analysis
    /// settings, D27: they change no assignment) or `key`.
    pub entity: &'static str,
    /// Its id (a placement: `app_id/key`; a key: its record id).
    pub id: String,
    /// Its name, key or version number, for people.
    pub name: String,
    /// What happens to it.
    pub change: Change,
    /// More, where it helps: `version 2 -> 3`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// A placement whose rules change.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlacementChange {
    /// The app.
    pub app_id: AppId,
    /// The placement key.
    pub key: String,
    /// Rules before.
    pub rules_before: usize,
    /// Rules after.
    pub rules_after: usize,
    /// Each rule position that changes.
    pub rules: Vec<RuleChange>,
    /// The default flow changes.
    pub default_changed: bool,
}

/// A rule position that changes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleChange {
    /// Position in the list.
    pub rule: usize,
    /// What: `added`, `removed`, or the parts that differ (`audience`, `target`), and `off`
    /// or `on` when the rule is turned off or on (D28).
    pub change: Vec<&'static str>,
}

/// How an experiment's users move, as shares of the users who reach its rule (its audience
/// matches and no earlier rule decides). The five shares add up to 1.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExperimentShift {
    /// The experiment.
    pub id: ExperimentId,
    /// Its name (after the change, or before when it is removed).
    pub name: String,
    /// Where its rule is.
    pub app_id: AppId,
    /// Its placement.
    pub placement_key: String,
    /// Status before (`None`: not in the catalog).
    pub status_before: Option<ExperimentStatus>,
    /// Status after (`None`: no longer in the catalog).
    pub status_after: Option<ExperimentStatus>,
    /// In the experiment before and after, in the same variant.
    pub keep_variant: f64,
    /// In the experiment before and after, in another variant.
    pub change_variant: f64,
    /// Outside before, inside after.
    pub enter: f64,
    /// Inside before, outside after.
    pub leave: f64,
    /// Outside before and after.
    pub outside: f64,
    /// Each variant's share of the rule's users, before and after.
    pub variants: Vec<VariantShare>,
    /// Set when the audience or position of the rule changes too: the shares are of the
    /// users who reach the rule both before and after.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub rule_changed: bool,
    /// Set when the experiment is sticky before or after (D23): what the shares mean for
    /// users with a stored assignment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sticky: Option<StickyShift>,
    /// Whether the experiment's rule is on, before and after (D28); an experiment whose rule
    /// is off assigns no one, as one that is not running. Left out of the JSON when the rule
    /// is on both times.
    #[serde(skip_serializing_if = "both_on")]
    pub rule_enabled: (bool, bool),
}

fn both_on(enabled: &(bool, bool)) -> bool {
    enabled.0 && enabled.1
}

/// Sticky assignment's part in an experiment's shift (D23).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StickyShift {
    /// Sticky before (`false` also when the experiment is new).
    pub before: bool,
    /// Sticky after.
    pub after: bool,
    /// `bucket_version` before and after.
    pub bucket_version: (u32, u32),
    /// `min_bucket_version` before and after.
    pub min_bucket_version: (u32, u32),
    /// Who the shares are of, in a sentence.
    pub note: String,
}

impl StickyShift {
    fn of(old: Option<&Experiment>, new: Option<&Experiment>) -> Option<Self> {
        let (was, is) = (
            old.and_then(|e| e.sticky.as_ref()),
            new.and_then(|e| e.sticky.as_ref()),
        );
        if was.is_none() && is.is_none() {
            return None;
        }
        let versions = |s: Option<&super::StickySettings>| {
            s.map_or((0, 0), |s| (s.bucket_version, s.min_bucket_version))
        };
        let ((bv0, min0), (bv1, min1)) = (versions(was), versions(is));
        let mut note = match (was.is_some(), is.is_some()) {
            (true, true) if bv1 == bv0 => "only users without a stored assignment move as shown; \
                users with one keep their variant"
                .to_owned(),
            (true, true) => format!(
                "bucket_version {bv0} -> {bv1} re-randomises: stored assignments of version \
                 {bv0} no longer apply, and every user who reaches the rule is bucketed again by \
                 the new ranges, including those who had a variant"
            ),
            (false, true) => "sticky from now on: users are bucketed as shown, then keep their \
                variant"
                .to_owned(),
            _ => "no longer sticky: stored assignments are ignored, and users move as shown, \
                including those who had a variant"
                .to_owned(),
        };
        if is.is_some() && min1 > 0 && (min1 > min0 || was.is_none()) {
            note.push_str(&format!(
                "; users with a stored assignment of a version below {min1} are excluded"
            ));
        }
        Some(StickyShift {
            before: was.is_some(),
            after: is.is_some(),
            bucket_version: (bv0, bv1),
            min_bucket_version: (min0, min1),
            note,
        })
    }

    /// Whether sticky assignment changes (on or off, or a version): worth reporting even when
    /// no share moves.
    fn changes(&self) -> bool {
        self.before != self.after
            || self.bucket_version.0 != self.bucket_version.1
            || self.min_bucket_version.0 != self.min_bucket_version.1
    }
}

/// A variant's share of the users who reach the rule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VariantShare {
    /// The variant.
    pub id: VariantId,
    /// Its name.
    pub name: String,
    /// Share before.
    pub before: f64,
    /// Share after.
    pub after: f64,
}

/// Compares two catalogs: `before` and `after` as data (entities), and as built snapshots
/// (experiments, with the ranges resolve uses). Keys are compared by record.
pub fn diff_catalogs(
    before: &CatalogData,
    after: &CatalogData,
    built_before: &Catalog,
    built_after: &Catalog,
) -> CatalogDiff {
    let mut diff = CatalogDiff::default();
    entities(before, after, &mut diff);
    diff.experiments = experiments(built_before, built_after, before, after);
    diff
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn entities(before: &CatalogData, after: &CatalogData, diff: &mut CatalogDiff) {
    let mut old = OldIndex::default();
    for ws in &before.workspaces {
        old.workspaces
            .insert(ws.id.to_string(), to_value(&(ws.id, &ws.name)));
        for app in &ws.apps {
            let mut shallow = app.clone();
            shallow.flows.clear();
            shallow.placements.clear();
            old.apps
                .insert(app.id.to_string(), to_value(&(ws.id, &shallow)));
            for flow in &app.flows {
                old.flows.insert(flow.id.to_string(), (app.id, flow));
                for v in &flow.versions {
                    old.versions
                        .insert(v.id.to_string(), to_value(&(flow.id, v)));
                }
            }
            for p in &app.placements {
                old.placements.insert((app.id, p.key.clone()), p);
            }
        }
    }
    for k in &before.api_keys {
        old.keys.insert(k.id.to_string(), to_value(k));
    }
    let mut push = |entity, id: String, name: String, change, detail: String| {
        diff.entities.push(EntityChange {
            entity,
            id,
            name,
            change,
            detail,
        });
    };
    for ws in &after.workspaces {
        let id = ws.id.to_string();
        match old.workspaces.get(&id) {
            None => push(
                "workspace",
                id,
                ws.name.clone(),
                Change::Added,
                String::new(),
            ),
            Some(v) if *v != to_value(&(ws.id, &ws.name)) => push(
                "workspace",
                id,
                ws.name.clone(),
                Change::Changed,
                String::new(),
            ),
            Some(_) => {}
        }
        for app in &ws.apps {
            let id = app.id.to_string();
            let mut shallow = app.clone();
            shallow.flows.clear();
            shallow.placements.clear();
            match old.apps.get(&id) {
                None => push("app", id, app.name.clone(), Change::Added, String::new()),
                Some(v) if *v != to_value(&(ws.id, &shallow)) => {
                    push("app", id, app.name.clone(), Change::Changed, String::new())
                }
                Some(_) => {}
            }
            for flow in &app.flows {
                flow_changes(&old, app.id, flow, &mut push);
            }
            for p in &app.placements {
                let id = format!("{}/{}", app.id, p.key);
                match old.placements.get(&(app.id, p.key.clone())) {
                    None => {
                        push("placement", id, p.key.clone(), Change::Added, String::new());
                        diff_rules(
                            app.id,
                            &PlacementData {
                                rules: Vec::new(),
                                default_flow_id: None,
                                key: p.key.clone(),
                            },
                            p,
                            &mut diff.placements,
                        );
                    }
                    Some(o) => {
                        analysis_changes(o, p, &mut push);
                        if without_analysis(o) != without_analysis(p) {
                            push(
                                "placement",
                                id,
                                p.key.clone(),
                                Change::Changed,
                                String::new(),
                            );
                            diff_rules(app.id, o, p, &mut diff.placements);
                        }
                    }
                }
            }
        }
    }
    for k in &after.api_keys {
        let id = k.id.to_string();
        match old.keys.get(&id) {
            None => push("key", id, k.name.clone(), Change::Added, String::new()),
            Some(v) if *v != to_value(k) => {
                push("key", id, k.name.clone(), Change::Changed, String::new())
            }
            Some(_) => {}
        }
    }
}

/// `placement` as JSON without its experiments' analysis settings.
fn without_analysis(placement: &PlacementData) -> Value {
    let mut placement = placement.clone();
    for rule in &mut placement.rules {
        if let Some(e) = &mut rule.experiment {
            e.analysis = None;
        }
    }
    to_value(&placement)
}

/// An `experiment` change for each experiment of `after` that was in `before` with other
/// analysis settings (D27), its detail naming each setting's old and new value.
fn analysis_changes(
    before: &PlacementData,
    after: &PlacementData,
    push: &mut impl FnMut(&'static str, String, String, Change, String),
) {
    let experiments = |p: &PlacementData| -> Vec<ExperimentData> {
        p.rules
            .iter()
            .filter_map(|r| r.experiment.clone())
            .collect()
    };
    let old = experiments(before);
    for e in experiments(after) {
        let Some(o) = old.iter().find(|o| o.id == e.id) else {
            continue;
        };
        if o.analysis == e.analysis {
            continue;
        }
        let (a, b) = (
            o.analysis.clone().unwrap_or_default(),
            e.analysis.clone().unwrap_or_default(),
        );
        let defaults = AnalysisSettings::default();
        let shown = |v: &Option<String>, default: &str| v.clone().unwrap_or(default.to_owned());
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_owned()
            } else {
                v.join(", ")
            }
        };
        let mut parts = Vec::new();
        let mut part = |name: &str, from: String, to: String| {
            if from != to {
                parts.push(format!("{name} {from} -> {to}"));
            }
        };
        part(
            "primary_metric",
            shown(&a.primary_metric, &defaults.primary_metric),
            shown(&b.primary_metric, &defaults.primary_metric),
        );
        part(
            "guardrail_metrics",
            list(&a.guardrail_metrics),
            list(&b.guardrail_metrics),
        );
        part(
            "sequential",
            a.sequential.unwrap_or(defaults.sequential).to_string(),
            b.sequential.unwrap_or(defaults.sequential).to_string(),
        );
        part(
            "minimum_users",
            a.minimum_users
                .unwrap_or(defaults.minimum_users)
                .to_string(),
            b.minimum_users
                .unwrap_or(defaults.minimum_users)
                .to_string(),
        );
        let detail = if parts.is_empty() {
            // Written out where it was left to the defaults, or the reverse: same settings.
            "analysis written out, same settings".to_owned()
        } else {
            format!("analysis: {}", parts.join("; "))
        };
        push(
            "experiment",
            e.id.to_string(),
            e.name.clone(),
            Change::Changed,
            detail,
        );
    }
}

/// The entities of the catalog before the change, by id.
#[derive(Default)]
struct OldIndex<'a> {
    workspaces: HashMap<String, Value>,
    apps: HashMap<String, Value>,
    flows: HashMap<String, (AppId, &'a FlowData)>,
    versions: HashMap<String, Value>,
    placements: HashMap<(AppId, String), &'a PlacementData>,
    keys: HashMap<String, Value>,
}

fn flow_changes(
    old: &OldIndex<'_>,
    app: AppId,
    flow: &FlowData,
    push: &mut impl FnMut(&'static str, String, String, Change, String),
) {
    let id = flow.id.to_string();
    match old.flows.get(&id) {
        None => push("flow", id, flow.name.clone(), Change::Added, String::new()),
        Some((old_app, o)) => {
            let published =
                |v: Option<u32>| v.map_or("none".to_owned(), |n| format!("version {n}"));
            match (o.published_version, flow.published_version) {
                (Some(_), None) => push(
                    "flow",
                    id.clone(),
                    flow.name.clone(),
                    Change::Unpublished,
                    format!(
                        "published {}, now none: its targets resolve to no flow",
                        published(o.published_version)
                    ),
                ),
                (a, b) if a != b => push(
                    "flow",
                    id.clone(),
                    flow.name.clone(),
                    Change::Published,
                    format!("{} -> {}", published(a), published(b)),
                ),
                _ => {}
            }
            if *old_app != app || o.name != flow.name {
                push(
                    "flow",
                    id,
                    flow.name.clone(),
                    Change::Changed,
                    String::new(),
                );
            }
        }
    }
    for v in &flow.versions {
        let id = v.id.to_string();
        let name = format!("{} version {}", flow.name, v.version);
        match old.versions.get(&id) {
            None => push("version", id, name, Change::Added, String::new()),
            Some(o) if *o != to_value(&(flow.id, v)) => {
                push("version", id, name, Change::Changed, String::new())
            }
            Some(_) => {}
        }
    }
}

fn diff_rules(
    app: AppId,
    before: &PlacementData,
    after: &PlacementData,
    out: &mut Vec<PlacementChange>,
) {
    let audience = |r: &RuleData| match &r.audience {
        None => Value::Object(Default::default()),
        Some(v) => v.clone(),
    };
    // Analysis settings (D27) change how results are read, not who sees what: an entity
    // change of their own, not the rule's target.
    let target = |r: &RuleData| {
        let mut experiment = r.experiment.clone();
        if let Some(e) = &mut experiment {
            e.analysis = None;
        }
        to_value(&(&r.flow_id, &experiment))
    };
    let mut rules = Vec::new();
    for i in 0..before.rules.len().max(after.rules.len()) {
        let change = match (before.rules.get(i), after.rules.get(i)) {
            (None, Some(_)) => vec!["added"],
            (Some(_), None) => vec!["removed"],
            (Some(a), Some(b)) => {
                let mut parts = Vec::new();
                if audience(a) != audience(b) {
                    parts.push("audience");
                }
                if target(a) != target(b) {
                    parts.push("target");
                }
                match (a.enabled, b.enabled) {
                    (true, false) => parts.push("off"),
                    (false, true) => parts.push("on"),
                    _ => {}
                }
                parts
            }
            (None, None) => Vec::new(),
        };
        if !change.is_empty() {
            rules.push(RuleChange { rule: i, change });
        }
    }
    let default_changed = before.default_flow_id != after.default_flow_id;
    if !rules.is_empty() || default_changed {
        out.push(PlacementChange {
            app_id: app,
            key: after.key.clone(),
            rules_before: before.rules.len(),
            rules_after: after.rules.len(),
            rules,
            default_changed,
        });
    }
}

/// Where an experiment's rule is, with its audience as written and whether it is on.
struct Located<'c> {
    experiment: &'c Experiment,
    app: AppId,
    key: &'c str,
    rule: usize,
    audience: &'c Value,
    enabled: bool,
}

fn locate(catalog: &Catalog) -> HashMap<ExperimentId, Located<'_>> {
    let mut found = HashMap::new();
    for app in catalog.apps.values() {
        for placement in app.placements.values() {
            for (rule, r) in placement.rules.iter().enumerate() {
                if let Target::Experiment(e) = &r.target {
                    found.insert(
                        e.id,
                        Located {
                            experiment: e,
                            app: app.id,
                            key: &placement.key,
                            rule,
                            audience: r.audience.source(),
                            enabled: r.enabled,
                        },
                    );
                }
            }
        }
    }
    found
}

/// The order experiments appear in a catalog's data, for a stable report.
fn data_order(data: &CatalogData, order: &mut Vec<ExperimentId>) {
    for ws in &data.workspaces {
        for app in &ws.apps {
            for p in &app.placements {
                for r in &p.rules {
                    if let Some(e) = &r.experiment {
                        if !order.contains(&e.id) {
                            order.push(e.id);
                        }
                    }
                }
            }
        }
    }
}

fn experiments(
    before: &Catalog,
    after: &Catalog,
    data_before: &CatalogData,
    data_after: &CatalogData,
) -> Vec<ExperimentShift> {
    let old = locate(before);
    let new = locate(after);
    let mut order = Vec::new();
    data_order(data_after, &mut order);
    data_order(data_before, &mut order);
    let mut shifts = Vec::new();
    for id in order {
        let (o, n) = (old.get(&id), new.get(&id));
        let (Some(any), other) = (n.or(o), o.and(n)) else {
            continue;
        };
        let shift = shift(
            o.map(|l| (l.experiment, l.enabled)),
            n.map(|l| (l.experiment, l.enabled)),
        );
        let sticky = StickyShift::of(o.map(|l| l.experiment), n.map(|l| l.experiment));
        let moves = shift.change_variant != 0.0 || shift.enter != 0.0 || shift.leave != 0.0;
        if !moves && !sticky.as_ref().is_some_and(StickyShift::changes) {
            continue;
        }
        let rule_changed = other.is_some_and(|_| {
            let (o, n) = (
                o.map(|l| (l.app, l.key, l.rule, l.audience)),
                n.map(|l| (l.app, l.key, l.rule, l.audience)),
            );
            o != n
        });
        shifts.push(ExperimentShift {
            id,
            name: any.experiment.name.clone(),
            app_id: any.app,
            placement_key: any.key.to_owned(),
            status_before: o.map(|l| l.experiment.status),
            status_after: n.map(|l| l.experiment.status),
            rule_changed,
            sticky,
            rule_enabled: (o.is_none_or(|l| l.enabled), n.is_none_or(|l| l.enabled)),
            ..shift
        });
    }
    shifts
}

/// The variant index (into the experiment's list) a user in hash cell `k` is assigned, or
/// `None` outside every range.
fn cell(e: &Experiment, k: u32) -> Option<usize> {
    choose_variation(f64::from(k) / f64::from(HASH_VALUES), &e.ranges)
}

/// Hash cells, counted: each share is a count over `total` cells, divided once at the end so
/// that exact fractions (2,000 of 10,000) come out exact.
struct Counts<K> {
    cells: BTreeMap<K, u64>,
    total: u64,
}

/// Cells of the assignment hash by (variant before, variant after).
fn variant_joint(
    old: Option<&Experiment>,
    new: Option<&Experiment>,
) -> Counts<(Option<usize>, Option<usize>)> {
    let marginal = |e: Option<&Experiment>| {
        let mut m: BTreeMap<Option<usize>, u64> = BTreeMap::new();
        for k in 0..HASH_VALUES {
            *m.entry(e.and_then(|e| cell(e, k))).or_default() += 1;
        }
        m
    };
    let mut cells = BTreeMap::new();
    match (old, new) {
        // One hash: the same seed gives every user the same value before and after.
        (Some(a), Some(b)) if a.seed == b.seed && a.hash_version == b.hash_version => {
            for k in 0..HASH_VALUES {
                *cells.entry((cell(a, k), cell(b, k))).or_default() += 1;
            }
            Counts {
                cells,
                total: u64::from(HASH_VALUES),
            }
        }
        // Two independent hashes (another seed or hash version, or only one side exists).
        _ => {
            for (a, ca) in marginal(old) {
                for (b, cb) in marginal(new) {
                    *cells.entry((a, b)).or_default() += ca * cb;
                }
            }
            Counts {
                cells,
                total: u64::from(HASH_VALUES) * u64::from(HASH_VALUES),
            }
        }
    }
}

/// Cells of the namespace hash by (inside before, inside after), where inside means running
/// in a rule that is on, and inside the namespace, if any. Each experiment comes with whether
/// its rule is on.
fn namespace_joint(
    old: Option<(&Experiment, bool)>,
    new: Option<(&Experiment, bool)>,
) -> Counts<(bool, bool)> {
    let inside = |e: Option<(&Experiment, bool)>, j: u32| match e {
        Some((e, true)) if e.status == ExperimentStatus::Running => e
            .namespace
            .as_ref()
            .is_none_or(|ns| ns.includes(f64::from(j) / f64::from(NAMESPACE_VALUES))),
        _ => false,
    };
    let same_hash = match (
        old.and_then(|(e, _)| e.namespace.as_ref()),
        new.and_then(|(e, _)| e.namespace.as_ref()),
    ) {
        (Some(a), Some(b)) => a.id == b.id,
        // Without a namespace the check does not read the hash.
        _ => true,
    };
    let mut cells = BTreeMap::new();
    if same_hash {
        for j in 0..NAMESPACE_VALUES {
            *cells.entry((inside(old, j), inside(new, j))).or_default() += 1;
        }
        return Counts {
            cells,
            total: u64::from(NAMESPACE_VALUES),
        };
    }
    let count = |e| (0..NAMESPACE_VALUES).filter(|&j| inside(e, j)).count() as u64;
    let all = u64::from(NAMESPACE_VALUES);
    let (a, b) = (count(old), count(new));
    for (x, y, c) in [
        (true, true, a * b),
        (true, false, a * (all - b)),
        (false, true, (all - a) * b),
        (false, false, (all - a) * (all - b)),
    ] {
        cells.insert((x, y), c);
    }
    Counts {
        cells,
        total: all * all,
    }
}

fn variant_at(e: Option<&Experiment>, i: Option<usize>) -> Option<&super::Variant> {
    i.and_then(|i| e.and_then(|e| e.variants.get(i)))
}

/// The shares of users who keep, change, gain or lose a variant; each experiment comes with
/// whether its rule is on.
fn shift(old: Option<(&Experiment, bool)>, new: Option<(&Experiment, bool)>) -> ExperimentShift {
    let namespaces = namespace_joint(old, new);
    let (old, new) = (old.map(|(e, _)| e), new.map(|(e, _)| e));
    let variants = variant_joint(old, new);
    let mut s = ExperimentShift {
        id: ExperimentId(uuid::Uuid::nil()),
        name: String::new(),
        app_id: AppId(uuid::Uuid::nil()),
        placement_key: String::new(),
        status_before: None,
        status_after: None,
        keep_variant: 0.0,
        change_variant: 0.0,
        enter: 0.0,
        leave: 0.0,
        outside: 0.0,
        variants: Vec::new(),
        rule_changed: false,
        sticky: None,
        rule_enabled: (true, true),
    };
    // Counts over namespace cells x assignment cells; one division per share at the end.
    let mut keep = 0u64;
    let mut change = 0u64;
    let mut enter = 0u64;
    let mut leave = 0u64;
    let mut outside = 0u64;
    let mut per_variant: Vec<(VariantId, String, u64, u64)> = Vec::new();
    let mut count_variant = |v: &super::Variant, c: u64, after: bool| {
        let i = match per_variant.iter().position(|s| s.0 == v.id) {
            Some(i) => i,
            None => {
                per_variant.push((v.id, v.name.clone(), 0, 0));
                per_variant.len() - 1
            }
        };
        let slot = &mut per_variant[i];
        if after {
            slot.1 = v.name.clone();
            slot.3 += c;
        } else {
            slot.2 += c;
        }
    };
    for (&(x, y), &cn) in &namespaces.cells {
        for (&(a, b), &cv) in &variants.cells {
            let c = cn * cv;
            if c == 0 {
                continue;
            }
            let was = variant_at(old, a.filter(|_| x));
            let is = variant_at(new, b.filter(|_| y));
            match (was, is) {
                (Some(a), Some(b)) if a.id == b.id => keep += c,
                (Some(_), Some(_)) => change += c,
                (None, Some(_)) => enter += c,
                (Some(_), None) => leave += c,
                (None, None) => outside += c,
            }
            if let Some(v) = was {
                count_variant(v, c, false);
            }
            if let Some(v) = is {
                count_variant(v, c, true);
            }
        }
    }
    let total = (namespaces.total * variants.total) as f64;
    let share = |c: u64| c as f64 / total;
    s.keep_variant = share(keep);
    s.change_variant = share(change);
    s.enter = share(enter);
    s.leave = share(leave);
    s.outside = share(outside);
    let mut shares: Vec<VariantShare> = per_variant
        .into_iter()
        .map(|(id, name, before, after)| VariantShare {
            id,
            name,
            before: share(before),
            after: share(after),
        })
        .collect();
    // Variants in list order after the change, then those removed.
    if let Some(n) = new {
        shares.sort_by_key(|s| {
            n.variants
                .iter()
                .position(|v| v.id == s.id)
                .unwrap_or(usize::MAX)
        });
    }
    s.variants = shares;
    s
}
