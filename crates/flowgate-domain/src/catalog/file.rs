//! The catalog file (D13): its shape and its structural check.
//!
//! A file is like [`CatalogData`](super::CatalogData), except that each workspace carries its
//! API keys in plaintext (`api_keys: [{key, type, name}]`) and there is no top-level key list
//! or revision. [`CatalogFile::parse`] reads JSON text (a YAML file is converted to JSON text by
//! the store first) in two passes: a walk over the generic JSON value that reports every
//! structural problem (missing or unknown fields, wrong JSON types, malformed UUIDs, unknown
//! enum values, integers out of range) with its JSON pointer, then, when the walk found
//! nothing, the typed parse, which keeps each `flow_schema` as its exact text (D2).
//!
//! Unknown fields are problems, not ignored: a misspelt `publised_version` would otherwise
//! silently unpublish a flow. What a value means (key checksums, references, conditions,
//! weights, immutable versions) is checked afterwards by [`super::plan_import`].
//!
//! # Versions
//!
//! The one place that says which versions of the catalog file exist (D26); golden samples of
//! each are in `formats/flowgate.catalog/v<N>/`, read by the domain's integration tests
//! (`tests/it/catalog_file.rs`).
//!
//! | `format` | written by | what changed |
//! |---|---|---|
//! | 1 | 0.1.0 and later | the first; the optional top-level `format` (missing: 1) from 0.2.0, whose exports write it |
//! | 2 | 0.3.0 and later | an experiment's optional `analysis` (D27), `starts_at` and `ends_at` (D29); a variant's optional `flow_version` (D29); an app's optional `apple_bundle_id` and `apple_environments` (D30); a rule's optional `enabled` (D28) |
//!
//! A file says its version in the optional top-level member `format` (an integer from 1; a
//! file without it is format 1, as every file written before the member existed). This
//! release reads every format up to [`CatalogFile::FORMAT`] and its exports write the lowest
//! format whose members they use ([`CatalogFile::lowest_format`]). A file of a newer format is refused whole, with one problem at
//! `/format` naming its format and the newest this release reads, before anything else is
//! checked: this release cannot know what the newer format changed.
//!
//! **Unknown members stay refused within a format.** The file is written by hand as often as
//! by `flowgate catalog export`, and an ignored typo (`wieght`, `publised_version`) would
//! silently change what is served, so this format does not allow unknown members (D26: "where
//! the format allows"). Hence the rule for adding a member: **a release that adds a member to
//! the file raises [`CatalogFile::FORMAT`]** (with a row above and a sample of the new
//! version), and its export writes the *lowest* format whose members the file uses: a file
//! that uses no new member is still written as the previous format, which the previous release
//! imports (so a rollback keeps importing the newer release's exports of unchanged catalogs),
//! and one that uses the new member is refused there with the clear newer-format message
//! instead of "unknown field". The new member must be optional, and a missing one reads as
//! absent, so the newer release keeps reading every older file unchanged.
//!
//! A file of an older format than its members need (any member of format 2 above in a file
//! that says format 1 or nothing) is refused at each such member, naming the format that has
//! it: a hand-written file says `"format": 2` before using them, so a release that reads only format 1 refuses it with the newer-format message rather
//! than an unknown field.
//!
//! Releases from before the `format` member (0.1.0) refuse an export that carries it as having
//! an unknown field `format`; delete that line of the export to import it into one of them.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::build::escape;
use super::data::AppData;
use super::Problem;
use crate::ids::{parse_hyphenated, WorkspaceId};
use crate::shown::shown;

/// A catalog file (D13), parsed but not yet validated beyond its structure.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CatalogFile {
    /// The file's format (see the module's Versions): 1 when the file does not say.
    #[serde(default = "first_format")]
    pub format: u32,
    /// Workspaces with their keys and apps.
    pub workspaces: Vec<WorkspaceFile>,
}

/// A file without a `format` member is of the first format.
fn first_format() -> u32 {
    1
}

/// A workspace of a catalog file: [`WorkspaceData`](super::WorkspaceData) plus plaintext keys.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkspaceFile {
    /// Workspace id.
    pub id: WorkspaceId,
    /// Display name.
    pub name: String,
    /// API keys in plaintext; the store keeps only their digests (D1). Left out of the JSON
    /// when empty, as in an export (D19).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_keys: Vec<FileKey>,
    /// Its apps.
    #[serde(default)]
    pub apps: Vec<AppData>,
}

/// An API key given in a catalog file (D13).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FileKey {
    /// The plaintext key, `fg_<env>_<random><checksum>` (D1).
    pub key: String,
    /// `sdk` (the default) or `secret`; kept as text so an unknown type is reported with the
    /// other semantic problems instead of stopping the parse.
    #[serde(rename = "type", default = "default_key_type")]
    pub key_type: String,
    /// Human name (e.g. "ios").
    pub name: String,
}

