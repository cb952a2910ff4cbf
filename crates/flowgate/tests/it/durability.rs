//! What a 202 promises (D15), end to end through the real binary: with `events.ack =
//! "stored"` a SIGKILL loses no acknowledged event, on SQLite and on PostgreSQL, whether the
//! store is healthy or stalled by a held table lock; the same run with `buffered` shows the
//! loss that mode allows (so the test can fail); and a store that is down gets requests a 503
//! within the acknowledgement timeout, never a 202, with their retries stored once after. An
//! event the store refuses for good is a dead letter until replayed (D17).

use flowgate_domain::events::AnalyticsEvent;
use std::time::{Duration, Instant};

use flowgate_store::Backend;

use crate::support::{
    assert_exactly_once, event, http, run, Load, LoadOptions, LoadOutcome, Served,
};

/// Four clients posting batches of 100 valid events; the store healthy, then stalled by a
/// held lock on the events table, `kill -9` while stalled, a restart on the same store, the
/// load again on a healthy store and `kill -9` in the middle of it, a last restart and a
/// graceful stop. Returns what the clients saw and what the store holds.
async fn kill_mid_stream(backend: Backend, ack: &str) -> Option<(LoadOutcome, Vec<String>)> {
    let mut s = Served::start_on(backend, &[("FLOWGATE__EVENTS__ACK", ack)]).await?;
    let load = Load::with(
        s.api,
        &s.key,
        LoadOptions {
            producers: 4,
            batch: 100,
            retry_after: None,
        },
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let lock = s.db.lock_events().await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    s.kill9();
    lock.release().await;
    s.restart().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    s.kill9();
    s.restart().await;
    let outcome = load.finish();
    assert_eq!(s.terminate().await, Some(0), "the last run drained");
    let stored = s.stored_sdk_event_ids().await;
    assert!(
        outcome.accepted.len() >= 1_000,
        "a real load: {} events accepted",
        outcome.accepted.len()
    );
    outcome.assert_only_sent_events_stored(&stored);
    Some((outcome, stored))
}

async fn stored_mode_survives_sigkill(backend: Backend) {
    let Some((outcome, stored)) = kill_mid_stream(backend, "stored").await else {
        return;
    };
    assert_exactly_once(&stored, &outcome.accepted);
    println!(
        "{backend}, stored: {} events answered 202, all stored once; {} sent without a 202",
        outcome.accepted.len(),
        outcome.unanswered.len()
    );
}

/// `buffered` answers 202 before the events are stored: a SIGKILL while the store is stalled
/// loses what the buffer held. The test asserts the loss, so the stored-mode test above is
/// known to detect one.
async fn buffered_mode_loses_what_it_held(backend: Backend) {
    let Some((outcome, stored)) = kill_mid_stream(backend, "buffered").await else {
        return;
    };
    let stored_set: std::collections::HashSet<&String> = stored.iter().collect();
    assert_eq!(stored_set.len(), stored.len(), "no event is stored twice");
    let lost = outcome
        .accepted
        .iter()
        .filter(|id| !stored_set.contains(id))
        .count();
    assert!(
        lost > 0,
        "buffered mode lost nothing: the kill did not hit a held buffer"
    );
    println!(
        "{backend}, buffered: {lost} of {} events answered 202 were never stored",
        outcome.accepted.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_loses_no_acknowledged_event_on_sqlite() {
    stored_mode_survives_sigkill(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_loses_no_acknowledged_event_on_postgres() {
    stored_mode_survives_sigkill(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_in_buffered_mode_loses_the_buffer_on_sqlite() {
    buffered_mode_loses_what_it_held(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_in_buffered_mode_loses_the_buffer_on_postgres() {
    buffered_mode_loses_what_it_held(Backend::Postgres).await;
}

/// D15: with the store down, events requests get 503 within `events.ack_timeout_ms`, never
/// 202; clients that send the same events again after the store returns get them accepted,
/// and every event is stored once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_down_answers_503_in_time_and_retries_are_stored_once() {
    const ACK_TIMEOUT: Duration = Duration::from_millis(1000);
    let Some(mut s) = Served::start(&[("FLOWGATE__EVENTS__ACK_TIMEOUT_MS", "1000")]).await else {
        return;
    };
    let load = Load::with(
        s.api,
        &s.key,
        LoadOptions {
            producers: 4,
            batch: 20,
            retry_after: Some(Duration::from_millis(200)),
        },
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    s.proxy().cut();
    let cut_at = Instant::now();
    s.wait_ready("degraded", Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    s.proxy().restore();
    let restored_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let outcome = load.finish();
    assert_eq!(s.terminate().await, Some(0));

    // Requests sent while the store was surely down were all refused, each within the
    // timeout and its margin: from when the writes in flight at the cut have failed, to the
    // last moment a request could not have been stored after the store came back.
    let during: Vec<_> = outcome
        .exchanges
        .iter()
        .filter(|x| {
            x.sent > cut_at + Duration::from_millis(2500)
                && x.sent + ACK_TIMEOUT + Duration::from_millis(500) < restored_at
        })
        .collect();
    assert!(during.len() >= 8, "requests during the outage: {during:?}");
    for x in &during {
        assert_eq!(x.status, 503, "answered during the outage: {x:?}");
        assert!(
            x.took < ACK_TIMEOUT + Duration::from_millis(1500),
            "the 503 came late: {x:?}"
        );
    }
    assert!(
        outcome.accepted_on_retry > 0,
        "requests refused during the outage were accepted when sent again"
    );
    let stored = s.stored_sdk_event_ids().await;
    assert_exactly_once(&stored, &outcome.accepted);
    outcome.assert_only_sent_events_stored(&stored);
}

/// D17 end to end on PostgreSQL: an event a check constraint refuses is set aside as a dead
/// letter, its request is answered 202 (the event is durable, as a letter), its neighbours
/// are stored, and the writer goes on; `flowgate events dead-letters replay` stores it once
/// the constraint is gone, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_event_is_a_dead_letter_until_replayed() {
    let Some(mut s) = Served::start(&[]).await else {
        return;
    };
    s.db.execute(
        "ALTER TABLE analytics_events ADD CONSTRAINT no_poison CHECK (user_id <> 'poison')",
    )
    .await;
    let path = format!("/v1/apps/{}/events", crate::fixtures::APP1);
    let ids: Vec<String> = (0..3).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    let mut poison = event(&ids[1]);
    poison["user_id"] = serde_json::json!("poison");
    let body = serde_json::json!([event(&ids[0]), poison, event(&ids[2])]).to_string();
    let (status, reply) = http(s.api, "POST", &path, Some(&s.key), body.as_bytes()).unwrap();
    assert_eq!(status, 202, "{reply}");
    assert!(reply.contains("\"accepted\":3"), "{reply}");
    // The writer goes on.
    let later = uuid::Uuid::new_v4().to_string();
    let body = serde_json::json!([event(&later)]).to_string();
    let (status, _) = http(s.api, "POST", &path, Some(&s.key), body.as_bytes()).unwrap();
    assert_eq!(status, 202);
    let mut stored = s.stored_sdk_event_ids().await;
    stored.sort();
    let mut expected = vec![ids[0].clone(), ids[2].clone(), later.clone()];
    expected.sort();
    assert_eq!(stored, expected);

    let env = [("FLOWGATE__DATABASE__URL", s.db.url.as_str())];
    let (code, listed, stderr) = run(&["events", "dead-letters", "list", "--json"], &env);
    assert_eq!(code, Some(0), "{stderr}");
    let letters: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(letters.as_array().unwrap().len(), 1, "{letters}");
    assert_eq!(letters[0]["event_id"], ids[1].as_str());
    assert_eq!(letters[0]["payload"]["user_id"], "poison");
    assert!(
        letters[0]["error"].as_str().unwrap().contains("no_poison"),
        "{letters}"
    );
    let (status, metrics) = http(s.admin, "GET", "/metrics", None, b"").unwrap();
    assert_eq!(status, 200);
    assert!(
        metrics.contains("flowgate_sink_events_dead_lettered_total 1"),
        "{metrics}"
    );

    // Replayed while the cause is still there: refused again, kept, attempts counted.
    let (code, out, _) = run(&["events", "dead-letters", "replay"], &env);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("1 still refused"), "{out}");
    s.db.execute("ALTER TABLE analytics_events DROP CONSTRAINT no_poison")
        .await;
    let (code, out, stderr) = run(&["events", "dead-letters", "replay"], &env);
    assert_eq!(code, Some(0), "{out} {stderr}");
    assert!(
        out.contains("replayed 1 dead letter(s): 1 event(s) stored"),
        "{out}"
    );
    let (_, out, _) = run(&["events", "dead-letters", "list"], &env);
    assert!(out.contains("no dead letters"), "{out}");
    let stored = s.stored_sdk_event_ids().await;
    assert_eq!(stored.iter().filter(|id| **id == ids[1]).count(), 1);
    assert_eq!(stored.len(), 4);
    assert_eq!(s.terminate().await, Some(0));
}

/// D26: a dead letter in a format this release does not read (a later release's, during a
/// rolling upgrade or after a rollback) is neither replayed nor removed nor marked by
/// `flowgate events dead-letters replay`, which says which letters it skipped and why; the
/// readable letters beside it are replayed; `list` shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_in_a_format_this_release_does_not_read_is_skipped_and_kept() {
    use flowgate_domain::delivery::dead_letter;
    use flowgate_domain::ids::{DeadLetterId, EventId};
    use flowgate_domain::ports::{DeadLetter, DeadLetterStore, StoreError};

    let db = flowgate_testkit::TestDb::sqlite().await;
    let now = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap();
    let refused = StoreError::Unstorable {
        detail: "refused".to_owned(),
    };
    let readable = dead_letter(&AnalyticsEvent::sample(7), &refused, now).unwrap();
    let later_event = AnalyticsEvent::sample(8);
    let later = DeadLetter {
        id: DeadLetterId::new_v7(now),
        event_id: Some(EventId::from_uuid(uuid::Uuid::new_v4())),
        app_id: Some(later_event.app_id),
        format: "flowgate.event.v2+json".to_owned(),
        payload: br#"{"a_v2_shape":true}"#.to_vec(),
        error: "refused by the store".to_owned(),
        first_attempt_at: now,
        last_attempt_at: now,
        attempts: 1,
    };
    db.store
        .add_dead_letters(&[readable.clone(), later.clone()])
        .await
        .unwrap();
    let env = [("FLOWGATE__DATABASE__URL", db.url.as_str())];

    let (code, out, stderr) = run(&["events", "dead-letters", "replay", "--json"], &env);
    assert_eq!(code, Some(0), "skipping is no failure: {out} {stderr}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["replayed"], 1, "{report}");
    assert_eq!(report["refused"], serde_json::json!([]), "{report}");
    let skipped = report["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{report}");
    assert_eq!(skipped[0]["id"], later.id.to_string());
    assert_eq!(skipped[0]["format"], "flowgate.event.v2+json");
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("format \"flowgate.event.v2+json\" is not one this release reads"),
        "{report}"
    );

    // In words, too; and again: still there, untouched.
    let (code, out, _) = run(&["events", "dead-letters", "replay"], &env);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("replayed 0 dead letter(s)"), "{out}");
    assert!(out.contains("1 skipped"), "{out}");
    assert!(
        out.contains(&format!(
            "{}: skipped: format \"flowgate.event.v2+json\"",
            later.id
        )),
        "{out}"
    );
    let kept = db.store.list_dead_letters(None, 10).await.unwrap();
    assert_eq!(
        kept,
        vec![later.clone()],
        "kept as it was: no attempt recorded"
    );

    let (code, listed, _) = run(&["events", "dead-letters", "list", "--json"], &env);
    assert_eq!(code, Some(0));
    let letters: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(letters.as_array().unwrap().len(), 1, "{letters}");
    assert_eq!(letters[0]["format"], "flowgate.event.v2+json");
    assert_eq!(letters[0]["readable"], false);
    let (_, listed, _) = run(&["events", "dead-letters", "list"], &env);
    assert!(listed.contains(&later.id.to_string()), "{listed}");
    assert!(listed.contains("replay skips it"), "{listed}");
}
