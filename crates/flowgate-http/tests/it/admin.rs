//! The admin listener (D11): health, readiness states, metrics.

use std::sync::{Arc, Mutex};

use actix_web::HttpServer;
use flowgate_http::{
    admin_app, AdminSource, AdminState, Check, ExplainAccess, HttpMetrics, ReadinessReport,
};
use prometheus_client::registry::Registry;
use serde_json::{json, Value};

use crate::fixtures::{APP1, APP2};
use crate::support::{Backend, TestServer};

struct Source(Mutex<ReadinessReport>);

impl AdminSource for Source {
    fn readiness(&self) -> ReadinessReport {
        self.0.lock().unwrap().clone()
    }
}

fn check(ok: bool) -> Check {
    Check {
        ok,
        detail: if ok { "ok".into() } else { "failing".into() },
    }
}

#[actix_web::test]
async fn health_readiness_and_metrics() {
    let source = Arc::new(Source(Mutex::new(
        ReadinessReport::new()
            .required("catalog", check(false))
            .check("store", check(true))
            .check("sink", check(true)),
    )));
    let mut registry = Registry::default();
    let _metrics = HttpMetrics::new(&mut registry);
    // A metric the process adds beside the HTTP adapter's own.
    let gauge = prometheus_client::metrics::gauge::Gauge::<i64>::default();
    gauge.set(7);
    registry.register("flowgate_test_gauge", "A test gauge.", gauge);
    let state = AdminState::new(Arc::new(registry), source.clone());
    let (base, handle) = serve(state);
    let client = awc::Client::default();
    let get = |p: &str| client.get(format!("{base}{p}")).send();

    let mut r = get("/healthz").await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<serde_json::Value>().await.unwrap()["status"], "ok");

    let mut r = get("/readyz").await.unwrap();
    assert_eq!(r.status(), 503, "no catalog yet");
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["code"], "not_ready");
    assert_eq!(body["detail"], "catalog: failing");
    assert_eq!(body["checks"]["catalog"]["ok"], false);
    assert_eq!(body["checks"]["store"]["ok"], true);

    source.0.lock().unwrap().set("catalog", check(true));
    source.0.lock().unwrap().set("store", check(false));
    let mut r = get("/readyz").await.unwrap();
    assert_eq!(r.status(), 200, "degraded still serves");
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["status"],
        "degraded"
    );

    source.0.lock().unwrap().set("store", check(true));
    let mut r = get("/readyz").await.unwrap();
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["status"],
        "ready"
    );

    let mut r = get("/metrics").await.unwrap();
    assert_eq!(r.status(), 200);
    let text = String::from_utf8(r.body().await.unwrap().to_vec()).unwrap();
    assert!(text.contains("flowgate_test_gauge 7"), "{text}");
    assert!(
        text.contains("flowgate_http_events_accepted_total 0"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("# EOF"));
    handle.stop(false).await;
}

const TOKEN: &str = "admin-token-0123456789abcdefghijklmn";

/// An admin listener over `catalog`, with the explain API when `explain` is set.
fn bind_admin(
    catalog: flowgate_http::CatalogHandle,
    explain: bool,
) -> (String, actix_web::dev::ServerHandle) {
    let source = Arc::new(Source(Mutex::new(ReadinessReport::new())));
    let mut state = AdminState::new(Arc::new(Registry::default()), source);
    if explain {
        state = state.with_explain(ExplainAccess {
            token: TOKEN.into(),
            catalog,
            default_ttl: 300,
            body_limit: 64 * 1024,
            body_pace: flowgate_http::BodyPace::default(),
            sticky: None,
        });
    }
    serve(state)
}

/// Runs the admin app over `state` on a free port: its base URL and handle.
fn serve(state: AdminState) -> (String, actix_web::dev::ServerHandle) {
    let bound = HttpServer::new(move || admin_app(state.clone()))
        .workers(1)
        .disable_signals()
        .bind(("127.0.0.1", 0))
        .unwrap();
    let base = format!("http://{}", bound.addrs()[0]);
    let server = bound.run();
    let handle = server.handle();
    actix_web::rt::spawn(server);
    (base, handle)
}

