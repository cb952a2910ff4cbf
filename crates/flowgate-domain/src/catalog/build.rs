//! Validation and compilation of [`CatalogData`] into a [`Catalog`]. Every problem is collected
//! with the JSON pointer of the offending value, so an import (D13) can list them all at once.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use super::data::*;
use super::{
    AnalysisSettings, App, Catalog, Experiment, Flow, FlowTarget, Placement, PublishedVersion,
    Rule, StickySettings, Target, Variant, VersionRef, Workspace,
};
use crate::bucketing::{bucket_ranges, Namespace};
use crate::conditions::{Condition, Patterns, SavedGroups};
use crate::ids::{AppId, FlowId, WorkspaceId};
use crate::placement::validate_placement_key;
use crate::shown::{shown, shown_str};
use crate::FastMap;

/// One problem in catalog data: where (RFC 6901 JSON pointer into the data) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// JSON pointer of the offending value, e.g. `/workspaces/0/apps/1/placements/2/key`.
    pub pointer: String,
    /// What is wrong, in a sentence.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}",
            if self.pointer.is_empty() {
                "/"
            } else {
                &self.pointer
            },
            self.message
        )
    }
}

/// Catalog data that cannot be served: every problem found, not just the first.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid catalog: {} problem(s), first: {}", problems.len(), problems.first().map(ToString::to_string).unwrap_or_default())]
pub struct CatalogError {
    /// The problems, in document order.
    pub problems: Vec<Problem>,
}

/// Escapes one reference token of a JSON pointer (RFC 6901: `~` → `~0`, `/` → `~1`).
pub(super) fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

struct Problems(Vec<Problem>);

impl Problems {
    fn push(&mut self, pointer: impl Into<String>, message: impl Into<String>) {
        self.0.push(Problem {
            pointer: pointer.into(),
            message: message.into(),
        });
    }
}

fn check_url(problems: &mut Problems, pointer: String, url: &str) {
    if !(url.starts_with("https://") || url.starts_with("http://")) || url.len() > 2048 {
        problems.push(
            pointer,
            format!(
                "must be an http(s) URL of at most 2048 characters, not {}",
                shown_str(url)
            ),
        );
    }
}

fn check_name(problems: &mut Problems, pointer: String, name: &str) {
    if name.trim().is_empty() || name.chars().count() > 256 {
        problems.push(
            pointer,
            format!(
                "must be a non-blank name of at most 256 characters, not {}",
                shown_str(name)
            ),
        );
    }
}

impl Catalog {
    /// Validates `data` whole and compiles it into a snapshot. On any problem nothing is built
    /// and every problem is returned.
    pub fn build(data: CatalogData) -> Result<Catalog, CatalogError> {
        let mut p = Problems(Vec::new());
        let mut seen_ids: HashSet<uuid::Uuid> = HashSet::new();
        // One set for the whole build: a pattern repeated across rules compiles once.
        let mut patterns = Patterns::new();
        let mut catalog = Catalog {
            revision: data.revision,
            ..Catalog::empty()
        };

        for (wi, ws) in data.workspaces.into_iter().enumerate() {
            let wp = format!("/workspaces/{wi}");
            if !seen_ids.insert(ws.id.0) {
                p.push(
                    format!("{wp}/id"),
                    format!("id {} is used more than once", ws.id),
                );
            }
            check_name(&mut p, format!("{wp}/name"), &ws.name);
            let mut app_ids = Vec::with_capacity(ws.apps.len());
            for (ai, app) in ws.apps.into_iter().enumerate() {
                let ap = format!("{wp}/apps/{ai}");
                app_ids.push(app.id);
                if let Some(built) = build_app(
                    &mut p,
                    &mut seen_ids,
                    &mut catalog,
                    &mut patterns,
                    ws.id,
                    &ap,
                    app,
                ) {
                    catalog.apps.insert(built.id, built);
                }
            }
            catalog.workspaces.insert(
                ws.id,
                Workspace {
                    id: ws.id,
                    name: ws.name,
                    app_ids,
                },
            );
        }

        let mut digests = HashSet::new();
        for (ki, key) in data.api_keys.into_iter().enumerate() {
            let kp = format!("/api_keys/{ki}");
            if !catalog.workspaces.contains_key(&key.workspace_id) {
                p.push(
                    format!("{kp}/workspace_id"),
                    format!("workspace {} does not exist", key.workspace_id),
                );
            }
            if !digests.insert(key.digest) {
                p.push(
                    format!("{kp}/digest"),
                    "the same key is listed more than once",
                );
            }
            if !key.is_revoked() {
                catalog.keys.insert(key.digest, key);
            }
        }

        if p.0.is_empty() {
            Ok(catalog)
        } else {
            Err(CatalogError { problems: p.0 })
        }
    }
}