fn default_key_type() -> String {
    "sdk".to_owned()
}

impl CatalogFile {
    /// The newest file format this release reads (see the module's Versions).
    pub const FORMAT: u32 = 2;

    /// Parses the JSON text of a catalog file. On failure every structural problem found is
    /// returned, each with the JSON pointer of the offending value; a file of a format newer
    /// than [`CatalogFile::FORMAT`] is that one problem, at `/format`.
    pub fn parse(json: &str) -> Result<CatalogFile, Vec<Problem>> {
        let value: Value = serde_json::from_str(json).map_err(|e| {
            vec![Problem {
                pointer: String::new(),
                message: format!("not valid JSON: {e}"),
            }]
        })?;
        if let Some(format) = value.get("format").and_then(Value::as_u64) {
            if format > u64::from(Self::FORMAT) {
                return Err(vec![Problem {
                    pointer: "/format".to_owned(),
                    message: format!(
                        "this file is catalog format {format}, newer than this release reads \
                         (format {}): import it with a release that reads format {format}",
                        Self::FORMAT
                    ),
                }]);
            }
        }
        let mut problems = Vec::new();
        check(&mut problems, &FILE, &value, String::new());
        let format = value.get("format").and_then(Value::as_u64).unwrap_or(1);
        if format < 2 {
            for (pointer, member) in format_2_members(&value) {
                problems.push(Problem {
                    pointer,
                    message: format!(
                        "`{member}` is a member of catalog format 2, and this file is format \
                         {format}: add \"format\": 2 at the top of the file"
                    ),
                });
            }
        }
        for (pointer, app) in apps_of(&value) {
            // An empty list would read as the default (the data leaves it out when empty):
            // refused, so `[]` never silently means `["Production"]`.
            if app
                .get("apple_environments")
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty)
            {
                problems.push(Problem {
                    pointer: format!("{pointer}/apple_environments"),
                    message: "must list at least one App Store environment, Production or \
                              Sandbox, not []; leave it out for the default, [\"Production\"]"
                        .to_owned(),
                });
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        drop(value);
        // The walk above mirrors the serde shape, so this only fails on what a generic value
        // cannot show (a field given twice in one object); the path still gives a pointer.
        let mut deserializer = serde_json::Deserializer::from_str(json);
        serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
            let pointer = pointer_of(e.path());
            vec![Problem {
                pointer,
                message: e.into_inner().to_string(),
            }]
        })
    }
}

impl CatalogFile {
    /// The lowest format whose members the file uses: 2 with an experiment's `analysis`,
    /// `starts_at` or `ends_at`, a variant's `flow_version`, an app's `apple_bundle_id` or
    /// `apple_environments`, or a rule that is off (`enabled` written only when `false`),
    /// else 1 (see the module's Versions).
    /// Exports are written as it, so a file that uses nothing new still imports into the
    /// release before.
    pub fn lowest_format(&self) -> u32 {
        let format_2 = self.workspaces.iter().any(|ws| {
            ws.apps.iter().any(|app| {
                app.apple_bundle_id.is_some()
                    || !app.apple_environments.is_empty()
                    || app.placements.iter().any(|p| {
                        p.rules.iter().any(|r| {
                            !r.enabled
                                || r.experiment.as_ref().is_some_and(|e| {
                                    e.analysis.is_some()
                                        || e.starts_at.is_some()
                                        || e.ends_at.is_some()
                                        || e.variants.iter().any(|v| v.flow_version.is_some())
                                })
                        })
                    })
            })
        });
        if format_2 {
            2
        } else {
            1
        }
    }
}

