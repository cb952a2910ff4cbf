//! Fixtures. Test databases (a PostgreSQL database or SQLite file per test, cleaned up even
//! after a panic) come from flowgate-testkit.

use flowgate_domain::catalog::CatalogData;
use flowgate_domain::events::{AnalyticsEvent, EventSource, EventType, NoFlowReason};
use flowgate_domain::ids::{AppId, EventId, FlowId, FlowVersionId, KeyId, WorkspaceId};
use flowgate_domain::keys::{ApiKey, KeyEnvironment, KeyRecord, KeyType};
use flowgate_domain::Platform;
use time::OffsetDateTime;

pub use flowgate_testkit::TestDb;

// ---------------------------------------------------------------------------------------------
// Fixtures

pub const WS1: &str = "10000000-0000-4000-8000-000000000001";
pub const WS2: &str = "10000000-0000-4000-8000-000000000002";
pub const APP1: &str = "20000000-0000-4000-8000-000000000001";
pub const FLOW_US: &str = "30000000-0000-4000-8000-000000000001";
pub const V_US_2: &str = "40000000-0000-4000-8000-000000000002";

/// The flow_schema of one version, as published: keys not in alphabetical order, an integer
/// beyond 2^53 and beyond u64, numbers in forms a re-encoder would change, escapes, inner
/// whitespace. D2: it must come back byte for byte.
pub const EXACT_SCHEMA: &str = r#"{"zeta": 1, "alpha": {"big": 123456789012345678901234567890, "n": 9007199254740993, "f": 1.50, "e": 1E3}, "mid": "caf\u00e9 \"q\"", "list": [ 3, 2,1 ]}"#;

/// A catalog in the D13 shape, with every kind of row: two workspaces, flows with several
/// versions (one unpublished), placements with flow and experiment rules (a holdout, a
/// namespace, a paused experiment), saved groups, keys (one revoked).
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
           "fonts": [{{"family": "Inter", "weight": 400, "style": "normal", "url": "https://cdn.example.com/inter.woff2"}},
                     {{"family": "Inter", "weight": 700, "style": "italic", "url": "https://cdn.example.com/inter-bi.woff2"}}],
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
        {{"key": "onboarding", "default_flow_id": "30000000-0000-4000-8000-000000000002", "rules": [
          {{"audience": {{"country": "US"}}, "flow_id": "{FLOW_US}"}},
          {{"audience": {{}}, "flow_id": "30000000-0000-4000-8000-000000000003"}},
          {{"flow_id": "30000000-0000-4000-8000-000000000002"}}
        ]}},
        {{"key": "Paywall.main:v2", "rules": [
          {{"audience": {{}}, "experiment": {{
            "id": "50000000-0000-4000-8000-000000000002", "name": "old-test", "status": "paused",
            "variants": [{{"id": "60000000-0000-4000-8000-000000000003", "name": "only", "weight": 1, "flow_id": "{FLOW_US}"}}]}}}},
          {{"experiment": {{
            "id": "50000000-0000-4000-8000-000000000001", "name": "paywall-test", "status": "running",
            "seed": "paywall-seed", "coverage": 0.5, "namespace": ["pricing", 0.0, 0.5],
            "variants": [{{"id": "60000000-0000-4000-8000-000000000001", "name": "control", "weight": 1, "flow_id": null}},
                         {{"id": "60000000-0000-4000-8000-000000000002", "name": "new", "weight": 2.5, "flow_id": "{FLOW_US}"}}]}}}}
        ]}},
        {{"key": "empty"}}
      ]
    }}]}},
    {{"id": "{WS2}", "name": "Other", "apps": []}}
  ],
  "api_keys": [
    {{"id": "70000000-0000-4000-8000-000000000001", "workspace_id": "{WS1}",
      "digest": "{d1}", "display_prefix": "fg_test_aaaa", "key_type": "sdk", "environment": "test",
      "name": "ios", "created_at": "2026-01-01T00:00:00.123456789Z", "revoked_at": null}},
    {{"id": "70000000-0000-4000-8000-000000000002", "workspace_id": "{WS1}",
      "digest": "{d2}", "display_prefix": "fg_live_bbbb", "key_type": "secret", "environment": "live",
      "name": "old", "created_at": "2026-01-02T00:00:00Z", "revoked_at": "2026-01-03T04:05:06.5+02:00"}}
  ]
}}"#,
        d1 = key('a').digest().to_hex(),
        d2 = key('b').digest().to_hex(),
    )
}

/// The fixture, parsed the way a store or file import does (`flow_schema` kept raw).
pub fn catalog() -> CatalogData {
    serde_json::from_str(&catalog_json()).expect("fixture catalog parses")
}

pub fn ws(id: &str) -> WorkspaceId {
    id.parse().expect("uuid")
}

pub fn key(fill: char) -> ApiKey {
    ApiKey::from_random(KeyEnvironment::Test, &fill.to_string().repeat(30))
}

/// A fresh key record of `workspace`.
pub fn key_record(workspace: &str, fill: char, created_at: OffsetDateTime) -> KeyRecord {
    KeyRecord::new(
        KeyId::from_uuid(uuid::Uuid::new_v4()),
        ws(workspace),
        &key(fill),
        KeyType::Sdk,
        format!("key {fill}"),
        created_at,
    )
}

/// An SDK event with a fresh id.
pub fn sdk_event(n: u32) -> AnalyticsEvent {
    let mut payload = serde_json::Map::new();
    payload.insert("screen_index".to_owned(), serde_json::json!(n));
    payload.insert(
        "properties".to_owned(),
        serde_json::json!({"b": 1, "a": [true, null]}),
    );
    AnalyticsEvent::new(
        EventId::from_uuid(uuid::Uuid::new_v4()),
        EventSource::Sdk,
        EventType::ScreenView,
        APP1.parse::<AppId>().expect("uuid"),
        format!("user-{n}"),
        "session-1",
        Platform::Ios,
        OffsetDateTime::now_utc(),
    )
    .with_flow_id(Some(FLOW_US.parse::<FlowId>().expect("uuid")))
    .with_flow_version_id(Some(V_US_2.parse::<FlowVersionId>().expect("uuid")))
    .with_placement_key(Some("onboarding".to_owned()))
    .with_sdk_version(Some("1.2.3".to_owned()))
    .with_payload(payload)
}

/// A server `resolve_no_flow` event for a holdout (D8).
pub fn server_event() -> AnalyticsEvent {
    let at = OffsetDateTime::now_utc();
    AnalyticsEvent::new(
        EventId::new_v7(at),
        EventSource::Server,
        EventType::ResolveNoFlow,
        APP1.parse::<AppId>().expect("uuid"),
        "user-h",
        "session-h",
        Platform::Web,
        at,
    )
    .with_placement_key(Some("paywall".to_owned()))
    .with_experiment_id(Some("50000000-0000-4000-8000-000000000001".to_owned()))
    .with_variant_id(Some("60000000-0000-4000-8000-000000000001".to_owned()))
    .with_variant_name(Some("control".to_owned()))
    .with_reason(Some(NoFlowReason::Holdout))
}
