//! Planning a catalog import (D13), without I/O: the store reads the file and the stored
//! catalog, calls [`plan_import`], and writes [`ImportPlan::write`] in the same transaction.
//!
//! The import is an upsert keyed by ids (placements by app and key) that deletes nothing except
//! the rule lists it replaces, so what the store holds afterwards is the stored catalog with the
//! file's entities laid over it: the *merged view*. [`plan_import`] builds that view and runs
//! [`Catalog::build`] on it, so a file is rejected when the catalog it would leave behind is
//! invalid, even when the problem involves stored entities the file does not mention (a stored
//! placement pointing at a flow the file moves to another app, say). Problems of file entities
//! keep their pointers into the file: the merged view lists the file's entities first, in file
//! order, at every level, so their positions are the file's. A problem inside a stored entity
//! is reported at its nearest ancestor in the file (or the root), naming the stored entity.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use serde_json::value::RawValue;
use serde_json::Value;
use time::OffsetDateTime;

use super::data::{
    AppData, CatalogData, ExperimentData, ExperimentStatus, FlowData, FlowVersionData,
    PlacementData, WorkspaceData,
};
#[cfg(feature = "server")]
use super::diff::{diff_catalogs, CatalogDiff};
use super::file::CatalogFile;
use super::{Catalog, Problem};
use crate::ids::{AppId, ExperimentId, FlowId, FlowVersionId, KeyId, VariantId, WorkspaceId};
use crate::keys::{ApiKey, KeyDigest, KeyRecord, KeyType};

/// What an import will do, once [`plan_import`] accepted the file.
#[derive(Debug)]
pub struct ImportPlan {
    /// The data to write with the store's upsert: the file's workspaces (each published
    /// `flow_schema` that is unchanged as a JSON value keeps its stored text) and its keys as
    /// records (digests only).
    pub write: CatalogData,
    /// False when the store already holds everything in the file: then nothing is written and
    /// the revision stays (re-importing a file changes nothing).
    pub changed: bool,
    /// Things that are allowed but deserve attention (D5: a running experiment's assignment
    /// changes), with pointers into the file.
    pub warnings: Vec<Problem>,
    /// What the file holds.
    pub summary: ImportSummary,
}

/// Entity counts of a catalog file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Workspaces.
    pub workspaces: usize,
    /// Apps.
    pub apps: usize,
    /// Flows.
    pub flows: usize,
    /// Flow versions.
    pub versions: usize,
    /// Placements.
    pub placements: usize,
    /// API keys.
    pub keys: usize,
}

/// The record id of a key imported from a file: derived from its digest (a UUIDv8 of the
/// digest's first 16 bytes), so importing the same key again finds the same record.
pub fn imported_key_id(digest: &KeyDigest) -> KeyId {
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest.0[..16]);
    KeyId::from_uuid(uuid::Builder::from_custom_bytes(bytes).into_uuid())
}

/// Validates a parsed catalog file against what the store holds (`stored`, as loaded) and
/// plans the write. Every problem is returned, each with a pointer into the file:
/// key format, checksum and type (D1); keys already stored for another workspace or with
/// another type; changed content of published versions (D2: a stored version that its flow
/// publishes, or that the file publishes, must keep its flow, number, `schema_version`, fonts
/// and `flow_schema`, compared as JSON values); and everything [`Catalog::build`] finds in the
/// merged view (ids, references, conditions, regex limits, weights, coverage, ...).
///
/// New keys are recorded as created at `now`; keys already stored keep their record (only the
/// name follows the file; a revoked key stays revoked).
pub fn plan_import(
    file: CatalogFile,
    stored: &CatalogData,
    now: OffsetDateTime,
) -> Result<ImportPlan, Vec<Problem>> {
    plan(file, stored, now, |_| ()).map(|(plan, ())| plan)
}

#[cfg(feature = "server")]
/// What an import would do, without doing it (D19): the plan, and the difference between the
/// stored catalog and the one the import would leave.
#[derive(Debug)]
pub struct DryRun {
    /// The plan [`plan_import`] makes.
    pub plan: ImportPlan,
    /// What would change.
    pub diff: CatalogDiff,
}