fn build_app(
    p: &mut Problems,
    seen_ids: &mut HashSet<uuid::Uuid>,
    catalog: &mut Catalog,
    patterns: &mut Patterns,
    workspace_id: WorkspaceId,
    ap: &str,
    app: AppData,
) -> Option<App> {
    let before = p.0.len();
    if !seen_ids.insert(app.id.0) {
        p.push(
            format!("{ap}/id"),
            format!("id {} is used more than once", app.id),
        );
    }
    check_name(p, format!("{ap}/name"), &app.name);
    check_url(p, format!("{ap}/media_base_url"), &app.media_base_url);
    check_url(p, format!("{ap}/icon_base_url"), &app.icon_base_url);
    let apple_environments = build_apple_fields(
        p,
        ap,
        app.apple_bundle_id.as_deref(),
        &app.apple_environments,
    );
    check_saved_groups(p, ap, &app.saved_groups);
    // The pins are read from the placements before the flows are built, since the flows build
    // the pinned versions beside the published ones.
    let pins = pinned_versions(&app.placements);
    let flows = build_flows(p, seen_ids, catalog, ap, app.id, app.flows, pins);
    let placements = build_placements(p, seen_ids, patterns, ap, app.placements, &flows);

    (p.0.len() == before).then(|| App {
        id: app.id,
        workspace_id,
        name: app.name,
        media_base_url: app.media_base_url,
        icon_base_url: app.icon_base_url,
        cache_ttl_seconds: app.cache_ttl_seconds,
        apple_bundle_id: app.apple_bundle_id,
        apple_environments,
        saved_groups: SavedGroups::new(app.saved_groups),
        flows: flows.flows,
        sticky: placements.values().any(|p| p.sticky),
        placements,
    })
}

/// An app's saved groups (D4): each with a non-empty id and only plain values.
fn check_saved_groups(
    p: &mut Problems,
    ap: &str,
    saved_groups: &std::collections::BTreeMap<String, Vec<serde_json::Value>>,
) {
    for (id, values) in saved_groups {
        let pointer = format!("{ap}/saved_groups/{}", escape(id));
        if id.is_empty() {
            p.push(
                pointer.clone(),
                "a saved group needs a non-empty id, not \"\"",
            );
        }
        for (i, v) in values.iter().enumerate() {
            if v.is_object() || v.is_array() {
                p.push(
                    format!("{pointer}/{i}"),
                    format!(
                        "a saved group holds plain values (strings, numbers, booleans), not {}",
                        shown(v)
                    ),
                );
            }
        }
    }
}

/// The versions that the app's variants show whether published or not (D29), so that each is
/// built once.
fn pinned_versions(placements: &[PlacementData]) -> HashSet<(FlowId, u32)> {
    placements
        .iter()
        .flat_map(|placement| &placement.rules)
        .filter_map(|rule| rule.experiment.as_ref())
        .flat_map(|experiment| &experiment.variants)
        .filter_map(|v| Some((v.flow_id?, v.flow_version?)))
        .collect()
}

/// An app's built flows, and the versions its variants pin (D29), for the placements' targets.
struct AppFlows {
    flows: HashMap<FlowId, Flow>,
    pinned: HashMap<(FlowId, u32), Arc<PublishedVersion>>,
}

