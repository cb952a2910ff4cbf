//! Configuration (D14): `config/default.toml`, then `config/<environment>.toml`, then the file
//! given with `--config`, then `FLOWGATE__SECTION__KEY` variables; later layers win. Every key
//! has a default here, so the service also runs with no file at all (`make run` on a fresh
//! checkout). Invalid configuration stops start-up with a message naming the key.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::value::{Dict, Map, Value};
use figment::{Figment, Profile, Provider};
use flowgate_analytics::SinkConfig;
use flowgate_domain::events::ValidationLimits;
use flowgate_domain::keys::KeyEnvironment;
use flowgate_http::sticky::StickyReadWriteSettings;
use flowgate_http::{HttpConfig, RateLimitConfig};
use flowgate_jetstream::JetStreamConfig;
use flowgate_store::{redact_url, Backend, SqliteSynchronous, TlsMode};
use serde::{Deserialize, Serialize};
use validator::Validate;

mod fields;

/// The deployment environment (`FLOWGATE_ENV` or `--env`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Environment {
    /// A developer's machine: the embedded SQLite default, readable logs.
    Development,
    /// Pre-production: PostgreSQL, test keys, JSON logs.
    Staging,
    /// Production: PostgreSQL, live keys only, JSON logs.
    Production,
}

impl Environment {
    /// The name used in file names and `FLOWGATE_ENV`.
    pub fn as_str(self) -> &'static str {
        match self {
            Environment::Development => "development",
            Environment::Staging => "staging",
            Environment::Production => "production",
        }
    }
}

/// The whole configuration. Unknown keys are errors, so a typo cannot silently fall back to a
/// default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Validate)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The public API listener.
    #[validate(nested)]
    pub server: ServerConfig,
    /// The admin listener (health, readiness, metrics).
    #[validate(nested)]
    pub admin: AdminConfig,
    /// The store.
    pub database: DatabaseConfig,
    /// API keys.
    pub auth: AuthConfig,
    /// Catalog refresh and reviewed changes.
    pub catalog: CatalogConfig,
    /// The operator console's sign-in (D24, D28).
    pub console: ConsoleConfig,
    /// The audit log (D28).
    pub audit: AuditConfig,
    /// The scheduler of staged rollouts (D29).
    pub scheduler: SchedulerConfig,
    /// Resolve.
    pub resolve: ResolveConfig,
    /// Rate limits (D10).
    pub rate_limit: RateLimitConfig,
    /// Event ingestion and the analytics sink (D7, D8).
    pub events: EventsConfig,
    /// Experiment results (D22).
    #[validate(nested)]
    pub experiments: ExperimentsConfig,
    /// Sticky assignment (D23).
    #[validate(nested)]
    pub sticky: StickyConfig,
    /// Store notifications (D30).
    pub stores: StoresConfig,
    /// Logging.
    #[validate(nested)]
    pub log: LogConfig,
}

/// `[server]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Validate)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address of the public API.
    #[validate(custom(function = fields::socket_address))]
    pub listen: String,
    /// HTTP worker threads; 0 means one per CPU core.
    pub workers: usize,
    /// A request's whole body must arrive within this (D25); else 408 and the connection
    /// closes.
    pub body_timeout_ms: u64,
    /// After its first second, a body must arrive at this average rate or faster (D25); 0: no
    /// rate check.
    pub body_min_bytes_per_sec: u32,
    /// Open API connections at most (D25), lowered at start to leave file descriptors for the
    /// admin listener, the store and the log under the process's limit.
    pub max_connections: usize,
    /// Open API connections of one client address at most (D25); 0: no cap. Trusted proxies
    /// (`rate_limit.trusted_proxies`) are not capped.
    pub max_connections_per_address: u32,
}

impl Default for ServerConfig {
    fn default() -> Self {
        let pace = flowgate_http::BodyPace::default();
        Self {
            listen: "127.0.0.1:8080".into(),
            workers: 0,
            body_timeout_ms: millis(pace.timeout),
            body_min_bytes_per_sec: pace.min_bytes_per_sec,
            max_connections: 10_000,
            max_connections_per_address:
                flowgate_http::connections::DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
        }
    }
}

/// `[admin]`
#[derive(Clone, PartialEq, Serialize, Deserialize, Validate)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Address of the admin listener (D11: separate port).
    #[validate(custom(function = fields::socket_address))]
    pub listen: String,
    /// Bearer token of the admin API (explain, D18); empty: the admin API is off. A secret:
    /// never logged.
    #[validate(custom(function = fields::admin_token))]
    pub token: String,
    /// How long a console session lasts after signing in, in seconds (D24).
    pub console_session_seconds: u64,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9090".into(),
            token: String::new(),
            console_session_seconds: 8 * 3600,
        }
    }
}

impl fmt::Debug for AdminConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let token = if self.token.is_empty() {
            "(off)"
        } else {
            "<redacted>"
        };
        f.debug_struct("AdminConfig")
            .field("listen", &self.listen)
            .field("token", &token)
            .field("console_session_seconds", &self.console_session_seconds)
            .finish()
    }
}

/// Shortest accepted `admin.token`.
pub const MIN_ADMIN_TOKEN_CHARS: usize = 32;
/// Fewest distinct characters in an accepted `admin.token`: a random hex token of 32 has about
/// 14, so this refuses only tokens made by hand (`aaaa...`, `abab...`, `0000...`).
pub const MIN_ADMIN_TOKEN_DISTINCT: usize = 8;

/// Sink writers on PostgreSQL when `events.writers` is 0.
pub const PG_WRITERS: usize = 4;
/// Sink writers on SQLite when `events.writers` is 0.
pub const SQLITE_WRITERS: usize = 2;

/// `[database]`
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `sqlite://PATH` or `postgres://USER:PASSWORD@HOST:PORT/DB[?sslmode=require]`. Contains a
    /// secret: never logged as is ([`DatabaseConfig::redacted_url`]).
    pub url: String,
    /// Apply migrations at start. Unset: yes on SQLite, no on PostgreSQL, where several
    /// replicas start at once and `flowgate migrate` runs as one step before a rollout.
    pub auto_migrate: Option<bool>,
    /// Pool size; 0 picks the backend's default.
    pub max_connections: usize,
    /// Longest time to open one connection.
    pub connect_timeout_ms: u64,
    /// SQLite's `synchronous` (D15): `full` (commits survive a power loss) or `normal` (they
    /// survive a crash of the process only).
    pub sqlite_synchronous: SqliteSync,
}

/// `database.sqlite_synchronous`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SqliteSync {
    /// Every commit is synced to disk.
    #[default]
    Full,
    /// The log is synced at checkpoints.
    Normal,
}

impl From<SqliteSync> for SqliteSynchronous {
    fn from(s: SqliteSync) -> Self {
        match s {
            SqliteSync::Full => SqliteSynchronous::Full,
            SqliteSync::Normal => SqliteSynchronous::Normal,
        }
    }
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: "sqlite://data/flowgate.db".into(),
            auto_migrate: None,
            max_connections: 0,
            connect_timeout_ms: 5_000,
            sqlite_synchronous: SqliteSync::Full,
        }
    }
}

impl DatabaseConfig {
    /// The URL with any password replaced by `***`, for logs and messages.
    pub fn redacted_url(&self) -> String {
        redact_url(&self.url)
    }

    /// What start-up warns about the URL's TLS: `sslmode=require` to another host encrypts
    /// but does not authenticate the server, so anyone on the path can pose as it.
    pub fn tls_warning(&self) -> Option<String> {
        let tls = flowgate_store::url_tls(&self.url).ok()?;
        (tls.mode == TlsMode::Require && !tls.loopback).then(|| {
            format!(
                "database {}: sslmode=require encrypts but does not authenticate the database \
                 server; use sslmode=verify-full with sslrootcert",
                self.redacted_url()
            )
        })
    }
}

impl fmt::Debug for DatabaseConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseConfig")
            .field("url", &self.redacted_url())
            .field("auto_migrate", &self.auto_migrate)
            .field("max_connections", &self.max_connections)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .finish()
    }
}

/// `[auth]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// The key environment this deployment accepts (D1): `live` or `test`.
    pub key_environment: KeyEnvironment,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            key_environment: KeyEnvironment::Test,
        }
    }
}

/// `[catalog]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CatalogConfig {
    /// Longest wait for a change notification before the revision is checked again (D12: a
    /// change is served within 5 s; PostgreSQL is notified at once, SQLite is polled).
    pub refresh_interval_ms: u64,
    /// The local copy of the last catalog that built, served when the store is unreachable at
    /// start (D20); empty: no cache.
    pub cache_path: String,
    /// Whether a console change is applied only once another editor or admin approved it
    /// (D28).
    pub require_review: bool,
}

impl Default for CatalogConfig {
    fn default() -> Self {
        Self {
            refresh_interval_ms: 1_000,
            cache_path: "data/catalog-cache.json".into(),
            require_review: false,
        }
    }
}

/// `[console]` (D28): how people sign in to the operator console.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleConfig {
    /// Whether `admin.token` signs in as a break-glass `admin`, recorded as `admin-token`.
    pub admin_token_sign_in: bool,
    /// Failed sign-ins an account may have within 15 minutes before its sign-in is refused
    /// for the rest of them (per address, the admin API's limiter applies too).
    pub failed_sign_ins_per_account: u32,
    /// OpenID Connect sign-in; off while `issuer` is empty.
    pub oidc: OidcConfig,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self {
            admin_token_sign_in: true,
            failed_sign_ins_per_account: 10,
            oidc: OidcConfig::default(),
        }
    }
}

/// `[console.oidc]` (D28): the OpenID provider people sign in with.
#[derive(Clone, PartialEq, Serialize, Deserialize, Validate)]
#[serde(deny_unknown_fields, default)]
pub struct OidcConfig {
    /// The issuer URL (its discovery document is `<issuer>/.well-known/openid-configuration`);
    /// empty: OpenID Connect is off.
    #[validate(custom(function = fields::https_or_loopback))]
    pub issuer: String,
    /// The console's client id at the provider.
    #[validate(custom(function = fields::required_with_issuer))]
    pub client_id: String,
    /// Its client secret. A secret: never logged.
    #[validate(custom(function = fields::required_with_issuer))]
    pub client_secret: String,
    /// Where the provider sends people back: `https://<admin host>/console/oidc/callback`.
    #[validate(custom(function = fields::callback_url))]
    pub redirect_url: String,
    /// The ID token claim listing a person's groups.
    #[validate(custom(function = fields::claim_name))]
    pub groups_claim: String,
    /// The scopes asked for (`openid` is always asked): add the one that puts
    /// `groups_claim` in the ID token when the provider needs one (often `groups`).
    pub scopes: Vec<String>,
    /// A PEM file of the authorities that sign the provider's TLS certificate (a private
    /// one); empty: the system's roots.
    #[validate(custom(function = fields::ca_file))]
    pub ca_file: String,
    /// Who gets which role: the highest role of the rules that match; no match: refused.
    #[validate(custom(function = fields::role_rules))]
    pub roles: Vec<OidcRoleRule>,
}

