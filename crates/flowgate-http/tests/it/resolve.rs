//! Single resolve (D3, D8, D9): every status code the contract lists for the route.

use flowgate_domain::events::{EventSource, EventType, NoFlowReason};
use serde_json::{json, Value};

use crate::fixtures::*;
use crate::support::{on_both_stores, on_sqlite, server, Backend};

fn path(app: &str, key: &str) -> String {
    format!("/v1/apps/{app}/placements/{key}/resolve")
}

fn identity(extra: Value) -> Value {
    let mut body = json!({"user_id": "user-1", "session_id": "sess-1", "device_platform": "ios"});
    if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
        b.extend(e);
    }
    body
}

on_both_stores!(
    matched_flow_has_every_field,
    no_flow_body_is_exactly_flow_id_and_ttl
);
on_sqlite!(
    holdout_carries_experiment_fields,
    unknown_placement_is_200_no_flow_with_event,
    export_is_deterministic_and_records_nothing,
    path_and_body_problems_are_400,
    app_problems_are_404_and_403,
    media_type_and_size_problems,
    large_flows_are_sent_whole_in_single_and_batch_responses,
    gzip_resolve_sends_the_flow_compressed_once_per_version,
    gzip_batch_sends_each_flow_compressed_once_per_version,
    gzip_batch_sends_a_repeated_flow_as_a_copy,
);

/// The default flow's schema (4 KB) is sent as a shared chunk by single resolve and copied
/// into batch bodies: both arrive byte for byte, with an exact `Content-Length`.
async fn large_flows_are_sent_whole_in_single_and_batch_responses(backend: Backend) {
    let s = server!(backend);
    let schema = format!(
        r#""flow_schema":{{"screens":["default"],"text":"{}"}}"#,
        default_flow_text()
    );
    assert!(schema.len() > 4000);
    let r = s
        .post(&path(APP1, "onboarding"), &identity(json!({})))
        .await;
    assert_eq!(r.status, 200);
    let text = String::from_utf8(r.body.clone()).unwrap();
    assert!(text.contains(&schema), "{text}");
    assert_eq!(
        r.header("content-length").map(str::to_owned),
        Some(r.body.len().to_string())
    );
    assert_eq!(r.json()["flow_id"], FLOW_DEFAULT);
    assert_eq!(r.json()["cache_ttl_seconds"], 120);

    let r = s
        .post(
            &format!("/v1/apps/{APP1}/placements/resolve-batch"),
            &identity(json!({"placement_keys": ["onboarding", "broken", "onboarding"]})),
        )
        .await;
    assert_eq!(r.status, 200);
    let text = String::from_utf8(r.body.clone()).unwrap();
    assert_eq!(text.matches(&schema).count(), 1, "{text}");
    assert_eq!(
        r.header("content-length").map(str::to_owned),
        Some(r.body.len().to_string())
    );
    let results = r.json()["results"].as_array().unwrap().clone();
    assert_eq!(results.len(), 2, "duplicates are resolved once");
    assert_eq!(results[0]["placement_key"], "onboarding");
    assert_eq!(results[0]["flow_id"], FLOW_DEFAULT);
    assert_eq!(results[1]["error"], "flow_unpublished");
}

async fn matched_flow_has_every_field(backend: Backend) {
    let s = server!(backend);
    let r = s
        .post(
            &path(APP1, "onboarding"),
            &identity(json!({"attributes": {"country": "US"}})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let text = String::from_utf8(r.body.clone()).unwrap();
    // flow_schema is spliced byte for byte: the integer beyond 2^53 survives.
    assert!(
        text.contains(r#""flow_schema":{"big":12345678901234567890,"screens":[{"id":"s1"}]}"#),
        "{text}"
    );
    let body = r.json();
    assert_eq!(body["flow_id"], FLOW_US);
    assert_eq!(body["flow_version_id"], V_US_2);
    assert_eq!(body["flow_version"], 2);
    assert_eq!(body["schema_version"], 3);
    assert_eq!(body["media_base_url"], "https://cdn.example.com/media/");
    assert_eq!(body["icon_base_url"], "https://cdn.example.com/icons/");
    assert_eq!(
        body["fonts"],
        json!([{"family": "Inter", "weight": 400, "style": "normal", "url": "https://cdn.example.com/inter.woff2"}])
    );
    assert_eq!(body["cache_ttl_seconds"], 120);
    assert_eq!(body["renderer_mode"], "web");
    assert!(body.get("experiment_id").is_none() && body.get("variant_id").is_none());
    assert!(s.sink.events().is_empty(), "a served flow records nothing");
}

async fn no_flow_body_is_exactly_flow_id_and_ttl(backend: Backend) {
    let s = server!(backend);
    let r = s.post(&path(APP1, "empty"), &identity(json!({}))).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"flow_id": null, "cache_ttl_seconds": 120}));
    let events = s.sink.events();
    assert_eq!(events.len(), 1);
    assert_eq!(
        s.sink.capacities(),
        [1],
        "one allocation of one event: a vector grown by a push holds four, past the \
         allocator's per-thread cache (P26)"
    );
    let e = &events[0];
    assert_eq!(
        (e.event_type, e.source, e.reason),
        (
            EventType::ResolveNoFlow,
            EventSource::Server,
            Some(NoFlowReason::NoRuleMatched)
        )
    );
    assert_eq!(
        (
            e.user_id.as_str(),
            e.session_id.as_str(),
            e.placement_key.as_deref()
        ),
        ("user-1", "sess-1", Some("empty"))
    );
    // The app default TTL applies when the app has none (app 2 has none): D3.9.
    let r = s
        .post_with(
            &path(APP2, "nope"),
            Some(&s.keys.other_workspace),
            identity(json!({})).to_string().into_bytes(),
            &[],
        )
        .await;
    assert_eq!(r.json(), json!({"flow_id": null, "cache_ttl_seconds": 300}));
    // And the stored event round-trips through the real store.
    assert_eq!(s.flush_sink_to_store().await.inserted, 2);
}