#[cfg(feature = "server")]
/// [`plan_import`], and what the import would change (D19). The same validation: a file the
/// import refuses is refused here with the same problems.
pub fn plan_dry_run(
    file: CatalogFile,
    stored: &CatalogData,
    now: OffsetDateTime,
) -> Result<DryRun, Vec<Problem>> {
    let (plan, merged) = plan(file, stored, now, CatalogData::clone)?;
    // Both catalogs built: the stored one is served, and the merged one built in `plan`.
    let built_before = Catalog::build(stored.clone()).unwrap_or_default();
    let built_after = Catalog::build(merged.clone()).unwrap_or_default();
    let diff = diff_catalogs(stored, &merged, &built_before, &built_after);
    Ok(DryRun { plan, diff })
}

/// Validates and plans; `keep` takes what it needs of the merged view before it is built.
fn plan<K>(
    mut file: CatalogFile,
    stored: &CatalogData,
    now: OffsetDateTime,
    keep: impl FnOnce(&CatalogData) -> K,
) -> Result<(ImportPlan, K), Vec<Problem>> {
    let index = StoredIndex::new(stored);
    let mut check = Check {
        index: &index,
        problems: Vec::new(),
        warnings: Vec::new(),
        changed: false,
    };
    let keys = check.keys(&file, now);
    for (wi, ws) in file.workspaces.iter_mut().enumerate() {
        let wp = format!("/workspaces/{wi}");
        match index.workspaces.get(&ws.id) {
            Some(s) if s.name == ws.name => {}
            _ => check.changed = true,
        }
        for (ai, app) in ws.apps.iter_mut().enumerate() {
            check.app(ws.id, &format!("{wp}/apps/{ai}"), app);
        }
    }
    let Check {
        mut problems,
        mut warnings,
        changed,
        ..
    } = check;

    let mut merger = Merger::new(&index, &file);
    let merged = merger.merge(&file, &keys, stored);
    let kept = keep(&merged);
    if let Err(e) = Catalog::build(merged) {
        problems.extend(e.problems.into_iter().map(|p| merger.map_problem(p)));
    }
    if !problems.is_empty() {
        sort_by_pointer(&mut problems);
        return Err(problems);
    }
    sort_by_pointer(&mut warnings);

    let summary = summarize(&file);
    let write = CatalogData {
        revision: 0,
        workspaces: file
            .workspaces
            .into_iter()
            .map(|ws| WorkspaceData {
                id: ws.id,
                name: ws.name,
                apps: ws.apps,
            })
            .collect(),
        api_keys: keys.into_iter().map(|(_, record)| record).collect(),
    };
    Ok((
        ImportPlan {
            write,
            changed,
            warnings,
            summary,
        },
        kept,
    ))
}

fn summarize(file: &CatalogFile) -> ImportSummary {
    let mut s = ImportSummary {
        workspaces: file.workspaces.len(),
        ..ImportSummary::default()
    };
    for ws in &file.workspaces {
        s.keys += ws.api_keys.len();
        s.apps += ws.apps.len();
        for app in &ws.apps {
            s.flows += app.flows.len();
            s.versions += app.flows.iter().map(|f| f.versions.len()).sum::<usize>();
            s.placements += app.placements.len();
        }
    }
    s
}

/// Sorts problems into document order: pointer segments compared as numbers where both are
/// array indices. The sort is stable, so problems of one value keep their order.
fn sort_by_pointer(problems: &mut [Problem]) {
    fn compare(a: &str, b: &str) -> Ordering {
        let mut left = a.split('/');
        let mut right = b.split('/');
        loop {
            match (left.next(), right.next()) {
                (None, None) => return Ordering::Equal,
                (None, Some(_)) => return Ordering::Less,
                (Some(_), None) => return Ordering::Greater,
                (Some(x), Some(y)) => {
                    let order = match (x.parse::<u64>(), y.parse::<u64>()) {
                        (Ok(x), Ok(y)) => x.cmp(&y),
                        _ => x.cmp(y),
                    };
                    if order != Ordering::Equal {
                        return order;
                    }
                }
            }
        }
    }
    problems.sort_by(|a, b| compare(&a.pointer, &b.pointer));
}

