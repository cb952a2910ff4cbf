//! Connecting, and the stream and consumer the bus needs (D16): `flowgate migrate` creates or
//! updates them ([`Bus::ensure`]); `serve` and `ingest` refuse to start when they are missing
//! or misconfigured ([`Bus::check`]).
//!
//! The stream keeps messages on disk (`file` storage), with the configured replicas, and uses
//! interest retention: a message is removed once every durable consumer acknowledged it (the
//! ingest consumer, and any other a warehouse loader creates), so the stream holds what is not
//! yet stored, not history. Because a stream with interest retention drops what is published
//! while no consumer exists, the ingest consumer is created by `migrate`, before `serve`
//! publishes, and `serve` checks that it exists. Limits set by an operator discard new
//! messages (the publisher then gets errors and requests a 503), never unconsumed old ones.

use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use async_nats::jetstream::stream::{self, DiscardPolicy, RetentionPolicy, StorageType};
use async_nats::jetstream::{self, ErrorCode};

use crate::config::JetStreamConfig;

/// The stream's duplicate window: a message published again within it (a retry after a lost
/// acknowledgement, same `Nats-Msg-Id`) is stored once.
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// Most messages delivered to ingest and not yet acknowledged, across its processes.
const MAX_ACK_PENDING: i64 = 20_000;

/// Why the bus cannot be used; each message says what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    /// The server cannot be reached (or refused the credentials).
    #[error("cannot reach NATS at {url}: {reason}")]
    Unreachable {
        /// The URL, password redacted.
        url: String,
        /// What the client said.
        reason: String,
    },
    /// The server runs without JetStream.
    #[error("NATS at {url} has no JetStream: start nats-server with -js (or jetstream {{}} in its configuration)")]
    NoJetStream {
        /// The URL, password redacted.
        url: String,
    },
    /// The stream or the consumer does not exist.
    #[error(
        "{0} does not exist: run `flowgate migrate` with events.sink = \"jetstream\" to create it"
    )]
    Missing(String),
    /// The stream or consumer exists with settings that break a promise.
    #[error("{0}")]
    Misconfigured(String),
    /// A JetStream API call failed.
    #[error("JetStream {call} failed: {reason}")]
    Api {
        /// What was asked.
        call: &'static str,
        /// The server's or client's answer.
        reason: String,
    },
}

/// A connection to NATS with its JetStream context and settings.
#[derive(Clone, Debug)]
pub struct Bus {
    client: async_nats::Client,
    js: jetstream::Context,
    config: JetStreamConfig,
}

/// What [`Bus::ensure`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ensured {
    /// Created now.
    Created,
    /// Existed; settings brought in line with the configuration.
    Updated,
    /// Existed as configured.
    Unchanged,
}

impl Ensured {
    /// `created`, `updated` or `unchanged`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Ensured::Created => "created",
            Ensured::Updated => "updated",
            Ensured::Unchanged => "unchanged",
        }
    }
}

fn is_code(error: &async_nats::jetstream::Error, code: ErrorCode) -> bool {
    error.error_code() == code
}

