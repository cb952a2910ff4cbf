//! Sticky assignment (D23) through the binary, on each adapter: the store's own table
//! (SQLite, PostgreSQL) and Redis. The fixture's paywall experiment made sticky; users
//! resolved through the real API; the catalog changed with `flowgate import` while the server
//! runs; assignments read back through resolve only.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use flowgate_store::Backend;
use serde_json::{json, Value};

use crate::fixtures;
use crate::support::{free_port, http, import, Served};

/// The Redis the tests share: `FLOWGATE_TEST_REDIS_URL`, `redis://127.0.0.1:6379` by default
/// (`make test` starts it). A test that cannot reach it fails.
fn redis_url() -> String {
    std::env::var("FLOWGATE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn redis_cli(url: &str, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .arg("-u")
        .arg(url)
        .args(args)
        .output()
        .expect("redis-cli runs (Debian's redis-tools; make test installs it)");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A key prefix of this test's own in the shared Redis, its keys deleted when dropped.
struct RedisPrefix {
    url: String,
    prefix: String,
}

impl RedisPrefix {
    fn new() -> Self {
        let url = redis_url();
        assert_eq!(
            redis_cli(&url, &["PING"]),
            "PONG",
            "Redis at {url} must answer (make redis-up)"
        );
        Self {
            url,
            prefix: format!("flowgate-test:{}", uuid::Uuid::new_v4().simple()),
        }
    }

    fn keys(&self) -> Vec<String> {
        redis_cli(
            &self.url,
            &["--scan", "--pattern", &format!("{}:*", self.prefix)],
        )
        .lines()
        .map(str::to_owned)
        .collect()
    }
}

impl Drop for RedisPrefix {
    fn drop(&mut self) {
        for key in self.keys() {
            redis_cli(&self.url, &["DEL", &key]);
        }
    }
}

/// The fixture catalog with the paywall experiment sticky at `control`:`new` weights.
fn sticky_catalog(control: u32, new: u32, bucket_version: u32, min_bucket_version: u32) -> Value {
    let mut doc = fixtures::catalog_json();
    let e = &mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["experiment"];
    e["sticky"] = json!(true);
    e["bucket_version"] = json!(bucket_version);
    e["min_bucket_version"] = json!(min_bucket_version);
    e["variants"][0]["weight"] = json!(control);
    e["variants"][1]["weight"] = json!(new);
    doc
}

/// Imports `catalog` into the served store and waits until the server serves it.
async fn publish(s: &Served, catalog: &Value) {
    let before = s.metric("flowgate_catalog_revision").unwrap_or(0.0);
    import(&s.db.url, catalog);
    let deadline = Instant::now() + Duration::from_secs(20);
    while s.metric("flowgate_catalog_revision").unwrap_or(0.0) <= before {
        assert!(Instant::now() < deadline, "the new catalog is never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The paywall's variant for `user` (`None`: not in the experiment), and the status.
fn paywall(api: SocketAddr, key: &str, user: &str) -> (u16, Option<String>) {
    let body = json!({"user_id": user, "session_id": "s", "device_platform": "ios"}).to_string();
    let path = format!("/v1/apps/{}/placements/paywall/resolve", fixtures::APP1);
    let (status, reply) = http(api, "POST", &path, Some(key), body.as_bytes()).unwrap();
    let reply: Value = serde_json::from_str(&reply).unwrap_or(Value::Null);
    (status, reply["variant_name"].as_str().map(str::to_owned))
}

fn variants(s: &Served, users: &[String]) -> BTreeMap<String, Option<String>> {
    users
        .iter()
        .map(|u| {
            let (status, variant) = paywall(s.api, &s.key, u);
            assert_eq!(status, 200, "{u}");
            (u.clone(), variant)
        })
        .collect()
}

/// As [`variants`], from `clients` threads at once: the server's workers take several users'
/// requests up together and read their assignments in one store read.
fn variants_at_once(
    s: &Served,
    users: &[String],
    clients: usize,
) -> BTreeMap<String, Option<String>> {
    let chunk = users.len().div_ceil(clients);
    std::thread::scope(|scope| {
        let handles: Vec<_> = users
            .chunks(chunk)
            .map(|part| scope.spawn(move || variants(s, part)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a client thread"))
            .collect()
    })
}

fn users(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn control_share(assigned: &BTreeMap<String, Option<String>>) -> f64 {
    let control = assigned
        .values()
        .filter(|v| v.as_deref() == Some("control"))
        .count();
    control as f64 / assigned.len() as f64
}

/// Waits until the writer behind resolve has stored at least `n` documents.
async fn stored_at_least(s: &Served, n: f64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stored = s
            .metric("flowgate_sticky_writes_total{outcome=\"stored\"}")
            .unwrap_or(0.0);
        if stored >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{stored} of {n} assignments stored"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The whole story on one adapter: assigned at 50/50, kept after a reweight to 90/10 that
/// moves about 40% of them without stored assignments, new users at 90/10; a raised
/// `bucket_version` buckets everyone again; a raised `min_bucket_version` excludes those
/// assigned before it.
async fn reweight_keeps_assigned_users(backend: Backend, settings: &[(&str, &str)]) {
    // The semantics are under test here, not the deadline: a debug build's first read on a
    // worker makes its connection (PostgreSQL through the test's proxy), which can take
    // longer than the default 20 ms, and a late read records nothing.
    let mut settings = settings.to_vec();
    settings.push(("FLOWGATE__STICKY__READ_TIMEOUT_MS", "2000"));
    let Some(s) = Served::start_on(backend, &settings).await else {
        panic!("{backend:?} must be reachable");
    };
    publish(&s, &sticky_catalog(1, 1, 0, 0)).await;
    let old = users("old", 200);
    let first = variants(&s, &old);
    assert!(
        first.values().all(Option::is_some),
        "coverage 1: everyone is in"
    );
    stored_at_least(&s, 200.0).await;

    publish(&s, &sticky_catalog(9, 1, 0, 0)).await;
    assert_eq!(variants(&s, &old), first, "nobody assigned moves");
    // The same from 16 clients at once: requests whose reads went to the store together each
    // get their own user's assignment.
    let store_reads = || s.metric("flowgate_sticky_store_reads_total").unwrap_or(0.0);
    let before = store_reads();
    assert_eq!(
        variants_at_once(&s, &old, 16),
        first,
        "nobody moves when read together ({} store reads for {} requests)",
        store_reads() - before,
        old.len()
    );
    let fresh = variants(&s, &users("new", 300));
    let share = control_share(&fresh);
    assert!(share > 0.8, "new users at 90/10: {share}");

    publish(&s, &sticky_catalog(9, 1, 1, 0)).await;
    let again = variants(&s, &old);
    let moved = old.iter().filter(|u| again[*u] != first[*u]).count();
    assert!(
        control_share(&again) > 0.8 && moved > 40,
        "bucket_version 1 re-randomises: {moved} moved, control {}",
        control_share(&again)
    );
    stored_at_least(&s, 700.0).await;

    publish(&s, &sticky_catalog(1, 1, 2, 2)).await;
    let excluded = variants(&s, &old);
    assert!(
        excluded.values().all(Option::is_none),
        "assignments below min_bucket_version exclude: {excluded:?}"
    );
    let entering = variants(&s, &users("later", 50));
    assert!(entering.values().all(Option::is_some), "new users enter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reweight_keeps_assigned_users_sqlite() {
    reweight_keeps_assigned_users(Backend::Sqlite, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reweight_keeps_assigned_users_postgres() {
    reweight_keeps_assigned_users(Backend::Postgres, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reweight_keeps_assigned_users_redis() {
    let redis = RedisPrefix::new();
    reweight_keeps_assigned_users(
        Backend::Sqlite,
        &[
            ("FLOWGATE__STICKY__REDIS_URL", redis.url.as_str()),
            ("FLOWGATE__STICKY__KEY_PREFIX", redis.prefix.as_str()),
        ],
    )
    .await;
    assert!(!redis.keys().is_empty(), "the documents are in Redis");
}

/// Two replicas, each with a database of its own, share one Redis: users assigned by the
/// first at 50/50 get the same variants from the second, which serves 90/10 and never saw
/// them. A read past its deadline records nothing (by design), so the deadline here is one a
/// loaded CI machine meets: the test is about agreement, not deadlines (which
/// `resolve_answers_while_redis_is_stopped` and the adapter's tests cover).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_sharing_redis_agree() {
    let redis = RedisPrefix::new();
    let settings = [
        ("FLOWGATE__STICKY__REDIS_URL", redis.url.as_str()),
        ("FLOWGATE__STICKY__KEY_PREFIX", redis.prefix.as_str()),
        ("FLOWGATE__STICKY__READ_TIMEOUT_MS", "2000"),
    ];
    let a = Served::start_on(Backend::Sqlite, &settings).await.unwrap();
    let b = Served::start_on(Backend::Sqlite, &settings).await.unwrap();
    publish(&a, &sticky_catalog(1, 1, 0, 0)).await;
    publish(&b, &sticky_catalog(9, 1, 0, 0)).await;
    let shared = users("shared", 200);
    let from_a = variants(&a, &shared);
    stored_at_least(&a, 200.0).await;
    assert_eq!(
        variants(&b, &shared),
        from_a,
        "replica b keeps replica a's assignments"
    );
    assert!(control_share(&from_a) < 0.65, "a assigned at 50/50");
    assert!(
        control_share(&variants(&b, &users("b-only", 200))) > 0.8,
        "b's own new users at 90/10"
    );
}

/// A Redis of the test's own, on a free port.
struct OwnRedis {
    port: u16,
    child: Child,
}

impl OwnRedis {
    fn start(port: u16) -> Self {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server runs (make redis-up installs it)");
        let url = format!("redis://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while redis_cli(&url, &["PING"]) != "PONG" {
            assert!(
                Instant::now() < deadline,
                "redis-server on {port} never answered"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { port, child }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Redis hung, then stopped, while the service runs: every resolve still answers 200 within a
/// bounded time (as without stored assignments, a hung Redis cut off by the read deadline), the
/// failed reads are counted; after a few failures the circuit opens and reads are not sent
/// (answered at once, `/readyz` degraded); a refused connection is counted `failed`, not late;
/// after Redis is back, a probe closes the circuit and reads succeed again on the same process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolve_answers_while_redis_is_stopped() {
    let mut redis = OwnRedis::start(free_port());
    let url = redis.url();
    let s = Served::start_on(
        Backend::Sqlite,
        &[
            ("FLOWGATE__STICKY__REDIS_URL", url.as_str()),
            ("FLOWGATE__STICKY__READ_TIMEOUT_MS", "20"),
        ],
    )
    .await
    .unwrap();
    publish(&s, &sticky_catalog(1, 1, 0, 0)).await;
    let before = variants(&s, &users("u", 50));
    stored_at_least(&s, 50.0).await;
    let metric = |s: &Served, outcome: &str| {
        s.metric(&format!(
            "flowgate_sticky_reads_total{{outcome=\"{outcome}\"}}"
        ))
        .unwrap_or(0.0)
    };
    let sent = |s: &Served| s.metric("flowgate_sticky_store_reads_total").unwrap_or(0.0);

    // Redis hung (SIGSTOP: connections accepted, nothing answered): the first reads end at the
    // 20 ms deadline, not at the client's own one-second response timeout; then the circuit
    // opens and the rest are not sent.
    let pid = redis.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    let (late_before, failed_before, sent_before) =
        (metric(&s, "timed_out"), metric(&s, "failed"), sent(&s));
    let mut slowest = Duration::ZERO;
    for user in users("hung", 30) {
        let start = Instant::now();
        let (status, variant) = paywall(s.api, &s.key, &user);
        slowest = slowest.max(start.elapsed());
        assert_eq!(status, 200, "{user}");
        assert!(variant.is_some(), "bucketed as without stored assignments");
    }
    let readyz = http(s.admin, "GET", "/readyz", None, b"").unwrap().1;
    assert!(Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap()
        .success());
    assert!(
        slowest < Duration::from_millis(500),
        "slowest resolve while hung {slowest:?}"
    );
    let late = metric(&s, "timed_out") - late_before;
    let failed = metric(&s, "failed") - failed_before;
    assert_eq!(
        late + failed,
        30.0,
        "every read of the hung Redis is counted"
    );
    assert!(
        late >= 5.0,
        "the reads before the circuit opened are late: {late}"
    );
    assert!(
        sent(&s) - sent_before < 30.0,
        "the open circuit sends no read: {} sent",
        sent(&s) - sent_before
    );
    assert!(
        readyz.contains("\"status\":\"degraded\"") && readyz.contains("sticky"),
        "{readyz}"
    );

    // Redis answers again: after the pause, a probe closes the circuit.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !http(s.admin, "GET", "/readyz", None, b"")
        .unwrap()
        .1
        .contains("\"sticky\":{\"ok\":true")
    {
        paywall(s.api, &s.key, "probe");
        assert!(Instant::now() < deadline, "the circuit never closed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Redis gone (connections refused): counted as failed, answered at once.
    let (late_before, failed_before) = (metric(&s, "timed_out"), metric(&s, "failed"));
    redis.stop();
    let mut slowest = Duration::ZERO;
    for user in users("down", 100) {
        let start = Instant::now();
        let (status, variant) = paywall(s.api, &s.key, &user);
        slowest = slowest.max(start.elapsed());
        assert_eq!(status, 200, "{user}");
        assert!(variant.is_some(), "bucketed as without stored assignments");
    }
    // The read deadline is 20 ms; the rest is a debug build and a new connection per request.
    assert!(
        slowest < Duration::from_millis(500),
        "slowest resolve {slowest:?}"
    );
    let late = metric(&s, "timed_out") - late_before;
    let failed = metric(&s, "failed") - failed_before;
    assert!(
        late + failed >= 100.0,
        "every read while Redis was down is counted: {late} late, {failed} failed"
    );
    assert!(
        failed >= 95.0,
        "a refused connection is a failure, not a late read: {late} late, {failed} failed"
    );
    s.wait_ready("degraded", Duration::from_secs(5)).await;

    // Back (empty: it kept nothing), on the same port: reads succeed again.
    let _redis = OwnRedis::start(redis.port);
    let ok_before = metric(&s, "read");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, _) = paywall(s.api, &s.key, "after");
        assert_eq!(status, 200);
        if metric(&s, "read") > ok_before {
            break;
        }
        assert!(Instant::now() < deadline, "reads never recovered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.wait_ready("ready", Duration::from_secs(10)).await;
    assert_eq!(before.len(), 50);
}

/// A Redis URL that cannot be used (a database number Redis does not have) is logged at start
/// with its password redacted, and `/readyz` says degraded for sticky reads while the service
/// serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_redis_at_start_is_logged_and_degrades_readiness() {
    let redis = OwnRedis::start(free_port());
    let url = format!("redis://:s3cret-pass@127.0.0.1:{}/99", redis.port);
    let log = tempfile::NamedTempFile::new().unwrap();
    let s = Served::launch(
        Backend::Sqlite,
        &[("FLOWGATE__STICKY__REDIS_URL", url.as_str())],
        crate::support::Launch {
            log_file: Some(log.path().to_owned()),
            ready_status: Some("degraded"),
            ..crate::support::Launch::default()
        },
    )
    .await
    .unwrap();
    let readyz = http(s.admin, "GET", "/readyz", None, b"").unwrap().1;
    assert!(readyz.contains("\"sticky\":{\"ok\":false"), "{readyz}");
    assert!(!readyz.contains("s3cret-pass"), "{readyz}");
    publish(&s, &sticky_catalog(1, 1, 0, 0)).await;
    let (status, variant) = paywall(s.api, &s.key, "someone");
    assert_eq!((status, variant.is_some()), (200, true));
    let text = std::fs::read_to_string(log.path()).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("sticky assignment store cannot be read"))
        .unwrap_or_else(|| panic!("the start check's line in {text}"));
    assert!(
        line.contains(&format!("127.0.0.1:{}/99", redis.port)),
        "{line}"
    );
    assert!(!text.contains("s3cret-pass"), "{text}");
}