/// One rule of `console.oidc.roles`: a verified email's domain, or a group, gives a role.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcRoleRule {
    /// A verified email of this domain matches (`example.com`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email_domain: Option<String>,
    /// Membership of this group (in `groups_claim`) matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// `viewer`, `editor` or `admin`.
    pub role: String,
}

impl Default for OidcConfig {
    fn default() -> Self {
        Self {
            issuer: String::new(),
            client_id: String::new(),
            client_secret: String::new(),
            redirect_url: String::new(),
            groups_claim: "groups".into(),
            scopes: vec!["openid".into(), "email".into(), "profile".into()],
            ca_file: String::new(),
            roles: Vec::new(),
        }
    }
}

impl fmt::Debug for OidcConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OidcConfig")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("redirect_url", &self.redirect_url)
            .field("groups_claim", &self.groups_claim)
            .field("scopes", &self.scopes)
            .field("ca_file", &self.ca_file)
            .field("roles", &self.roles)
            .finish()
    }
}

/// `[audit]` (D28)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Entries older than this many days are deleted (the only deletion); 0 = keep all.
    pub retention_days: u32,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            retention_days: 400,
        }
    }
}

/// `[scheduler]` (D29): how often `serve` looks at the rollouts, and its lease.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerConfig {
    /// Between two passes over the running rollouts.
    pub interval_ms: u64,
    /// How long the replica that acts holds the lease without renewing it; another takes
    /// over this long after it dies. More than the interval.
    pub lease_seconds: u64,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            interval_ms: 5000,
            lease_seconds: 30,
        }
    }
}

/// The roles a console person may have (D28).
pub const ROLES: [&str; 3] = ["viewer", "editor", "admin"];

/// `[resolve]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResolveConfig {
    /// `cache_ttl_seconds` for apps without their own (D3.9).
    pub cache_ttl_seconds: u32,
    /// Largest resolve and batch body, in bytes.
    pub body_limit_bytes: usize,
}

impl Default for ResolveConfig {
    fn default() -> Self {
        Self {
            cache_ttl_seconds: flowgate_http::config::DEFAULT_CACHE_TTL_SECONDS,
            body_limit_bytes: flowgate_http::config::DEFAULT_RESOLVE_BODY_LIMIT,
        }
    }
}

/// `events.sink` (D16): where accepted events go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    /// Written to the store by `serve` itself.
    #[default]
    Store,
    /// Published to a NATS JetStream stream; `flowgate ingest` writes them to the store.
    Jetstream,
}

impl SinkKind {
    /// The configuration value.
    pub fn as_str(self) -> &'static str {
        match self {
            SinkKind::Store => "store",
            SinkKind::Jetstream => "jetstream",
        }
    }
}

/// `[events]` (D7, D8, D15, D16, D21, D25): one table, read by the components whose keys it
/// holds: the sink's ([`SinkConfig`]: `ack`, `batch_size`, `writers`, ...), the HTTP adapter's
/// (the timestamp window, the unknown-placement budget), the store's (`retention_days`), the
/// bus's (`[events.jetstream]`) and the binary's own (`sink`). Unknown keys are refused by
/// [`Config::load_with`], since serde cannot refuse them in a table it shares out with
/// `flatten`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EventsConfig {
    /// Where accepted events go: `store` (default) or `jetstream` (D16).
    pub sink: SinkKind,
    /// `resolve_no_flow` events for unknown placements recorded per app and minute, each key
    /// at most once a minute (D25); 0 records none.
    pub unknown_placement_events_per_minute: u32,
    /// How far in the future an event timestamp may be (D7: 24 h).
    pub max_future_secs: u64,
    /// How far in the past an event timestamp may be (D7: 31 days).
    pub max_past_secs: u64,
    /// Events older than this many days are dropped (D21); 0 keeps everything.
    pub retention_days: u32,
    /// `[events.jetstream]`: the event bus, with `sink = "jetstream"` (D16); the adapter's
    /// own settings, read as they are.
    pub jetstream: JetStreamConfig,
    /// The sink's keys, read by the sink's own deserialisation. Its `writers` is 0 in
    /// [`Config::default`] and `config/default.toml`, the layers [`Config::load_with`] starts
    /// from, and [`Config::sink`] turns 0 into the backend's default; a table deserialised
    /// without those layers gets the sink's own default for a missing key (2 writers).
    #[serde(flatten)]
    pub sink_settings: SinkConfig,
}

impl Default for EventsConfig {
    fn default() -> Self {
        Self {
            sink: SinkKind::Store,
            unknown_placement_events_per_minute:
                flowgate_http::config::DEFAULT_UNKNOWN_PLACEMENT_EVENTS_PER_MINUTE,
            max_future_secs: 24 * 3600,
            max_past_secs: 31 * 24 * 3600,
            retention_days: 0,
            jetstream: JetStreamConfig::default(),
            sink_settings: SinkConfig {
                writers: 0,
                ..SinkConfig::default()
            },
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One JSON object per line (production).
    Json,
    /// Human-readable (development).
    Pretty,
}

/// `[experiments]` (D22).
#[derive(Clone, PartialEq, Serialize, Deserialize, Validate)]
#[serde(deny_unknown_fields, default)]
pub struct ExperimentsConfig {
    /// Where results are read: empty for the main database, or another URL of the same
    /// database (a read replica). Contains a secret: never logged as is.
    pub database_url: String,
    /// The longest a results query may run before it is stopped and the report fails.
    pub query_timeout_ms: u64,
    /// Connections results may hold at once, apart from resolve's and event writes' pool (a
    /// report on PostgreSQL reads with up to 4, on SQLite with 1; more reports wait their turn).
    pub max_connections: usize,
    /// The reporting currency (three upper-case letters).
    #[validate(custom(function = fields::currency))]
    pub currency: String,
    /// `EUR = 1.08`: one unit of the currency is worth this much of `currency`. The codes are
    /// read in any case and kept upper-case ([`OPERATOR_KEYED`]); `currency`'s own rate is
    /// refused.
    #[validate(custom(function = fields::exchange_rates))]
    pub exchange_rates: BTreeMap<String, f64>,
}

impl Default for ExperimentsConfig {
    fn default() -> Self {
        Self {
            database_url: String::new(),
            query_timeout_ms: 10_000,
            max_connections: 4,
            currency: "USD".into(),
            exchange_rates: BTreeMap::new(),
        }
    }
}

impl fmt::Debug for ExperimentsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExperimentsConfig")
            .field("database_url", &redact_url(&self.database_url))
            .field("query_timeout_ms", &self.query_timeout_ms)
            .field("max_connections", &self.max_connections)
            .field("currency", &self.currency)
            .field("exchange_rates", &self.exchange_rates)
            .finish()
    }
}

/// `[stores]` (D30): store notifications and the revenue they report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoresConfig {
    /// PEM files of the roots App Store signatures must chain to; empty: Apple Root CA - G3,
    /// built into the binary.
    pub apple_root_certificates: Vec<std::path::PathBuf>,
    /// Development only: a PEM file holding a generated test root, its chain and the leaf's
    /// key (`apple_demo_signer::DemoSigner`), created by `flowgate serve` when missing and
    /// trusted beside the roots above, so that `flowgate demo --traffic` can send signed App Store
    /// notifications. Empty: none. Refused in production.
    pub demo_apple_signer: std::path::PathBuf,
    /// Reports count store transactions bought within this many days of a user's first
    /// exposure (`--horizon`, `horizon=` override it per report).
    pub horizon_days: u32,
}

impl Default for StoresConfig {
    fn default() -> Self {
        Self {
            apple_root_certificates: Vec::new(),
            demo_apple_signer: std::path::PathBuf::new(),
            horizon_days: 30,
        }
    }
}

/// `[sticky]` (D23): where sticky experiments' stored assignments are kept, and how long
/// resolve waits for them. One table read by the components whose keys it holds: the binary's
/// choice of store (`redis_url`), the Redis store's `key_prefix`, and the HTTP adapter's
/// request-path settings ([`StickyReadWriteSettings`]: `read_timeout_ms`, `write_queue`, `write_batch`).
/// Unknown keys are refused by [`Config::load_with`], as in `[events]`.
#[derive(Clone, PartialEq, Serialize, Deserialize, Validate)]
#[serde(default)]
pub struct StickyConfig {
    /// `redis://[user:password@]host[:port][/db]`: the Redis replicas share. Empty: the main
    /// database (`database.url`) keeps them. Contains a secret: never logged as is.
    #[validate(custom(function = fields::redis_url))]
    pub redis_url: String,
    /// The first part of every Redis key (a shared Redis, or several deployments on one).
    #[validate(length(min = 1, message = "must not be empty"))]
    pub key_prefix: String,
    /// The request path's keys, read by the HTTP adapter's own deserialisation: the longest
    /// resolve waits for a user's stored assignments (past it, the placement resolves as
    /// without them, counted); assignments waiting to be stored at most (beyond, new ones are
    /// dropped, counted); assignments stored per write.
    #[serde(flatten)]
    pub settings: StickyReadWriteSettings,
}

impl Default for StickyConfig {
    fn default() -> Self {
        Self {
            redis_url: String::new(),
            key_prefix: "flowgate:sticky".into(),
            settings: StickyReadWriteSettings::default(),
        }
    }
}

impl fmt::Debug for StickyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StickyConfig")
            .field("redis_url", &flowgate_redis::redact_url(&self.redis_url))
            .field("key_prefix", &self.key_prefix)
            .field("settings", &self.settings)
            .finish()
    }
}

/// `[log]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Validate)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `json` or `pretty`.
    pub format: LogFormat,
    /// A `tracing` filter: one of [`LOG_LEVELS`] (`info`, `debug`, ...), or comma-separated
    /// directives, each a level or `target=level` (`flowgate=debug,info`). A directive that
    /// names no level (`verbose`: to `tracing`, a target logged at every level while all else
    /// is off) is refused.
    #[validate(custom(function = fields::log_filter))]
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Pretty,
            level: "info".into(),
        }
    }
}

/// The levels `log.level` may name, alone or as `target=level` (in any case, as `tracing`
/// reads them).
pub const LOG_LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// The keys whose value is one of a fixed set, with the set. [`Config::load_with`] checks them
/// before the values are read, so each is refused alike, with the key, the value given and
/// the values allowed, a number too (serde's own refusals quote the value with backticks, and
/// a number's names only the type: `expected enum LogFormat`). `log.level` ([`LOG_LEVELS`])
/// and `events.jetstream.replicas` (1, 3 or 5) are checked by [`Config::validate`].
pub const ENUMERATED: [(&str, &[&str]); 5] = [
    ("database.sqlite_synchronous", &["full", "normal"]),
    ("auth.key_environment", &["live", "test"]),
    ("events.sink", &["store", "jetstream"]),
    ("events.ack", &["stored", "buffered"]),
    ("log.format", &["json", "pretty"]),
];

