//! The real binary against a real PostgreSQL: a per-test database, a cuttable proxy in front
//! of it, the fixture catalog imported with the CLI, and a small blocking HTTP client.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flowgate_store::Backend;
pub use flowgate_testkit::free_port;
use flowgate_testkit::{Proxy, TestDb};

use crate::fixtures;

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

/// How a served binary is started, beyond its settings.
#[derive(Clone, Debug, Default)]
pub struct Launch {
    /// The process's file limit (soft and hard), set with `prlimit`.
    pub file_limit: Option<u64>,
    /// Where its stderr (the log) goes; inherited when `None`.
    pub log_file: Option<std::path::PathBuf>,
    /// The `/readyz` status the start waits for; `ready` when `None`.
    pub ready_status: Option<&'static str>,
    /// The admin listener's port (a free one when `None`), for a test that must name it first.
    pub admin_port: Option<u16>,
}

/// A served binary over a test database: PostgreSQL through a proxy the test can cut, or a
/// SQLite file.
pub struct Served {
    pub db: TestDb,
    proxy: Option<Proxy>,
    pub key: String,
    pub api: SocketAddr,
    pub admin: SocketAddr,
    settings: Vec<(String, String)>,
    /// Holds `catalog.cache_path` (D20), one per server.
    cache_dir: tempfile::TempDir,
    launch: Launch,
    child: Child,
}

impl Served {
    /// Imports the fixture catalog (directly), creates a key, starts `serve` on PostgreSQL
    /// through a proxy with the extra settings, and waits until ready. `None` when
    /// PostgreSQL is unavailable and `FLOWGATE_TEST_SKIP_PG=1` allows skipping.
    pub async fn start(settings: &[(&str, &str)]) -> Option<Served> {
        Self::start_on(Backend::Postgres, settings).await
    }

    /// As [`Served::start`], on `backend` (SQLite: a file, no proxy).
    pub async fn start_on(backend: Backend, settings: &[(&str, &str)]) -> Option<Served> {
        Self::start_inner(backend, settings, false, Launch::default()).await
    }

    /// As [`Served::start_on`], started as `launch` says.
    pub async fn launch(
        backend: Backend,
        settings: &[(&str, &str)],
        launch: Launch,
    ) -> Option<Served> {
        Self::start_inner(backend, settings, false, launch).await
    }

    /// As [`Served::start_on`], running `flowgate migrate` with `settings` first (the event
    /// bus's stream and consumer, D16), again until it succeeds: a new cluster elects its
    /// JetStream leader within seconds.
    pub async fn start_migrated(backend: Backend, settings: &[(&str, &str)]) -> Option<Served> {
        Self::start_inner(backend, settings, true, Launch::default()).await
    }

