//! Settings of the HTTP adapter. The binary fills them from its configuration (D14); the
//! defaults are the decisions' values.

use flowgate_domain::events::ValidationLimits;
use flowgate_domain::keys::KeyEnvironment;
use std::time::Duration;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// Largest single or batch resolve body (a few identity fields and targeting attributes).
pub const DEFAULT_RESOLVE_BODY_LIMIT: usize = 64 * 1024;
/// Largest events body, decoded (D7: 256 KiB).
pub const DEFAULT_EVENTS_BODY_LIMIT: usize = 256 * 1024;
/// Most events in one request (D7).
pub const MAX_EVENTS_PER_REQUEST: usize = 100;
/// Most entries in the `errors` list of an events response (D7).
pub const MAX_EVENT_ERRORS: usize = 100;
/// `cache_ttl_seconds` of apps without their own (D3.9).
pub const DEFAULT_CACHE_TTL_SECONDS: u32 = 300;
/// `server.body_timeout_ms` (D25): the whole body must arrive within this.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// `server.body_min_bytes_per_sec` (D25).
pub const DEFAULT_BODY_MIN_BYTES_PER_SEC: u32 = 1024;
/// `events.unknown_placement_events_per_minute` (D25).
pub const DEFAULT_UNKNOWN_PLACEMENT_EVENTS_PER_MINUTE: u32 = 60;

/// HTTP adapter settings.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// The key environment this deployment accepts (D1): `live` in production.
    pub key_environment: KeyEnvironment,
    /// `cache_ttl_seconds` for apps without their own (D3.9).
    pub default_cache_ttl_seconds: u32,
    /// Body limit of resolve and batch resolve requests, in bytes.
    pub resolve_body_limit: usize,
    /// Body limit of events requests, in decoded bytes (D7).
    pub events_body_limit: usize,
    /// Rate limits (D10).
    pub rate_limit: RateLimitConfig,
    /// Record `resolve_no_flow` server events (D8).
    pub record_resolve_no_flow: bool,
    /// Event timestamp window (D7).
    pub event_limits: ValidationLimits,
    /// How fast a request body must arrive (D25).
    pub body_pace: BodyPace,
    /// `resolve_no_flow` events for unknown placements recorded per app and minute, each key
    /// at most once in that minute (D25); 0 records none.
    pub unknown_placement_events_per_minute: u32,
    /// How often the catalog is read again (`catalog.refresh_interval_ms`): OFREP's
    /// configuration asks providers to poll no faster (D32).
    pub catalog_refresh_interval: Duration,
}

/// How fast a request body must arrive (D25), so a client that declares a body and sends it
/// slowly, or never, holds nothing for long: the whole body within `timeout`, and after the
/// first second at least `min_bytes_per_sec` on average. A request that misses either gets
/// 408 `request_timeout` and its connection is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyPace {
    /// The whole body must be read within this, counted from the start of the read.
    pub timeout: Duration,
    /// Average rate the body must keep after the first second; 0: no rate check.
    pub min_bytes_per_sec: u32,
}

impl Default for BodyPace {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_BODY_TIMEOUT,
            min_bytes_per_sec: DEFAULT_BODY_MIN_BYTES_PER_SEC,
        }
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            key_environment: KeyEnvironment::Test,
            default_cache_ttl_seconds: DEFAULT_CACHE_TTL_SECONDS,
            resolve_body_limit: DEFAULT_RESOLVE_BODY_LIMIT,
            events_body_limit: DEFAULT_EVENTS_BODY_LIMIT,
            rate_limit: RateLimitConfig::default(),
            record_resolve_no_flow: true,
            event_limits: ValidationLimits::default(),
            body_pace: BodyPace::default(),
            unknown_placement_events_per_minute: DEFAULT_UNKNOWN_PLACEMENT_EVENTS_PER_MINUTE,
            catalog_refresh_interval: Duration::from_secs(1),
        }
    }
}

/// Rate limits (D10): GCRA per API key and per client IP. The binary reads it as the
/// `[rate_limit]` section of its configuration (D14).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitConfig {
    /// Sustained requests per second per key (default 2,000).
    pub per_key_rps: u32,
    /// Burst per key (default 4,000).
    pub per_key_burst: u32,
    /// Sustained requests per second per client IP (default 200).
    pub per_ip_rps: u32,
    /// Burst per client IP (default 400).
    pub per_ip_burst: u32,
    /// Peers whose `X-Forwarded-For` is believed: addresses or CIDR ranges, written as
    /// strings (`"10.0.0.0/8"`, `"192.0.2.7"`).
    #[serde(with = "proxies")]
    pub trusted_proxies: Vec<IpNet>,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            per_key_rps: 2_000,
            per_key_burst: 4_000,
            per_ip_rps: 200,
            per_ip_burst: 400,
            trusted_proxies: Vec::new(),
        }
    }
}

/// `trusted_proxies` as strings: a CIDR range, or an address (a range of one).
mod proxies {
    use ipnet::IpNet;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(list: &[IpNet], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(list.iter().map(|net| {
            if net.prefix_len() == net.max_prefix_len() {
                net.addr().to_string()
            } else {
                net.to_string()
            }
        }))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IpNet>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|s| {
                s.parse::<IpNet>()
                    .or_else(|_| s.parse::<std::net::IpAddr>().map(IpNet::from))
                    .map_err(|_| {
                        D::Error::custom(format!("`{s}` is not an IP address or CIDR range"))
                    })
            })
            .collect()
    }
}
