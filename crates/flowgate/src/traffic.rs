//! `flowgate demo --traffic N` (D22): N simulated users of the demo app through the real API
//! of a running flowgate. Each resolves the `paywall` placement (the demo experiment), opens
//! the flow it is given, and some complete it and buy, at rates that differ by variant (the
//! `trial` variant converts better), so the report printed at the end shows a winner. Each
//! user's draws come from the GrowthBook hash of its id: a run is reproducible.
//!
//! A buyer's store then reports on the purchase (D30): for about half of them RevenueCat (with
//! the demo's webhook key), for the others the App Store, its notifications signed by the
//! test root of `stores.demo_apple_signer`, which `flowgate serve` trusts in development
//! (without it, RevenueCat reports on every buyer). The user ids are UUIDs, as an App Store
//! `appAccountToken` must be.

use std::time::Duration;

use flowgate_domain::bucketing::hash_v2;
use flowgate_domain::ids::{AppId, ExperimentId};
use flowgate_domain::ports::ResultsSource;
use futures_util::StreamExt as _;
use serde_json::{json, Value};

use flowgate_http::apple_demo_signer::DemoSigner;

use crate::cli::ExitCode;
use crate::config::Config;
use crate::demo;
use crate::terminal::errln;

/// Requests in flight at once.
const CONCURRENCY: usize = 16;

/// How a variant's users behave: the chance to complete the flow, to buy, and the price.
struct Behaviour {
    complete: f64,
    purchase: f64,
    price: f64,
    /// Of the purchases (each a free trial's start), the share the store reports converted to
    /// paid (D30).
    convert: f64,
    /// Of the paid ones, the share refunded.
    refund: f64,
}

/// The demo experiment's variants by name: `trial` completes and buys more, at a lower price,
/// but its trials convert to paid half as often, and more are refunded: what the app sees
/// (`purchase_complete`) and what the store reports (`proceeds`, D30) disagree.
fn behaviour(variant: &str) -> Behaviour {
    match variant {
        "trial" => Behaviour {
            complete: 0.45,
            purchase: 0.12,
            price: 24.99,
            convert: 0.35,
            refund: 0.10,
        },
        _ => Behaviour {
            complete: 0.35,
            purchase: 0.08,
            price: 29.99,
            convert: 0.70,
            refund: 0.02,
        },
    }
}

/// What was sent.
#[derive(Default)]
struct Sent {
    exposed: u64,
    accepted: u64,
    rejected: u64,
}

/// The API with the demo key, and the demo's webhook key and App Store signer for its store
/// notifications.
struct Api {
    client: awc::Client,
    base: String,
    key: String,
    webhook: String,
    apple: Option<DemoSigner>,
}

impl Api {
    /// POSTs `body`; a 429 (the per-address limit, D10) is retried after its `Retry-After`,
    /// as an SDK does.
    async fn post(&self, path: &str, body: &Value) -> Result<(u16, Value), String> {
        self.post_as(path, body, Some(&self.key)).await
    }

    /// As [`Api::post`], with `key`, or no key (the App Store's notifications carry none).
    async fn post_as(
        &self,
        path: &str,
        body: &Value,
        key: Option<&str>,
    ) -> Result<(u16, Value), String> {
        let url = format!("{}{path}", self.base);
        loop {
            let mut request = self.client.post(&url);
            if let Some(key) = key {
                request = request.insert_header(("Authorization", format!("Bearer {key}")));
            }
            let mut response = request
                .send_json(body)
                .await
                .map_err(|e| format!("POST {url}: {e}"))?;
            let bytes = response
                .body()
                .await
                .map_err(|e| format!("POST {url}: the answer: {e}"))?;
            let status = response.status().as_u16();
            if status == 429 {
                let wait = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(1);
                tokio::time::sleep(Duration::from_secs(wait.clamp(1, 10))).await;
                continue;
            }
            return Ok((
                status,
                serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            ));
        }
    }

    async fn resolve(&self, user: &str) -> Result<(u16, Value), String> {
        self.post(
            &format!("/v1/apps/{}/placements/paywall/resolve", demo::APP),
            &json!({
                "user_id": user, "session_id": format!("{user}-s1"), "device_platform": "ios",
                "attributes": {"country": "US"},
            }),
        )
        .await
    }