/// The tables whose keys the operator chooses (currency codes), not the code: read in any case
/// and kept upper-case, from files and from variables alike (whose names reach the
/// configuration lower-cased: `FLOWGATE__EXPERIMENTS__EXCHANGE_RATES__EUR` is `eur`). A later
/// layer's key replaces an earlier layer's in another case; one source giving a key twice
/// (`eur` and `EUR`) is refused.
pub const OPERATOR_KEYED: [&str; 1] = ["experiments.exchange_rates"];

/// A numeric key and the values it accepts, both bounds included (issue 65): what its reader
/// takes without overflowing, panicking or silently misbehaving.
#[derive(Clone, Copy)]
pub struct Bounded {
    /// The key, e.g. `stores.horizon_days`.
    pub key: &'static str,
    /// The least value accepted.
    pub min: u64,
    /// The most value accepted.
    pub max: u64,
    /// The key's value in a configuration.
    value: fn(&Config) -> u64,
}

const fn bounded(key: &'static str, min: u64, max: u64, value: fn(&Config) -> u64) -> Bounded {
    Bounded {
        key,
        min,
        max,
        value,
    }
}

/// The file descriptors a Linux process may have at most by default (`fs.nr_open`): no more
/// connections than this can be open.
const MAX_DESCRIPTORS: u64 = 1_048_576;
/// A hundred years of days: the longest retention or horizon anyone could mean.
const CENTURY_DAYS: u64 = 36_500;

/// Every numeric key with its range. [`Config::load_with`] refuses a value outside it before
/// the values are read (so a negative number or one too large for its type is refused alike,
/// with the key, the value given and the range), and [`Config::validate`] checks a
/// configuration built in code against it. `events.jetstream.replicas` (1, 3 or 5) is
/// enumerated instead; the cross-key rules (`scheduler.lease_seconds` longer than
/// `scheduler.interval_ms`, `events.retry_max_ms` at least `events.retry_base_ms`,
/// `events.retention_days` beyond `events.max_past_secs`) are checked by
/// [`Config::validate`] and the components.
pub const BOUNDED: &[Bounded] = &[
    // 0: one worker per core; more than 1024 threads would only contend.
    bounded("server.workers", 0, 1024, |c| c.server.workers as u64),
    bounded("server.body_timeout_ms", 100, 600_000, |c| {
        c.server.body_timeout_ms
    }),
    // 0: no rate check; a floor above 1 MiB/s would refuse ordinary mobile clients.
    bounded("server.body_min_bytes_per_sec", 0, 1_048_576, |c| {
        u64::from(c.server.body_min_bytes_per_sec)
    }),
    bounded("server.max_connections", 16, MAX_DESCRIPTORS, |c| {
        c.server.max_connections as u64
    }),
    bounded(
        "server.max_connections_per_address",
        0,
        MAX_DESCRIPTORS,
        |c| u64::from(c.server.max_connections_per_address),
    ),
    bounded("admin.console_session_seconds", 60, 7 * 24 * 3600, |c| {
        c.admin.console_session_seconds
    }),
    // 0: the backend's default; PostgreSQL itself allows 100 connections by default.
    bounded("database.max_connections", 0, 1000, |c| {
        c.database.max_connections as u64
    }),
    // Below 100 ms no connection to another host opens; a pool waits this long for one.
    bounded("database.connect_timeout_ms", 100, 600_000, |c| {
        c.database.connect_timeout_ms
    }),
    // D12: a change is served within 5 s.
    bounded("catalog.refresh_interval_ms", 1, 5_000, |c| {
        c.catalog.refresh_interval_ms
    }),
    // 0 would refuse every sign-in of every account, forever.
    bounded("console.failed_sign_ins_per_account", 1, 1000, |c| {
        u64::from(c.console.failed_sign_ins_per_account)
    }),
    // 0: keep all.
    bounded("audit.retention_days", 0, CENTURY_DAYS, |c| {
        u64::from(c.audit.retention_days)
    }),
    bounded("scheduler.interval_ms", 50, 600_000, |c| {
        c.scheduler.interval_ms
    }),
    bounded("scheduler.lease_seconds", 1, 3600, |c| {
        c.scheduler.lease_seconds
    }),
    // The catalog file accepts an app's own `cache_ttl_seconds` up to u32::MAX; the default
    // takes the same values.
    bounded("resolve.cache_ttl_seconds", 0, u32::MAX as u64, |c| {
        u64::from(c.resolve.cache_ttl_seconds)
    }),
    // A resolve body is read whole into memory: at most 16 MiB per request.
    bounded("resolve.body_limit_bytes", 1024, 16 * 1024 * 1024, |c| {
        c.resolve.body_limit_bytes as u64
    }),
    bounded("rate_limit.per_key_rps", 1, u32::MAX as u64, |c| {
        u64::from(c.rate_limit.per_key_rps)
    }),
    bounded("rate_limit.per_key_burst", 1, u32::MAX as u64, |c| {
        u64::from(c.rate_limit.per_key_burst)
    }),
    bounded("rate_limit.per_ip_rps", 1, u32::MAX as u64, |c| {
        u64::from(c.rate_limit.per_ip_rps)
    }),
    bounded("rate_limit.per_ip_burst", 1, u32::MAX as u64, |c| {
        u64::from(c.rate_limit.per_ip_burst)
    }),
    bounded(
        "events.unknown_placement_events_per_minute",
        0,
        1_000_000,
        |c| u64::from(c.events.unknown_placement_events_per_minute),
    ),
    // The events table gets a day partition for every day of the accepted window (D21): a
    // month ahead, a year back at most.
    bounded("events.max_future_secs", 1, 31 * 86_400, |c| {
        c.events.max_future_secs
    }),
    bounded("events.max_past_secs", 1, 366 * 86_400, |c| {
        c.events.max_past_secs
    }),
    // 0: keep everything.
    bounded("events.retention_days", 0, CENTURY_DAYS, |c| {
        u64::from(c.events.retention_days)
    }),
    // The sink's own ranges (`SinkConfig::validate`); `writers` 0 is the backend's default.
    bounded("events.ack_timeout_ms", 1, 600_000, |c| {
        millis(c.events.sink_settings.ack_timeout)
    }),
    bounded("events.queue_capacity", 100, 10_000_000, |c| {
        c.events.sink_settings.queue_capacity as u64
    }),
    bounded("events.batch_size", 1, 10_000, |c| {
        c.events.sink_settings.batch_size as u64
    }),
    bounded("events.flush_interval_ms", 1, 60_000, |c| {
        millis(c.events.sink_settings.flush_interval)
    }),
    bounded("events.write_threshold", 1, 10_000, |c| {
        c.events.sink_settings.write_threshold as u64
    }),
    bounded("events.drain_deadline_ms", 0, 3_600_000, |c| {
        millis(c.events.sink_settings.drain_deadline)
    }),
    bounded("events.writers", 0, 64, |c| {
        c.events.sink_settings.writers as u64
    }),
    bounded("events.write_timeout_ms", 1, 600_000, |c| {
        millis(c.events.sink_settings.write_timeout)
    }),
    bounded("events.admission_wait_ms", 0, 60_000, |c| {
        millis(c.events.sink_settings.admission_wait)
    }),
    bounded("events.retry_base_ms", 1, 60_000, |c| {
        millis(c.events.sink_settings.backoff.base)
    }),
    bounded("events.retry_max_ms", 1, 600_000, |c| {
        millis(c.events.sink_settings.backoff.max)
    }),
    // The bus's own ranges (`JetStreamConfig::validate`).
    bounded("events.jetstream.max_deliveries", 1, 1000, |c| {
        u64::from(c.events.jetstream.max_deliveries)
    }),
    bounded("events.jetstream.ack_wait_ms", 1000, 3_600_000, |c| {
        c.events.jetstream.ack_wait_ms
    }),
    bounded("events.jetstream.connect_timeout_ms", 100, 60_000, |c| {
        c.events.jetstream.connect_timeout_ms
    }),
    bounded("events.jetstream.ingest_batch_size", 1, 100_000, |c| {
        c.events.jetstream.ingest_batch_size as u64
    }),
    bounded("experiments.query_timeout_ms", 100, 600_000, |c| {
        c.experiments.query_timeout_ms
    }),
    bounded("experiments.max_connections", 1, 64, |c| {
        c.experiments.max_connections as u64
    }),
    // A report's `--horizon` and `horizon=` take 1 to 3650 days (ReportParams::with_horizon);
    // 0 would count no store transaction at all.
    bounded("stores.horizon_days", 1, 3650, |c| {
        u64::from(c.stores.horizon_days)
    }),
    bounded("sticky.read_timeout_ms", 1, 10_000, |c| {
        millis(c.sticky.settings.read_timeout)
    }),
    bounded("sticky.write_queue", 1, 10_000_000, |c| {
        c.sticky.settings.write_queue as u64
    }),
    bounded("sticky.write_batch", 1, 10_000, |c| {
        c.sticky.settings.write_batch as u64
    }),
];

/// The message of a value out of its range; `value` as given.
fn out_of_range(bound: &Bounded, value: &str) -> String {
    format!(
        "{} = {value} is out of range: {} to {}",
        bound.key, bound.min, bound.max
    )
}

/// Invalid configuration: the key and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file or variable could not be read into the typed configuration.
    #[error("invalid configuration: {0}")]
    Parse(String),
    /// A number outside its key's range ([`BOUNDED`]): the key, the value and the range.
    #[error("invalid configuration: {0}")]
    OutOfRange(String),
    /// A value is of the right type but not acceptable.
    #[error("invalid configuration: {key}: {problem}")]
    Invalid {
        /// The key, e.g. `auth.key_environment`.
        key: std::borrow::Cow<'static, str>,
        /// What is wrong.
        problem: String,
    },
}

fn invalid(key: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        problem: problem.into(),
    }
}

/// The first refusal of a section's field rules ([`fields`]), by key; `prefix` is the
/// section's path.
fn first_problem(
    prefix: &str,
    checked: Result<(), validator::ValidationErrors>,
) -> Result<(), ConfigError> {
    let Err(errors) = checked else {
        return Ok(());
    };
    match fields::problems(prefix, &errors).into_iter().next() {
        Some((key, problem)) => Err(ConfigError::Invalid {
            key: key.into(),
            problem,
        }),
        None => Ok(()),
    }
}

/// Where configuration files are looked for.
#[derive(Clone, Debug)]
pub struct Sources {
    /// The folder with `default.toml` and `<environment>.toml` (default `./config`).
    pub dir: PathBuf,
    /// An extra file (`--config`), required to exist when given.
    pub extra: Option<PathBuf>,
}

