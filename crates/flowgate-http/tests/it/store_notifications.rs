//! Store notifications (D30) through a real server and store: Apple's signed notifications of
//! a test root configured as trusted, RevenueCat's webhooks with a webhook key. What cannot be
//! verified or read is refused with problem+json and stores nothing; what can is stored once.

use std::sync::Arc;

use actix_web::{web, HttpServer};
use arc_swap::ArcSwap;
use flowgate_domain::keys::{ApiKey, KeyEnvironment, KeyType};
use flowgate_domain::ports::{CatalogSource, KeyStore, SystemClock};
use flowgate_domain::Catalog;
use flowgate_http::apple_test_chain::{TestChain, TestSigner};
use flowgate_http::{api_app, ApiState, HttpConfig, HttpMetrics, StoreRoutes};
use flowgate_testkit::TestDb;
use serde_json::json;

use crate::fixtures::{self, APP1, APP2, WS1};
use crate::support::{on_both_stores, on_sqlite, Backend, Reply};

const BUNDLE: &str = "com.example.acme";
const USER: &str = "5f2b6a4e-8c1d-4e7a-9b3c-0d1e2f3a4b5c";

struct Served {
    base: String,
    db: TestDb,
    client: awc::Client,
    signer: TestSigner,
    sdk: ApiKey,
    webhook: ApiKey,
}

impl Served {
    async fn start(backend: Backend) -> Option<Served> {
        Self::start_with(backend, HttpConfig::default()).await
    }

    async fn start_with(backend: Backend, config: HttpConfig) -> Option<Served> {
        let db = match backend {
            Backend::Sqlite => TestDb::sqlite().await,
            Backend::Postgres => TestDb::postgres().await?,
        };
        let mut catalog = fixtures::catalog_json();
        catalog["format"] = 2.into();
        catalog["workspaces"][0]["apps"][0]["apple_bundle_id"] = BUNDLE.into();
        catalog["workspaces"][0]["apps"][0]["apple_environments"] =
            json!(["Production", "Sandbox"]);
        db.store
            .replace_catalog(&fixtures::data_from(&catalog))
            .await
            .expect("catalog written");
        let (sdk, webhook) = (
            fixtures::key(KeyEnvironment::Test, 'a'),
            fixtures::key(KeyEnvironment::Test, 'w'),
        );
        for (i, (key, kind)) in [(&sdk, KeyType::Sdk), (&webhook, KeyType::Webhook)]
            .into_iter()
            .enumerate()
        {
            let record = fixtures::record(WS1, key, kind, 300 + i as u128);
            db.store.insert_key(record).await.expect("key stored");
        }
        let catalog =
            Catalog::build(db.store.load_catalog().await.expect("loads")).expect("builds");
        let signer = TestSigner::new();
        let state = web::Data::new(
            ApiState::new(
                config,
                Arc::new(ArcSwap::from_pointee(catalog)),
                Arc::new(crate::support::CollectingSink::default()),
                Arc::new(SystemClock),
                HttpMetrics::default(),
            )
            .with_store_routes(StoreRoutes {
                store: Arc::new(db.store.clone()),
                apple_roots: signer.roots(),
            }),
        );
        let bound = HttpServer::new(move || api_app(state.clone()))
            .workers(1)
            .disable_signals()
            .bind(("127.0.0.1", 0))
            .expect("bind");
        let addr = *bound.addrs().first().expect("bound");
        actix_web::rt::spawn(bound.run());
        Some(Served {
            base: format!("http://{addr}"),
            db,
            client: awc::Client::default(),
            signer,
            sdk,
            webhook,
        })
    }

    async fn post(&self, path: &str, authorization: Option<String>, body: Vec<u8>) -> Reply {
        let mut req = self
            .client
            .post(format!("{}{path}", self.base))
            .insert_header(("content-type", "application/json"));
        if let Some(value) = authorization {
            req = req.insert_header(("authorization", value));
        }
        Reply::from(req.send_body(body).await.expect("sent")).await
    }

    async fn apple(&self, app: &str, signed_payload: &str) -> Reply {
        let body = json!({ "signedPayload": signed_payload })
            .to_string()
            .into_bytes();
        self.post(&format!("/v1/apps/{app}/store/apple"), None, body)
            .await
    }

