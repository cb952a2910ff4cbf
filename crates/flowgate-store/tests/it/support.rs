//! Test databases and fixtures.
//!
//! PostgreSQL: each test creates its own database `flowgate_test_<unix seconds>_<random>` on the
//! server at `FLOWGATE_TEST_PG_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`) and
//! drops it when its [`TestDb`] is dropped, also when the test panics. Databases of crashed runs
//! (older than an hour, by the time in their name) are dropped before each test. A server that
//! cannot be reached skips the PostgreSQL variant with a message, except in CI (`CI=true`),
//! where it fails the test.
//!
//! SQLite: a file in a fresh temporary folder, removed on drop.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use diesel::sql_types::{BigInt, Text};
use diesel::QueryableByName;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use flowgate_domain::catalog::CatalogData;
use flowgate_domain::events::{AnalyticsEvent, EventSource, EventType, NoFlowReason};
use flowgate_domain::ids::{AppId, EventId, FlowId, FlowVersionId, KeyId, WorkspaceId};
use flowgate_domain::keys::{ApiKey, KeyEnvironment, KeyRecord, KeyType};
use flowgate_domain::Platform;
use flowgate_store::{Backend, Store, StoreOptions};
use time::OffsetDateTime;

const DB_PREFIX: &str = "flowgate_test_";
const STALE_AFTER_SECS: u64 = 3600;

