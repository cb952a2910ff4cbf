//! Authentication (D1) in D9's order.

use serde_json::json;

use crate::fixtures::*;
use crate::support::{on_sqlite, server, Backend};

on_sqlite!(
    each_key_failure_has_its_401,
    workspace_is_derived_from_the_key,
    two_authorization_headers_are_refused
);

async fn each_key_failure_has_its_401(backend: Backend) {
    let s = server!(backend);
    let path = format!("/v1/apps/{APP1}/placements/onboarding/resolve");
    let body = json!({"user_id": "u", "session_id": "s", "device_platform": "ios"})
        .to_string()
        .into_bytes();
    let with = |auth: &'static str| vec![("authorization", auth)];
    s.post_with(&path, None, body.clone(), &[])
        .await
        .problem(401, "missing_api_key");
    s.post_with(&path, None, body.clone(), &with("Basic abc"))
        .await
        .problem(401, "missing_api_key");
    s.post_with(&path, None, body.clone(), &with("Bearer fg_test_tooshort"))
        .await
        .problem(401, "invalid_api_key");
    let unknown = key(flowgate_domain::keys::KeyEnvironment::Test, 'z');
    s.post_with(&path, Some(&unknown), body.clone(), &[])
        .await
        .problem(401, "invalid_api_key");
    s.post_with(&path, Some(&s.keys.revoked), body.clone(), &[])
        .await
        .problem(401, "invalid_api_key");
    s.post_with(&path, Some(&s.keys.secret), body.clone(), &[])
        .await
        .problem(401, "key_type_not_allowed");
    s.post_with(&path, Some(&s.keys.live), body.clone(), &[])
        .await
        .problem(401, "key_environment_mismatch");
    // The key is checked before the path and the body (D9): garbage path, no key → 401.
    s.post_with(
        "/v1/apps/nope/placements/bad%20key/resolve",
        None,
        b"{".to_vec(),
        &[],
    )
    .await
    .problem(401, "missing_api_key");
    let ok = s.post_with(&path, Some(&s.keys.sdk), body, &[]).await;
    assert_eq!(ok.status, 200);
}

async fn workspace_is_derived_from_the_key(backend: Backend) {
    let s = server!(backend);
    let body = json!({"user_id": "u", "session_id": "s", "device_platform": "ios"})
        .to_string()
        .into_bytes();
    let other = &s.keys.other_workspace;
    let own = s
        .post_with(
            &format!("/v1/apps/{APP2}/placements/onboarding/resolve"),
            Some(other),
            body.clone(),
            &[],
        )
        .await;
    assert_eq!(own.json()["flow_id"], FLOW_APP2);
    s.post_with(
        &format!("/v1/apps/{APP1}/placements/onboarding/resolve"),
        Some(other),
        body,
        &[],
    )
    .await
    .problem(403, "forbidden_app");
}

/// D25: a request with two `Authorization` headers is refused, even when the first holds a
/// valid key (which one a proxy or cache on the way would have used is anybody's guess).
async fn two_authorization_headers_are_refused(backend: Backend) {
    let s = server!(backend);
    let path = format!("/v1/apps/{APP1}/placements/onboarding/resolve");
    let body = json!({"user_id": "u", "session_id": "s", "device_platform": "ios"}).to_string();
    let send = |second: String| {
        s.client
            .post(s.url(&path))
            .insert_header(("content-type", "application/json"))
            .append_header((
                "authorization",
                crate::support::TestServer::bearer(&s.keys.sdk),
            ))
            .append_header(("authorization", second))
            .send_body(body.clone())
    };
    for second in [
        crate::support::TestServer::bearer(&s.keys.other_workspace),
        crate::support::TestServer::bearer(&s.keys.sdk),
        "Basic abc".to_owned(),
    ] {
        let reply = crate::support::Reply::from(send(second).await.unwrap()).await;
        reply.problem(401, "invalid_api_key");
        assert!(
            reply.json()["detail"]
                .as_str()
                .unwrap()
                .contains("more than one Authorization header"),
            "{}",
            reply.json()
        );
    }
}