    async fn start_inner(
        backend: Backend,
        settings: &[(&str, &str)],
        migrate: bool,
        launch: Launch,
    ) -> Option<Served> {
        let db = match backend {
            Backend::Postgres => TestDb::postgres().await?,
            Backend::Sqlite => TestDb::sqlite().await,
        };
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
        if migrate {
            let mut env: Vec<(&str, &str)> = vec![("FLOWGATE__DATABASE__URL", &db.url)];
            env.extend_from_slice(settings);
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let (code, _, stderr) = run(&["migrate"], &env);
                if code == Some(0) {
                    break;
                }
                assert!(Instant::now() < deadline, "flowgate migrate: {stderr}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        let proxy = match backend {
            Backend::Postgres => Some(Proxy::start(db.server_authority()).await),
            Backend::Sqlite => None,
        };
        let api: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let admin_port = launch.admin_port.unwrap_or_else(free_port);
        let admin: SocketAddr = format!("127.0.0.1:{admin_port}").parse().unwrap();
        let settings = settings
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let mut served = Served {
            child: Command::new("true").spawn().unwrap(),
            db,
            proxy,
            key,
            api,
            admin,
            settings,
            cache_dir: tempfile::tempdir().unwrap(),
            launch,
        };
        let status = served.launch.ready_status.unwrap_or("ready");
        // A port `free_port` chose can be taken by another test's process before the server
        // binds it; the server then exits at once ("Address already in use"), and it is started
        // again on other ports.
        for attempt in 1.. {
            served.child = served.spawn();
            if served
                .ready_unless_exited(status, Duration::from_secs(30))
                .await
            {
                break;
            }
            assert!(
                attempt < 3,
                "flowgate serve exited before it was {status}, three times"
            );
            served.api = format!("127.0.0.1:{}", free_port()).parse().unwrap();
            if served.launch.admin_port.is_none() {
                served.admin = format!("127.0.0.1:{}", free_port()).parse().unwrap();
            }
        }
        Some(served)
    }

    /// Waits until `/readyz` reports `status`: true, or false when the process exits first.
    async fn ready_unless_exited(&mut self, status: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if let Ok((_, body)) = http(self.admin, "GET", "/readyz", None, b"") {
                if body.contains(&format!("\"status\":\"{status}\"")) {
                    return true;
                }
            }
            if self.child.try_wait().unwrap().is_some() {
                return false;
            }
            assert!(Instant::now() < deadline, "readyz never reported {status}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The proxy in front of PostgreSQL.
    pub fn proxy(&self) -> &Proxy {
        self.proxy
            .as_ref()
            .expect("a proxy: the served store is PostgreSQL")
    }

    fn spawn(&self) -> Child {
        let url = match &self.proxy {
            Some(proxy) => self.db.url_via(&proxy.addr.to_string()),
            None => self.db.url.clone(),
        };
        let mut cmd = match self.launch.file_limit {
            Some(limit) => {
                let mut cmd = Command::new("prlimit");
                cmd.arg(format!("--nofile={limit}:{limit}"))
                    .arg("--")
                    .arg(flowgate().get_program());
                for (key, value) in flowgate().get_envs() {
                    match value {
                        Some(value) => cmd.env(key, value),
                        None => cmd.env_remove(key),
                    };
                }
                cmd.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
                cmd
            }
            None => flowgate(),
        };
        let stderr = match &self.launch.log_file {
            Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
            None => Stdio::inherit(),
        };
        cmd.arg("serve")
            .env("FLOWGATE__SERVER__LISTEN", self.api.to_string())
            .env("FLOWGATE__ADMIN__LISTEN", self.admin.to_string())
            .env("FLOWGATE__DATABASE__URL", url)
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
            .env("FLOWGATE__CATALOG__CACHE_PATH", self.cache_path())
            .stdout(Stdio::null())
            .stderr(stderr);
        for (k, v) in &self.settings {
            cmd.env(k, v);
        }
        cmd.spawn().unwrap()
    }

    /// SIGKILL: the process ends at once, with whatever it held in memory.
    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Starts the server again on the same store and addresses (after it died) and waits
    /// until ready.
    pub async fn restart(&mut self) {
        self.respawn();
        self.wait_ready("ready", Duration::from_secs(30)).await;
    }

    /// Starts the server again on the same store and addresses (after it died), without
    /// waiting.
    pub fn respawn(&mut self) {
        assert!(
            self.child.try_wait().unwrap().is_some(),
            "the previous process is gone"
        );
        self.child = self.spawn();
    }

    /// Where this server keeps its catalog cache (D20).
    pub fn cache_path(&self) -> std::path::PathBuf {
        self.cache_dir.path().join("catalog-cache.json")
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
        terminate_child(&mut self.child).await
    }

    /// A new SDK key of `workspace` (`flowgate keys create`), usable once the server picked up
    /// the change (D12: within the refresh interval).
    pub fn create_key(&self, workspace: &str) -> String {
        let out = flowgate()
            .args([
                "keys",
                "create",
                "--workspace",
                workspace,
                "--env",
                "test",
                "--json",
            ])
            .env("FLOWGATE__DATABASE__URL", &self.db.url)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "keys create: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let created: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        created["key"].as_str().unwrap().to_owned()
    }

    /// A metric's value from `/metrics` (the line that starts with `series`, e.g.
    /// `name{label="x"}`), or `None`.
    pub fn metric(&self, series: &str) -> Option<f64> {
        let (_, page) = http(self.admin, "GET", "/metrics", None, b"").ok()?;
        page.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    /// The `event_id` of every stored SDK event, one entry per row (read directly, not
    /// through the proxy).
    pub async fn stored_sdk_event_ids(&self) -> Vec<String> {
        self.db.sdk_event_ids().await
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

/// How a [`Load`] behaves.
#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    /// Concurrent clients.
    pub producers: usize,
    /// Events per request.
    pub batch: usize,
    /// Send a request that was not answered 202 again (the same events), as an SDK does,
    /// after this long; `None` moves on to fresh events.
    pub retry_after: Option<Duration>,
}

/// One request as the client saw it: when it was sent, how long the answer took, the status
/// (0: no answer, the connection failed).
#[derive(Clone, Copy, Debug)]
pub struct Exchange {
    pub sent: Instant,
    pub took: Duration,
    pub status: u16,
}

/// What a [`Load`] saw.
#[derive(Debug, Default)]
pub struct LoadOutcome {
    /// Events of requests answered 202 (all their events are valid, so all were accepted).
    pub accepted: Vec<String>,
    /// Events sent in requests that were not answered 202 (503, or no answer): the server
    /// may or may not have stored them.
    pub unanswered: Vec<String>,
    /// Requests answered 503.
    pub refused: usize,
    /// Events accepted in a request sent again after it was refused or unanswered.
    pub accepted_on_retry: usize,
    pub exchanges: Vec<Exchange>,
}

impl LoadOutcome {
    /// Everything stored was sent: accepted, or in a request without a 202.
    #[track_caller]
    pub fn assert_only_sent_events_stored(&self, stored: &[String]) {
        let sent: HashSet<&String> = self.accepted.iter().chain(&self.unanswered).collect();
        let foreign = stored.iter().filter(|id| !sent.contains(id)).count();
        assert_eq!(foreign, 0, "{foreign} stored events were never sent");
    }
}

/// Clients posting fresh valid events until told to stop, recording what was accepted.
pub struct Load {
    stop: Arc<AtomicBool>,
    outcome: Arc<Mutex<LoadOutcome>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    /// `producers` clients posting batches of 20 fresh events, moving on after a refusal.
    pub fn start(api: SocketAddr, key: &str, producers: usize) -> Load {
        Self::with(
            api,
            key,
            LoadOptions {
                producers,
                batch: 20,
                retry_after: None,
            },
        )
    }

    pub fn with(api: SocketAddr, key: &str, options: LoadOptions) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let outcome = Arc::new(Mutex::new(LoadOutcome::default()));
        let path = format!("/v1/apps/{}/events", fixtures::APP1);
        let threads = (0..options.producers)
            .map(|_| {
                let (stop, outcome, key, path) =
                    (stop.clone(), outcome.clone(), key.to_owned(), path.clone());
                std::thread::spawn(move || {
                    let fresh = || -> Vec<String> {
                        (0..options.batch)
                            .map(|_| uuid::Uuid::new_v4().to_string())
                            .collect()
                    };
                    let batch = |ids: &[String]| {
                        serde_json::Value::Array(ids.iter().map(|id| event(id)).collect())
                            .to_string()
                    };
                    let mut ids = fresh();
                    // A retry sends the same body, timestamps included, as an SDK does.
                    let mut body = batch(&ids);
                    let mut retrying = false;
                    while !stop.load(Ordering::Relaxed) {
                        let sent = Instant::now();
                        let answer = http(api, "POST", &path, Some(&key), body.as_bytes());
                        let took = sent.elapsed();
                        let status = match &answer {
                            Ok((status, _)) => *status,
                            Err(_) => 0,
                        };
                        let mut o = outcome.lock().unwrap();
                        o.exchanges.push(Exchange { sent, took, status });
                        match answer {
                            Ok((202, reply)) => {
                                let reply: serde_json::Value =
                                    serde_json::from_str(&reply).unwrap();
                                assert_eq!(reply["accepted"], options.batch, "{reply}");
                                if std::mem::take(&mut retrying) {
                                    o.accepted_on_retry += ids.len();
                                }
                                o.accepted.append(&mut ids);
                                ids = fresh();
                                body = batch(&ids);
                                continue;
                            }
                            Ok((503, reply)) => {
                                assert!(reply.contains("\"overloaded\""), "{reply}");
                                o.refused += 1;
                            }
                            // The server going away (SIGTERM, SIGKILL): no answer.
                            Ok((0, _)) | Err(_) => {}
                            Ok((status, reply)) => panic!("unexpected {status}: {reply}"),
                        }
                        drop(o);
                        match options.retry_after {
                            Some(pause) => {
                                retrying = true;
                                std::thread::sleep(pause);
                            }
                            None => {
                                outcome.lock().unwrap().unanswered.append(&mut ids);
                                ids = fresh();
                                body = batch(&ids);
                                std::thread::sleep(Duration::from_millis(20));
                            }
                        }
                    }
                    // A request being retried when the load stopped was never answered 202.
                    outcome.lock().unwrap().unanswered.append(&mut ids);
                })
            })
            .collect();
        Load {
            stop,
            outcome,
            threads,
        }
    }

    /// Events accepted so far.
    pub fn accepted(&self) -> usize {
        self.outcome.lock().unwrap().accepted.len()
    }

    pub fn finish(self) -> LoadOutcome {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        std::mem::take(&mut *self.outcome.lock().unwrap())
    }
}

/// Every accepted event is stored, and no event is stored twice.
#[track_caller]
pub fn assert_exactly_once(stored: &[String], accepted: &[String]) {
    let distinct: HashSet<&String> = stored.iter().collect();
    assert_eq!(distinct.len(), stored.len(), "no event is stored twice");
    let accepted_set: HashSet<&String> = accepted.iter().collect();
    let missing = accepted_set.difference(&distinct).count();
    assert_eq!(
        missing,
        0,
        "{missing} of {} accepted events were lost",
        accepted.len()
    );
}

/// `flowgate ingest` as a process of the test's own (D16), on a store URL and a NATS URL.
pub struct Ingester {
    pub admin: SocketAddr,
    env: Vec<(String, String)>,
    child: Child,
}

impl Ingester {
    /// Starts ingest on `db_url` with `settings` (the event bus's among them) and waits until
    /// its `/readyz` answers.
    pub async fn start(db_url: &str, settings: &[(&str, &str)]) -> Ingester {
        let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut env: Vec<(String, String)> = vec![
            ("FLOWGATE__DATABASE__URL".into(), db_url.into()),
            ("FLOWGATE__ADMIN__LISTEN".into(), admin.to_string()),
            ("FLOWGATE__EVENTS__SINK".into(), "jetstream".into()),
            ("FLOWGATE__EVENTS__RETRY_BASE_MS".into(), "50".into()),
            ("FLOWGATE__EVENTS__RETRY_MAX_MS".into(), "500".into()),
            ("FLOWGATE__EVENTS__WRITE_TIMEOUT_MS".into(), "2000".into()),
        ];
        env.extend(settings.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        let mut ingester = Ingester {
            admin,
            child: Command::new("true").spawn().unwrap(),
            env,
        };
        ingester.child = ingester.spawn();
        ingester.wait_answering().await;
        ingester
    }

    fn spawn(&self) -> Child {
        let mut cmd = flowgate();
        cmd.arg("ingest")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.spawn().unwrap()
    }

    async fn wait_answering(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while http(self.admin, "GET", "/readyz", None, b"").is_err() {
            assert!(Instant::now() < deadline, "ingest never answered /readyz");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL.
    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Starts it again (after it died).
    pub async fn restart(&mut self) {
        assert!(self.child.try_wait().unwrap().is_some());
        self.child = self.spawn();
        self.wait_answering().await;
    }

    /// SIGTERM; the exit code.
    pub async fn terminate(&mut self) -> Option<i32> {
        terminate_child(&mut self.child).await
    }

    /// A metric's value from `/metrics`.
    pub fn metric(&self, name: &str) -> Option<f64> {
        let (_, page) = http(self.admin, "GET", "/metrics", None, b"").ok()?;
        page.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
    }
}

impl Drop for Ingester {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `flowgate` with `args` and `env`; its exit code, stdout and stderr.
pub fn run(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut cmd = flowgate();
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Waits until every id of `accepted` is stored (the bus is drained into the store).
pub async fn wait_stored(db: &TestDb, accepted: &[String], within: Duration) {
    let wanted: HashSet<&String> = accepted.iter().collect();
    let deadline = Instant::now() + within;
    loop {
        let stored = db.sdk_event_ids().await;
        let have: HashSet<&String> = stored.iter().collect();
        let missing = wanted.difference(&have).count();
        if missing == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{missing} of {} accepted events are not stored",
            accepted.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Resolves the fixture's `onboarding` placement for a US iOS user: status and body.
pub fn resolve_onboarding(s: &Served) -> (u16, serde_json::Value) {
    let body = serde_json::json!({"user_id": "u1", "session_id": "s1", "device_platform": "ios", "attributes": {"country": "US"}}).to_string();
    let path = format!("/v1/apps/{}/placements/onboarding/resolve", fixtures::APP1);
    let (status, reply) = http(s.api, "POST", &path, Some(&s.key), body.as_bytes()).unwrap();
    (
        status,
        serde_json::from_str(&reply).unwrap_or(serde_json::Value::Null),
    )
}

/// Publishes version 3 of the fixture's first flow, straight into the database at `db_url`.
pub fn publish_version_3(db_url: &str) {
    let mut doc = fixtures::catalog_json();
    let flow = &mut doc["workspaces"][0]["apps"][0]["flows"][0];
    flow["versions"].as_array_mut().unwrap().push(serde_json::json!({
        "id": "40000000-0000-4000-8000-0000000000f3", "version": 3, "schema_version": 3, "fonts": [], "flow_schema": {"screens": ["v3"]}
    }));
    flow["published_version"] = serde_json::json!(3);
    import(db_url, &doc);
}

/// Sends SIGTERM to `child` and waits (at most a minute) for its exit code.
async fn terminate_child(child: &mut Child) -> Option<i32> {
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
