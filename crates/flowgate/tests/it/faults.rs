//! Fault tests against the real binary and a real PostgreSQL: a store outage in the middle of
//! a load (with `events.ack = "buffered"`: the buffer carries the accepted events through it),
//! SIGTERM in the middle of a load, a full event buffer, and resolve during a store outage.
//! The store sits behind a TCP proxy the test cuts. SIGKILL and the acknowledgement modes are
//! in `durability`.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fixtures;
use crate::support::{
    assert_exactly_once, event, http, publish_version_3, resolve_onboarding, Load, Served,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_outage_mid_load_loses_no_accepted_event() {
    let Some(mut s) = Served::start(&[("FLOWGATE__EVENTS__ACK", "buffered")]).await else {
        return;
    };
    let load = Load::start(s.api, &s.key, 3);
    tokio::time::sleep(Duration::from_secs(2)).await;
    // About 10 s without a database: events keep being accepted into the buffer or refused
    // with 503; none accepted may be lost (D7, D15).
    s.proxy().cut();
    s.wait_ready("degraded", Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    s.proxy().restore();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let outcome = load.finish();
    let (accepted, refused) = (outcome.accepted, outcome.refused);
    assert_eq!(s.terminate().await, Some(0), "drained completely");
    let stored = s.stored_sdk_event_ids().await;
    assert!(
        accepted.len() > 1_000,
        "a real load: {} accepted, {refused} requests refused",
        accepted.len()
    );
    assert_exactly_once(&stored, &accepted);
    assert_eq!(
        stored.len(),
        accepted.len(),
        "only accepted events are stored"
    );
    println!(
        "outage: {} events accepted and stored exactly once, {refused} requests refused",
        accepted.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_load_stores_every_accepted_event_before_exit() {
    let Some(mut s) = Served::start(&[]).await else {
        return;
    };
    let load = Load::start(s.api, &s.key, 3);
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The load keeps going while the server shuts down.
    let code = s.terminate().await;
    let outcome = load.finish();
    assert_eq!(code, Some(0), "graceful exit");
    let stored = s.stored_sdk_event_ids().await;
    assert!(
        outcome.accepted.len() > 500,
        "{} accepted",
        outcome.accepted.len()
    );
    assert_exactly_once(&stored, &outcome.accepted);
    // A request in flight when the listener stopped may have been stored without its 202
    // reaching the client; nothing that was never sent is stored.
    outcome.assert_only_sent_events_stored(&stored);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_buffer_answers_503_and_keeps_what_it_accepted() {
    let Some(mut s) = Served::start(&[
        ("FLOWGATE__EVENTS__ACK", "buffered"),
        ("FLOWGATE__EVENTS__QUEUE_CAPACITY", "100"),
        ("FLOWGATE__EVENTS__BATCH_SIZE", "50"),
    ])
    .await
    else {
        return;
    };
    s.proxy().cut();
    let path = format!("/v1/apps/{}/events", fixtures::APP1);
    let mut accepted = Vec::new();
    let mut refused = 0;
    for _ in 0..10 {
        let ids: Vec<String> = (0..20).map(|_| uuid::Uuid::new_v4().to_string()).collect();
        let body = Value::Array(ids.iter().map(|id| event(id)).collect()).to_string();
        let (status, reply) = http(s.api, "POST", &path, Some(&s.key), body.as_bytes()).unwrap();
        match status {
            202 => accepted.extend(ids),
            503 => {
                let problem: Value = serde_json::from_str(&reply).unwrap();
                assert_eq!(problem["code"], "overloaded");
                refused += 1;
            }
            other => panic!("{other}: {reply}"),
        }
    }
    assert_eq!(accepted.len(), 100, "the buffer holds 100 events");
    assert_eq!(refused, 5, "then every request is refused whole");
    s.proxy().restore();
    assert_eq!(s.terminate().await, Some(0));
    let stored = s.stored_sdk_event_ids().await;
    assert_exactly_once(&stored, &accepted);
    assert_eq!(stored.len(), 100, "refused events were not stored");
}

/// The counter a metrics page reports for `name`.
fn counter(s: &Served, name: &str) -> Option<u64> {
    let (status, page) = http(s.admin, "GET", "/metrics", None, b"").unwrap();
    assert_eq!(status, 200);
    page.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_sent_again_after_it_was_stored_is_stored_once() {
    let Some(mut s) = Served::start(&[("FLOWGATE__EVENTS__FLUSH_INTERVAL_MS", "20")]).await else {
        return;
    };
    let path = format!("/v1/apps/{}/events", fixtures::APP1);
    let metric = "flowgate_store_event_conflict_retries_total";
    let first = event(&uuid::Uuid::new_v4().to_string());
    let body = Value::Array(vec![first.clone()]).to_string();
    let (status, _) = http(s.api, "POST", &path, Some(&s.key), body.as_bytes()).unwrap();
    assert_eq!(status, 202);
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.stored_sdk_event_ids().await.is_empty() {
        assert!(Instant::now() < deadline, "the first event was not stored");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        counter(&s, metric),
        Some(0),
        "a new event takes the plain insert"
    );
    // An SDK retry: the stored event again (the same body, timestamp included), with a new
    // one in the same request.
    let second = uuid::Uuid::new_v4().to_string();
    let body = Value::Array(vec![first.clone(), event(&second)]).to_string();
    let (status, reply) = http(s.api, "POST", &path, Some(&s.key), body.as_bytes()).unwrap();
    assert_eq!(status, 202, "{reply}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while counter(&s, metric) != Some(1) {
        assert!(
            Instant::now() < deadline,
            "the batch was not written again with ON CONFLICT"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(s.terminate().await, Some(0));
    let stored = s.stored_sdk_event_ids().await;
    let first = first["event_id"].as_str().unwrap().to_owned();
    assert_exactly_once(&stored, &[first, second]);
    assert_eq!(stored.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolve_keeps_serving_through_a_store_outage_and_picks_up_changes_after() {
    let Some(s) = Served::start(&[]).await else {
        return;
    };
    assert_eq!(resolve_onboarding(&s).1["flow_version"], 2);
    s.proxy().cut();
    let (mut ok, mut total) = (0, 0);
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let (status, body) = resolve_onboarding(&s);
        total += 1;
        if status == 200 && body["flow_id"] == fixtures::FLOW_US {
            ok += 1;
        }
    }
    assert_eq!(
        ok, total,
        "100% of resolves succeed from the last snapshot during the outage"
    );
    s.wait_ready("degraded", Duration::from_secs(10)).await;

    // Publish a new version while the service still cannot reach the store.
    publish_version_3(&s.db.url);
    assert_eq!(
        resolve_onboarding(&s).1["flow_version"],
        2,
        "still the last snapshot"
    );

    s.proxy().restore();
    let restored = Instant::now();
    loop {
        let (status, body) = resolve_onboarding(&s);
        assert_eq!(status, 200);
        if body["flow_version"] == 3 {
            break;
        }
        assert!(
            restored.elapsed() < Duration::from_secs(10),
            "the published change was not picked up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "change served {} ms after the store came back",
        restored.elapsed().as_millis()
    );
    s.wait_ready("ready", Duration::from_secs(10)).await;
}
