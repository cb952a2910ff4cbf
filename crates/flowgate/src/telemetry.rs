//! Logging: JSON lines in production, readable lines in development (`log.format`), filtered
//! by `log.level`. Nothing here logs secrets: the database URL is redacted where it is logged,
//! keys are never logged, and user ids are not logged at info level.

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

/// Installs the global subscriber (once per process).
pub fn init(log: &LogConfig) {
    let filter = EnvFilter::try_new(&log.level).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match log.format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
        LogFormat::Pretty => builder.compact().try_init(),
    };
}
