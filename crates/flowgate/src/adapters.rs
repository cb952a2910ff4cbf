//! The adapters the binary's commands use, each built by the adapter's own constructor from
//! its settings in the configuration: the store (with its migrations), the event bus (D16),
//! the results reader (D22) and the sticky store (D23). `serve` wires them with the rest, top
//! to bottom; on failure each prints why (no secrets) and returns the exit code.

use std::time::Duration;

use flowgate_jetstream::Bus;
use flowgate_store::{Backend, Store, StoreOptions};

use crate::cli::ExitCode;
use crate::config::{Config, ExperimentsConfig};
use crate::terminal::errln;

/// Connects to the configured store and applies migrations when `database.auto_migrate` says
/// so (by default on SQLite only).
pub(crate) async fn open_store(config: &Config) -> Result<Store, ExitCode> {
    let options = StoreOptions {
        max_connections: (config.database.max_connections > 0)
            .then_some(config.database.max_connections),
        // One COPY client per event writer (the sink's only caller of append_events).
        copy_connections: config.sink().writers,
        connect_timeout: Duration::from_millis(config.database.connect_timeout_ms),
        sqlite_synchronous: config.database.sqlite_synchronous.into(),
        ..StoreOptions::default()
    };
    if let Some(warning) = config.database.tls_warning() {
        tracing::warn!("{warning}");
    }
    let store = Store::connect(&config.database.url, options).map_err(|e| {
        errln!(
            "flowgate: cannot use database {}: {e}",
            config.database.redacted_url()
        );
        ExitCode::Failure
    })?;
    let auto = config
        .database
        .auto_migrate
        .unwrap_or(store.backend() == Backend::Sqlite);
    if auto {
        match store.migrate().await {
            Ok(applied) if !applied.is_empty() => {
                tracing::info!(count = applied.len(), "migrations applied")
            }
            Ok(_) => {}
            Err(e) => {
                errln!(
                    "flowgate: migrations failed on {}: {e}",
                    config.database.redacted_url()
                );
                return Err(ExitCode::Failure);
            }
        }
    }
    Ok(store)
}

/// The store experiment results are read from (D22): `experiments.database_url` (a replica)
/// or the main database, on a small pool of its own, each read under
/// `experiments.query_timeout_ms`.
pub(crate) fn results_reader(config: &Config) -> Result<flowgate_store::ResultsReader, ExitCode> {
    let x: &ExperimentsConfig = &config.experiments;
    let replica = !x.database_url.trim().is_empty();
    let url = if replica {
        x.database_url.trim()
    } else {
        config.database.url.trim()
    };
    let options = StoreOptions {
        max_connections: Some(x.max_connections),
        copy_connections: 0,
        connect_timeout: Duration::from_millis(config.database.connect_timeout_ms),
        sqlite_synchronous: config.database.sqlite_synchronous.into(),
        ..StoreOptions::default()
    };
    let store = Store::connect(url, options).map_err(|e| {
        errln!(
            "flowgate: cannot use the results database {}: {e}",
            flowgate_store::redact_url(url)
        );
        ExitCode::Failure
    })?;
    Ok(flowgate_store::ResultsReader::new(
        store,
        Duration::from_millis(x.query_timeout_ms),
        x.max_connections,
    ))
}

/// Where sticky experiments' assignments are kept (D23): the Redis of `sticky.redis_url`
/// (connected lazily, so the service starts while Redis is away), or the main database.
pub(crate) async fn sticky_store(
    config: &Config,
    store: &Store,
) -> Result<std::sync::Arc<dyn flowgate_domain::ports::StickyStore>, ExitCode> {
    let url = config.sticky.redis_url.trim();
    if url.is_empty() {
        return Ok(std::sync::Arc::new(store.clone()));
    }
    let options = flowgate_redis::RedisStickyOptions {
        key_prefix: config.sticky.key_prefix.clone(),
        ..flowgate_redis::RedisStickyOptions::default()
    };
    match flowgate_redis::RedisStickyStore::connect_lazy(url, options).await {
        Ok(redis) => Ok(std::sync::Arc::new(redis)),
        Err(e) => {
            errln!("flowgate: cannot use sticky.redis_url: {e}");
            Err(ExitCode::Config)
        }
    }
}

/// The event bus (D16) of `events.jetstream`, connected as `name`, its stream and consumer
/// checked: before `serve` publishes or `ingest` consumes.
pub(crate) async fn bus(config: &Config, name: &str) -> Result<Bus, ExitCode> {
    let settings = &config.events.jetstream;
    let bus = Bus::connect(settings, name).await.map_err(|e| {
        errln!("flowgate: events.sink = \"jetstream\": {e}");
        ExitCode::Failure
    })?;
    bus.check().await.map_err(|e| {
        errln!("flowgate: events.sink = \"jetstream\": {e}");
        ExitCode::Failure
    })?;
    tracing::info!(
        url = %settings.redacted_url(),
        stream = %settings.stream,
        consumer = %settings.consumer,
        replicas = settings.replicas,
        "event bus checked"
    );
    Ok(bus)
}
