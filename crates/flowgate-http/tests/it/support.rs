//! A server under test: store, catalog, sink, config, a bound listener, and a client.

use std::sync::{Arc, Mutex};

use actix_web::{web, HttpServer};
use arc_swap::ArcSwap;
use awc::http::StatusCode;
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::keys::{ApiKey, KeyEnvironment, KeyType};
use flowgate_domain::ports::{
    Admission, BoxFuture, CatalogSource, EventSink, EventStore, KeyStore, Overloaded, Receipt,
    SystemClock,
};
use flowgate_domain::Catalog;
use flowgate_http::{api_app, ApiState, HttpConfig, HttpMetrics};
use flowgate_testkit::TestDb;
use serde_json::Value;

use crate::fixtures::{self, WS1, WS2};

/// Which store backs the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// An `EventSink` that keeps what it was given, and can be told to refuse (D7 overload), to
/// hold its receipts until released, or to time them out (D15).
pub struct CollectingSink {
    events: Mutex<Vec<AnalyticsEvent>>,
    /// The capacity of each vector of events offered to `try_enqueue` (server events, and the
    /// client events an admission enqueues).
    capacities: Mutex<Vec<usize>>,
    refuse: Mutex<bool>,
    refuse_admission: Mutex<bool>,
    /// Receipts resolve once this is true (D15: the events are stored).
    stored: tokio::sync::watch::Sender<bool>,
    /// Receipts resolve with this refusal instead (the acknowledgement timed out).
    time_out: Mutex<Option<Overloaded>>,
}

impl Default for CollectingSink {
    fn default() -> Self {
        Self {
            events: Mutex::default(),
            capacities: Mutex::default(),
            refuse: Mutex::default(),
            refuse_admission: Mutex::default(),
            stored: tokio::sync::watch::Sender::new(true),
            time_out: Mutex::default(),
        }
    }
}

impl CollectingSink {
    pub fn events(&self) -> Vec<AnalyticsEvent> {
        self.events.lock().unwrap().clone()
    }
    /// The capacity of each vector of events `try_enqueue` was given, in order.
    pub fn capacities(&self) -> Vec<usize> {
        self.capacities.lock().unwrap().clone()
    }
    pub fn set_refusing(&self, refuse: bool) {
        *self.refuse.lock().unwrap() = refuse;
    }
    /// Refuse admissions (`Retry-After: 9`): a request is refused once its body was read and
    /// its valid events are asked room for (D25).
    pub fn set_refusing_admission(&self, refuse: bool) {
        *self.refuse_admission.lock().unwrap() = refuse;
    }
    /// Whether receipts resolve (the events count as stored); while false they wait.
    pub fn set_storing(&self, stored: bool) {
        self.stored.send_replace(stored);
    }
    /// Receipts resolve with `refusal` (the acknowledgement timed out), or normally with `None`.
    pub fn set_timing_out(&self, refusal: Option<Overloaded>) {
        *self.time_out.lock().unwrap() = refusal;
    }
}

struct Admitted<'a>(&'a CollectingSink);

impl Admission for Admitted<'_> {
    fn enqueue(self: Box<Self>, events: Vec<AnalyticsEvent>) -> Result<Receipt, Overloaded> {
        self.0.try_enqueue(events)?;
        let mut stored = self.0.stored.subscribe();
        let time_out = *self.0.time_out.lock().unwrap();
        Ok(Receipt::new(async move {
            let _ = stored.wait_for(|stored| *stored).await;
            time_out.map_or(Ok(()), Err)
        }))
    }
}

impl EventSink for CollectingSink {
    fn try_enqueue(&self, events: Vec<AnalyticsEvent>) -> Result<(), Overloaded> {
        if *self.refuse.lock().unwrap() {
            return Err(Overloaded {
                retry_after_secs: 7,
            });
        }
        self.capacities.lock().unwrap().push(events.capacity());
        self.events.lock().unwrap().extend(events);
        Ok(())
    }

    fn admit(&self, _max: usize) -> BoxFuture<'_, Result<Box<dyn Admission + '_>, Overloaded>> {
        let refuse = *self.refuse_admission.lock().unwrap();
        Box::pin(async move {
            if refuse {
                return Err(Overloaded {
                    retry_after_secs: 9,
                });
            }
            let admitted: Box<dyn Admission + '_> = Box::new(Admitted(self));
            Ok(admitted)
        })
    }
}

/// Keys of the fixture: an SDK test key of workspace 1 (the one tests use), a secret key, a
/// live key, a revoked key, and an SDK key of workspace 2.
pub struct Keys {
    pub sdk: ApiKey,
    pub secret: ApiKey,
    pub live: ApiKey,
    pub revoked: ApiKey,
    pub other_workspace: ApiKey,
}