impl AppFlows {
    /// The target of a rule, default or variant that shows flow `id`, which must be a flow of
    /// this app; a problem at `pointer` when it is not.
    fn target(&self, p: &mut Problems, pointer: String, id: FlowId) -> FlowTarget {
        match self.flows.get(&id) {
            Some(flow) => FlowTarget {
                flow_id: id,
                published: flow.published.clone(),
            },
            None => {
                p.push(pointer, format!("flow {id} is not a flow of this app"));
                FlowTarget {
                    flow_id: id,
                    published: None,
                }
            }
        }
    }
}

/// The versions of one app that variants pin: those wanted (read from the placements) and
/// those built so far.
struct Pins {
    wanted: HashSet<(FlowId, u32)>,
    built: HashMap<(FlowId, u32), Arc<PublishedVersion>>,
}

/// An app's flows, each checked and built with its published and pinned versions.
fn build_flows(
    p: &mut Problems,
    seen_ids: &mut HashSet<uuid::Uuid>,
    catalog: &mut Catalog,
    ap: &str,
    app_id: AppId,
    flows: Vec<FlowData>,
    wanted: HashSet<(FlowId, u32)>,
) -> AppFlows {
    let mut built: HashMap<FlowId, Flow> = HashMap::with_capacity(flows.len());
    let mut pins = Pins {
        wanted,
        built: HashMap::new(),
    };
    for (fi, flow) in flows.into_iter().enumerate() {
        let fp = format!("{ap}/flows/{fi}");
        let flow = build_flow(p, seen_ids, catalog, &fp, app_id, flow, &mut pins);
        // A flow id seen twice is reported as a duplicate id already; the later flow wins.
        built.insert(flow.id, flow);
    }
    AppFlows {
        flows: built,
        pinned: pins.built,
    }
}

/// One flow: its versions checked, each listed in `catalog.versions`, and the published and
/// pinned ones built.
fn build_flow(
    p: &mut Problems,
    seen_ids: &mut HashSet<uuid::Uuid>,
    catalog: &mut Catalog,
    fp: &str,
    app_id: AppId,
    flow: FlowData,
    pins: &mut Pins,
) -> Flow {
    if !seen_ids.insert(flow.id.0) {
        p.push(
            format!("{fp}/id"),
            format!("id {} is used more than once", flow.id),
        );
    }
    check_name(p, format!("{fp}/name"), &flow.name);
    let mut numbers = HashSet::new();
    let mut published = None;
    for (vi, v) in flow.versions.into_iter().enumerate() {
        let vp = format!("{fp}/versions/{vi}");
        check_version(p, seen_ids, &vp, &v, &mut numbers);
        catalog.versions.insert(
            v.id,
            VersionRef {
                app_id,
                flow_id: flow.id,
                version: v.version,
            },
        );
        let key = (flow.id, v.version);
        let is_published = flow.published_version == Some(v.version);
        let is_pinned = pins.wanted.contains(&key);
        if is_published || is_pinned {
            if let Some(built) = build_version(p, &vp, flow.id, v) {
                if is_pinned {
                    pins.built.insert(key, Arc::clone(&built));
                }
                if is_published {
                    published = Some(built);
                }
            }
        }
    }
    if let Some(n) = flow.published_version {
        if !numbers.contains(&n) {
            p.push(
                format!("{fp}/published_version"),
                format!("version {n} does not exist in this flow"),
            );
        }
    }
    Flow {
        id: flow.id,
        name: flow.name,
        published,
    }
}

