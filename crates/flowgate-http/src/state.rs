//! What every request handler shares.

use std::net::IpAddr;

use flowgate_domain::ids::KeyId;
use std::sync::Arc;

use arc_swap::ArcSwap;
use flowgate_domain::ports::{Clock, EventSink};
use flowgate_domain::Catalog;

use crate::config::HttpConfig;
use crate::metrics::HttpMetrics;
use crate::ratelimit::RateLimiter;

/// The live catalog snapshot: swapped atomically by the refresher (D12), read lock-free by
/// every request.
pub type CatalogHandle = Arc<ArcSwap<Catalog>>;

/// Shared state of the public API.
pub struct ApiState {
    pub(crate) config: HttpConfig,
    /// The snapshot the refresher publishes; a request reads it through its worker
    /// (`Worker::snapshot`).
    pub(crate) published: CatalogHandle,
    pub(crate) sink: Arc<dyn EventSink>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) ip_limiter: RateLimiter<Option<IpAddr>>,
    pub(crate) key_limiter: RateLimiter<KeyId>,
    pub(crate) metrics: HttpMetrics,
    /// Flow schemas compressed once, for gzip resolve responses.
    pub(crate) compressed_flows: crate::response::CompressedFlows,
    /// The bound on `resolve_no_flow` events for unknown placements (D25).
    pub(crate) unknown_placements: crate::unknown_placements::UnknownPlacements,
    /// Stored assignments of sticky experiments (D23); `None`: sticky experiments bucket as
    /// non-sticky ones.
    pub(crate) sticky: Option<crate::sticky::StickyAssignments>,
    /// The store notification routes (D30); `None`: they answer 404.
    pub(crate) store_routes: Option<Arc<StoreRoutes>>,
}

impl ApiState {
    /// State for the API: configuration, the catalog handle, the analytics sink (D7, D8), the
    /// clock and the metrics to record into.
    pub fn new(
        config: HttpConfig,
        catalog: CatalogHandle,
        sink: Arc<dyn EventSink>,
        clock: Arc<dyn Clock>,
        metrics: HttpMetrics,
    ) -> Self {
        let rl = &config.rate_limit;
        let ip_limiter = RateLimiter::new(rl.per_ip_rps, rl.per_ip_burst);
        let key_limiter = RateLimiter::new(rl.per_key_rps, rl.per_key_burst);
        let unknown_placements = crate::unknown_placements::UnknownPlacements::new(
            config.unknown_placement_events_per_minute,
        );
        Self {
            config,
            published: catalog,
            sink,
            clock,
            ip_limiter,
            key_limiter,
            metrics,
            compressed_flows: crate::response::CompressedFlows::default(),
            unknown_placements,
            sticky: None,
            store_routes: None,
        }
    }

    /// Resolve reads and writes stored assignments through `sticky` (D23).
    pub fn with_sticky(mut self, sticky: crate::sticky::StickyAssignments) -> Self {
        self.sticky = Some(sticky);
        self
    }

    /// Serves the store notification routes (D30) into `routes.store`.
    pub fn with_store_routes(mut self, routes: StoreRoutes) -> Self {
        self.store_routes = Some(Arc::new(routes));
        self
    }

    /// The configuration.
    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    /// The metrics requests record into.
    pub fn metrics(&self) -> &HttpMetrics {
        &self.metrics
    }

    /// Call with a snapshot before it replaces the served one: what the API keeps per
    /// published version (each flow compressed for gzip clients) carries over to it where the
    /// version's bytes are unchanged, so a reload does not make requests compress every
    /// served flow again. Returns how many versions were carried over.
    pub fn prepare_snapshot(&self, next: &Catalog) -> usize {
        self.compressed_flows.carry_over(next)
    }
}

impl std::fmt::Debug for ApiState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiState")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What the store routes need: where notifications are kept and whose signatures are trusted.
pub struct StoreRoutes {
    /// The store (the database: notifications are few, each stored before it is answered).
    pub store: Arc<dyn flowgate_domain::ports::NotificationStore>,
    /// `stores.apple_root_certificates`, or Apple's root.
    pub apple_roots: crate::apple_jws::AppleRoots,
}

impl std::fmt::Debug for StoreRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreRoutes")
            .field("apple_roots", &self.apple_roots.fingerprints())
            .finish_non_exhaustive()
    }
}
