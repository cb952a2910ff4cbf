//! A catalog reload of the running binary keeps the flows already compressed for gzip clients
//! when their versions did not change (`render::DeflatedFlows::carry_over`, called by the
//! refresher): the `catalog loaded` log line of the reload says how many it kept.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::quickstart::{sh, Server};
use crate::support::{flowgate, free_port, import};

const WS: &str = "d0000000-0000-4000-8000-000000000001";
const APP: &str = "d0000000-0000-4000-8000-0000000000a1";

/// The demo workspace's app with one large flow (spliced for gzip clients) and `placements`
/// placements showing it.
fn catalog(placements: usize) -> serde_json::Value {
    let screens: Vec<_> = (0..300)
        .map(|i| json!({"id": format!("s{i}"), "text": format!("Step {i} of the flow: everything you need.")}))
        .collect();
    json!({"workspaces": [{"id": WS, "name": "Demo", "apps": [{
        "id": APP, "name": "Demo app",
        "media_base_url": "https://cdn.example.com/m/", "icon_base_url": "https://cdn.example.com/i/",
        "flows": [{"id": "e1000000-0000-4000-8000-000000000001", "name": "big", "published_version": 1,
                   "versions": [{"id": "e2000000-0000-4000-8000-000000000001", "version": 1,
                                 "schema_version": 1, "fonts": [], "flow_schema": {"screens": screens}}]}],
        "placements": (0..placements)
            .map(|i| json!({"key": format!("p{i}"), "default_flow_id": "e1000000-0000-4000-8000-000000000001"}))
            .collect::<Vec<_>>()
    }]}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_the_flows_compressed_for_gzip_clients() {
    let dir =
        std::env::temp_dir().join(format!("flowgate-reload-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let db_url = format!("sqlite://{}/flowgate.db", dir.display());
    let (api, admin) = (free_port(), free_port());
    let child = flowgate()
        .arg("serve")
        .env("FLOWGATE__SERVER__LISTEN", format!("127.0.0.1:{api}"))
        .env("FLOWGATE__ADMIN__LISTEN", format!("127.0.0.1:{admin}"))
        .env("FLOWGATE__DATABASE__URL", &db_url)
        .env(
            "FLOWGATE__CATALOG__CACHE_PATH",
            dir.join("catalog-cache.json"),
        )
        .env("FLOWGATE__CATALOG__REFRESH_INTERVAL_MS", "100")
        .env("FLOWGATE__LOG__LEVEL", "info")
        .env("FLOWGATE__LOG__FORMAT", "json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = Server { child };
    // The demo banner on stdout, the log lines on stderr.
    let (tx, rx) = mpsc::channel();
    let out: Box<dyn std::io::Read + Send> = Box::new(server.child.stdout.take().unwrap());
    let err: Box<dyn std::io::Read + Send> = Box::new(server.child.stderr.take().unwrap());
    for stream in [out, err] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    }
    // Waits for a line that contains every needle.
    let wait_for = |needles: &[&str]| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
                if needles.iter().all(|n| line.contains(n)) {
                    return line;
                }
            }
        }
        panic!("no line with {needles:?}");
    };
    let banner = wait_for(&["SDK key (shown once): "]);
    let key = banner
        .trim()
        .trim_start_matches("SDK key (shown once): ")
        .to_owned();
    wait_for(&["flowgate is serving"]);

    import(&db_url, &catalog(1));
    wait_for(&["catalog loaded", "\"compressed_flows_kept\":0"]);
    let (status, headers) = sh(&format!(
        "curl -s -o /dev/null -D - -X POST http://127.0.0.1:{api}/v1/apps/{APP}/placements/p0/resolve \
         -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' -H 'Accept-Encoding: gzip' \
         -d '{{\"user_id\": \"u\", \"session_id\": \"s\", \"device_platform\": \"ios\"}}'"
    ));
    assert_eq!(status, 200, "{headers}");
    assert!(
        headers
            .to_ascii_lowercase()
            .contains("content-encoding: gzip"),
        "{headers}"
    );
    // Another placement, same version: the compressed flow is kept for the new snapshot.
    import(&db_url, &catalog(2));
    let line = wait_for(&["catalog loaded", "\"compressed_flows_kept\":"]);
    assert!(line.contains("\"compressed_flows_kept\":1"), "{line}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