/// One version of a flow: a new id, a number >= 1 not seen in the flow yet (added to
/// `numbers`), a schema version >= 1, a JSON object for a schema, and well-formed fonts.
fn check_version(
    p: &mut Problems,
    seen_ids: &mut HashSet<uuid::Uuid>,
    vp: &str,
    v: &FlowVersionData,
    numbers: &mut HashSet<u32>,
) {
    if !seen_ids.insert(v.id.0) {
        p.push(
            format!("{vp}/id"),
            format!("id {} is used more than once", v.id),
        );
    }
    if v.version == 0 {
        p.push(format!("{vp}/version"), "must be an integer >= 1, not 0");
    } else if !numbers.insert(v.version) {
        p.push(
            format!("{vp}/version"),
            format!("version {} appears twice in this flow", v.version),
        );
    }
    if v.schema_version == 0 {
        p.push(
            format!("{vp}/schema_version"),
            "must be an integer >= 1, not 0",
        );
    }
    if !v.flow_schema.get().trim_start().starts_with('{') {
        let found = serde_json::from_str::<serde_json::Value>(v.flow_schema.get())
            .map_or_else(|_| v.flow_schema.get().to_owned(), |value| shown(&value));
        p.push(
            format!("{vp}/flow_schema"),
            format!("must be a JSON object, not {found}"),
        );
    }
    for (i, font) in v.fonts.iter().enumerate() {
        let fontp = format!("{vp}/fonts/{i}");
        if !(100..=900).contains(&font.weight) {
            p.push(
                format!("{fontp}/weight"),
                format!("must be an integer from 100 to 900, not {}", font.weight),
            );
        }
        check_name(p, format!("{fontp}/family"), &font.family);
        check_url(p, format!("{fontp}/url"), &font.url);
    }
}

/// A version as resolve serves it, its fonts serialised once; a problem when they cannot be.
fn build_version(
    p: &mut Problems,
    vp: &str,
    flow_id: FlowId,
    v: FlowVersionData,
) -> Option<Arc<PublishedVersion>> {
    match serde_json::value::to_raw_value(&v.fonts) {
        Ok(fonts_json) => Some(Arc::new(PublishedVersion {
            id: v.id,
            flow_id,
            version: v.version,
            schema_version: v.schema_version,
            flow_schema: v.flow_schema,
            fonts: v.fonts,
            fonts_json,
        })),
        Err(e) => {
            p.push(format!("{vp}/fonts"), format!("cannot be serialised: {e}"));
            None
        }
    }
}

/// An app's placements, keyed by their key, which must be unique in the app.
fn build_placements(
    p: &mut Problems,
    seen_ids: &mut HashSet<uuid::Uuid>,
    patterns: &mut Patterns,
    ap: &str,
    data: Vec<PlacementData>,
    flows: &AppFlows,
) -> FastMap<String, Placement> {
    let mut placements = FastMap::with_capacity_and_hasher(data.len(), Default::default());
    for (pi, placement) in data.into_iter().enumerate() {
        let pp = format!("{ap}/placements/{pi}");
        let placement = build_placement(p, seen_ids, patterns, &pp, placement, flows);
        let key = placement.key.clone();
        if placements.contains_key(&key) {
            p.push(
                format!("{pp}/key"),
                format!("placement key `{key}` appears twice in this app"),
            );
        }
        placements.insert(key, placement);
    }
    placements
}

/// One placement: its key, default flow and rules.
fn build_placement(
    p: &mut Problems,
    seen_ids: &mut HashSet<uuid::Uuid>,
    patterns: &mut Patterns,
    pp: &str,
    placement: PlacementData,
    flows: &AppFlows,
) -> Placement {
    if let Err(e) = validate_placement_key(&placement.key) {
        p.push(
            format!("{pp}/key"),
            format!("{e}, not {}", shown_str(&placement.key)),
        );
    }
    let default = placement
        .default_flow_id
        .map(|id| flows.target(p, format!("{pp}/default_flow_id"), id));
    let mut rules = Vec::with_capacity(placement.rules.len());
    for (ri, rule) in placement.rules.into_iter().enumerate() {
        let rp = format!("{pp}/rules/{ri}");
        if let Some(rule) = build_rule(p, seen_ids, patterns, &rp, rule, flows) {
            rules.push(rule);
        }
    }
    Placement {
        key: placement.key,
        default,
        sticky: rules
            .iter()
            .any(|r| r.enabled && matches!(&r.target, Target::Experiment(e) if e.sticky.is_some())),
        rules,
    }
}

