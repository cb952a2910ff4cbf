//! Fixtures of the contract cases: a small catalog, key records and analytics events.
//!
//! Everything is deterministic (fixed ids and times), and the catalog is written in the order
//! every implementation loads it back (workspaces, apps and flows by id, versions by number,
//! placements by key in byte order), so a round trip can be compared as a whole.
//!
//! [`catalogs`] holds the catalog fixtures of the other crates' integration tests and
//! benchmarks; [`scale`] the data sets at scale (the benchmark catalog, the million-user
//! experiment); [`FaultStore`] is the event and dead-letter store with faults a test switches.

pub mod catalogs;
mod fault_store;
pub mod scale;

pub use fault_store::FaultStore;

use flowgate_domain::catalog::CatalogData;
use flowgate_domain::ids::{KeyId, WorkspaceId};
use flowgate_domain::keys::{ApiKey, KeyEnvironment, KeyRecord, KeyType};
use time::macros::datetime;
use time::OffsetDateTime;
use uuid::Uuid;

/// The first workspace (owns the app).
pub const WS1: Uuid = Uuid::from_u128(0x1000_0000_0000_4000_8000_0000_0000_0001);
/// The second workspace (no apps).
pub const WS2: Uuid = Uuid::from_u128(0x1000_0000_0000_4000_8000_0000_0000_0002);
/// The app of [`WS1`].
pub const APP1: Uuid = Uuid::from_u128(0x2000_0000_0000_4000_8000_0000_0000_0001);
/// The flow whose version 2 carries [`EXACT_SCHEMA`].
pub const FLOW_US: Uuid = Uuid::from_u128(0x3000_0000_0000_4000_8000_0000_0000_0001);
/// The version carrying [`EXACT_SCHEMA`].
pub const V_US_2: Uuid = Uuid::from_u128(0x4000_0000_0000_4000_8000_0000_0000_0002);

/// A `flow_schema` as published: keys out of alphabetical order, integers beyond 2^53 (and
/// beyond u64), numbers in forms a re-encoder would change, escapes and inner whitespace. D2:
/// it must come back byte for byte.
pub const EXACT_SCHEMA: &str = r#"{"zeta": 1, "alpha": {"big": 123456789012345678901234567890, "n": 9007199254740993, "f": 1.50, "e": 1E3}, "mid": "caf\u00e9 \"q\"", "list": [ 3, 2,1 ]}"#;

