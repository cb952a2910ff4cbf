#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod error;
mod options;
mod redact;
pub mod store;

pub use options::{RedisStickyOptions, DEFAULT_KEY_PREFIX};
pub use redact::redact_url;
pub use store::RedisStickyStore;