/// The stored catalog, indexed by id.
struct StoredIndex<'a> {
    workspaces: HashMap<WorkspaceId, &'a WorkspaceData>,
    apps: HashMap<AppId, (WorkspaceId, &'a AppData)>,
    flows: HashMap<FlowId, (AppId, &'a FlowData)>,
    versions: HashMap<FlowVersionId, (&'a FlowData, &'a FlowVersionData)>,
    placements: HashMap<(AppId, &'a str), &'a PlacementData>,
    experiments: HashMap<ExperimentId, &'a ExperimentData>,
    keys: HashMap<KeyDigest, &'a KeyRecord>,
}

impl<'a> StoredIndex<'a> {
    fn new(stored: &'a CatalogData) -> Self {
        let mut index = StoredIndex {
            workspaces: HashMap::new(),
            apps: HashMap::new(),
            flows: HashMap::new(),
            versions: HashMap::new(),
            placements: HashMap::new(),
            experiments: HashMap::new(),
            keys: stored.api_keys.iter().map(|k| (k.digest, k)).collect(),
        };
        for ws in &stored.workspaces {
            index.workspaces.insert(ws.id, ws);
            for app in &ws.apps {
                index.apps.insert(app.id, (ws.id, app));
                for flow in &app.flows {
                    index.flows.insert(flow.id, (app.id, flow));
                    for version in &flow.versions {
                        index.versions.insert(version.id, (flow, version));
                    }
                }
                for placement in &app.placements {
                    index
                        .placements
                        .insert((app.id, placement.key.as_str()), placement);
                    for rule in &placement.rules {
                        if let Some(e) = &rule.experiment {
                            index.experiments.insert(e.id, e);
                        }
                    }
                }
            }
        }
        index
    }
}

/// The checks of file entities against their stored counterparts.
struct Check<'i, 'a> {
    index: &'i StoredIndex<'a>,
    problems: Vec<Problem>,
    warnings: Vec<Problem>,
    changed: bool,
}

fn problem(pointer: String, message: impl Into<String>) -> Problem {
    Problem {
        pointer,
        message: message.into(),
    }
}

impl Check<'_, '_> {
    /// Parses the file's keys (D1) and turns them into records; returns each with its pointer.
    fn keys(&mut self, file: &CatalogFile, now: OffsetDateTime) -> Vec<(String, KeyRecord)> {
        let mut records = Vec::new();
        let mut first_seen: HashMap<KeyDigest, String> = HashMap::new();
        for (wi, ws) in file.workspaces.iter().enumerate() {
            for (ki, k) in ws.api_keys.iter().enumerate() {
                let kp = format!("/workspaces/{wi}/api_keys/{ki}");
                let key_type = KeyType::parse(&k.key_type);
                match key_type {
                    None => self.problems.push(problem(
                        format!("{kp}/type"),
                        format!("`{}` is not a key type: sdk or secret", k.key_type),
                    )),
                    // Not a value of the file format (D26: a new value is a new format), and
                    // stored apart from the keys a file writes (D30).
                    Some(KeyType::Webhook) => self.problems.push(problem(
                        format!("{kp}/type"),
                        "a catalog file holds sdk and secret keys; create a webhook key with \
                         `flowgate keys create --type webhook`",
                    )),
                    Some(_) => {}
                }
                // The message never repeats the key: it is a secret.
                let key = match ApiKey::parse(&k.key) {
                    Ok(key) => Some(key),
                    Err(e) => {
                        self.problems.push(problem(
                            format!("{kp}/key"),
                            format!("not a valid API key (D1): {e}"),
                        ));
                        None
                    }
                };
                if k.name.chars().count() > 256 {
                    self.problems.push(problem(
                        format!("{kp}/name"),
                        "must be at most 256 characters",
                    ));
                }
                let (Some(key), Some(key_type)) = (key, key_type) else {
                    continue;
                };
                let digest = key.digest();
                if let Some(first) = first_seen.get(&digest) {
                    self.problems.push(problem(
                        format!("{kp}/key"),
                        format!("the same key is listed more than once (first at {first})"),
                    ));
                    continue;
                }
                first_seen.insert(digest, kp.clone());
                let record = match self.index.keys.get(&digest) {
                    None => {
                        self.changed = true;
                        KeyRecord::new(
                            imported_key_id(&digest),
                            ws.id,
                            &key,
                            key_type,
                            k.name.clone(),
                            now,
                        )
                    }
                    Some(&stored) => {
                        if stored.workspace_id != ws.id {
                            self.problems.push(problem(
                                format!("{kp}/key"),
                                format!(
                                    "this key is stored for workspace {}; a key cannot move to another workspace",
                                    stored.workspace_id
                                ),
                            ));
                        }
                        if stored.key_type != key_type {
                            self.problems.push(problem(
                                format!("{kp}/type"),
                                format!(
                                    "this key is stored with type {}; a key's type cannot change (revoke it and create another)",
                                    stored.key_type
                                ),
                            ));
                        }
                        if stored.is_revoked() {
                            self.warnings.push(problem(
                                kp.clone(),
                                "this key is revoked in the store; importing it does not restore it",
                            ));
                        }
                        let mut record = stored.clone();
                        if record.name != k.name {
                            record.name = k.name.clone();
                            self.changed = true;
                        }
                        record
                    }
                };
                records.push((kp, record));
            }
        }
        records
    }

    fn app(&mut self, workspace: WorkspaceId, ap: &str, app: &mut AppData) {
        match self.index.apps.get(&app.id) {
            Some((ws, s))
                if *ws == workspace
                    && s.name == app.name
                    && s.media_base_url == app.media_base_url
                    && s.icon_base_url == app.icon_base_url
                    && s.cache_ttl_seconds == app.cache_ttl_seconds
                    && s.apple_bundle_id == app.apple_bundle_id
                    && s.apple_environments == app.apple_environments
                    && s.saved_groups == app.saved_groups => {}
            _ => self.changed = true,
        }
        for (fi, flow) in app.flows.iter_mut().enumerate() {
            self.flow(app.id, &format!("{ap}/flows/{fi}"), flow);
        }
        for (pi, placement) in app.placements.iter().enumerate() {
            self.placement(app.id, &format!("{ap}/placements/{pi}"), placement);
        }
    }

    fn flow(&mut self, app: AppId, fp: &str, flow: &mut FlowData) {
        match self.index.flows.get(&flow.id) {
            None => self.changed = true,
            Some((stored_app, s)) => {
                if *stored_app != app
                    || s.name != flow.name
                    || s.published_version != flow.published_version
                {
                    self.changed = true;
                }
                if let (Some(n), None) = (s.published_version, flow.published_version) {
                    self.warnings.push(problem(
                        format!("{fp}/published_version"),
                        format!(
                            "the flow publishes version {n} in the store; this file unpublishes it, so its targets resolve to no flow (D3.4)"
                        ),
                    ));
                }
            }
        }
        let published = flow.published_version;
        for (vi, version) in flow.versions.iter_mut().enumerate() {
            self.version(flow.id, published, &format!("{fp}/versions/{vi}"), version);
        }
    }

    fn version(
        &mut self,
        flow: FlowId,
        file_published: Option<u32>,
        vp: &str,
        v: &mut FlowVersionData,
    ) {
        let Some(&(stored_flow, s)) = self.index.versions.get(&v.id) else {
            self.changed = true;
            return;
        };
        let same_schema = same_json(&s.flow_schema, &v.flow_schema);
        let published_now = stored_flow.published_version == Some(s.version);
        let published_by_file = file_published == Some(v.version);
        if published_now || published_by_file {
            let mut differs = Vec::new();
            if stored_flow.id != flow {
                differs.push("flow");
            }
            if s.version != v.version {
                differs.push("version");
            }
            if s.schema_version != v.schema_version {
                differs.push("schema_version");
            }
            if s.fonts != v.fonts {
                differs.push("fonts");
            }
            if !same_schema {
                differs.push("flow_schema");
            }
            if !differs.is_empty() {
                let by = if published_now {
                    "is published"
                } else {
                    "is published by this file"
                };
                self.problems.push(problem(
                    vp.to_owned(),
                    format!(
                        "version {} ({}) {by}, so its content is immutable (D2), but its {} differ from the stored version; add a new version instead",
                        s.version,
                        v.id,
                        differs.join(", ")
                    ),
                ));
            }
        }
        if same_schema {
            // The same JSON value: keep the stored text, so the served bytes never change.
            v.flow_schema = s.flow_schema.clone();
        }
        if stored_flow.id != flow
            || s.version != v.version
            || s.schema_version != v.schema_version
            || s.fonts != v.fonts
            || s.flow_schema.get() != v.flow_schema.get()
        {
            self.changed = true;
        }
    }

    fn placement(&mut self, app: AppId, pp: &str, placement: &PlacementData) {
        match self.index.placements.get(&(app, placement.key.as_str())) {
            Some(s)
                if s.default_flow_id == placement.default_flow_id
                    && same_value(&s.rules, &placement.rules) => {}
            _ => self.changed = true,
        }
        for (ri, rule) in placement.rules.iter().enumerate() {
            let Some(e) = &rule.experiment else { continue };
            // D23: GrowthBook hashes the fallback attribute when the hash attribute is missing;
            // flowgate hashes `user_id`, which every request carries (the contract requires
            // it), so a fallback would never be used. Refused rather than stored to no effect.
            if let Some(attribute) = &e.fallback_attribute {
                self.problems.push(problem(
                    format!("{pp}/rules/{ri}/experiment/fallback_attribute"),
                    format!(
                        "fallback_attribute {attribute:?} would never be used: experiments hash \
                         user_id, which every request carries; remove it"
                    ),
                ));
            }
            let Some(s) = self.index.experiments.get(&e.id) else {
                continue;
            };
            // D5: ranges follow normalised weights in variant order; changing either moves
            // users that are already bucketed. Allowed, but said out loud.
            if s.status == ExperimentStatus::Running
                && e.status == ExperimentStatus::Running
                && assignment(s) != assignment(e)
            {
                self.warnings.push(problem(
                    format!("{pp}/rules/{ri}/experiment/variants"),
                    format!(
                        "experiment `{}` is running: changing its variant weights or order moves users between variants (D5)",
                        e.name
                    ),
                ));
            }
        }
    }
}

/// Variant ids with normalised weights, in order: what bucketing depends on besides coverage.
fn assignment(e: &ExperimentData) -> Vec<(VariantId, f64)> {
    let total: f64 = e.variants.iter().map(|v| v.weight).sum();
    e.variants
        .iter()
        .map(|v| (v.id, v.weight / total))
        .collect()
}

/// Two JSON texts hold the same value. Equal texts short-cut the parse.
fn same_json(a: &RawValue, b: &RawValue) -> bool {
    if a.get() == b.get() {
        return true;
    }
    match (
        serde_json::from_str::<Value>(a.get()),
        serde_json::from_str::<Value>(b.get()),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn same_value<T: serde::Serialize>(a: &T, b: &T) -> bool {
    match (serde_json::to_value(a), serde_json::to_value(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Ids of the entities a file mentions: a stored entity with one of them is replaced by the
/// file's.
struct FileIds {
    apps: HashSet<AppId>,
    flows: HashSet<FlowId>,
    versions: HashSet<FlowVersionId>,
    placements: HashSet<(AppId, String)>,
    workspaces: HashSet<WorkspaceId>,
}

/// Builds the merged view and maps its problems back to the file.
struct Merger<'i, 'a> {
    index: &'i StoredIndex<'a>,
    ids: FileIds,
    /// Merged-view pointers of stored entities the file does not mention, with a description.
    stored_origin: HashMap<String, String>,
    /// File pointers of the merged view's keys, in order; stored keys follow.
    key_pointers: Vec<String>,
    stored_keys: Vec<KeyId>,
    attached_ws: HashSet<WorkspaceId>,
    attached_apps: HashSet<AppId>,
    attached_flows: HashSet<FlowId>,
}

impl<'i, 'a> Merger<'i, 'a> {
    fn new(index: &'i StoredIndex<'a>, file: &CatalogFile) -> Self {
        let mut ids = FileIds {
            apps: HashSet::new(),
            flows: HashSet::new(),
            versions: HashSet::new(),
            placements: HashSet::new(),
            workspaces: HashSet::new(),
        };
        for ws in &file.workspaces {
            ids.workspaces.insert(ws.id);
            for app in &ws.apps {
                ids.apps.insert(app.id);
                for flow in &app.flows {
                    ids.flows.insert(flow.id);
                    ids.versions.extend(flow.versions.iter().map(|v| v.id));
                }
                ids.placements
                    .extend(app.placements.iter().map(|p| (app.id, p.key.clone())));
            }
        }
        Merger {
            index,
            ids,
            stored_origin: HashMap::new(),
            key_pointers: Vec::new(),
            stored_keys: Vec::new(),
            attached_ws: HashSet::new(),
            attached_apps: HashSet::new(),
            attached_flows: HashSet::new(),
        }
    }

    /// The catalog the store would hold after the upsert: at every level the file's entities
    /// first, in file order (so their positions are the file's), then the stored ones the file
    /// does not mention.
    fn merge(
        &mut self,
        file: &CatalogFile,
        keys: &[(String, KeyRecord)],
        stored: &CatalogData,
    ) -> CatalogData {
        let mut workspaces = Vec::with_capacity(file.workspaces.len());
        for (wi, ws) in file.workspaces.iter().enumerate() {
            let wp = format!("/workspaces/{wi}");
            let mut apps = Vec::with_capacity(ws.apps.len());
            for (ai, app) in ws.apps.iter().enumerate() {
                apps.push(self.file_app(&format!("{wp}/apps/{ai}"), app));
            }
            if self.attached_ws.insert(ws.id) {
                if let Some(s) = self.index.workspaces.get(&ws.id) {
                    for app in &s.apps {
                        if !self.ids.apps.contains(&app.id) {
                            self.stored_origin.insert(
                                format!("{wp}/apps/{}", apps.len()),
                                format!("stored app {}", app.id),
                            );
                            apps.push(self.stored_app(app));
                        }
                    }
                }
            }
            workspaces.push(WorkspaceData {
                id: ws.id,
                name: ws.name.clone(),
                apps,
            });
        }
        for ws in &stored.workspaces {
            if self.ids.workspaces.contains(&ws.id) {
                continue;
            }
            self.stored_origin.insert(
                format!("/workspaces/{}", workspaces.len()),
                format!("stored workspace {}", ws.id),
            );
            let apps = ws
                .apps
                .iter()
                .filter(|a| !self.ids.apps.contains(&a.id))
                .map(|a| self.stored_app(a))
                .collect();
            workspaces.push(WorkspaceData {
                id: ws.id,
                name: ws.name.clone(),
                apps,
            });
        }

        let mut api_keys = Vec::with_capacity(keys.len() + stored.api_keys.len());
        let in_file: HashSet<KeyDigest> = keys.iter().map(|(_, r)| r.digest).collect();
        for (pointer, record) in keys {
            self.key_pointers.push(pointer.clone());
            api_keys.push(record.clone());
        }
        for record in &stored.api_keys {
            if !in_file.contains(&record.digest) {
                self.stored_keys.push(record.id);
                api_keys.push(record.clone());
            }
        }
        CatalogData {
            revision: stored.revision,
            workspaces,
            api_keys,
        }
    }

    fn file_app(&mut self, ap: &str, app: &AppData) -> AppData {
        let mut out = app.clone();
        for (fi, flow) in out.flows.iter_mut().enumerate() {
            if self.attached_flows.insert(flow.id) {
                if let Some((_, s)) = self.index.flows.get(&flow.id) {
                    for v in &s.versions {
                        if !self.ids.versions.contains(&v.id) {
                            self.stored_origin.insert(
                                format!("{ap}/flows/{fi}/versions/{}", flow.versions.len()),
                                format!("stored version {} (version {})", v.id, v.version),
                            );
                            flow.versions.push(v.clone());
                        }
                    }
                }
            }
        }
        if self.attached_apps.insert(app.id) {
            if let Some((_, s)) = self.index.apps.get(&app.id) {
                for flow in &s.flows {
                    if !self.ids.flows.contains(&flow.id) {
                        self.stored_origin.insert(
                            format!("{ap}/flows/{}", out.flows.len()),
                            format!("stored flow {}", flow.id),
                        );
                        out.flows.push(self.stored_flow(flow));
                    }
                }
                for placement in &s.placements {
                    if !self
                        .ids
                        .placements
                        .contains(&(app.id, placement.key.clone()))
                    {
                        self.stored_origin.insert(
                            format!("{ap}/placements/{}", out.placements.len()),
                            format!("stored placement `{}`", placement.key),
                        );
                        out.placements.push(placement.clone());
                    }
                }
            }
        }
        out
    }

    fn stored_app(&self, app: &AppData) -> AppData {
        AppData {
            flows: app
                .flows
                .iter()
                .filter(|f| !self.ids.flows.contains(&f.id))
                .map(|f| self.stored_flow(f))
                .collect(),
            placements: app
                .placements
                .iter()
                .filter(|p| !self.ids.placements.contains(&(app.id, p.key.clone())))
                .cloned()
                .collect(),
            ..app.clone_without_children()
        }
    }

    fn stored_flow(&self, flow: &FlowData) -> FlowData {
        FlowData {
            id: flow.id,
            name: flow.name.clone(),
            published_version: flow.published_version,
            versions: flow
                .versions
                .iter()
                .filter(|v| !self.ids.versions.contains(&v.id))
                .cloned()
                .collect(),
        }
    }

    /// Maps a problem of the merged view to the file: file entities keep their pointers; a
    /// problem inside a stored entity goes to its nearest ancestor in the file, naming it.
    fn map_problem(&self, p: Problem) -> Problem {
        if let Some(rest) = p.pointer.strip_prefix("/api_keys/") {
            let (index, tail) = rest.split_once('/').map_or((rest, ""), |(i, t)| (i, t));
            let index: usize = index.parse().unwrap_or(usize::MAX);
            if let Some(pointer) = self.key_pointers.get(index) {
                let field = match tail {
                    "digest" => "/key",
                    _ => "",
                };
                return problem(format!("{pointer}{field}"), p.message);
            }
            let id = index
                .checked_sub(self.key_pointers.len())
                .and_then(|i| self.stored_keys.get(i));
            return match id {
                Some(id) => problem(
                    String::new(),
                    format!("stored key {id} (not in this file): {}", p.message),
                ),
                None => p,
            };
        }
        let segments: Vec<&str> = p.pointer.split('/').skip(1).collect();
        let mut prefix = String::new();
        let mut i = 0;
        while i + 1 < segments.len()
            && matches!(
                segments[i],
                "workspaces" | "apps" | "flows" | "versions" | "placements"
            )
            && segments[i + 1].parse::<usize>().is_ok()
        {
            let parent = prefix.clone();
            prefix = format!("{prefix}/{}/{}", segments[i], segments[i + 1]);
            if let Some(what) = self.stored_origin.get(&prefix) {
                let rest = &p.pointer[prefix.len()..];
                let at = if rest.is_empty() {
                    String::new()
                } else {
                    format!(" at {rest}")
                };
                return problem(
                    parent,
                    format!("{what} (not in this file){at}: {}", p.message),
                );
            }
            i += 2;
        }
        p
    }
}

impl AppData {
    /// The app's own fields, without flows and placements.
    pub(super) fn clone_without_children(&self) -> AppData {
        AppData {
            id: self.id,
            name: self.name.clone(),
            media_base_url: self.media_base_url.clone(),
            icon_base_url: self.icon_base_url.clone(),
            cache_ttl_seconds: self.cache_ttl_seconds,
            apple_bundle_id: self.apple_bundle_id.clone(),
            apple_environments: self.apple_environments.clone(),
            saved_groups: self.saved_groups.clone(),
            flows: Vec::new(),
            placements: Vec::new(),
        }
    }
}
