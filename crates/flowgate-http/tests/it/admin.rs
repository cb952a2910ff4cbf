//! The admin listener (D11): health, readiness states, metrics.

use std::sync::{Arc, Mutex};

use actix_web::HttpServer;
use flowgate_http::{admin_app, AdminSource, AdminState, Check, HttpMetrics, ReadinessReport};
use prometheus_client::registry::Registry;

struct Source(Mutex<ReadinessReport>);

impl AdminSource for Source {
    fn readiness(&self) -> ReadinessReport {
        self.0.lock().unwrap().clone()
    }
    fn extra_metrics(&self, out: &mut String) {
        out.push_str("# TYPE flowgate_test_gauge gauge\nflowgate_test_gauge 7\n");
    }
}

fn check(ok: bool) -> Check {
    Check {
        ok,
        detail: if ok { "ok".into() } else { "failing".into() },
    }
}

#[actix_web::test]
async fn health_readiness_and_metrics() {
    let source = Arc::new(Source(Mutex::new(
        ReadinessReport::new()
            .required("catalog", check(false))
            .check("store", check(true))
            .check("sink", check(true)),
    )));
    let mut registry = Registry::default();
    let _metrics = HttpMetrics::new(&mut registry);
    let state = AdminState::new(Arc::new(registry), source.clone());
    let bound = HttpServer::new(move || admin_app(state.clone()))
        .workers(1)
        .disable_signals()
        .bind(("127.0.0.1", 0))
        .unwrap();
    let base = format!("http://{}", bound.addrs()[0]);
    let server = bound.run();
    let handle = server.handle();
    actix_web::rt::spawn(server);
    let client = awc::Client::default();
    let get = |p: &str| client.get(format!("{base}{p}")).send();

    let mut r = get("/healthz").await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<serde_json::Value>().await.unwrap()["status"], "ok");

    let mut r = get("/readyz").await.unwrap();
    assert_eq!(r.status(), 503, "no catalog yet");
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["code"], "not_ready");
    assert_eq!(body["detail"], "catalog: failing");
    assert_eq!(body["checks"]["catalog"]["ok"], false);
    assert_eq!(body["checks"]["store"]["ok"], true);

    source.0.lock().unwrap().set("catalog", check(true));
    source.0.lock().unwrap().set("store", check(false));
    let mut r = get("/readyz").await.unwrap();
    assert_eq!(r.status(), 200, "degraded still serves");
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["status"],
        "degraded"
    );

    source.0.lock().unwrap().set("store", check(true));
    let mut r = get("/readyz").await.unwrap();
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["status"],
        "ready"
    );

    let mut r = get("/metrics").await.unwrap();
    assert_eq!(r.status(), 200);
    let text = String::from_utf8(r.body().await.unwrap().to_vec()).unwrap();
    assert!(text.contains("flowgate_test_gauge 7"), "{text}");
    assert!(
        text.contains("flowgate_http_events_accepted_total 0"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("# EOF"));
    handle.stop(false).await;
}