/// The catalog as D13 JSON text: two workspaces; one app with saved groups, three flows (one
/// never published, one with two versions and fonts), and placements whose rules mix flow
/// targets and experiments (paused, running with seed, coverage, namespace and a holdout),
/// the variants in an order that is neither alphabetical nor by id (a load keeps it). No keys.
pub fn catalog_json() -> String {
    format!(
        r#"{{
  "workspaces": [
    {{"id": "{WS1}", "name": "Acme", "apps": [{{
      "id": "{APP1}", "name": "Acme iOS",
      "media_base_url": "https://cdn.example.com/media/",
      "icon_base_url": "https://cdn.example.com/icons/",
      "cache_ttl_seconds": 120,
      "saved_groups": {{"beta": ["u-beta-1", "u-beta-2", 7]}},
      "flows": [
        {{"id": "{FLOW_US}", "name": "US onboarding", "published_version": 2, "versions": [
          {{"id": "40000000-0000-4000-8000-000000000001", "version": 1, "schema_version": 1, "fonts": [], "flow_schema": {{"screens": []}}}},
          {{"id": "{V_US_2}", "version": 2, "schema_version": 3,
           "fonts": [{{"family": "Inter", "weight": 700, "style": "italic", "url": "https://cdn.example.com/inter-bi.woff2"}},
                     {{"family": "Inter", "weight": 400, "style": "normal", "url": "https://cdn.example.com/inter.woff2"}}],
           "flow_schema": {EXACT_SCHEMA}}}
        ]}},
        {{"id": "30000000-0000-4000-8000-000000000002", "name": "Default", "published_version": 1, "versions": [
          {{"id": "40000000-0000-4000-8000-000000000003", "version": 1, "schema_version": 1, "fonts": [], "flow_schema": {{"screens": ["default"]}}}}
        ]}},
        {{"id": "30000000-0000-4000-8000-000000000003", "name": "Draft", "published_version": null, "versions": [
          {{"id": "40000000-0000-4000-8000-000000000004", "version": 1, "schema_version": 1, "fonts": [], "flow_schema": {{}}}}
        ]}}
      ],
      "placements": [
        {{"key": "empty"}},
        {{"key": "onboarding", "default_flow_id": "30000000-0000-4000-8000-000000000002", "rules": [
          {{"audience": {{"country": "US"}}, "flow_id": "{FLOW_US}"}},
          {{"audience": {{}}, "flow_id": "30000000-0000-4000-8000-000000000003"}},
          {{"flow_id": "30000000-0000-4000-8000-000000000002"}}
        ]}},
        {{"key": "paywall", "rules": [
          {{"audience": {{}}, "experiment": {{
            "id": "50000000-0000-4000-8000-000000000002", "name": "old-test", "status": "paused",
            "variants": [{{"id": "60000000-0000-4000-8000-000000000003", "name": "only", "weight": 1, "flow_id": "{FLOW_US}"}}]}}}},
          {{"experiment": {{
            "id": "50000000-0000-4000-8000-000000000001", "name": "paywall-test", "status": "running",
            "seed": "paywall-seed", "coverage": 0.5, "namespace": ["pricing", 0.0, 0.5],
            "variants": [{{"id": "60000000-0000-4000-8000-000000000005", "name": "new", "weight": 2.5, "flow_id": "{FLOW_US}"}},
                         {{"id": "60000000-0000-4000-8000-000000000004", "name": "control", "weight": 1, "flow_id": null}}]}}}}
        ]}}
      ]
    }}]}},
    {{"id": "{WS2}", "name": "Other", "apps": []}}
  ]
}}"#
    )
}

/// [`catalog_json`] parsed the way a store or a file import does (`flow_schema` kept raw).
///
/// # Panics
/// Never: the fixture is valid JSON of the catalog shape.
pub fn catalog() -> CatalogData {
    match serde_json::from_str(&catalog_json()) {
        Ok(data) => data,
        Err(e) => panic!("the fixture catalog does not parse: {e}"),
    }
}

/// [`catalog`] with every member of catalog format 2: analysis settings (D27) on its running
/// experiment [`catalogs::EXP`], and the App Store fields (D30) on its first app
/// (`apple_bundle_id` `com.example.acme`, `apple_environments` `["Production", "Sandbox"]`).
///
/// # Panics
/// Never: the fixture has that experiment.
pub fn catalog_with_analysis() -> CatalogData {
    let mut data = catalog();
    if let Some(app) = data.workspaces.iter_mut().flat_map(|w| &mut w.apps).next() {
        app.apple_bundle_id = Some("com.example.acme".to_owned());
        app.apple_environments = vec!["Production".to_owned(), "Sandbox".to_owned()];
    }
    let experiment = data
        .workspaces
        .iter_mut()
        .flat_map(|w| w.apps.iter_mut())
        .flat_map(|a| a.placements.iter_mut())
        .flat_map(|p| p.rules.iter_mut())
        .filter_map(|r| r.experiment.as_mut())
        .find(|e| e.id.to_string() == catalogs::EXP);
    if let Some(experiment) = experiment {
        experiment.analysis = Some(flowgate_domain::catalog::AnalysisData {
            primary_metric: Some("flow_complete".to_owned()),
            guardrail_metrics: vec!["revenue".to_owned(), "purchase_fail".to_owned()],
            sequential: Some(false),
            minimum_users: Some(250),
        });
    }
    data
}

/// The plaintext test key whose random part is `fill` repeated.
pub fn api_key(fill: char) -> ApiKey {
    ApiKey::from_random(KeyEnvironment::Test, &fill.to_string().repeat(30))
}

/// The `Authorization` header value carrying `key`.
pub fn bearer(key: &ApiKey) -> String {
    format!("Bearer {}", key.expose())
}

