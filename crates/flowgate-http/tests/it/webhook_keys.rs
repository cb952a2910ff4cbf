//! Webhook keys (D30): refused on the SDK routes as a key of another type is, and accepted by
//! `authorization::authenticate_webhook` (the store routes' check) for their workspace's apps
//! only. The keys are created through the store (their own table) and loaded back, on both
//! stores.

use std::sync::Arc;

use flowgate_domain::ids::{AppId, WorkspaceId};
use flowgate_domain::keys::{ApiKey, KeyEnvironment, KeyType};
use flowgate_domain::ports::{CatalogSource, KeyStore};
use flowgate_domain::Catalog;
use flowgate_http::authorization::{authenticate_webhook, authorization_value};
use flowgate_http::problem::ApiError;
use serde_json::json;

use crate::fixtures::*;
use crate::support::{on_both_stores, server, Backend, TestServer};

on_both_stores!(
    a_webhook_key_is_refused_on_the_sdk_routes,
    the_store_routes_take_a_webhook_key_of_the_apps_workspace
);

fn workspace(id: &str) -> WorkspaceId {
    id.parse().unwrap()
}

fn app(id: &str) -> AppId {
    id.parse().unwrap()
}

/// Creates a webhook key of `ws` through the store, as `flowgate keys create --type webhook`
/// does.
async fn create_webhook_key(s: &TestServer, ws: &str, name: &str) -> (ApiKey, uuid::Uuid) {
    let created = flowgate_control::keys::create(
        &s.db.store,
        workspace(ws),
        KeyEnvironment::Test,
        KeyType::Webhook,
        name,
        time::OffsetDateTime::now_utc(),
    )
    .await
    .expect("webhook key created");
    assert_eq!(created.record.key_type, KeyType::Webhook);
    (created.key, created.record.id.0)
}

/// Loads the store's catalog into the server, as the refresher does.
async fn reload(s: &TestServer) -> Arc<Catalog> {
    let data = s.db.store.load_catalog().await.expect("catalog loads");
    let catalog = Arc::new(Catalog::build(data).expect("catalog builds"));
    s.catalog.store(Arc::clone(&catalog));
    catalog
}

async fn a_webhook_key_is_refused_on_the_sdk_routes(backend: Backend) {
    let s = server!(backend);
    let (webhook, _) = create_webhook_key(&s, WS1, "revenuecat").await;
    reload(&s).await;

    let resolve = format!("/v1/apps/{APP1}/placements/onboarding/resolve");
    let batch = format!("/v1/apps/{APP1}/placements/resolve-batch");
    let events = format!("/v1/apps/{APP1}/events");
    let resolve_body = json!({"user_id": "u", "session_id": "s", "device_platform": "ios"});
    let batch_body = json!({"placement_keys": ["onboarding"], "user_id": "u", "session_id": "s",
                            "device_platform": "ios"});
    let event = json!([{
        "event_id": uuid::Uuid::new_v4().to_string(), "app_id": APP1, "flow_id": FLOW_US,
        "flow_version_id": V_US_1, "user_id": "u", "session_id": "s", "device_platform": "ios",
        "event_type": "flow_complete", "sdk_version": "2.1.0", "screen_index": 3,
        "properties": {"close_reason": "done"},
        "timestamp": time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339).unwrap(),
    }]);
    let cases = [
        (&resolve, &resolve_body, 200),
        (&batch, &batch_body, 200),
        (&events, &event, 202),
    ];
    for (path, body, ok) in cases {
        let bytes = body.to_string().into_bytes();
        let refused = s
            .post_with(path, Some(&webhook), bytes.clone(), &[])
            .await
            .problem(401, "key_type_not_allowed");
        // As a secret key is refused (the type refused before webhook keys existed).
        let secret = s
            .post_with(path, Some(&s.keys.secret), bytes.clone(), &[])
            .await
            .problem(401, "key_type_not_allowed");
        assert_eq!(refused["detail"], secret["detail"], "{path}");
        assert!(
            !refused.to_string().contains(webhook.expose()),
            "the key is never repeated: {refused}"
        );
        // The SDK key passes.
        let passed = s.post_with(path, Some(&s.keys.sdk), bytes, &[]).await;
        assert_eq!(
            passed.status.as_u16(),
            ok,
            "{path}: {}",
            String::from_utf8_lossy(&passed.body)
        );
        if path == &events {
            assert_eq!(passed.json()["accepted"], 1, "{}", passed.json());
        }
    }
    assert_eq!(
        s.sink.events().len(),
        1,
        "only the SDK key's event was accepted"
    );
}

