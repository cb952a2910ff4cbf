//! Run-time state shared by the refresher, the admin listener and shutdown: store health, the
//! catalog's freshness, and the metrics read at scrape time.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowgate_analytics::Sink;
use flowgate_http::{AdminSource, CatalogHandle, Check, ReadinessReport};
use flowgate_store::Store;

/// How long without a successful store check before the store counts as failing.
const STORE_STALE_AFTER: Duration = Duration::from_secs(15);

/// Counters and health flags of the running service.
#[derive(Debug)]
pub struct Runtime {
    started: Instant,
    catalog_loaded: AtomicBool,
    /// Milliseconds since `started` of the last successful store check.
    store_ok_at_ms: AtomicU64,
    store_failing: AtomicBool,
    store_errors: AtomicU64,
    catalog_reloads: AtomicU64,
    catalog_build_errors: AtomicU64,
    /// Milliseconds since `started` when the snapshot was last confirmed current.
    catalog_fresh_at_ms: AtomicU64,
}

impl Default for Runtime {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            catalog_loaded: AtomicBool::new(false),
            store_ok_at_ms: AtomicU64::new(0),
            store_failing: AtomicBool::new(false),
            store_errors: AtomicU64::new(0),
            catalog_reloads: AtomicU64::new(0),
            catalog_build_errors: AtomicU64::new(0),
            catalog_fresh_at_ms: AtomicU64::new(0),
        }
    }
}

impl Runtime {
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

    /// A new snapshot was built and swapped in.
    pub fn catalog_reloaded(&self) {
        self.catalog_loaded.store(true, Ordering::Relaxed);
        self.catalog_reloads.fetch_add(1, Ordering::Relaxed);
        self.catalog_fresh();
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

    fn store_healthy(&self) -> bool {
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
    pub runtime: Arc<Runtime>,
    /// The live catalog.
    pub catalog: CatalogHandle,
    /// The analytics sink.
    pub sink: Arc<Sink>,
    /// The store, for its own counters.
    pub store: Store,
}

fn check(ok: bool, good: &str, bad: String) -> Check {
    Check {
        ok,
        detail: if ok { good.to_owned() } else { bad },
    }
}

fn metric(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    let sample = if kind == "counter" {
        format!("{name}_total")
    } else {
        name.to_owned()
    };
    let _ = write!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{sample} {value}\n"
    );
}

impl AdminSource for Admin {
    fn readiness(&self) -> ReadinessReport {
        let revision = self.catalog.load().revision();
        let stats = self.sink.stats();
        ReadinessReport {
            catalog: check(
                self.runtime.catalog_loaded(),
                &format!("revision {revision}"),
                "no catalog snapshot loaded yet".to_owned(),
            ),
            store: check(
                self.runtime.store_healthy(),
                "reachable",
                "the store is failing; serving the last catalog snapshot".to_owned(),
            ),
            sink: check(
                stats.store_healthy && !stats.shutting_down,
                "writing",
                if stats.shutting_down {
                    "shutting down".to_owned()
                } else {
                    "event writes are failing and being retried".to_owned()
                },
            ),
        }
    }

    fn extra_metrics(&self, out: &mut String) {
        let r = &self.runtime;
        let catalog = self.catalog.load();
        metric(
            out,
            "flowgate_catalog_revision",
            "gauge",
            "Store revision of the served catalog snapshot.",
            catalog.revision(),
        );
        metric(
            out,
            "flowgate_catalog_apps",
            "gauge",
            "Apps in the served catalog snapshot.",
            catalog.app_count(),
        );
        metric(
            out,
            "flowgate_catalog_age_seconds",
            "gauge",
            "Seconds since the snapshot was last confirmed to match the store.",
            r.catalog_age_secs(),
        );
        metric(
            out,
            "flowgate_catalog_reloads",
            "counter",
            "Catalog snapshots built and swapped in.",
            r.catalog_reloads.load(Ordering::Relaxed),
        );
        metric(
            out,
            "flowgate_catalog_build_errors",
            "counter",
            "Store contents that did not build into a catalog (the last good one kept serving).",
            r.catalog_build_errors.load(Ordering::Relaxed),
        );
        metric(
            out,
            "flowgate_log_lines_dropped",
            "counter",
            "Log lines dropped because the log writer fell behind (more than 128,000 waiting).",
            crate::telemetry::dropped_lines(),
        );
        metric(
            out,
            "flowgate_store_errors",
            "counter",
            "Failed store checks and catalog loads.",
            r.store_errors.load(Ordering::Relaxed),
        );
        metric(
            out,
            "flowgate_store_event_conflict_retries",
            "counter",
            "Event batches that held an already stored event_id and were written again with \
             ON CONFLICT (PostgreSQL; a steady rise means clients resend stored events).",
            self.store.event_conflict_retries(),
        );
        metric(
            out,
            "flowgate_store_healthy",
            "gauge",
            "1 while the store answers.",
            u8::from(r.store_healthy()),
        );
        let s = self.sink.stats();
        metric(
            out,
            "flowgate_sink_queue_capacity",
            "gauge",
            "Events the sink holds at most.",
            s.queue_capacity,
        );
        metric(
            out,
            "flowgate_sink_queue_depth",
            "gauge",
            "Events waiting in the queue.",
            s.queue_depth,
        );
        metric(
            out,
            "flowgate_sink_in_flight",
            "gauge",
            "Events being written or waiting for a retry.",
            s.in_flight,
        );
        metric(
            out,
            "flowgate_sink_oldest_event_age_seconds",
            "gauge",
            "Age of the oldest event not yet stored.",
            s.oldest_event_age.map_or(0.0, |d| d.as_secs_f64()),
        );
        metric(
            out,
            "flowgate_sink_events_enqueued",
            "counter",
            "Events accepted into the sink.",
            s.events_enqueued,
        );
        metric(
            out,
            "flowgate_sink_events_refused",
            "counter",
            "Events refused because the sink was full or shutting down.",
            s.events_refused,
        );
        metric(
            out,
            "flowgate_sink_events_written",
            "counter",
            "Events stored (duplicates included).",
            s.events_written,
        );
        metric(
            out,
            "flowgate_sink_events_duplicate",
            "counter",
            "Written events whose id was already stored.",
            s.events_duplicate,
        );
        metric(
            out,
            "flowgate_sink_batches_written",
            "counter",
            "Batches stored.",
            s.batches_written,
        );
        metric(
            out,
            "flowgate_sink_last_batch_size",
            "gauge",
            "Size of the last stored batch.",
            s.last_batch_size,
        );
        metric(
            out,
            "flowgate_sink_write_retries",
            "counter",
            "Failed write attempts (each retried).",
            s.write_retries,
        );
        metric(
            out,
            "flowgate_sink_write_latency_seconds_mean",
            "gauge",
            "Mean duration of successful store writes.",
            s.write_latency.mean().unwrap_or(0.0),
        );
        metric(
            out,
            "flowgate_sink_store_healthy",
            "gauge",
            "1 while event writes succeed.",
            u8::from(s.store_healthy),
        );
    }
}
