//! The service's health and counters, shared by the refresher, the admin listener and
//! shutdown: store health, the catalog's freshness, and the metrics read at scrape time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowgate_analytics::{AckMode, Sink};
use flowgate_http::{AdminSource, CatalogHandle, Check, ReadinessReport};
use flowgate_jetstream::Bus;
use flowgate_store::{EventRetention, Maintenance, Store};

use crate::config::SinkKind;
use crate::scrape::{Scrape, Scraped};

/// How long without a successful store check before the store counts as failing.
const STORE_STALE_AFTER: Duration = Duration::from_secs(15);

/// Counters and health flags of the running service.
#[derive(Debug)]
pub struct ServiceHealth {
    started: Instant,
    catalog_loaded: AtomicBool,
    /// The served snapshot came from the local cache (D20), not the store.
    catalog_cached: AtomicBool,
    catalog_cache_write_errors: AtomicU64,
    /// Milliseconds since `started` of the last successful store check.
    store_ok_at_ms: AtomicU64,
    store_failing: AtomicBool,
    store_errors: AtomicU64,
    catalog_reloads: AtomicU64,
    catalog_build_errors: AtomicU64,
    /// Milliseconds since `started` when the snapshot was last confirmed current.
    catalog_fresh_at_ms: AtomicU64,
}

impl Default for ServiceHealth {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            catalog_loaded: AtomicBool::new(false),
            catalog_cached: AtomicBool::new(false),
            catalog_cache_write_errors: AtomicU64::new(0),
            store_ok_at_ms: AtomicU64::new(0),
            store_failing: AtomicBool::new(false),
            store_errors: AtomicU64::new(0),
            catalog_reloads: AtomicU64::new(0),
            catalog_build_errors: AtomicU64::new(0),
            catalog_fresh_at_ms: AtomicU64::new(0),
        }
    }
}

impl ServiceHealth {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The store answered.
    pub fn store_ok(&self) {
        self.store_ok_at_ms.store(self.now_ms(), Ordering::Relaxed);
        self.store_failing.store(false, Ordering::Relaxed);
    }

    /// The store failed.
    pub fn store_failed(&self) {
        self.store_errors.fetch_add(1, Ordering::Relaxed);
        self.store_failing.store(true, Ordering::Relaxed);
    }

    /// A new snapshot was built from the store's catalog and swapped in.
    pub fn catalog_reloaded(&self) {
        self.catalog_loaded.store(true, Ordering::Relaxed);
        self.catalog_cached.store(false, Ordering::Relaxed);
        self.catalog_reloads.fetch_add(1, Ordering::Relaxed);
        self.catalog_fresh();
    }