/// The elements of a JSON array, none when `value` is missing or not an array (the shape
/// check reports that).
fn items(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// Every app of a catalog file's JSON, with its pointer.
fn apps_of(file: &Value) -> Vec<(String, &Value)> {
    let mut found = Vec::new();
    for (w, ws) in items(file.get("workspaces")).iter().enumerate() {
        for (a, app) in items(ws.get("apps")).iter().enumerate() {
            found.push((format!("/workspaces/{w}/apps/{a}"), app));
        }
    }
    found
}

/// The pointer and name of every member of format 2 in a catalog file's JSON, in document
/// order: an app's `apple_bundle_id` and `apple_environments`, a rule's `enabled`, an
/// experiment's `analysis`, `starts_at` and `ends_at`, a variant's `flow_version`.
fn format_2_members(file: &Value) -> Vec<(String, &'static str)> {
    let mut found = Vec::new();
    for (ap, app) in apps_of(file) {
        for member in ["apple_bundle_id", "apple_environments"] {
            if app.get(member).is_some() {
                found.push((format!("{ap}/{member}"), member));
            }
        }
        for (p, placement) in items(app.get("placements")).iter().enumerate() {
            for (r, rule) in items(placement.get("rules")).iter().enumerate() {
                // Whatever its value: `"enabled": true` is no member of format 1 either.
                if rule.get("enabled").is_some() {
                    found.push((format!("{ap}/placements/{p}/rules/{r}/enabled"), "enabled"));
                }
                let Some(experiment) = rule.get("experiment") else {
                    continue;
                };
                let ep = format!("{ap}/placements/{p}/rules/{r}/experiment");
                for member in ["analysis", "starts_at", "ends_at"] {
                    if experiment.get(member).is_some() {
                        found.push((format!("{ep}/{member}"), member));
                    }
                }
                for (v, variant) in items(experiment.get("variants")).iter().enumerate() {
                    if variant.get("flow_version").is_some() {
                        found.push((format!("{ep}/variants/{v}/flow_version"), "flow_version"));
                    }
                }
            }
        }
    }
    found
}

fn pointer_of(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut pointer = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => pointer.push_str(&format!("/{index}")),
            Segment::Map { key } => {
                pointer.push('/');
                pointer.push_str(&escape(key));
            }
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    pointer
}

/// The expected shape of a JSON value in a catalog file.
#[derive(Clone, Copy)]
enum Shape {
    /// An object with exactly these fields (no others).
    Object(&'static [Field]),
    /// An array of values of one shape.
    Array(&'static Shape),
    /// An object with any keys, values of one shape.
    Map(&'static Shape),
    /// A hyphenated UUID string.
    Uuid,
    /// Any string.
    Str,
    /// An RFC 3339 time with its offset, e.g. `2026-12-01T09:00:00Z`.
    Time,
    /// An integer in `min..=max`.
    Int { min: u64, max: u64 },
    /// Any number.
    Number,
    /// `true` or `false`.
    Bool,
    /// One of these strings.
    Enum(&'static [&'static str]),
    /// `[string, number, number]`.
    Namespace,
    /// Any JSON value.
    Any,
}

#[derive(Clone, Copy)]
struct Field {
    name: &'static str,
    shape: Shape,
    required: bool,
    /// `null` is accepted (the field is an `Option`).
    nullable: bool,
}

const fn required(name: &'static str, shape: Shape) -> Field {
    Field {
        name,
        shape,
        required: true,
        nullable: false,
    }
}

/// May be omitted or `null`.
const fn optional(name: &'static str, shape: Shape) -> Field {
    Field {
        name,
        shape,
        required: false,
        nullable: true,
    }
}

/// May be omitted, but not `null` (a list or map with a default).
const fn defaulted(name: &'static str, shape: Shape) -> Field {
    Field {
        name,
        shape,
        required: false,
        nullable: false,
    }
}

const U32: u64 = u32::MAX as u64;
const POSITIVE: Shape = Shape::Int { min: 1, max: U32 };

const FONT: Shape = Shape::Object(&[
    required("family", Shape::Str),
    required("weight", Shape::Int { min: 100, max: 900 }),
    required("style", Shape::Enum(&["normal", "italic"])),
    required("url", Shape::Str),
]);

const VERSION: Shape = Shape::Object(&[
    required("id", Shape::Uuid),
    required("version", POSITIVE),
    required("schema_version", POSITIVE),
    defaulted("fonts", Shape::Array(&FONT)),
    required("flow_schema", Shape::Any),
]);

const FLOW: Shape = Shape::Object(&[
    required("id", Shape::Uuid),
    required("name", Shape::Str),
    optional("published_version", POSITIVE),
    defaulted("versions", Shape::Array(&VERSION)),
]);

const VARIANT: Shape = Shape::Object(&[
    required("id", Shape::Uuid),
    required("name", Shape::Str),
    required("weight", Shape::Number),
    optional("flow_id", Shape::Uuid),
    optional("flow_version", POSITIVE),
]);

const EXPERIMENT: Shape = Shape::Object(&[
    required("id", Shape::Uuid),
    required("name", Shape::Str),
    required(
        "status",
        Shape::Enum(&["running", "paused", "draft", "concluded"]),
    ),
    optional("seed", Shape::Str),
    optional("coverage", Shape::Number),
    optional("namespace", Shape::Namespace),
    optional("hash_version", Shape::Int { min: 1, max: 2 }),
    defaulted("sticky", Shape::Bool),
    defaulted("bucket_version", Shape::Int { min: 0, max: U32 }),
    defaulted("min_bucket_version", Shape::Int { min: 0, max: U32 }),
    optional("fallback_attribute", Shape::Str),
    optional("analysis", ANALYSIS),
    optional("starts_at", Shape::Time),
    optional("ends_at", Shape::Time),
    required("variants", Shape::Array(&VARIANT)),
]);

const ANALYSIS: Shape = Shape::Object(&[
    optional("primary_metric", Shape::Str),
    defaulted("guardrail_metrics", Shape::Array(&Shape::Str)),
    optional("sequential", Shape::Bool),
    optional("minimum_users", POSITIVE),
]);

const RULE: Shape = Shape::Object(&[
    defaulted("enabled", Shape::Bool),
    optional("audience", Shape::Any),
    optional("flow_id", Shape::Uuid),
    optional("experiment", EXPERIMENT),
]);

const PLACEMENT: Shape = Shape::Object(&[
    required("key", Shape::Str),
    optional("default_flow_id", Shape::Uuid),
    defaulted("rules", Shape::Array(&RULE)),
]);

const APP: Shape = Shape::Object(&[
    required("id", Shape::Uuid),
    required("name", Shape::Str),
    required("media_base_url", Shape::Str),
    required("icon_base_url", Shape::Str),
    optional("cache_ttl_seconds", Shape::Int { min: 0, max: U32 }),
    optional("apple_bundle_id", Shape::Str),
    defaulted("apple_environments", Shape::Array(&Shape::Str)),
    defaulted("saved_groups", Shape::Map(&Shape::Array(&Shape::Any))),
    defaulted("flows", Shape::Array(&FLOW)),
    defaulted("placements", Shape::Array(&PLACEMENT)),
]);

const KEY: Shape = Shape::Object(&[
    required("key", Shape::Str),
    defaulted("type", Shape::Str),
    required("name", Shape::Str),
]);

const WORKSPACE: Shape = Shape::Object(&[
    required("id", Shape::Uuid),
    required("name", Shape::Str),
    defaulted("api_keys", Shape::Array(&KEY)),
    defaulted("apps", Shape::Array(&APP)),
]);

const FILE: Shape = Shape::Object(&[
    defaulted("format", POSITIVE),
    required("workspaces", Shape::Array(&WORKSPACE)),
]);

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn push(problems: &mut Vec<Problem>, pointer: String, message: String) {
    problems.push(Problem { pointer, message });
}

/// Checks `value` against `shape`, pushing one problem per mismatch (and descending into
/// every element, so all of them are found).
fn check(problems: &mut Vec<Problem>, shape: &Shape, value: &Value, pointer: String) {
    let expected = |what: &str| format!("must be {what}, not {}", type_name(value));
    match (shape, value) {
        (Shape::Any, _) => {}
        (Shape::Object(fields), Value::Object(map)) => {
            for field in fields.iter() {
                let at = format!("{pointer}/{}", field.name);
                match map.get(field.name) {
                    // A missing field is a problem of the object that lacks it.
                    None if field.required => push(
                        problems,
                        pointer.clone(),
                        format!("missing field `{}`", field.name),
                    ),
                    None => {}
                    Some(Value::Null) if field.nullable => {}
                    Some(inner) => check(problems, &field.shape, inner, at),
                }
            }
            for key in map.keys() {
                if !fields.iter().any(|f| f.name == key) {
                    let known: Vec<&str> = fields.iter().map(|f| f.name).collect();
                    push(
                        problems,
                        format!("{pointer}/{}", escape(key)),
                        format!(
                            "unknown field `{key}`; expected one of {}",
                            known.join(", ")
                        ),
                    );
                }
            }
        }
        (Shape::Object(_), _) => push(problems, pointer, expected("an object")),
        (Shape::Array(item), Value::Array(items)) => {
            for (i, inner) in items.iter().enumerate() {
                check(problems, item, inner, format!("{pointer}/{i}"));
            }
        }
        (Shape::Array(_), _) => push(problems, pointer, expected("an array")),
        (Shape::Map(item), Value::Object(map)) => {
            for (key, inner) in map {
                check(problems, item, inner, format!("{pointer}/{}", escape(key)));
            }
        }
        (Shape::Map(_), _) => push(problems, pointer, expected("an object")),
        (Shape::Uuid, Value::String(s)) => {
            if parse_hyphenated(s).is_err() {
                push(
                    problems,
                    pointer,
                    format!("`{s}` is not a UUID in its hyphenated form"),
                );
            }
        }
        (Shape::Uuid, _) => push(problems, pointer, expected("a UUID string")),
        (Shape::Str, Value::String(_)) => {}
        (Shape::Str, _) => push(problems, pointer, expected("a string")),
        (Shape::Time, Value::String(s)) => {
            if OffsetDateTime::parse(s, &Rfc3339).is_err() {
                push(
                    problems,
                    pointer,
                    format!(
                        "must be an RFC 3339 time with its offset (e.g. 2026-12-01T09:00:00Z), not {}",
                        shown(value)
                    ),
                );
            }
        }
        (Shape::Time, _) => push(problems, pointer, expected("an RFC 3339 time string")),
        (Shape::Int { min, max }, Value::Number(n)) => {
            if !n.as_u64().is_some_and(|n| (*min..=*max).contains(&n)) {
                push(
                    problems,
                    pointer,
                    format!("must be an integer from {min} to {max}, not {n}"),
                );
            }
        }
        (Shape::Int { min, max }, _) => push(
            problems,
            pointer,
            expected(&format!("an integer from {min} to {max}")),
        ),
        (Shape::Number, Value::Number(_)) => {}
        (Shape::Number, _) => push(problems, pointer, expected("a number")),
        (Shape::Bool, Value::Bool(_)) => {}
        (Shape::Bool, _) => push(problems, pointer, expected("true or false")),
        (Shape::Enum(names), Value::String(s)) => {
            if !names.contains(&s.as_str()) {
                push(
                    problems,
                    pointer,
                    format!("`{s}` is not one of {}", names.join(", ")),
                );
            }
        }
        (Shape::Enum(names), _) => push(
            problems,
            pointer,
            expected(&format!("one of the strings {}", names.join(", "))),
        ),
        (Shape::Namespace, Value::Array(items))
            if items.len() == 3
                && items[0].is_string()
                && items[1].is_number()
                && items[2].is_number() => {}
        (Shape::Namespace, _) => push(
            problems,
            pointer,
            "must be [id, start, end]: a string and two numbers".to_owned(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pointers(json: &str) -> Vec<String> {
        match CatalogFile::parse(json) {
            Ok(_) => Vec::new(),
            Err(problems) => problems.into_iter().map(|p| p.pointer).collect(),
        }
    }

    #[test]
    fn flow_schema_keeps_its_exact_text() {
        let schema = r#"{"b": 1.50, "a": 123456789012345678901234567890}"#;
        let json = format!(
            r#"{{"workspaces": [{{"id": "10000000-0000-4000-8000-000000000001", "name": "A",
                "apps": [{{"id": "20000000-0000-4000-8000-000000000001", "name": "x",
                  "media_base_url": "https://m/", "icon_base_url": "https://i/",
                  "flows": [{{"id": "30000000-0000-4000-8000-000000000001", "name": "f",
                    "versions": [{{"id": "40000000-0000-4000-8000-000000000001", "version": 1,
                      "schema_version": 1, "flow_schema": {schema}}}]}}]}}]}}]}}"#
        );
        let file = CatalogFile::parse(&json).expect("parses");
        let version = &file.workspaces[0].apps[0].flows[0].versions[0];
        assert_eq!(version.flow_schema.get(), schema);
    }

    #[test]
    fn a_minimal_file_parses() {
        let file = CatalogFile::parse(
            r#"{"workspaces": [{"id": "10000000-0000-4000-8000-000000000001", "name": "A",
                "api_keys": [{"key": "k", "name": "ios"}]}]}"#,
        )
        .expect("parses");
        assert_eq!(file.workspaces[0].api_keys[0].key_type, "sdk");
    }

    #[test]
    fn every_structural_problem_is_listed() {
        let json = r#"{"workspaces": [{"id": "not-a-uuid", "name": 3, "extra": true,
            "apps": [{"id": "20000000-0000-4000-8000-000000000001", "name": "x",
                      "media_base_url": "https://m/", "icon_base_url": "https://i/",
                      "cache_ttl_seconds": -1,
                      "flows": [{"id": "30000000-0000-4000-8000-000000000001", "name": "f",
                                 "published_version": null,
                                 "versions": [{"id": "40000000-0000-4000-8000-000000000001",
                                               "version": "2", "flow_schema": {}}]}],
                      "placements": [{"key": "p", "rules": [{"experiment": {
                          "id": "50000000-0000-4000-8000-000000000001", "name": "e",
                          "status": "live", "variants": [], "namespace": ["n", 0]}}]}]}]}]}"#;
        assert_eq!(
            pointers(json),
            vec![
                "/workspaces/0/id",
                "/workspaces/0/name",
                "/workspaces/0/apps/0/cache_ttl_seconds",
                "/workspaces/0/apps/0/flows/0/versions/0/version",
                "/workspaces/0/apps/0/flows/0/versions/0",
                "/workspaces/0/apps/0/placements/0/rules/0/experiment/status",
                "/workspaces/0/apps/0/placements/0/rules/0/experiment/namespace",
                "/workspaces/0/extra",
            ]
        );
    }

    const WS: &str = r#"[{"id": "10000000-0000-4000-8000-000000000001", "name": "A"}]"#;

    #[test]
    fn a_file_without_format_is_format_1_and_one_with_it_says_so() {
        let file = CatalogFile::parse(&format!(r#"{{"workspaces": {WS}}}"#)).expect("parses");
        assert_eq!(file.format, 1, "missing: the first format");
        let file =
            CatalogFile::parse(&format!(r#"{{"format": 1, "workspaces": {WS}}}"#)).expect("parses");
        assert_eq!(file.format, 1);
        assert_eq!(CatalogFile::FORMAT, 2);
    }

    const ANALYSED: &str = r#"{"id": "10000000-0000-4000-8000-000000000001", "name": "A",
        "apps": [{"id": "20000000-0000-4000-8000-000000000001", "name": "a",
        "media_base_url": "https://m", "icon_base_url": "https://i", "placements": [
        {"key": "p", "rules": [{"experiment": {"id": "30000000-0000-4000-8000-000000000001",
        "name": "e", "status": "running", "variants": [],
        "analysis": {"primary_metric": "flow_complete", "minimum_users": 50}}}]}]}]}"#;

    const SCHEDULED: &str = r#"{"id": "10000000-0000-4000-8000-000000000001", "name": "A",
        "apps": [{"id": "20000000-0000-4000-8000-000000000001", "name": "a",
        "media_base_url": "https://m", "icon_base_url": "https://i", "placements": [
        {"key": "p", "rules": [{"experiment": {"id": "30000000-0000-4000-8000-000000000001",
        "name": "e", "status": "draft", "starts_at": "2026-12-01T09:00:00Z",
        "ends_at": "2026-12-15T09:00:00+01:00", "variants": [{"id":
        "40000000-0000-4000-8000-000000000001", "name": "v", "weight": 1, "flow_id":
        "50000000-0000-4000-8000-000000000001", "flow_version": 3}]}}]}]}]}"#;

    #[test]
    fn schedules_and_pinned_versions_are_members_of_format_2_only() {
        let e = "/workspaces/0/apps/0/placements/0/rules/0/experiment";
        let problems = CatalogFile::parse(&format!(r#"{{"workspaces": [{SCHEDULED}]}}"#))
            .expect_err("format 1 has none of them");
        let at: Vec<&str> = problems.iter().map(|p| p.pointer.as_str()).collect();
        assert_eq!(
            at,
            [
                format!("{e}/starts_at"),
                format!("{e}/ends_at"),
                format!("{e}/variants/0/flow_version")
            ]
        );
        let file = CatalogFile::parse(&format!(r#"{{"format": 2, "workspaces": [{SCHEDULED}]}}"#))
            .expect("format 2 reads them");
        assert_eq!(file.lowest_format(), 2);
        let experiment = file.workspaces[0].apps[0].placements[0].rules[0]
            .experiment
            .as_ref()
            .expect("kept");
        assert_eq!(
            experiment.starts_at,
            Some(time::macros::datetime!(2026-12-01 09:00 UTC))
        );
        assert_eq!(
            experiment.ends_at,
            Some(time::macros::datetime!(2026-12-15 08:00 UTC)),
            "the offset applied"
        );
        assert_eq!(experiment.variants[0].flow_version, Some(3));
        // A time that is not RFC 3339 with its offset is quoted at its pointer.
        for bad in [r#""2026-12-01 09:00""#, r#""2026-12-01T09:00:00""#, "17"] {
            let text = SCHEDULED.replace(r#""2026-12-01T09:00:00Z""#, bad);
            let problems =
                CatalogFile::parse(&format!(r#"{{"format": 2, "workspaces": [{text}]}}"#))
                    .expect_err("refused");
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].pointer, format!("{e}/starts_at"));
            assert!(
                problems[0].message.contains("RFC 3339"),
                "{}",
                problems[0].message
            );
        }
    }

    #[test]
    fn analysis_is_a_member_of_format_2_only() {
        let at = "/workspaces/0/apps/0/placements/0/rules/0/experiment/analysis";
        for head in ["", r#""format": 1,"#] {
            let problems = CatalogFile::parse(&format!(r#"{{{head} "workspaces": [{ANALYSED}]}}"#))
                .expect_err("format 1 has no analysis");
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].pointer, at);
            assert!(
                problems[0].message.contains("add \"format\": 2"),
                "{problems:?}"
            );
        }
        let file = CatalogFile::parse(&format!(r#"{{"format": 2, "workspaces": [{ANALYSED}]}}"#))
            .expect("format 2 reads it");
        assert_eq!(file.format, 2);
        assert_eq!(file.lowest_format(), 2);
        let analysis = file.workspaces[0].apps[0].placements[0].rules[0]
            .experiment
            .as_ref()
            .and_then(|e| e.analysis.clone())
            .expect("kept");
        assert_eq!(analysis.primary_metric.as_deref(), Some("flow_complete"));
        assert_eq!(analysis.minimum_users, Some(50));
        assert_eq!(analysis.sequential, None, "absent: the default");
    }

    /// A placement whose second rule is off (D28), and nothing else of format 2.
    const RULE_OFF: &str = r#"{"id": "10000000-0000-4000-8000-000000000001", "name": "A",
        "apps": [{"id": "20000000-0000-4000-8000-000000000001", "name": "a",
        "media_base_url": "https://m", "icon_base_url": "https://i", "placements": [
        {"key": "p", "rules": [{"flow_id": "30000000-0000-4000-8000-000000000001"},
        {"enabled": false, "flow_id": "30000000-0000-4000-8000-000000000002"}]}]}]}"#;

    #[test]
    fn a_rules_enabled_is_a_member_of_format_2_only() {
        let at = "/workspaces/0/apps/0/placements/0/rules/1/enabled";
        // `true` too: the member itself is what format 1 does not have.
        for value in ["false", "true"] {
            let ws = RULE_OFF.replace(r#""enabled": false"#, &format!(r#""enabled": {value}"#));
            for head in ["", r#""format": 1,"#] {
                let problems = CatalogFile::parse(&format!(r#"{{{head} "workspaces": [{ws}]}}"#))
                    .expect_err("format 1 has no enabled");
                let found: Vec<(&str, &str)> = problems
                    .iter()
                    .map(|p| (p.pointer.as_str(), p.message.as_str()))
                    .collect();
                assert_eq!(
                    found,
                    [(
                        at,
                        "`enabled` is a member of catalog format 2, and this file is format 1: \
                         add \"format\": 2 at the top of the file"
                    )]
                );
            }
        }
        let file = CatalogFile::parse(&format!(r#"{{"format": 2, "workspaces": [{RULE_OFF}]}}"#))
            .expect("format 2 reads it");
        let rules = &file.workspaces[0].apps[0].placements[0].rules;
        assert!(rules[0].enabled, "absent: on");
        assert!(!rules[1].enabled);
        assert_eq!(file.lowest_format(), 2, "a rule that is off");
        let mut on = file.clone();
        on.workspaces[0].apps[0].placements[0].rules[1].enabled = true;
        assert_eq!(
            on.lowest_format(),
            1,
            "every rule on: the previous release imports it"
        );
        let text = serde_json::to_string(&on).expect("serialises");
        assert!(!text.contains("enabled"), "written only when false: {text}");
        // Not a boolean: the shape's problem, at its pointer.
        let mistyped = RULE_OFF.replace(r#""enabled": false"#, r#""enabled": "no""#);
        assert_eq!(
            pointers(&format!(r#"{{"format": 2, "workspaces": [{mistyped}]}}"#)),
            [at]
        );
        let null = RULE_OFF.replace(r#""enabled": false"#, r#""enabled": null"#);
        assert_eq!(
            pointers(&format!(r#"{{"format": 2, "workspaces": [{null}]}}"#)),
            [at]
        );
    }

    /// An app with the App Store fields (D30) and nothing else of format 2.
    const STORE_APP: &str = r#"{"id": "10000000-0000-4000-8000-000000000001", "name": "A",
        "apps": [{"id": "20000000-0000-4000-8000-000000000001", "name": "a",
        "media_base_url": "https://m", "icon_base_url": "https://i",
        "apple_bundle_id": "com.example.app", "apple_environments": ["Sandbox"]}]}"#;

    #[test]
    fn app_store_fields_are_members_of_format_2_only() {
        let at = "/workspaces/0/apps/0";
        for head in ["", r#""format": 1,"#] {
            let problems =
                CatalogFile::parse(&format!(r#"{{{head} "workspaces": [{STORE_APP}]}}"#))
                    .expect_err("format 1 has no App Store fields");
            let found: Vec<(&str, &str)> = problems
                .iter()
                .map(|p| (p.pointer.as_str(), p.message.as_str()))
                .collect();
            let message = |member: &str| {
                format!(
                    "`{member}` is a member of catalog format 2, and this file is format 1: add \
                     \"format\": 2 at the top of the file"
                )
            };
            assert_eq!(
                found,
                [
                    (
                        format!("{at}/apple_bundle_id").as_str(),
                        message("apple_bundle_id").as_str()
                    ),
                    (
                        format!("{at}/apple_environments").as_str(),
                        message("apple_environments").as_str()
                    ),
                ]
            );
        }
        // Either member alone is refused too.
        let only_environments = STORE_APP.replace(r#""apple_bundle_id": "com.example.app","#, "");
        assert_eq!(
            pointers(&format!(r#"{{"workspaces": [{only_environments}]}}"#)),
            [format!("{at}/apple_environments")]
        );
        let file = CatalogFile::parse(&format!(r#"{{"format": 2, "workspaces": [{STORE_APP}]}}"#))
            .expect("format 2 reads them");
        let app = &file.workspaces[0].apps[0];
        assert_eq!(app.apple_bundle_id.as_deref(), Some("com.example.app"));
        assert_eq!(app.apple_environments, ["Sandbox"]);
    }

    #[test]
    fn an_export_using_only_the_app_store_fields_is_format_2() {
        let file = CatalogFile::parse(&format!(r#"{{"format": 2, "workspaces": [{STORE_APP}]}}"#))
            .expect("parses");
        assert_eq!(file.lowest_format(), 2, "both fields");
        let mut only = file.clone();
        only.workspaces[0].apps[0].apple_environments.clear();
        assert_eq!(only.lowest_format(), 2, "the bundle id alone");
        only.workspaces[0].apps[0].apple_bundle_id = None;
        assert_eq!(
            only.lowest_format(),
            1,
            "neither: the previous release imports it"
        );
        only.workspaces[0].apps[0].apple_environments = vec!["Production".to_owned()];
        assert_eq!(only.lowest_format(), 2, "the environments alone");
    }

    #[test]
    fn an_empty_list_of_app_store_environments_is_refused() {
        let empty = STORE_APP.replace(r#"["Sandbox"]"#, "[]");
        let problems = CatalogFile::parse(&format!(r#"{{"format": 2, "workspaces": [{empty}]}}"#))
            .expect_err("empty");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(
            problems[0].pointer,
            "/workspaces/0/apps/0/apple_environments"
        );
        assert!(
            problems[0]
                .message
                .starts_with("must list at least one App Store environment"),
            "{problems:?}"
        );
        // Wrong JSON types are the shape's problems, at their pointers.
        let mistyped = STORE_APP
            .replace(r#""com.example.app""#, "7")
            .replace(r#"["Sandbox"]"#, r#"["Sandbox", 1]"#);
        assert_eq!(
            pointers(&format!(r#"{{"format": 2, "workspaces": [{mistyped}]}}"#)),
            [
                "/workspaces/0/apps/0/apple_bundle_id",
                "/workspaces/0/apps/0/apple_environments/1"
            ]
        );
    }

    #[test]
    fn analysis_members_are_checked_and_typos_refused() {
        let bad = ANALYSED.replace(
            r#""minimum_users": 50"#,
            r#""minimum_users": 0, "sequental": true, "guardrail_metrics": "refund""#,
        );
        let at = "/workspaces/0/apps/0/placements/0/rules/0/experiment/analysis";
        assert_eq!(
            pointers(&format!(r#"{{"format": 2, "workspaces": [{bad}]}}"#)),
            vec![
                format!("{at}/guardrail_metrics"),
                format!("{at}/minimum_users"),
                format!("{at}/sequental"),
            ]
        );
    }

    #[test]
    fn a_newer_format_is_refused_naming_both_versions() {
        // Whatever else it holds: this release cannot know what format 3 means.
        let problems = CatalogFile::parse(&format!(
            r#"{{"format": 3, "workspaces": {WS}, "added_in_3": true}}"#
        ))
        .expect_err("newer");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].pointer, "/format");
        assert_eq!(
            problems[0].message,
            "this file is catalog format 3, newer than this release reads (format 2): import it \
             with a release that reads format 3"
        );
    }

    #[test]
    fn a_format_is_a_positive_integer() {
        for bad in ["0", "\"1\"", "null", "1.5", "-1"] {
            let json = format!(r#"{{"format": {bad}, "workspaces": {WS}}}"#);
            assert_eq!(pointers(&json), vec!["/format"], "{bad}");
        }
    }

    #[test]
    fn unknown_members_stay_refused_in_a_known_format() {
        // Typos are caught in every format this release reads (see the module's Versions).
        let json = r#"{"format": 1, "workspaces": [{"id": "10000000-0000-4000-8000-000000000001",
            "name": "A", "wieght": 1}], "extra": 2}"#;
        assert_eq!(pointers(json), vec!["/workspaces/0/wieght", "/extra"]);
    }

    #[test]
    fn syntax_errors_and_duplicate_fields_are_reported() {
        assert_eq!(pointers("{"), vec![""]);
        assert_eq!(pointers("{}"), vec![""]);
        let twice = r#"{"workspaces": [{"id": "10000000-0000-4000-8000-000000000001",
            "name": "a", "name": "b"}]}"#;
        // The generic value keeps the last `name`; the typed parse notices, at the object.
        let problems = CatalogFile::parse(twice).expect_err("duplicate field");
        assert_eq!(problems[0].pointer, "/workspaces/0");
        assert!(
            problems[0].message.contains("duplicate field `name`"),
            "{problems:?}"
        );
    }
}