/// A user id the fixture experiment assigns to `variant` (GrowthBook formula, D5).
fn user_in(variant: usize) -> String {
    use flowgate_domain::bucketing::{bucket_ranges, choose_variation, hash_v2};
    let ranges = bucket_ranges(2, 1.0, Some(&[0.5, 0.5]));
    (0..10_000)
        .map(|i| format!("user-{i}"))
        .find(|u| choose_variation(hash_v2(EXP, u), &ranges) == Some(variant))
        .unwrap()
}

async fn holdout_carries_experiment_fields(backend: Backend) {
    let s = server!(backend);
    let r = s
        .post(
            &path(APP1, "paywall"),
            &json!({"user_id": user_in(0), "session_id": "s", "device_platform": "web"}),
        )
        .await;
    assert_eq!(
        r.json(),
        json!({"flow_id": null, "cache_ttl_seconds": 120, "experiment_id": EXP, "variant_id": VAR_CONTROL, "variant_name": "control"})
    );
    let events = s.sink.events();
    assert_eq!(events[0].reason, Some(NoFlowReason::Holdout));
    assert_eq!(events[0].variant_id.as_deref(), Some(VAR_CONTROL));

    let r = s
        .post(
            &path(APP1, "paywall"),
            &json!({"user_id": user_in(1), "session_id": "s", "device_platform": "web"}),
        )
        .await;
    let body = r.json();
    assert_eq!(
        (body["flow_id"].as_str(), body["variant_name"].as_str()),
        (Some(FLOW_NEW), Some("new"))
    );
    assert_eq!(body["experiment_id"], EXP);
    assert_eq!(body["renderer_mode"], "web");
}

async fn unknown_placement_is_200_no_flow_with_event(backend: Backend) {
    let s = server!(backend);
    let r = s
        .post(&path(APP1, "never-heard-of-it"), &identity(json!({})))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["flow_id"], Value::Null);
    assert_eq!(
        s.sink.events()[0].reason,
        Some(NoFlowReason::UnknownPlacement)
    );
}

async fn export_is_deterministic_and_records_nothing(backend: Backend) {
    let s = server!(backend);
    let us = identity(json!({"attributes": {"country": "US"}}));
    let a = s
        .post(&format!("{}?export=true", path(APP1, "onboarding")), &us)
        .await;
    let b = s
        .post(
            &format!("{}?export=true", path(APP1, "onboarding")),
            &json!({"user_id": "x", "session_id": "y", "device_platform": "web"}),
        )
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.body, b.body,
        "export output is the same for every identity"
    );
    assert_eq!(a.json()["flow_id"], FLOW_DEFAULT);
    let none = s
        .post(&format!("{}?export=true", path(APP1, "paywall")), &us)
        .await;
    assert_eq!(
        none.json(),
        json!({"flow_id": null, "cache_ttl_seconds": 120})
    );
    assert!(
        s.sink.events().is_empty(),
        "export never records events (D3.5)"
    );
    let normal = s
        .post(&format!("{}?export=false", path(APP1, "onboarding")), &us)
        .await;
    assert_eq!(normal.json()["flow_id"], FLOW_US);
    s.post(&format!("{}?export=yes", path(APP1, "onboarding")), &us)
        .await
        .problem(400, "invalid_request");
}

