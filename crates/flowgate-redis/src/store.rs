//! [`RedisStickyStore`]: the [`StickyStore`] port (D23) on Redis.
//!
//! # What is stored where
//!
//! One Redis hash per assignment document:
//!
//! ```text
//! key:    <key_prefix>:<app id>:<attribute name>:<attribute value>
//!         flowgate:sticky:0192e3c4-…-000000000001:user_id:u1
//! fields: assignment keys ("<experiment key>__<bucket version>")
//! values: variant keys
//! ```
//!
//! The app id is the hyphenated UUID; attribute names are `user_id` or a catalog
//! `fallback_attribute` (`A-Za-z0-9_.-`, checked by `Catalog::build`), so the `:` after the name
//! is the first `:` after the app id and any value, `:` and `||` included, is unambiguous as the
//! key's rest. A name holding `:` would make two identifiers share a key: the store refuses it
//! ([`StoreError::Unstorable`]) rather than read or write another identifier's document. The
//! document's name and value are not stored in the hash: a read rebuilds them from the
//! identifier it asked for. Keys never expire; flowgate never deletes them.
//!
//! # Versions
//!
//! This layout is version 1 of the assignment documents, the only one so far; the versions
//! and what a reader keeps are said once, in the Versions section of
//! [`flowgate_domain::sticky`], and a golden sample is in `formats/flowgate.sticky/v1/`
//! (`redis-hashes.txt`). No version is stored in the hash, so the hashes every release wrote
//! are read as they are. A read keeps the fields that are assignments
//! ([`is_assignment`]: `<key>__<non-negative integer>` with a non-empty UTF-8 variant key) and
//! skips any other field (another name, a value that is not UTF-8) rather than failing the
//! read, so a later version can add fields (metadata) to the hash that this release leaves
//! alone; a hash with no assignment reads as no document. A key that is not a hash at all
//! still fails the read (`WRONGTYPE`).
//!
//! # Merge semantics
//!
//! A write is `HSET key field value [field value ...]`: the fields written take the new
//! variant, every other stored field is kept, and a missing hash is created. That is the port's
//! merge, done by Redis itself, so replicas writing the same user's document at the same time
//! never erase each other's assignments (no read-modify-write). The writes of a batch are sent
//! in order on one connection, which Redis runs in order: a later write of the same field wins.
//! A write with no assignments sends nothing.
//!
//! # Round trips
//!
//! A read is one pipeline of `HGETALL`, one per identifier (of every app of a combined read,
//! `read_sticky_many`), sent and answered in one round trip; a hash that does not exist comes
//! back empty and is left out of the result. A write batch is one pipeline of `HSET`, one per
//! write, in one round trip. Pipelines are not
//! transactions (`MULTI`): a failed batch may have stored part of its writes, which the port
//! allows, since writing again is harmless. An empty read or write makes no round trip.
//!
//! # When Redis is down
//!
//! Every call goes through one [`redis::aio::ConnectionManager`]: one multiplexed connection
//! shared by all callers of the store, replaced in the background when it breaks. While Redis
//! cannot be reached, the calls wait on the same reconnection attempt instead of each opening
//! its own (nothing piles up on a dead server), and fail with [`StoreError::Unavailable`] once
//! it has failed: `(reconnect_retries + 1)` connection attempts of at most `connect_timeout`
//! each, a few milliseconds in all when the connection is refused. A call that meets a refused
//! or dropped connection is tried once more, on the connection the manager has just started,
//! so the first call after Redis comes back succeeds instead of reporting the outage it
//! outlived. A command that gets no answer fails after `response_timeout`
//! ([`Outage::Timeout`](flowgate_domain::ports::Outage::Timeout)) and is not repeated. Nothing
//! is queued or buffered here: resolve treats a failed read as no stored assignment and the
//! sticky writer decides what to do with a failed batch (D23).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use flowgate_domain::ids::AppId;
use flowgate_domain::ports::{BoxFuture, StickyStore, StoreError};
use flowgate_domain::sticky::{is_assignment, StickyDoc, StickyDocs, StickyId, StickyWrite};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{FromRedisValue, Pipeline, Value};

use crate::error::{is_connection_loss, store_error};
use crate::options::RedisStickyOptions;
use flowgate_domain::secrets::{redact_url, Secrets};

/// The first wait between connection attempts; it doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(50);
/// The longest wait between connection attempts.
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// Sticky assignment documents in Redis, shared by every replica that points at the same Redis
/// and key prefix. Cheap to share (`Arc` it); all calls use one multiplexed connection.
pub struct RedisStickyStore {
    connection: ConnectionManager,
    key_prefix: String,
    /// The URL with its password redacted, for error messages and `Debug`.
    shown_url: String,
    secrets: Secrets,
}