/// One rule: its audience and exactly one target. Every part of a rule is checked, so all of
/// its problems are listed at once; `None` when there is any.
fn build_rule(
    p: &mut Problems,
    seen_ids: &mut HashSet<uuid::Uuid>,
    patterns: &mut Patterns,
    rp: &str,
    rule: RuleData,
    flows: &AppFlows,
) -> Option<Rule> {
    let audience = build_audience(p, patterns, rp, rule.audience.as_ref());
    if rule.flow_id.is_some() && rule.experiment.is_some() {
        p.push(
            rp.to_owned(),
            "a rule has exactly one target: flow_id or experiment, not both",
        );
    }
    if rule.flow_id.is_none() && rule.experiment.is_none() {
        p.push(
            rp.to_owned(),
            "a rule needs a target: flow_id or experiment",
        );
    }
    let flow = rule
        .flow_id
        .map(|id| flows.target(p, format!("{rp}/flow_id"), id));
    let experiment = rule.experiment.and_then(|exp| {
        let ep = format!("{rp}/experiment");
        build_experiment(p, seen_ids, &ep, exp, flows)
    });
    let target = match (flow, experiment) {
        (Some(flow), None) => Target::Flow(flow),
        (None, Some(e)) => Target::Experiment(Box::new(e)),
        // Reported above: the app is not built.
        _ => return None,
    };
    // A rule that is off is checked and compiled all the same: turning it on is a change of
    // one member, which must not make an invalid catalog.
    Some(Rule {
        enabled: rule.enabled,
        audience: audience?,
        target,
    })
}

/// A rule's audience condition (D4), compiled; absent, it matches everyone. `None` when it
/// does not compile, its problems pushed under the rule's pointer.
fn build_audience(
    p: &mut Problems,
    patterns: &mut Patterns,
    rp: &str,
    audience: Option<&serde_json::Value>,
) -> Option<Condition> {
    match audience {
        None => Some(Condition::compile_lenient(&serde_json::Value::Object(
            Default::default(),
        ))),
        Some(doc) => match Condition::compile_with(doc, patterns) {
            Ok(c) => Some(c),
            Err(errors) => {
                for e in errors {
                    p.push(format!("{rp}/audience{}", e.pointer), e.message);
                }
                None
            }
        },
    }
}

fn build_experiment(
    p: &mut Problems,
    seen_ids: &mut HashSet<uuid::Uuid>,
    ep: &str,
    exp: ExperimentData,
    flows: &AppFlows,
) -> Option<Experiment> {
    let before = p.0.len();
    if !seen_ids.insert(exp.id.0) {
        p.push(
            format!("{ep}/id"),
            format!("id {} is used more than once", exp.id),
        );
    }
    check_name(p, format!("{ep}/name"), &exp.name);
    let coverage = build_coverage(p, ep, exp.coverage);
    check_seed(p, ep, exp.seed.as_deref());
    let namespace = exp.namespace.map(|ns| build_namespace(p, ep, ns));
    let hash_version = build_hash_version(p, ep, exp.hash_version);
    check_sticky_fields(
        p,
        ep,
        exp.bucket_version,
        exp.min_bucket_version,
        exp.fallback_attribute.as_deref(),
    );
    let analysis = build_analysis(p, &format!("{ep}/analysis"), exp.analysis.as_ref());
    let variants = build_variants(p, seen_ids, ep, exp.variants, flows);
    check_schedule(p, ep, exp.starts_at, exp.ends_at);
    if p.0.len() != before {
        return None;
    }
    // D5: weights normalised by their sum, then GrowthBook's getBucketRanges.
    let weights: Vec<f64> = variants.iter().map(|v| v.weight).collect();
    let ranges = bucket_ranges(variants.len(), coverage, Some(&weights));
    let sticky = exp.sticky.then(|| StickySettings {
        bucket_version: exp.bucket_version,
        min_bucket_version: exp.min_bucket_version,
        fallback_attribute: exp.fallback_attribute,
        key: exp.id.to_string(),
        variant_keys: variants.iter().map(|v| v.id.to_string()).collect(),
    });
    Some(Experiment {
        id: exp.id,
        hash_version,
        sticky,
        analysis,
        starts_at: exp.starts_at,
        ends_at: exp.ends_at,
        seed: exp.seed.unwrap_or_else(|| exp.id.to_string()),
        name: exp.name,
        status: exp.status,
        coverage,
        namespace,
        variants,
        ranges,
    })
}