    /// A snapshot was built from the local cache and swapped in (D20): serving, but not
    /// confirmed to match the store (its age keeps growing until the store answers).
    pub fn catalog_from_cache(&self) {
        self.catalog_loaded.store(true, Ordering::Relaxed);
        self.catalog_cached.store(true, Ordering::Relaxed);
        self.catalog_reloads.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the served snapshot came from the local cache.
    pub fn catalog_cached(&self) -> bool {
        self.catalog_cached.load(Ordering::Relaxed)
    }

    /// Writing the local cache failed (serving goes on; a restart during an outage would
    /// find an older file or none).
    pub fn catalog_cache_write_failed(&self) {
        self.catalog_cache_write_errors
            .fetch_add(1, Ordering::Relaxed);
    }

    /// The snapshot was confirmed to match the store.
    pub fn catalog_fresh(&self) {
        self.catalog_fresh_at_ms
            .store(self.now_ms(), Ordering::Relaxed);
    }

    /// The store holds a catalog that does not build (the last good one keeps serving).
    pub fn catalog_build_failed(&self) {
        self.catalog_build_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether a snapshot was ever loaded.
    pub fn catalog_loaded(&self) -> bool {
        self.catalog_loaded.load(Ordering::Relaxed)
    }

    pub(crate) fn store_healthy(&self) -> bool {
        let recent = self
            .now_ms()
            .saturating_sub(self.store_ok_at_ms.load(Ordering::Relaxed))
            < u64::try_from(STORE_STALE_AFTER.as_millis()).unwrap_or(u64::MAX);
        !self.store_failing.load(Ordering::Relaxed) && recent
    }

    fn catalog_age_secs(&self) -> f64 {
        (self
            .now_ms()
            .saturating_sub(self.catalog_fresh_at_ms.load(Ordering::Relaxed))) as f64
            / 1000.0
    }
}

/// What the admin listener reads: readiness and metrics beyond the HTTP registry.
pub struct Admin {
    /// Run-time state.
    pub health: Arc<ServiceHealth>,
    /// The live catalog.
    pub catalog: CatalogHandle,
    /// The analytics sink.
    pub sink: Arc<Sink>,
    /// Where the sink writes (D16) and when a request is answered (D15).
    pub sink_kind: SinkKind,
    /// See `sink_kind`.
    pub ack: AckMode,
    /// The event bus, with `events.sink = "jetstream"`.
    pub bus: Option<Bus>,
    /// Dead letters in the store, counted now and then ([`DeadLetterGauge`]).
    pub dead_letters: Arc<DeadLetterGauge>,
    /// The events table's maintenance.
    pub maintenance: Arc<EventMaintenance>,
    /// The store, for its own counters.
    pub store: Store,
    /// Whether the sticky assignment store answers (D23).
    pub sticky: Arc<flowgate_http::sticky::StickyHealth>,
}

/// The number of dead letters in the store (D17), refreshed in the background: a scrape never
/// waits for the database.
#[derive(Debug, Default)]
pub struct DeadLetterGauge {
    count: AtomicU64,
    known: AtomicBool,
}

impl DeadLetterGauge {
    /// How often the count is refreshed.
    pub const REFRESH: Duration = Duration::from_secs(15);

    /// Counts the dead letters every [`Self::REFRESH`] for as long as the process runs.
    pub fn spawn_refresh(self: &Arc<Self>, store: Store) {
        let gauge = Arc::clone(self);
        tokio::spawn(async move {
            use flowgate_domain::ports::DeadLetterStore;
            loop {
                if let Ok(Ok(n)) =
                    tokio::time::timeout(Duration::from_secs(5), store.count_dead_letters()).await
                {
                    gauge.count.store(n, Ordering::Relaxed);
                    gauge.known.store(true, Ordering::Relaxed);
                }
                tokio::time::sleep(Self::REFRESH).await;
            }
        });
    }

    /// Appends the gauge (nothing before the first count).
    pub fn write(&self, out: &mut Scrape<'_>) {
        if self.known.load(Ordering::Relaxed) {
            out.gauge(
                "flowgate_dead_letters",
                "Dead letters in the store waiting for a replay (D17; counted every 15 s).",
                self.count.load(Ordering::Relaxed),
            );
        }
    }
}

/// The events table's maintenance (D21): partitions created ahead of the events, retention.
/// Every process connected to the store runs it (the store serialises them).
#[derive(Debug, Default)]
pub struct EventMaintenance {
    partitions_created: AtomicU64,
    partitions_dropped: AtomicU64,
    rows_deleted: AtomicU64,
    errors: AtomicU64,
}

impl EventMaintenance {
    /// How often a round runs after a successful one.
    pub const INTERVAL: Duration = Duration::from_secs(3600);
    /// How soon a failed round is tried again.
    pub const RETRY: Duration = Duration::from_secs(60);

    /// Runs a round now and then every [`Self::INTERVAL`] for as long as the process runs.
    pub fn spawn(self: &Arc<Self>, store: Store, policy: EventRetention) {
        let stats = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                let pause = match store
                    .maintain_events(time::OffsetDateTime::now_utc(), policy)
                    .await
                {
                    Ok(done) => {
                        stats.record(done);
                        Self::INTERVAL
                    }
                    Err(error) => {
                        stats.errors.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(%error, "events table maintenance failed; trying again in a minute (a write creates a missing partition itself)");
                        Self::RETRY
                    }
                };
                tokio::time::sleep(pause).await;
            }
        });
    }

    fn record(&self, done: Maintenance) {
        self.partitions_created
            .fetch_add(u64::from(done.partitions_created), Ordering::Relaxed);
        self.partitions_dropped
            .fetch_add(u64::from(done.partitions_dropped), Ordering::Relaxed);
        self.rows_deleted
            .fetch_add(done.rows_deleted, Ordering::Relaxed);
        if done != Maintenance::default() {
            tracing::info!(
                partitions_created = done.partitions_created,
                partitions_dropped = done.partitions_dropped,
                rows_deleted = done.rows_deleted,
                "events table maintained"
            );
        }
    }

    /// Appends the counters.
    pub fn write(&self, out: &mut Scrape<'_>) {
        let counters: [(&str, &str, &AtomicU64); 4] = [
            ("flowgate_events_partitions_created", "Day partitions of the events table this process created ahead of their events (PostgreSQL, D21).", &self.partitions_created),
            ("flowgate_events_partitions_dropped", "Partitions of the events table this process dropped by retention (events.retention_days, PostgreSQL).", &self.partitions_dropped),
            ("flowgate_events_rows_deleted", "Events this process deleted by retention (events.retention_days, SQLite).", &self.rows_deleted),
            ("flowgate_events_maintenance_errors", "Events table maintenance rounds that failed (retried within a minute).", &self.errors),
        ];
        for (name, help, value) in counters {
            out.counter(name, help, value.load(Ordering::Relaxed));
        }
    }
}