impl fmt::Debug for RedisStickyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStickyStore")
            .field("url", &self.shown_url)
            .field("key_prefix", &self.key_prefix)
            .finish_non_exhaustive()
    }
}

impl RedisStickyStore {
    /// Connects to the Redis at `url` (`redis://[user:password@]host[:port][/db]`, or
    /// `redis+unix:///path?pass=...`; no TLS) and waits for the first connection.
    ///
    /// A URL that does not parse or settings that cannot work are [`StoreError::Config`]; a Redis
    /// that cannot be reached is [`StoreError::Unavailable`] within the bounds of `options`
    /// (a refused connection in milliseconds). No error text holds the URL's password.
    pub async fn connect(url: &str, options: RedisStickyOptions) -> Result<Self, StoreError> {
        let (client, config, store) = Self::prepare(url, options)?;
        let connection = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|e| store.error(&e, "connecting"))?;
        Ok(store.with(connection))
    }

    /// Like [`connect`](Self::connect), but does not wait for Redis: the first call opens the
    /// connection. For a process that must start while Redis is away; only the URL and
    /// `options` are checked here. Call it within a Tokio runtime.
    pub async fn connect_lazy(url: &str, options: RedisStickyOptions) -> Result<Self, StoreError> {
        let (client, config, store) = Self::prepare(url, options)?;
        let connection = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| store.error(&e, "connecting"))?;
        Ok(store.with(connection))
    }

    /// The key prefix in use.
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// The URL, password redacted (for logs).
    pub fn redacted_url(&self) -> &str {
        &self.shown_url
    }

    /// Checks the options and the URL; the store's parts but its connection.
    fn prepare(
        url: &str,
        options: RedisStickyOptions,
    ) -> Result<(redis::Client, ConnectionManagerConfig, Unconnected), StoreError> {
        options.validate()?;
        let unconnected = Unconnected {
            key_prefix: options.key_prefix,
            shown_url: redact_url(url),
            secrets: Secrets::of(url),
        };
        let client = redis::Client::open(url).map_err(|e| unconnected.error(&e, "opening"))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.response_timeout))
            .set_number_of_retries(options.reconnect_retries)
            .set_min_delay(MIN_BACKOFF)
            .set_max_delay(MAX_BACKOFF);
        Ok((client, config, unconnected))
    }

    /// The key of the document of `attribute_name` = `attribute_value` in `app`.
    fn key(
        &self,
        app: AppId,
        attribute_name: &str,
        attribute_value: &str,
    ) -> Result<String, StoreError> {
        if attribute_name.contains(':') {
            return Err(StoreError::Unstorable {
                detail: format!(
                    "sticky attribute name `{attribute_name}` contains `:`, which would make \
                     Redis keys ambiguous"
                ),
            });
        }
        Ok(format!(
            "{}:{app}:{attribute_name}:{attribute_value}",
            self.key_prefix
        ))
    }

    /// Sends `pipeline` and reads its answers, once more after a refused or dropped connection.
    /// `what` names the operation in an error (made only then: the read path allocates as
    /// little as it can).
    async fn run(
        &self,
        pipeline: &Pipeline,
        what: impl Fn() -> String,
    ) -> Result<Vec<Value>, StoreError> {
        let mut connection = self.connection.clone();
        let first = pipeline.query_async(&mut connection).await;
        let answer = match first {
            Err(e) if is_connection_loss(&e) => pipeline.query_async(&mut connection).await,
            other => other,
        };
        answer.map_err(|e| {
            store_error(
                &e,
                &format!("{} ({})", what(), self.shown_url),
                &self.secrets,
            )
        })
    }
}

/// A store's parts before it has a connection (errors of `connect` are made with them).
struct Unconnected {
    key_prefix: String,
    shown_url: String,
    secrets: Secrets,
}

impl Unconnected {
    fn error(&self, error: &redis::RedisError, what: &str) -> StoreError {
        store_error(
            error,
            &format!("{what} Redis at {}", self.shown_url),
            &self.secrets,
        )
    }

    fn with(self, connection: ConnectionManager) -> RedisStickyStore {
        RedisStickyStore {
            connection,
            key_prefix: self.key_prefix,
            shown_url: self.shown_url,
            secrets: self.secrets,
        }
    }
}