impl Config {
    /// Loads and validates the configuration of `env` from `sources` and the process
    /// environment.
    pub fn load(env: Environment, sources: &Sources) -> Result<Config, ConfigError> {
        Self::load_with(env, sources, Env::prefixed("FLOWGATE__").split("__"))
    }

    /// As [`Config::load`], with the variables provider given (tests pass their own).
    pub fn load_with(
        env: Environment,
        sources: &Sources,
        vars: Env,
    ) -> Result<Config, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()))
            .merge(OperatorKeys(Toml::file(sources.dir.join("default.toml"))))
            .merge(OperatorKeys(Toml::file(
                sources.dir.join(format!("{}.toml", env.as_str())),
            )));
        if let Some(extra) = &sources.extra {
            if !extra.is_file() {
                return Err(ConfigError::Parse(format!(
                    "--config {}: no such file",
                    extra.display()
                )));
            }
            figment = figment.merge(OperatorKeys(Toml::file(extra)));
        }
        let figment = figment.merge(OperatorKeys(vars));
        // A source that cannot be read (a file that does not parse, a currency given twice):
        // its own error, before any key's.
        figment
            .extract::<Value>()
            .map_err(|e| ConfigError::Parse(redact_errors(&e)))?;
        check_enumerated(&figment)?;
        check_bounded(&figment)?;
        check_shared_tables(&figment)?;
        let config: Config = figment
            .extract()
            .map_err(|e| ConfigError::Parse(redact_errors(&e)))?;
        config.validate(env)?;
        Ok(config)
    }

    /// `[console.oidc]`, when `issuer` is set: each key's rule ([`fields`]), a client, a
    /// redirect URL and role rules.
    fn validate_oidc(&self) -> Result<(), ConfigError> {
        let oidc = &self.console.oidc;
        if oidc.issuer.trim().is_empty() {
            return Ok(());
        }
        first_problem("console.oidc", oidc.validate())
    }

    /// Production's own rules: live keys, no demo root, PostgreSQL over TLS to another host.
    fn validate_production(&self, url: &str) -> Result<(), ConfigError> {
        if self.auth.key_environment != KeyEnvironment::Live {
            return Err(invalid(
                "auth.key_environment",
                format!(
                    "production accepts live keys only (D1), not `{}`",
                    self.auth.key_environment
                ),
            ));
        }
        if !self.stores.demo_apple_signer.as_os_str().is_empty() {
            return Err(invalid(
                "stores.demo_apple_signer",
                format!(
                    "production trusts no demo root; leave it empty, not {:?}",
                    self.stores.demo_apple_signer.display().to_string()
                ),
            ));
        }
        if url.starts_with("sqlite://") {
            return Err(invalid(
                "database.url",
                "production needs PostgreSQL (postgres://...); the embedded SQLite store is for development",
            ));
        }
        let tls =
            flowgate_store::url_tls(url).map_err(|e| invalid("database.url", e.to_string()))?;
        if matches!(tls.mode, TlsMode::Disable | TlsMode::Prefer) && !tls.loopback {
            return Err(invalid(
                "database.url",
                format!(
                    "production needs sslmode=require or stronger for a database on another \
                     host, not sslmode={} (it sends the password and the data in plain text, \
                     or may fall back to it); use sslmode=verify-full with sslrootcert",
                    tls.mode
                ),
            ));
        }
        Ok(())
    }

    /// `[experiments]`: the reporting currency, the exchange rates and the replica.
    fn validate_experiments(&self) -> Result<(), ConfigError> {
        let x = &self.experiments;
        for (currency, rate) in &x.exchange_rates {
            if *currency == x.currency {
                return Err(invalid(
                    "experiments.exchange_rates",
                    format!(
                        "{currency} = {rate}: {currency} is the reporting currency \
                         (experiments.currency), worth 1 of itself; remove its rate, or set \
                         experiments.currency to the currency the rates are in"
                    ),
                ));
            }
        }
        let replica = x.database_url.trim();
        if !replica.is_empty()
            && Backend::of_url(replica) != Backend::of_url(self.database.url.trim())
        {
            return Err(invalid(
                "experiments.database_url",
                "must be a database of the same kind as database.url (a replica of it)",
            ));
        }
        Ok(())
    }

    /// Checks what types cannot: required values per environment, addresses, ranges.
    pub fn validate(&self, env: Environment) -> Result<(), ConfigError> {
        for bound in BOUNDED {
            let value = (bound.value)(self);
            if !(bound.min..=bound.max).contains(&value) {
                return Err(ConfigError::OutOfRange(out_of_range(
                    bound,
                    &value.to_string(),
                )));
            }
        }
        first_problem("", Validate::validate(self))?;
        let sc = &self.scheduler;
        // Both in range (above): the product cannot overflow.
        if sc.lease_seconds * 1000 <= sc.interval_ms {
            return Err(invalid(
                "scheduler.lease_seconds",
                format!(
                    "must last longer than scheduler.interval_ms ({} ms), not {} s",
                    sc.interval_ms, sc.lease_seconds
                ),
            ));
        }
        self.validate_experiments()?;
        self.validate_oidc()?;
        let url = self.database.url.trim();
        if url.is_empty() {
            return Err(invalid(
                "database.url",
                format!(
                    "required in {}: set it in a config file or FLOWGATE__DATABASE__URL",
                    env.as_str()
                ),
            ));
        }
        if !(url.starts_with("sqlite://") || Backend::of_url(url) == Backend::Postgres) {
            return Err(invalid(
                "database.url",
                "must start with sqlite://, postgres:// or postgresql://",
            ));
        }
        if env == Environment::Production {
            self.validate_production(url)?;
        }
        let retention_secs = u64::from(self.events.retention_days) * 86_400;
        if self.events.retention_days > 0 && retention_secs <= self.events.max_past_secs + 86_400 {
            return Err(invalid(
                "events.retention_days",
                format!(
                    "{} days would drop events the service still accepts: keep more than \
                     events.max_past_secs ({} s) plus one day, or 0 to keep everything",
                    self.events.retention_days, self.events.max_past_secs
                ),
            ));
        }
        self.sink()
            .validate()
            .map_err(|e| ConfigError::Parse(e.to_string()))?;
        self.events
            .jetstream
            .validate()
            .map_err(|e| invalid(e.key, e.problem))?;
        Ok(())
    }

    /// Settings of the HTTP adapter.
    pub fn http(&self) -> Result<HttpConfig, ConfigError> {
        Ok(HttpConfig {
            key_environment: self.auth.key_environment,
            default_cache_ttl_seconds: self.resolve.cache_ttl_seconds,
            resolve_body_limit: self.resolve.body_limit_bytes,
            events_body_limit: flowgate_http::config::DEFAULT_EVENTS_BODY_LIMIT,
            rate_limit: self.rate_limit.clone(),
            record_resolve_no_flow: self.events.sink_settings.record_resolve_no_flow,
            body_pace: flowgate_http::BodyPace {
                timeout: Duration::from_millis(self.server.body_timeout_ms),
                min_bytes_per_sec: self.server.body_min_bytes_per_sec,
            },
            unknown_placement_events_per_minute: self.events.unknown_placement_events_per_minute,
            catalog_refresh_interval: Duration::from_millis(self.catalog.refresh_interval_ms),
            event_limits: ValidationLimits {
                max_future: time::Duration::seconds(
                    i64::try_from(self.events.max_future_secs).unwrap_or(i64::MAX),
                ),
                max_past: time::Duration::seconds(
                    i64::try_from(self.events.max_past_secs).unwrap_or(i64::MAX),
                ),
            },
        })
    }

    /// How reports value and bound results (D27, D30): the reporting currency, its exchange
    /// rates and the store notifications' horizon.
    pub fn results_settings(&self) -> flowgate_control::results::ResultsSettings {
        flowgate_control::results::ResultsSettings {
            currency: self.experiments.currency.clone(),
            exchange_rates: self.experiments.exchange_rates.clone(),
            horizon_days: self.stores.horizon_days,
        }
    }

    /// What the events table keeps (D21): the accepted window and the retention.
    pub fn event_retention(&self) -> flowgate_store::EventRetention {
        flowgate_store::EventRetention {
            max_past: Duration::from_secs(self.events.max_past_secs),
            max_future: Duration::from_secs(self.events.max_future_secs),
            retention_days: self.events.retention_days,
        }
    }

    /// Settings of the analytics sink. `events.writers = 0` picks the backend's default:
    /// [`PG_WRITERS`] on PostgreSQL, where writes of several batches run in parallel (4
    /// writers store 11-15% more events/s than 2, P20 in docs/decisions.md),
    /// [`SQLITE_WRITERS`] on SQLite, which writes one transaction at a time and whose pool has
    /// 4 connections that the catalog and probes need too.
    pub fn sink(&self) -> SinkConfig {
        let mut sink = self.events.sink_settings.clone();
        if sink.writers == 0 {
            sink.writers = match (self.events.sink, Backend::of_url(self.database.url.trim())) {
                (SinkKind::Jetstream, _) | (_, Backend::Postgres) => PG_WRITERS,
                (_, Backend::Sqlite) => SQLITE_WRITERS,
            };
        }
        sink
    }

    /// The listen address of the API (validated).
    pub fn server_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_addr("server.listen", &self.server.listen)
    }

    /// The listen address of the admin listener (validated).
    pub fn admin_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_addr("admin.listen", &self.admin.listen)
    }
}

/// [`ENUMERATED`]: every key given a value outside its set, with the value and the set.
fn check_enumerated(figment: &Figment) -> Result<(), ConfigError> {
    let problems: Vec<String> = ENUMERATED
        .iter()
        .filter_map(|(key, allowed)| {
            let value = figment.find_value(key).ok()?;
            if value.as_str().is_some_and(|v| allowed.contains(&v)) {
                return None;
            }
            let given = match &value {
                Value::String(_, s) => format!("{s:?}"),
                other => serde_json::to_string(other).unwrap_or_else(|_| "a table".into()),
            };
            let allowed = allowed
                .iter()
                .map(|a| format!("`{a}`"))
                .collect::<Vec<_>>()
                .join(", ");
            let mut message = format!("{key}: {given} is not one of {allowed}");
            if let Some(meta) = figment.find_metadata(key) {
                message.push_str(&from_source(meta));
            }
            Some(message)
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ConfigError::Parse(problems.join("; ")))
    }
}

/// What a source gives for a numeric key.
enum Given {
    /// A whole number: its value, `None` when no 128-bit integer holds it (out of every range).
    Int(Option<i128>),
    /// Anything else (a fraction, a word, a table): the deserialiser's to refuse, naming the
    /// type it expected.
    NotAnInteger,
}

/// `value` as a whole number; a string of digits too, as a variable may arrive.
fn given_integer(value: &Value) -> Given {
    match value {
        Value::Num(_, num) => match (num.to_u128(), num.to_i128()) {
            (Some(u), _) => Given::Int(i128::try_from(u).ok()),
            (None, Some(i)) => Given::Int(Some(i)),
            (None, None) => Given::NotAnInteger,
        },
        Value::String(_, text) => {
            let text = text.trim();
            let digits = text.strip_prefix('-').unwrap_or(text);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                Given::NotAnInteger
            } else {
                Given::Int(text.parse::<i128>().ok())
            }
        }
        _ => Given::NotAnInteger,
    }
}

