#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod audit;
mod catalog;
mod changes;
mod copy;
mod db;
mod dead_letters;
mod error;
mod event_columns;
mod events;
mod history;
mod keys;
mod options;
mod people;
mod results;
mod retention;
mod rollouts;
pub mod schema;
mod sticky;
mod store;
mod store_notifications;
mod tls;
pub mod types;

pub use catalog::CATALOG_CHANNEL;
pub use events::SQLITE_CHUNK;
pub use flowgate_domain::secrets::redact_url;
pub use history::ImportRecord;
pub use options::{SqliteSynchronous, StoreOptions};
pub use results::ResultsReader;
pub use retention::{EventRetention, Maintenance, PARTITION_DAYS_AHEAD, SQLITE_DELETE_BATCH};
pub use store::{Backend, Store, POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS};
pub use tls::{url_tls, TlsMode, UrlTls};
