//! OpenFeature's remote evaluation protocol under the app (D32): a flag is a placement, its
//! value exactly single resolve's result for the same identity.

use awc::http::Method;
use flowgate_domain::events::NoFlowReason;
use serde_json::{json, Value};

use crate::fixtures::*;
use crate::support::{on_sqlite, server, Backend};

fn flag(app: &str, key: &str) -> String {
    format!("/v1/apps/{app}/ofrep/v1/evaluate/flags/{key}")
}

fn bulk(app: &str) -> String {
    format!("/v1/apps/{app}/ofrep/v1/evaluate/flags")
}

/// An OpenFeature context for `user`, and the resolve body with the same identity.
fn context(user: &str, country: &str) -> (Value, Value) {
    let ofrep = json!({"context": {
        "targetingKey": user, "session_id": "s-1", "device_platform": "ios", "country": country,
    }});
    let resolve = json!({
        "user_id": user, "session_id": "s-1", "device_platform": "ios",
        "attributes": {"country": country},
    });
    (ofrep, resolve)
}

on_sqlite!(
    a_flag_is_the_placements_resolve_result_with_its_reason,
    refusals_are_answered_as_ofrep_says,
    bulk_evaluates_every_placement_with_an_etag,
    configuration_advertises_polling_and_object_flags,
);

async fn a_flag_is_the_placements_resolve_result_with_its_reason(backend: Backend) {
    let s = server!(backend);
    let resolve = |key: &str| format!("/v1/apps/{APP1}/placements/{key}/resolve");
    // A rule's audience: TARGETING_MATCH, the flow version as the variant.
    let (ofrep, body) = context("user-1", "CA");
    let r = s.post(&flag(APP1, "onboarding"), &ofrep).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let evaluated = r.json();
    assert_eq!(evaluated["key"], "onboarding");
    assert_eq!(evaluated["reason"], "TARGETING_MATCH");
    assert_eq!(evaluated["variant"], V_US_2);
    assert_eq!(evaluated["metadata"]["flow_version_id"], V_US_2);
    assert_eq!(evaluated["metadata"]["flow_version"], 2);
    assert_eq!(
        evaluated["value"],
        s.post(&resolve("onboarding"), &body).await.json()
    );
    // No rule: the default, DEFAULT.
    let (ofrep, body) = context("user-1", "FR");
    let evaluated = s.post(&flag(APP1, "onboarding"), &ofrep).await.json();
    assert_eq!(evaluated["reason"], "DEFAULT");
    assert_eq!(evaluated["value"]["flow_id"], FLOW_DEFAULT);
    assert_eq!(
        evaluated["value"],
        s.post(&resolve("onboarding"), &body).await.json()
    );
    // An experiment: SPLIT, the variant the user is assigned, for every user as resolve
    // assigns them (a holdout included: no flow, still SPLIT).
    let mut seen = std::collections::BTreeSet::new();
    for n in 0..40 {
        let (ofrep, body) = context(&format!("user-{n}"), "FR");
        let evaluated = s.post(&flag(APP1, "paywall"), &ofrep).await.json();
        let resolved = s.post(&resolve("paywall"), &body).await.json();
        assert_eq!(evaluated["value"], resolved, "user-{n}");
        assert_eq!(evaluated["reason"], "SPLIT", "user-{n}");
        assert_eq!(evaluated["variant"], resolved["variant_id"], "user-{n}");
        assert_eq!(evaluated["metadata"]["experiment_id"], EXP);
        seen.insert(evaluated["variant"].as_str().unwrap().to_owned());
    }
    assert_eq!(seen.len(), 2, "both variants among 40 users: {seen:?}");
    // Nothing at all: DEFAULT, no variant, and resolve's no-flow event (D8).
    let (ofrep, _) = context("user-1", "FR");
    let evaluated = s.post(&flag(APP1, "empty"), &ofrep).await.json();
    assert_eq!(
        evaluated,
        json!({"key": "empty", "reason": "DEFAULT", "metadata": {},
               "value": {"flow_id": null, "cache_ttl_seconds": 120}})
    );
    let events = s.sink.events();
    assert!(
        events
            .iter()
            .any(|e| e.placement_key.as_deref() == Some("empty")
                && e.reason == Some(NoFlowReason::NoRuleMatched)),
        "{events:?}"
    );
}

