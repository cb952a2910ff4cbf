//! The `flowgate` binary: configuration, command line and wiring; everything else lives in the
//! library crates (docs/architecture.md).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod adapters;
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
mod rollouts_cmd;
mod scheduler;
mod scrape;
mod serve;
mod telemetry;
mod terminal;
mod traffic;

use clap::Parser;

use crate::cli::{Cli, Command, EventsCommand, ExitCode};
use crate::config::{Config, Sources};
use crate::terminal::errln;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let sources = Sources {
        dir: config::default_dir(),
        extra: cli.config.clone(),
    };
    let config = match Config::load(cli.environment, &sources) {
        Ok(config) => config,
        Err(e) => {
            errln!("flowgate: {e}");
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
            errln!("flowgate: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(ExitCode::Failure as u8);
        }
    };
    let code = runtime.block_on(async move {
        match cli.command {
            Command::Serve => return serve::serve(config, cli.environment).await,
            Command::Ingest => return ingest::ingest(config).await,
            _ => {}
        }
        let store = match adapters::open_store(&config).await {
            Ok(store) => store,
            Err(code) => return code,
        };
        match cli.command {
            Command::Serve | Command::Ingest => ExitCode::Success,
            Command::Migrate { json } => commands::migrate(&store, &config, json).await,
            Command::Import {
                file,
                dry_run,
                author,
                apply_now,
                json,
            } => {
                let review = (config.catalog.require_review, author, apply_now);
                commands::import(&store, &file, dry_run, review, json).await
            }
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
            Command::Rollouts { command } => {
                rollouts_cmd::rollouts(&store, command, config.catalog.require_review).await
            }
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