/// An experiment's coverage, 1.0 when unset; a problem when it is not from 0.0 to 1.0.
fn build_coverage(p: &mut Problems, ep: &str, coverage: Option<f64>) -> f64 {
    let coverage = coverage.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&coverage) {
        p.push(
            format!("{ep}/coverage"),
            format!("must be a number from 0.0 to 1.0, not {coverage}"),
        );
    }
    coverage
}

/// An experiment's own hashing seed, when it has one: 1 to 256 bytes.
fn check_seed(p: &mut Problems, ep: &str, seed: Option<&str>) {
    if let Some(seed) = seed {
        if seed.is_empty() || seed.len() > 256 {
            p.push(
                format!("{ep}/seed"),
                format!(
                    "must be 1 to 256 bytes, not {} bytes: {}",
                    seed.len(),
                    shown_str(seed)
                ),
            );
        }
    }
}

/// An experiment's namespace `[id, start, end]`: a non-empty id and a range within 0 to 1.
fn build_namespace(p: &mut Problems, ep: &str, (id, start, end): (String, f64, f64)) -> Namespace {
    if id.is_empty() || !(0.0..=1.0).contains(&start) || !(0.0..=1.0).contains(&end) || start > end
    {
        p.push(
            format!("{ep}/namespace"),
            format!(
                "must be [id, start, end] with a non-empty id and 0 <= start <= end <= 1, not [{}, {start}, {end}]",
                shown_str(&id)
            ),
        );
    }
    Namespace { id, start, end }
}

/// An experiment's hashing version, 2 when unset; a problem when it is not 1 or 2.
fn build_hash_version(p: &mut Problems, ep: &str, hash_version: Option<u32>) -> u32 {
    let hash_version = hash_version.unwrap_or(2);
    if !(1..=2).contains(&hash_version) {
        p.push(
            format!("{ep}/hash_version"),
            format!("must be 1 or 2, not {hash_version}"),
        );
    }
    hash_version
}

/// The members of a sticky experiment (D23): a minimum bucket version not above the bucket
/// version, and a well-formed fallback attribute.
fn check_sticky_fields(
    p: &mut Problems,
    ep: &str,
    bucket_version: u32,
    min_bucket_version: u32,
    fallback_attribute: Option<&str>,
) {
    if min_bucket_version > bucket_version {
        p.push(
            format!("{ep}/min_bucket_version"),
            format!(
                "must not exceed bucket_version ({bucket_version}), not {min_bucket_version}: every user would be assigned and then excluded",
            ),
        );
    }
    if let Some(attribute) = fallback_attribute {
        check_attribute_name(p, format!("{ep}/fallback_attribute"), attribute);
    }
}

/// An experiment's variants: at least one, their weights summing to a positive finite number,
/// each weight normalised by that sum.
fn build_variants(
    p: &mut Problems,
    seen_ids: &mut HashSet<uuid::Uuid>,
    ep: &str,
    data: Vec<VariantData>,
    flows: &AppFlows,
) -> Vec<Variant> {
    if data.is_empty() {
        p.push(
            format!("{ep}/variants"),
            "an experiment needs at least one variant",
        );
    }
    let total: f64 = data.iter().map(|v| v.weight).sum();
    if !(total.is_finite() && total > 0.0) {
        p.push(
            format!("{ep}/variants"),
            format!("variant weights must sum to a positive finite number, not {total}"),
        );
    }
    let mut variants = Vec::with_capacity(data.len());
    for (vi, v) in data.into_iter().enumerate() {
        let vp = format!("{ep}/variants/{vi}");
        variants.push(build_variant(p, seen_ids, &vp, v, total, flows));
    }
    variants
}