fn check(ok: bool, good: &str, bad: String) -> Check {
    Check {
        ok,
        detail: if ok { good.to_owned() } else { bad },
    }
}

impl AdminSource for Admin {
    fn readiness(&self) -> ReadinessReport {
        let revision = self.catalog.load().revision();
        let stats = self.sink.stats();
        ReadinessReport::new()
            .required(
                "catalog",
                check(
                    self.health.catalog_loaded(),
                    &if self.health.catalog_cached() {
                        format!(
                            "revision {revision}, cached: read from the local cache file, \
                             the store has not answered since start"
                        )
                    } else {
                        format!("revision {revision}")
                    },
                    "no catalog snapshot loaded yet".to_owned(),
                ),
            )
            .check(
                "store",
                check(
                    self.health.store_healthy(),
                    "reachable",
                    "the store is failing; serving the last catalog snapshot".to_owned(),
                ),
            )
            .check("sink", self.sink_check(&stats))
            .check(
                "sticky",
                match self.sticky.problem() {
                    None => check(true, "reads answer", String::new()),
                    Some(cause) => check(
                        false,
                        "",
                        format!(
                            "the sticky assignment store is failing ({cause}); sticky \
                             experiments resolve as without stored assignments"
                        ),
                    ),
                },
            )
    }
}

impl Scraped for Admin {
    fn scrape(&self, out: &mut Scrape<'_>) {
        let r = &self.health;
        let catalog = self.catalog.load();
        out.gauge(
            "flowgate_catalog_revision",
            "Store revision of the served catalog snapshot.",
            catalog.revision(),
        );
        out.gauge(
            "flowgate_catalog_apps",
            "Apps in the served catalog snapshot.",
            catalog.app_count(),
        );
        out.gauge(
            "flowgate_catalog_age_seconds",
            "Seconds since the snapshot was last confirmed to match the store.",
            r.catalog_age_secs(),
        );
        out.gauge(
            "flowgate_catalog_cached",
            "1 while the served snapshot was read from the local cache file because the store \
             has not answered since start (D20).",
            u8::from(r.catalog_cached()),
        );
        out.counter(
            "flowgate_catalog_cache_write_errors",
            "Failed writes of the local catalog cache file (catalog.cache_path).",
            r.catalog_cache_write_errors.load(Ordering::Relaxed),
        );
        out.counter(
            "flowgate_catalog_reloads",
            "Catalog snapshots built and swapped in.",
            r.catalog_reloads.load(Ordering::Relaxed),
        );
        out.counter(
            "flowgate_catalog_build_errors",
            "Store contents that did not build into a catalog (the last good one kept serving).",
            r.catalog_build_errors.load(Ordering::Relaxed),
        );
        out.counter(
            "flowgate_log_lines_dropped",
            "Log lines dropped because the log writer fell behind (more than 128,000 waiting).",
            crate::telemetry::dropped_lines(),
        );
        out.counter(
            "flowgate_store_errors",
            "Failed store checks and catalog loads.",
            r.store_errors.load(Ordering::Relaxed),
        );
        out.counter(
            "flowgate_store_event_conflict_retries",
            "Event batches that held an already stored event_id and were written again with \
             ON CONFLICT (PostgreSQL; a steady rise means clients resend stored events).",
            self.store.event_conflict_retries(),
        );
        out.gauge(
            "flowgate_store_healthy",
            "1 while the store answers.",
            u8::from(r.store_healthy()),
        );
        self.scrape_sink(out);
    }
}

