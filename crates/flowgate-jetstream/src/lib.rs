#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod codec;
mod config;
mod ingest;
mod publisher;
mod setup;

pub use config::{ConfigError, JetStreamConfig};
pub use ingest::{Ingest, IngestConfig, IngestStats, UNREADABLE_RETRY};
pub use publisher::Publisher;
pub use setup::{Bus, Ensured, Lag, SetupError, DUPLICATE_WINDOW};
