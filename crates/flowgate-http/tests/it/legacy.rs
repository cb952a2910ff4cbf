//! The deprecated routes (D11): `Deprecation` and `Link` headers, app from the body or the key.

use std::sync::Arc;

use flowgate_domain::keys::KeyType;
use flowgate_domain::Catalog;
use serde_json::json;

use crate::events::event;
use crate::fixtures::*;
use crate::support::{on_sqlite, server, Backend};

on_sqlite!(legacy_resolve, legacy_events);

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

/// In a workspace of several apps the body must name the app, as the document requires of
/// every body: without `app_id` (or with `null`) there is no app to choose, a 400.
#[actix_web::test]
async fn legacy_resolve_needs_app_id_when_the_workspace_has_several_apps() {
    let s = server!(Backend::Sqlite);
    // Workspace 1 with app 2 moved into it, and the SDK key of workspace 1.
    let mut doc = catalog_json();
    let app2 = doc["workspaces"][1]["apps"][0].take();
    doc["workspaces"][1]["apps"] = json!([]);
    doc["workspaces"][0]["apps"]
        .as_array_mut()
        .unwrap()
        .push(app2);
    let mut data = data_from(&doc);
    data.api_keys = vec![record(WS1, &s.keys.sdk, KeyType::Sdk, 100)];
    s.catalog
        .store(Arc::new(Catalog::build(data).expect("catalog builds")));

    let body = json!({"user_id": "u", "session_id": "s", "device_platform": "ios"});
    for without in [
        body.clone(),
        json!({"app_id": null, "user_id": "u", "session_id": "s", "device_platform": "ios"}),
    ] {
        let problem = s
            .post("/v1/placements/onboarding/resolve", &without)
            .await
            .problem(400, "validation_failed");
        assert_eq!(problem["errors"][0]["field"], "app_id", "{problem}");
    }
    for (app, flow) in [(APP1, FLOW_DEFAULT), (APP2, FLOW_APP2)] {
        let mut with_app = body.clone();
        with_app["app_id"] = json!(app);
        let r = s.post("/v1/placements/onboarding/resolve", &with_app).await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.json()["flow_id"], flow);
    }
}
