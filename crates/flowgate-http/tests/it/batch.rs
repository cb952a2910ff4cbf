//! Batch resolve (D6).

use flowgate_domain::events::NoFlowReason;
use serde_json::{json, Value};

use crate::fixtures::*;
use crate::support::{on_sqlite, server, Backend};

fn path(app: &str) -> String {
    format!("/v1/apps/{app}/placements/resolve-batch")
}

fn body(keys: Value) -> Value {
    json!({"placement_keys": keys, "user_id": "user-1", "session_id": "s", "device_platform": "android", "attributes": {"country": "CA"}})
}

on_sqlite!(
    dedups_and_reports_each_entry,
    limits_and_validation,
    app_checks,
);

async fn dedups_and_reports_each_entry(backend: Backend) {
    let s = server!(backend);
    let r = s
        .post(
            &path(APP1),
            &body(json!([
                "onboarding",
                "broken",
                "onboarding",
                "nope",
                "empty",
                "broken"
            ])),
        )
        .await;
    assert_eq!(r.status, 200);
    let results = r.json()["results"].as_array().unwrap().clone();
    let by_key = |k: &str| {
        results
            .iter()
            .find(|e| e["placement_key"] == k)
            .unwrap_or_else(|| panic!("{k} missing"))
            .clone()
    };
    assert_eq!(results.len(), 4, "duplicates removed: {results:?}");
    let onboarding = by_key("onboarding");
    assert_eq!(onboarding["flow_id"], FLOW_US, "CA matches the first rule");
    assert_eq!(onboarding["renderer_mode"], "web");
    assert!(onboarding.get("error").is_none());
    assert_eq!(
        by_key("broken"),
        json!({"placement_key": "broken", "flow_id": null, "cache_ttl_seconds": 120, "error": "flow_unpublished"})
    );
    assert_eq!(
        by_key("nope"),
        json!({"placement_key": "nope", "flow_id": null, "cache_ttl_seconds": 120})
    );
    assert_eq!(
        by_key("empty"),
        json!({"placement_key": "empty", "flow_id": null, "cache_ttl_seconds": 120})
    );
    // One resolve_no_flow per no-flow entry (D6, D8).
    let mut reasons: Vec<(String, NoFlowReason)> = s
        .sink
        .events()
        .iter()
        .map(|e| (e.placement_key.clone().unwrap(), e.reason.unwrap()))
        .collect();
    reasons.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        reasons,
        vec![
            ("broken".into(), NoFlowReason::FlowUnpublished),
            ("empty".into(), NoFlowReason::NoRuleMatched),
            ("nope".into(), NoFlowReason::UnknownPlacement)
        ]
    );
}

async fn limits_and_validation(backend: Backend) {
    let s = server!(backend);
    let fifty: Vec<String> = (0..50).map(|i| format!("p{i}")).collect();
    let mut with_dupes = fifty.clone();
    with_dupes.extend(fifty.iter().cloned());
    let r = s.post(&path(APP1), &body(json!(with_dupes))).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["results"].as_array().unwrap().len(), 50);
    let mut fifty_one = fifty;
    fifty_one.push("p50".into());
    s.post(&path(APP1), &body(json!(fifty_one)))
        .await
        .problem(400, "too_many_placements");
    s.post(&path(APP1), &body(json!([])))
        .await
        .problem(400, "validation_failed");
    let p = s
        .post(&path(APP1), &body(json!(["ok", "bad key"])))
        .await
        .problem(400, "validation_failed");
    assert_eq!(p["errors"][0]["field"], "placement_keys[1]");
    s.post(&path(APP1), &body(json!(["ok", 7])))
        .await
        .problem(400, "validation_failed");
    s.post(&path(APP1), &body(json!("onboarding")))
        .await
        .problem(400, "validation_failed");
    let p = s
        .post(&path(APP1), &json!({"placement_keys": ["a"]}))
        .await
        .problem(400, "validation_failed");
    assert_eq!(
        p["errors"].as_array().unwrap().len(),
        3,
        "user_id, session_id, device_platform"
    );
}

async fn app_checks(backend: Backend) {
    let s = server!(backend);
    s.post(&path(APP2), &body(json!(["onboarding"])))
        .await
        .problem(403, "forbidden_app");
    s.post(
        &path("20000000-0000-4000-8000-0000000000ff"),
        &body(json!(["onboarding"])),
    )
    .await
    .problem(404, "app_not_found");
    s.post(&path("123"), &body(json!(["onboarding"])))
        .await
        .problem(400, "invalid_request");
}