    /// One simulated user: resolve, then the events of opening the flow it is given, and
    /// maybe completing it and buying (none when it is not in the experiment).
    async fn user(&self, user: &str) -> Result<Vec<Value>, String> {
        let (status, flow) = self.resolve(user).await?;
        if status != 200 {
            return Err(format!("resolve answered {status}: {flow}"));
        }
        let Some(variant) = flow["variant_name"].as_str() else {
            return Ok(Vec::new());
        };
        let b = behaviour(variant);
        let now = flowgate_domain::text::rfc3339(time::OffsetDateTime::now_utc());
        let event = |event_type: &str, extra: Value| {
            let mut e = json!({
                "event_id": uuid::Uuid::new_v4().to_string(),
                "app_id": demo::APP,
                "flow_id": flow["flow_id"], "flow_version_id": flow["flow_version_id"],
                "experiment_id": flow["experiment_id"], "variant_id": flow["variant_id"],
                "variant_name": variant, "placement_id": "paywall",
                "user_id": user, "session_id": format!("{user}-s1"), "device_platform": "ios",
                "event_type": event_type, "timestamp": now,
                "sdk_version": "flowgate-demo",
            });
            if let (Some(e), Some(extra)) = (e.as_object_mut(), extra.as_object()) {
                e.extend(extra.clone());
            }
            e
        };
        let mut events = vec![event("flow_open", json!({}))];
        if hash_v2("demo-complete", user) < b.complete {
            events.push(event("flow_complete", json!({})));
        }
        if hash_v2("demo-purchase", user) < b.purchase {
            events.push(event(
                "purchase_complete",
                json!({"revenue": b.price, "currency": "USD",
                       "properties": {"product_id": "demo-annual"}}),
            ));
            match &self.apple {
                Some(signer) if hash_v2("demo-store", user) < 0.5 => {
                    self.apple_notifications(user, &b, signer).await?;
                }
                _ => self.revenuecat_notifications(user, &b).await?,
            }
        }
        Ok(events)
    }

    /// What RevenueCat would send about `user`'s purchase (D30): the free trial's start, its
    /// conversion to paid, a refund; just after the exposure, so a report read now counts them.
    async fn revenuecat_notifications(&self, user: &str, b: &Behaviour) -> Result<(), String> {
        let now = time::OffsetDateTime::now_utc();
        let ms = |t: time::OffsetDateTime| (t.unix_timestamp_nanos() / 1_000_000) as i64;
        let event = |n: u32, kind: &str, trial: bool, at: i64| {
            json!({"api_version": "1.0", "event": {
                "id": format!("demo-{user}-{n}"), "type": kind, "app_user_id": user,
                "product_id": "demo-annual", "environment": "SANDBOX", "store": "APP_STORE",
                "period_type": if trial { "TRIAL" } else { "NORMAL" },
                "transaction_id": format!("demo-{user}-t{}", if trial { 1 } else { 2 }),
                "original_transaction_id": format!("demo-{user}-t1"),
                "purchased_at_ms": at,
                "price_in_purchased_currency": if trial { 0.0 } else { b.price },
                "currency": "USD", "cancel_reason": "CUSTOMER_SUPPORT"}})
        };
        // Whole milliseconds, as the stores send them: one past now, never before the exposure.
        let start = ms(now) + 1;
        let mut sends = vec![event(1, "INITIAL_PURCHASE", true, start)];
        if hash_v2("demo-convert", user) < b.convert {
            sends.push(event(2, "RENEWAL", false, start + 1));
            if hash_v2("demo-refund", user) < b.refund {
                sends.push(event(3, "CANCELLATION", false, start + 1));
            }
        }
        let path = format!("/v1/apps/{}/store/revenuecat", demo::APP);
        for body in sends {
            let (status, answer) = self.post_as(&path, &body, Some(&self.webhook)).await?;
            if status != 200 {
                return Err(format!("{path} answered {status}: {answer}"));
            }
        }
        Ok(())
    }