impl RedisStickyStore {
    /// The documents of each read's identifiers, all in one pipeline of `HGETALL`.
    async fn read_all(
        &self,
        reads: &[(AppId, &[StickyId])],
    ) -> Result<Vec<StickyDocs>, StoreError> {
        let count: usize = reads.iter().map(|(_, ids)| ids.len()).sum();
        if count == 0 {
            return Ok(vec![StickyDocs::new(); reads.len()]);
        }
        let mut pipeline = redis::pipe();
        for (app, ids) in reads {
            for id in *ids {
                pipeline.hgetall(self.key(*app, &id.attribute_name, &id.attribute_value)?);
            }
        }
        let what = || format!("reading {}", documents(count));
        let answers = self.run(&pipeline, what).await?;
        if answers.len() != count {
            return Err(StoreError::Other {
                detail: format!("{}: {} answers to {count} reads", what(), answers.len()),
            });
        }
        let mut answers = answers.into_iter();
        let mut out = Vec::with_capacity(reads.len());
        for (app, ids) in reads {
            let mut docs = StickyDocs::new();
            for (id, answer) in ids.iter().zip(answers.by_ref()) {
                let Some(assignments) = assignments(answer) else {
                    return Err(StoreError::Corrupt {
                        detail: format!(
                            "the sticky document of `{}` in app {app} is not a hash",
                            id.attribute_name
                        ),
                    });
                };
                if assignments.is_empty() {
                    continue;
                }
                docs.insert(StickyDoc {
                    attribute_name: id.attribute_name.clone(),
                    attribute_value: id.attribute_value.clone(),
                    assignments,
                });
            }
            out.push(docs);
        }
        Ok(out)
    }
}

impl StickyStore for RedisStickyStore {
    fn read_sticky<'a>(
        &'a self,
        app: AppId,
        ids: &'a [StickyId],
    ) -> BoxFuture<'a, Result<StickyDocs, StoreError>> {
        Box::pin(async move {
            let mut answers = self.read_all(&[(app, ids)]).await?;
            Ok(answers.pop().unwrap_or_default())
        })
    }

    /// Every read in one pipeline, one round trip; keys hold the app id, so each read finds
    /// its own app's documents only.
    fn read_sticky_many<'a>(
        &'a self,
        reads: &'a [(AppId, &'a [StickyId])],
    ) -> BoxFuture<'a, Result<Vec<StickyDocs>, StoreError>> {
        Box::pin(self.read_all(reads))
    }

    fn write_sticky<'a>(
        &'a self,
        writes: &'a [StickyWrite],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut pipeline = redis::pipe();
            let mut count = 0_usize;
            for write in writes.iter().filter(|w| !w.doc.assignments.is_empty()) {
                let doc = &write.doc;
                // HSET key field value [field value ...]: the map flattens to its pairs.
                pipeline
                    .cmd("HSET")
                    .arg(self.key(write.app_id, &doc.attribute_name, &doc.attribute_value)?)
                    .arg(&doc.assignments)
                    .ignore();
                count += 1;
            }
            if count == 0 {
                return Ok(());
            }
            self.run(&pipeline, || format!("writing {}", documents(count)))
                .await
                .map(drop)
        })
    }
}

/// The assignments of a document's hash (`HGETALL`'s answer, a map or a flat list of field
/// and value): its fields of the form of an assignment with a UTF-8 variant key
/// ([`is_assignment`]); every other field is skipped (version 1 of the documents, see the
/// module's Versions). `None` when the answer is not a hash's at all.
fn assignments(answer: Value) -> Option<BTreeMap<String, String>> {
    let pairs: Vec<(Value, Value)> = match answer {
        Value::Nil => Vec::new(),
        Value::Map(pairs) => pairs,
        Value::Array(items) if items.len().is_multiple_of(2) => {
            let mut items = items.into_iter();
            let mut pairs = Vec::with_capacity(items.len() / 2);
            while let (Some(field), Some(value)) = (items.next(), items.next()) {
                pairs.push((field, value));
            }
            pairs
        }
        _ => return None,
    };
    let mut assignments = BTreeMap::new();
    for (field, value) in pairs {
        let (Ok(field), Ok(value)) = (
            String::from_redis_value(field),
            String::from_redis_value(value),
        ) else {
            continue;
        };
        if is_assignment(&field, &value) {
            assignments.insert(field, value);
        }
    }
    Some(assignments)
}

/// `1 sticky document`, `2 sticky documents`: for error details.
fn documents(n: usize) -> String {
    if n == 1 {
        "1 sticky document".to_owned()
    } else {
        format!("{n} sticky documents")
    }
}
