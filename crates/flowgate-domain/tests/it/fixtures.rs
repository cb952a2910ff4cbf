//! Catalog fixtures shared by the integration tests and the benchmarks (which include this file
//! with `#[path]`). Catalogs are written as D13-shaped JSON, the way an operator writes them.
#![allow(dead_code)]

use flowgate_domain::ids::{KeyId, WorkspaceId};
use flowgate_domain::keys::{ApiKey, KeyEnvironment, KeyRecord, KeyType};
use flowgate_domain::{Catalog, CatalogData};
use serde_json::{json, Value};
use time::macros::datetime;

pub const WS1: &str = "10000000-0000-4000-8000-000000000001";
pub const WS2: &str = "10000000-0000-4000-8000-000000000002";
pub const APP1: &str = "20000000-0000-4000-8000-000000000001";
pub const APP2: &str = "20000000-0000-4000-8000-000000000002";
pub const FLOW_US: &str = "30000000-0000-4000-8000-000000000001";
pub const FLOW_DEFAULT: &str = "30000000-0000-4000-8000-000000000002";
pub const FLOW_NEW: &str = "30000000-0000-4000-8000-000000000003";
pub const FLOW_UNPUBLISHED: &str = "30000000-0000-4000-8000-000000000004";
pub const FLOW_APP2: &str = "30000000-0000-4000-8000-000000000005";
pub const V_US_1: &str = "40000000-0000-4000-8000-000000000001";
pub const V_US_2: &str = "40000000-0000-4000-8000-000000000002";
pub const V_DEFAULT_1: &str = "40000000-0000-4000-8000-000000000003";
pub const V_NEW_1: &str = "40000000-0000-4000-8000-000000000004";
pub const V_UNPUBLISHED_1: &str = "40000000-0000-4000-8000-000000000005";
pub const V_APP2_1: &str = "40000000-0000-4000-8000-000000000006";
pub const EXP: &str = "50000000-0000-4000-8000-000000000001";
pub const EXP_PAUSED: &str = "50000000-0000-4000-8000-000000000002";
pub const VAR_CONTROL: &str = "60000000-0000-4000-8000-000000000001";
pub const VAR_NEW: &str = "60000000-0000-4000-8000-000000000002";
pub const VAR_PAUSED: &str = "60000000-0000-4000-8000-000000000003";

/// A long string in the default flow, so its `flow_schema` is larger than what a response
/// copies instead of sharing (the HTTP adapter sends large flows as shared chunks).
pub fn default_flow_text() -> String {
    "Welcome to Acme! ".repeat(256)
}

/// A small but complete catalog: two workspaces; app 1 has
/// - `onboarding`: US/CA → FLOW_US; beta group → FLOW_NEW; else default FLOW_DEFAULT;
/// - `paywall`: a paused experiment (skipped), then a running 50/50 experiment
///   (control = holdout, new = FLOW_NEW), no default;
/// - `broken`: a rule targeting a flow with no published version;
/// - `empty`: no rules, no default;
/// - `welcome`: no rules, default FLOW_DEFAULT (the flow of `onboarding`'s default).
pub fn catalog_json() -> Value {
    json!({
      "workspaces": [
        {"id": WS1, "name": "Acme", "apps": [{
          "id": APP1, "name": "Acme iOS",
          "media_base_url": "https://cdn.example.com/media/",
          "icon_base_url": "https://cdn.example.com/icons/",
          "cache_ttl_seconds": 120,
          "saved_groups": {"beta": ["u-beta-1", "u-beta-2"]},
          "flows": [
            {"id": FLOW_US, "name": "US onboarding", "published_version": 2, "versions": [
              {"id": V_US_1, "version": 1, "schema_version": 1, "fonts": [], "flow_schema": {"screens": []}},
              {"id": V_US_2, "version": 2, "schema_version": 3,
               "fonts": [{"family": "Inter", "weight": 400, "style": "normal", "url": "https://cdn.example.com/inter.woff2"}],
               "flow_schema": {"screens": [{"id": "s1"}], "big": 12345678901234567890u64}}
            ]},
            {"id": FLOW_DEFAULT, "name": "Default", "published_version": 1, "versions": [
              {"id": V_DEFAULT_1, "version": 1, "schema_version": 1, "fonts": [], "flow_schema": {"screens": ["default"], "text": default_flow_text()}}
            ]},
            {"id": FLOW_NEW, "name": "New", "published_version": 1, "versions": [
              {"id": V_NEW_1, "version": 1, "schema_version": 1, "fonts": [], "flow_schema": {"screens": ["new"]}}
            ]},
            {"id": FLOW_UNPUBLISHED, "name": "Draft", "published_version": null, "versions": [
              {"id": V_UNPUBLISHED_1, "version": 1, "schema_version": 1, "fonts": [], "flow_schema": {}}
            ]}
          ],
          "placements": [
            {"key": "onboarding", "default_flow_id": FLOW_DEFAULT, "rules": [
              {"audience": {"country": {"$in": ["US", "CA"]}}, "flow_id": FLOW_US},
              {"audience": {"user_id": {"$inGroup": "beta"}}, "flow_id": FLOW_NEW}
            ]},
            {"key": "paywall", "rules": [
              {"audience": {}, "experiment": {
                "id": EXP_PAUSED, "name": "old-test", "status": "paused",
                "variants": [{"id": VAR_PAUSED, "name": "only", "weight": 1, "flow_id": FLOW_US}]}},
              {"experiment": {
                "id": EXP, "name": "paywall-test", "status": "running", "coverage": 1.0,
                "variants": [{"id": VAR_CONTROL, "name": "control", "weight": 1, "flow_id": null},
                             {"id": VAR_NEW, "name": "new", "weight": 1, "flow_id": FLOW_NEW}]}}
            ]},
            {"key": "broken", "default_flow_id": FLOW_DEFAULT, "rules": [
              {"audience": {}, "flow_id": FLOW_UNPUBLISHED}
            ]},
            {"key": "empty"},
            {"key": "welcome", "default_flow_id": FLOW_DEFAULT}
          ]
        }]},
        {"id": WS2, "name": "Other", "apps": [{
          "id": APP2, "name": "Other app",
          "media_base_url": "https://cdn.other.com/m/", "icon_base_url": "https://cdn.other.com/i/",
          "flows": [{"id": FLOW_APP2, "name": "Theirs", "published_version": 1, "versions": [
            {"id": V_APP2_1, "version": 1, "schema_version": 1, "fonts": [], "flow_schema": {}}]}],
          "placements": [{"key": "onboarding", "default_flow_id": FLOW_APP2}]
        }]}
      ]
    })
}