async fn path_and_body_problems_are_400(backend: Backend) {
    let s = server!(backend);
    s.post(&path("not-a-uuid", "onboarding"), &identity(json!({})))
        .await
        .problem(400, "invalid_request");
    s.post(&path(APP1, "bad%20key"), &identity(json!({})))
        .await
        .problem(400, "invalid_request");
    s.post(&path(APP1, &"k".repeat(129)), &identity(json!({})))
        .await
        .problem(400, "invalid_request");
    let p = s
        .post(
            &path(APP1, "onboarding"),
            &json!({"session_id": "s", "device_platform": "tv", "attributes": []}),
        )
        .await
        .problem(400, "validation_failed");
    let fields: Vec<&str> = p["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        vec!["user_id", "device_platform", "attributes"],
        "every invalid field is listed"
    );
    s.post(
        &path(APP1, "onboarding"),
        &json!({"user_id": "", "session_id": "s", "device_platform": "ios"}),
    )
    .await
    .problem(400, "validation_failed");
    s.post(
        &path(APP1, "onboarding"),
        &json!({"user_id": 5, "session_id": "s", "device_platform": "ios"}),
    )
    .await
    .problem(400, "validation_failed");
    // D8: the no-flow event stores the identity, and PostgreSQL cannot keep U+0000; nothing
    // of such a request is resolved or recorded.
    for (user, session) in [("u\0", "s"), ("u", "\0s")] {
        for (url, extra) in [
            (path(APP1, "no-such-placement"), json!({})),
            (
                format!("/v1/apps/{APP1}/placements/resolve-batch"),
                json!({"placement_keys": ["no-such-placement"]}),
            ),
        ] {
            let mut body =
                json!({"user_id": user, "session_id": session, "device_platform": "ios"});
            body.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            let p = s.post(&url, &body).await.problem(400, "validation_failed");
            let field = if user.contains('\0') {
                "user_id"
            } else {
                "session_id"
            };
            assert_eq!(p["errors"][0]["field"], field, "{p}");
            assert_eq!(
                p["errors"][0]["message"], "must not contain the NUL character (U+0000)",
                "{p}"
            );
        }
    }
    assert!(s.sink.events().is_empty(), "no resolve_no_flow event");
    s.post(&path(APP1, "onboarding"), &json!([1, 2]))
        .await
        .problem(400, "invalid_request");
    let r = s
        .post_with(
            &path(APP1, "onboarding"),
            Some(&s.keys.sdk),
            b"{\"user_id\": ".to_vec(),
            &[],
        )
        .await;
    r.problem(400, "invalid_request");
    s.post_with(
        &path(APP1, "onboarding"),
        Some(&s.keys.sdk),
        Vec::new(),
        &[],
    )
    .await
    .problem(400, "invalid_request");
    assert!(s.sink.events().is_empty());
}

async fn app_problems_are_404_and_403(backend: Backend) {
    let s = server!(backend);
    s.post(
        &path("20000000-0000-4000-8000-0000000000ff", "onboarding"),
        &identity(json!({})),
    )
    .await
    .problem(404, "app_not_found");
    s.post(&path(APP2, "onboarding"), &identity(json!({})))
        .await
        .problem(403, "forbidden_app");
}

async fn media_type_and_size_problems(backend: Backend) {
    let s = server!(backend);
    let body = identity(json!({})).to_string().into_bytes();
    let p = path(APP1, "onboarding");
    s.post_with(
        &p,
        Some(&s.keys.sdk),
        body.clone(),
        &[("content-type", "text/plain")],
    )
    .await
    .problem(415, "unsupported_media_type");
    let ok = s
        .post_with(
            &p,
            Some(&s.keys.sdk),
            body.clone(),
            &[("content-type", "application/json; charset=utf-8")],
        )
        .await;
    assert_eq!(ok.status, 200, "charset is allowed");
    s.post_with(&p, Some(&s.keys.sdk), body, &[("content-encoding", "gzip")])
        .await
        .problem(415, "unsupported_media_type");
    let huge = json!({"user_id": "u", "session_id": "s", "device_platform": "ios", "attributes": {"blob": "x".repeat(70 * 1024)}});
    s.post(&p, &huge).await.problem(413, "payload_too_large");
}

