//! What the README says, from a clean checkout: `make run` serves on the embedded default
//! (`cargo run -p flowgate -- serve` in the repository root: SQLite under ./data, migrations,
//! demo seeding, printed key and curl commands). Here the same binary runs with only its
//! addresses and data file moved (a free port, a temporary folder), the printed commands are
//! run as printed, and SIGTERM shuts it down with every accepted event stored.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use flowgate_domain::events::{AnalyticsEvent, EventSource, EventType};
use flowgate_domain::ids::{AppId, EventId};
use flowgate_domain::ports::EventStore;
use flowgate_domain::Platform;
use flowgate_store::{Store, StoreOptions};

use crate::support::free_port;

pub(crate) struct Server {
    pub(crate) child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn sh(command: &str) -> (u16, String) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{command} -w '\\n%{{http_code}}'"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (status.trim().parse().unwrap_or(0), body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn make_run_serves_the_demo_and_the_printed_commands_work() {
    let dir = std::env::temp_dir().join(format!(
        "flowgate-quickstart-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let db_url = format!("sqlite://{}/flowgate.db", dir.display());
    let (api, admin) = (free_port(), free_port());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flowgate"));
    cmd.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    for (key, _) in std::env::vars() {
        if key.starts_with("FLOWGATE") {
            cmd.env_remove(key);
        }
    }
    let child = cmd
        .arg("serve")
        .env("FLOWGATE__SERVER__LISTEN", format!("127.0.0.1:{api}"))
        .env("FLOWGATE__ADMIN__LISTEN", format!("127.0.0.1:{admin}"))
        .env("FLOWGATE__DATABASE__URL", &db_url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server { child };
    let stdout = server.child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });

    // The banner: a key and three curl commands.
    let mut commands = Vec::new();
    let mut key = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    while commands.len() < 3 && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            if line.starts_with("curl ") {
                commands.push(line);
            } else if let Some(k) = line.trim().strip_prefix("SDK key (shown once): ") {
                key = Some(k.to_owned());
            }
        }
    }
    assert_eq!(
        commands.len(),
        3,
        "the demo banner prints resolve, batch and event commands"
    );
    assert!(key.is_some_and(|k| k.starts_with("fg_test_")));

    // Ready.
    let ready = format!("curl -s http://127.0.0.1:{admin}/readyz");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = sh(&ready);
        if status == 200 && body.contains("\"ready\"") {
            break;
        }
        assert!(Instant::now() < deadline, "not ready: {status} {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let (status, body) = sh(&commands[0]);
    assert_eq!(status, 200, "{body}");
    let resolved: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(resolved["flow_id"].is_string(), "a flow: {body}");
    assert_eq!(resolved["renderer_mode"], "web");

    let (status, body) = sh(&commands[1]);
    assert_eq!(status, 200, "{body}");
    let batch: serde_json::Value = serde_json::from_str(&body).unwrap();
    let results = batch["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert!(
        results.iter().all(|e| e["flow_id"].is_string()),
        "both placements serve a flow: {body}"
    );

    let (status, body) = sh(&commands[2]);
    assert_eq!(status, 202, "{body}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["accepted"],
        1
    );

    // Metrics on the admin port: request latency by route and status, catalog, sink.
    let (status, metrics) = sh(&format!("curl -s http://127.0.0.1:{admin}/metrics"));
    assert_eq!(status, 200);
    for needle in [
        "flowgate_http_request_duration_seconds_count{route=\"/v1/apps/{appId}/placements/{placementId}/resolve\",status=\"200\"} 1",
        "flowgate_http_request_duration_seconds_count{route=\"/v1/apps/{appId}/placements/resolve-batch\",status=\"200\"} 1",
        "flowgate_http_request_duration_seconds_count{route=\"/v1/apps/{appId}/events\",status=\"202\"} 1",
        "flowgate_http_events_accepted_total 1",
        "flowgate_catalog_revision ",
        "flowgate_catalog_age_seconds ",
        "flowgate_store_errors_total 0",
        "flowgate_store_event_conflict_retries_total 0",
        "flowgate_log_lines_dropped_total 0",
        "flowgate_sink_queue_depth ",
        "flowgate_sink_events_enqueued_total ",
    ] {
        assert!(metrics.contains(needle), "{needle} missing from:\n{metrics}");
    }

    // SIGTERM: a clean exit with the event stored.
    let pid = server.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        status.code(),
        Some(0),
        "graceful shutdown with everything stored"
    );

    let event_id = commands[2]
        .split("\"event_id\": \"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let app_id = commands[2]
        .split("/v1/apps/")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let store = Store::connect(&db_url, StoreOptions::default()).unwrap();
    // Event ids are unique per app (D25): the probe is the same event only in the same app.
    let probe = AnalyticsEvent::new(
        EventId::from_uuid(event_id.parse().unwrap()),
        EventSource::Sdk,
        EventType::FlowOpen,
        AppId::from_uuid(app_id.parse().unwrap()),
        "probe",
        "probe",
        Platform::Ios,
        time::OffsetDateTime::now_utc(),
    );
    let outcome = store.append_events(&[probe]).await.unwrap();
    assert_eq!(
        outcome.duplicates, 1,
        "the accepted event was stored before the process exited"
    );
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