/// [`BOUNDED`]: every key given a whole number outside its range, with the value as given and
/// where it came from. Done before the values are read, so that `-1` or `4294967296` for a
/// `u32` key gets the range too, not only the type serde expected.
fn check_bounded(figment: &Figment) -> Result<(), ConfigError> {
    let problems: Vec<String> = BOUNDED
        .iter()
        .filter_map(|bound| {
            let value = figment.find_value(bound.key).ok()?;
            let inside = match given_integer(&value) {
                Given::NotAnInteger => return None,
                Given::Int(n) => {
                    n.is_some_and(|n| (i128::from(bound.min)..=i128::from(bound.max)).contains(&n))
                }
            };
            if inside {
                return None;
            }
            let shown = match &value {
                Value::String(_, s) => s.trim().to_owned(),
                other => serde_json::to_string(other).unwrap_or_else(|_| "?".into()),
            };
            let mut message = out_of_range(bound, &shown);
            if let Some(meta) = figment.find_metadata(bound.key) {
                message.push_str(&from_source(meta));
            }
            Some(message)
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange(problems.join("; ")))
    }
}

/// A source whose [`OPERATOR_KEYED`] tables' keys are upper-cased; a key it gives twice in
/// two cases is an error of the source.
struct OperatorKeys<P>(P);

impl<P: Provider> Provider for OperatorKeys<P> {
    fn metadata(&self) -> figment::Metadata {
        self.0.metadata()
    }

    fn profile(&self) -> Option<Profile> {
        self.0.profile()
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let mut data = self.0.data()?;
        for dict in data.values_mut() {
            for path in OPERATOR_KEYED {
                upper_case_keys(dict, path).map_err(|problem| {
                    let mut error = figment::Error::from(problem);
                    error.path = path.split('.').map(str::to_owned).collect();
                    error
                })?;
            }
        }
        Ok(data)
    }
}

/// The keys of the table at `path` (dotted) in `dict` upper-cased, when it is a table; else
/// the key given twice.
fn upper_case_keys(dict: &mut Dict, path: &str) -> Result<(), String> {
    let mut table = dict;
    for part in path.split('.') {
        table = match table.get_mut(part) {
            Some(Value::Dict(_, inner)) => inner,
            _ => return Ok(()),
        };
    }
    let mut upper = Dict::new();
    let mut given = BTreeMap::new();
    for (key, value) in std::mem::take(table) {
        let code = key.to_ascii_uppercase();
        if let Some(first) = given.insert(code.clone(), key.clone()) {
            return Err(format!(
                "{code} is given twice, as {first:?} and {key:?} (codes are read in any case)"
            ));
        }
        upper.insert(code, value);
    }
    *table = upper;
    Ok(())
}

/// What serde's `flatten` cannot do for the tables several components read (`[events]`,
/// [`EventsConfig`]; `[sticky]`, [`StickyConfig`]): an error in a key of the flattened part
/// names that key (read first by its owner, as the other tables' errors do), and a key that no
/// component reads is refused, as every other table's unknown keys are.
fn check_shared_tables(figment: &Figment) -> Result<(), ConfigError> {
    check_shared_table::<SinkConfig>(figment, "events", &EventsConfig::default())?;
    check_shared_table::<StickyReadWriteSettings>(figment, "sticky", &StickyConfig::default())
}

/// [`check_shared_tables`] for `table`, whose flattened part is `Part` and whose keys are
/// those `defaults` serialises to.
fn check_shared_table<Part: serde::de::DeserializeOwned>(
    figment: &Figment,
    table: &str,
    defaults: &impl Serialize,
) -> Result<(), ConfigError> {
    // Focused rather than `extract_inner`, which puts the table after the key in an error's
    // path; the table is put first here.
    figment.focus(table).extract::<Part>().map_err(|e| {
        // A path-less error is not the table's (a file that does not parse): left as it is.
        let e = e.into_iter().map(|mut e| {
            if !e.path.is_empty() {
                e.path.insert(0, table.into());
            }
            e
        });
        ConfigError::Parse(e.map(|e| redact_errors(&e)).collect::<Vec<_>>().join("; "))
    })?;
    let Ok(given) = figment.find_value(table) else {
        return Ok(());
    };
    let known = figment::value::Value::serialize(defaults)
        .ok()
        .and_then(|v| v.into_dict())
        .unwrap_or_default();
    let expected = known
        .keys()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let unknown: Vec<String> = given
        .into_dict()
        .into_iter()
        .flatten()
        .filter(|(key, _)| !known.contains_key(key))
        .map(|(key, _)| {
            let mut message =
                format!("{table}.{key}: unknown field: found `{key}`, expected one of {expected}");
            if let Some(meta) = figment.find_metadata(&format!("{table}.{key}")) {
                message.push_str(&from_source(meta));
            }
            message
        })
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(ConfigError::Parse(unknown.join("; ")))
    }
}

fn parse_addr(key: &'static str, value: &str) -> Result<SocketAddr, ConfigError> {
    value.parse().map_err(|_| {
        invalid(
            key,
            format!("`{value}` is not an address like 127.0.0.1:8080"),
        )
    })
}

/// One line per problem, `section.key: problem (from source)`. figment quotes offending values
/// and lines; a URL among them may hold a password, so every URL is redacted.
fn redact_errors(error: &figment::Error) -> String {
    let mut out = Vec::new();
    for e in error.clone() {
        let key = e
            .path
            .iter()
            .map(|p| p.to_lowercase())
            .collect::<Vec<_>>()
            .join(".");
        let mut message = if key.is_empty() {
            e.kind.to_string()
        } else {
            format!("{key}: {}", e.kind)
        };
        if let Some(meta) = &e.metadata {
            message.push_str(&from_source(meta));
        }
        // Any key's: a file that does not parse is quoted with its line, and the bus's and
        // Redis's URLs hold credentials too.
        message = message
            .split_inclusive(char::is_whitespace)
            .map(|w| {
                if w.contains("://") {
                    redact_url(w)
                } else {
                    w.to_owned()
                }
            })
            .collect();
        out.push(message);
    }
    out.join("; ")
}

/// ` (from TOML file config/x.toml)`: where a value came from, for messages.
fn from_source(meta: &figment::Metadata) -> String {
    match &meta.source {
        Some(source) => format!(" (from {} {source})", meta.name),
        None => format!(" (from {})", meta.name),
    }
}

/// The configuration folder: `FLOWGATE_CONFIG_DIR`, else `./config`.
pub fn default_dir() -> PathBuf {
    std::env::var_os("FLOWGATE_CONFIG_DIR")
        .map_or_else(|| Path::new("config").to_path_buf(), PathBuf::from)
}

