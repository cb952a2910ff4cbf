//! Serving when the store is unreachable at start (D20), through the binary: PostgreSQL sits
//! behind a proxy the test cuts before the server starts again.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fixtures;
use crate::support::{http, publish_version_3, resolve_onboarding, Served};

fn readyz(s: &Served) -> (u16, Value) {
    let (status, body) = http(s.admin, "GET", "/readyz", None, b"").unwrap();
    (status, serde_json::from_str(&body).unwrap())
}

fn metric(s: &Served, name: &str) -> String {
    let (_, body) = http(s.admin, "GET", "/metrics", None, b"").unwrap();
    body.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in the metrics"))
        .to_owned()
}

/// Asserts that `/readyz` stays 503 `not_ready` for `during`.
async fn assert_not_ready_for(s: &Served, during: Duration) {
    let until = Instant::now() + during;
    while Instant::now() < until {
        if let Ok((status, body)) = http(s.admin, "GET", "/readyz", None, b"") {
            assert_eq!(status, 503, "{body}");
            assert!(body.contains("no catalog snapshot loaded yet"), "{body}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_during_a_store_outage_serves_the_cached_catalog_until_the_store_answers() {
    let Some(mut s) = Served::start(&[]).await else {
        return;
    };
    assert_eq!(resolve_onboarding(&s).1["flow_version"], 2);
    let cache = s.cache_path();
    let mode = std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let written = std::fs::read_to_string(&cache).unwrap();
    assert!(!written.contains(&s.key), "no plaintext key in the cache");

    s.kill9();
    s.proxy().cut();
    // A change published during the outage: the new process cannot see it yet.
    publish_version_3(&s.db.url);
    s.respawn();
    s.wait_ready("degraded", Duration::from_secs(30)).await;
    let (status, report) = readyz(&s);
    assert_eq!(status, 200);
    let catalog = report["checks"]["catalog"]["detail"].as_str().unwrap();
    assert!(catalog.contains("cached"), "{report}");
    assert_eq!(report["checks"]["store"]["ok"], false, "{report}");
    assert_eq!(metric(&s, "flowgate_catalog_cached"), "1");
    let (status, body) = resolve_onboarding(&s);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["flow_id"], fixtures::FLOW_US);
    assert_eq!(body["flow_version"], 2, "the cached catalog serves");

    s.proxy().restore();
    let restored = Instant::now();
    while resolve_onboarding(&s).1["flow_version"] != 3 {
        assert!(
            restored.elapsed() < Duration::from_secs(15),
            "the store's catalog was not loaded once it answered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.wait_ready("ready", Duration::from_secs(15)).await;
    assert_eq!(metric(&s, "flowgate_catalog_cached"), "0");
    let (_, report) = readyz(&s);
    assert!(
        !report["checks"]["catalog"]["detail"]
            .as_str()
            .unwrap()
            .contains("cached"),
        "{report}"
    );
    // The cache now holds the store's newer catalog.
    assert!(std::fs::read_to_string(&cache)
        .unwrap()
        .contains("0000000000f3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_of_another_database_or_none_leaves_the_server_unready_until_the_store_answers() {
    let Some(other) = Served::start(&[]).await else {
        return;
    };
    let Some(mut s) = Served::start(&[]).await else {
        return;
    };
    // Another database's cache in this server's place: refused.
    s.kill9();
    s.proxy().cut();
    std::fs::copy(other.cache_path(), s.cache_path()).unwrap();
    drop(other);
    s.respawn();
    assert_not_ready_for(&s, Duration::from_secs(3)).await;
    // Nothing loaded: no key is known yet (as before D20; a load balancer following /readyz
    // sends nothing here).
    assert_eq!(resolve_onboarding(&s).0, 401);
    s.proxy().restore();
    s.wait_ready("ready", Duration::from_secs(15)).await;
    assert_eq!(resolve_onboarding(&s).1["flow_version"], 2);

    // No cache file: as without the feature.
    s.kill9();
    s.proxy().cut();
    std::fs::remove_file(s.cache_path()).unwrap();
    s.respawn();
    assert_not_ready_for(&s, Duration::from_secs(3)).await;
    s.proxy().restore();
    s.wait_ready("ready", Duration::from_secs(15)).await;
    assert!(s.cache_path().exists(), "written once the store answered");
}