async fn refusals_are_answered_as_ofrep_says(backend: Backend) {
    let s = server!(backend);
    let (ofrep, _) = context("user-1", "CA");
    let r = s.post(&flag(APP1, "nope"), &ofrep).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["errorCode"], "FLAG_NOT_FOUND");
    assert_eq!(r.json()["key"], "nope");
    let missing = json!({"context": {"session_id": "s", "device_platform": "ios"}});
    let r = s.post(&flag(APP1, "onboarding"), &missing).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        (r.json()["key"].clone(), r.json()["errorCode"].clone()),
        (json!("onboarding"), json!("TARGETING_KEY_MISSING"))
    );
    let no_session = json!({"context": {"targetingKey": "u", "device_platform": "ios"}});
    let r = s.post(&flag(APP1, "onboarding"), &no_session).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["errorCode"], "INVALID_CONTEXT");
    assert!(
        r.json()["errorDetails"]
            .as_str()
            .unwrap()
            .contains("session_id"),
        "{:?}",
        r.json()
    );
    let bad_platform =
        json!({"context": {"targetingKey": "u", "session_id": "s", "device_platform": "tv"}});
    let r = s.post(&bulk(APP1), &bad_platform).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["errorCode"], "INVALID_CONTEXT");
    assert!(r.json().get("key").is_none(), "bulk names no flag");
    let key = Some(&s.keys.sdk);
    let r = s
        .post_with(&flag(APP1, "onboarding"), key, b"{".to_vec(), &[])
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["errorCode"], "PARSE_ERROR");
    // The key's checks are resolve's: none (401), another workspace's app (403).
    let body = ofrep.to_string().into_bytes();
    let r = s
        .post_with(&flag(APP1, "onboarding"), None, body.clone(), &[])
        .await;
    assert_eq!(r.status, 401);
    let r = s.post(&flag(APP2, "onboarding"), &ofrep).await;
    assert_eq!(r.status, 403);
}

async fn bulk_evaluates_every_placement_with_an_etag(backend: Backend) {
    let s = server!(backend);
    let (ofrep, _) = context("user-7", "US");
    let r = s.post(&bulk(APP1), &ofrep).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let flags = r.json()["flags"].as_array().unwrap().clone();
    let mut keys: Vec<&str> = flags.iter().map(|f| f["key"].as_str().unwrap()).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["broken", "empty", "onboarding", "paywall", "welcome"]
    );
    for f in &flags {
        let single = s
            .post(&flag(APP1, f["key"].as_str().unwrap()), &ofrep)
            .await;
        assert_eq!(f, &single.json(), "bulk and single agree");
    }
    let etag = r.header("etag").unwrap().to_owned();
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "strong: {etag}"
    );
    // The same context with its members in another order: the same tag, and 304.
    let reordered = br#"{"context": {"country": "US", "device_platform": "ios", "session_id": "s-1", "targetingKey": "user-7"}}"#;
    let key = Some(&s.keys.sdk);
    let again = s.post_with(&bulk(APP1), key, reordered.to_vec(), &[]).await;
    assert_eq!(again.header("etag"), Some(etag.as_str()));
    let matched = [("if-none-match", etag.as_str())];
    let not_modified = s
        .post_with(&bulk(APP1), key, reordered.to_vec(), &matched)
        .await;
    assert_eq!(not_modified.status, 304);
    assert!(not_modified.body.is_empty());
    assert_eq!(not_modified.header("etag"), Some(etag.as_str()));
    // Another user: another tag, and a full answer despite the old tag.
    let (other, _) = context("user-8", "US");
    let body = other.to_string().into_bytes();
    let fresh = s.post_with(&bulk(APP1), key, body, &matched).await;
    assert_eq!(fresh.status, 200);
    assert_ne!(fresh.header("etag"), Some(etag.as_str()));
}

async fn configuration_advertises_polling_and_object_flags(backend: Backend) {
    let s = server!(backend);
    let path = format!("/v1/apps/{APP1}/ofrep/v1/configuration");
    let sdk = crate::support::TestServer::bearer(&s.keys.sdk);
    let r = s
        .request(Method::GET, &path, &[("authorization", sdk.as_str())])
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json()["capabilities"],
        json!({
            "cacheInvalidation": {"polling": {"enabled": true, "minPollingIntervalMs": 1000}},
            "flagEvaluation": {"supportedTypes": ["object"]},
        })
    );
    let r = s.request(Method::GET, &path, &[]).await;
    assert_eq!(r.status, 401);
    let r = s.post(&path, &json!({})).await;
    assert_eq!(r.status, 405);
}
