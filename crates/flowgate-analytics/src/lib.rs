#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod ack;
mod config;
mod queue;
mod sink;
mod stats;
mod writer;

pub use config::{AckMode, Backoff, ConfigError, SinkConfig, MAX_EVENTS_PER_REQUEST};
pub use queue::{RETRY_AFTER_MAX_SECS, RETRY_AFTER_MIN_SECS};
pub use sink::{DrainReport, Sink, StartError};
pub use stats::{SinkStats, BATCH_SIZE_BOUNDS, WRITE_LATENCY_BOUNDS};
