//! The event bus for the commands (D16): connect and check before `serve` publishes or
//! `ingest` consumes; create or update the stream in `migrate`.

use flowgate_jetstream::Bus;

use crate::cli::ExitCode;
use crate::config::Config;

/// Connects to NATS and checks the stream and consumer; on failure prints why (no secrets)
/// and returns the exit code.
pub async fn connect_checked(config: &Config, name: &str) -> Result<Bus, ExitCode> {
    let settings = &config.events.jetstream;
    let bus = Bus::connect(settings, name).await.map_err(|e| {
        eprintln!("flowgate: events.sink = \"jetstream\": {e}");
        ExitCode::Failure
    })?;
    bus.check().await.map_err(|e| {
        eprintln!("flowgate: events.sink = \"jetstream\": {e}");
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
