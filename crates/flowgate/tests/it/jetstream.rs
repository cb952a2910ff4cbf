//! The event bus end to end (D16): `serve` publishing to NATS JetStream, `flowgate ingest`
//! writing to PostgreSQL. A 202 means the stream acknowledged the events (D15), so killing
//! `serve` and `ingest` with SIGKILL loses nothing; a 3-replica stream on a 3-node cluster
//! loses nothing when a node dies and keeps taking events; NATS unreachable means 503, never
//! 202. Each test runs nats-server processes of its own.

use std::time::{Duration, Instant};

use flowgate_store::Backend;
use flowgate_testkit::{NatsCluster, NatsServer, TestDb};

use crate::support::{
    assert_exactly_once, event, http, run, wait_stored, Ingester, Load, LoadOptions, Served,
};

fn bus_settings(url: &str, replicas: &str) -> Vec<(&'static str, String)> {
    vec![
        ("FLOWGATE__EVENTS__SINK", "jetstream".to_owned()),
        ("FLOWGATE__EVENTS__JETSTREAM__URL", url.to_owned()),
        ("FLOWGATE__EVENTS__JETSTREAM__REPLICAS", replicas.to_owned()),
        // Messages an ingest process held when it died come back after 3 s.
        (
            "FLOWGATE__EVENTS__JETSTREAM__ACK_WAIT_MS",
            "3000".to_owned(),
        ),
        (
            "FLOWGATE__EVENTS__JETSTREAM__CONNECT_TIMEOUT_MS",
            "2000".to_owned(),
        ),
    ]
}

fn as_refs<'a>(settings: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    settings.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

