//! Logging: JSON lines in production, readable lines in development (`log.format`), filtered
//! by `log.level`. Nothing here logs secrets: the database URL is redacted where it is logged,
//! keys are never logged, and user ids are not logged at info level.
//!
//! Lines are formatted on the thread that logs and written to stderr by a dedicated thread
//! (`tracing-appender`'s non-blocking writer, in batches of the lines waiting), so a request
//! never waits for a `write` system call, and a slow log consumer (a full pipe, a stalled
//! collector) cannot stall the request workers: with more than 128,000 lines waiting, new
//! lines are dropped and counted (`flowgate_log_lines_dropped_total`) instead.

use std::sync::OnceLock;

use tracing_appender::non_blocking::{ErrorCounter, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

static DROPPED: OnceLock<ErrorCounter> = OnceLock::new();

/// Installs the global subscriber (once per process). Keep the guard until the process exits:
/// dropping it writes the lines still waiting.
pub fn init(log: &LogConfig) -> WorkerGuard {
    let filter = EnvFilter::try_new(&log.level).unwrap_or_else(|_| EnvFilter::new("info"));
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(true)
        .thread_name("flowgate-log")
        // A 64 KiB buffer: the thread writes every line waiting in its queue, then flushes
        // (`tracing-appender` flushes whenever the queue is empty), so no line is held back,
        // but lines that arrive together leave in one `write` instead of one each.
        .finish(std::io::BufWriter::with_capacity(
            64 * 1024,
            std::io::stderr(),
        ));
    let _ = DROPPED.set(writer.error_counter());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    let _ = match log.format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
        LogFormat::Pretty => builder.compact().try_init(),
    };
    guard
}

/// Log lines dropped because the writer thread fell behind.
pub fn dropped_lines() -> usize {
    DROPPED.get().map_or(0, ErrorCounter::dropped_lines)
}