/// Parses catalog JSON text the way a store or file import does (`flow_schema` kept raw).
pub fn data_from(value: &Value) -> CatalogData {
    serde_json::from_str(&value.to_string()).expect("fixture catalog parses")
}

pub fn build(value: &Value) -> Catalog {
    Catalog::build(data_from(value)).expect("fixture catalog is valid")
}

pub fn key(env: KeyEnvironment, fill: char) -> ApiKey {
    ApiKey::from_random(env, &fill.to_string().repeat(30))
}

pub fn record(ws: &str, key: &ApiKey, key_type: KeyType, n: u128) -> KeyRecord {
    KeyRecord::new(
        KeyId::from_uuid(uuid::Uuid::from_u128(n)),
        WorkspaceId::from_uuid(ws.parse().unwrap()),
        key,
        key_type,
        format!("key {n}"),
        datetime!(2026-01-01 00:00 UTC),
    )
}

/// The typical placement, shared with the HTTP load benchmark's catalog (bench/gen_catalog.py).
const TYPICAL_PLACEMENT: &str = include_str!("typical_placement.json");

fn typical_placement() -> Value {
    serde_json::from_str(TYPICAL_PLACEMENT).expect("typical_placement.json parses")
}

/// A realistic placement for benchmarks (docs/benchmarks.md): the typical placement of
/// `typical_placement.json` (10 rules with mixed operators that a typical user fails, then an
/// experiment with 3 variants) over flows of about 20 KB: flow 0 is the default, rule i shows
/// flow i + 1, and the variants name theirs by that number.
pub fn realistic_catalog_json() -> Value {
    let typical = typical_placement();
    let screens: Vec<Value> = (0..75)
        .map(|i| json!({"id": format!("screen-{i}"), "type": "paywall", "title": format!("Title number {i} of the flow"),
                         "body": "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.",
                         "buttons": [{"id": "b1", "label": "Continue", "action": "next"}, {"id": "b2", "label": "Skip"}],
                         "image": format!("img/{i}.png")}))
        .collect();
    let schema = json!({"screens": screens, "theme": {"primary": "#ff0066", "font": "Inter"}});
    let audiences = typical["audiences"].as_array().expect("audiences");
    let flow_ids: Vec<String> = (1..=audiences.len() + 1)
        .map(|i| format!("70000000-0000-4000-8000-{i:012}"))
        .collect();
    let flows: Vec<Value> = flow_ids
        .iter()
        .enumerate()
        .map(|(i, id)| json!({"id": id, "name": format!("flow {i}"), "published_version": 1, "versions": [
            {"id": format!("71000000-0000-4000-8000-{:012}", i + 1), "version": 1, "schema_version": 1,
             "fonts": [{"family": "Inter", "weight": 400, "style": "normal", "url": "https://cdn.example.com/inter.woff2"}],
             "flow_schema": schema}]}))
        .collect();
    let mut rules: Vec<Value> = audiences
        .iter()
        .enumerate()
        .map(|(i, a)| json!({"audience": a, "flow_id": flow_ids[i + 1]}))
        .collect();
    let experiment = &typical["experiment"];
    let variants: Vec<Value> = experiment["variants"]
        .as_array()
        .expect("variants")
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let flow = v["flow"].as_u64().map(|f| flow_ids[f as usize].clone());
            json!({"id": format!("73000000-0000-4000-8000-{:012}", i + 1), "name": v["name"],
                   "weight": v["weight"], "flow_id": flow})
        })
        .collect();
    rules.push(json!({"audience": experiment["audience"], "experiment": {
        "id": "72000000-0000-4000-8000-000000000001", "name": experiment["name"],
        "status": experiment["status"], "coverage": experiment["coverage"], "variants": variants}}));
    let vip: Vec<String> = (0..typical["vip_members"].as_u64().expect("vip_members"))
        .map(|i| format!("vip-{i}"))
        .collect();
    json!({"workspaces": [{"id": WS1, "name": "Bench", "apps": [{
        "id": APP1, "name": "Bench app",
        "media_base_url": "https://cdn.example.com/media/", "icon_base_url": "https://cdn.example.com/icons/",
        "saved_groups": {"vip": vip},
        "flows": flows,
        "placements": [{"key": typical["key"], "default_flow_id": flow_ids[0], "rules": rules}]
    }]}]})
}

/// Attributes of a typical request for the realistic placement (`typical_attributes` of
/// `typical_placement.json`): matches none of the 10 rules, so every audience is evaluated and
/// the experiment decides.
pub fn realistic_attributes() -> serde_json::Map<String, Value> {
    typical_placement()["typical_attributes"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}