impl Admin {
    /// The sink's part of the scrape: where events go and how their writes fare (D15, D16).
    fn scrape_sink(&self, out: &mut Scrape<'_>) {
        let s = self.sink.stats();
        out.info(
            "flowgate_sink_info",
            "Where accepted events go (D16) and when a request is answered (D15).",
            &[
                ("sink", self.sink_kind.as_str()),
                ("ack", self.ack.as_str()),
            ],
        );
        if let Some(bus) = &self.bus {
            out.gauge(
                "flowgate_jetstream_connected",
                "1 while serve is connected to NATS (events.sink = jetstream).",
                u8::from(bus.is_connected()),
            );
        }
        out.counter(
            "flowgate_sink_events_dead_lettered",
            "Events the store refused for good, set aside as dead letters (D17).",
            s.events_dead_lettered,
        );
        out.counter("flowgate_sink_acks_timed_out",
            "Events requests answered 503 because their events were not stored within events.ack_timeout_ms (D15; the events stay queued).",
            s.acks_timed_out,
        );
        out.histogram(
            "flowgate_sink_ack_wait_seconds",
            "How long events requests waited for their events to be stored before their 202 (D15).",
            &s.ack_wait,
        );
        out.histogram(
            "flowgate_sink_write_latency_seconds",
            "Duration of successful batch writes (to the store, or publishes to the stream).",
            &s.write_latency,
        );
        self.dead_letters.write(out);
        self.maintenance.write(out);
        out.gauge(
            "flowgate_sink_queue_capacity",
            "Events the sink holds at most.",
            s.queue_capacity,
        );
        out.gauge(
            "flowgate_sink_queue_depth",
            "Events waiting in the queue.",
            s.queue_depth,
        );
        out.gauge(
            "flowgate_sink_in_flight",
            "Events being written or waiting for a retry.",
            s.in_flight,
        );
        out.gauge(
            "flowgate_sink_oldest_event_age_seconds",
            "Age of the oldest event not yet stored.",
            s.oldest_event_age.map_or(0.0, |d| d.as_secs_f64()),
        );
        out.counter(
            "flowgate_sink_events_enqueued",
            "Events accepted into the sink.",
            s.events_enqueued,
        );
        out.counter(
            "flowgate_sink_events_refused",
            "Events refused because the sink was full or shutting down.",
            s.events_refused,
        );
        out.counter(
            "flowgate_sink_events_written",
            "Events stored (duplicates included).",
            s.events_written,
        );
        out.counter(
            "flowgate_sink_events_duplicate",
            "Written events whose id was already stored.",
            s.events_duplicate,
        );
        out.counter(
            "flowgate_sink_batches_written",
            "Batches stored.",
            s.batches_written,
        );
        out.gauge(
            "flowgate_sink_last_batch_size",
            "Size of the last stored batch.",
            s.last_batch_size,
        );
        out.counter(
            "flowgate_sink_write_retries",
            "Failed write attempts (each retried).",
            s.write_retries,
        );
        out.gauge(
            "flowgate_sink_store_healthy",
            "1 while event writes succeed.",
            u8::from(s.store_healthy),
        );
    }
}

impl Admin {
    /// The sink's check: which sink, and whether it writes (D16).
    fn sink_check(&self, stats: &flowgate_analytics::SinkStats) -> Check {
        let kind = self.sink_kind.as_str();
        let connected = self.bus.as_ref().is_none_or(Bus::is_connected);
        let (ok, detail) = if stats.shutting_down {
            (false, format!("{kind}: shutting down"))
        } else if !connected {
            (
                false,
                format!("{kind}: disconnected from NATS; events requests get 503 until it is back"),
            )
        } else if !stats.store_healthy {
            (
                false,
                format!("{kind}: event writes are failing and being retried"),
            )
        } else {
            let doing = match (&self.bus, self.sink_kind) {
                (Some(bus), _) => format!("publishing to stream {}", bus.config().stream),
                (None, _) => "writing".to_owned(),
            };
            (true, format!("{kind}: {doing}"))
        };
        Check { ok, detail }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    commit: &'static str,
}

/// Registers `flowgate_build_info{version, commit} 1` (D26): which release a replica runs,
/// for dashboards of a rolling upgrade.
pub fn register_build_info(registry: &mut prometheus_client::registry::Registry) {
    let info = prometheus_client::metrics::family::Family::<
        BuildLabels,
        prometheus_client::metrics::gauge::Gauge,
    >::default();
    info.get_or_create(&BuildLabels {
        version: env!("CARGO_PKG_VERSION"),
        commit: crate::cli::COMMIT,
    })
    .set(1);
    registry.register(
        "flowgate_build_info",
        "The running release: its version and commit (always 1)",
        info,
    );
}