/// D18: the admin explain answers, for every placement of the fixture and several users, the
/// very bytes resolve answers as its `result`, with a trace and a reason; it records no event.
#[actix_web::test]
async fn explain_returns_resolves_bytes_with_a_trace() {
    let server = TestServer::start(Backend::Sqlite).await.unwrap();
    let (base, handle) = bind_admin(server.catalog.clone(), true);
    let client = awc::Client::default();
    let mut reasons = std::collections::BTreeSet::new();
    for key in [
        "onboarding",
        "paywall",
        "broken",
        "empty",
        "welcome",
        "missing",
    ] {
        for (user, country) in [
            ("u1", "US"),
            ("u-beta-1", "DE"),
            ("u9", "FR"),
            ("u12", "CA"),
        ] {
            let body = json!({"user_id": user, "session_id": "s1", "device_platform": "ios",
                              "attributes": {"country": country}});
            let path = format!("/v1/apps/{APP1}/placements/{key}/resolve");
            let resolved = server.post(&path, &body).await;
            assert_eq!(resolved.status, 200);
            let mut r = client
                .post(format!(
                    "{base}/admin/v1/apps/{APP1}/placements/{key}/explain"
                ))
                .insert_header(("authorization", format!("Bearer {TOKEN}")))
                .insert_header(("content-type", "application/json"))
                .send_body(body.to_string())
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            let bytes = r.body().await.unwrap();
            let text = std::str::from_utf8(&bytes).unwrap();
            let prefix = format!(
                "{{\"result\":{}",
                std::str::from_utf8(&resolved.body).unwrap()
            );
            assert!(text.starts_with(&prefix), "{key}/{user}: {text}");
            let doc: Value = serde_json::from_slice(&bytes).unwrap();
            assert!(doc["trace"].is_array());
            reasons.insert(doc["reason"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(
        reasons.into_iter().collect::<Vec<_>>(),
        [
            "default",
            "experiment",
            "flow_unpublished",
            "holdout",
            "no_rule_matched",
            "rule",
            "unknown_placement"
        ]
    );
    // Resolve recorded its no-flow events; explain recorded none.
    let recorded = server.sink.events().len();
    let mut again = client
        .post(format!(
            "{base}/admin/v1/apps/{APP1}/placements/empty/explain"
        ))
        .insert_header(("authorization", format!("Bearer {TOKEN}")))
        .insert_header(("content-type", "application/json"))
        .send_body(r#"{"user_id":"u1","session_id":"s","device_platform":"web"}"#)
        .await
        .unwrap();
    assert_eq!(again.status(), 200);
    let _ = again.body().await.unwrap();
    assert_eq!(server.sink.events().len(), recorded);
    handle.stop(false).await;
}

/// Without the token: 401; with another: 401; bad input: the resolve problems; no token
/// configured: the route does not exist.
#[actix_web::test]
async fn explain_requires_the_admin_token_and_valid_input() {
    let server = TestServer::start(Backend::Sqlite).await.unwrap();
    let (base, handle) = bind_admin(server.catalog.clone(), true);
    let client = awc::Client::default();
    let call = |auth: Option<String>, app: &str, key: &str, body: &'static str| {
        let mut req = client
            .post(format!(
                "{base}/admin/v1/apps/{app}/placements/{key}/explain"
            ))
            .insert_header(("content-type", "application/json"));
        if let Some(auth) = auth {
            req = req.insert_header(("authorization", auth));
        }
        async move {
            let mut r = req.send_body(body).await.unwrap();
            let status = r.status().as_u16();
            let body: Value = serde_json::from_slice(&r.body().await.unwrap()).unwrap();
            (status, body)
        }
    };
    let ok = r#"{"user_id":"u1","session_id":"s","device_platform":"web"}"#;
    let (status, body) = call(None, APP1, "onboarding", ok).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (401, Some("admin_unauthorized"))
    );
    let (status, _) = call(Some(format!("Bearer {TOKEN}x")), APP1, "onboarding", ok).await;
    assert_eq!(status, 401);
    // An SDK key is not the admin token.
    let sdk = format!("Bearer {}", server.keys.sdk.expose());
    assert_eq!(call(Some(sdk), APP1, "onboarding", ok).await.0, 401);
    let auth = || Some(format!("Bearer {TOKEN}"));
    let (status, body) = call(auth(), APP1, "onboarding", r#"{"user_id":""}"#).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("validation_failed"))
    );
    let (status, body) = call(auth(), "not-a-uuid", "onboarding", ok).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_request"))
    );
    let unknown = "20000000-0000-4000-8000-0000000000ff";
    let (status, body) = call(auth(), unknown, "onboarding", ok).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("app_not_found"))
    );
    // The admin sees every workspace: an app of workspace 2 is explained too.
    let (status, body) = call(auth(), APP2, "onboarding", ok).await;
    assert_eq!((status, body["reason"].as_str()), (200, Some("default")));
    let (status, body) = call(auth(), APP1, "bad%20key", ok).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_request"))
    );
    handle.stop(false).await;

    let (base, handle) = bind_admin(server.catalog.clone(), false);
    let mut r = client
        .post(format!(
            "{base}/admin/v1/apps/{APP1}/placements/onboarding/explain"
        ))
        .insert_header(("authorization", format!("Bearer {TOKEN}")))
        .send_body(ok)
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "no admin.token, no admin API");
    let _ = r.body().await;
    handle.stop(false).await;
}

