//! The `flowgate` binary: configuration, command line and wiring; everything else lives in the
//! library crates (docs/architecture.md).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod bus;
mod cache;
mod catalog_cmd;
mod changes_cmd;
mod cli;
mod commands;
mod config;
mod console;
mod demo;
mod experiments;
mod explain;
mod health;
mod heap;
mod ingest;
mod people_cmd;
mod refresh;
mod rollouts;
mod rollouts_cmd;
mod scheduler;
mod schedules;
mod scrape;
mod serve;
mod telemetry;
mod traffic;

use std::time::Duration;

use clap::Parser;
use flowgate_store::{Backend, Store, StoreOptions};

use crate::cli::{Cli, Command, EventsCommand, ExitCode};
use crate::config::ExperimentsConfig;
use crate::config::{Config, Sources};

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
        eprintln!(
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
                eprintln!(
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
        eprintln!(
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
            eprintln!("flowgate: cannot use sticky.redis_url: {e}");
            Err(ExitCode::Config)
        }
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let sources = Sources {
        dir: config::default_dir(),
        extra: cli.config.clone(),
    };
    let config = match Config::load(cli.environment, &sources) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("flowgate: {e}");
            return std::process::ExitCode::from(ExitCode::Config as u8);
        }
    };
    // Held until `main` returns, so the log lines still queued are written.
    let _log_guard = telemetry::init(&config.log);
    // A multi-thread runtime: diesel-async's migration harness blocks in place, which a
    // current-thread runtime forbids (P19 in docs/decisions.md); actix-web runs inside it.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("flowgate: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(ExitCode::Failure as u8);
        }
    };
    let code = runtime.block_on(async move {
        match cli.command {
            Command::Serve => return serve::serve(config, cli.environment).await,
            Command::Ingest => return ingest::ingest(config).await,
            _ => {}
        }
        let store = match open_store(&config).await {
            Ok(store) => store,
            Err(code) => return code,
        };
        match cli.command {
            Command::Serve | Command::Ingest => ExitCode::Success,
            Command::Migrate { json } => commands::migrate(&store, &config, json).await,
            Command::Import {
                file,
                dry_run,
                json,
            } => commands::import(&store, &file, dry_run, json).await,
            Command::Explain {
                app,
                placement,
                body,
                json,
            } => explain::explain(&store, &config, &app, &placement, &body, json).await,
            Command::Catalog { command } => catalog_cmd::catalog(&store, command).await,
            Command::Experiments { command } => {
                experiments::experiments(&store, &config, command).await
            }
            Command::Keys { command } => commands::keys(&store, command).await,
            Command::Users { command } => people_cmd::users(&store, &config, command).await,
            Command::Audit { command } => people_cmd::audit(&store, command).await,
            Command::Rollouts { command } => rollouts_cmd::rollouts(&store, command).await,
            Command::Changes { command } => changes_cmd::changes(&store, command).await,
            Command::Demo {
                json,
                traffic: None,
            } => commands::demo(&store, &config, json).await,
            Command::Demo {
                json,
                traffic: Some(users),
            } => traffic::traffic(&store, &config, users, json).await,
            Command::Events {
                command: EventsCommand::DeadLetters { command },
            } => commands::dead_letters(&store, command).await,
        }
    });
    // What was counted since the last summary is written before the process exits.
    telemetry::summarise();
    std::process::ExitCode::from(code as u8)
}
