//! Events (D7): one test per validation rule (each rejects exactly that event), idempotency,
//! limits, gzip, overload.

use std::io::Write;

use serde_json::{json, Value};

use crate::fixtures::*;
use crate::support::{on_both_stores, on_sqlite, server, Backend, TestServer};

fn path() -> String {
    format!("/v1/apps/{APP1}/events")
}

/// A valid event of app 1 with a fresh id.
pub fn event() -> Value {
    json!({
        "event_id": uuid::Uuid::new_v4().to_string(),
        "app_id": APP1,
        "flow_id": FLOW_US,
        "flow_version_id": V_US_1,
        "user_id": "user-1",
        "session_id": "sess-1",
        "device_platform": "ios",
        "event_type": "flow_complete",
        "timestamp": time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap(),
        "sdk_version": "2.1.0",
        "screen_index": 3,
        "properties": {"close_reason": "done"}
    })
}

/// Posts a valid event and the mutated one: exactly the mutated one is rejected, with `code`.
async fn rejects(backend: Backend, code: &str, mutate: impl Fn(&mut Value)) {
    let s = server!(backend);
    let mut bad = event();
    mutate(&mut bad);
    let r = s.post(&path(), &json!([event(), bad])).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let body = r.json();
    assert_eq!(
        (body["accepted"].as_u64(), body["rejected"].as_u64()),
        (Some(1), Some(1)),
        "{body}"
    );
    let errors = body["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["index"], 1);
    assert_eq!(errors[0]["code"], code, "{body}");
    assert!(errors[0]["message"].is_string());
    assert_eq!(
        s.sink.events().len(),
        1,
        "only the valid event reaches the sink"
    );
}

fn set(field: &'static str, value: Value) -> impl Fn(&mut Value) {
    move |e| e[field] = value.clone()
}

fn remove(field: &'static str) -> impl Fn(&mut Value) {
    move |e| {
        e.as_object_mut().unwrap().remove(field);
    }
}

fn ts(offset: time::Duration) -> Value {
    json!((time::OffsetDateTime::now_utc() + offset)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap())
}

async fn rule_not_an_object(b: Backend) {
    rejects(b, "not_an_object", |e| *e = json!("just a string")).await
}
async fn rule_missing_field(b: Backend) {
    rejects(b, "missing_field", remove("session_id")).await
}
async fn rule_null_required_field(b: Backend) {
    rejects(b, "missing_field", set("sdk_version", Value::Null)).await
}
async fn rule_invalid_type(b: Backend) {
    rejects(b, "invalid_type", set("user_id", json!(42))).await
}
async fn rule_invalid_uuid(b: Backend) {
    rejects(b, "invalid_uuid", set("event_id", json!("not-a-uuid"))).await
}
async fn rule_app_mismatch(b: Backend) {
    rejects(b, "app_mismatch", set("app_id", json!(APP2))).await
}
async fn rule_unknown_flow_version(b: Backend) {
    rejects(
        b,
        "unknown_flow_version",
        set("flow_version_id", json!(V_APP2_1)),
    )
    .await
}
async fn rule_flow_mismatch(b: Backend) {
    rejects(b, "flow_mismatch", set("flow_id", json!(FLOW_NEW))).await
}
async fn rule_invalid_length(b: Backend) {
    rejects(b, "invalid_length", set("user_id", json!("u".repeat(257)))).await
}
async fn rule_invalid_character(b: Backend) {
    rejects(b, "invalid_character", set("user_id", json!("u\0"))).await;
    rejects(
        b,
        "invalid_character",
        set("properties", json!({"plan": ["pro\u{0}"]})),
    )
    .await
}
async fn rule_invalid_platform(b: Backend) {
    rejects(
        b,
        "invalid_platform",
        set("device_platform", json!("windows")),
    )
    .await
}
async fn rule_invalid_renderer_mode(b: Backend) {
    rejects(
        b,
        "invalid_renderer_mode",
        set("renderer_mode", json!("canvas")),
    )
    .await
}
async fn rule_unknown_event_type(b: Backend) {
    rejects(
        b,
        "unknown_event_type",
        set("event_type", json!("flow_teleport")),
    )
    .await
}
async fn rule_server_only_event_type(b: Backend) {
    rejects(
        b,
        "server_only_event_type",
        set("event_type", json!("resolve_no_flow")),
    )
    .await
}
async fn rule_invalid_timestamp(b: Backend) {
    rejects(
        b,
        "invalid_timestamp",
        set("timestamp", json!("2026-11-21 10:00:00")),
    )
    .await
}
async fn rule_timestamp_in_future(b: Backend) {
    rejects(b, "timestamp_in_future", move |e| {
        e["timestamp"] = ts(time::Duration::hours(25))
    })
    .await
}
async fn rule_timestamp_too_old(b: Backend) {
    rejects(b, "timestamp_too_old", move |e| {
        e["timestamp"] = ts(-time::Duration::days(32))
    })
    .await
}
async fn rule_invalid_number(b: Backend) {
    rejects(b, "invalid_number", set("screen_index", json!(-1))).await
}
async fn rule_currency_required(b: Backend) {
    rejects(b, "currency_required", set("revenue", json!(9.99))).await
}
async fn rule_invalid_currency(b: Backend) {
    rejects(b, "invalid_currency", |e| {
        e["revenue"] = json!(9.99);
        e["currency"] = json!("eur");
    })
    .await
}
/// Issue 49: one public SDK key could erase an experiment's revenue with a purchase of
/// `f64::MAX`. Out of 0..=1000000 the purchase is rejected (`invalid_number`, the message
/// quoting the range) and the rest of the batch is stored; both ends are accepted.
async fn rule_revenue_out_of_range(backend: Backend) {
    let s = server!(backend);
    let purchase = |revenue: Value| {
        let mut e = event();
        e["event_type"] = json!("purchase_complete");
        e["revenue"] = revenue;
        e["currency"] = json!("USD");
        e
    };
    let refused = [
        json!(f64::MAX),
        json!(-1e308),
        json!(-5000),
        json!(1_000_000.5),
    ];
    let fine = [json!(0), json!(1_000_000), json!(4.99)];
    let batch: Vec<Value> = refused.iter().chain(&fine).cloned().map(purchase).collect();
    let r = s.post(&path(), &json!(batch)).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let body = r.json();
    assert_eq!(
        (body["accepted"].as_u64(), body["rejected"].as_u64()),
        (Some(3), Some(4)),
        "{body}"
    );
    let errors = body["errors"].as_array().unwrap();
    for (i, e) in errors.iter().enumerate() {
        assert_eq!(e["index"], i, "{body}");
        assert_eq!(e["code"], "invalid_number", "{body}");
        let message = e["message"].as_str().unwrap();
        assert!(
            message.contains("`revenue`") && message.contains("from 0 to 1000000 inclusive"),
            "{message}"
        );
    }
    assert_eq!(
        s.sink.events().len(),
        3,
        "only the purchases in range reach the sink"
    );
}
async fn rule_properties_too_large(b: Backend) {
    rejects(
        b,
        "properties_too_large",
        set("properties", json!({"blob": "x".repeat(8 * 1024)})),
    )
    .await
}

on_both_stores!(duplicates_are_stored_once);
on_sqlite!(
    rule_not_an_object,
    rule_missing_field,
    rule_null_required_field,
    rule_invalid_type,
    rule_invalid_uuid,
    rule_app_mismatch,
    rule_unknown_flow_version,
    rule_flow_mismatch,
    rule_invalid_length,
    rule_invalid_character,
    rule_invalid_platform,
    rule_invalid_renderer_mode,
    rule_unknown_event_type,
    rule_server_only_event_type,
    rule_invalid_timestamp,
    rule_timestamp_in_future,
    rule_timestamp_too_old,
    rule_invalid_number,
    rule_currency_required,
    rule_invalid_currency,
    rule_revenue_out_of_range,
    rule_properties_too_large,
    single_object_and_unknown_fields_are_accepted,
    count_limits,
    size_limits_and_gzip,
    overload_accepts_nothing,
    admission_comes_after_the_body_and_keeps_the_connection,
    body_and_app_problems,
);

async fn single_object_and_unknown_fields_are_accepted(backend: Backend) {
    let s = server!(backend);
    let mut e = event();
    e["from_a_newer_sdk"] = json!({"anything": true});
    e["revenue"] = json!(4.99);
    e["currency"] = json!("USD");
    let r = s.post(&path(), &e).await;
    assert_eq!(r.status, 202);
    assert_eq!(
        r.json(),
        json!({"accepted": 1, "rejected": 0}),
        "no errors member when nothing is rejected"
    );
    let stored = s.sink.events();
    assert_eq!(stored[0].payload.get("revenue"), Some(&json!(4.99)));
    assert!(!stored[0].payload.contains_key("from_a_newer_sdk"));
}

async fn duplicates_are_stored_once(backend: Backend) {
    let s = server!(backend);
    let e = event();
    // Twice in one request, and again in a retry: all counted as accepted (SDKs retry).
    let r = s.post(&path(), &json!([e, e])).await;
    assert_eq!(r.json()["accepted"], 2);
    let r = s.post(&path(), &e).await;
    assert_eq!(r.json()["accepted"], 1);
    let outcome = s.flush_sink_to_store().await;
    assert_eq!((outcome.inserted, outcome.duplicates), (1, 2));
    let n =
        s.db.count("SELECT count(*) AS n FROM analytics_events WHERE event_type = 'flow_complete'")
            .await;
    assert_eq!(n, 1);
}

async fn count_limits(backend: Backend) {
    let s = server!(backend);
    let hundred: Vec<Value> = (0..100).map(|_| event()).collect();
    let r = s.post(&path(), &json!(hundred)).await;
    assert_eq!(r.json()["accepted"], 100);
    let hundred_one: Vec<Value> = (0..101).map(|_| event()).collect();
    s.post(&path(), &json!(hundred_one))
        .await
        .problem(400, "too_many_events");
    s.post(&path(), &json!([]))
        .await
        .problem(400, "invalid_request");
    s.post(&path(), &json!(17))
        .await
        .problem(400, "invalid_request");
    // 101 invalid events: the limit applies before validation.
    assert_eq!(s.sink.events().len(), 100);
    // At most 100 error items, in order.
    let bad: Vec<Value> = (0..100).map(|_| json!({"nope": 1})).collect();
    let body = s.post(&path(), &json!(bad)).await.json();
    assert_eq!(
        (body["accepted"].as_u64(), body["rejected"].as_u64()),
        (Some(0), Some(100))
    );
    assert_eq!(body["errors"].as_array().unwrap().len(), 100);
    assert_eq!(body["errors"][99]["index"], 99);
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

async fn size_limits_and_gzip(backend: Backend) {
    let s = server!(backend);
    let batch: Vec<Value> = (0..50).map(|_| event()).collect();
    let plain = json!(batch).to_string().into_bytes();
    let r = s
        .post_with(
            &path(),
            Some(&s.keys.sdk),
            gzip(&plain),
            &[("content-encoding", "gzip")],
        )
        .await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["accepted"], 50);

    // Over 256 KiB, plain: 413 while reading.
    let mut big = event();
    big["padding"] = json!("x".repeat(257 * 1024));
    s.post(&path(), &big)
        .await
        .problem(413, "payload_too_large");
    // Small on the wire but over 256 KiB decoded: 413 (the limit is on the decoded body).
    let bomb = gzip(&vec![b' '; 20 * 1024 * 1024]);
    assert!(bomb.len() < 64 * 1024);
    s.post_with(
        &path(),
        Some(&s.keys.sdk),
        bomb,
        &[("content-encoding", "gzip")],
    )
    .await
    .problem(413, "payload_too_large");
    s.post_with(
        &path(),
        Some(&s.keys.sdk),
        b"not gzip at all".to_vec(),
        &[("content-encoding", "gzip")],
    )
    .await
    .problem(400, "invalid_request");
    // One gzip stream (D7): a second member, or bytes after the stream, is a 400, and none of
    // its events is accepted.
    let before = s.sink.events().len();
    let mut two = gzip(json!([event()]).to_string().as_bytes());
    two.extend_from_slice(&gzip(json!([event()]).to_string().as_bytes()));
    let mut trailing = gzip(json!([event()]).to_string().as_bytes());
    trailing.extend_from_slice(b"\n\n");
    for body in [two, trailing] {
        let r = s
            .post_with(
                &path(),
                Some(&s.keys.sdk),
                body,
                &[("content-encoding", "gzip")],
            )
            .await;
        r.problem(400, "invalid_request");
        assert!(
            r.json()["detail"]
                .as_str()
                .unwrap()
                .contains("after its gzip stream"),
            "{}",
            r.json()
        );
    }
    assert_eq!(s.sink.events().len(), before);
    s.post_with(
        &path(),
        Some(&s.keys.sdk),
        plain,
        &[("content-encoding", "br")],
    )
    .await
    .problem(415, "unsupported_media_type");
    assert_eq!(s.sink.events().len(), 50);
}

async fn overload_accepts_nothing(backend: Backend) {
    let s = server!(backend);
    s.sink.set_refusing(true);
    let r = s
        .post(&path(), &json!([event(), event(), {"bad": true}]))
        .await;
    r.problem(503, "overloaded");
    assert_eq!(r.header("retry-after"), Some("7"));
    assert!(s.sink.events().is_empty());
    s.sink.set_refusing(false);
    assert_eq!(s.post(&path(), &event()).await.json()["accepted"], 1);
}

/// One raw HTTP/1.1 exchange on an open connection: the status line's code.
async fn exchange(conn: &mut tokio::net::TcpStream, request: &[u8]) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    conn.write_all(request).await.unwrap();
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        let n = conn.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text[..end]
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .expect("content-length");
            if buf.len() >= end + 4 + length {
                return text[9..12].parse().unwrap();
            }
        }
    }
}