#[cfg(test)]
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;

    fn sources(dir: &Path) -> Sources {
        Sources {
            dir: dir.to_path_buf(),
            extra: None,
        }
    }

    fn repo_config_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config")
    }

    fn no_vars() -> Env {
        Env::prefixed("FLOWGATE_TEST_NOTHING__").split("__")
    }

    /// Loads with the repository's config folder and exactly `vars` as the environment
    /// (figment's `Jail` isolates the process environment).
    fn load(env: Environment, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let mut result = None;
        figment::Jail::expect_with(|jail| {
            jail.clear_env();
            for (k, v) in vars {
                jail.set_env(k, v);
            }
            result = Some(Config::load(env, &sources(&repo_config_dir())));
            Ok(())
        });
        result.unwrap_or_else(|| Err(ConfigError::Parse("jail did not run".into())))
    }

    /// The message of a [`load`] that must fail.
    fn load_error(env: Environment, vars: &[(&str, &str)]) -> String {
        load(env, vars).unwrap_err().to_string()
    }

    #[test]
    fn defaults_are_valid_and_default_toml_repeats_them() {
        Config::default()
            .validate(Environment::Development)
            .unwrap();
        let file: Config = Figment::new()
            .merge(Toml::file(repo_config_dir().join("default.toml")))
            .extract()
            .unwrap();
        assert_eq!(
            file,
            Config::default(),
            "config/default.toml must list the compiled defaults"
        );
        let empty = tempdir();
        let loaded =
            Config::load_with(Environment::Development, &sources(&empty), no_vars()).unwrap();
        assert_eq!(loaded, Config::default(), "no files at all: the defaults");
    }

    fn tempdir() -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("flowgate-config-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn sink_writers_default_by_backend_and_an_explicit_count_wins() {
        let mut config = Config::default();
        assert_eq!(config.events.sink_settings.writers, 0);
        assert_eq!(
            config.sink().writers,
            SQLITE_WRITERS,
            "the embedded default"
        );
        for url in [
            "postgres://fg@db/fg",
            " postgresql://fg@db/fg?sslmode=require",
        ] {
            config.database.url = url.into();
            assert_eq!(config.sink().writers, PG_WRITERS, "{url}");
        }
        config.events.sink_settings.writers = 3;
        assert_eq!(config.sink().writers, 3);
        config.database.url = "sqlite://data/x.db".into();
        assert_eq!(config.sink().writers, 3);
        config.events.sink_settings.writers = 65;
        let err = config.validate(Environment::Development).unwrap_err();
        assert!(err.to_string().contains("events.writers"), "{err}");
        let env = load(
            Environment::Development,
            &[
                ("FLOWGATE__DATABASE__URL", "postgres://fg@db/fg"),
                ("FLOWGATE__EVENTS__WRITERS", "1"),
            ],
        )
        .unwrap();
        assert_eq!(env.sink().writers, 1);
    }

    #[test]
    fn environment_files_and_variables_layer() {
        let dev = load(Environment::Development, &[]).unwrap();
        assert_eq!(dev.log.format, LogFormat::Pretty);
        let staging = load(
            Environment::Staging,
            &[("FLOWGATE__DATABASE__URL", "postgres://u:secret@db:5432/fg")],
        )
        .unwrap();
        assert_eq!(staging.log.format, LogFormat::Json);
        assert_eq!(staging.server.listen, "0.0.0.0:8080");
        assert_eq!(staging.database.auto_migrate, Some(false));
        let tuned = load(
            Environment::Development,
            &[
                ("FLOWGATE__EVENTS__BATCH_SIZE", "250"),
                (
                    "FLOWGATE__RATE_LIMIT__TRUSTED_PROXIES",
                    "[\"10.0.0.0/8\", \"192.168.1.1\"]",
                ),
            ],
        )
        .unwrap();
        assert_eq!(tuned.events.sink_settings.batch_size, 250);
        assert_eq!(tuned.http().unwrap().rate_limit.trusted_proxies.len(), 2);
    }

    #[test]
    fn production_refuses_test_keys_and_a_missing_or_embedded_store() {
        let err = load_error(Environment::Production, &[]);
        assert!(
            err.contains("database.url") && err.contains("required"),
            "{err}"
        );
        let err = load_error(
            Environment::Production,
            &[
                ("FLOWGATE__DATABASE__URL", "postgres://db/fg"),
                ("FLOWGATE__AUTH__KEY_ENVIRONMENT", "test"),
            ],
        );
        assert!(
            err.contains("auth.key_environment") && err.contains("live"),
            "{err}"
        );
        let err = load_error(
            Environment::Production,
            &[("FLOWGATE__DATABASE__URL", "sqlite://data/x.db")],
        );
        assert!(
            err.contains("database.url") && err.contains("PostgreSQL"),
            "{err}"
        );
        assert!(load(
            Environment::Production,
            &[(
                "FLOWGATE__DATABASE__URL",
                "postgres://db/fg?sslmode=require"
            )]
        )
        .is_ok());
    }

    #[test]
    fn openid_connect_needs_a_client_a_callback_and_role_rules() {
        let base = "[console.oidc]\nissuer = \"https://id.example.com\"\nclient_id = \"fg\"\n\
                    client_secret = \"s3cret-value\"\n\
                    redirect_url = \"https://fg.example.com/console/oidc/callback\"\n";
        let ok = load_file(
            &format!("{base}roles = [{{ email_domain = \"example.com\", role = \"viewer\" }}, {{ group = \"growth\", role = \"editor\" }}]\n"),
            &[],
        )
        .unwrap();
        assert_eq!(ok.console.oidc.roles.len(), 2);
        assert_eq!(ok.console.oidc.groups_claim, "groups");
        assert!(!format!("{:?}", ok.console.oidc).contains("s3cret"));
        for (file, key, quoted) in [
            (base.to_owned(), "console.oidc.roles", "at least one rule"),
            (
                format!("{base}roles = [{{ group = \"g\", role = \"owner\" }}]\n"),
                "console.oidc.roles",
                "\"owner\"",
            ),
            (
                format!("{base}roles = [{{ group = \"g\", email_domain = \"x.com\", role = \"viewer\" }}]\n"),
                "console.oidc.roles",
                "one of them",
            ),
            (
                base.replace("https://id.example.com", "http://id.example.com")
                    + "roles = [{ group = \"g\", role = \"viewer\" }]\n",
                "console.oidc.issuer",
                "\"http://id.example.com\"",
            ),
            (
                base.replace("/console/oidc/callback", "/callback")
                    + "roles = [{ group = \"g\", role = \"viewer\" }]\n",
                "console.oidc.redirect_url",
                "/console/oidc/callback",
            ),
            (
                base.replace("client_secret = \"s3cret-value\"\n", "")
                    + "roles = [{ group = \"g\", role = \"viewer\" }]\n",
                "console.oidc.client_secret",
                "required",
            ),
        ] {
            let err = load_file(&file, &[]).unwrap_err().to_string();
            assert!(err.contains(key) && err.contains(quoted), "{key} {quoted} in {err}");
        }
    }

    /// Issue 65: settings that could never work are refused at start, naming the key and the
    /// value, instead of failing at the first sign-in (a CA file that is missing or not PEM) or
    /// never matching anyone (an empty groups claim, an email domain with its `@` or empty, an
    /// empty group).
    #[test]
    fn openid_connect_settings_that_could_never_work_are_refused() {
        let base = "[console.oidc]\nissuer = \"https://id.example.com\"\nclient_id = \"fg\"\n\
                    client_secret = \"s3cret-value\"\n\
                    redirect_url = \"https://fg.example.com/console/oidc/callback\"\n";
        let rule = "roles = [{ email_domain = \"example.com\", role = \"viewer\" }]\n";
        let apple_root = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../flowgate-http/data/AppleRootCA-G3.pem"
        );
        let not_pem = tempdir().join("not-a-certificate.pem");
        std::fs::write(&not_pem, "hello\n").unwrap();
        let missing = tempdir().join("missing.pem");
        for accepted in [
            format!("{base}{rule}ca_file = \"{apple_root}\"\n"),
            format!("{base}roles = [{{ email_domain = \" Example.COM \", role = \"viewer\" }}]\n"),
            format!("{base}roles = [{{ group = \"Growth Team\", role = \"viewer\" }}]\n"),
        ] {
            load_file(&accepted, &[]).unwrap_or_else(|e| panic!("{accepted}: {e}"));
        }
        for (file, expected) in [
            (
                format!("{base}{rule}ca_file = \"{}\"\n", missing.display()),
                vec!["console.oidc.ca_file", &*missing.to_string_lossy()],
            ),
            (
                format!("{base}{rule}ca_file = \"{}\"\n", not_pem.display()),
                vec![
                    "console.oidc.ca_file",
                    &*not_pem.to_string_lossy(),
                    "no usable certificate",
                ],
            ),
            (
                format!("{base}roles = [{{ email_domain = \"\", role = \"viewer\" }}]\n"),
                vec!["console.oidc.roles", "email_domain \"\""],
            ),
            (
                format!(
                    "{base}roles = [{{ email_domain = \"@example.com\", role = \"viewer\" }}]\n"
                ),
                vec!["console.oidc.roles", "\"@example.com\"", "without the @"],
            ),
            (
                format!(
                    "{base}roles = [{{ email_domain = \"example..com\", role = \"viewer\" }}]\n"
                ),
                vec!["console.oidc.roles", "\"example..com\""],
            ),
            (
                format!("{base}roles = [{{ group = \"\", role = \"viewer\" }}]\n"),
                vec!["console.oidc.roles", "group \"\""],
            ),
            (
                format!("{base}{rule}groups_claim = \"\"\n"),
                vec!["console.oidc.groups_claim", "not \"\""],
            ),
            (
                format!("{base}{rule}groups_claim = \" groups\"\n"),
                vec!["console.oidc.groups_claim", "not \" groups\""],
            ),
        ] {
            let err = load_file(&file, &[]).unwrap_err().to_string();
            for part in expected {
                assert!(err.contains(part), "{part:?} not in {err}");
            }
        }
        // Off (no issuer), nothing of it is read.
        let off = "[console.oidc]\ngroups_claim = \"\"\nca_file = \"/nowhere.pem\"\n";
        load_file(off, &[]).unwrap();
    }

    /// The configuration's keys (dotted) and their values as the docs' table shows them.
    fn flatten_json(
        prefix: &str,
        value: &serde_json::Value,
        out: &mut std::collections::BTreeMap<String, String>,
    ) {
        match value {
            // A table key (`experiments.exchange_rates`) whose default is empty.
            serde_json::Value::Object(keys) if keys.is_empty() && !prefix.is_empty() => {
                out.insert(prefix.to_owned(), "{}".to_owned());
            }
            serde_json::Value::Object(keys) => {
                for (key, value) in keys {
                    let name = if prefix.is_empty() {
                        key.clone()
                    } else {
                        format!("{prefix}.{key}")
                    };
                    flatten_json(&name, value, out);
                }
            }
            serde_json::Value::Null => {
                out.insert(prefix.to_owned(), "unset".to_owned());
            }
            serde_json::Value::String(s) => {
                out.insert(prefix.to_owned(), s.clone());
            }
            other => {
                out.insert(prefix.to_owned(), other.to_string());
            }
        }
    }

    /// The environment variable of a key: `FLOWGATE__` and the key's parts, upper-case.
    fn variable(key: &str) -> String {
        format!("FLOWGATE__{}", key.to_uppercase().replace('.', "__"))
    }

    /// Issue 65: every numeric key is in [`BOUNDED`], and each is refused below and above its
    /// range (a negative number and one beyond its type's too) with the key, the value and the
    /// range, and accepted at both bounds; a configuration built in code is checked alike.
    #[test]
    fn every_numeric_key_is_refused_outside_its_range() {
        let mut defaults = std::collections::BTreeMap::new();
        flatten_json(
            "",
            &serde_json::to_value(Config::default()).unwrap(),
            &mut defaults,
        );
        let numeric: Vec<&String> = defaults
            .iter()
            .filter(|(key, value)| {
                value.parse::<f64>().is_ok() && *key != "events.jetstream.replicas"
            })
            .map(|(key, _)| key)
            .collect();
        let bounded: Vec<&str> = BOUNDED.iter().map(|b| b.key).collect();
        for key in &numeric {
            assert!(
                bounded.contains(&key.as_str()),
                "{key} has no range in BOUNDED"
            );
        }
        for key in &bounded {
            assert!(defaults.contains_key(*key), "{key} is not a key");
        }
        assert_eq!(bounded.len(), numeric.len(), "each key once");
        // What a bound needs beside it to load: the cross-key rules.
        let companions = |key: &str, at_max: bool| -> Vec<(&'static str, &'static str)> {
            match (key, at_max) {
                ("scheduler.interval_ms", true) => {
                    vec![("FLOWGATE__SCHEDULER__LEASE_SECONDS", "3600")]
                }
                ("scheduler.lease_seconds", false) => {
                    vec![("FLOWGATE__SCHEDULER__INTERVAL_MS", "50")]
                }
                ("events.retry_base_ms", true) => {
                    vec![("FLOWGATE__EVENTS__RETRY_MAX_MS", "600000")]
                }
                ("events.retry_max_ms", false) => vec![("FLOWGATE__EVENTS__RETRY_BASE_MS", "1")],
                _ => vec![],
            }
        };
        for bound in BOUNDED {
            let var = variable(bound.key);
            let below = match bound.min.checked_sub(1) {
                Some(n) => n.to_string(),
                None => "-1".to_owned(),
            };
            let above = (u128::from(bound.max) + 1).to_string();
            for value in [&below, &above] {
                let err = load_error(Environment::Development, &[(&var, value)]);
                let expected = format!(
                    "invalid configuration: {} = {value} is out of range: {} to {} (from `FLOWGATE__`",
                    bound.key, bound.min, bound.max
                );
                assert!(err.starts_with(&expected), "{var}={value}: {err}");
            }
            for (value, at_max) in [(bound.min, false), (bound.max, true)] {
                let value = value.to_string();
                let mut vars = companions(bound.key, at_max);
                vars.push((&var, &value));
                let config = load(Environment::Development, &vars)
                    .unwrap_or_else(|e| panic!("{var}={value}: {e}"));
                assert_eq!((bound.value)(&config).to_string(), value, "{var}");
            }
        }
        // docs/configuration.md gives each range in the key's row.
        let doc = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md"),
        )
        .unwrap();
        for bound in BOUNDED {
            let row = doc
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` |", bound.key)))
                .unwrap_or_else(|| panic!("{} has no row", bound.key));
            let range = format!("Range: {} to {}", bound.min, bound.max);
            assert!(
                row.contains(&range),
                "{}: {range:?} not in its row",
                bound.key
            );
        }
        // In code: the same check, the same message.
        let mut config = Config::default();
        config.stores.horizon_days = u32::MAX;
        assert_eq!(
            config
                .validate(Environment::Development)
                .unwrap_err()
                .to_string(),
            "invalid configuration: stores.horizon_days = 4294967295 is out of range: 1 to 3650"
        );
        let mut config = Config::default();
        config.console.failed_sign_ins_per_account = 0;
        assert_eq!(
            config.validate(Environment::Development).unwrap_err().to_string(),
            "invalid configuration: console.failed_sign_ins_per_account = 0 is out of range: 1 to 1000"
        );
        // From a file: where it came from.
        let err = load_file("[stores]\nhorizon_days = 0\n", &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("stores.horizon_days = 0 is out of range: 1 to 3650 (from TOML file")
                && err.contains("mine.toml"),
            "{err}"
        );
    }

    #[test]
    fn only_development_trusts_a_demo_app_store_root_by_default_and_production_never() {
        let development = load(Environment::Development, &[]).unwrap();
        assert_eq!(
            development.stores.demo_apple_signer,
            std::path::PathBuf::from("data/demo-apple-signer.pem")
        );
        for env in [Environment::Staging, Environment::Production] {
            let url = [(
                "FLOWGATE__DATABASE__URL",
                "postgres://db/fg?sslmode=require",
            )];
            let config = load(env, &url).unwrap();
            assert_eq!(config.stores.demo_apple_signer, std::path::PathBuf::new());
        }
        let err = load_error(
            Environment::Production,
            &[
                (
                    "FLOWGATE__DATABASE__URL",
                    "postgres://db/fg?sslmode=require",
                ),
                ("FLOWGATE__STORES__DEMO_APPLE_SIGNER", "data/demo.pem"),
            ],
        );
        assert!(
            err.contains("stores.demo_apple_signer") && err.contains("\"data/demo.pem\""),
            "{err}"
        );
    }

    /// Production refuses a database on another host without TLS, or with TLS it may skip
    /// (libpq's default `prefer`); `require` and the verifying modes start, and so does a
    /// database on this host.
    #[test]
    fn production_refuses_plain_text_to_another_host() {
        for url in [
            "postgres://db.example.com/fg",
            "postgres://db.example.com/fg?sslmode=prefer",
            "postgres://10.0.0.5/fg?sslmode=disable",
        ] {
            let err = load_error(Environment::Production, &[("FLOWGATE__DATABASE__URL", url)]);
            assert!(
                err.contains("database.url") && err.contains("sslmode=require or stronger"),
                "{url}: {err}"
            );
        }
        for url in [
            "postgres://db.example.com/fg?sslmode=require",
            "postgres://db.example.com/fg?sslrootcert=system",
            "postgres://localhost/fg",
            "postgres://127.0.0.1/fg?sslmode=disable",
            "postgres://%2Frun%2Fpostgresql/fg",
        ] {
            assert!(
                load(Environment::Production, &[("FLOWGATE__DATABASE__URL", url)]).is_ok(),
                "{url}"
            );
        }
        // Elsewhere the URL is the operator's business.
        assert!(load(
            Environment::Staging,
            &[("FLOWGATE__DATABASE__URL", "postgres://db.example.com/fg")]
        )
        .is_ok());
        // The TLS parameters' own rules hold in every environment's start-up (Store::connect),
        // and production checks them while loading.
        let err = load_error(
            Environment::Production,
            &[(
                "FLOWGATE__DATABASE__URL",
                "postgres://db.example.com/fg?sslmode=verify-ca",
            )],
        );
        assert!(err.contains("needs sslrootcert"), "{err}");
    }

    /// Retention must keep every event the service still accepts, with a day to spare for
    /// events that reach the store late (through the bus).
    #[test]
    fn retention_keeps_the_accepted_window() {
        let err = load_error(
            Environment::Development,
            &[("FLOWGATE__EVENTS__RETENTION_DAYS", "32")],
        );
        assert!(
            err.contains("events.retention_days")
                && err.contains("32 days")
                && err.contains("2678400"),
            "{err}"
        );
        for days in ["0", "33", "400"] {
            assert!(
                load(
                    Environment::Development,
                    &[("FLOWGATE__EVENTS__RETENTION_DAYS", days)]
                )
                .is_ok(),
                "{days}"
            );
        }
    }

    #[test]
    fn require_to_another_host_is_warned_about() {
        let warning = |url: &str| {
            DatabaseConfig {
                url: url.into(),
                ..DatabaseConfig::default()
            }
            .tls_warning()
        };
        let w = warning("postgres://fg:secret@db.example.com/fg?sslmode=require").unwrap();
        assert!(
            w.contains("does not authenticate")
                && w.contains("db.example.com")
                && !w.contains("secret"),
            "{w}"
        );
        assert_eq!(warning("postgres://127.0.0.1/fg?sslmode=require"), None);
        assert_eq!(
            warning("postgres://db.example.com/fg?sslmode=verify-full&sslrootcert=/ca.pem"),
            None
        );
        assert_eq!(warning("sqlite://data/fg.db"), None);
    }

    #[test]
    fn the_admin_token_is_checked_and_never_shown() {
        let token = "a-long-enough-admin-token-0123456789";
        let config = load(
            Environment::Development,
            &[("FLOWGATE__ADMIN__TOKEN", token)],
        )
        .unwrap();
        assert_eq!(config.admin.token, token);
        assert!(!format!("{config:?}").contains(token), "Debug redacts it");
        let weak = [
            "too-short",
            "has spaces in it but is long enough to pass",
            // 31 characters: one short.
            "a-long-enough-admin-token-01234",
            // Long, but of too few distinct characters.
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "abcabcabcabcabcabcabcabcabcabcabcabc",
            "0123456012345601234560123456012345601234560",
        ];
        for bad in weak {
            let err = load_error(Environment::Development, &[("FLOWGATE__ADMIN__TOKEN", bad)]);
            assert!(err.contains("admin.token") && !err.contains(bad), "{err}");
        }
        assert_eq!(Config::default().admin.token, "", "off by default");
    }

    #[test]
    fn a_console_session_lasts_between_a_minute_and_a_week() {
        let key = "FLOWGATE__ADMIN__CONSOLE_SESSION_SECONDS";
        assert_eq!(Config::default().admin.console_session_seconds, 28_800);
        let config = load(Environment::Development, &[(key, "60")]).unwrap();
        assert_eq!(config.admin.console_session_seconds, 60);
        for bad in ["59", "604801"] {
            let err = load_error(Environment::Development, &[(key, bad)]);
            assert!(
                err.contains("admin.console_session_seconds") && err.contains(bad),
                "{err}"
            );
        }
    }

    #[test]
    fn invalid_values_name_their_key() {
        // One setting each, refused with a message that holds every expected part: the key,
        // and where given the source and the offending value. Unknown keys are errors too,
        // also in `[events]` and `[sticky]`, which are shared out among their owners (the
        // sink, the bus, the HTTP adapter, the store): a key none of them reads is refused,
        // with the known key suggested.
        //
        // Every enumerated key (issue 49): a value outside its set is refused with the key, the
        // value quoted and the values allowed, a number too (serde's refusal of one named only
        // the enum's type), and a `log.level` that names no level (to `tracing`, `verbose` is a
        // target: every other line, errors included, would be off).
        let levels = "`trace`, `debug`, `info`, `warn`, `error`, `off`, or comma-separated";
        let refused: [(&str, &str, &[&str]); 23] = [
            (
                "FLOWGATE__EVENTS__BATCH_SIZE",
                "many",
                &["events.batch_size:", "FLOWGATE__"],
            ),
            ("FLOWGATE__SERVER__LISTEN", "localhost", &["server.listen"]),
            (
                "FLOWGATE__RATE_LIMIT__TRUSTED_PROXIES",
                "[\"not-an-ip\"]",
                &["rate_limit.trusted_proxies"],
            ),
            ("FLOWGATE__EVENTS__BATCH_SIZE", "0", &["events.batch_size"]),
            ("FLOWGATE__SERVER__LISTN", "127.0.0.1:1", &["listn"]),
            (
                "FLOWGATE__EVENTS__BATCHSIZE",
                "5",
                &[
                    "events.batchsize: unknown field",
                    "`batch_size`",
                    "FLOWGATE__",
                ],
            ),
            (
                "FLOWGATE__EVENTS__JETSTREAM__URLL",
                "nats://bus:4222",
                &["urll"],
            ),
            ("FLOWGATE__EVENTS", "5", &["events:"]),
            (
                "FLOWGATE__STICKY__READ_TIMEOUT",
                "50",
                &["sticky.read_timeout: unknown field", "`read_timeout_ms`"],
            ),
            (
                "FLOWGATE__STICKY__WRITE_QUEUE",
                "lots",
                &["sticky.write_queue:", "lots"],
            ),
            (
                "FLOWGATE__STICKY__WRITE_BATCH",
                "0",
                &["sticky.write_batch"],
            ),
            (
                "FLOWGATE__LOG__LEVEL",
                "verbose",
                &[
                    "log.level:",
                    "\"verbose\"",
                    "`verbose` names no level",
                    levels,
                ],
            ),
            (
                "FLOWGATE__LOG__LEVEL",
                "warnn",
                &["log.level:", "\"warnn\"", levels],
            ),
            (
                "FLOWGATE__LOG__LEVEL",
                "flowgate=verbose,info",
                &["log.level:", "`flowgate=verbose` names no level", levels],
            ),
            (
                "FLOWGATE__LOG__LEVEL",
                "flowgate",
                &["log.level:", "\"flowgate\"", levels],
            ),
            (
                "FLOWGATE__LOG__LEVEL",
                " , ",
                &["log.level:", "names no level", levels],
            ),
            (
                "FLOWGATE__LOG__FORMAT",
                "text",
                &["log.format:", "\"text\"", "`json`, `pretty`", "FLOWGATE__"],
            ),
            (
                "FLOWGATE__LOG__FORMAT",
                "1",
                &["log.format: 1 is not one of `json`, `pretty`"],
            ),
            (
                "FLOWGATE__EVENTS__SINK",
                "nats",
                &["events.sink:", "\"nats\"", "`store`, `jetstream`"],
            ),
            (
                "FLOWGATE__EVENTS__SINK",
                "1",
                &["events.sink: 1 is not one of `store`, `jetstream`"],
            ),
            (
                "FLOWGATE__EVENTS__ACK",
                "later",
                &["events.ack:", "\"later\"", "`stored`, `buffered`"],
            ),
            (
                "FLOWGATE__DATABASE__SQLITE_SYNCHRONOUS",
                "off",
                &[
                    "database.sqlite_synchronous:",
                    "\"off\"",
                    "`full`, `normal`",
                ],
            ),
            (
                "FLOWGATE__AUTH__KEY_ENVIRONMENT",
                "prod",
                &["auth.key_environment:", "\"prod\"", "`live`, `test`"],
            ),
        ];
        for (var, value, expected) in refused {
            let err = load_error(Environment::Development, &[(var, value)]);
            for part in expected {
                assert!(err.contains(part), "{var}={value}: {part:?} not in: {err}");
            }
        }
        // The enumerated keys checked elsewhere: the bus's replicas (a count NATS accepts) and
        // the two switches (a boolean).
        for (var, value, expected) in [
            (
                "FLOWGATE__EVENTS__JETSTREAM__REPLICAS",
                "2",
                &["events.jetstream.replicas", "1, 3 or 5", "got 2"][..],
            ),
            (
                "FLOWGATE__DATABASE__AUTO_MIGRATE",
                "yes",
                &["database.auto_migrate", "\"yes\"", "bool"],
            ),
            (
                "FLOWGATE__EVENTS__RECORD_RESOLVE_NO_FLOW",
                "on",
                &["events.record_resolve_no_flow", "\"on\"", "bool"],
            ),
        ] {
            let err = load_error(Environment::Development, &[(var, value)]);
            for part in expected {
                assert!(err.contains(part), "{var}={value}: {part:?} not in: {err}");
            }
        }
        let err = load_error(
            Environment::Development,
            &[
                ("FLOWGATE__EVENTS__BATCHSIZE", "5"),
                ("FLOWGATE__EVENTS__ACK_TIMEOUT", "5"),
            ],
        );
        assert!(
            err.contains("events.batchsize: unknown")
                && err.contains("events.ack_timeout: unknown"),
            "every unknown key is named: {err}"
        );
        // The owners' own keys are read.
        let jetstream = load(
            Environment::Development,
            &[("FLOWGATE__EVENTS__JETSTREAM__URL", "nats://bus:4222")],
        )
        .unwrap();
        assert_eq!(jetstream.events.jetstream.url, "nats://bus:4222");
        let sticky = load(
            Environment::Development,
            &[
                ("FLOWGATE__STICKY__READ_TIMEOUT_MS", "50"),
                ("FLOWGATE__STICKY__KEY_PREFIX", "fg"),
            ],
        )
        .unwrap();
        assert_eq!(
            sticky.sticky.settings.read_timeout,
            Duration::from_millis(50)
        );
        assert_eq!(sticky.sticky.key_prefix, "fg");
        let from_file = |contents: &str| {
            let dir = tempdir();
            let extra = dir.join("mine.toml");
            std::fs::write(&extra, contents).unwrap();
            let sources = Sources {
                dir,
                extra: Some(extra),
            };
            Config::load_with(Environment::Development, &sources, no_vars())
                .unwrap_err()
                .to_string()
        };
        let err = from_file("[events]\nsink = \"store\"\nack_timeout = 5000\n");
        assert!(
            err.contains("events.ack_timeout: unknown field") && err.contains("mine.toml"),
            "{err}"
        );
        let err = from_file("[events]\nack = \"later\"\n");
        assert!(
            err.contains("events.ack:") && err.contains("later") && err.contains("mine.toml"),
            "a sink key's error names its key and its file: {err}"
        );
        let err = load_error(
            Environment::Development,
            &[("FLOWGATE__CATALOG__REFRESH_INTERVAL_MS", "60000")],
        );
        assert!(err.contains("catalog.refresh_interval_ms"), "{err}");
    }

    /// Every value [`ENUMERATED`] allows loads, and its sets are the enums' variants (serde's
    /// refusal of an unknown one lists them); `log.level` takes levels in any case and
    /// `target=level` directives.
    #[test]
    fn enumerated_values_allowed_load() {
        fn variants<T: serde::de::DeserializeOwned>() -> String {
            serde_json::from_value::<T>(serde_json::json!("?"))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        }
        let serde_lists = [
            variants::<SqliteSync>(),
            variants::<KeyEnvironment>(),
            variants::<SinkKind>(),
            variants::<flowgate_analytics::AckMode>(),
            variants::<LogFormat>(),
        ];
        for ((key, allowed), serde_list) in ENUMERATED.iter().zip(serde_lists) {
            assert_eq!(
                serde_list.matches('`').count(),
                2 * (allowed.len() + 1),
                "{key}: {allowed:?} against {serde_list}"
            );
            for value in *allowed {
                assert!(
                    serde_list.contains(&format!("`{value}`")),
                    "{key}: {serde_list}"
                );
                let var = format!("FLOWGATE__{}", key.to_uppercase().replace('.', "__"));
                let environment = if *key == "auth.key_environment" && *value == "live" {
                    Environment::Staging
                } else {
                    Environment::Development
                };
                let vars = [
                    (var.as_str(), *value),
                    ("FLOWGATE__DATABASE__URL", "sqlite://data/x.db"),
                ];
                assert!(load(environment, &vars).is_ok(), "{var}={value}");
            }
        }
        for level in [
            "trace",
            "DEBUG",
            "Warn",
            "off",
            "flowgate=debug,info",
            "info,flowgate_http=trace",
            "flowgate[resolve]=debug",
        ] {
            let config = load(Environment::Development, &[("FLOWGATE__LOG__LEVEL", level)])
                .unwrap_or_else(|e| panic!("{level:?}: {e}"));
            assert_eq!(config.log.level, level);
        }
    }

    /// Loads the repository's config folder, then `file` as `--config`, then `vars`.
    fn load_file(contents: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let dir = tempdir();
        let extra = dir.join("mine.toml");
        std::fs::write(&extra, contents).unwrap();
        let mut result = None;
        figment::Jail::expect_with(|jail| {
            jail.clear_env();
            for (k, v) in vars {
                jail.set_env(k, v);
            }
            let sources = Sources {
                dir: repo_config_dir(),
                extra: Some(extra.clone()),
            };
            result = Some(Config::load(Environment::Development, &sources));
            Ok(())
        });
        result.unwrap_or_else(|| Err(ConfigError::Parse("jail did not run".into())))
    }

    /// Currency codes, the keys of `experiments.exchange_rates`, are read in any case from
    /// variables (whose names arrive lower-cased) and files, a later layer replacing an earlier
    /// one's rate whatever the case; a file giving one twice, or a rate for the reporting
    /// currency itself, is refused.
    #[test]
    fn exchange_rates_are_read_in_any_case() {
        let rates = |config: Config| {
            config
                .experiments
                .exchange_rates
                .into_iter()
                .collect::<Vec<_>>()
        };
        let config = load(
            Environment::Development,
            &[("FLOWGATE__EXPERIMENTS__EXCHANGE_RATES__EUR", "1.08")],
        )
        .unwrap();
        assert_eq!(rates(config), [("EUR".to_owned(), 1.08)]);
        let config = load_file(
            "[experiments.exchange_rates]\neur = 1.08\nGbp = 1.27\nJPY = 0.0067\n",
            &[],
        )
        .unwrap();
        assert_eq!(
            rates(config),
            [
                ("EUR".to_owned(), 1.08),
                ("GBP".to_owned(), 1.27),
                ("JPY".to_owned(), 0.0067)
            ]
        );
        let config = load_file(
            "[experiments.exchange_rates]\nEUR = 1.0\nGBP = 1.27\n",
            &[("FLOWGATE__EXPERIMENTS__EXCHANGE_RATES__EUR", "1.08")],
        )
        .unwrap();
        assert_eq!(
            rates(config),
            [("EUR".to_owned(), 1.08), ("GBP".to_owned(), 1.27)],
            "the variable replaces the file's rate"
        );
        let err = load_file("[experiments.exchange_rates]\neur = 1.08\nEUR = 1.1\n", &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("experiments.exchange_rates: EUR is given twice")
                && err.contains("\"EUR\" and \"eur\"")
                && err.contains("mine.toml"),
            "{err}"
        );
        for (file, vars) in [
            (
                "[experiments.exchange_rates]\nUSD = 2\nEUR = 1.08\n",
                &[][..],
            ),
            (
                "",
                &[("FLOWGATE__EXPERIMENTS__EXCHANGE_RATES__USD", "1")][..],
            ),
            (
                "[experiments]\ncurrency = \"EUR\"\n[experiments.exchange_rates]\neur = 1\n",
                &[][..],
            ),
        ] {
            let err = load_file(file, vars).unwrap_err().to_string();
            assert!(
                err.contains("experiments.exchange_rates:")
                    && err.contains("is the reporting currency (experiments.currency)"),
                "{file} {vars:?}: {err}"
            );
        }
        let err = load_file("[experiments.exchange_rates]\neuro = 1.08\n", &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("experiments.exchange_rates") && err.contains("\"EURO\""),
            "{err}"
        );
    }

    #[test]
    fn secrets_never_appear_in_messages_or_debug() {
        assert_eq!(
            redact_url("postgres://fg:s3cret@db:5432/fg?sslmode=require"),
            "postgres://fg:***@db:5432/fg?sslmode=require"
        );
        // User information without a password is hidden too: it may be a token (the shared
        // redaction, `flowgate_domain::secrets`).
        assert_eq!(redact_url("postgres://fg@db/fg"), "postgres://***@db/fg");
        assert_eq!(redact_url("sqlite://data/x.db"), "sqlite://data/x.db");
        let config = load(
            Environment::Development,
            &[("FLOWGATE__DATABASE__URL", "postgres://fg:s3cret@db/fg")],
        )
        .unwrap();
        assert!(!format!("{config:?}").contains("s3cret"));
        // A type error on the URL key quotes the value: redacted.
        let err = load_error(
            Environment::Development,
            &[(
                "FLOWGATE__DATABASE__URL",
                "[\"postgres://fg:s3cret@db/fg\"]",
            )],
        );
        assert!(!err.contains("s3cret"), "{err}");
        // A file that does not parse is quoted with its line, whatever its key.
        let dir = tempdir();
        let extra = dir.join("broken.toml");
        std::fs::write(&extra, "[database]\nurl = \"postgres://fg:s3cret@db/fg\n").unwrap();
        let sources = Sources {
            dir,
            extra: Some(extra),
        };
        let err = Config::load_with(Environment::Development, &sources, no_vars())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("broken.toml") && !err.contains("s3cret") && !err.contains("events"),
            "{err}"
        );
    }

    /// The documented table (docs/configuration.md) and the compiled defaults list the same
    /// keys with the same defaults.
    #[test]
    fn config_docs_match_the_code() {
        let doc = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md"),
        )
        .unwrap();
        let mut documented = std::collections::BTreeMap::new();
        for line in doc.lines() {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if cells.len() >= 4 && cells[1].starts_with('`') && cells[1].contains('.') {
                documented.insert(
                    cells[1].trim_matches('`').to_owned(),
                    cells[2].trim_matches('`').to_owned(),
                );
            }
        }
        let mut code = std::collections::BTreeMap::new();
        flatten_json(
            "",
            &serde_json::to_value(Config::default()).unwrap(),
            &mut code,
        );
        assert_eq!(
            documented, code,
            "docs/configuration.md must list every key with its default"
        );
    }
}
