//! The deprecated routes (D11): `Deprecation` and `Link` headers, app from the body or the key.

use serde_json::json;

use crate::events::event;
use crate::fixtures::*;
use crate::support::{on_both_stores, server, Backend};

on_both_stores!(legacy_resolve, legacy_events);

async fn legacy_resolve(backend: Backend) {
    let s = server!(backend);
    let body = json!({"user_id": "u", "session_id": "s", "device_platform": "ios", "attributes": {"country": "US"}});
    // Workspace 1 has exactly one app: the key decides.
    let r = s.post("/v1/placements/onboarding/resolve", &body).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["flow_id"], FLOW_US);
    assert_eq!(r.header("deprecation"), Some("true"));
    assert_eq!(
        r.header("link"),
        Some(
            format!("</v1/apps/{APP1}/placements/onboarding/resolve>; rel=\"successor-version\"")
                .as_str()
        )
    );
    // An explicit app_id.
    let mut with_app = body.clone();
    with_app["app_id"] = json!(APP1);
    assert_eq!(
        s.post("/v1/placements/onboarding/resolve", &with_app)
            .await
            .json()["flow_id"],
        FLOW_US
    );
    with_app["app_id"] = json!(APP2);
    let r = s.post("/v1/placements/onboarding/resolve", &with_app).await;
    r.problem(403, "forbidden_app");
    assert_eq!(
        r.header("deprecation"),
        Some("true"),
        "errors of a deprecated route carry the headers too"
    );
    with_app["app_id"] = json!("nope");
    s.post("/v1/placements/onboarding/resolve", &with_app)
        .await
        .problem(400, "validation_failed");
    s.post("/v1/placements/bad%20key/resolve", &body)
        .await
        .problem(400, "invalid_request");
}

async fn legacy_events(backend: Backend) {
    let s = server!(backend);
    let mut foreign = event();
    foreign["app_id"] = json!(APP2);
    foreign["flow_id"] = json!(FLOW_APP2);
    foreign["flow_version_id"] = json!(V_APP2_1);
    let mut no_app = event();
    no_app.as_object_mut().unwrap().remove("app_id");
    let r = s
        .post("/v1/events", &json!([event(), foreign, no_app]))
        .await;
    assert_eq!(r.status, 202);
    assert_eq!(r.header("deprecation"), Some("true"));
    assert!(r
        .header("link")
        .unwrap()
        .contains("rel=\"successor-version\""));
    let body = r.json();
    assert_eq!(
        (body["accepted"].as_u64(), body["rejected"].as_u64()),
        (Some(1), Some(2))
    );
    let codes: Vec<(u64, &str)> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["index"].as_u64().unwrap(), e["code"].as_str().unwrap()))
        .collect();
    assert_eq!(codes, vec![(1, "app_mismatch"), (2, "missing_field")]);
}