async fn admission_comes_after_the_body_and_keeps_the_connection(backend: Backend) {
    let s = server!(backend);
    s.sink.set_refusing_admission(true);
    // D25: nothing is reserved before the body is read and validated, so a body that is not
    // JSON is a 400 even when the sink has no room, and a request without valid events asks
    // the sink for nothing.
    s.post_with(&path(), Some(&s.keys.sdk), b"[{]".to_vec(), &[])
        .await
        .problem(400, "invalid_request");
    let r = s.post(&path(), &json!([{"bad": true}])).await;
    assert_eq!(r.status.as_u16(), 202);
    assert_eq!(
        (r.json()["accepted"].clone(), r.json()["rejected"].clone()),
        (json!(0), json!(1))
    );
    let r = s.post(&path(), &json!([event(), {"bad": true}])).await;
    r.problem(503, "overloaded");
    assert_eq!(r.header("retry-after"), Some("9"));

    // The refused body is read and dropped: the same connection serves the next request.
    let addr = s.base.trim_start_matches("http://").to_owned();
    let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let body = serde_json::to_vec(&json!([event(), event()])).unwrap();
    let request = |body: &[u8]| {
        let mut r = format!(
            "POST {} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            path(),
            TestServer::bearer(&s.keys.sdk),
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    };
    assert_eq!(exchange(&mut conn, &request(&body)).await, 503);
    s.sink.set_refusing_admission(false);
    assert_eq!(exchange(&mut conn, &request(&body)).await, 202);
    assert_eq!(s.sink.events().len(), 2, "only the second request's events");
}

async fn body_and_app_problems(backend: Backend) {
    let s = server!(backend);
    s.post_with(&path(), Some(&s.keys.sdk), b"[{]".to_vec(), &[])
        .await
        .problem(400, "invalid_request");
    s.post_with(
        &path(),
        Some(&s.keys.sdk),
        event().to_string().into_bytes(),
        &[("content-type", "application/xml")],
    )
    .await
    .problem(415, "unsupported_media_type");
    s.post(&format!("/v1/apps/{APP2}/events"), &event())
        .await
        .problem(403, "forbidden_app");
    s.post(
        "/v1/apps/20000000-0000-4000-8000-0000000000ff/events",
        &event(),
    )
    .await
    .problem(404, "app_not_found");
    s.post("/v1/apps/zzz/events", &event())
        .await
        .problem(400, "invalid_request");
}

/// D15: the 202 is sent only once the sink says the events are stored. The request is held
/// while its receipt is pending and answered when it resolves. (The sink is a test double:
/// these cases never touch the store, so they run on one backend.)
#[actix_web::test]
async fn the_202_waits_for_the_events_to_be_stored() {
    let s = server!(Backend::Sqlite);
    s.sink.set_storing(false);
    let (path, body) = (path(), json!([event(), event()]));
    let request = s.post(&path, &body);
    let answered = tokio::time::timeout(std::time::Duration::from_millis(300), request).await;
    assert!(answered.is_err(), "answered before the events were stored");
    let pending = s.post(&path, &body);
    let release = async {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        s.sink.set_storing(true);
    };
    let (r, ()) = tokio::join!(pending, release);
    assert_eq!(r.status, awc::http::StatusCode::ACCEPTED);
    assert_eq!(r.json()["accepted"], 2);
}

/// D15: events not stored within the acknowledgement timeout get 503 `overloaded` with the
/// sink's `Retry-After`; nothing is counted as accepted.
#[actix_web::test]
async fn events_not_stored_in_time_get_503() {
    let s = server!(Backend::Sqlite);
    s.sink
        .set_timing_out(Some(flowgate_domain::ports::Overloaded {
            retry_after_secs: 4,
        }));
    let r = s
        .post(&path(), &json!([event(), event(), {"bad": true}]))
        .await;
    r.problem(503, "overloaded");
    assert_eq!(r.header("retry-after"), Some("4"));
    s.sink.set_timing_out(None);
    let r = s.post(&path(), &json!([event()])).await;
    assert_eq!(r.status, awc::http::StatusCode::ACCEPTED);
}