    /// What the App Store would send about `user`'s purchase (D30), as App Store Server
    /// Notifications V2 signed by `signer`: `SUBSCRIBED` for the free trial's start,
    /// `DID_RENEW` for its conversion to paid, `REFUND`.
    async fn apple_notifications(
        &self,
        user: &str,
        b: &Behaviour,
        signer: &DemoSigner,
    ) -> Result<(), String> {
        let now = time::OffsetDateTime::now_utc();
        let ms = |t: time::OffsetDateTime| (t.unix_timestamp_nanos() / 1_000_000) as i64;
        let start = ms(now) + 1;
        let transaction = |n: u32, trial: bool, at: i64| {
            let mut t = json!({
                "transactionId": format!("{user}-t{n}"),
                "originalTransactionId": format!("{user}-t1"),
                "bundleId": demo::APPLE_BUNDLE_ID, "productId": "demo-annual",
                "purchaseDate": at, "originalPurchaseDate": start,
                "expiresDate": at + 365 * 86_400_000_i64, "quantity": 1,
                "type": "Auto-Renewable Subscription", "appAccountToken": user,
                "inAppOwnershipType": "PURCHASED", "signedDate": at,
                "environment": "Sandbox", "storefront": "USA", "storefrontId": "143441",
                "transactionReason": if trial { "PURCHASE" } else { "RENEWAL" },
                "price": if trial { 0 } else { (b.price * 1000.0).round() as i64 },
                "currency": "USD",
            });
            if trial {
                t["offerType"] = json!(1);
                t["offerDiscountType"] = json!("FREE_TRIAL");
            }
            t
        };
        let notification = |n: u32, kind: &str, subtype: Option<&str>, mut t: Value| {
            if kind == "REFUND" {
                t["revocationDate"] = t["purchaseDate"].clone();
                t["revocationReason"] = json!(0);
            }
            let mut payload = json!({
                "notificationType": kind,
                // The user's UUID with `n` in its second group: one per notification.
                "notificationUUID": format!("{}-{n:04x}-{}", &user[..8], &user[14..]),
                "version": "2.0", "signedDate": t["signedDate"],
                "data": {
                    "bundleId": demo::APPLE_BUNDLE_ID, "environment": "Sandbox",
                    "status": 1, "signedTransactionInfo": signer.sign(&t),
                },
            });
            if let Some(subtype) = subtype {
                payload["subtype"] = json!(subtype);
            }
            json!({"signedPayload": signer.sign(&payload)})
        };
        let mut sends = vec![notification(
            1,
            "SUBSCRIBED",
            Some("INITIAL_BUY"),
            transaction(1, true, start),
        )];
        if hash_v2("demo-convert", user) < b.convert {
            sends.push(notification(
                2,
                "DID_RENEW",
                None,
                transaction(2, false, start + 1),
            ));
            if hash_v2("demo-refund", user) < b.refund {
                sends.push(notification(
                    3,
                    "REFUND",
                    None,
                    transaction(2, false, start + 1),
                ));
            }
        }
        let path = format!("/v1/apps/{}/store/apple", demo::APP);
        for body in sends {
            let (status, answer) = self.post_as(&path, &body, None).await?;
            if status != 200 {
                return Err(format!("{path} answered {status}: {answer}"));
            }
        }
        Ok(())
    }

    /// Sends `events` (at most 100) in one request.
    async fn events(&self, events: Vec<Value>, sent: &mut Sent) -> Result<(), String> {
        let (status, answer) = self
            .post(
                &format!("/v1/apps/{}/events", demo::APP),
                &Value::Array(events),
            )
            .await?;
        if status != 202 {
            return Err(format!("events answered {status}: {answer}"));
        }
        sent.accepted += answer["accepted"].as_u64().unwrap_or(0);
        sent.rejected += answer["rejected"].as_u64().unwrap_or(0);
        Ok(())
    }
}

/// `flowgate demo --traffic N [--json]`: the users, then the experiment's report.
pub async fn traffic(
    store: &flowgate_store::Store,
    config: &Config,
    users: u64,
    json: bool,
) -> ExitCode {
    let base = crate::serve::base_url(&config.server.listen);
    let created = match demo::create(store, config.auth.key_environment, &base).await {
        Ok(created) => created,
        Err(e) => {
            errln!("flowgate: {e}");
            return ExitCode::Failure;
        }
    };
    let webhook = match demo::webhook_key(store, config.auth.key_environment).await {
        Ok(key) => key,
        Err(e) => {
            errln!("flowgate: {e}");
            return ExitCode::Failure;
        }
    };
    // The App Store signer the server trusts (created by `flowgate serve` in development).
    let signer = &config.stores.demo_apple_signer;
    let apple = if signer.as_os_str().is_empty() {
        errln!("flowgate: stores.demo_apple_signer is not set: RevenueCat reports on every buyer");
        None
    } else {
        match demo::apple_signer(signer, false) {
            Ok(signer) => Some(signer),
            Err(e) => {
                errln!(
                    "flowgate: stores.demo_apple_signer: {e}; `flowgate serve` creates it when \
                     missing: is it serving with the same configuration?"
                );
                return ExitCode::Failure;
            }
        }
    };
    let local = tokio::task::LocalSet::new();
    let sent = local
        .run_until(send(
            Api {
                client: awc::Client::builder()
                    .timeout(Duration::from_secs(10))
                    .finish(),
                base: base.clone(),
                key: created.key,
                webhook,
                apple,
            },
            users,
        ))
        .await;
    let sent = match sent {
        Ok(sent) => sent,
        Err(e) => {
            errln!("flowgate: {e}");
            return ExitCode::Failure;
        }
    };
    errln!(
        "flowgate: {users} users sent to {base}: {} in the experiment, {} events accepted, {} rejected",
        sent.exposed, sent.accepted, sent.rejected
    );
    let reader = match crate::adapters::results_reader(config) {
        Ok(reader) => reader,
        Err(code) => return code,
    };
    let (app, experiment): (AppId, String) = match demo::APP.parse() {
        Ok(app) => (app, demo::EXPERIMENT.to_owned()),
        Err(_) => return ExitCode::Failure,
    };
    let stored = wait_stored(&reader, app, &experiment, sent.exposed).await;
    if stored < sent.exposed {
        errln!(
            "flowgate: {stored} of the {} exposed users are stored after 30 s; the report shows \
             those",
            sent.exposed
        );
    }
    errln!("flowgate: the report (again any time: flowgate experiments results {experiment}):");
    errln!("");
    crate::experiments::experiments(
        store,
        config,
        crate::cli::ExperimentsCommand::Results {
            experiment,
            from: None,
            to: None,
            metrics: Vec::new(),
            method: None,
            horizon: None,
            json,
        },
    )
    .await
}