pub struct TestServer {
    pub base: String,
    pub db: TestDb,
    pub sink: Arc<CollectingSink>,
    pub keys: Keys,
    /// The catalog the server serves.
    pub catalog: flowgate_http::CatalogHandle,
    pub client: awc::Client,
    handle: actix_web::dev::ServerHandle,
}

/// The API app over `catalog` and `sink` on one worker, bound to a free port on 127.0.0.1; the
/// caller runs the returned server on the runtime it tests.
pub fn bind_api(
    config: HttpConfig,
    catalog: flowgate_http::CatalogHandle,
    sink: Arc<CollectingSink>,
) -> (std::net::SocketAddr, actix_web::dev::Server) {
    let state = web::Data::new(ApiState::new(
        config,
        catalog,
        sink,
        Arc::new(SystemClock),
        HttpMetrics::default(),
    ));
    let bound = HttpServer::new(move || api_app(state.clone()))
        .workers(1)
        .disable_signals()
        .bind(("127.0.0.1", 0))
        .expect("bind");
    let addr = *bound.addrs().first().expect("bound");
    (addr, bound.run())
}

impl TestServer {
    /// Starts a server over `backend` with the fixture catalog, or `None` when PostgreSQL is
    /// not available and `FLOWGATE_TEST_SKIP_PG=1` allows skipping.
    pub async fn start(backend: Backend) -> Option<TestServer> {
        Self::start_with(backend, HttpConfig::default()).await
    }

