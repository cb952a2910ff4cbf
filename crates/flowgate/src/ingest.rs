//! `flowgate ingest` (D16): consumes the event stream into the store, with an admin listener
//! for `/healthz`, `/readyz` and `/metrics`, until SIGTERM or Ctrl-C. Run as many processes as
//! the store can take: they share one durable consumer.
//!
//! On SIGTERM each loop finishes the batch it holds (stored, then acknowledged) and the process
//! exits; messages delivered and not acknowledged go to another process after `ack_wait`. A
//! SIGKILL loses nothing either: what was not acknowledged is delivered again and stored once.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::HttpServer;
use flowgate_domain::ports::{DeadLetterStore, EventStore};
use flowgate_http::{admin_app, AdminSource, AdminState, Check, ReadinessReport};
use flowgate_jetstream::{Bus, Ingest, IngestConfig, IngestStats};
use tokio::sync::watch;

use crate::cli::ExitCode;
use crate::config::Config;
use crate::health::{DeadLetterGauge, EventMaintenance};
use crate::scrape::{Collected, Scrape, Scraped};
use crate::terminal::errln;

/// How often the consumer's lag is read for `/metrics`.
const LAG_REFRESH: Duration = Duration::from_secs(5);

/// Runs ingest until a shutdown signal.
pub async fn ingest(config: Config) -> ExitCode {
    let store = match crate::adapters::open_store(&config).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let bus = match crate::adapters::bus(&config, "flowgate-ingest").await {
        Ok(bus) => bus,
        Err(code) => return code,
    };
    let sink = config.sink();
    let settings = IngestConfig {
        loops: sink.writers,
        // Messages hold up to 100 events: a write of about `ingest_batch_size` events.
        messages_per_write: config
            .events
            .jetstream
            .ingest_batch_size
            .div_ceil(100)
            .max(1),
        write_timeout: sink.write_timeout,
        fetch_wait: Duration::from_secs(1),
        retry_base: sink.backoff.base,
        retry_max: sink.backoff.max,
        unreadable_retry: flowgate_jetstream::UNREADABLE_RETRY,
    };
    let ingest = Ingest::new(
        bus.clone(),
        Arc::new(store.clone()) as Arc<dyn EventStore>,
        Arc::new(store.clone()) as Arc<dyn DeadLetterStore>,
        settings.clone(),
    );
    let stats = ingest.stats();
    let lag = Arc::new(LagGauge::default());
    lag.spawn_refresh(bus.clone());
    let dead_letters = Arc::new(DeadLetterGauge::default());
    dead_letters.spawn_refresh(store.clone());
    let maintenance = Arc::new(EventMaintenance::default());
    maintenance.spawn(store.clone(), config.event_retention());

    let Ok(admin_addr) = config.admin_addr() else {
        return ExitCode::Config;
    };
    let source = Arc::new(IngestAdmin {
        bus: bus.clone(),
        stats: stats.clone(),
        lag,
        dead_letters,
        maintenance,
    });
    let mut registry = prometheus_client::registry::Registry::default();
    crate::health::register_build_info(&mut registry);
    registry.register_collector(Box::new(Collected(source.clone())));
    let state = AdminState::new(Arc::new(registry), source);
    let admin = match HttpServer::new(move || admin_app(state.clone()))
        .workers(1)
        .disable_signals()
        .bind(admin_addr)
    {
        Ok(server) => server.run(),
        Err(e) => {
            tracing::error!(address = %admin_addr, error = %e, "cannot listen for the admin endpoints");
            return ExitCode::Failure;
        }
    };
    let admin_handle = admin.handle();
    let admin_task = tokio::spawn(admin);

    let (stop_tx, stop_rx) = watch::channel(false);
    let running = tokio::spawn(ingest.run(stop_rx));
    tracing::info!(
        admin = %admin_addr,
        database = %config.database.redacted_url(),
        nats = %bus.config().redacted_url(),
        stream = %bus.config().stream,
        consumer = %bus.config().consumer,
        loops = settings.loops,
        "flowgate is ingesting"
    );
    crate::serve::shutdown_signal().await;
    tracing::info!("shutdown: finishing the batches in hand");
    let _ = stop_tx.send(true);
    let result = running.await;
    admin_handle.stop(true).await;
    let _ = admin_task.await;
    match result {
        Ok(Ok(())) => {
            tracing::info!(
                stored = stats.events_stored.load(Ordering::Relaxed),
                "ingest stopped: every acknowledged message is stored"
            );
            ExitCode::Success
        }
        Ok(Err(e)) => {
            errln!("flowgate: {e}");
            ExitCode::Failure
        }
        Err(e) => {
            tracing::error!(error = %e, "the ingest loops failed");
            ExitCode::Failure
        }
    }
}

/// The consumer's lag, read in the background ([`Bus::lag`]).
#[derive(Debug, Default)]
struct LagGauge {
    pending: AtomicU64,
    unacknowledged: AtomicU64,
    known: AtomicBool,
}