fn admin_url() -> String {
    std::env::var("FLOWGATE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// `admin_url` with its database replaced by `db`.
fn url_for(db: &str) -> String {
    let admin = admin_url();
    match admin.rfind('/') {
        Some(i) if i > "postgres://".len() => format!("{}/{db}", &admin[..i]),
        _ => format!("{admin}/{db}"),
    }
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Short timeouts: a broken setup fails fast instead of hanging the suite.
pub fn test_options() -> StoreOptions {
    StoreOptions {
        max_connections: Some(4),
        connect_timeout: Duration::from_secs(5),
        acquire_timeout: Duration::from_secs(5),
        sqlite_busy_timeout: Duration::from_secs(5),
        poll_interval: Duration::from_millis(50),
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[derive(QueryableByName)]
struct DbName {
    #[diesel(sql_type = Text)]
    datname: String,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

async fn admin_connection() -> Result<AsyncPgConnection, String> {
    match tokio::time::timeout(
        Duration::from_secs(5),
        AsyncPgConnection::establish(&admin_url()),
    )
    .await
    {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out".to_owned()),
    }
}

/// Drops test databases left by crashed runs. Databases of tests running right now are
/// younger than the cut-off, so concurrent test processes are never disturbed.
async fn sweep(conn: &mut AsyncPgConnection) {
    let names: Vec<DbName> = diesel::sql_query("SELECT datname FROM pg_database")
        .load(conn)
        .await
        .expect("list databases");
    let cutoff = now_secs().saturating_sub(STALE_AFTER_SECS);
    for DbName { datname } in names {
        let Some(rest) = datname.strip_prefix(DB_PREFIX) else {
            continue;
        };
        let created = rest.split('_').next().and_then(|s| s.parse::<u64>().ok());
        if created.is_some_and(|t| t < cutoff) {
            let _ = diesel::sql_query(format!(
                "DROP DATABASE IF EXISTS \"{datname}\" WITH (FORCE)"
            ))
            .execute(conn)
            .await;
        }
    }
}

enum Cleanup {
    Postgres { name: String },
    Sqlite { dir: std::path::PathBuf },
}

/// A fresh, migrated database of one backend, with a store on it; removed on drop.
pub struct TestDb {
    pub store: Store,
    pub url: String,
    cleanup: Cleanup,
}

impl TestDb {
    /// A migrated PostgreSQL database, or `None` (outside CI) when the server is down.
    pub async fn postgres() -> Option<TestDb> {
        let db = Self::postgres_unmigrated().await?;
        db.store.migrate().await.expect("migrations apply");
        Some(db)
    }

    /// A migrated SQLite file.
    pub async fn sqlite() -> TestDb {
        let db = Self::sqlite_unmigrated();
        db.store.migrate().await.expect("migrations apply");
        db
    }

    /// An empty PostgreSQL database, or `None` (outside CI) when the server is down.
    pub async fn postgres_unmigrated() -> Option<TestDb> {
        let mut admin = match admin_connection().await {
            Ok(conn) => conn,
            Err(e) if in_ci() => panic!("PostgreSQL is required in CI ({}): {e}", admin_url()),
            Err(e) => {
                eprintln!(
                    "SKIPPED: PostgreSQL at {} is not reachable ({e}); start it with `make pg-up`",
                    admin_url()
                );
                return None;
            }
        };
        sweep(&mut admin).await;
        let name = format!(
            "{DB_PREFIX}{}_{}",
            now_secs(),
            uuid::Uuid::new_v4().simple()
        );
        diesel::sql_query(format!("CREATE DATABASE \"{name}\""))
            .execute(&mut admin)
            .await
            .expect("create the test database");
        let url = url_for(&name);
        let store = Store::connect(&url, test_options()).expect("store");
        Some(TestDb {
            store,
            url,
            cleanup: Cleanup::Postgres { name },
        })
    }

    /// An empty SQLite file in a fresh temporary folder.
    pub fn sqlite_unmigrated() -> TestDb {
        let dir = std::env::temp_dir().join(format!(
            "flowgate-store-test-{}",
            uuid::Uuid::new_v4().simple()
        ));
        // The store creates the folder itself (D14's default path must work on a fresh machine).
        let url = format!("sqlite://{}", dir.join("flowgate.db").display());
        let store = Store::connect(&url, test_options()).expect("store");
        TestDb {
            store,
            url,
            cleanup: Cleanup::Sqlite { dir },
        }
    }

    pub fn backend(&self) -> Backend {
        self.store.backend()
    }

    /// A second store on the same database: its own pool, as another replica would have.
    pub fn open_another(&self) -> Store {
        Store::connect(&self.url, test_options()).expect("second store")
    }

    /// Runs a `SELECT count(*) AS n ...` query.
    pub async fn count(&self, sql: &str) -> i64 {
        let query = diesel::sql_query(sql);
        let rows: Vec<Count> = match self.backend() {
            Backend::Postgres => {
                let mut conn = AsyncPgConnection::establish(&self.url)
                    .await
                    .expect("connect");
                query.load(&mut conn).await.expect("count")
            }
            Backend::Sqlite => {
                let path = self.url.trim_start_matches("sqlite://");
                let mut conn = diesel_async::sync_connection_wrapper::SyncConnectionWrapper::<
                    diesel::SqliteConnection,
                >::establish(path)
                .await
                .expect("connect");
                query.load(&mut conn).await.expect("count")
            }
        };
        <[Count]>::first(&rows).map(|c| c.n).expect("one row")
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::Postgres { name } => {
                // Drop runs inside the test's runtime, which cannot block on a future: the drop
                // gets a thread and a runtime of its own. FORCE ends the store's connections.
                let name = name.clone();
                let dropped = std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("runtime");
                    runtime.block_on(async {
                        let mut admin = admin_connection().await?;
                        diesel::sql_query(format!(
                            "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                        ))
                        .execute(&mut admin)
                        .await
                        .map_err(|e| e.to_string())
                    })
                })
                .join();
                if !matches!(dropped, Ok(Ok(_))) {
                    eprintln!("could not drop a test database; the next run sweeps it");
                }
            }
            Cleanup::Sqlite { dir } => {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Fixtures

pub const WS1: &str = "10000000-0000-4000-8000-000000000001";
pub const WS2: &str = "10000000-0000-4000-8000-000000000002";
pub const APP1: &str = "20000000-0000-4000-8000-000000000001";
pub const FLOW_US: &str = "30000000-0000-4000-8000-000000000001";
pub const V_US_2: &str = "40000000-0000-4000-8000-000000000002";

/// The flow_schema of one version, as published: keys not in alphabetical order, an integer
/// beyond 2^53 and beyond u64, numbers in forms a re-encoder would change, escapes, inner
/// whitespace. D2: it must come back byte for byte.
pub const EXACT_SCHEMA: &str = r#"{"zeta": 1, "alpha": {"big": 123456789012345678901234567890, "n": 9007199254740993, "f": 1.50, "e": 1E3}, "mid": "caf\u00e9 \"q\"", "list": [ 3, 2,1 ]}"#;

/// A catalog in the D13 shape, with every kind of row: two workspaces, flows with several
/// versions (one unpublished), placements with flow and experiment rules (a holdout, a
/// namespace, a paused experiment), saved groups, keys (one revoked).
pub fn catalog_json() -> String {
    format!(
        r#"{{
  "workspaces": [
    {{"id": "{WS1}", "name": "Acme", "apps": [{{
      "id": "{APP1}", "name": "Acme iOS",
      "media_base_url": "https://cdn.example.com/media/",
      "icon_base_url": "https://cdn.example.com/icons/",
      "cache_ttl_seconds": 120,
      "saved_groups": {{"beta": ["u-beta-1", "u-beta-2", 7]}},
      "flows": [
        {{"id": "{FLOW_US}", "name": "US onboarding", "published_version": 2, "versions": [
          {{"id": "40000000-0000-4000-8000-000000000001", "version": 1, "schema_version": 1, "fonts": [], "flow_schema": {{"screens": []}}}},
          {{"id": "{V_US_2}", "version": 2, "schema_version": 3,
           "fonts": [{{"family": "Inter", "weight": 400, "style": "normal", "url": "https://cdn.example.com/inter.woff2"}},
                     {{"family": "Inter", "weight": 700, "style": "italic", "url": "https://cdn.example.com/inter-bi.woff2"}}],
           "flow_schema": {EXACT_SCHEMA}}}
        ]}},
        {{"id": "30000000-0000-4000-8000-000000000002", "name": "Default", "published_version": 1, "versions": [
          {{"id": "40000000-0000-4000-8000-000000000003", "version": 1, "schema_version": 1, "fonts": [], "flow_schema": {{"screens": ["default"]}}}}
        ]}},
        {{"id": "30000000-0000-4000-8000-000000000003", "name": "Draft", "published_version": null, "versions": [
          {{"id": "40000000-0000-4000-8000-000000000004", "version": 1, "schema_version": 1, "fonts": [], "flow_schema": {{}}}}
        ]}}
      ],
      "placements": [
        {{"key": "onboarding", "default_flow_id": "30000000-0000-4000-8000-000000000002", "rules": [
          {{"audience": {{"country": "US"}}, "flow_id": "{FLOW_US}"}},
          {{"audience": {{}}, "flow_id": "30000000-0000-4000-8000-000000000003"}},
          {{"flow_id": "30000000-0000-4000-8000-000000000002"}}
        ]}},
        {{"key": "Paywall.main:v2", "rules": [
          {{"audience": {{}}, "experiment": {{
            "id": "50000000-0000-4000-8000-000000000002", "name": "old-test", "status": "paused",
            "variants": [{{"id": "60000000-0000-4000-8000-000000000003", "name": "only", "weight": 1, "flow_id": "{FLOW_US}"}}]}}}},
          {{"experiment": {{
            "id": "50000000-0000-4000-8000-000000000001", "name": "paywall-test", "status": "running",
            "seed": "paywall-seed", "coverage": 0.5, "namespace": ["pricing", 0.0, 0.5],
            "variants": [{{"id": "60000000-0000-4000-8000-000000000001", "name": "control", "weight": 1, "flow_id": null}},
                         {{"id": "60000000-0000-4000-8000-000000000002", "name": "new", "weight": 2.5, "flow_id": "{FLOW_US}"}}]}}}}
        ]}},
        {{"key": "empty"}}
      ]
    }}]}},
    {{"id": "{WS2}", "name": "Other", "apps": []}}
  ],
  "api_keys": [
    {{"id": "70000000-0000-4000-8000-000000000001", "workspace_id": "{WS1}",
      "digest": "{d1}", "display_prefix": "fg_test_aaaa", "key_type": "sdk", "environment": "test",
      "name": "ios", "created_at": "2026-01-01T00:00:00.123456789Z", "revoked_at": null}},
    {{"id": "70000000-0000-4000-8000-000000000002", "workspace_id": "{WS1}",
      "digest": "{d2}", "display_prefix": "fg_live_bbbb", "key_type": "secret", "environment": "live",
      "name": "old", "created_at": "2026-01-02T00:00:00Z", "revoked_at": "2026-01-03T04:05:06.5+02:00"}}
  ]
}}"#,
        d1 = key('a').digest().to_hex(),
        d2 = key('b').digest().to_hex(),
    )
}

/// The fixture, parsed the way a store or file import does (`flow_schema` kept raw).
pub fn catalog() -> CatalogData {
    serde_json::from_str(&catalog_json()).expect("fixture catalog parses")
}

pub fn ws(id: &str) -> WorkspaceId {
    id.parse().expect("uuid")
}

pub fn key(fill: char) -> ApiKey {
    ApiKey::from_random(KeyEnvironment::Test, &fill.to_string().repeat(30))
}

/// A fresh key record of `workspace`.
pub fn key_record(workspace: &str, fill: char, created_at: OffsetDateTime) -> KeyRecord {
    KeyRecord::new(
        KeyId::from_uuid(uuid::Uuid::new_v4()),
        ws(workspace),
        &key(fill),
        KeyType::Sdk,
        format!("key {fill}"),
        created_at,
    )
}

/// An SDK event with a fresh id.
pub fn sdk_event(n: u32) -> AnalyticsEvent {
    let mut payload = serde_json::Map::new();
    payload.insert("screen_index".to_owned(), serde_json::json!(n));
    payload.insert(
        "properties".to_owned(),
        serde_json::json!({"b": 1, "a": [true, null]}),
    );
    AnalyticsEvent {
        event_id: EventId::from_uuid(uuid::Uuid::new_v4()),
        source: EventSource::Sdk,
        event_type: EventType::ScreenView,
        app_id: APP1.parse::<AppId>().expect("uuid"),
        flow_id: Some(FLOW_US.parse::<FlowId>().expect("uuid")),
        flow_version_id: Some(V_US_2.parse::<FlowVersionId>().expect("uuid")),
        placement_key: Some("onboarding".to_owned()),
        user_id: format!("user-{n}"),
        session_id: "session-1".to_owned(),
        device_platform: Platform::Ios,
        occurred_at: OffsetDateTime::now_utc(),
        sdk_version: Some("1.2.3".to_owned()),
        experiment_id: None,
        variant_id: None,
        variant_name: None,
        reason: None,
        payload,
    }
}

/// A server `resolve_no_flow` event for a holdout (D8).
pub fn server_event() -> AnalyticsEvent {
    let at = OffsetDateTime::now_utc();
    AnalyticsEvent {
        event_id: EventId::new_v7(at),
        source: EventSource::Server,
        event_type: EventType::ResolveNoFlow,
        app_id: APP1.parse::<AppId>().expect("uuid"),
        flow_id: None,
        flow_version_id: None,
        placement_key: Some("paywall".to_owned()),
        user_id: "user-h".to_owned(),
        session_id: "session-h".to_owned(),
        device_platform: Platform::Web,
        occurred_at: at,
        sdk_version: None,
        experiment_id: Some("50000000-0000-4000-8000-000000000001".to_owned()),
        variant_id: Some("60000000-0000-4000-8000-000000000001".to_owned()),
        variant_name: Some("control".to_owned()),
        reason: Some(NoFlowReason::Holdout),
        payload: serde_json::Map::new(),
    }
}