/// One variant: a new id, a name, a finite weight >= 0 (divided by `total`), and the flow it
/// shows, with the version it pins (D29) when it names one.
fn build_variant(
    p: &mut Problems,
    seen_ids: &mut HashSet<uuid::Uuid>,
    vp: &str,
    v: VariantData,
    total: f64,
    flows: &AppFlows,
) -> Variant {
    if !seen_ids.insert(v.id.0) {
        p.push(
            format!("{vp}/id"),
            format!("id {} is used more than once", v.id),
        );
    }
    check_name(p, format!("{vp}/name"), &v.name);
    if !(v.weight.is_finite() && v.weight >= 0.0) {
        p.push(
            format!("{vp}/weight"),
            format!("must be a finite number >= 0, not {}", v.weight),
        );
    }
    let mut flow = v
        .flow_id
        .map(|id| flows.target(p, format!("{vp}/flow_id"), id));
    if let Some(version) = v.flow_version {
        match flow.as_mut() {
            None => p.push(
                format!("{vp}/flow_version"),
                format!("a holdout (no flow_id) shows no flow version, not {version}"),
            ),
            Some(flow) => match flows.pinned.get(&(flow.flow_id, version)) {
                Some(shown) => flow.published = Some(Arc::clone(shown)),
                None => p.push(
                    format!("{vp}/flow_version"),
                    format!("flow {} has no version {version}", flow.flow_id),
                ),
            },
        }
    }
    Variant {
        id: v.id,
        name: v.name,
        weight: v.weight / total,
        flow,
    }
}

/// An experiment's schedule: when both ends are set, it ends after it starts.
fn check_schedule(
    p: &mut Problems,
    ep: &str,
    starts_at: Option<time::OffsetDateTime>,
    ends_at: Option<time::OffsetDateTime>,
) {
    if let (Some(starts), Some(ends)) = (starts_at, ends_at) {
        if ends <= starts {
            p.push(
                format!("{ep}/ends_at"),
                format!(
                    "must be after starts_at ({}), not {}",
                    crate::text::rfc3339(starts),
                    crate::text::rfc3339(ends)
                ),
            );
        }
    }
}

/// Whether `name` is a metric results read (an SDK event type, a store metric or `revenue`);
/// when not, every name that is, for the message.
pub fn check_metric(name: &str) -> Result<(), String> {
    let store = super::STORE_METRICS;
    let known = name == AnalysisSettings::REVENUE
        || store.contains(&name)
        || crate::events::EventType::SDK_TYPES
            .iter()
            .any(|t| t.as_str() == name);
    if known {
        return Ok(());
    }
    let names: Vec<&str> = crate::events::EventType::SDK_TYPES
        .iter()
        .map(|t| t.as_str())
        .chain([AnalysisSettings::REVENUE])
        .chain(store)
        .collect();
    Err(names.join(", "))
}

/// Most guardrail metrics an experiment may name.
const MAX_GUARDRAILS: usize = 20;

/// An experiment's `analysis` (D27), its defaults filled in: every metric an SDK event type
/// or `revenue`, no guardrail twice nor the primary metric again, `minimum_users` at least 1.
fn build_analysis(p: &mut Problems, ap: &str, data: Option<&AnalysisData>) -> AnalysisSettings {
    let mut settings = AnalysisSettings::default();
    let Some(data) = data else {
        return settings;
    };
    let metric = |p: &mut Problems, pointer: String, name: &str| {
        if let Err(names) = check_metric(name) {
            p.push(
                pointer,
                format!("{} is not a metric: one of {names}", shown_str(name)),
            );
        }
    };
    if let Some(primary) = &data.primary_metric {
        metric(p, format!("{ap}/primary_metric"), primary);
        settings.primary_metric = primary.clone();
    }
    if data.guardrail_metrics.len() > MAX_GUARDRAILS {
        p.push(
            format!("{ap}/guardrail_metrics"),
            format!(
                "at most {MAX_GUARDRAILS} guardrail metrics, not {}",
                data.guardrail_metrics.len()
            ),
        );
    }
    for (i, name) in data.guardrail_metrics.iter().enumerate() {
        let pointer = format!("{ap}/guardrail_metrics/{i}");
        if data.guardrail_metrics[..i].contains(name) {
            p.push(pointer, format!("{} is listed twice", shown_str(name)));
        } else if *name == settings.primary_metric {
            p.push(
                pointer,
                format!(
                    "{} is the primary metric already: a guardrail is another metric that must \
                     not get worse",
                    shown_str(name)
                ),
            );
        } else {
            metric(p, pointer, name);
        }
    }
    settings.guardrail_metrics = data.guardrail_metrics.clone();
    if let Some(sequential) = data.sequential {
        settings.sequential = sequential;
    }
    if let Some(minimum) = data.minimum_users {
        if minimum == 0 {
            p.push(
                format!("{ap}/minimum_users"),
                "must be at least 1, not 0".to_owned(),
            );
        }
        settings.minimum_users = minimum;
    }
    settings
}