    async fn stored(&self) -> i64 {
        self.db
            .count("SELECT COUNT(*) AS n FROM store_notifications")
            .await
    }
}

fn notification(
    signer: &TestSigner,
    id: &str,
    kind: &str,
    bundle: &str,
    environment: &str,
) -> String {
    let transaction = signer.sign(&json!({
        "transactionId": "t1", "originalTransactionId": "o1", "bundleId": bundle,
        "productId": "annual", "purchaseDate": 1_764_000_000_000_i64, "price": 29990,
        "currency": "USD", "appAccountToken": USER, "environment": environment,
        "signedDate": 1_764_000_000_000_i64,
    }));
    signer.sign(&json!({
        "notificationType": kind, "notificationUUID": id, "version": "2.0",
        "signedDate": 1_764_000_000_000_i64,
        "data": {"bundleId": bundle, "environment": environment,
                 "signedTransactionInfo": transaction},
    }))
}

async fn apple_notifications_are_verified_stored_once_and_refused_otherwise(backend: Backend) {
    let Some(s) = Served::start(backend).await else {
        return;
    };
    let good = notification(&s.signer, "n-1", "SUBSCRIBED", BUNDLE, "Production");
    let reply = s.apple(APP1, &good).await;
    assert_eq!(
        reply.status.as_u16(),
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(reply.json()["stored"], true);
    // Apple retries until answered: the replay is 200 and stores nothing new.
    let reply = s.apple(APP1, &good).await;
    assert_eq!(
        (reply.status.as_u16(), reply.json()["stored"].clone()),
        (200, json!(false))
    );
    assert_eq!(s.stored().await, 1);
    let row = "SELECT COUNT(*) AS n FROM store_notifications WHERE user_id = '5f2b6a4e-8c1d-4e7a-9b3c-0d1e2f3a4b5c' \
               AND transaction_id = 't1' AND price = 29.99 AND trial = false AND refunded = false";
    assert_eq!(s.db.count(row).await, 1, "the transaction's columns");

    // Each refused, nothing stored.
    let other_root = TestSigner::new();
    let tampered = {
        let mut parts: Vec<String> = good.split('.').map(str::to_owned).collect();
        parts[1] = parts[1].chars().rev().collect();
        parts.join(".")
    };
    let unmarked = TestSigner::with(TestChain {
        leaf_marker: false,
        ..TestChain::default()
    });
    let cases: Vec<(String, &str, u16, &str)> = vec![
        (tampered, APP1, 401, "invalid_signature"),
        (
            notification(&other_root, "n-2", "SUBSCRIBED", BUNDLE, "Production"),
            APP1,
            401,
            "invalid_signature",
        ),
        (
            notification(&unmarked, "n-3", "SUBSCRIBED", BUNDLE, "Production"),
            APP1,
            401,
            "invalid_signature",
        ),
        (
            "eyJhbGciOiJub25lIn0.eyJhIjoxfQ.".to_owned(),
            APP1,
            401,
            "invalid_signature",
        ),
        (
            notification(
                &s.signer,
                "n-4",
                "SUBSCRIBED",
                "com.example.other",
                "Production",
            ),
            APP1,
            400,
            "store_mismatch",
        ),
        (
            notification(&s.signer, "n-5", "SUBSCRIBED", BUNDLE, "Xcode"),
            APP1,
            400,
            "store_mismatch",
        ),
        // APP2 has no apple_bundle_id (409); an id of no app is 404, as on every app route.
        (
            notification(&s.signer, "n-6", "SUBSCRIBED", BUNDLE, "Production"),
            APP2,
            409,
            "store_not_configured",
        ),
        (
            notification(&s.signer, "n-7", "SUBSCRIBED", BUNDLE, "Production"),
            "6a000000-0000-4000-8000-000000000000",
            404,
            "app_not_found",
        ),
    ];
    for (payload, app, status, code) in cases {
        let reply = s.apple(app, &payload).await;
        reply.problem(status, code);
    }
    // A nested transaction signed by another root is refused too.
    let foreign = other_root.sign(&json!({"transactionId": "t9", "purchaseDate": 1}));
    let nested = s.signer.sign(&json!({"notificationType": "DID_RENEW", "notificationUUID": "n-8",
        "data": {"bundleId": BUNDLE, "environment": "Production", "signedTransactionInfo": foreign}}));
    s.apple(APP1, &nested)
        .await
        .problem(401, "invalid_signature");
    // Bodies that are not Apple's.
    for body in [
        b"{}".to_vec(),
        b"not json".to_vec(),
        br#"{"signedPayload": 7}"#.to_vec(),
    ] {
        let reply = s
            .post(&format!("/v1/apps/{APP1}/store/apple"), None, body)
            .await;
        assert_eq!(
            reply.status.as_u16(),
            400,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
    }
    let huge = json!({"signedPayload": "a".repeat(70_000)})
        .to_string()
        .into_bytes();
    let reply = s
        .post(&format!("/v1/apps/{APP1}/store/apple"), None, huge)
        .await;
    reply.problem(413, "payload_too_large");
    assert_eq!(s.stored().await, 1, "nothing refused was stored");
}

async fn revenuecat_webhooks_take_a_webhook_key_and_are_stored_once(backend: Backend) {
    let Some(s) = Served::start(backend).await else {
        return;
    };
    let path = format!("/v1/apps/{APP1}/store/revenuecat");
    let body = |id: &str| {
        json!({"api_version": "1.0", "event": {"id": id, "type": "INITIAL_PURCHASE",
            "app_user_id": "user-1", "transaction_id": "t1", "original_transaction_id": "o1",
            "purchased_at_ms": 1_764_000_000_000_i64, "period_type": "TRIAL", "price": 0,
            "environment": "PRODUCTION"}})
        .to_string()
        .into_bytes()
    };
    // RevenueCat sends the header as configured: with the scheme or the key alone.
    let reply = s
        .post(
            &path,
            Some(format!("Bearer {}", s.webhook.expose())),
            body("e-1"),
        )
        .await;
    assert_eq!(
        (reply.status.as_u16(), reply.json()["stored"].clone()),
        (200, json!(true)),
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let reply = s
        .post(&path, Some(s.webhook.expose().to_owned()), body("e-1"))
        .await;
    assert_eq!(
        (reply.status.as_u16(), reply.json()["stored"].clone()),
        (200, json!(false))
    );
    assert_eq!(
        s.db.count("SELECT COUNT(*) AS n FROM store_notifications WHERE trial = true AND user_id = 'user-1'").await,
        1
    );
    // No key, an SDK key, a key of nothing: 401, nothing stored.
    s.post(&path, None, body("e-2"))
        .await
        .problem(401, "missing_api_key");
    s.post(
        &path,
        Some(format!("Bearer {}", s.sdk.expose())),
        body("e-2"),
    )
    .await
    .problem(401, "key_type_not_allowed");
    let unknown = fixtures::key(KeyEnvironment::Test, 'z');
    s.post(
        &path,
        Some(format!("Bearer {}", unknown.expose())),
        body("e-2"),
    )
    .await
    .problem(401, "invalid_api_key");
    // Another workspace's app; a body that is not RevenueCat's.
    s.post(
        &format!("/v1/apps/{APP2}/store/revenuecat"),
        Some(s.webhook.expose().to_owned()),
        body("e-3"),
    )
    .await
    .problem(403, "forbidden_app");
    let reply = s
        .post(
            &path,
            Some(s.webhook.expose().to_owned()),
            br#"{"api_version": "1.0"}"#.to_vec(),
        )
        .await;
    let problem = reply.problem(400, "invalid_notification");
    assert!(
        problem["detail"].as_str().unwrap().contains("/event"),
        "{problem}"
    );
    // The webhook key opens no SDK route.
    let reply = s
        .post(
            &format!("/v1/apps/{APP1}/events"),
            Some(format!("Bearer {}", s.webhook.expose())),
            b"[]".to_vec(),
        )
        .await;
    reply.problem(401, "key_type_not_allowed");
    assert_eq!(s.stored().await, 1);
}

/// D25 on the store routes: a flood from one address is limited (429 with `Retry-After`)
/// before any body is read or verified, and what was refused is not stored.
async fn a_flood_of_notifications_is_limited(backend: Backend) {
    let mut config = HttpConfig::default();
    config.rate_limit.per_ip_rps = 1;
    config.rate_limit.per_ip_burst = 5;
    let Some(s) = Served::start_with(backend, config).await else {
        return;
    };
    let mut statuses = Vec::new();
    for i in 0..12 {
        let payload = notification(
            &s.signer,
            &format!("flood-{i}"),
            "DID_RENEW",
            BUNDLE,
            "Production",
        );
        let reply = s.apple(APP1, &payload).await;
        if reply.status.as_u16() == 429 {
            assert!(reply.header("retry-after").is_some());
            reply.problem(429, "rate_limited");
        }
        statuses.push(reply.status.as_u16());
    }
    let ok = statuses.iter().filter(|s| **s == 200).count();
    assert!(ok <= 6 && statuses.contains(&429), "{statuses:?}");
    assert_eq!(
        s.stored().await as usize,
        ok,
        "only what was answered 200 is stored"
    );
    // The same address's webhooks share its budget.
    let path = format!("/v1/apps/{APP1}/store/revenuecat");
    let reply = s
        .post(&path, Some(s.webhook.expose().to_owned()), b"{}".to_vec())
        .await;
    reply.problem(429, "rate_limited");
}

/// Issue 65: a purchase date the store cannot hold (year -9999, before PostgreSQL's 4713 BC;
/// year -1, before SQLite's year 0) is permanent bad input, refused 400 with the value quoted,
/// never the 503 the stores would retry for days; the first and last instants of years 0 to
/// 9999 are stored on both stores.
async fn a_purchase_date_the_store_cannot_hold_is_refused_not_retried(backend: Backend) {
    let Some(s) = Served::start(backend).await else {
        return;
    };
    let ms = |year: i32| {
        time::Date::from_calendar_date(year, time::Month::January, 1)
            .unwrap()
            .midnight()
            .assume_utc()
            .unix_timestamp()
            * 1000
    };
    let path = format!("/v1/apps/{APP1}/store/revenuecat");
    let revenuecat = |id: &str, at: i64| {
        let body = json!({"api_version": "1.0", "event": {"id": id, "type": "INITIAL_PURCHASE",
            "app_user_id": "user-1", "transaction_id": id, "purchased_at_ms": at,
            "price": 5, "environment": "PRODUCTION"}});
        (path.clone(), body.to_string().into_bytes())
    };
    for (id, at) in [
        ("e-9999", ms(-9999)),
        ("e-4714", ms(-4714)),
        ("e-1", ms(-1)),
    ] {
        let (path, body) = revenuecat(id, at);
        let reply = s
            .post(&path, Some(s.webhook.expose().to_owned()), body)
            .await;
        let problem = reply.problem(400, "invalid_notification");
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.contains("/event/purchased_at_ms") && detail.contains(&at.to_string()),
            "{detail}"
        );
    }
    let apple = |id: &str, at: i64| {
        let transaction = s.signer.sign(&json!({
            "transactionId": id, "bundleId": BUNDLE, "purchaseDate": at, "price": 29990,
            "currency": "USD", "appAccountToken": USER}));
        s.signer.sign(&json!({
            "notificationType": "SUBSCRIBED", "notificationUUID": id, "version": "2.0",
            "data": {"bundleId": BUNDLE, "environment": "Production",
                     "signedTransactionInfo": transaction}}))
    };
    let reply = s.apple(APP1, &apple("n-9999", ms(-9999))).await;
    let problem = reply.problem(400, "invalid_notification");
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains("/transaction/purchaseDate") && detail.contains(&ms(-9999).to_string()),
        "{detail}"
    );
    assert_eq!(s.stored().await, 0, "nothing refused was stored");

    // The ends of the range are stored.
    // 9999 is not a leap year.
    let last = ms(9999) + 365 * 86_400_000 - 1;
    for (id, at) in [("e-first", ms(0)), ("e-last", last)] {
        let (path, body) = revenuecat(id, at);
        let reply = s
            .post(&path, Some(s.webhook.expose().to_owned()), body)
            .await;
        assert_eq!(
            reply.status.as_u16(),
            200,
            "{id}: {}",
            String::from_utf8_lossy(&reply.body)
        );
    }
    let reply = s.apple(APP1, &apple("n-last", last)).await;
    assert_eq!(
        reply.status.as_u16(),
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(s.stored().await, 3);
}

/// Issue 65 (schema-driven fuzzing): an unknown app on the store routes is 404
/// `app_not_found`, as on every other app route, whatever the body; an app of the catalog not
/// set up for the App Store is 409 `store_not_configured` (its state, not the request, is at
/// fault: the same notification is taken once the app has an `apple_bundle_id`); a
/// `signedPayload` that is not a non-empty compact JWS is 400 `invalid_notification`, quoted.
async fn the_store_routes_answer_unknown_apps_and_bodies_as_the_document_says(backend: Backend) {
    let Some(s) = Served::start(backend).await else {
        return;
    };
    const UNKNOWN: &str = "6a000000-0000-4000-8000-000000000000";
    for body in [
        r#"{"signedPayload": ""}"#,
        "{}",
        r#"{"signedPayload": "a.b.c"}"#,
    ] {
        s.post(
            &format!("/v1/apps/{UNKNOWN}/store/apple"),
            None,
            body.as_bytes().to_vec(),
        )
        .await
        .problem(404, "app_not_found");
    }
    let good = notification(&s.signer, "n-1", "SUBSCRIBED", BUNDLE, "Production");
    let problem = s
        .apple(APP2, &good)
        .await
        .problem(409, "store_not_configured");
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains(APP2) && detail.contains("apple_bundle_id"),
        "{detail}"
    );
    for (payload, quoted) in [
        ("", r#""""#),
        ("not a jws", r#""not a jws""#),
        ("a.b", r#""a.b""#),
        ("a..c", r#""a..c""#),
        ("a.b.c.d", r#""a.b.c.d""#),
    ] {
        let problem = s
            .apple(APP1, payload)
            .await
            .problem(400, "invalid_notification");
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.contains("/signedPayload") && detail.contains(quoted),
            "{payload:?}: {detail}"
        );
    }
    // RevenueCat: the key first (D9), then the app: an unknown one is 404.
    let body = br#"{"api_version": "1.0", "event": {"id": "e-1", "type": "TEST"}}"#;
    s.post(
        &format!("/v1/apps/{UNKNOWN}/store/revenuecat"),
        Some(s.webhook.expose().to_owned()),
        body.to_vec(),
    )
    .await
    .problem(404, "app_not_found");
    for event in [
        r#"{"id": "", "type": "TEST"}"#,
        r#"{"id": "e-2", "type": ""}"#,
    ] {
        let body = format!(r#"{{"api_version": "1.0", "event": {event}}}"#);
        s.post(
            &format!("/v1/apps/{APP1}/store/revenuecat"),
            Some(s.webhook.expose().to_owned()),
            body.into_bytes(),
        )
        .await
        .problem(400, "invalid_notification");
    }
    assert_eq!(s.stored().await, 0);
    // What the document says the bodies must be.
    let doc = flowgate_http::openapi::document();
    let apple = &doc["paths"]["/v1/apps/{appId}/store/apple"]["post"];
    let payload = &apple["requestBody"]["content"]["application/json"]["schema"]["properties"]
        ["signedPayload"];
    assert_eq!(payload["minLength"], 1, "{payload}");
    assert_eq!(
        payload["pattern"], r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$",
        "three base64url parts (the signature's may be empty: an unsigned JWS is 401)"
    );
    for (status, route) in [("409", "apple"), ("404", "apple"), ("404", "revenuecat")] {
        let op = &doc["paths"][format!("/v1/apps/{{appId}}/store/{route}")]["post"];
        assert!(
            op["responses"][status].is_object(),
            "{route} documents {status}"
        );
    }
    let event = &doc["paths"]["/v1/apps/{appId}/store/revenuecat"]["post"]["requestBody"]
        ["content"]["application/json"]["schema"]["properties"]["event"];
    assert_eq!(event["properties"]["id"]["minLength"], 1, "{event}");
}

on_sqlite!(
    a_flood_of_notifications_is_limited,
    the_store_routes_answer_unknown_apps_and_bodies_as_the_document_says,
);

on_both_stores!(
    a_purchase_date_the_store_cannot_hold_is_refused_not_retried,
    apple_notifications_are_verified_stored_once_and_refused_otherwise,
    revenuecat_webhooks_take_a_webhook_key_and_are_stored_once,
);