    pub async fn start_with(backend: Backend, config: HttpConfig) -> Option<TestServer> {
        let db = match backend {
            Backend::Sqlite => TestDb::sqlite().await,
            Backend::Postgres => TestDb::postgres().await?,
        };
        db.store
            .replace_catalog(&fixtures::data_from(&fixtures::catalog_json()))
            .await
            .expect("catalog written");
        let keys = Keys {
            sdk: fixtures::key(KeyEnvironment::Test, 'a'),
            secret: fixtures::key(KeyEnvironment::Test, 'b'),
            live: fixtures::key(KeyEnvironment::Live, 'c'),
            revoked: fixtures::key(KeyEnvironment::Test, 'd'),
            other_workspace: fixtures::key(KeyEnvironment::Test, 'e'),
        };
        for (i, (ws, key, kind)) in [
            (WS1, &keys.sdk, KeyType::Sdk),
            (WS1, &keys.secret, KeyType::Secret),
            (WS1, &keys.live, KeyType::Sdk),
            (WS1, &keys.revoked, KeyType::Sdk),
            (WS2, &keys.other_workspace, KeyType::Sdk),
        ]
        .into_iter()
        .enumerate()
        {
            let record = fixtures::record(ws, key, kind, 100 + i as u128);
            let id = record.id;
            db.store.insert_key(record).await.expect("key stored");
            if key == &keys.revoked {
                db.store
                    .revoke_key(id, time::OffsetDateTime::now_utc())
                    .await
                    .expect("revoked");
            }
        }
        let catalog = Catalog::build(db.store.load_catalog().await.expect("catalog loads"))
            .expect("catalog builds");
        let sink = Arc::new(CollectingSink::default());
        let catalog: flowgate_http::CatalogHandle = Arc::new(ArcSwap::from_pointee(catalog));
        let (addr, server) = bind_api(config, catalog.clone(), sink.clone());
        let handle_srv = server.handle();
        actix_web::rt::spawn(server);
        Some(TestServer {
            base: format!("http://{addr}"),
            db,
            sink,
            keys,
            catalog,
            client: awc::Client::builder().disable_redirects().finish(),
            handle: handle_srv,
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn bearer(key: &ApiKey) -> String {
        format!("Bearer {}", key.expose())
    }

    /// POSTs JSON with the SDK key.
    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.post_with(
            path,
            Some(&self.keys.sdk),
            body.to_string().into_bytes(),
            &[],
        )
        .await
    }

    /// POSTs raw bytes with the SDK key and `Accept-Encoding: accept`.
    pub async fn post_accepting(&self, path: &str, body: &[u8], accept: &str) -> Reply {
        self.post_with(
            path,
            Some(&self.keys.sdk),
            body.to_vec(),
            &[("accept-encoding", accept)],
        )
        .await
    }

    /// POSTs raw bytes with a key (or none) and extra headers; `Content-Type: application/json`
    /// unless a header overrides it.
    pub async fn post_with(
        &self,
        path: &str,
        key: Option<&ApiKey>,
        body: Vec<u8>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut req = self.client.post(self.url(path)).no_decompress();
        if !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
        {
            req = req.insert_header(("content-type", "application/json"));
        }
        if let Some(key) = key {
            req = req.insert_header(("authorization", Self::bearer(key)));
        }
        for (name, value) in headers {
            req = req.insert_header((*name, *value));
        }
        Reply::from(req.send_body(body).await.expect("request sent")).await
    }

    pub async fn request(
        &self,
        method: awc::http::Method,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut req = self.client.request(method, self.url(path)).no_decompress();
        for (name, value) in headers {
            req = req.insert_header((*name, *value));
        }
        Reply::from(req.send().await.expect("request sent")).await
    }

    /// Writes what the sink collected to the store (as the analytics sink would).
    pub async fn flush_sink_to_store(&self) -> flowgate_domain::ports::AppendOutcome {
        self.db
            .store
            .append_events(&self.sink.events())
            .await
            .expect("events written")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let handle = self.handle.clone();
        actix_web::rt::spawn(async move { handle.stop(false).await });
    }
}

/// A received response.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: awc::http::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub async fn from<S>(mut res: awc::ClientResponse<S>) -> Reply
    where
        S: futures_util::Stream<Item = Result<actix_web::web::Bytes, awc::error::PayloadError>>
            + Unpin,
    {
        let body = res
            .body()
            .limit(64 * 1024 * 1024)
            .await
            .expect("body read")
            .to_vec();
        Reply {
            status: res.status(),
            headers: res.headers().clone(),
            body,
        }
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts a 200 gzip response (`Content-Encoding`, `Vary`, an exact `Content-Length`, one
    /// valid gzip member) and returns the decoded body.
    #[track_caller]
    pub fn gunzip(&self) -> Vec<u8> {
        use std::io::Read as _;
        assert_eq!(self.status, 200);
        assert_eq!(self.header("content-encoding"), Some("gzip"));
        assert_eq!(self.header("vary"), Some("accept-encoding"));
        assert_eq!(
            self.header("content-length").map(str::to_owned),
            Some(self.body.len().to_string())
        );
        let mut decoded = Vec::new();
        flate2::read::GzDecoder::new(self.body.as_slice())
            .read_to_end(&mut decoded)
            .expect("one valid gzip member");
        decoded
    }

    /// Asserts a problem+json response with `status` and `code` (D9), and returns the body.
    #[track_caller]
    pub fn problem(&self, status: u16, code: &str) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "status; body: {}",
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json")
        );
        let body = self.json();
        assert_problem_shape(&body);
        assert_eq!(body["code"], code, "{body}");
        assert_eq!(body["status"], status);
        assert_eq!(
            body["request_id"].as_str(),
            self.header("x-request-id"),
            "request id in body and header"
        );
        body
    }
}

/// D9's shape: type, title, status, detail, code, request_id; `errors` items have field and
/// message.
#[track_caller]
pub fn assert_problem_shape(body: &Value) {
    let code = body["code"].as_str().expect("code is a string");
    assert_eq!(
        body["type"],
        format!("https://flowgate.dev/problems/{code}")
    );
    assert!(
        body["title"].is_string() && body["detail"].is_string(),
        "{body}"
    );
    assert!(
        body["status"].is_u64() && body["request_id"].is_string(),
        "{body}"
    );
    if let Some(errors) = body.get("errors") {
        for e in errors.as_array().expect("errors is an array") {
            assert!(e["field"].is_string() && e["message"].is_string(), "{e}");
        }
    }
}

/// Runs an async test body once, over the SQLite store. The server answers from the snapshot
/// it built from the store at start and hands events to a collecting sink, so a case that does
/// not read back what went through the store behaves the same on either backend; the store's
/// own contract suite runs every port on both.
macro_rules! on_sqlite {
    ($($name:ident),+ $(,)?) => {
        flowgate_testkit::per_backend! {
            #[actix_web::test]
            [sqlite => Some($crate::support::Backend::Sqlite)]
            $(async fn $name(backend) { super::$name(backend).await })+
        }
    };
}
pub(crate) use on_sqlite;

/// Runs an async test body on the SQLite store and on the PostgreSQL store: for the cases
/// whose answer carries what each backend stored and loaded back (flow schemas byte for byte,
/// ids, the catalog's TTLs).
macro_rules! on_both_stores {
    ($($name:ident),+ $(,)?) => {
        flowgate_testkit::per_backend! {
            #[actix_web::test]
            [
                sqlite => Some($crate::support::Backend::Sqlite),
                postgres => Some($crate::support::Backend::Postgres),
            ]
            $(async fn $name(backend) { super::$name(backend).await })+
        }
    };
}
pub(crate) use on_both_stores;

/// Starts the server or skips (PostgreSQL unavailable and `FLOWGATE_TEST_SKIP_PG=1`).
macro_rules! server {
    ($backend:expr) => {
        match $crate::support::TestServer::start($backend).await {
            Some(s) => s,
            None => return,
        }
    };
    ($backend:expr, $config:expr) => {
        match $crate::support::TestServer::start_with($backend, $config).await {
            Some(s) => s,
            None => return,
        }
    };
}
pub(crate) use server;