fn four_clients() -> LoadOptions {
    LoadOptions {
        producers: 4,
        batch: 100,
        retry_after: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_serve_and_ingest_loses_no_acknowledged_event() {
    let nats = NatsServer::start();
    let settings = bus_settings(&nats.url(), "1");
    let settings = as_refs(&settings);
    let Some(mut s) = Served::start_migrated(Backend::Postgres, &settings).await else {
        return;
    };
    let mut ingest = Ingester::start(&s.db.url, &settings).await;
    let load = Load::with(s.api, &s.key, four_clients());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    s.kill9();
    ingest.kill9();
    tokio::time::sleep(Duration::from_millis(300)).await;
    s.restart().await;
    ingest.restart().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let outcome = load.finish();
    assert_eq!(s.terminate().await, Some(0));
    assert!(
        outcome.accepted.len() >= 1_000,
        "{} accepted",
        outcome.accepted.len()
    );
    wait_stored(&s.db, &outcome.accepted, Duration::from_secs(60)).await;
    // Let any redelivery of what the killed ingest held land before counting.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        ingest
            .metric("flowgate_ingest_events_stored_total")
            .is_some_and(|n| n > 0.0),
        "the restarted ingest stored events"
    );
    assert_eq!(
        ingest.metric("flowgate_ingest_consumer_pending_messages"),
        Some(0.0),
        "the stream is drained"
    );
    assert_eq!(ingest.terminate().await, Some(0));
    let stored = s.stored_sdk_event_ids().await;
    assert_exactly_once(&stored, &outcome.accepted);
    outcome.assert_only_sent_events_stored(&stored);
    println!(
        "jetstream, kill -9 of serve and ingest: {} events answered 202, all stored once",
        outcome.accepted.len()
    );
}

/// The name of the server leading the stream's replicas.
async fn stream_leader(url: &str) -> String {
    let servers: Vec<&str> = url.split(',').collect();
    let client = async_nats::connect(servers.as_slice()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let mut stream = js.get_stream("FLOWGATE_EVENTS").await.unwrap();
    let info = stream.info().await.unwrap();
    info.cluster
        .as_ref()
        .and_then(|c| c.leader.clone())
        .expect("a clustered stream has a leader")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_node_cluster_loses_nothing_when_the_stream_leader_dies() {
    let mut cluster = NatsCluster::start();
    let settings = bus_settings(&cluster.url(), "3");
    let settings = as_refs(&settings);
    let Some(mut s) = Served::start_migrated(Backend::Postgres, &settings).await else {
        return;
    };
    let mut ingest = Ingester::start(&s.db.url, &settings).await;
    let load = Load::with(s.api, &s.key, four_clients());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let leader = stream_leader(&cluster.url()).await;
    // The nodes are named n1, n2, n3.
    let node = leader
        .strip_prefix('n')
        .and_then(|n| n.parse::<usize>().ok())
        .expect("a node of ours")
        - 1;
    let before = load.accepted();
    cluster.nodes[node].kill();
    let killed_at = Instant::now();
    // The stream's other replicas elect a leader (NATS takes a few seconds); meanwhile
    // requests wait or get 503, and then publishing goes on with the node still down.
    while load.accepted() < before + 2_000 {
        assert!(
            killed_at.elapsed() < Duration::from_secs(20),
            "publishing did not go on with a node down: {before} events accepted before the kill, {} after {:?}",
            load.accepted(),
            killed_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let failover = killed_at.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = load.accepted();
    cluster.nodes[node].restart();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let outcome = load.finish();
    assert_eq!(s.terminate().await, Some(0));
    wait_stored(&s.db, &outcome.accepted, Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(ingest.terminate().await, Some(0));
    let stored = s.stored_sdk_event_ids().await;
    assert_exactly_once(&stored, &outcome.accepted);
    outcome.assert_only_sent_events_stored(&stored);
    println!(
        "jetstream, 3 replicas, leader {leader} killed after {before} events accepted: 2,000 more \
         accepted {failover:?} after the kill, {after} with the node still down, {} in all, all \
         stored once",
        outcome.accepted.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_unreachable_gets_503_never_202() {
    let mut nats = NatsServer::start();
    let mut settings = bus_settings(&nats.url(), "1");
    settings.push(("FLOWGATE__EVENTS__ACK_TIMEOUT_MS", "1000".to_owned()));
    let settings = as_refs(&settings);
    let Some(s) = Served::start_migrated(Backend::Postgres, &settings).await else {
        return;
    };
    let path = format!("/v1/apps/{}/events", crate::fixtures::APP1);
    let post = || {
        let body =
            serde_json::Value::Array(vec![event(&uuid::Uuid::new_v4().to_string())]).to_string();
        let started = Instant::now();
        let (status, reply) = http(s.api, "POST", &path, Some(&s.key), body.as_bytes()).unwrap();
        (status, reply, started.elapsed())
    };
    assert_eq!(post().0, 202, "published while NATS is up");
    nats.kill();
    let until = Instant::now() + Duration::from_secs(4);
    let mut refused = 0;
    while Instant::now() < until {
        let (status, reply, took) = post();
        assert_eq!(status, 503, "NATS is down: {reply}");
        assert!(reply.contains("\"overloaded\""), "{reply}");
        assert!(took < Duration::from_millis(2500), "the 503 took {took:?}");
        refused += 1;
    }
    assert!(refused >= 2);
    let (_, ready) = http(s.admin, "GET", "/readyz", None, b"").unwrap();
    assert!(ready.contains("\"status\":\"degraded\""), "{ready}");
    assert!(ready.contains("jetstream: "), "{ready}");
    // NATS returns: the client reconnects and events are published again.
    nats.restart();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if post().0 == 202 {
            break;
        }
        assert!(Instant::now() < deadline, "no 202 after NATS came back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_and_ingest_refuse_to_start_without_a_usable_stream() {
    let db = TestDb::sqlite().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let unreachable = bus_settings(&format!("nats://u:secret@127.0.0.1:{closed}"), "1");
    let mut env = as_refs(&unreachable);
    env.push(("FLOWGATE__DATABASE__URL", &db.url));
    let api = format!("127.0.0.1:{}", crate::support::free_port());
    let admin = format!("127.0.0.1:{}", crate::support::free_port());
    env.push(("FLOWGATE__SERVER__LISTEN", &api));
    env.push(("FLOWGATE__ADMIN__LISTEN", &admin));
    for command in ["serve", "ingest"] {
        let (code, _, stderr) = run(&[command], &env);
        assert_eq!(code, Some(1), "{command}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "cannot reach NATS at nats://u:***@127.0.0.1:{closed}"
            )),
            "{command}: {stderr}"
        );
        assert!(!stderr.contains("secret"), "{stderr}");
    }
    // Reachable, but nobody ran `flowgate migrate`.
    let nats = NatsServer::start();
    let fresh = bus_settings(&nats.url(), "1");
    let mut env = as_refs(&fresh);
    env.push(("FLOWGATE__DATABASE__URL", &db.url));
    env.push(("FLOWGATE__SERVER__LISTEN", &api));
    env.push(("FLOWGATE__ADMIN__LISTEN", &admin));
    for command in ["serve", "ingest"] {
        let (code, _, stderr) = run(&[command], &env);
        assert_eq!(code, Some(1), "{command}: {stderr}");
        assert!(
            stderr.contains("stream FLOWGATE_EVENTS does not exist: run `flowgate migrate`"),
            "{command}: {stderr}"
        );
    }
    let (code, stdout, stderr) = run(&["migrate"], &env);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains(
            "stream FLOWGATE_EVENTS (1 replica(s)): created; consumer flowgate-ingest: created"
        ),
        "{stdout}"
    );
    let (_, stdout, _) = run(&["migrate"], &env);
    assert!(
        stdout.contains("unchanged; consumer flowgate-ingest: unchanged"),
        "{stdout}"
    );
}

/// D26 end to end: a message in a format this release does not read (a later release's) is
/// left in the stream by `flowgate ingest`, counted on `/metrics` by format, and set aside as
/// no dead letter; the events published beside it are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_leaves_a_message_it_cannot_read_in_the_stream_and_counts_it() {
    let nats = NatsServer::start();
    let settings = bus_settings(&nats.url(), "1");
    let settings = as_refs(&settings);
    let Some(mut s) = Served::start_migrated(Backend::Postgres, &settings).await else {
        return;
    };
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Flowgate-Format", "flowgate.events.v2+json");
    js.publish_with_headers("flowgate.events", headers, "[{\"v2\":true}]".into())
        .await
        .unwrap()
        .await
        .unwrap();
    let path = format!("/v1/apps/{}/events", crate::fixtures::APP1);
    let id = uuid::Uuid::new_v4().to_string();
    let body = serde_json::json!([event(&id)]).to_string();
    let (status, reply) = http(s.api, "POST", &path, Some(&s.key), body.as_bytes()).unwrap();
    assert_eq!(status, 202, "{reply}");

    let ingest = Ingester::start(&s.db.url, &settings).await;
    wait_stored(&s.db, std::slice::from_ref(&id), Duration::from_secs(20)).await;
    let wanted = "flowgate_ingest_unreadable_messages_total{format=\"flowgate.events.v2+json\"} ";
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, metrics) = http(ingest.admin, "GET", "/metrics", None, b"").unwrap();
        assert_eq!(status, 200);
        if metrics.lines().any(|l| l.starts_with(wanted)) {
            break;
        }
        assert!(Instant::now() < deadline, "not counted:\n{metrics}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let env = [("FLOWGATE__DATABASE__URL", s.db.url.as_str())];
    let (code, listed, stderr) = run(&["events", "dead-letters", "list", "--json"], &env);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(listed.trim(), "[]", "not a dead letter");
    let mut stream = js.get_stream("FLOWGATE_EVENTS").await.unwrap();
    assert_eq!(
        stream.info().await.unwrap().state.messages,
        1,
        "the stored message is gone, the unreadable one stays"
    );
    drop(ingest);
    assert_eq!(s.terminate().await, Some(0));
}
