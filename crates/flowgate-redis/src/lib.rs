#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod error;
mod options;
pub mod store;

pub use flowgate_domain::secrets::redact_url;
pub use options::{RedisStickyOptions, DEFAULT_KEY_PREFIX};
pub use store::RedisStickyStore;