/// A batch for a gzip client is sent like single resolve's: the flows compressed once per
/// version, the bytes around them stored, no compressor running for the response.
async fn gzip_batch_sends_each_flow_compressed_once_per_version(backend: Backend) {
    let s = server!(backend);
    let batch = format!("/v1/apps/{APP1}/placements/resolve-batch");
    let body = identity(json!({"placement_keys": ["onboarding", "broken", "no-such-placement"]}))
        .to_string()
        .into_bytes();
    let plain = s
        .post_with(&batch, Some(&s.keys.sdk), body.clone(), &[])
        .await;
    assert_eq!(plain.status, 200);
    assert_eq!(plain.json()["results"][0]["flow_id"], FLOW_DEFAULT);
    for accept in ["gzip", "gzip, deflate, br"] {
        let r = s.post_accepting(&batch, &body, accept).await;
        assert_eq!(r.gunzip(), plain.body, "{accept}: same bytes once decoded");
        assert!(r.body.len() * 2 < plain.body.len(), "{accept}: compressed");
        assert_eq!(
            r.body[10] & 0b110,
            0,
            "{accept}: the response's own bytes open the stream as a stored block (no compressor ran)"
        );
    }
}

/// Two placements of a batch that show the same version, adjacent: the second copy goes out
/// as a deflate copy of the first (as a stream compressor would send it), not compressed
/// again, and still no compressor runs for the response. (What a copy costs is checked by
/// `render`'s unit tests: the fixture's flow compresses to about what a copy costs.)
async fn gzip_batch_sends_a_repeated_flow_as_a_copy(backend: Backend) {
    let s = server!(backend);
    let batch = format!("/v1/apps/{APP1}/placements/resolve-batch");
    let two = identity(json!({"placement_keys": ["onboarding", "welcome"]}))
        .to_string()
        .into_bytes();
    let plain = s
        .post_with(&batch, Some(&s.keys.sdk), two.clone(), &[])
        .await;
    assert_eq!(plain.status, 200);
    let results = &plain.json()["results"];
    assert_eq!(results[0]["flow_id"], FLOW_DEFAULT);
    assert_eq!(results[1]["flow_id"], FLOW_DEFAULT);
    let r = s.post_accepting(&batch, &two, "gzip, deflate, br").await;
    assert_eq!(r.gunzip(), plain.body, "same bytes once decoded");
    assert_eq!(
        r.body[10] & 0b110,
        0,
        "stored JSON first: no compressor ran"
    );
}

/// A client accepting gzip gets the 4 KB flow compressed (once per version, spliced between
/// stored blocks): one valid gzip member (CRC and length checked by the decoder) whose bytes
/// decode to the identity response, with `Content-Length`, `Content-Encoding` and `Vary`.
async fn gzip_resolve_sends_the_flow_compressed_once_per_version(backend: Backend) {
    use std::io::Read as _;
    let s = server!(backend);
    let body = identity(json!({})).to_string().into_bytes();
    let onboarding = path(APP1, "onboarding");
    let plain = s.post_accepting(&onboarding, &body, "identity").await;
    assert_eq!(plain.status, 200);
    assert!(plain.header("content-encoding").is_none());
    assert_eq!(plain.json()["flow_id"], FLOW_DEFAULT);
    // Twice per header: the first compresses the version, the second reuses it.
    for accept in ["gzip", "gzip", "gzip, deflate, br", "br;q=0.5, gzip;q=0.9"] {
        let r = s.post_accepting(&onboarding, &body, accept).await;
        assert_eq!(r.gunzip(), plain.body, "{accept}: same bytes once decoded");
        assert!(
            r.body.len() * 2 < plain.body.len(),
            "the flow is compressed, not stored: {} of {} bytes",
            r.body.len(),
            plain.body.len()
        );
        assert_eq!(
            r.body[10] & 0b110,
            0,
            "{accept}: the response's own bytes open the stream as a stored block (no compressor ran)"
        );
    }
    // A response without a flow is under 1 KiB: sent as it is.
    let r = s
        .post_accepting(&path(APP1, "no-such-placement"), &body, "gzip")
        .await;
    assert_eq!(r.status, 200);
    assert!(r.header("content-encoding").is_none());
    assert_eq!(r.json()["flow_id"], Value::Null);
    // A larger one without a shared flow (a batch of unknown placements) is left to the
    // middleware's compressor.
    let keys: Vec<String> = (0..30).map(|i| format!("no-such-{i}")).collect();
    let batch = identity(json!({"placement_keys": keys}))
        .to_string()
        .into_bytes();
    let batch_path = format!("/v1/apps/{APP1}/placements/resolve-batch");
    let plain = s.post_accepting(&batch_path, &batch, "identity").await;
    assert!(plain.body.len() > 1024, "{} bytes", plain.body.len());
    let r = s.post_accepting(&batch_path, &batch, "gzip").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    let mut decoded = Vec::new();
    flate2::read::GzDecoder::new(r.body.as_slice())
        .read_to_end(&mut decoded)
        .expect("gzip from the middleware");
    assert_eq!(decoded, plain.body);
    assert!(r.body.len() * 2 < plain.body.len(), "compressed");
}