/// An SDK key record of `workspace` for [`api_key`]`(fill)`, its id derived from `fill`.
pub fn key_record(workspace: Uuid, fill: char, created_at: OffsetDateTime) -> KeyRecord {
    KeyRecord::new(
        KeyId::from_uuid(Uuid::from_u128(
            0x7000_0000_0000_4000_8000_0000_0000_0000 | u128::from(u32::from(fill)),
        )),
        WorkspaceId::from_uuid(workspace),
        &api_key(fill),
        KeyType::Sdk,
        format!("key {fill}"),
        created_at,
    )
}

/// A fixed creation time, `n` minutes (and `n` microseconds) after the epoch of the fixtures.
pub fn at(n: i64) -> OffsetDateTime {
    datetime!(2026-05-01 10:00 UTC) + time::Duration::minutes(n) + time::Duration::microseconds(n)
}

/// The repository's `formats/` folder: a golden sample of every version ever written of each
/// format that outlives a process, at `formats/<format>/v<N>/<file>`, listed with its SHA-256
/// in `formats/MANIFEST.sha256` (D26).
pub fn formats_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../formats")
}

/// The SHA-256 of `bytes`, in lowercase hex (as `sha256sum` prints it).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Compares `actual` (what this release writes) with the committed golden sample at `path`,
/// byte for byte: a pinned format (`format` names it) that changed fails. A sample is never
/// rewritten (D26: the samples of every version stay, and today's reader must read each).
///
/// A sample that does not exist yet is written only when asked, with `WRITE_GOLDEN=1`, which
/// also prints the line to add to `formats/MANIFEST.sha256`; without it, a missing sample
/// fails. An existing one is never written, whatever the environment says.
pub fn assert_golden(path: &std::path::Path, actual: &[u8], format: &str) {
    let write_missing = std::env::var("WRITE_GOLDEN").as_deref() == Ok("1");
    assert_golden_with(path, actual, format, write_missing);
}

/// [`assert_golden`], with `WRITE_GOLDEN=1` given as `write_missing`.
pub fn assert_golden_with(
    path: &std::path::Path,
    actual: &[u8],
    format: &str,
    write_missing: bool,
) {
    match std::fs::read(path) {
        Ok(expected) => assert!(
            expected == actual,
            "the {format} format changed: what this release writes differs from the golden \
             sample {}, which is never rewritten. A new optional member (not a new version): \
             add a new sample beside it, compare the writer with that one and keep reading this \
             one; anything else needs a new version (formats/README.md).\nexpected:\n{}\nactual:\n{}",
            path.display(),
            String::from_utf8_lossy(&expected),
            String::from_utf8_lossy(actual)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !write_missing {
                panic!(
                    "{}: no such golden sample of {format}; WRITE_GOLDEN=1 writes a sample that \
                     does not exist yet (and prints its line for formats/MANIFEST.sha256)",
                    path.display()
                );
            }
            write_new_sample(path, actual);
        }
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// Writes a sample that does not exist (refusing to replace one that appeared meanwhile) and
/// prints its manifest line.
fn write_new_sample(path: &std::path::Path, bytes: &[u8]) {
    use std::io::Write;
    if let Some(parent) = path.parent() {
        if let Err(e) = std::fs::create_dir_all(parent) {
            panic!("{}: {e}", parent.display());
        }
    }
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut file| file.write_all(bytes));
    if let Err(e) = written {
        panic!(
            "{}: {e} (an existing sample is never rewritten)",
            path.display()
        );
    }
    let formats = formats_dir().canonicalize().ok();
    let shown = path
        .canonicalize()
        .ok()
        .and_then(|p| {
            formats
                .as_ref()
                .and_then(|f| p.strip_prefix(f).ok().map(|r| r.display().to_string()))
        })
        .unwrap_or_else(|| path.display().to_string());
    println!(
        "wrote the golden sample {}; add this line to formats/MANIFEST.sha256 (sorted):\n{}  {}",
        path.display(),
        sha256_hex(bytes),
        shown
    );
}