/// The status and code of a refusal.
fn refusal(result: Result<uuid::Uuid, ApiError>) -> (u16, &'static str) {
    match result {
        Ok(id) => panic!("accepted as key {id}"),
        Err(e) => (e.status.as_u16(), e.code),
    }
}

async fn the_store_routes_take_a_webhook_key_of_the_apps_workspace(backend: Backend) {
    let s = server!(backend);
    let (webhook, id) = create_webhook_key(&s, WS1, "revenuecat").await;
    let (other, _) = create_webhook_key(&s, WS2, "revenuecat, other workspace").await;
    let (revoked, revoked_id) = create_webhook_key(&s, WS1, "revoked").await;
    s.db.store
        .revoke_key(
            flowgate_domain::ids::KeyId::from_uuid(revoked_id),
            time::OffsetDateTime::now_utc(),
        )
        .await
        .expect("revoked");
    let catalog = reload(&s).await;
    let check = |header: Option<String>, on: &str| {
        authenticate_webhook(&catalog, header.as_deref(), app(on), KeyEnvironment::Test)
            .map(|record| record.id.0)
    };
    let bearer = |key: &ApiKey| Some(TestServer::bearer(key));

    assert_eq!(check(bearer(&webhook), APP1), Ok(id));
    assert_eq!(
        check(Some(webhook.expose().to_owned()), APP1),
        Ok(id),
        "the key alone, as RevenueCat sends a header configured without a scheme"
    );
    assert!(check(bearer(&other), APP2).is_ok());

    assert_eq!(refusal(check(None, APP1)), (401, "missing_api_key"));
    assert_eq!(
        refusal(check(Some("Basic abc".to_owned()), APP1)),
        (401, "missing_api_key")
    );
    assert_eq!(
        refusal(check(Some("fg_test_garbage".to_owned()), APP1)),
        (401, "invalid_api_key")
    );
    let unknown = key(KeyEnvironment::Test, 'z');
    assert_eq!(
        refusal(check(bearer(&unknown), APP1)),
        (401, "invalid_api_key")
    );
    assert_eq!(
        refusal(check(bearer(&revoked), APP1)),
        (401, "invalid_api_key")
    );
    assert_eq!(
        refusal(check(bearer(&s.keys.sdk), APP1)),
        (401, "key_type_not_allowed"),
        "an SDK key is not for the store routes"
    );
    assert_eq!(
        refusal(check(bearer(&s.keys.secret), APP1)),
        (401, "key_type_not_allowed")
    );
    assert_eq!(
        refusal(check(bearer(&s.keys.live), APP1)),
        (401, "key_type_not_allowed")
    );
    assert_eq!(
        refusal(check(bearer(&other), APP1)),
        (403, "forbidden_app"),
        "another workspace's app"
    );
    assert_eq!(
        refusal(check(
            bearer(&webhook),
            "20000000-0000-4000-8000-0000000000ff"
        )),
        (404, "app_not_found")
    );

    // The answer is problem+json, and never repeats the key.
    let answer = authenticate_webhook(
        &catalog,
        bearer(&s.keys.sdk).as_deref(),
        app(APP1),
        KeyEnvironment::Test,
    )
    .unwrap_err()
    .to_response("req-1");
    assert_eq!(answer.status().as_u16(), 401);
    assert_eq!(
        answer
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/problem+json")
    );
    let body = actix_web::body::to_bytes(answer.into_body()).await.unwrap();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["code"], "key_type_not_allowed");
    assert!(
        body["detail"].as_str().unwrap().contains("webhook key"),
        "{body}"
    );
    assert!(!body.to_string().contains(s.keys.sdk.expose()), "{body}");

    // Two Authorization headers are refused before any key is read (D25).
    let mut headers = actix_web::http::header::HeaderMap::new();
    for value in [TestServer::bearer(&webhook), TestServer::bearer(&webhook)] {
        headers.append(
            actix_web::http::header::AUTHORIZATION,
            value.parse().unwrap(),
        );
    }
    let two = authorization_value(&headers).unwrap_err();
    assert_eq!((two.status.as_u16(), two.code), (401, "invalid_api_key"));
}