/// Issue 49: wrong admin tokens are limited per address. Of 275 wrong tokens from one address,
/// the first ten are answered 401 and the others 429 `rate_limited` with `Retry-After`; the
/// right token from that address then waits too. (Before: 275 times 401.)
#[actix_web::test]
async fn wrong_admin_tokens_are_limited_per_address() {
    let server = TestServer::start(Backend::Sqlite).await.unwrap();
    let (base, handle) = bind_admin(server.catalog.clone(), true);
    let client = awc::Client::default();
    let path = format!("{base}/admin/v1/apps/{APP1}/placements/onboarding/explain");
    let ok = r#"{"user_id":"u1","session_id":"s","device_platform":"web"}"#;
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    let mut last = None;
    for i in 0..275 {
        // Missing and wrong tokens alike.
        let mut req = client.post(&path);
        if i % 5 != 0 {
            req = req.insert_header(("authorization", format!("Bearer guess-{i:0>32}")));
        }
        let mut r = req.send_body(ok).await.unwrap();
        let status = r.status().as_u16();
        *statuses.entry(status).or_default() += 1;
        if status == 429 {
            let retry: u32 = r
                .headers()
                .get("retry-after")
                .unwrap()
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!((1..=60).contains(&retry), "{retry}");
            assert_eq!(
                r.headers().get("content-type").unwrap(),
                "application/problem+json",
                "problem+json"
            );
            last = Some(r.json::<Value>().await.unwrap());
        } else {
            let _ = r.body().await;
        }
    }
    assert_eq!(
        statuses,
        [(401, 10), (429, 265)].into_iter().collect(),
        "ten wrong tokens pass, the rest wait"
    );
    let last = last.unwrap();
    assert_eq!(last["code"], "rate_limited", "{last}");
    assert_eq!(last["status"], 429);
    // The right token from this address waits too.
    let mut r = client
        .post(&path)
        .insert_header(("authorization", format!("Bearer {TOKEN}")))
        .send_body(ok)
        .await
        .unwrap();
    assert_eq!(r.status(), 429, "the right token waits while limited");
    assert!(r.headers().contains_key("retry-after"));
    let _ = r.body().await;
    handle.stop(false).await;
}