/// The demo experiment's exposed users stored, once they are `exposed` or after 30 s: the
/// events are stored in batches, after the requests were answered.
async fn wait_stored(
    reader: &flowgate_store::ResultsReader,
    app: AppId,
    experiment: &str,
    exposed: u64,
) -> u64 {
    let experiment_id: Option<ExperimentId> = experiment.parse().ok();
    let counted = flowgate_domain::results::ExposureCountQuery {
        app_id: app,
        experiments: experiment_id
            .map(|id| {
                let variants = demo::VARIANTS.iter().filter_map(|v| v.parse().ok());
                (id, variants.collect())
            })
            .into_iter()
            .collect(),
        to: time::OffsetDateTime::now_utc() + Duration::from_secs(3600),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut stored = 0;
    while std::time::Instant::now() < deadline {
        stored = match (reader.exposure_counts(&counted).await, experiment_id) {
            (Ok(counts), Some(id)) => counts.get(&id).copied().unwrap_or(0),
            _ => 0,
        };
        if stored >= exposed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stored
}

/// Sends the users, `CONCURRENCY` at a time, after waiting for the server to know the key.
async fn send(api: Api, users: u64) -> Result<Sent, String> {
    // The server learns the new key with its next catalog refresh.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        match api.resolve("demo-probe").await {
            Ok((200, _)) => break,
            Ok((401, _)) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok((status, body)) => return Err(format!("resolve answered {status}: {body}")),
            Err(e) => {
                return Err(format!(
                    "{e}: is flowgate serving at {}? Start it with `make run`",
                    api.base
                ))
            }
        }
    }
    // And the webhook key: RevenueCat's TEST notification until it is accepted.
    let path = format!("/v1/apps/{}/store/revenuecat", demo::APP);
    let probe = json!({"api_version": "1.0", "event": {"id": format!("demo-test-{}", uuid::Uuid::new_v4()), "type": "TEST"}});
    loop {
        match api.post_as(&path, &probe, Some(&api.webhook)).await? {
            (200, _) => break,
            (401, _) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            (status, body) => return Err(format!("{path} answered {status}: {body}")),
        }
    }
    // Users `<run>-0000-4000-8000-<i>`: UUIDs (an App Store `appAccountToken` is one), of
    // this run.
    let run = uuid::Uuid::new_v4().simple().to_string();
    let run = &run[..8];
    let api = &api;
    let mut users = futures_util::stream::iter(0..users)
        .map(|i| async move { api.user(&format!("{run}-0000-4000-8000-{i:012x}")).await })
        .buffer_unordered(CONCURRENCY);
    let mut total = Sent::default();
    // Events of several users share a request (at most 3 a user, 100 a request), as an SDK's
    // batches would: fewer requests under the per-address rate limit.
    let mut batch: Vec<Value> = Vec::new();
    while let Some(events) = users.next().await {
        let events = events?;
        total.exposed += u64::from(!events.is_empty());
        if batch.len() + events.len() > 100 {
            api.events(std::mem::take(&mut batch), &mut total).await?;
        }
        batch.extend(events);
    }
    if !batch.is_empty() {
        api.events(batch, &mut total).await?;
    }
    Ok(total)
}
