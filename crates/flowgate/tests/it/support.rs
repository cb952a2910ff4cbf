//! The real binary against a real PostgreSQL: a per-test database, a cuttable proxy in front
//! of it, the fixture catalog imported with the CLI, and a small blocking HTTP client.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use flowgate_testkit::{Proxy, TestDb};

use crate::fixtures;

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The binary, run from the repository root with no `FLOWGATE*` variables of the caller.
pub fn flowgate() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flowgate"));
    cmd.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    for (key, _) in std::env::vars() {
        if key.starts_with("FLOWGATE") {
            cmd.env_remove(key);
        }
    }
    cmd.env("FLOWGATE__LOG__LEVEL", "warn");
    cmd
}

/// Imports `catalog` into the store at `db_url` with `flowgate import` (through a temporary
/// file) and asserts that it succeeded.
pub fn import(db_url: &str, catalog: &serde_json::Value) {
    let file = std::env::temp_dir().join(format!(
        "flowgate-import-{}.json",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::write(&file, catalog.to_string()).unwrap();
    let out = flowgate()
        .args(["import", file.to_str().unwrap()])
        .env("FLOWGATE__DATABASE__URL", db_url)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(
        out.status.success(),
        "import: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A minimal HTTP/1.1 exchange (`Connection: close`): status and body.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: &[u8],
) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(15)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(key) = key {
        head.push_str(&format!("Authorization: Bearer {key}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// A served binary over PostgreSQL through a proxy.
pub struct Served {
    pub db: TestDb,
    pub proxy: Proxy,
    pub key: String,
    pub api: SocketAddr,
    pub admin: SocketAddr,
    child: Child,
}

impl Served {
    /// Imports the fixture catalog (directly), creates a key, starts `serve` on the proxied URL
    /// with the extra settings, and waits until ready. `None` when PostgreSQL is unavailable
    /// outside CI.
    pub async fn start(settings: &[(&str, &str)]) -> Option<Served> {
        let db = TestDb::postgres().await?;
        import(&db.url, &fixtures::catalog_json());
        let out = flowgate()
            .args([
                "keys",
                "create",
                "--workspace",
                fixtures::WS1,
                "--env",
                "test",
                "--json",
            ])
            .env("FLOWGATE__DATABASE__URL", &db.url)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "keys create: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let created: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let key = created["key"].as_str().unwrap().to_owned();

        let proxy = Proxy::start(db.server_authority()).await;
        let api: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut cmd = flowgate();
        cmd.arg("serve")
            .env("FLOWGATE__SERVER__LISTEN", api.to_string())
            .env("FLOWGATE__ADMIN__LISTEN", admin.to_string())
            .env(
                "FLOWGATE__DATABASE__URL",
                db.url_via(&proxy.addr.to_string()),
            )
            .env("FLOWGATE__DATABASE__CONNECT_TIMEOUT_MS", "1000")
            .env("FLOWGATE__CATALOG__REFRESH_INTERVAL_MS", "200")
            .env("FLOWGATE__RATE_LIMIT__PER_IP_RPS", "100000")
            .env("FLOWGATE__RATE_LIMIT__PER_IP_BURST", "100000")
            .env("FLOWGATE__RATE_LIMIT__PER_KEY_RPS", "100000")
            .env("FLOWGATE__RATE_LIMIT__PER_KEY_BURST", "100000")
            .env("FLOWGATE__EVENTS__FLUSH_INTERVAL_MS", "50")
            .env("FLOWGATE__EVENTS__RETRY_BASE_MS", "50")
            .env("FLOWGATE__EVENTS__RETRY_MAX_MS", "500")
            .env("FLOWGATE__EVENTS__WRITE_TIMEOUT_MS", "2000")
            .env("FLOWGATE__EVENTS__DRAIN_DEADLINE_MS", "30000")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (k, v) in settings {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        let served = Served {
            db,
            proxy,
            key,
            api,
            admin,
            child,
        };
        served.wait_ready("ready", Duration::from_secs(30)).await;
        Some(served)
    }

    /// Waits until `/readyz` reports `status` (ready, degraded).
    pub async fn wait_ready(&self, status: &str, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            if let Ok((_, body)) = http(self.admin, "GET", "/readyz", None, b"") {
                if body.contains(&format!("\"status\":\"{status}\"")) {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "readyz never reported {status}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends SIGTERM and waits for the exit code.
    pub async fn terminate(&mut self) -> Option<i32> {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "no exit after SIGTERM");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Rows and distinct ids of SDK events in the database (read directly, not through the
    /// proxy).
    pub fn stored_sdk_event_ids(&self) -> Vec<String> {
        let out = Command::new("psql")
            .args([
                &self.db.url,
                "-At",
                "-c",
                "SELECT event_id::text FROM analytics_events WHERE source = 'sdk'",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A valid event of the fixture's app 1.
pub fn event(id: &str) -> serde_json::Value {
    serde_json::json!({
        "event_id": id, "app_id": fixtures::APP1, "flow_id": fixtures::FLOW_US, "flow_version_id": fixtures::V_US_2,
        "user_id": "load-user", "session_id": "load-session", "device_platform": "android",
        "event_type": "screen_view", "timestamp": time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap(),
        "sdk_version": "2.0.0", "screen_index": 1
    })
}
