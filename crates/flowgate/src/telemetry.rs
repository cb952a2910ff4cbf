//! Logging: JSON lines in production, readable lines in development (`log.format`), filtered
//! by `log.level`. Nothing here logs secrets: the database URL is redacted where it is logged,
//! keys are never logged, and user ids are not logged at info level.
//!
//! Lines are formatted on the thread that logs and written to stderr by a dedicated thread
//! (`tracing-appender`'s non-blocking writer, in batches of the lines waiting), so a request
//! never waits for a `write` system call, and a slow log consumer (a full pipe, a stalled
//! collector) cannot stall the request workers: with more than 128,000 lines waiting, new
//! lines are dropped and counted (`flowgate_log_lines_dropped_total`) instead.
//!
//! What clients can cause is not logged one line each (D25). The HTTP adapter samples its
//! request lines of client errors; here, actix-http's own warnings and errors (a malformed
//! request, a connection broken mid-request: one line each, at error level, whenever any client
//! likes) are counted instead of written, and a summary at warning level says how many there
//! were, at most once every [`SUMMARY_INTERVAL`], quoting the last one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_appender::non_blocking::{ErrorCounter, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

static DROPPED: OnceLock<ErrorCounter> = OnceLock::new();

/// How often, at most, the summary of actix-http's messages is written.
pub const SUMMARY_INTERVAL: Duration = Duration::from_secs(10);

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
    let written = filter_fn(|meta| !is_client_noise(meta));
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(ClientNoise);
    let fmt = tracing_subscriber::fmt::layer().with_writer(writer);
    let _ = match log.format {
        LogFormat::Json => registry
            .with(
                fmt.json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_filter(written),
            )
            .try_init(),
        LogFormat::Pretty => registry.with(fmt.compact().with_filter(written)).try_init(),
    };
    guard
}

/// Log lines dropped because the writer thread fell behind.
pub fn dropped_lines() -> usize {
    DROPPED.get().map_or(0, ErrorCounter::dropped_lines)
}

/// actix-http's warnings and errors: about one client's connection each.
fn is_client_noise(meta: &Metadata<'_>) -> bool {
    *meta.level() <= Level::WARN && meta.target().starts_with("actix_http")
}

/// actix-http's messages counted since the last summary, and the last one.
#[derive(Default)]
struct Noise {
    count: AtomicU64,
    last: Mutex<String>,
}

static NOISE: OnceLock<Noise> = OnceLock::new();

/// Counts [`is_client_noise`] events; the first one starts the thread that writes the
/// summaries.
struct ClientNoise;

impl<S: Subscriber> Layer<S> for ClientNoise {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        if !is_client_noise(event.metadata()) {
            return;
        }
        let mut started = false;
        let noise = NOISE.get_or_init(|| {
            started = true;
            Noise::default()
        });
        if started {
            let _ = std::thread::Builder::new()
                .name("flowgate-log-summary".into())
                .spawn(|| loop {
                    std::thread::sleep(SUMMARY_INTERVAL);
                    summarise();
                });
        }
        let mut message = String::new();
        event.record(&mut MessageText(&mut message));
        *noise.last.lock().unwrap_or_else(PoisonError::into_inner) = message;
        noise.count.fetch_add(1, Ordering::Relaxed);
    }
}

/// Writes the summary of actix-http's messages counted since the last one, if any (also called
/// as the process ends).
pub fn summarise() {
    let Some(noise) = NOISE.get() else { return };
    let count = noise.count.swap(0, Ordering::Relaxed);
    if count == 0 {
        return;
    }
    let last = noise
        .last
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    tracing::warn!(
        count,
        last = %last,
        "HTTP connections broken or malformed (actix-http's messages, summarised)"
    );
}

/// The `message` field of an event, as text.
struct MessageText<'a>(&'a mut String);

impl Visit for MessageText<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            use std::fmt::Write;
            let _ = write!(self.0, "{value:?}");
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        }
    }
}