impl Bus {
    /// Connects to `config.url` (at most `config.connect_timeout_ms`), named `name` on the
    /// server (`flowgate-serve`, `flowgate-ingest`). The client reconnects on its own after.
    pub async fn connect(config: &JetStreamConfig, name: &str) -> Result<Bus, SetupError> {
        let url = config.redacted_url();
        let options = async_nats::ConnectOptions::new()
            .name(name)
            .connection_timeout(config.connect_timeout())
            .request_timeout(Some(config.connect_timeout()))
            // Keep trying for ever once connected: the publisher's writes fail meanwhile and
            // requests get 503 (D15), nothing is dropped.
            .max_reconnects(None);
        let servers: Vec<&str> = config.url.split(',').map(str::trim).collect();
        let client = tokio::time::timeout(
            config.connect_timeout(),
            options.connect(servers.as_slice()),
        )
        .await
        .map_err(|_| SetupError::Unreachable {
            url: url.clone(),
            reason: format!("no answer within {} ms", config.connect_timeout_ms),
        })?
        .map_err(|e| SetupError::Unreachable {
            url: url.clone(),
            reason: e.to_string(),
        })?;
        let js = jetstream::ContextBuilder::new()
            .timeout(config.connect_timeout())
            .build(client.clone());
        // The account's JetStream information, read raw: only whether it answers an error
        // matters, and the answer's shape differs between server versions.
        let answer = client
            .request("$JS.API.INFO", bytes::Bytes::new())
            .await
            .map_err(|e| match e.kind() {
                async_nats::RequestErrorKind::NoResponders => {
                    SetupError::NoJetStream { url: url.clone() }
                }
                _ => SetupError::Api {
                    call: "account info",
                    reason: e.to_string(),
                },
            })?;
        let info: serde_json::Value = serde_json::from_slice(&answer.payload).unwrap_or_default();
        if let Some(error) = info.get("error") {
            let text = error.to_string();
            return Err(if text.contains("not enabled") {
                SetupError::NoJetStream { url }
            } else {
                SetupError::Api {
                    call: "account info",
                    reason: text,
                }
            });
        }
        Ok(Bus {
            client,
            js,
            config: config.clone(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &JetStreamConfig {
        &self.config
    }

    /// The JetStream context.
    pub(crate) fn context(&self) -> &jetstream::Context {
        &self.js
    }

    /// The NATS client (its connection state, its statistics).
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// True while the client is connected to a server.
    pub fn is_connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    fn wanted_stream(&self) -> stream::Config {
        stream::Config {
            name: self.config.stream.clone(),
            description: Some("flowgate analytics events (D16), read by flowgate ingest".into()),
            subjects: vec![self.config.subject.clone()],
            retention: RetentionPolicy::Interest,
            storage: StorageType::File,
            num_replicas: self.config.replicas,
            discard: DiscardPolicy::New,
            duplicate_window: DUPLICATE_WINDOW,
            ..stream::Config::default()
        }
    }

    fn wanted_consumer(&self) -> pull::Config {
        pull::Config {
            durable_name: Some(self.config.consumer.clone()),
            description: Some("flowgate ingest: stores events, acknowledges after commit".into()),
            deliver_policy: DeliverPolicy::All,
            ack_policy: AckPolicy::Explicit,
            ack_wait: self.config.ack_wait(),
            // Unlimited, and `check` refuses any other value: the server never stops delivering a
            // message. Ingest enforces events.jetstream.max_deliveries itself for messages it
            // reads (a dead letter), and a message in a format it does not read (a later
            // release's, D26) must be delivered again until a release that reads it takes it;
            // with a finite limit the server would stop delivering it, stranded for good.
            max_deliver: -1,
            max_ack_pending: MAX_ACK_PENDING,
            num_replicas: 0,
            ..pull::Config::default()
        }
    }

    /// Creates the stream and the ingest consumer, or brings existing ones in line with the
    /// configuration (`flowgate migrate`). Storage and retention of an existing stream cannot
    /// change: such a stream is reported, not replaced.
    pub async fn ensure(&self) -> Result<(Ensured, Ensured), SetupError> {
        let wanted = self.wanted_stream();
        let stream_done = match self.js.get_stream(&self.config.stream).await {
            Ok(mut existing) => {
                let info = existing.info().await.map_err(|e| SetupError::Api {
                    call: "stream info",
                    reason: e.to_string(),
                })?;
                let have = info.config.clone();
                if have.storage != StorageType::File {
                    return Err(SetupError::Misconfigured(format!(
                        "stream {} keeps messages in memory: a restart of NATS would lose acknowledged events; delete it (nats stream rm {}) and run `flowgate migrate` again",
                        self.config.stream, self.config.stream
                    )));
                }
                let mut update = have.clone();
                update.subjects.clone_from(&wanted.subjects);
                update.num_replicas = wanted.num_replicas;
                update.discard = wanted.discard;
                update.duplicate_window = wanted.duplicate_window;
                update.description.clone_from(&wanted.description);
                if update == have {
                    Ensured::Unchanged
                } else {
                    self.js
                        .update_stream(&update)
                        .await
                        .map_err(|e| SetupError::Api {
                            call: "stream update",
                            reason: e.to_string(),
                        })?;
                    Ensured::Updated
                }
            }
            Err(e) if stream_missing(&e) => {
                self.js
                    .create_stream(wanted)
                    .await
                    .map_err(|e| SetupError::Api {
                        call: "stream create",
                        reason: e.to_string(),
                    })?;
                Ensured::Created
            }
            Err(e) => {
                return Err(SetupError::Api {
                    call: "stream lookup",
                    reason: e.to_string(),
                })
            }
        };
        let stream =
            self.js
                .get_stream(&self.config.stream)
                .await
                .map_err(|e| SetupError::Api {
                    call: "stream lookup",
                    reason: e.to_string(),
                })?;
        let consumer_done = match stream.consumer_info(&self.config.consumer).await {
            Ok(info) => {
                let wanted = self.wanted_consumer();
                let have = &info.config;
                let same = have.ack_policy == wanted.ack_policy
                    && have.ack_wait == wanted.ack_wait
                    && have.max_deliver == wanted.max_deliver
                    && have.max_ack_pending == wanted.max_ack_pending
                    && have.deliver_subject.is_none();
                if same {
                    Ensured::Unchanged
                } else {
                    stream
                        .create_consumer(wanted)
                        .await
                        .map_err(|e| SetupError::Api {
                            call: "consumer update",
                            reason: e.to_string(),
                        })?;
                    Ensured::Updated
                }
            }
            Err(_) => {
                stream
                    .create_consumer(self.wanted_consumer())
                    .await
                    .map_err(|e| SetupError::Api {
                        call: "consumer create",
                        reason: e.to_string(),
                    })?;
                Ensured::Created
            }
        };
        Ok((stream_done, consumer_done))
    }

    /// Refuses a stream or consumer that is missing or would break D15/D16/D26: no stream, the
    /// subject not among its subjects, memory storage, other replicas than configured, no
    /// durable pull consumer with explicit acknowledgements, a consumer that stops delivering a
    /// message after some deliveries (`max_deliver` other than unlimited).
    pub async fn check(&self) -> Result<(), SetupError> {
        let c = &self.config;
        let mut stream = match self.js.get_stream(&c.stream).await {
            Ok(stream) => stream,
            Err(e) if stream_missing(&e) => {
                return Err(SetupError::Missing(format!("stream {}", c.stream)))
            }
            Err(e) => {
                return Err(SetupError::Api {
                    call: "stream lookup",
                    reason: e.to_string(),
                })
            }
        };
        let info = stream.info().await.map_err(|e| SetupError::Api {
            call: "stream info",
            reason: e.to_string(),
        })?;
        let have = &info.config;
        if !have.subjects.iter().any(|s| s == &c.subject) {
            return Err(SetupError::Misconfigured(format!(
                "stream {} does not take subject `{}` (events.jetstream.subject); its subjects are {:?}: run `flowgate migrate`",
                c.stream, c.subject, have.subjects
            )));
        }
        if have.storage != StorageType::File {
            return Err(SetupError::Misconfigured(format!(
                "stream {} keeps messages in memory: a restart of NATS would lose acknowledged events",
                c.stream
            )));
        }
        if have.num_replicas != c.replicas {
            return Err(SetupError::Misconfigured(format!(
                "stream {} has {} replica(s), events.jetstream.replicas is {}: run `flowgate migrate`",
                c.stream, have.num_replicas, c.replicas
            )));
        }
        match stream.consumer_info(&c.consumer).await {
            Ok(info) => {
                if info.config.ack_policy != AckPolicy::Explicit
                    || info.config.deliver_subject.is_some()
                {
                    return Err(SetupError::Misconfigured(format!(
                        "consumer {} of stream {} is not a pull consumer with explicit acknowledgements: delete it and run `flowgate migrate`",
                        c.consumer, c.stream
                    )));
                }
                if info.config.max_deliver != -1 {
                    return Err(SetupError::Misconfigured(format!(
                        "consumer {} of stream {} stops delivering a message after {} deliveries: a message this release cannot read yet (a later release's) would never be delivered again; run `flowgate migrate`",
                        c.consumer, c.stream, info.config.max_deliver
                    )));
                }
                Ok(())
            }
            Err(e) if e.to_string().contains("not found") => Err(SetupError::Missing(format!(
                "consumer {} of stream {}",
                c.consumer, c.stream
            ))),
            Err(e) => Err(SetupError::Api {
                call: "consumer lookup",
                reason: e.to_string(),
            }),
        }
    }

    /// The ingest consumer (durable, created by [`Bus::ensure`]).
    pub(crate) async fn consumer(
        &self,
    ) -> Result<jetstream::consumer::Consumer<pull::Config>, SetupError> {
        let stream =
            self.js
                .get_stream(&self.config.stream)
                .await
                .map_err(|e| SetupError::Api {
                    call: "stream lookup",
                    reason: e.to_string(),
                })?;
        stream
            .get_consumer(&self.config.consumer)
            .await
            .map_err(|e| SetupError::Api {
                call: "consumer lookup",
                reason: e.to_string(),
            })
    }

    /// Messages the ingest consumer has not had delivered yet, and delivered but not yet
    /// acknowledged: the consumer's lag.
    pub async fn lag(&self) -> Result<Lag, SetupError> {
        let stream = self
            .js
            .get_stream_no_info(&self.config.stream)
            .await
            .map_err(|e| SetupError::Api {
                call: "stream lookup",
                reason: e.to_string(),
            })?;
        let info = stream
            .consumer_info(&self.config.consumer)
            .await
            .map_err(|e| SetupError::Api {
                call: "consumer info",
                reason: e.to_string(),
            })?;
        Ok(Lag {
            pending: info.num_pending,
            unacknowledged: info.num_ack_pending as u64,
            redelivered: info.num_redelivered as u64,
        })
    }
}

/// The ingest consumer's backlog ([`Bus::lag`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lag {
    /// Messages not delivered yet.
    pub pending: u64,
    /// Messages delivered and not acknowledged yet.
    pub unacknowledged: u64,
    /// Messages delivered more than once and not acknowledged yet.
    pub redelivered: u64,
}

fn stream_missing(error: &jetstream::context::GetStreamError) -> bool {
    match error.kind() {
        jetstream::context::GetStreamErrorKind::JetStream(e) => {
            is_code(&e, ErrorCode::STREAM_NOT_FOUND)
        }
        _ => false,
    }
}
