//! Shared fixtures of the fuzz targets: the demo catalog (the same shape as
//! `crates/flowgate/src/demo.rs`) with a known SDK key, built through the validated import
//! path, and a fixed clock.

use flowgate_domain::catalog::{plan_import, Catalog, CatalogData, CatalogFile};
use flowgate_domain::keys::{ApiKey, KeyEnvironment};
use time::macros::datetime;
use time::OffsetDateTime;

/// The fixture's workspace.
pub const WORKSPACE: &str = "d0000000-0000-4000-8000-000000000001";
/// The fixture's app.
pub const APP: &str = "d0000000-0000-4000-8000-0000000000a1";
/// Another workspace's app (403 `forbidden_app`).
pub const OTHER_APP: &str = "d0000000-0000-4000-8000-0000000000a2";
/// The onboarding flow and its published version.
pub const FLOW: &str = "d0000000-0000-4000-8000-0000000000f1";
/// The onboarding flow's version 1.
pub const VERSION: &str = "d0000000-0000-4000-8000-0000000000e1";

/// The fixed time every target runs at (event timestamps are judged against it).
pub fn now() -> OffsetDateTime {
    datetime!(2026-01-01 12:00 UTC)
}

/// The fixture's SDK key (test environment).
pub fn sdk_key() -> String {
    ApiKey::from_random(KeyEnvironment::Test, "FuzzFuzzFuzzFuzzFuzzFuzzFuzz00")
        .expose()
        .to_owned()
}

/// The catalog file (D13) of the fixture, as JSON text.
pub fn catalog_text() -> String {
    let text = r#"{
  "workspaces": [{
    "id": "WS", "name": "Fuzz workspace",
    "api_keys": [{"key": "KEY", "name": "fuzz"}],
    "apps": [{
      "id": "APP", "name": "Fuzz app",
      "media_base_url": "https://cdn.example.com/media/",
      "icon_base_url": "https://cdn.example.com/icons/",
      "cache_ttl_seconds": 300,
      "saved_groups": {"beta_testers": ["beta-1", "beta-2"]},
      "flows": [
        {"id": "FW", "name": "Welcome", "published_version": 1, "versions": [
          {"id": "VW", "version": 1, "schema_version": 1, "fonts": [
             {"family": "Inter", "weight": 400, "style": "normal", "url": "https://cdn.example.com/fonts/inter.woff2"}],
           "flow_schema": {"screens": [{"id": "welcome", "type": "hero", "title": "Hi \u00e9 \ud83d\ude00"}]}}]},
        {"id": "FA", "name": "Paywall A", "published_version": 1, "versions": [
          {"id": "VA", "version": 1, "schema_version": 1, "fonts": [],
           "flow_schema": {"screens": [{"id": "paywall", "plans": ["monthly", "annual"]}]}}]},
        {"id": "FB", "name": "Paywall B", "versions": [
          {"id": "VB", "version": 1, "schema_version": 1, "fonts": [],
           "flow_schema": {"screens": []}}]}
      ],
      "placements": [
        {"key": "onboarding", "default_flow_id": "FW", "rules": [
          {"audience": {"user_id": {"$inGroup": "beta_testers"}}, "flow_id": "FW"},
          {"audience": {"app.version": {"$vgte": "2.0.0"}, "email": {"$regex": "^[a-z]+@example\\.com$"}}, "flow_id": "FA"}]},
        {"key": "paywall", "default_flow_id": "FA", "rules": [
          {"audience": {"country": {"$in": ["US", "CA", "GB"]}}, "experiment": {
            "id": "EXP", "name": "price-test", "status": "running", "coverage": 0.9,
            "variants": [
              {"id": "VARA", "name": "control", "weight": 1, "flow_id": "FA"},
              {"id": "VARB", "name": "trial", "weight": 1, "flow_id": "FB"}]}}]},
        {"key": "empty"}
      ]
    }]
  }, {
    "id": "WS2", "name": "Other workspace",
    "apps": [{"id": "APP2", "name": "Other app", "media_base_url": "https://cdn.example.com/",
              "icon_base_url": "https://cdn.example.com/", "flows": [], "placements": []}]
  }]
}"#;
    text.replace("\"WS\"", &format!("\"{WORKSPACE}\""))
        .replace("\"WS2\"", "\"d0000000-0000-4000-8000-000000000002\"")
        .replace("\"KEY\"", &format!("\"{}\"", sdk_key()))
        .replace("\"APP\"", &format!("\"{APP}\""))
        .replace("\"APP2\"", &format!("\"{OTHER_APP}\""))
        .replace("\"FW\"", &format!("\"{FLOW}\""))
        .replace("\"VW\"", &format!("\"{VERSION}\""))
        .replace("\"FA\"", "\"d0000000-0000-4000-8000-0000000000f2\"")
        .replace("\"VA\"", "\"d0000000-0000-4000-8000-0000000000e2\"")
        .replace("\"FB\"", "\"d0000000-0000-4000-8000-0000000000f3\"")
        .replace("\"VB\"", "\"d0000000-0000-4000-8000-0000000000e3\"")
        .replace("\"EXP\"", "\"d0000000-0000-4000-8000-0000000000c1\"")
        .replace("\"VARA\"", "\"d0000000-0000-4000-8000-0000000000b1\"")
        .replace("\"VARB\"", "\"d0000000-0000-4000-8000-0000000000b2\"")
}

/// The fixture catalog, imported into an empty store view and built.
pub fn catalog() -> Catalog {
    let file = CatalogFile::parse(&catalog_text()).expect("fixture file parses");
    let plan = plan_import(file, &CatalogData::default(), now()).expect("fixture plans");
    Catalog::build(plan.write).expect("fixture builds")
}