/// Longest App Store bundle id (Apple's limit).
const MAX_BUNDLE_ID: usize = 155;

/// An app's `apple_bundle_id` and `apple_environments` (D30): the bundle id 1 to 155 characters
/// of `A-Za-z0-9.-` (what Apple allows); the environments among [`App::APPLE_ENVIRONMENTS`],
/// each once, and only beside a bundle id. Returns the environments with their default filled
/// in (`["Production"]` for an app with a bundle id, none for one without).
fn build_apple_fields(
    p: &mut Problems,
    ap: &str,
    bundle_id: Option<&str>,
    environments: &[String],
) -> Vec<String> {
    if let Some(bundle_id) = bundle_id {
        let well_formed = !bundle_id.is_empty()
            && bundle_id.len() <= MAX_BUNDLE_ID
            && bundle_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'));
        if !well_formed {
            p.push(
                format!("{ap}/apple_bundle_id"),
                format!(
                    "must be an App Store bundle id, 1 to {MAX_BUNDLE_ID} characters of \
                     A-Za-z0-9.- (e.g. \"com.example.app\"), not {}",
                    shown_str(bundle_id)
                ),
            );
        }
    }
    for (i, environment) in environments.iter().enumerate() {
        let pointer = format!("{ap}/apple_environments/{i}");
        if !App::APPLE_ENVIRONMENTS.contains(&environment.as_str()) {
            p.push(
                pointer,
                format!(
                    "{} is not an App Store environment: {}",
                    shown_str(environment),
                    App::APPLE_ENVIRONMENTS.join(" or ")
                ),
            );
        } else if environments[..i].contains(environment) {
            p.push(
                pointer,
                format!("{} is listed twice", shown_str(environment)),
            );
        }
    }
    match bundle_id {
        Some(_) if environments.is_empty() => App::DEFAULT_APPLE_ENVIRONMENTS
            .iter()
            .map(|e| (*e).to_owned())
            .collect(),
        Some(_) => environments.to_vec(),
        None => {
            if !environments.is_empty() {
                p.push(
                    format!("{ap}/apple_environments"),
                    format!(
                        "{} needs an apple_bundle_id: the environments are those of the app's \
                         App Store notifications (D30); add the bundle id or remove them",
                        shown(&serde_json::json!(environments))
                    ),
                );
            }
            Vec::new()
        }
    }
}

/// Longest attribute name a sticky experiment may read (`fallback_attribute`).
const MAX_ATTRIBUTE_NAME: usize = 64;

/// A `fallback_attribute` (D23): 1 to 64 characters of `A-Za-z0-9_.-`, not `user_id` (the
/// attribute every experiment hashes already). The characters keep GrowthBook's document keys
/// (`name||value`) and the adapters' own keys unambiguous.
fn check_attribute_name(p: &mut Problems, pointer: String, name: &str) {
    let well_formed = !name.is_empty()
        && name.len() <= MAX_ATTRIBUTE_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !well_formed {
        p.push(
            pointer,
            format!(
                "must be 1 to {MAX_ATTRIBUTE_NAME} characters of A-Za-z0-9_.-, not {}",
                shown_str(name)
            ),
        );
    } else if name == "user_id" {
        p.push(
            pointer,
            "must name another attribute than user_id, which experiments hash already".to_owned(),
        );
    }
}