impl LagGauge {
    fn spawn_refresh(self: &Arc<Self>, bus: Bus) {
        let gauge = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                if let Ok(lag) = bus.lag().await {
                    gauge.pending.store(lag.pending, Ordering::Relaxed);
                    gauge
                        .unacknowledged
                        .store(lag.unacknowledged, Ordering::Relaxed);
                    gauge.known.store(true, Ordering::Relaxed);
                }
                tokio::time::sleep(LAG_REFRESH).await;
            }
        });
    }
}

/// What the ingest process's admin listener reports.
struct IngestAdmin {
    bus: Bus,
    stats: Arc<IngestStats>,
    lag: Arc<LagGauge>,
    dead_letters: Arc<DeadLetterGauge>,
    maintenance: Arc<EventMaintenance>,
}

impl AdminSource for IngestAdmin {
    fn readiness(&self) -> ReadinessReport {
        let connected = self.bus.is_connected();
        let store_ok = !self.stats.store_failing.load(Ordering::Relaxed);
        ReadinessReport::new()
            .required(
                "bus",
                Check {
                    ok: connected,
                    detail: if connected {
                        format!(
                            "consuming stream {} as {}",
                            self.bus.config().stream,
                            self.bus.config().consumer
                        )
                    } else {
                        "disconnected from NATS; reconnecting".to_owned()
                    },
                },
            )
            .check(
                "store",
                Check {
                    ok: store_ok,
                    detail: if store_ok {
                        "writing".to_owned()
                    } else {
                        format!(
                            "writes are failing; messages wait in the stream: {}",
                            self.stats.last_error().unwrap_or_default()
                        )
                    },
                },
            )
    }
}

impl Scraped for IngestAdmin {
    fn scrape(&self, out: &mut Scrape<'_>) {
        let s = &self.stats;
        let counters: [(&str, &str, &AtomicU64); 10] = [
            ("flowgate_ingest_messages", "Messages received from the stream (redeliveries included).", &s.messages),
            ("flowgate_ingest_redeliveries", "Messages received again after an earlier delivery.", &s.redeliveries),
            ("flowgate_ingest_messages_acknowledged", "Messages acknowledged after their events were stored.", &s.messages_acknowledged),
            ("flowgate_ingest_events_stored", "Events written to the store.", &s.events_stored),
            ("flowgate_ingest_events_duplicate", "Events the store already had (a redelivery or an SDK retry).", &s.events_duplicate),
            ("flowgate_ingest_events_dead_lettered", "Events the store refused for good, set aside as dead letters (D17).", &s.events_dead_lettered),
            ("flowgate_ingest_messages_dead_lettered", "Messages set aside as dead letters: no release can read them (no format header, a corrupt body), or not stored after max_deliveries (D17).", &s.messages_dead_lettered),
            ("flowgate_ingest_write_failures", "Store writes that failed; their messages went back to the stream.", &s.write_failures),
            ("flowgate_ingest_fetch_failures", "Fetches from the stream that failed.", &s.fetch_failures),
            ("flowgate_ingest_writes", "Store writes that succeeded.", &s.writes),
        ];
        for (name, help, value) in counters {
            out.counter(name, help, value.load(Ordering::Relaxed));
        }
        out.labelled_counter(
            "flowgate_ingest_unreadable_messages",
            "Deliveries of messages in a format this release does not read (a later release's, D26), by format: handed back to the stream, never acknowledged nor set aside.",
            "format",
            &s.unreadable_messages(),
        );
        out.counter(
            "flowgate_ingest_write_seconds",
            "Time spent in successful store writes.",
            s.write_micros.load(Ordering::Relaxed) as f64 / 1e6,
        );
        out.gauge(
            "flowgate_ingest_store_healthy",
            "1 while the last store write succeeded.",
            u8::from(!s.store_failing.load(Ordering::Relaxed)),
        );
        out.gauge(
            "flowgate_jetstream_connected",
            "1 while connected to NATS.",
            u8::from(self.bus.is_connected()),
        );
        if self.lag.known.load(Ordering::Relaxed) {
            out.gauge(
                "flowgate_ingest_consumer_pending_messages",
                "Messages in the stream not yet delivered to ingest (the consumer's lag).",
                self.lag.pending.load(Ordering::Relaxed),
            );
            out.gauge(
                "flowgate_ingest_consumer_unacknowledged_messages",
                "Messages delivered to ingest and not yet acknowledged.",
                self.lag.unacknowledged.load(Ordering::Relaxed),
            );
        }
        self.dead_letters.write(out);
        self.maintenance.write(out);
        let config = self.bus.config();
        out.info(
            "flowgate_ingest_info",
            "The stream and consumer ingest reads.",
            &[("stream", &config.stream), ("consumer", &config.consumer)],
        );
    }
}
